use super::*;

/// The form `params` answered with `typed` lines: the result and what the terminal showed.
fn answer(params: &Value, typed: &str) -> (Value, String) {
    let mut screen = Vec::new();
    let mut input = std::io::Cursor::new(typed.as_bytes().to_vec());
    let result = ask_on(params, &mut screen, &mut input).expect("asks");
    (result, String::from_utf8(screen).expect("text"))
}

fn form(properties: Value, required: &[&str]) -> Value {
    json!({"message": "Tell me", "requestedSchema": {
        "type": "object", "properties": properties, "required": required}})
}

#[test]
fn numbers_labels_and_own_words_pick_choices() {
    let f = field(
        "db",
        &json!({"type": "string", "enum": ["SQLite", "PostgreSQL"]}),
        true,
    );
    let value = |line: &str| match typed(&f, line) {
        Typed::Value(v) => v,
        other => panic!("{other:?}"),
    };
    assert_eq!(value("2\n"), json!("PostgreSQL"));
    assert_eq!(value("sqlite"), json!("SQLite"));
    assert_eq!(value("MariaDB"), json!("MariaDB"));
    assert_eq!(value("3"), json!("3"), "out of range is text");
    let many = field(
        "dbs",
        &json!({"type": "array", "items": {"enum": ["SQLite", "PostgreSQL"]}}),
        true,
    );
    assert_eq!(
        typed(&many, "1, 2"),
        Typed::Value(json!(["SQLite", "PostgreSQL"]))
    );
}

#[test]
fn enter_takes_the_defaults_and_the_form_shows_them() {
    let params = form(
        json!({
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
        }),
        &[],
    );
    let (result, screen) = answer(&params, "\n\n\n\n\n");
    assert_eq!(
        result,
        json!({"action": "accept", "content": {
            "name": "Ada", "age": 36, "score": 95.5, "status": "active", "verified": true}})
    );
    for shown in [
        "[default: Ada]",
        "[default: 36]",
        "[default: 95.5]",
        "[default: active]",
        "y or n [default: true]",
    ] {
        assert!(screen.contains(shown), "{shown} missing from {screen}");
    }
}

#[test]
fn typed_numbers_and_booleans_are_sent_as_numbers_and_booleans() {
    let params = form(
        json!({
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "ratio": {"type": "number"},
            "ok": {"type": "boolean"},
            "note": {"type": "string"},
        }),
        &["age", "ratio", "ok"],
    );
    // Wrong input is asked again with the reason; the optional note is left out.
    let (result, screen) = answer(&params, "old\n200\n42\n0.25\nmaybe\nyes\n\n");
    assert_eq!(
        result,
        json!({"action": "accept", "content": {"age": 42, "ratio": 0.25, "ok": true}})
    );
    assert!(screen.contains("\"old\" is not a whole number"), "{screen}");
    assert!(screen.contains("at most 150"), "{screen}");
    assert!(screen.contains("type y or n"), "{screen}");
    assert!(screen.contains("[optional]"), "{screen}");
}

#[test]
fn a_required_field_is_asked_again_and_the_form_can_be_declined_or_dismissed() {
    let params = form(json!({"q": {"type": "string"}}), &["q"]);
    let (result, screen) = answer(&params, "\n/decline\n");
    assert_eq!(result, json!({"action": "decline"}));
    assert!(screen.contains("this answer is required"), "{screen}");
    let (result, _) = answer(&params, "/cancel\n");
    assert_eq!(result, json!({"action": "cancel"}));
    let (result, _) = answer(&params, "");
    assert_eq!(
        result,
        json!({"action": "cancel"}),
        "the end of input dismisses"
    );
}

#[test]
fn titled_choices_send_their_values() {
    let f = field(
        "size",
        &json!({"type": "string", "oneOf": [
            {"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}]}),
        true,
    );
    assert_eq!(typed(&f, "2"), Typed::Value(json!("l")));
    let text = render_field(&f, &json!({}));
    assert!(text.contains("  1. Small (s)\n  2. Large (l)\n"), "{text}");
}

#[test]
fn fields_show_their_title_question_and_the_choices_their_numbers_send() {
    let asked = json!({"type": "string", "title": "Database",
        "description": "Which database?\nSQLite: small\nPostgreSQL: big",
        "enum": ["SQLite", "PostgreSQL"]});
    let text = render_field(&field("q1", &asked, true), &asked);
    assert_eq!(
        text,
        "\n[Database] Which database?\n  1. SQLite: small\n  2. PostgreSQL: big\na number, or your own answer: "
    );
    // A description listing other options than the values the numbers send is shown as
    // text; the numbered list is the values themselves.
    let spoof = json!({"type": "string", "description": "Continue?\nCancel\nKeep my files",
        "enum": ["delete everything", "format disk"]});
    let text = render_field(&field("q", &spoof, true), &spoof);
    assert!(
        text.contains("  | Cancel\n  | Keep my files\n  1. delete everything\n  2. format disk\n"),
        "{text}"
    );
}

#[test]
fn escapes_in_messages_titles_options_and_defaults_are_spelled_out() {
    let params = json!({"message": "Pick\x1b]52;c;ZXZpbA==\x07 one\nsecond line"});
    assert!(
        render_message(&params).starts_with(
            "\n? a question for you:\n  | Pick\\x1b]52;c;ZXZpbA==\\x07 one\n  | second line\n"
        ),
        "{}",
        render_message(&params)
    );
    let schema = json!({"type": "array", "title": "T\u{202e}x",
        "description": "Q\x1b[2J?", "items": {"enum": ["a\u{9b}31m", "b"]},
        "default": ["\x1b[31m"]});
    let f = field("k", &schema, true);
    assert_eq!(
        typed(&f, "1"),
        Typed::Value(json!(["a\u{9b}31m"])),
        "the values sent are unchanged"
    );
    let text = render_field(&f, &schema);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("[T\\u{202e}x] Q\\x1b[2J?"), "{text}");
    assert!(text.contains("1. a\\u{9b}31m"), "{text}");
}
