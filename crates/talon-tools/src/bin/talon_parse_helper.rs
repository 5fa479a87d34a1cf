//! The parsers' helper process for `talon-tools`' own tests: what `talon __parse-untrusted` is
//! for the shipped binary (see `talon_tools::untrusted_parse`).

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    std::process::ExitCode::from(talon_tools::untrusted_parse::helper_main(&args))
}
