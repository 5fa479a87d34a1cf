//! The seccomp filter of sandboxed commands.
//!
//! Namespaces and read-only binds confine what a command sees; this filter takes away the system
//! calls that could undo them or reach around them: io_uring (its operations bypass every check
//! below), ptrace and its relatives, mounts and new namespaces, kernel machinery no command
//! needs, and the socket families the network mode does not allow. A refused call fails with
//! `EPERM` (the program prints a clear "Operation not permitted") instead of being killed.
//!
//! The program is compiled with `seccompiler` (pure Rust, no libseccomp) for the architecture
//! Talon was built for, preceded by a small hand-written prelude for the two answers that are not
//! `EPERM` (see [`prelude`]), and handed to bubblewrap as raw `struct sock_filter` bytes in a
//! memfd: bwrap installs it (with `PR_SET_NO_NEW_PRIVS`) after building the namespaces and right
//! before it executes the command, so its own `clone`/`unshare`/`mount` calls are unaffected.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

use nix::fcntl::{FcntlArg, fcntl};
use nix::libc;
use nix::sys::memfd::{MFdFlags, memfd_create};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use super::SandboxError;

/// System calls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    // io_uring performs socket, open, connect… as ring operations the filter never sees.
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    // Reading, steering or robbing the other processes of the sandbox (bwrap's init among them).
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    // Undoing the read-only binds: the old and the new mount API, and joining other namespaces.
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    // Kernel attack surface no command needs.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    // The host's machinery (also refused for lack of capabilities; refused here first).
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_open_by_handle_at,
];

/// The namespace flags of `clone` and `unshare`. A new user namespace would give the command
/// every capability inside it (and with them mounts over the read-only view); none is needed.
/// `CLONE_NEWTIME` is left out for `clone`, whose low byte is the exit signal.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// The `personality` values allowed (Docker's list): Linux, 32-bit Linux, `UNAME26`, both, and
/// the query `0xffffffff`. Everything else would switch a legacy behaviour back on
/// (`READ_IMPLIES_EXEC`, `MMAP_PAGE_ZERO`, `ADDR_NO_RANDOMIZE`, …).
const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x2_0000, 0x2_0008, 0xffff_ffff];

/// `syscall` numbers with this bit set are the x32 ABI on x86_64: the same `AUDIT_ARCH` as
/// x86_64 but other numbers, so a deny list keyed on x86_64 numbers would not see them.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The most instructions the kernel accepts in one filter.
const BPF_MAXINSNS: usize = 4096;

// `struct seccomp_data` offsets and the classic BPF opcodes of the prelude.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;
const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JMP_JEQ_K: u16 = 0x05 | 0x10;
const JMP_JGE_K: u16 = 0x05 | 0x30;
const RET_K: u16 = 0x06;

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

fn arg(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn flag(value: libc::c_int) -> u64 {
    u64::from(value.unsigned_abs())
}

/// One rule per namespace flag: `arg0 & flag == flag` (rules of a system call are ORed).
fn namespace_rules(flags: &[libc::c_int]) -> Result<Vec<SeccompRule>, String> {
    flags
        .iter()
        .map(|&f| rule(vec![arg(0, SeccompCmpOp::MaskedEq(flag(f)), flag(f))?]))
        .collect()
}

/// `socket(domain, type, protocol)`: an allowlist of families.
///
/// With the network off, none: not even `AF_UNIX`, because a Unix socket bound on the host (the
/// D-Bus session bus, `docker.sock`, `/run/postgresql`) is reachable by its path from any
/// directory the sandbox can see, and reaching one is as good as reaching the network (often
/// better: a Docker socket is the host). `socketpair` stays allowed: it names nothing outside
/// the process. Abstract Unix sockets are the network namespace's (bubblewrap) or Landlock's
/// scope's business too.
///
/// With the network on, `AF_UNIX` (proxy mode's helper reaches the proxy through one; the
/// helper refuses it again to the command it starts, see `net_helper`), `AF_INET`/`AF_INET6`
/// and `NETLINK_ROUTE` (which glibc's `getaddrinfo(AI_ADDRCONFIG)` and `getifaddrs` read).
/// `AF_PACKET`, `AF_VSOCK`, other netlink protocols and every other family are refused in both
/// modes.
fn socket_rules(network: bool) -> Result<Vec<SeccompRule>, String> {
    if !network {
        // No condition: every socket() call matches.
        return Ok(Vec::new());
    }
    let unix = flag(libc::AF_UNIX);
    let netlink = flag(libc::AF_NETLINK);
    let allowed = [unix, flag(libc::AF_INET), flag(libc::AF_INET6), netlink];
    let other_family = allowed
        .iter()
        .map(|&family| arg(0, SeccompCmpOp::Ne, family))
        .collect::<Result<Vec<_>, _>>()?;
    let other_netlink = vec![
        arg(0, SeccompCmpOp::Eq, netlink)?,
        arg(2, SeccompCmpOp::Ne, flag(libc::NETLINK_ROUTE))?,
    ];
    Ok(vec![rule(other_family)?, rule(other_netlink)?])
}

/// The rules whose match answers `EPERM`.
fn rules(network: bool) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
    rules.insert(libc::SYS_clone, namespace_rules(NAMESPACE_FLAGS)?);
    let mut unshare = NAMESPACE_FLAGS.to_vec();
    unshare.push(libc::CLONE_NEWTIME);
    rules.insert(libc::SYS_unshare, namespace_rules(&unshare)?);
    let personality = PERSONALITIES
        .iter()
        .map(|&p| arg(0, SeccompCmpOp::Ne, p))
        .collect::<Result<Vec<_>, _>>()?;
    rules.insert(libc::SYS_personality, vec![rule(personality)?]);
    rules.insert(libc::SYS_socket, socket_rules(network)?);
    Ok(rules)
}

/// The `AUDIT_ARCH_*` value of `arch` (64-bit, little-endian).
fn audit_arch(arch: TargetArch) -> u32 {
    const EM_X86_64: u32 = 62;
    const EM_AARCH64: u32 = 183;
    const EM_RISCV: u32 = 243;
    const LE_64: u32 = 0x8000_0000 | 0x4000_0000;
    LE_64
        | match arch {
            TargetArch::x86_64 => EM_X86_64,
            TargetArch::aarch64 => EM_AARCH64,
            TargetArch::riscv64 => EM_RISCV,
        }
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// What runs before seccompiler's program, which answers one action (`EPERM`) for its matches:
///
/// * `clone3` gets `ENOSYS`: its flags live in memory a filter cannot read, and on `ENOSYS`
///   glibc falls back to `clone`, whose flags the main program checks.
/// * x32 system calls (numbers with [`X32_SYSCALL_BIT`]) get `ENOSYS`, as on a kernel without
///   x32; elsewhere no system call has such a number, so the check costs nothing.
///
/// A call from a foreign architecture (i386 or arm32 compatibility mode, whose numbers differ)
/// skips to the main program, whose own architecture check kills the process.
fn prelude(arch: u32) -> Result<BpfProgram, String> {
    let clone3 = u32::try_from(libc::SYS_clone3).map_err(|e| e.to_string())?;
    let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS.unsigned_abs();
    Ok(vec![
        insn(LD_W_ABS, 0, 0, ARCH_OFFSET),
        insn(JMP_JEQ_K, 0, 4, arch),
        insn(LD_W_ABS, 0, 0, NR_OFFSET),
        insn(JMP_JEQ_K, 1, 0, clone3),
        insn(JMP_JGE_K, 0, 1, X32_SYSCALL_BIT),
        insn(RET_K, 0, 0, enosys),
    ])
}

/// The whole program for this architecture and network mode.
fn compile(network: bool) -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let filter = SeccompFilter::new(
        rules(network)?,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let main: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let mut program = prelude(audit_arch(arch))?;
    program.extend(main);
    if program.len() > BPF_MAXINSNS {
        return Err(format!(
            "{} instructions (at most {BPF_MAXINSNS})",
            program.len()
        ));
    }
    Ok(program)
}

/// The compiled filter for `network` (inet sockets allowed or not), for a process that installs
/// it on itself with `seccompiler::apply_filter`: the Landlock helper, which has no bwrap to
/// hand it to.
pub fn seccomp_program(network: bool) -> Result<BpfProgram, SandboxError> {
    compile(network)
        .map_err(|e| SandboxError::Unavailable(format!("cannot build the seccomp filter: {e}")))
}

/// A filter that refuses `socket(AF_UNIX, …)` and nothing else, for proxy mode's helper to
/// stack on the command it starts: the helper needs a Unix socket to reach the proxy, the
/// command must not reach the host's (see [`socket_rules`]).
pub(crate) fn unix_socket_refusal() -> Result<BpfProgram, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())?;
    let unix = rule(vec![arg(0, SeccompCmpOp::Eq, flag(libc::AF_UNIX))?])?;
    let filter = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_socket, vec![unix])]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.unsigned_abs()),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// Installs `program` on the calling process. Async-signal-safe (two system calls, no
/// allocation), so it may run in a forked child before `exec`.
pub(crate) fn install(program: &[sock_filter]) -> std::io::Result<()> {
    let len =
        u16::try_from(program.len()).map_err(|_| std::io::Error::from_raw_os_error(libc::E2BIG))?;
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut().cast(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integers only; seccomp(2) reads `fprog` and the
    // instructions it points to, both alive for the call.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &raw const fprog,
            ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `program` as the kernel's `struct sock_filter` array, the bytes bwrap's `--seccomp` reads.
fn to_bytes(program: &[sock_filter]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in program {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

/// The compiled program for `network`, built once per process.
fn program(network: bool) -> Result<&'static [u8], SandboxError> {
    static PROGRAMS: [OnceLock<Result<Vec<u8>, String>>; 2] = [OnceLock::new(), OnceLock::new()];
    PROGRAMS[usize::from(network)]
        .get_or_init(|| compile(network).map(|p| to_bytes(&p)))
        .as_deref()
        .map_err(|e| SandboxError::Unavailable(format!("cannot build the seccomp filter: {e}")))
}

/// A fresh memfd holding the program for `network`, positioned at its start, close-on-exec (the
/// spawn clears that flag in the one child that must inherit it) and numbered above the standard
/// streams so the child's stdio set-up cannot replace it. A new one per command: bwrap reads the
/// shared file offset to the end.
pub(crate) fn filter_fd(network: bool) -> Result<OwnedFd, SandboxError> {
    let unavailable = |what: &str, e: &dyn std::fmt::Display| {
        SandboxError::Unavailable(format!(
            "cannot pass the seccomp filter to bwrap ({what}): {e}"
        ))
    };
    let program = program(network)?;
    let fd = memfd_create(c"talon-seccomp", MFdFlags::MFD_CLOEXEC)
        .map_err(|e| unavailable("memfd_create", &e))?;
    let fd = if fd.as_raw_fd() > 2 {
        fd
    } else {
        let raw = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(3)).map_err(|e| unavailable("dup", &e))?;
        // SAFETY: `raw` was just returned by F_DUPFD_CLOEXEC and is owned by nothing else.
        unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) }
    };
    let mut file = File::from(fd);
    file.write_all(program)
        .and_then(|()| file.rewind())
        .map_err(|e| unavailable("write", &e))?;
    Ok(file.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions seccompiler and the prelude emit, over a
    /// `struct seccomp_data` (little-endian).
    fn eval(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut data = Vec::with_capacity(64);
        data.extend_from_slice(&nr.to_le_bytes());
        data.extend_from_slice(&arch.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes());
        for a in args {
            data.extend_from_slice(&a.to_le_bytes());
        }
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = &program[pc];
            pc += 1;
            let jump = |cond: bool| usize::from(if cond { i.jt } else { i.jf });
            match i.code {
                0x20 => {
                    let at = i.k as usize;
                    acc = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
                }
                0x54 => acc &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(acc == i.k),
                0x25 => pc += jump(acc > i.k),
                0x35 => pc += jump(acc >= i.k),
                0x06 => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    struct Check {
        program: BpfProgram,
        arch: u32,
    }

    impl Check {
        fn new(network: bool) -> Self {
            let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
            Self {
                program: compile(network).unwrap(),
                arch: audit_arch(arch),
            }
        }

        fn call(&self, nr: libc::c_long, args: &[u64]) -> u32 {
            let mut all = [0u64; 6];
            all[..args.len()].copy_from_slice(args);
            eval(&self.program, self.arch, nr as u32, all)
        }
    }

    fn c(v: libc::c_int) -> u64 {
        flag(v)
    }

    #[test]
    fn denied_calls_get_eperm_and_ordinary_ones_pass() {
        let f = Check::new(false);
        for &nr in DENIED {
            assert_eq!(f.call(nr, &[]), EPERM, "syscall {nr}");
        }
        for nr in [
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_openat,
            libc::SYS_execve,
        ] {
            assert_eq!(f.call(nr, &[]), ALLOW, "syscall {nr}");
        }
        assert_eq!(f.call(libc::SYS_clone3, &[]), ENOSYS);
    }

    #[test]
    fn namespaces_are_refused_but_fork_and_threads_are_not() {
        let f = Check::new(false);
        let sigchld = c(libc::SIGCHLD);
        assert_eq!(f.call(libc::SYS_clone, &[sigchld]), ALLOW);
        let thread = c(libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID);
        assert_eq!(f.call(libc::SYS_clone, &[thread]), ALLOW);
        for &ns in NAMESPACE_FLAGS {
            assert_eq!(f.call(libc::SYS_clone, &[c(ns) | sigchld]), EPERM);
            assert_eq!(
                f.call(libc::SYS_unshare, &[c(ns) | c(libc::CLONE_FILES)]),
                EPERM
            );
        }
        assert_eq!(f.call(libc::SYS_unshare, &[c(libc::CLONE_NEWTIME)]), EPERM);
        assert_eq!(f.call(libc::SYS_unshare, &[c(libc::CLONE_FILES)]), ALLOW);
    }

    #[test]
    fn socket_families_follow_the_network_mode() {
        let off = Check::new(false);
        let on = Check::new(true);
        let socket = |f: &Check, family: libc::c_int, protocol: libc::c_int| {
            f.call(
                libc::SYS_socket,
                &[c(family), c(libc::SOCK_STREAM), c(protocol)],
            )
        };
        assert_eq!(socket(&off, libc::AF_UNIX, 0), EPERM);
        assert_eq!(socket(&on, libc::AF_UNIX, 0), ALLOW);
        assert_eq!(off.call(libc::SYS_socketpair, &[c(libc::AF_UNIX)]), ALLOW);
        for family in [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK] {
            assert_eq!(socket(&off, family, 0), EPERM, "family {family}");
        }
        assert_eq!(socket(&on, libc::AF_INET, 0), ALLOW);
        assert_eq!(socket(&on, libc::AF_INET6, 0), ALLOW);
        assert_eq!(socket(&on, libc::AF_NETLINK, libc::NETLINK_ROUTE), ALLOW);
        assert_eq!(socket(&on, libc::AF_NETLINK, libc::NETLINK_AUDIT), EPERM);
        for family in [libc::AF_PACKET, libc::AF_VSOCK, libc::AF_BLUETOOTH] {
            assert_eq!(socket(&off, family, 0), EPERM, "family {family}");
            assert_eq!(socket(&on, family, 0), EPERM, "family {family}");
        }
    }

    #[test]
    fn personality_only_keeps_the_harmless_values() {
        let f = Check::new(false);
        for &p in PERSONALITIES {
            assert_eq!(f.call(libc::SYS_personality, &[p]), ALLOW, "{p:#x}");
        }
        for p in [0x0040_0000u64, 0x0004_0000, 0x0010_0000, 0x0020_0000] {
            assert_eq!(f.call(libc::SYS_personality, &[p]), EPERM, "{p:#x}");
        }
    }

    #[test]
    fn x32_and_foreign_architectures_are_shut_out() {
        let f = Check::new(false);
        let getpid = libc::SYS_getpid as u32;
        assert_eq!(
            eval(&f.program, f.arch, getpid | X32_SYSCALL_BIT, [0; 6]),
            ENOSYS
        );
        // AUDIT_ARCH_I386 / AUDIT_ARCH_ARM: killed by seccompiler's architecture check.
        for foreign in [0x4000_0003u32, 0x4000_0028] {
            assert_eq!(
                eval(&f.program, foreign, getpid, [0; 6]),
                libc::SECCOMP_RET_KILL_PROCESS
            );
        }
    }

    #[test]
    fn the_program_reaches_bwrap_as_sock_filter_bytes() {
        use std::io::Read;
        let fd = filter_fd(true).unwrap();
        assert!(fd.as_raw_fd() > 2);
        let mut bytes = Vec::new();
        File::from(fd).read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes, to_bytes(&compile(true).unwrap()));
        assert_eq!(bytes.len() % 8, 0);
    }
}
