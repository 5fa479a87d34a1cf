//! Skills from every source (the data directory's global skills, `~/.claude/skills`, the store's
//! published ones, the workspace's `.claude/skills`), found by `skill_search`, loaded by
//! `use_skill` and Claude Code's `Skill` (uses recorded), listed by name and description in the
//! system prompt, published after validation. A `SKILL.md` that does not parse is named with
//! its mistake; a skill reaching outside its directory (an absolute path, `..`, a symbolic link)
//! is refused (GoClaw published any host directory given by absolute path).

use std::path::Path;

use serde_json::{Value, json};

use crate::support;
use crate::support::chat::{mock_provider, requests};

fn skill(dir: &Path, name: &str, description: &str, body: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
}

/// `talon ARGS` in `home`: (exit code, stdout, stderr).
fn talon(home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = support::command(home).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `talon tool call NAME --args ARGS --workspace ws --json`: the call's JSON result.
fn call(home: &Path, name: &str, args: Value) -> Value {
    let ws = home.join("ws");
    let (_, stdout, stderr) = talon(
        home,
        &[
            "tool",
            "call",
            name,
            "--args",
            &args.to_string(),
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ],
    );
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{name}: {stdout}{stderr}"))
}

fn text(result: &Value) -> String {
    result["for_llm"]
        .as_str()
        .or_else(|| result["result"]["for_llm"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Every source's skills, in one home.
fn home_with_skills() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join("ws");
    skill(
        &ws.join(".claude/skills/release-notes"),
        "release-notes",
        "Write release notes from merged pull requests",
        "Group the changes by feature, fix and chore.",
    );
    std::fs::write(
        ws.join(".claude/skills/release-notes/template.md"),
        "## Features\n",
    )
    .unwrap();
    // Not a skill: its mistake is named, the others still load.
    std::fs::create_dir_all(ws.join(".claude/skills/broken")).unwrap();
    std::fs::write(
        ws.join(".claude/skills/broken/SKILL.md"),
        "---\nname: broken\n---\nno description\n",
    )
    .unwrap();
    skill(
        &home.path().join(".claude/skills/git-hygiene"),
        "git-hygiene",
        "Keep commits small with clear messages",
        "One change per commit.",
    );
    let global = support::data_dir(home.path()).join("skills/pdf-forms");
    skill(
        &global,
        "pdf-forms",
        "Fill in PDF forms",
        "Run scripts/fill.py with the form and the values.",
    );
    std::fs::create_dir_all(global.join("scripts")).unwrap();
    std::fs::write(global.join("scripts/fill.py"), "print('filled')\n").unwrap();
    skill(
        &home.path().join("drafts/travel-plans"),
        "travel-plans",
        "Plan trips: flights, hotels and an itinerary",
        "Ask for dates first.",
    );
    let (code, out, err) = talon(
        home.path(),
        &[
            "skills",
            "publish",
            home.path().join("drafts/travel-plans").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("published skill travel-plans (version 1, 0 file(s)) for everyone"),
        "{out}"
    );
    home
}

#[test]
fn skills_from_every_source_are_found_loaded_and_listed() {
    let home = home_with_skills();
    let ws = home.path().join("ws");
    let (code, out, err) = talon(
        home.path(),
        &[
            "skills",
            "list",
            "--workspace",
            ws.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let sources: Vec<(String, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["source"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        sources,
        // The operator's sources first, a repository's last (issue 35: it wins no clash).
        [
            ("pdf-forms".into(), "global".into()),
            ("git-hygiene".into(), "home".into()),
            ("travel-plans".into(), "published".into()),
            ("release-notes".into(), "workspace".into()),
        ],
        "{out}"
    );
    assert!(
        err.contains(".claude/skills/broken") && err.contains("no `description`"),
        "the broken skill is named with its mistake: {err}"
    );

    let found = text(&call(
        home.path(),
        "skill_search",
        json!({"query": "write the release notes"}),
    ));
    assert!(
        found.starts_with("release-notes (workspace): Write release notes"),
        "{found}"
    );
    let none = text(&call(
        home.path(),
        "skill_search",
        json!({"query": "astronomy"}),
    ));
    assert!(none.contains("No skill matches"), "{none}");

    let loaded = text(&call(
        home.path(),
        "use_skill",
        json!({"name": "pdf-forms"}),
    ));
    assert!(
        loaded.contains("Skill pdf-forms (global): Fill in PDF forms")
            && loaded.contains("Run scripts/fill.py")
            && loaded.contains("Files of this skill")
            && loaded.contains("scripts/fill.py"),
        "{loaded}"
    );
    let file = text(&call(
        home.path(),
        "use_skill",
        json!({"name": "pdf-forms", "file": "scripts/fill.py"}),
    ));
    assert!(file.contains("print('filled')"), "{file}");
    let escape = call(
        home.path(),
        "use_skill",
        json!({"name": "pdf-forms", "file": "../../../talon.db"}),
    );
    assert!(
        text(&escape).contains("has no file"),
        "only the skill's own files: {escape}"
    );
    let workspace_file = text(&call(
        home.path(),
        "use_skill",
        json!({"name": "release-notes", "file": "template.md"}),
    ));
    assert!(workspace_file.contains("## Features"), "{workspace_file}");
    let claude = text(&call(
        home.path(),
        "Skill",
        json!({"skill": "git-hygiene", "args": "main"}),
    ));
    assert!(
        claude.starts_with("Launching skill: git-hygiene")
            && claude.contains("One change per commit.")
            && claude.contains("ARGUMENTS: main"),
        "{claude}"
    );
    let unknown = call(home.path(), "use_skill", json!({"name": "nope"}));
    assert!(
        text(&unknown).contains("there is no skill \"nope\"")
            && text(&unknown).contains("release-notes"),
        "{unknown}"
    );
    let (_, shown, _) = talon(home.path(), &["skills", "show", "pdf-forms"]);
    assert!(
        shown.contains("pdf-forms (global), used 1 time(s)"),
        "{shown}"
    );
}

#[test]
fn publishing_validates_and_stays_inside_the_skill() {
    let home = home_with_skills();
    let ws = home.path().join("ws");
    skill(
        &ws.join("skills/meeting-notes"),
        "meeting-notes",
        "Take meeting notes with decisions and owners",
        "List decisions first.",
    );
    std::fs::write(
        ws.join("skills/meeting-notes/example.md"),
        "Decision: ship\n",
    )
    .unwrap();
    let published = call(
        home.path(),
        "publish_skill",
        json!({"path": "skills/meeting-notes"}),
    );
    // A call without a user cannot publish for everyone (issue 35): that is the operator's.
    assert!(
        text(&published).contains("this call has no user"),
        "{published}"
    );
    let (code, out, err) = talon(
        home.path(),
        &[
            "skills",
            "publish",
            ws.join("skills/meeting-notes").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let found = text(&call(
        home.path(),
        "skill_search",
        json!({"query": "meeting decisions"}),
    ));
    assert!(found.starts_with("meeting-notes (published)"), "{found}");

    // GoClaw's bug: any host directory by absolute path. Here the path goes through the jail.
    let outside = home.path().join("drafts/travel-plans");
    for path in [outside.to_str().unwrap(), "../drafts/travel-plans", "/etc"] {
        let refused = call(home.path(), "publish_skill", json!({"path": path}));
        assert!(
            !text(&refused).contains("Published"),
            "{path} is outside the workspace: {refused}"
        );
    }
    // A link out of the skill is refused, not followed.
    skill(
        &ws.join("skills/leaky"),
        "leaky",
        "Leaks a file",
        "Read secret.txt.",
    );
    std::os::unix::fs::symlink("/etc/passwd", ws.join("skills/leaky/secret.txt")).unwrap();
    let leaky = call(
        home.path(),
        "publish_skill",
        json!({"path": "skills/leaky"}),
    );
    assert!(
        text(&leaky).contains("secret.txt is a symbolic link"),
        "{leaky}"
    );
    // Mistakes are named.
    skill(
        &ws.join("skills/wrong-dir"),
        "other-name",
        "Misnamed",
        "Body.",
    );
    let misnamed = text(&call(
        home.path(),
        "publish_skill",
        json!({"path": "skills/wrong-dir"}),
    ));
    assert!(
        misnamed.contains("names the skill \"other-name\" but its directory is \"wrong-dir\""),
        "{misnamed}"
    );
    std::fs::create_dir_all(ws.join("skills/bad-name")).unwrap();
    std::fs::write(
        ws.join("skills/bad-name/SKILL.md"),
        "---\nname: Bad Name\ndescription: d\n---\nbody\n",
    )
    .unwrap();
    let bad = text(&call(
        home.path(),
        "publish_skill",
        json!({"path": "skills/bad-name"}),
    ));
    assert!(
        bad.contains("lowercase letters, digits and hyphens"),
        "{bad}"
    );
    // The operator's CLI refuses the same.
    let (code, _, err) = talon(
        home.path(),
        &[
            "skills",
            "publish",
            ws.join("skills/leaky").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("secret.txt is a symbolic link"), "{err}");
    let (code, out, _) = talon(home.path(), &["skills", "remove", "meeting-notes"]);
    assert_eq!(code, 0);
    assert!(out.contains("removed skill meeting-notes"));
    let (code, _, err) = talon(home.path(), &["skills", "remove", "meeting-notes"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn the_system_prompt_lists_skills_by_name_and_description() {
    let home = home_with_skills();
    let mock = mock_provider(home.path(), &json!({"turns": [{"text": "ok"}]}));
    std::fs::write(
        home.path().join("talon.toml"),
        format!(
            "[providers.mock]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-1\"\n",
            mock.url
        ),
    )
    .unwrap();
    let ws = home.path().join("ws");
    let (code, out, err) = talon(
        home.path(),
        &["chat", "-p", "hello", "--workspace", ws.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}{err}");
    let system = requests(&mock)[0]["messages"][0].to_string();
    for listed in [
        "- release-notes: Write release notes from merged pull requests",
        "- git-hygiene: Keep commits small",
        "- travel-plans: Plan trips",
        "- pdf-forms: Fill in PDF forms",
    ] {
        assert!(system.contains(listed), "{listed}: {system}");
    }
    assert!(
        !system.contains("Group the changes by feature"),
        "instructions are loaded on use, not listed"
    );
}
