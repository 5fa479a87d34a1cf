//! `SKILL.md`: YAML frontmatter (the keys Claude Code and GoClaw read: `name`, `description`,
//! `tags`, `allowed-tools`, `model`, `license`, `version`, `metadata`, …) and the body, the
//! skill's instructions. Every mistake is named with its line, so an author (or a model
//! publishing a skill) can fix it.
//!
//! The frontmatter is the subset of YAML skills use: `key: value` lines (values optionally
//! quoted), lists as `[a, b]` or `- item` lines, folded or literal blocks (`>` / `|`) and one
//! level of nested `key: value` lines (`metadata:`). Anything else is an error, not a guess.

use serde_json::{Map, Value};

/// The longest `SKILL.md` read.
pub const MAX_SKILL_MD_BYTES: usize = 64 * 1024;
/// The longest name (Claude Code's limit).
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description (Claude Code's limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMd {
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    /// Every frontmatter key, as written (strings, lists of strings, nested maps).
    pub frontmatter: Map<String, Value>,
    /// The body.
    pub instructions: String,
}

/// Whether `name` is a valid skill name: lowercase letters, digits and hyphens, at most
/// [`MAX_NAME_CHARS`], not starting or ending with a hyphen.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn unquote(value: &str) -> String {
    let v = value.trim();
    v.strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v)
        .to_string()
}

fn inline_list(value: &str) -> Option<Vec<Value>> {
    let inner = value.trim().strip_prefix('[')?.strip_suffix(']')?;
    Some(
        inner
            .split(',')
            .map(unquote)
            .filter(|s| !s.is_empty())
            .map(Value::String)
            .collect(),
    )
}

/// Parses `SKILL.md`'s text.
pub fn parse(text: &str) -> Result<SkillMd, String> {
    if text.len() > MAX_SKILL_MD_BYTES {
        return Err(format!(
            "SKILL.md is {} bytes, at most {MAX_SKILL_MD_BYTES}: move details into other files of the skill",
            text.len()
        ));
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.first().map(|l| l.trim_end()) != Some("---") {
        return Err("SKILL.md must start with a frontmatter block: a `---` line, `name: …` and `description: …` lines, and a closing `---` line".into());
    }
    let Some(end) = lines.iter().skip(1).position(|l| l.trim_end() == "---") else {
        return Err("the frontmatter is not closed: add a `---` line after its last key".into());
    };
    let front = &lines[1..=end];
    let instructions = lines[end + 2..].join("\n").trim().to_string();
    let mut map = Map::new();
    let mut i = 0;
    while i < front.len() {
        let number = i + 2;
        let line = front[i];
        i += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err(format!(
                "frontmatter line {number} (`{}`): indented, but not under a key that takes a list or a block",
                line.trim()
            ));
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!(
                "frontmatter line {number} (`{}`): not `key: value`",
                line.trim()
            ));
        };
        let key = key.trim().to_string();
        if key.is_empty() || key.contains(' ') {
            return Err(format!(
                "frontmatter line {number}: `{key}` is not a key (one word, like `name`)"
            ));
        }
        if map.contains_key(&key) {
            return Err(format!("frontmatter line {number}: `{key}` is given twice"));
        }
        let value = value.trim();
        // The indented lines that follow belong to this key.
        let mut block = Vec::new();
        while i < front.len() && (front[i].starts_with([' ', '\t']) || front[i].trim().is_empty()) {
            block.push(front[i]);
            i += 1;
        }
        while block.last().is_some_and(|l| l.trim().is_empty()) {
            block.pop();
        }
        let parsed = if matches!(value, ">" | ">-" | "|" | "|-") {
            let joiner = if value.starts_with('>') { " " } else { "\n" };
            Value::String(
                block
                    .iter()
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(joiner)
                    .trim()
                    .to_string(),
            )
        } else if !value.is_empty() {
            if !block.is_empty() {
                return Err(format!(
                    "frontmatter line {}: `{key}` has a value and indented lines under it",
                    number
                ));
            }
            match inline_list(value) {
                Some(items) => Value::Array(items),
                None => Value::String(unquote(value)),
            }
        } else if block
            .iter()
            .all(|l| l.trim().is_empty() || l.trim().starts_with("- "))
        {
            Value::Array(
                block
                    .iter()
                    .filter_map(|l| l.trim().strip_prefix("- "))
                    .map(|item| Value::String(unquote(item)))
                    .collect(),
            )
        } else {
            let mut nested = Map::new();
            for (offset, l) in block.iter().enumerate() {
                if l.trim().is_empty() {
                    continue;
                }
                let Some((k, v)) = l.trim().split_once(':') else {
                    return Err(format!(
                        "frontmatter line {} (`{}`): under `{key}`, not `key: value` or `- item`",
                        number + 1 + offset,
                        l.trim()
                    ));
                };
                nested.insert(k.trim().to_string(), Value::String(unquote(v)));
            }
            Value::Object(nested)
        };
        map.insert(key, parsed);
    }
    let text_of = |key: &str| -> Result<Option<String>, String> {
        match map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!(
                "frontmatter: `{key}` must be text, not a list or a map"
            )),
        }
    };
    let name = text_of("name")?
        .filter(|n| !n.is_empty())
        .ok_or("the frontmatter has no `name` (lowercase letters, digits and hyphens)")?;
    if !valid_name(&name) {
        return Err(format!(
            "frontmatter: `name` {name:?} must be lowercase letters, digits and hyphens, at most {MAX_NAME_CHARS} characters"
        ));
    }
    let description = text_of("description")?.filter(|d| !d.is_empty()).ok_or(
        "the frontmatter has no `description`: say what the skill does and when to use it",
    )?;
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "frontmatter: `description` is {chars} characters, at most {MAX_DESCRIPTION_CHARS}"
        ));
    }
    let tags = match map.get("tags") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(Value::String(s)) => s
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect(),
        Some(_) => return Err("frontmatter: `tags` must be a list".into()),
    };
    if instructions.is_empty() {
        return Err("SKILL.md has no instructions after its frontmatter".into());
    }
    Ok(SkillMd {
        name,
        description,
        tags,
        frontmatter: map,
        instructions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_and_goclaw_frontmatter_is_read() {
        let md = parse(
            "---\nname: pdf-forms\ndescription: >\n  Fill PDF forms.\n  Use for any form.\ntags: [pdf, forms]\nallowed-tools:\n  - Read\n  - Bash\nmetadata:\n  author: ann\n  version: \"2\"\n---\n\n# Filling forms\nRun the script.\n",
        )
        .unwrap();
        assert_eq!(md.name, "pdf-forms");
        assert_eq!(md.description, "Fill PDF forms. Use for any form.");
        assert_eq!(md.tags, ["pdf", "forms"]);
        assert_eq!(
            md.frontmatter["allowed-tools"],
            serde_json::json!(["Read", "Bash"])
        );
        assert_eq!(md.frontmatter["metadata"]["version"], "2");
        assert_eq!(md.instructions, "# Filling forms\nRun the script.");
    }

    #[test]
    fn mistakes_are_named() {
        let cases = [
            ("no frontmatter", "must start with a frontmatter block"),
            ("---\nname: x\n", "not closed"),
            ("---\ndescription: d\n---\nbody", "no `name`"),
            (
                "---\nname: Big Name\ndescription: d\n---\nbody",
                "lowercase letters",
            ),
            ("---\nname: ok\n---\nbody", "no `description`"),
            (
                "---\nname: ok\ndescription: d\nname: again\n---\nbody",
                "line 4: `name` is given twice",
            ),
            (
                "---\nname: ok\njust words\ndescription: d\n---\nbody",
                "line 3 (`just words`): not `key: value`",
            ),
            ("---\nname: ok\ndescription: d\n---\n", "no instructions"),
        ];
        for (text, why) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
        let long = format!(
            "---\nname: ok\ndescription: {}\n---\nbody",
            "d".repeat(1025)
        );
        assert!(
            parse(&long)
                .unwrap_err()
                .contains("1025 characters, at most 1024")
        );
        assert!(valid_name("a1-b") && !valid_name("-a") && !valid_name("a_b"));
    }
}
