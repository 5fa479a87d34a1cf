//! The static credential rules.
//!
//! Every rule of GoClaw's list (seeds 000/002: OpenAI, Anthropic, GitHub `gh?_`, AWS, generic
//! key=value, connection strings, env-var assignments, long hex) plus the formats GoClaw misses
//! (research/goclaw.md §2.1). Patterns are ASCII byte regexes (`regex::bytes`, Unicode off) so the
//! lazy DFA handles every one of them, including `\b`.
//!
//! Deliberate differences from GoClaw, to keep false positives down:
//! * key=value and env-var rules redact the *value* and keep the name (`api_key=[REDACTED]`), and
//!   skip values that are code, not secrets: a call (`generate_token(…)`), a member path
//!   (`config.password`), a variable reference (`$TOKEN`, `${TOKEN}`, `%TOKEN%`, `{{token}}`), or —
//!   except after `password`/`passwd`/`pwd` — a plain identifier without digits (`SecretString`).
//! * URLs redact only an embedded password (`postgres://user:[REDACTED]@host/db`), for every scheme;
//!   a URL without credentials is not a secret.
//! * Long hex: a run of 32+ hex digits is redacted only when its line names a secret (key, secret,
//!   token, passw, private, credential, seed, salt, auth) and no hash marker (sha, md5, commit,
//!   checksum, digest, integrity, hash, blake, crc, etag, object, tree, parent, merge, rev) comes
//!   before it on that line. So git commit ids, UUIDs, `sha256sum` output and lockfile checksums pass
//!   through, and `SIGNING_KEY = "9f86d0…"` does not. GoClaw redacts every 64-hex string.

/// Decides whether a regex match is really a secret. Gets the line (or window) the match is in,
/// the match's range within it, and the range of the `secret` group if the rule has one.
pub(crate) type Accept =
    fn(window: &[u8], whole: std::ops::Range<usize>, secret: std::ops::Range<usize>) -> bool;

/// One credential format.
pub(crate) struct Rule {
    /// Stable identifier, used in docs and tests.
    pub id: &'static str,
    /// The pattern; if it has a group named `secret`, only that group is replaced.
    pub pattern: &'static str,
    /// Post-match filter for rules whose regex alone would over-match.
    pub accept: Option<Accept>,
}

/// Literal strings that must occur at or near every secret; the prefilter finds them, and only
/// the text around them is searched with the regexes. Case variants are listed explicitly so the
/// automaton can stay case-sensitive (and fast).
pub(crate) const KEYWORDS: &[&str] = &[
    "sk-",
    "sk_live",
    "sk_test",
    "rk_live",
    "rk_test",
    "whsec_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "A3T",
    "eyJ",
    "xox",
    "xapp-",
    "hooks.slack.com",
    "AIza",
    "hf_",
    "api_org_",
    "glpat-",
    "gldt-",
    "glrt-",
    "glptt-",
    "glcbt-",
    "gloas-",
    "glsoat-",
    "glft-",
    "glimt-",
    "glagent-",
    "npm_",
    ":AA",
    "SG.",
    "SK",
    "dop_v1_",
    "dor_v1_",
    "doo_v1_",
    "shpat_",
    "shpca_",
    "shppa_",
    "shpss_",
    "gsk_",
    "pypi-AgEI",
    "AGE-SECRET-KEY-1",
    "key-",
    "://",
    "key",
    "Key",
    "KEY",
    "token",
    "Token",
    "TOKEN",
    "secret",
    "Secret",
    "SECRET",
    "passw",
    "Passw",
    "PASSW",
    "pwd",
    "PWD",
    "auth",
    "Auth",
    "AUTH",
    "bearer",
    "Bearer",
    "BEARER",
    "credential",
    "Credential",
    "CREDENTIAL",
    "private",
    "Private",
    "PRIVATE",
    "DSN",
    "DATABASE_URL",
    "REDIS_URL",
    "MONGO_URI",
    "VIRTUAL_",
];

/// The keyword that opens a private-key block; its search window spans lines.
pub(crate) const PEM_KEYWORD: &str = "-----BEGIN";

pub(crate) const RULES: &[Rule] = &[
    Rule {
        id: "openai",
        pattern: r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}",
        accept: None,
    },
    Rule {
        id: "anthropic",
        pattern: r"\bsk-ant-[A-Za-z0-9_\-]{20,}",
        accept: None,
    },
    Rule {
        id: "github_token",
        pattern: r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
        accept: None,
    },
    Rule {
        id: "github_fine_grained",
        pattern: r"\bgithub_pat_[A-Za-z0-9_]{22,255}",
        accept: None,
    },
    Rule {
        id: "aws_access_key_id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        accept: None,
    },
    Rule {
        id: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}",
        accept: None,
    },
    Rule {
        id: "slack_token",
        pattern: r"\bxox[abposrce]-[A-Za-z0-9\-]{10,}",
        accept: None,
    },
    Rule {
        id: "slack_app_token",
        pattern: r"\bxapp-[0-9]-[A-Z0-9]+-[0-9]+-[A-Za-z0-9]+",
        accept: None,
    },
    Rule {
        id: "slack_webhook",
        pattern: r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,}",
        accept: None,
    },
    Rule {
        id: "google_api_key",
        pattern: r"\bAIza[0-9A-Za-z_\-]{35}",
        accept: None,
    },
    Rule {
        id: "stripe",
        pattern: r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        accept: None,
    },
    Rule {
        id: "stripe_webhook_secret",
        pattern: r"\bwhsec_[0-9A-Za-z]{24,}",
        accept: None,
    },
    Rule {
        id: "private_key_block",
        pattern: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.)*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:\-,.]*)",
        accept: None,
    },
    Rule {
        id: "bearer",
        pattern: r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        accept: None,
    },
    Rule {
        id: "basic_auth",
        pattern: r#"(?i)authorization["']?\s*[:=]\s*["']?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"#,
        accept: None,
    },
    Rule {
        id: "huggingface",
        pattern: r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}",
        accept: None,
    },
    Rule {
        id: "gitlab",
        pattern: r"\bgl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_\-]{20,}",
        accept: None,
    },
    Rule {
        id: "npm",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        accept: None,
    },
    Rule {
        id: "telegram_bot",
        pattern: r"\b[0-9]{8,10}:AA[0-9A-Za-z_\-]{33}\b",
        accept: None,
    },
    Rule {
        id: "sendgrid",
        pattern: r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b",
        accept: None,
    },
    Rule {
        id: "twilio_api_key",
        pattern: r"\bSK[0-9a-fA-F]{32}\b",
        accept: None,
    },
    Rule {
        id: "digitalocean",
        pattern: r"\bdo[pro]_v1_[a-f0-9]{64}\b",
        accept: None,
    },
    Rule {
        id: "shopify",
        pattern: r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        accept: None,
    },
    Rule {
        id: "groq",
        pattern: r"\bgsk_[A-Za-z0-9]{48,}",
        accept: None,
    },
    Rule {
        id: "pypi",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
        accept: None,
    },
    Rule {
        id: "age_secret_key",
        pattern: r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b",
        accept: None,
    },
    Rule {
        id: "mailgun",
        pattern: r"\bkey-[0-9a-f]{32}\b",
        accept: None,
    },
    Rule {
        id: "url_password",
        pattern: r#"(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@"'<>]*:(?P<secret>[^\s@/"'<>]+)@"#,
        accept: None,
    },
    Rule {
        id: "key_value",
        pattern: r#"(?i)(?P<name>api[_\-]?key|access[_\-]?key|secret[_\-]?key|account[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|client[_\-]?secret|private[_\-]?key|token|secret|password|passwd|pwd|authorization|credentials?)["']?\s*[:=]\s*["']?(?P<secret>[^\s"'`,;(){}<>\[\]]{8,})"#,
        accept: Some(accept_key_value),
    },
    Rule {
        id: "env_assignment",
        pattern: r#"\b(?P<name>[A-Z][A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE|DSN|DATABASE_URL|REDIS_URL|MONGO_URI|AUTH)[A-Z0-9_]*)\s*=\s*["']?(?P<secret>[^\s"'\[]{8,})"#,
        accept: Some(accept_assignment),
    },
    Rule {
        id: "virtual_env_assignment",
        pattern: r#"\b(?P<name>VIRTUAL_[A-Z0-9_]+)\s*=\s*["']?(?P<secret>[^\s"'\[]{4,})"#,
        accept: Some(accept_virtual),
    },
    Rule {
        id: "hex_secret",
        pattern: r"\b[0-9a-fA-F]{32,}\b",
        accept: Some(accept_hex),
    },
];

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// `a.b.c` where every part is an identifier: a member path in code, not a secret.
fn is_member_path(value: &[u8]) -> bool {
    let mut parts = value.split(|&b| b == b'.');
    let all_idents = parts
        .all(|p| !p.is_empty() && !p[0].is_ascii_digit() && p.iter().all(|&b| is_ident_byte(b)));
    all_idents && value.contains(&b'.')
}

/// `$X`, `${X}`, `%X%`, `{{x}}`: a reference to a secret, not the secret.
fn is_reference(value: &[u8]) -> bool {
    value.starts_with(b"$")
        || value.starts_with(b"%")
        || value.starts_with(b"{{")
        || value.starts_with(b"<")
}

fn looks_like_code(window: &[u8], secret: &std::ops::Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let next = window.get(secret.end).copied();
    next == Some(b'(')
        || value.windows(2).any(|w| w == b"::" || w == b"->")
        || is_member_path(value)
        || is_reference(value)
}

fn accept_key_value(
    window: &[u8],
    whole: std::ops::Range<usize>,
    secret: std::ops::Range<usize>,
) -> bool {
    if looks_like_code(window, &secret) {
        return false;
    }
    let name = window[whole.start..secret.start].to_ascii_lowercase();
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

fn accept_assignment(
    window: &[u8],
    _whole: std::ops::Range<usize>,
    secret: std::ops::Range<usize>,
) -> bool {
    !looks_like_code(window, &secret)
}

fn accept_virtual(
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
    b"parent",
    b"merge",
    b"rev",
];

fn contains_any(haystack: &[u8], needles: &[&[u8]]) -> bool {
    needles
        .iter()
        .any(|n| haystack.windows(n.len()).any(|w| w == *n))
}

fn accept_hex(
    window: &[u8],
    whole: std::ops::Range<usize>,
    _secret: std::ops::Range<usize>,
) -> bool {
    let line_start = window[..whole.start]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    let line_end = window[whole.end..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(window.len(), |p| whole.end + p);
    let before = window[line_start..whole.start].to_ascii_lowercase();
    let line = window[line_start..line_end].to_ascii_lowercase();
    contains_any(&line, SECRET_WORDS) && !contains_any(&before, HASH_MARKERS)
}
