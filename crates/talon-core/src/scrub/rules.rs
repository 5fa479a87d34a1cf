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
//!
//! Telegram bot tokens (`<bot id>:<secret>`) redact only the secret after the colon
//! (`123456789:[REDACTED]`), as the URL-password and key=value rules keep the non-secret part: the
//! bot id is the bot's public user id. A bare token (`telegram_bot`, keyword `:AA`) needs an 8–10
//! digit id at a word boundary or right after `bot` (the `…/bot<token>/getMe` path of any Bot API
//! server, local ones included), then exactly 35 characters of `[A-Za-z0-9_-]` starting with `AA`
//! (as current tokens do) and not followed by another such character. So times (`12:34:56`),
//! host:port, ratios (`1234567890:1`), MAC addresses (`00:AA:…`) and `1234567890:AAbc` pass.
//! Inside `api.telegram.org/bot<token>/…` and `api.telegram.org/file/bot<token>/…` URLs
//! (`telegram_bot_url`, keyword `telegram.org`) the secret is redacted whatever its length or
//! prefix (older tokens, the Bot API docs' `123456:ABC-DEF…`): there the position alone says it is
//! a token.

use std::ops::Range;

/// Decides whether a regex match is really a secret. Gets the window the match is in, the
/// match's range within it, and the range of the `secret` group if the rule has one.
pub(crate) type Accept = fn(window: &[u8], whole: Range<usize>, secret: Range<usize>) -> bool;

/// A cheap test on the whole window that must pass before the rule's regex runs.
pub(crate) type Precheck = fn(window: &[u8]) -> bool;

/// One credential format.
pub(crate) struct Rule {
    /// Stable identifier, used in docs and tests.
    pub id: &'static str,
    /// The pattern; if it has a group named `secret`, only that group is replaced.
    pub pattern: &'static str,
    /// Literal strings at or near every match; a hit opens a search window for this rule.
    pub keywords: &'static [&'static str],
    /// Post-match filter for rules whose regex alone would over-match.
    pub accept: Option<Accept>,
    /// Skips the regex when the window cannot hold a match.
    pub precheck: Option<Precheck>,
}

/// Words that introduce a secret (`api_key=`, `Authorization:`, `DB_PASSWORD=`, …), with their
/// case variants listed explicitly so the prefilter stays case-sensitive. Rules that look for a
/// secret next to a name use these.
///
/// All keywords together (these, the vendor prefixes and [`PEM_KEYWORD`]) must stay at 64 or
/// fewer, each at least three bytes long: that lets the Aho-Corasick prefilter use its SIMD
/// (Teddy) searcher, which is where the scrubber's speed on clean text comes from (a test guards
/// it). So a few rare formats have no prefix keyword of their own and are found next to a name:
/// Twilio `SK…` SIDs, AWS `ABIA`/`ACCA` ids, the rarer GitLab and Shopify prefixes, and
/// `AGE-SECRET-KEY-1…` (which contains `KEY`).
const NAMES: &[&str] = &[
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
    "uthorization",
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
];

/// The keyword that opens a private-key block; its search window spans lines.
pub(crate) const PEM_KEYWORD: &str = "-----BEGIN";

pub(crate) const RULES: &[Rule] = &[
    rule(
        "openai",
        r"\bsk-(?:proj-|svcacct-|admin-|or-v1-)?[A-Za-z0-9_\-]{20,}",
        &["sk-"],
    ),
    rule("anthropic", r"\bsk-ant-[A-Za-z0-9_\-]{20,}", &["sk-"]),
    rule(
        "github_token",
        r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
        &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"],
    ),
    rule(
        "github_fine_grained",
        r"\bgithub_pat_[A-Za-z0-9_]{22,255}",
        &["github_pat_"],
    ),
    rule(
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b",
        &["AKIA", "ASIA", "KEY", "Key", "key"],
    )
    .checked(has_aws_prefix),
    rule(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{10,}",
        &["eyJ"],
    ),
    rule(
        "slack_token",
        r"\bxox[abposrce]-[A-Za-z0-9\-]{10,}",
        &["xox"],
    ),
    rule(
        "slack_app_token",
        r"\bxapp-[0-9]-[A-Z0-9]+-[0-9]+-[A-Za-z0-9]+",
        &["xapp-"],
    ),
    rule(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,}",
        &["hooks.slack.com"],
    ),
    rule("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}", &["AIza"]),
    rule(
        "stripe",
        r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        &["k_live", "k_test"],
    ),
    rule(
        "stripe_webhook_secret",
        r"\bwhsec_[0-9A-Za-z]{24,}",
        &["whsec_"],
    ),
    rule(
        "private_key_block",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:(?s:.)*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:\-,.]*)",
        &[PEM_KEYWORD],
    ),
    rule(
        "bearer",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
        &["bearer", "Bearer", "BEARER"],
    ),
    rule(
        "basic_auth",
        r#"(?i)authorization["']?\s*[:=]\s*["']?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})"#,
        &["uthorization", "AUTH"],
    )
    .checked(has_basic),
    rule(
        "huggingface",
        r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}",
        &["hf_", "api_org_"],
    ),
    rule(
        "gitlab",
        r"\bgl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent)-[A-Za-z0-9_\-]{20,}",
        &["glpat-", "gldt-", "glrt-", "token", "Token", "TOKEN"],
    )
    .checked(has_gl),
    rule("npm", r"\bnpm_[A-Za-z0-9]{36}\b", &["npm_"]),
    rule(
        "telegram_bot",
        r"\b(?:bot)?[0-9]{8,10}:(?P<secret>AA[0-9A-Za-z_\-]{33})(?:[^0-9A-Za-z_\-]|$)",
        &[":AA"],
    ),
    rule(
        "telegram_bot_url",
        r"api\.telegram\.org/(?:file/)?bot[0-9]+:(?P<secret>[0-9A-Za-z_\-]+)",
        &["telegram.org"],
    ),
    rule(
        "sendgrid",
        r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b",
        &["SG."],
    ),
    rule(
        "twilio_api_key",
        r"\bSK[0-9a-fA-F]{32}\b",
        &["KEY", "Key", "key", "secret", "SECRET"],
    )
    .checked(has_sk),
    rule("digitalocean", r"\bdo[pro]_v1_[a-f0-9]{64}\b", &["_v1_"]),
    rule(
        "shopify",
        r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
        &["shpat_", "token", "Token", "TOKEN", "secret", "SECRET"],
    )
    .checked(has_shp),
    rule("groq", r"\bgsk_[A-Za-z0-9]{48,}", &["gsk_"]),
    rule(
        "pypi",
        r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}",
        &["pypi-AgEI"],
    ),
    rule(
        "age_secret_key",
        r"\bAGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}\b",
        &["KEY"],
    )
    .checked(has_age),
    rule("mailgun", r"\bkey-[0-9a-f]{32}\b", &["key"]).checked(has_key_dash),
    Rule {
        id: "url_password",
        pattern: r#"(?i)\b[a-z][a-z0-9+.\-]{1,20}://[^\s:/@"'<>]*:(?P<secret>[^\s@/"'<>]+)@"#,
        keywords: &["://"],
        accept: None,
        precheck: Some(has_at_sign),
    },
    Rule {
        id: "key_value",
        pattern: r#"(?i)(?P<name>api[_\-]?key|access[_\-]?key|secret[_\-]?key|account[_\-]?key|access[_\-]?token|auth[_\-]?token|refresh[_\-]?token|client[_\-]?secret|private[_\-]?key|token|secret|password|passwd|pwd|authorization|credentials?)["']?\s*[:=]\s*["']?(?P<secret>[^\s"'`,;(){}<>\[\]:=][^\s"'`,;(){}<>\[\]]{7,})"#,
        keywords: NAMES,
        accept: Some(accept_key_value),
        precheck: Some(has_assignment),
    },
    Rule {
        id: "env_assignment",
        pattern: r#"\b(?P<name>[A-Z][A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE|DSN|DATABASE_URL|REDIS_URL|MONGO_URI|AUTH)[A-Z0-9_]*)\s*=\s*["']?(?P<secret>[^\s"'\[]{8,})"#,
        keywords: &[
            "KEY",
            "SECRET",
            "TOKEN",
            "PASSW",
            "CREDENTIAL",
            "PRIVATE",
            "AUTH",
            "DSN",
            "DATABASE_URL",
            "REDIS_URL",
            "MONGO_URI",
        ],
        accept: Some(accept_assignment),
        precheck: Some(has_equals),
    },
    Rule {
        id: "virtual_env_assignment",
        pattern: r#"\b(?P<name>VIRTUAL_[A-Z0-9_]+)\s*=\s*["']?(?P<secret>[^\s"'\[]{4,})"#,
        keywords: &["VIRTUAL_"],
        accept: Some(accept_virtual),
        precheck: Some(has_equals),
    },
    Rule {
        id: "hex_secret",
        pattern: r"\b[0-9a-fA-F]{32,}\b",
        keywords: NAMES,
        accept: Some(accept_hex),
        precheck: Some(has_long_hex_run),
    },
];

impl Rule {
    /// Adds a precheck.
    const fn checked(self, precheck: Precheck) -> Rule {
        Rule {
            precheck: Some(precheck),
            ..self
        }
    }
}

const fn rule(id: &'static str, pattern: &'static str, keywords: &'static [&'static str]) -> Rule {
    Rule {
        id,
        pattern,
        keywords,
        accept: None,
        precheck: None,
    }
}

/// Every distinct keyword, in first-use order.
pub(crate) fn keywords() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for kw in RULES.iter().flat_map(|r| r.keywords.iter().copied()) {
        if !out.contains(&kw) {
            out.push(kw);
        }
    }
    out
}

fn has(window: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(window, needle).is_some()
}

fn has_aws_prefix(window: &[u8]) -> bool {
    [&b"AKIA"[..], b"ASIA", b"ABIA", b"ACCA", b"A3T"]
        .iter()
        .any(|n| has(window, n))
}

fn has_sk(window: &[u8]) -> bool {
    has(window, b"SK")
}

fn has_key_dash(window: &[u8]) -> bool {
    has(window, b"key-")
}

fn has_gl(window: &[u8]) -> bool {
    has(window, b"gl")
}

fn has_shp(window: &[u8]) -> bool {
    has(window, b"shp")
}

fn has_age(window: &[u8]) -> bool {
    has(window, b"AGE-SECRET-KEY-1")
}

fn has_basic(window: &[u8]) -> bool {
    has(window, b"asic") || has(window, b"ASIC")
}

fn has_at_sign(window: &[u8]) -> bool {
    memchr::memchr(b'@', window).is_some()
}

fn has_equals(window: &[u8]) -> bool {
    memchr::memchr(b'=', window).is_some()
}

fn has_assignment(window: &[u8]) -> bool {
    memchr::memchr2(b'=', b':', window).is_some()
}

fn has_long_hex_run(window: &[u8]) -> bool {
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
    matches!(value.first(), Some(b'$' | b'%' | b'<' | b'&' | b'*')) || value.starts_with(b"{{")
}

fn looks_like_code(window: &[u8], secret: &Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let next = window.get(secret.end).copied();
    next == Some(b'(')
        || value.windows(2).any(|w| w == b"::" || w == b"->")
        || is_member_path(value)
        || is_reference(value)
        || is_literal_word(value)
}

/// `true`, `false`, `null`, `None`, … (possibly followed by more text): a value, not a secret.
fn is_literal_word(value: &[u8]) -> bool {
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
fn is_type_annotation(window: &[u8], secret: &Range<usize>) -> bool {
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

fn accept_key_value(window: &[u8], whole: Range<usize>, secret: Range<usize>) -> bool {
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

fn accept_assignment(window: &[u8], _whole: Range<usize>, secret: Range<usize>) -> bool {
    let value = &window[secret.clone()];
    let negative_number = value.first() == Some(&b'-') && value[1..].iter().all(u8::is_ascii_digit);
    !negative_number && !looks_like_code(window, &secret)
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
    b"blob",
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
