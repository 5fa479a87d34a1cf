//! One positive case per vendor format the outside review found missing (issue 21, item 16),
//! and a corpus of ordinary text that must come through untouched. Secrets are synthetic.

use super::*;

/// (input, expected output); `super::tests::every_rule_has_a_positive_case` reads these too.
pub(super) const VENDOR_CASES: &[(&str, &str)] = &[
    // okta_api_token (issue 35: without SSWS)
    (
        "okta token 00QCjAl4MlV-WPXM2Xa4ZdmQqmgK3ZQyQg7Q0b7AvT for the tenant",
        "okta token [REDACTED] for the tenant",
    ),
    // square
    (
        "square access EAAAEOuLQPDbGa6pVCEYGgIS4yZXcXkM6MxdpVkmAEiPuPhA2tPkJ1lDiKMmP1hL done",
        "square access [REDACTED] done",
    ),
    // square
    (
        "app secret sq0csp-0p9h7g6f4s3s3s3-4a3ardgwa6ADRDJDDKUFYDYDYDY ok",
        "app secret [REDACTED] ok",
    ),
    // doppler
    (
        "DOPPLER dp.st.dev.5AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdE here",
        "DOPPLER [REDACTED] here",
    ),
    // doppler
    (
        "personal dp.pt.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789AbCdEfG",
        "personal [REDACTED]",
    ),
    // discord_bot
    (
        "discord bot MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab ready",
        "discord bot [REDACTED] ready",
    ),
    // discord_bot
    (
        "Authorization: Bot MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.AbCdEfGhIjKlMnOpQrStUvWxYz0",
        "Authorization: Bot [REDACTED]",
    ),
    // discord_bot (issue 35: bare, a 19-digit bot id)
    (
        "{\"bot\": \"MTE5ODc2NTQzMjEwOTg3NjU0Mw.GhIjKl.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab\"}",
        "{\"bot\": \"[REDACTED]\"}",
    ),
    // discord_webhook
    (
        "https://discord.com/api/webhooks/123456789012345678/OfFXtNL_mhPNLyiPzTiO1njj5c48XZjCdg3fFJZ26EZXP_Dke9w_VB5HF9-XNWauOzNY",
        "https://discord.com/api/webhooks/123456789012345678/[REDACTED]",
    ),
    // discord_webhook
    (
        "POST https://discordapp.com/api/v10/webhooks/123456789012345678/OfFXtNL_mhPNLyiPzTiO1njj5c48XZjCdg3fFJZ26EZXP_Dke9w_VB5HF9-XNWauOzNY?wait=true",
        "POST https://discordapp.com/api/v10/webhooks/123456789012345678/[REDACTED]?wait=true",
    ),
    // azure_client_secret
    (
        "value Xy78Q~AbCdEfGhIjKlMnOpQrStUvWxYz01234567 ok",
        "value [REDACTED] ok",
    ),
    // azure_sas
    (
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&spr=https&sig=AbCdEfGhIjKlMnOpQrStUvWxYz0123456789%2BabcDE%3D",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-01T00:00:00Z&spr=https&sig=[REDACTED]",
    ),
    // azure_sas
    (
        "SharedAccessSignature sr=https%3A%2F%2Fns.servicebus.windows.net%2Fq&sig=AbCdEfGhIjKlMnOpQrStUvWxYz0123456789%3D&se=1767225600&skn=RootManageSharedAccessKey",
        "SharedAccessSignature sr=https%3A%2F%2Fns.servicebus.windows.net%2Fq&sig=[REDACTED]&se=1767225600&skn=RootManageSharedAccessKey",
    ),
    // vault
    (
        "hvs.CAESIslwkMW7nv3AQVyHkdPGtzEJWuY7Z36JwXImyBeSVcjfY45EasmNy6VaVvr3gNy1ZFC7cjk3yth-_8RtItTKMbj",
        "[REDACTED]",
    ),
    // vault
    (
        "batch hvb.AAAAAQixmyUIThue-JZuenDTG0zy2kPCBfTwcV-9u4cJhBoNXA7UbTwHdWux0ACK5UkEZwTUqd2dAnBVLpuE27-yBGx3WC_9Hf6AeR4MrCuWsYeaL6z_D9hdVq-Q7TX5jGnVG6pz ok",
        "batch [REDACTED] ok",
    ),
    // vault
    ("hvr.AbCdEfGhIjKlMnOpQrStUvWx", "[REDACTED]"),
    // google
    ("GOCSPX-AbCdEfGhIjKlMnOpQrStUvWxYz01", "[REDACTED]"),
    // google
    (
        "access ya29.a0AfH6SMBxQjNFqsHnLBAr--BeQVbysKhH0hpcD4_V3cUsSZ46C4Dc6ClS_tvbIPQMBg6xztbutCovoZppAAckFCmFA3bZMOT1e-fZ9xekG8HuLRV_HXLgoKl_PrtNNXoI4DgV2n8BUzf-MQ3xc2zu expires",
        "access [REDACTED] expires",
    ),
    // atlassian
    (
        "ATATT3xFfGF0v11K9B8xEabV2isDDf304eQ-oVctlpc6uRZ_txe8EjzAjp8XzRs0LU5XO_XIdlu-a_iCOoxvSQSNFnviw2VueE0ubS_WFFui409hKgHLe1FvYiRst9gGr9dBUtV2_9NrJrbWqdHPF1GZrrsmYmxd5sjpKqMPY-CvxxWzfhbX7iYwDG=0A1B2C3D",
        "[REDACTED]",
    ),
    // databricks
    (
        "host dapi0123456789abcdef0123456789abcdef-2 ok",
        "host [REDACTED] ok",
    ),
    // okta
    (
        "Authorization: SSWS 00AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd",
        "Authorization: SSWS [REDACTED]",
    ),
    // linear
    (
        "lin_api_cnnk39vaQXo2P9CpVwH2ymrSM51lSxEjvx552Pjs",
        "[REDACTED]",
    ),
    // notion
    (
        "notion secret_RWXSRV9f4dpUtuJy0YkUzbOKr6rnYNXVoYh3b5n0ymF ok",
        "notion [REDACTED] ok",
    ),
    // notion
    (
        "ntn_12345678901PSQGnkP5ByQ7sXiHydiTaWfkDhWEdeOuhlG",
        "[REDACTED]",
    ),
    // planetscale
    (
        "pscale_tkn_L5L0YoJSa0G7OHSrSTAulJuaRfvSBdfdwPDqPvzmwN0",
        "[REDACTED]",
    ),
    // planetscale
    (
        "pscale_pw_GPBYXLfFMPDM3yk76xx4gW_k_vpbdNsai4l0UY4_HxM",
        "[REDACTED]",
    ),
    // planetscale
    (
        "pscale_oauth_CMisu0OHTYoVgkzE6R8LE8JyOO91DHAwvmxH92IFGlo",
        "[REDACTED]",
    ),
    // supabase
    ("sbp_926507ddc85d609cd68cf971b8bad185753a755a", "[REDACTED]"),
    // supabase
    ("sb_secret_keg9xvYWM7fvsxW5vZXRpAwmoRfoWRZ", "[REDACTED]"),
    // replicate
    ("r8_YUErfZU6zdWX6HKqjwHFfu1gDzAPC0EWs4NZd", "[REDACTED]"),
    // perplexity
    (
        "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",
        "[REDACTED]",
    ),
    // xai
    (
        "xai-freQh6F8PEuY1BvyoHqeY2ilIV7emxOzHJ98GzFg5HW5jfZNz89T97FmAYoor0nbkPUmdvMzMSVmKh7z",
        "[REDACTED]",
    ),
    // mapbox
    (
        "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGFiY2RlZjEyMzQifQ.AbCdEfGhIjKlMnOpQrStUv",
        "[REDACTED]",
    ),
    // aws
    (
        "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "[REDACTED] [REDACTED]",
    ),
    // aws
    (
        "Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        "Access key ID,Secret access key\n[REDACTED],[REDACTED]\n",
    ),
    // aws
    (
        "id: ASIAY34FZKBOKMUTVV7A\nkey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "id: [REDACTED]\nkey: [REDACTED]",
    ),
    // cookie
    (
        "> Cookie: session=3f9a8b7c6d5e4f3a2b1c; theme=dark",
        "> Cookie: [REDACTED]",
    ),
    // cookie
    (
        "< Set-Cookie: sid=AbC123dEf456GhI789; Path=/; HttpOnly",
        "< Set-Cookie: [REDACTED]",
    ),
    // cookie
    (
        "curl -H 'Cookie: session=eyJ1c2VyIjoxfQ.abcdef' https://example.com",
        "curl -H 'Cookie: [REDACTED]' https://example.com",
    ),
];

fn scrub(text: &str) -> String {
    Scrubber::new()
        .expect("rules compile")
        .scrub(text, &ScrubBag::default())
        .into_owned()
}

#[test]
fn h21_16_every_vendor_format_is_redacted() {
    let s = Scrubber::new().expect("rules compile");
    for (input, expected) in VENDOR_CASES {
        let got = s.scrub(input, &ScrubBag::default());
        assert_eq!(got, *expected, "input: {input}");
    }
}

/// Ordinary text: prose, code, hashes, UUIDs, base64 of ordinary data, URLs with ordinary
/// query strings, and look-alikes of each new format. None of it may change.
const ORDINARY: &[&str] = &[
    "The quick brown fox jumps over the lazy dog. Keep your Discord bot token secret and rotate it.",
    "MTA MTE MTI: the MTU of the link is 1500; MTk.GhIjKl.AbCd is no token, nor is MTQ5.x.y.",
    "Set the cookie: it expires after a day. Our webhooks post to Discord and Slack.",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: Dev <dev@example.com>",
    "3f786850e387550fdab836ed7e6dc881de23001b 89e6c98d92887913cadf06b2adb97f26cde4849b refs/heads/main",
    "id=123e4567-e89b-12d3-a456-426614174000 parent=9b2f7c1e-0a4d-4c6b-8e2f-1a2b3c4d5e6f",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "SGVsbG8sIHdvcmxkISBUaGlzIGlzIG9yZGluYXJ5IGJhc2U2NCBkYXRhLg==",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "TWFueSBoYW5kcyBtYWtlIGxpZ2h0IHdvcmsuIE1hbnkgaGFuZHMgbWFrZSBsaWdodCB3b3Jr",
    "https://example.com/search?q=rust+regex&page=2&sort=desc&lang=en",
    "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s and https://maps.example.org/?ll=48.85,2.35&z=12",
    "https://cdn.example.net/img.png?w=640&h=480&fit=crop&sig=small",
    "https://discord.com/channels/123456789012345678/876543210987654321",
    "https://discord.com/api/webhooks/{webhook.id}/{webhook.token}",
    "fn dapi_version() -> u32 { 3 }\nlet hvs = vec![1, 2];\nuse xai-sdk;\nlet r8_reg = 0;",
    "let secret_key_base_for_tests = load();\nconst secret_ENVIRONMENT_VARIABLE_NAME_FOR_THE_API: &str = \"X\";",
    "pplx-api, xai-grok, lin_api_version, pscale_cli, sbp_config, GOCSPX-template",
    "document.cookie = \"theme=dark\"; // cookie: stored for a year",
    "Set-Cookie: theme=dark; Path=/; Max-Age=3600",
    "Cookie: lang=en",
    "token: Token,\n    pub discord: Option<DiscordConfig>,",
    "version MTIzNDU2Nzg5.abcdef.ghijklmnopqrstuvwxyz0123456789 done",
    "a.b.c eyJhbGciOiJIUzI1NiJ9 token xyz.abcdef.ghi",
    "~/.config/app/8Q~ and 7Q~ in a filename",
    "AWS region eu-west-1, bucket logs-2026, prefix src/Components/Header/index/Footer/x.tsx",
    "aws s3 cp s3://bucket/2026/11/25/AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd.tar.gz .",
    "Ok(()) => println!(\"{}\", value.to_string()),\n    Err(e) => return Err(e.into()),",
    "   Compiling serde v1.0.229\n    Finished `release` profile [optimized] target(s) in 2m 52s",
    "",
];

#[test]
fn h21_16_ordinary_text_is_untouched() {
    let s = Scrubber::new().expect("rules compile");
    for text in ORDINARY {
        let got = s.scrub(text, &ScrubBag::default());
        assert!(
            matches!(got, Cow::Borrowed(_)),
            "false positive in {text:?}: {got:?}"
        );
    }
}

#[test]
fn h21_16_aws_secret_needs_its_key_id_nearby() {
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    assert_eq!(
        scrub(&format!("value {secret} here")),
        format!("value {secret} here")
    );
    let far = format!("AKIAIOSFODNN7EXAMPLE{}\n{secret}", " ".repeat(2000));
    assert!(
        scrub(&far).contains(secret),
        "a key id far away does not count"
    );
    let near = format!("AKIAIOSFODNN7EXAMPLE\n\n{secret}");
    assert_eq!(scrub(&near), "[REDACTED]\n\n[REDACTED]");
}

#[test]
fn h21_16_discord_token_needs_a_snowflake() {
    // Same shape, but the first part is not a user id in base64.
    let fake = "token NzYzYWJjZGVmZ2hpamtsbW5v.GhIjKl.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ab";
    assert_eq!(scrub(fake), fake);
}
