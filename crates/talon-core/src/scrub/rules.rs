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
//! Vendor formats added after an outside review (issue 21): Discord bot tokens (three dotted
//! parts whose first decodes to a user id, found beside `token`, `discord` or `Authorization`,
//! and since issue 35 bare when the id starts with 1, as every bot's since mid-2022 does: the
//! first three characters are then `MT` and the second digit's) and webhook URLs (the id is kept), Entra ID client secrets
//! (`…8Q~…`), Azure SAS `sig=` among other SAS fields, Vault `hvs.`/`hvb.`/`hvr.`, Google
//! `GOCSPX-` and `ya29.`, Atlassian `ATATT3`, Databricks `dapi`, Okta `SSWS 00…`, Linear,
//! Notion, PlanetScale, Supabase, Replicate `r8_`, Perplexity `pplx-`, xAI `xai-`, Mapbox
//! `sk.eyJ…`, a 40-character AWS secret key within 512 bytes (across lines) of its key id,
//! and `Cookie:` / `Set-Cookie:` values holding a value of eight or more characters. After the
//! third review (issue 35): Okta API tokens without `SSWS` (`00` and 40 random characters, beside
//! `okta` or `token`), Square (`EAAA…`, `sq0atp-`, `sq0csp-`) and Doppler (`dp.st.…`, `dp.pt.…`).
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

use super::checks::{self, *};

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
/// Every keyword must be at least three bytes long, and the prefilter's automata stay few and
/// within the SIMD (Teddy) searcher's limits, which is where the scrubber's speed on clean text
/// comes from (a test guards it; see `super::prefilter_groups`). So a few rare formats have no
/// prefix keyword of their own and are found next to a name:
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

/// The prefixes of AWS access key ids. Their search window spans lines, so a secret access key
/// printed on the line after its key id is found with it.
pub(crate) const AWS_KEY_ID_KEYWORDS: &[&str] = &["AKIA", "ASIA"];

/// Keywords that are words of ordinary text and code (secret names, header names), as opposed
/// to vendor prefixes, which almost never occur in clean text. The prefilter searches the two
/// kinds with separate automata (see `super::Scrubber::new`).
pub(crate) fn is_context_keyword(keyword: &str) -> bool {
    NAMES.contains(&keyword)
        || [
            "SECRET",
            "TOKEN",
            "PASSW",
            "CREDENTIAL",
            "PRIVATE",
            "DSN",
            "DATABASE_URL",
            "REDIS_URL",
            "MONGO_URI",
            "VIRTUAL_",
            "iscord",
            "ISCORD",
            "ookie",
            "OOKIE",
        ]
        .contains(&keyword)
}

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
    rule(
        "discord_webhook",
        r"\b(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/(?:v[0-9]+/)?webhooks/[0-9]{17,20}/(?P<secret>[A-Za-z0-9_\-]{30,})",
        &["/webhooks/"],
    ),
    Rule {
        id: "discord_bot",
        pattern: r"[MNO][A-Za-z0-9_\-]{22,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}",
        // Beside its words, or bare (issue 35): a bot's id starting with 1 (every bot made since
        // mid-2022 has a 19-digit one) begins its token with one of these ten.
        keywords: &[
            "iscord",
            "ISCORD",
            "token",
            "Token",
            "TOKEN",
            "uthorization",
            "AUTH",
            "MTA",
            "MTE",
            "MTI",
            "MTM",
            "MTQ",
            "MTU",
            "MTY",
            "MTc",
            "MTg",
            "MTk",
        ],
        accept: Some(checks::accept_discord_bot),
        precheck: None,
    },
    Rule {
        id: "azure_client_secret",
        pattern: r"[A-Za-z0-9_~.\-]{3}[0-9]Q~[A-Za-z0-9_~.\-]{31,34}",
        keywords: &["7Q~", "8Q~"],
        accept: Some(checks::accept_azure_client_secret),
        precheck: None,
    },
    Rule {
        id: "azure_sas_signature",
        pattern: r"(?:[?&;\s\x22']|^)sig=(?P<secret>[A-Za-z0-9%+/=_\-]{20,})",
        keywords: &["sig="],
        accept: Some(checks::accept_azure_sas),
        precheck: None,
    },
    rule(
        "hashicorp_vault",
        r"\bhv[sbr]\.[A-Za-z0-9_\-]{20,}",
        &["hvs.", "hvb.", "hvr."],
    ),
    rule(
        "google_oauth_client_secret",
        r"\bGOCSPX-[A-Za-z0-9_\-]{24,}",
        &["GOCSPX-"],
    ),
    rule(
        "google_oauth_access_token",
        r"\bya29\.[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]+)*",
        &["ya29."],
    ),
    rule(
        "atlassian_api_token",
        r"\bATATT3[A-Za-z0-9_\-=]{40,}",
        &["ATATT3"],
    ),
    rule("databricks", r"\bdapi[a-f0-9]{32}(?:-[0-9]+)?\b", &["dapi"]),
    rule(
        "okta_ssws",
        r"\bSSWS\s+(?P<secret>00[A-Za-z0-9_\-]{40})",
        &["SSWS"],
    ),
    Rule {
        id: "okta_api_token",
        pattern: r"\b00[A-Za-z0-9_\-]{40}\b",
        keywords: &["okta", "Okta", "OKTA", "token", "Token", "TOKEN"],
        accept: Some(checks::accept_okta),
        precheck: None,
    },
    rule(
        "square",
        r"\b(?:EAAA[A-Za-z0-9_\-+=]{40,}|sq0atp-[A-Za-z0-9_\-]{22,}|sq0csp-[A-Za-z0-9_\-]{40,})",
        &["EAAA", "sq0atp-", "sq0csp-"],
    ),
    rule(
        "doppler",
        r"\bdp\.(?:st|pt|ct|sa|scim|audit)\.(?:[A-Za-z0-9_\-]{1,35}\.)?[A-Za-z0-9]{40,44}\b",
        &[
            "dp.st.",
            "dp.pt.",
            "dp.ct.",
            "dp.sa.",
            "dp.scim.",
            "dp.audit.",
        ],
    ),
    rule(
        "linear",
        r"\blin_(?:api_[A-Za-z0-9]{40}|oauth_[a-f0-9]{64})\b",
        &["lin_api_", "lin_oauth_"],
    ),
    Rule {
        id: "notion",
        pattern: r"\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,60})\b",
        keywords: &["secret", "ntn_"],
        accept: Some(checks::accept_random),
        precheck: Some(has_notion),
    },
    rule(
        "planetscale",
        r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.=]{32,64}",
        &["pscale_"],
    ),
    Rule {
        id: "supabase",
        pattern: r"\b(?:sbp_[a-f0-9]{40}\b|sb_secret_[A-Za-z0-9_\-]{20,})",
        keywords: &["sbp_", "secret"],
        accept: None,
        precheck: Some(has_supabase),
    },
    rule("replicate", r"\br8_[A-Za-z0-9]{37}\b", &["r8_"]),
    rule("perplexity", r"\bpplx-[A-Za-z0-9]{32,}", &["pplx-"]),
    rule("xai", r"\bxai-[A-Za-z0-9]{40,}", &["xai-"]),
    rule(
        "mapbox_secret",
        r"\b[st]k\.eyJ[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{20,}",
        &["eyJ"],
    ),
    Rule {
        id: "aws_secret_access_key",
        pattern: r"[A-Za-z0-9/+]{40}",
        keywords: AWS_KEY_ID_KEYWORDS,
        accept: Some(checks::accept_aws_secret),
        precheck: Some(checks::has_aws_key_prefix),
    },
    Rule {
        id: "cookie_header",
        pattern: r#"(?i)\b(?:set-)?cookie["']?[ \t]*:[ \t]*["']?(?P<secret>[^=\s'"`;,]+=[^\r\n'"`]*[^\s'"`])"#,
        keywords: &["ookie", "OOKIE"],
        accept: Some(checks::accept_cookie),
        precheck: Some(checks::has_cookie_assignment),
    },
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
