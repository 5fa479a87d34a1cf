//! The `gateway` tool on `talon serve`: the operator reads the status and the configuration
//! (secrets replaced), patches the agent loop's defaults (a patch reaching hooks, exec or any
//! key that runs host commands is refused, as is one that would not load), and reloads: the
//! gateway restarts in place with the new file, and the next turn uses it. A turn of a user
//! who is not an operator cannot use it.

use serde_json::{Value, json};

use crate::support;
use crate::support::chat::{mock_provider, offered, post, requests};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_operator_reads_patches_and_reloads_the_configuration() {
    let home = tempfile::tempdir().unwrap();
    let mock = mock_provider(
        home.path(),
        &json!({"conversations": [
            {"when": "AFTER-RELOAD", "turns": [{"text": "Reloaded answer."}]},
            {"when": "OPERATOR-ASKS", "turns": [
                {"tool_calls": [{"name": "gateway", "arguments": {"action": "status"}}]},
                {"text": "Status read."}
            ]},
            {"when": "NOT-AN-OPERATOR", "turns": [
                {"tool_calls": [{"name": "gateway", "arguments": {"action": "status"}}]},
                {"text": "Refused."}
            ]}
        ]}),
    );
    // The configuration lives outside the workspace, as it must (a file an agent writes is
    // never configuration).
    let config_dir = tempfile::tempdir().unwrap();
    let file = config_dir.path().join("talon.toml");
    std::fs::write(
        &file,
        format!(
            "# operator's notes stay\n[gateway]\noperators = [\"boss\"]\n[tools]\npermission_mode = \"bypassPermissions\"\nrate_limit_per_hour = 0\n\
             [providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n\
             [web.search]\nsearxng_url = \"https://talon:pw-never-shown-123456@search.example/\"\n\
             [chat]\nmax_tokens = 4096\n",
            mock.url
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut cmd = support::command(home.path());
    cmd.env("TALON_CONFIG", &file)
        .args(["serve", "--bind", &addr]);
    let server = support::spawn(cmd);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let invoke = |args: Value| -> Value {
        let (_, body) = runtime.block_on(support::invoke(
            &server.addr,
            None,
            json!({"tool": "gateway", "args": args}),
        ));
        body
    };
    let text = |body: &Value| {
        body["result"]["for_llm"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    let status = text(&invoke(json!({"action": "status"})));
    assert!(
        status.contains("tools registered") && status.contains(&addr),
        "{status}"
    );

    let shown = text(&invoke(json!({"action": "config.get"})));
    assert!(shown.contains("max_tokens = 4096"), "{shown}");
    assert!(!shown.contains("pw-never-shown-123456"), "{shown}");
    assert!(
        shown
            .to_lowercase()
            .contains("talon:[redacted]@search.example"),
        "{shown}"
    );

    // Keys that run host commands or widen the box: refused, the file untouched.
    let before = std::fs::read_to_string(&file).unwrap();
    for refused in [
        json!({"hooks": {"pre_tool_use": [{"command": "touch /tmp/pwned"}]}}),
        json!({"exec": {"sandbox": "off"}}),
        json!({"tools": {"permission_mode": "bypassPermissions"}}),
    ] {
        let answer = invoke(json!({"action": "config.patch", "patch": refused}));
        assert!(
            text(&answer).contains("cannot be changed by a tool"),
            "{answer}"
        );
    }
    let answer =
        invoke(json!({"action": "config.patch", "patch": {"chat": {"max_tokens": "many"}}}));
    assert!(text(&answer).contains("would not load"), "{answer}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);

    let answer = invoke(json!({"action": "config.patch", "patch": {"chat": {"max_tokens": 8192}}}));
    assert!(
        text(&answer).contains("chat.max_tokens: 4096 → 8192"),
        "{answer}"
    );
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(
        after.contains("max_tokens = 8192") && after.contains("# operator's notes stay"),
        "{after}"
    );
    assert_eq!(
        std::fs::read_to_string(config_dir.path().join("talon.toml.bak")).unwrap(),
        before
    );

    let answer = invoke(json!({"action": "reload"}));
    assert!(text(&answer).contains("reloading"), "{answer}");
    // The same process starts again on the same address, with the new file.
    // (Requests fail while it restarts: each is tried until one is answered by the new one.)
    support::pg::until("the gateway is back after the reload", || {
        let answered = runtime.block_on(async {
            reqwest::Client::new()
                .post(format!("http://{}/v1/tools/invoke", server.addr))
                .json(&json!({"tool": "gateway", "args": {"action": "status"}}))
                .send()
                .await
                .ok()?
                .json::<Value>()
                .await
                .ok()
        });
        answered.is_some_and(|body| {
            let status = text(&body);
            status.contains("tools registered") && !status.contains("reload is under way")
        })
    });
    let reply = post(
        &format!("http://{}/v1/chat/completions", server.addr),
        &json!({"model": "default", "messages": [{"role": "user", "content": "AFTER-RELOAD"}]}),
        &[],
    );
    assert!(reply.contains("Reloaded answer."), "{reply}");
    let asked = requests(&mock);
    let turn = asked
        .iter()
        .find(|r| r.to_string().contains("AFTER-RELOAD"))
        .unwrap();
    assert_eq!(turn["max_tokens"], 8192, "{turn}");

    // Offered only in the operator's turns: an operator's turn may use it.
    let offers_gateway = |request: &Value| offered(request).iter().any(|t| t == "gateway");
    assert!(
        !offers_gateway(turn),
        "not offered to a turn of no operator"
    );
    let reply = post(
        &format!("http://{}/v1/chat/completions", server.addr),
        &json!({"model": "default", "user": "boss", "messages": [{"role": "user", "content": "OPERATOR-ASKS"}]}),
        &[],
    );
    assert!(reply.contains("Status read."), "{reply}");
    let operator_turn: Vec<Value> = requests(&mock)
        .into_iter()
        .filter(|r| r.to_string().contains("OPERATOR-ASKS"))
        .collect();
    assert!(offers_gateway(&operator_turn[0]), "offered to the operator");
    assert!(
        operator_turn[1].to_string().contains("tools registered"),
        "{}",
        operator_turn[1]
    );

    // A user's own turn, not listed in [gateway] operators: not offered, and refused.
    let reply = post(
        &format!("http://{}/v1/chat/completions", server.addr),
        &json!({"model": "default", "user": "mallory", "messages": [{"role": "user", "content": "NOT-AN-OPERATOR"}]}),
        &[],
    );
    assert!(reply.contains("Refused."), "{reply}");
    let first = requests(&mock)
        .into_iter()
        .find(|r| r.to_string().contains("NOT-AN-OPERATOR"))
        .unwrap();
    assert!(!offers_gateway(&first), "not offered to mallory");
    let refused = requests(&mock)
        .into_iter()
        .rfind(|r| r.to_string().contains("NOT-AN-OPERATOR"))
        .unwrap()
        .to_string();
    assert!(
        refused.contains("gateway is for the gateway's operator"),
        "{refused}"
    );
}
