use super::*;

fn scrubber() -> Scrubber {
    Scrubber::new().expect("rules compile")
}

/// Every text comes back unchanged (and unallocated): no false positives.
fn assert_untouched(texts: &[&str]) {
    let s = scrubber();
    for text in texts {
        let got = s.scrub(text, &ScrubBag::default());
        assert!(
            matches!(got, Cow::Borrowed(_)),
            "false positive in {text:?}: {got:?}"
        );
    }
}

fn scrub(text: &str) -> String {
    scrubber().scrub(text, &ScrubBag::default()).into_owned()
}

/// (input, expected output) for every format; secrets are synthetic.
pub(super) const CASES: &[(&str, &str)] = &[
    ("key sk-abcdefghijklmnopqrstuvwx1234", "key [REDACTED]"),
    ("sk-proj-AbCdEfGhIjKlMnOpQrStUvWx_12-34", "[REDACTED]"),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz-0123", "[REDACTED]"),
    (
        "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 end",
        "token [REDACTED] end",
    ),
    ("gho_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
    ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "[REDACTED]",
    ),
    ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED] here"),
    ("api_key=abcdef123456", "api_key=[REDACTED]"),
    (
        "\"apiKey\": \"Zx81kf02mdls9\"",
        "\"apiKey\": \"[REDACTED]\"",
    ),
    ("password: hunter2hunter", "password: [REDACTED]"),
    ("password = correcthorse", "password = [REDACTED]"),
    (
        "Authorization: Bearer abcdefghijklmnop1234",
        "Authorization: Bearer [REDACTED]",
    ),
    (
        "curl -H 'Bearer abcdefghijklmnopqrstu.v-w_x'",
        "curl -H 'Bearer [REDACTED]'",
    ),
    (
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "Authorization: Basic [REDACTED]",
    ),
    (
        "postgres://app:s3cr3tpw@db.internal:5432/app",
        "postgres://app:[REDACTED]@db.internal:5432/app",
    ),
    (
        "redis://:hunter22@cache:6379",
        "redis://:[REDACTED]@cache:6379",
    ),
    (
        "mongodb+srv://u:p4ssw0rd@cluster0.example.net/db",
        "mongodb+srv://u:[REDACTED]@cluster0.example.net/db",
    ),
    (
        "OPENAI_API_KEY=abc123def456ghi",
        "OPENAI_API_KEY=[REDACTED]",
    ),
    (
        "export DB_PASSWORD='Sup3rS3cret!'",
        "export DB_PASSWORD='[REDACTED]'",
    ),
    (
        "MY_SERVICE_DSN=host=db.internal user=x",
        "MY_SERVICE_DSN=[REDACTED] user=x",
    ),
    ("VIRTUAL_API_PASS=abcd", "VIRTUAL_API_PASS=[REDACTED]"),
    (
        "SIGNING_KEY: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "SIGNING_KEY: [REDACTED]",
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "jwt [REDACTED]",
    ),
    (
        "slack xoxb-123456789012-1234567890123-abcdefghijkl",
        "slack [REDACTED]",
    ),
    (
        "xapp-1-A0123456789-1234567890123-abcdef0123456789",
        "[REDACTED]",
    ),
    (
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "https://[REDACTED]",
    ),
    (
        "key AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "key [REDACTED]",
    ),
    (
        "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "stripe [REDACTED]",
    ),
    ("rk_test_4eC39HqLyjWDarjtT1zdp7dc", "[REDACTED]"),
    ("whsec_abcdefghijklmnopqrstuvwxyz0123", "[REDACTED]"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "[REDACTED]"),
    ("glpat-abcdefghij1234567890", "[REDACTED]"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
    (
        "bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq ok",
        "bot 123456789:[REDACTED] ok",
    ),
    (
        "https://api.telegram.org/bot123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11/getMe",
        "https://api.telegram.org/bot123456:[REDACTED]/getMe",
    ),
    (
        "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
        "[REDACTED]",
    ),
    (
        "TWILIO_API_KEY_SID: SK0123456789abcdef0123456789abcdef",
        "TWILIO_API_KEY_SID: [REDACTED]",
    ),
    (
        "dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "[REDACTED]",
    ),
    ("shpat_0123456789abcdef0123456789abcdef", "[REDACTED]"),
    (
        "gsk_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "[REDACTED]",
    ),
    (
        "mailgun key-0123456789abcdef0123456789abcdef",
        "mailgun [REDACTED]",
    ),
    (
        "pypi-AgEIcHlwaS5vcmcCJDU1ZjI3YzQxLTk5YjEtNGRiZi1hZDM0LWY5YmI3MzA4NzgyNgACKlsz",
        "[REDACTED]",
    ),
    (
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----",
        "[REDACTED]",
    ),
    (
        "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
        "[REDACTED]",
    ),
];

#[test]
fn every_format_is_redacted() {
    let s = scrubber();
    for (input, expected) in CASES {
        let got = s.scrub(input, &ScrubBag::default());
        assert_eq!(got, *expected, "input: {input}");
    }
}

#[test]
fn private_key_blocks_span_lines() {
    let text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA1\nabcDEF+/==\n-----END RSA PRIVATE KEY-----\nafter";
    assert_eq!(scrub(text), "before\n[REDACTED]\nafter");
    let openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----";
    assert_eq!(scrub(openssh), "[REDACTED]");
    // A block cut off by output truncation is still redacted to the end of its base64 body.
    let cut = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nMIIEvQIBADAN";
    assert_eq!(scrub(cut), "[REDACTED]");
    // Public keys and certificates are not secrets.
    let public =
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOC\n-----END PUBLIC KEY-----";
    assert_eq!(scrub(public), public);
}

#[test]
fn no_false_positives_on_ordinary_output() {
    let clean = [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: A <a@example.com>",
        "Merge: 3f786850e387550fdab836ed7e6dc881de23001b 89e6c98d92887913cadf06b2adb97f26cde4849b",
        "id = 123e4567-e89b-12d3-a456-426614174000",
        "checksum = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08  target/release/talon",
        "\"integrity\": \"sha512-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "sha256 of the private key file: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "let token = generate_token(&config);",
        "password = config.password",
        "api_key: SecretString,",
        "token: Option<String>,",
        "export TOKEN=$GITHUB_TOKEN",
        "SECRET_KEY=${SECRET_KEY}",
        "VIRTUAL_ENV=/home/me/.venv",
        "The bearer token must be sent in the header.",
        "https://example.com/path?q=1",
        "postgres://localhost/app",
        "   Compiling tokio v1.54.1\n    Finished `release` profile [optimized] target(s) in 2m 52s",
        "task-runner disk-usage risk mask ASK TASK DISK",
        "Keyboard keys: key-value store, monkey, KEYBOARD_LAYOUT=us",
        "",
    ];
    assert_untouched(&clean);
}

#[test]
fn multiple_secrets_in_one_text() {
    let text = "a=sk-abcdefghijklmnopqrstuvwx1234 b=AKIAIOSFODNN7EXAMPLE c=ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    assert_eq!(scrub(text), "a=[REDACTED] b=[REDACTED] c=[REDACTED]");
}

#[test]
fn tokens_longer_than_the_window_are_redacted_whole() {
    let long = format!("token={}", "a1".repeat(2000));
    assert_eq!(scrub(&long), "token=[REDACTED]");
}

#[test]
fn secrets_in_long_lines_and_at_window_edges() {
    let mut text = "x".repeat(5000);
    text.push(' ');
    text.push_str("ghp_abcdefghijklmnopqrstuvwxyz0123456789");
    text.push(' ');
    text.push_str(&"y".repeat(5000));
    let got = scrub(&text);
    assert!(got.contains(" [REDACTED] "));
    assert!(!got.contains("ghp_"));
    // Many hits in one long line merge into one window.
    let many: String = (0..200).map(|i| format!("token={i:08}abcd ")).collect();
    assert_eq!(scrub(&many).matches("[REDACTED]").count(), 200);
}

#[test]
fn unicode_text_around_secrets() {
    let text = "clé: «sk-abcdefghijklmnopqrstuvwx1234» — ok ✓";
    assert_eq!(scrub(text), "clé: «[REDACTED]» — ok ✓");
}

#[test]
fn server_ips_respect_number_boundaries() {
    let s = scrubber();
    s.add_server_ips(["10.0.0.1", "", "10.0.0.1"]);
    let bag = ScrubBag::default();
    assert_eq!(s.scrub("host 10.0.0.1:22", &bag), "host [SERVER_IP]:22");
    assert_eq!(s.scrub("ip=10.0.0.1.", &bag), "ip=[SERVER_IP].");
    for clean in ["110.0.0.1", "10.0.0.12", "10.0.0.1.5"] {
        assert_eq!(s.scrub(clean, &bag), clean);
    }
}

#[test]
fn credential_values_and_per_request_bag() {
    let s = scrubber();
    s.add_credentials(["plainvalue-not-pattern", "short"]);
    let bag = ScrubBag::default();
    assert_eq!(
        s.scrub("x plainvalue-not-pattern y", &bag),
        "x [REDACTED] y"
    );
    assert_eq!(
        s.scrub("short stays", &bag),
        "short stays",
        "values under 6 chars are ignored"
    );

    let request = ScrubBag::default();
    request.add("tenant-one-secret");
    assert_eq!(s.scrub("v=tenant-one-secret", &request), "v=[REDACTED]");
    assert_eq!(
        s.scrub("v=tenant-one-secret", &bag),
        "v=tenant-one-secret",
        "the bag is per request"
    );

    s.reset_credentials();
    assert_eq!(
        s.scrub("x plainvalue-not-pattern y", &bag),
        "x plainvalue-not-pattern y"
    );
}

#[test]
fn every_rule_has_a_positive_case() {
    // Guards the table: a new rule must come with a case in `CASES` that it matches.
    let s = scrubber();
    for rule in &s.rules {
        assert!(
            CASES
                .iter()
                .chain(super::vendor_tests::VENDOR_CASES)
                .any(|(input, _)| rule
                    .regex()
                    .expect("rule compiles")
                    .0
                    .is_match(input.as_bytes())),
            "rule {} has no case in CASES",
            rule.id
        );
    }
    assert_eq!(rule_patterns().len(), s.rules.len());
}

#[test]
fn keyword_list_stays_within_the_simd_prefilter_limits() {
    // Each automaton is kept within the limit of every Teddy variant (48 patterns with
    // three-byte fingerprints on aarch64), its three-byte keywords apart (they would shorten
    // the fingerprints of every keyword beside them), and there are few automata: each is a
    // pass over the text.
    let keywords = rules::keywords();
    let groups = prefilter_groups(&keywords);
    assert!(groups.len() <= 4, "{} automata", groups.len());
    for group in &groups {
        assert!(group.len() <= PREFILTER_LONG_CHUNK, "{group:?}");
        let short = group.iter().filter(|&&i| keywords[i].len() < 4).count();
        // A three-byte keyword shares an automaton only with a few others: at most a
        // three-byte chunk's worth in all.
        assert!(
            short == 0 || group.len() <= PREFILTER_SHORT_CHUNK,
            "too many keywords beside a three-byte one: {group:?}"
        );
    }
    let mut covered: Vec<usize> = groups.concat();
    covered.sort_unstable();
    assert_eq!(covered, (0..keywords.len()).collect::<Vec<_>>());
    assert!(keywords.iter().all(|k| k.len() >= 3), "{keywords:?}");
    assert!(rules::RULES.len() <= 64, "rule masks are u64 bitsets");
    assert!(
        rules::RULES.iter().all(|r| !r.keywords.is_empty()),
        "every rule needs a keyword"
    );
}

#[test]
fn code_that_names_secrets_is_not_redacted() {
    // Found by running the scrubber over the crates.io sources (docs/BENCHMARKS.md corpus).
    let clean = [
        "        job_token::JobToken,",
        "    if input.peek(token::Paren) || input.peek(token::Bracket) {",
        "    pub static kCFStreamPropertySOCKSPassword: CFStringRef;",
        "pub const HKEY_LOCAL_MACHINE: HKEY = -2147483646 as _;",
        "b\"HTTP/1.1 200 OK\\r\\nAccess-Control-Allow-Credentials : true\\r\\nBread: baguette\\r\\n\"",
        "            Credentials: None\\r\\nAccess-Control-Allow-Origin: None\\r\\n\\",
        "            return Ok((initial_offset, false, MainToken::ClosingBracket));",
        "    pub fn unregister(this: &FinalizationRegistry, unregister_token: &JsValue) -> bool;",
        "pub const B_MAIL_WRONG_PASSWORD: status_t = B_MAIL_ERROR_BASE + 2;",
        "pub const IFLA_INET6_TOKEN: _bindgen_ty_7 = _bindgen_ty_7::IFLA_INET6_TOKEN;",
        "- qsv: [custom keyword](https://github.com/x/qsv/blob/6b6985065a1270f767d881b13aa2a27fae1958fb/src/validate.rs)",
    ];
    assert_untouched(&clean);
    // Data with the same names is still redacted.
    assert_eq!(scrub("password: Hunter2Hunter"), "password: [REDACTED]");
    assert_eq!(
        scrub("{\"token\": \"Abc123456789\"}"),
        "{\"token\": \"[REDACTED]\"}"
    );
}

/// Synthetic Telegram bot token secrets: 35 characters of `[A-Za-z0-9_-]` starting with `AA`.
const TG_A: &str = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq";
const TG_B: &str = "AAG-x_9kLmNoPqRsTuVwXyZ0123456789a-";
const TG_C: &str = "AAFz8mQ2wE4rT6yU8iO0pA2sD4fG6hJ8k_L";

#[test]
fn telegram_bot_tokens_keep_the_bot_id_and_lose_the_secret() {
    for secret in [TG_A, TG_B, TG_C] {
        assert_eq!(secret.len(), 35, "{secret}");
    }
    let cases = [
        // Bare, in an assignment, in prose, at the start and end of the text.
        (
            format!("TELEGRAM=123456789:{TG_A}"),
            "TELEGRAM=123456789:[REDACTED]".to_string(),
        ),
        (
            format!("Your bot 1234567890:{TG_B} is ready, keep it safe."),
            "Your bot 1234567890:[REDACTED] is ready, keep it safe.".to_string(),
        ),
        (
            format!("12345678:{TG_C}"),
            "12345678:[REDACTED]".to_string(),
        ),
        // In JSON; under a key that names a secret, key_value redacts the whole value.
        (
            format!("{{\"bot\":\"123456789:{TG_A}\",\"ok\":true}}"),
            "{\"bot\":\"123456789:[REDACTED]\",\"ok\":true}".to_string(),
        ),
        (
            format!("{{\"telegram_token\": \"123456789:{TG_A}\"}}"),
            "{\"telegram_token\": \"[REDACTED]\"}".to_string(),
        ),
        // Bot API URLs: methods and file downloads.
        (
            format!("GET https://api.telegram.org/bot123456789:{TG_A}/getMe -> 200"),
            "GET https://api.telegram.org/bot123456789:[REDACTED]/getMe -> 200".to_string(),
        ),
        (
            format!("https://api.telegram.org/file/bot123456789:{TG_B}/photos/x.jpg"),
            "https://api.telegram.org/file/bot123456789:[REDACTED]/photos/x.jpg".to_string(),
        ),
        (
            format!(
                "curl -s \"https://api.telegram.org/bot123456789:{TG_C}/sendMessage?chat_id=-1001234567890&text=hi\""
            ),
            "curl -s \"https://api.telegram.org/bot123456789:[REDACTED]/sendMessage?chat_id=-1001234567890&text=hi\"".to_string(),
        ),
        // A local Bot API server: found by the bare rule after `bot`.
        (
            format!("http://localhost:8081/bot123456789:{TG_A}/getUpdates"),
            "http://localhost:8081/bot123456789:[REDACTED]/getUpdates".to_string(),
        ),
        // In an api.telegram.org URL, a secret of any shape (no `AA`, other length).
        (
            "https://api.telegram.org/bot110201543:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe"
                .to_string(),
            "https://api.telegram.org/bot110201543:[REDACTED]/getMe".to_string(),
        ),
        // Several on one line, separated by spaces or a single comma.
        (
            format!("a=123456789:{TG_A} b=987654321:{TG_B},1122334455:{TG_C}"),
            "a=123456789:[REDACTED] b=987654321:[REDACTED],1122334455:[REDACTED]".to_string(),
        ),
    ];
    let s = scrubber();
    for (input, expected) in &cases {
        assert_eq!(
            s.scrub(input, &ScrubBag::default()),
            *expected,
            "input: {input}"
        );
    }
}

#[test]
fn telegram_rule_leaves_look_alikes_alone() {
    let clean = [
        "12:34:56",
        "2026-11-23T10:00:00Z started, took 00:00:12",
        "listening on localhost:8080 and 127.0.0.1:5432, [::1]:9000",
        "aspect 16:9, ratio 1234567890:1",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "https://api.telegram.org/bot<TOKEN>/getMe and https://core.telegram.org/bots/api",
        "https://example.com:8443/path/bot/1234",
        "id 1234567890:AAbc ok, 1234567890:AAAA, 1700000000:AA_short-word",
        "MAC 00:AA:BB:CC:DD:EE, FE80::AA:BB, line 123456789:AB",
        // Not a token: a secret-shaped tail that does not start with `AA` outside a Bot API URL.
        "123456789:ABHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
        // Id too short / too long / glued to a word.
        "1234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
        "12345678901:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
        "x123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq robot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq",
        // Secret part one character short / too long.
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawqz",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq-",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq_x",
    ];
    assert_untouched(&clean);
}

#[test]
fn the_shells_working_directory_is_not_a_password() {
    for text in [
        "PWD=/home/me/project\nOLDPWD=/tmp/old-place\n",
        "pwd=/srv/app/current",
    ] {
        assert_eq!(scrub(text), text);
    }
    assert_eq!(scrub("DB_PWD=Sup3rS3cret!x"), "DB_PWD=[REDACTED]");
    assert_eq!(scrub("pwd: hunter2hunter2"), "pwd: [REDACTED]");
    assert_eq!(scrub("DB_PWD=/not/a/dir/really"), "DB_PWD=[REDACTED]");
}

#[test]
fn a_request_secret_is_caught_in_pieces_and_transformed() {
    use base64::Engine as _;
    let s = scrubber();
    let secret = "Zq7pW3xK9mTr2Lc8Vb";
    let bag = ScrubBag::default();
    bag.add(secret);
    let reversed: String = secret.chars().rev().collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("token={secret}"));
    for shown in [
        format!("piece: {}", &secret[0..8]),
        format!("piece: {}", &secret[8..16]),
        format!("rev: {reversed}"),
        format!("hex: {}", hex::encode(secret)),
        format!("HEX: {}", hex::encode_upper(secret)),
        format!("b64: {b64}"),
    ] {
        let out = s.scrub(&shown, &bag);
        for piece in secret.as_bytes().windows(SECRET_PIECE) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!out.contains(piece), "{piece} left in {out}");
        }
        assert!(out.contains("[REDACTED]"), "{out}");
    }
    assert_eq!(s.scrub(&format!("v={secret}!"), &bag), "v=[REDACTED]!");
    assert_eq!(s.scrub("ordinary words only", &bag), "ordinary words only");
}
