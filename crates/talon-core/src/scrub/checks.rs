//! The rules' prechecks (cheap tests on a window before a regex runs) and post-match checks.
//!
//! Post-match checks are where the false-positive policy of [`super::rules`] lives: they look at
//! what a credential really is (a Discord token's first part is a user id in base64, an AWS
//! secret key travels with its key id, an Azure SAS signature sits among the other SAS fields, a
//! key=value "secret" that is a call or a member path is code), so ordinary text of the same
//! shape passes.

use std::ops::Range;

/// Bytes that may continue a base64 / base64url token.
fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+' | b'/' | b'=')
}

/// The bounds of the line of `window` that holds `whole` (without its newlines).
fn line_around(window: &[u8], whole: &Range<usize>) -> (usize, usize) {
    let start = window[..whole.start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let end = window[whole.end..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(window.len(), |p| whole.end + p);
    (start, end)
}

fn base64_value(b: u8) -> Option<u32> {
    Some(match b {
        b'A'..=b'Z' => u32::from(b - b'A'),
        b'a'..=b'z' => u32::from(b - b'a') + 26,
        b'0'..=b'9' => u32::from(b - b'0') + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    })
}

/// Decodes unpadded base64 or base64url; `None` on a byte outside both alphabets.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in text {
        acc = (acc << 6) | base64_value(b)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

/// A Discord bot token is `base64(user id).timestamp.hmac`; the user id is a snowflake of 17 to
/// 20 decimal digits. Three dotted base64 parts are common (JWT-like data, hashes); three whose
/// first part decodes to a snowflake are a token.
pub(crate) fn accept_discord_bot(
    window: &[u8],
    _whole: Range<usize>,
    secret: Range<usize>,
) -> bool {
    let alone = (secret.start == 0
        || !is_token_char(window[secret.start - 1]) && window[secret.start - 1] != b'.')
        && window.get(secret.end).is_none_or(|b| !is_token_char(*b));
    if !alone {
        return false;
    }
    let token = &window[secret];
    let Some(first) = token.split(|&b| b == b'.').next() else {
        return false;
    };
    decode_base64(first).is_some_and(|id| {
        (17..=20).contains(&id.len()) && id.iter().all(u8::is_ascii_digit) && id[0] != b'0'
    })
}

/// An AWS access key id (`AKIA…`, `ASIA…`: four letters and sixteen upper-case alphanumerics)
/// somewhere in the window.
fn has_aws_key_id(window: &[u8]) -> bool {
    window.windows(20).enumerate().any(|(i, w)| {
        (w.starts_with(b"AKIA") || w.starts_with(b"ASIA"))
            && w[4..]
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
            && (i == 0 || !window[i - 1].is_ascii_alphanumeric())
            && window
                .get(i + 20)
                .is_none_or(|b| !b.is_ascii_alphanumeric())
    })
}

/// A bare AWS secret access key: 40 characters of base64 with upper case, lower case and a
/// digit (so not a hex commit id), few slashes (so not a path), standing alone, and redacted only
/// with its key id in the same window: a 40-character base64 run alone is too common to be a
/// secret on its shape (the key=value rules find it under its own name).
pub(crate) fn accept_aws_secret(window: &[u8], _whole: Range<usize>, secret: Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let before_ok = secret.start == 0 || !is_token_char(window[secret.start - 1]);
    let after_ok = window.get(secret.end).is_none_or(|b| !is_token_char(*b));
    before_ok
        && after_ok
        && value.iter().any(u8::is_ascii_uppercase)
        && value.iter().any(u8::is_ascii_lowercase)
        && value.iter().any(u8::is_ascii_digit)
        && value.iter().filter(|b| **b == b'/').count() <= 4
        && !value.windows(2).any(|w| w == b"//")
        && has_aws_key_id(window)
}

/// Precheck for [`accept_aws_secret`]'s rule.
pub(crate) fn has_aws_key_prefix(window: &[u8]) -> bool {
    memchr::memmem::find(window, b"AKIA").is_some()
        || memchr::memmem::find(window, b"ASIA").is_some()
}

/// An Azure shared access signature: `sig=` among the other SAS fields (`sv=` storage version,
/// `se=` expiry, `sr=` resource, `skn=` key name), not any query parameter called `sig`.
pub(crate) fn accept_azure_sas(window: &[u8], whole: Range<usize>, _secret: Range<usize>) -> bool {
    let (line_start, line_end) = line_around(window, &whole);
    let line = &window[line_start..line_end];
    [
        &b"sv="[..],
        b"se=",
        b"sr=",
        b"skn=",
        b"SharedAccessSignature",
    ]
    .iter()
    .any(|field| memchr::memmem::find(line, field).is_some())
}

/// An Entra ID (Azure AD) client secret: 40 characters with `Q~` after a version digit at the
/// fourth place, standing alone (not the middle of a longer run).
pub(crate) fn accept_azure_client_secret(
    window: &[u8],
    _whole: Range<usize>,
    secret: Range<usize>,
) -> bool {
    let in_secret = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'~' | b'.' | b'-');
    // A full stop after the secret ends a sentence.
    let end = match window.get(secret.end) {
        Some(b'.') => secret.end + 1,
        _ => secret.end,
    };
    (secret.start == 0 || !in_secret(window[secret.start - 1]))
        && window.get(end).is_none_or(|b| !in_secret(*b))
}

/// A cookie header holding at least one value long enough to be a session id
/// (`Cookie: session=…`), not a preference such as `theme=dark`.
pub(crate) fn accept_cookie(window: &[u8], _whole: Range<usize>, secret: Range<usize>) -> bool {
    window[secret].split(|&b| b == b';').any(|pair| {
        pair.iter()
            .position(|&b| b == b'=')
            .is_some_and(|eq| pair[eq + 1..].trim_ascii().len() >= 8)
    })
}

/// A cookie header's value carries session credentials; prose that says "cookie:" does not
/// hold `name=value` pairs.
pub(crate) fn has_cookie_assignment(window: &[u8]) -> bool {
    memchr::memchr(b'=', window).is_some() && memchr::memchr(b':', window).is_some()
}

/// Vendor tokens are random: a candidate without a digit is an identifier (`secret_…` names in
/// code), not a token.
pub(crate) fn accept_random(window: &[u8], _whole: Range<usize>, secret: Range<usize>) -> bool {
    window[secret].iter().any(u8::is_ascii_digit)
}

/// An Okta API token: `00` and 40 characters standing alone that mix upper case, lower case and
/// digits (a hex digest or a zero-padded number does not).
pub(crate) fn accept_okta(window: &[u8], whole: Range<usize>, _secret: Range<usize>) -> bool {
    let token = &window[whole.clone()];
    let alone = (whole.start == 0 || !is_token_char(window[whole.start - 1]))
        && window.get(whole.end).is_none_or(|b| !is_token_char(*b));
    alone
        && token[2..].iter().any(u8::is_ascii_uppercase)
        && token[2..].iter().any(u8::is_ascii_lowercase)
        && token[2..].iter().any(u8::is_ascii_digit)
}

// The checks of the original rules.

pub(crate) fn has(window: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(window, needle).is_some()
}

pub(crate) fn has_aws_prefix(window: &[u8]) -> bool {
    [&b"AKIA"[..], b"ASIA", b"ABIA", b"ACCA", b"A3T"]
        .iter()
        .any(|n| has(window, n))
}

pub(crate) fn has_sk(window: &[u8]) -> bool {
    has(window, b"SK")
}

pub(crate) fn has_key_dash(window: &[u8]) -> bool {
    has(window, b"key-")
}

pub(crate) fn has_gl(window: &[u8]) -> bool {
    has(window, b"gl")
}

pub(crate) fn has_shp(window: &[u8]) -> bool {
    has(window, b"shp")
}

pub(crate) fn has_age(window: &[u8]) -> bool {
    has(window, b"AGE-SECRET-KEY-1")
}

pub(crate) fn has_notion(window: &[u8]) -> bool {
    has(window, b"secret_") || has(window, b"ntn_")
}

pub(crate) fn has_supabase(window: &[u8]) -> bool {
    has(window, b"sbp_") || has(window, b"sb_secret_")
}

pub(crate) fn has_basic(window: &[u8]) -> bool {
    has(window, b"asic") || has(window, b"ASIC")
}

pub(crate) fn has_at_sign(window: &[u8]) -> bool {
    memchr::memchr(b'@', window).is_some()
}

pub(crate) fn has_equals(window: &[u8]) -> bool {
    memchr::memchr(b'=', window).is_some()
}

pub(crate) fn has_assignment(window: &[u8]) -> bool {
    memchr::memchr2(b'=', b':', window).is_some()
}

pub(crate) fn has_long_hex_run(window: &[u8]) -> bool {
    let mut run = 0;
    for &b in window {
        if b.is_ascii_hexdigit() {
            run += 1;
            if run >= 32 {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

pub(crate) fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// `a.b.c` where every part is an identifier: a member path in code, not a secret.
pub(crate) fn is_member_path(value: &[u8]) -> bool {
    let mut parts = value.split(|&b| b == b'.');
    let all_idents = parts
        .all(|p| !p.is_empty() && !p[0].is_ascii_digit() && p.iter().all(|&b| is_ident_byte(b)));
    all_idents && value.contains(&b'.')
}

/// `$X`, `${X}`, `%X%`, `{{x}}`: a reference to a secret, not the secret.
pub(crate) fn is_reference(value: &[u8]) -> bool {
    matches!(value.first(), Some(b'$' | b'%' | b'<' | b'&' | b'*')) || value.starts_with(b"{{")
}

pub(crate) fn looks_like_code(window: &[u8], secret: &Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let next = window.get(secret.end).copied();
    next == Some(b'(')
        || value.windows(2).any(|w| w == b"::" || w == b"->")
        || is_member_path(value)
        || is_reference(value)
        || is_literal_word(value)
}

/// `true`, `false`, `null`, `None`, … (possibly followed by more text): a value, not a secret.
pub(crate) fn is_literal_word(value: &[u8]) -> bool {
    const WORDS: &[&[u8]] = &[b"true", b"false", b"null", b"none", b"nil", b"undefined"];
    let lower = value.to_ascii_lowercase();
    WORDS.iter().any(|w| {
        lower.starts_with(w)
            && !lower
                .get(w.len())
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    })
}

/// `name: Type;`, `name: Type = …`, `name: &Type,`: an unquoted value after a colon that is
/// followed by code punctuation is a type annotation in a declaration, not data.
pub(crate) fn is_type_annotation(window: &[u8], secret: &Range<usize>) -> bool {
    let before = &window[..secret.start];
    let separator = before.iter().rev().find(|b| !b.is_ascii_whitespace());
    if separator != Some(&b':') {
        return false;
    }
    let after = window[secret.end..]
        .iter()
        .find(|b| **b != b' ' && **b != b'\t');
    matches!(after, Some(b'=' | b';' | b',' | b')' | b'{' | b'>' | b']'))
}

pub(crate) fn accept_key_value(window: &[u8], whole: Range<usize>, secret: Range<usize>) -> bool {
    if looks_like_code(window, &secret) || is_type_annotation(window, &secret) {
        return false;
    }
    let name = window[whole.start..secret.start].to_ascii_lowercase();
    // `PWD=/home/me/project` and `OLDPWD=…` (`env`, `set` output) are the shell's working
    // directory, not a password: a `pwd` name that is a whole word, with an absolute path.
    let starts_word = whole.start == 0
        || !(window[whole.start - 1].is_ascii_alphanumeric() || window[whole.start - 1] == b'_');
    let old = whole.start >= 3 && window[whole.start - 3..whole.start].eq_ignore_ascii_case(b"old");
    if name.starts_with(b"pwd") && (starts_word || old) && window.get(secret.start) == Some(&b'/') {
        return false;
    }
    let is_password = [&b"passw"[..], b"pwd"]
        .iter()
        .any(|k| name.windows(k.len()).any(|w| w == *k));
    let value = &window[secret];
    // An identifier with no digit (`SecretString`, `tokenizer`) is a type or a variable name;
    // real tokens are random. Passwords are the exception: people choose words.
    is_password
        || !value
            .iter()
            .all(|&b| b.is_ascii_alphabetic() || b == b'_' || b == b'-')
}

pub(crate) fn accept_assignment(window: &[u8], _whole: Range<usize>, secret: Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let negative_number = value.first() == Some(&b'-') && value[1..].iter().all(u8::is_ascii_digit);
    !negative_number && !looks_like_code(window, &secret)
}

pub(crate) fn accept_virtual(
    window: &[u8],
    whole: std::ops::Range<usize>,
    secret: std::ops::Range<usize>,
) -> bool {
    // VIRTUAL_ENV and VIRTUAL_ENV_PROMPT are Python's virtualenv path and prompt, not secrets.
    let name = &window[whole.start..secret.start];
    !name.starts_with(b"VIRTUAL_ENV") && !is_reference(&window[secret])
}

const SECRET_WORDS: &[&[u8]] = &[
    b"key",
    b"secret",
    b"token",
    b"passw",
    b"private",
    b"credential",
    b"seed",
    b"salt",
    b"auth",
];
const HASH_MARKERS: &[&[u8]] = &[
    b"sha",
    b"md5",
    b"commit",
    b"checksum",
    b"digest",
    b"integrity",
    b"hash",
    b"blake",
    b"crc",
    b"etag",
    b"object",
    b"tree",
    b"blob",
    b"parent",
    b"merge",
    b"rev",
];

pub(crate) fn contains_any(haystack: &[u8], needles: &[&[u8]]) -> bool {
    needles
        .iter()
        .any(|n| haystack.windows(n.len()).any(|w| w == *n))
}

pub(crate) fn accept_hex(
    window: &[u8],
    whole: std::ops::Range<usize>,
    _secret: std::ops::Range<usize>,
) -> bool {
    let (line_start, line_end) = line_around(window, &whole);
    let before = window[line_start..whole.start].to_ascii_lowercase();
    let line = window[line_start..line_end].to_ascii_lowercase();
    contains_any(&line, SECRET_WORDS) && !contains_any(&before, HASH_MARKERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_both_alphabets() {
        assert_eq!(decode_base64(b"MTIz").as_deref(), Some(&b"123"[..]));
        assert_eq!(decode_base64(b"Pz8_").as_deref(), Some(&b"???"[..]));
        assert_eq!(decode_base64(b"a.b"), None);
    }
}
