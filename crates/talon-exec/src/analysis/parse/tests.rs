//! Tests of the walk over the tree: the segments, argument vectors and unknowns it reports.

use super::super::analyze;

fn argvs(script: &str) -> Vec<Vec<String>> {
    analyze(script)
        .segments
        .into_iter()
        .map(|s| s.argv)
        .collect()
}

#[test]
fn splits_lists_pipelines_and_groups() {
    let a = analyze("git status && npm test | tee out; (cd x; ls) & { pwd; }\necho done");
    assert!(a.unknown.is_none(), "{:?}", a.unknown);
    let programs: Vec<_> = a.segments.iter().filter_map(|s| s.program()).collect();
    assert_eq!(programs, ["git", "npm", "tee", "cd", "ls", "pwd", "echo"]);
    let npm = &a.segments[1];
    let tee = &a.segments[2];
    assert_eq!(npm.pipeline.map(|p| p.index), Some(0));
    assert_eq!(tee.pipeline.map(|p| p.index), Some(1));
}

#[test]
fn substitutions_and_control_flow_are_segments() {
    let got = argvs(
        "echo $(id -u) `whoami` <(ls) ; for f in $(ls); do rm \"$f\"; done; \
         if test -f x; then cat x; else true; fi; case $1 in a) pwd;; esac; \
         while read l; do echo \"$l\"; done < in; f() { date; }; x=$(hostname)",
    );
    let programs: Vec<&str> = got
        .iter()
        .filter_map(|a| a.first().map(String::as_str))
        .collect();
    for p in [
        "id", "whoami", "ls", "echo", "rm", "test", "cat", "true", "pwd", "read", "date",
        "hostname",
    ] {
        assert!(programs.contains(&p), "{p} missing from {programs:?}");
    }
}

#[test]
fn literal_words_are_resolved() {
    let a = analyze(r#"r''m -rf '/' "a b" \rm $'\x72m'"#);
    assert!(a.unknown.is_none());
    assert_eq!(a.segments[0].argv, ["rm", "-rf", "/", "a b", "rm", "rm"]);
    assert!(a.segments[0].dynamic.iter().all(|d| !d));
}

#[test]
fn dynamic_command_names_are_unknown() {
    for script in [
        "$CMD -rf /",
        "cat$IFS/etc/passwd",
        "$(echo rm) -rf /",
        "`echo rm` x",
        "/???/?m -rf /",
        "{rm,-rf,/}",
        "\"$X\"",
        "r\\\nm -rf /",
    ] {
        let a = analyze(script);
        assert!(a.unknown.is_some(), "{script:?} should be unknown");
    }
}

#[test]
fn redirects_are_recorded() {
    let a = analyze("echo hi > out.txt 2>&1; cat < in; sort >> log; echo x >&file");
    let r = &a.segments[0].redirects;
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].target, "out.txt");
    assert!(r[0].writes_file());
    assert!(!r[1].writes_file());
    assert!(!a.segments[1].writes_files());
    assert!(a.segments[2].writes_files());
    assert!(a.segments[3].writes_files());
}

#[test]
fn heredocs_and_continuations() {
    let a = analyze("cat <<'EOF' && rm x\nhello $(id)\nEOF\necho done");
    assert!(a.unknown.is_none(), "{:?}", a.unknown);
    let programs: Vec<_> = a.segments.iter().filter_map(|s| s.program()).collect();
    assert_eq!(programs, ["cat", "rm", "echo"]);
    let body = &a.segments[0].redirects[0];
    assert_eq!(body.target, "hello $(id)\n");
    let b = analyze("cat <<EOF\n$(id)\nEOF");
    assert_eq!(b.segments[0].program(), Some("id"));
}

#[test]
fn arithmetic_injection_is_unknown() {
    assert!(analyze("echo $[ x='a[$(touch F)]', x ]").unknown.is_some());
    assert!(analyze("x='a[$(touch F)]'; echo $((x))").unknown.is_some());
    assert!(analyze("x='a[$(id)]'; [[ $x -eq 1 ]]").unknown.is_some());
    assert!(
        analyze("for ((i=0;i<3;i++)); do echo $i; done")
            .unknown
            .is_none()
    );
    assert!(analyze("echo ${x@P}").unknown.is_some());
    assert!(
        analyze("read x <<< 'a[$(id)]'; echo $((x))")
            .unknown
            .is_some()
    );
    assert!(analyze("arr=('a[$(id)]'); echo $((arr))").unknown.is_some());
    // Data that is only written to a file, or substitutions that run anyway, are fine.
    let notes = "cat > notes <<'EOF'\n$(not run)\nEOF\nn=$(wc -l < notes); echo $((n + 1))";
    assert!(
        analyze(notes).unknown.is_none(),
        "{:?}",
        analyze(notes).unknown
    );
}

#[test]
fn too_many_segments_is_unknown() {
    let script = "true;".repeat(super::MAX_SEGMENTS + 1);
    let a = analyze(&script);
    assert!(a.unknown.is_some());
    assert_eq!(a.segments.len(), super::MAX_SEGMENTS);
}

#[test]
fn assignments_and_declarations() {
    let a = analyze("A=1 B=$(id) make; export LD_PRELOAD=/x.so; X=2; local y");
    assert!(a.unknown.is_none(), "{:?}", a.unknown);
    let make = a
        .segments
        .iter()
        .find(|s| s.program() == Some("make"))
        .expect("make");
    assert_eq!(make.assignments.len(), 2);
    assert!(make.assignments[1].dynamic);
    let export = a
        .segments
        .iter()
        .find(|s| s.program() == Some("export"))
        .expect("export");
    assert_eq!(export.assignments[0].name, "LD_PRELOAD");
    assert!(
        a.segments
            .iter()
            .any(|s| s.kind == super::SegmentKind::Assignment)
    );
    assert!(analyze("export $X").unknown.is_some());
}

#[test]
fn deep_nesting_is_unknown_without_overflowing() {
    for script in [
        format!("{}x{}", "$(".repeat(3000), ")".repeat(3000)),
        format!("{}x{}", "(".repeat(3000), ")".repeat(3000)),
        format!("{}x{}", "{ ".repeat(3000), "; }".repeat(3000)),
        format!("echo {}x{}", "\"$(echo ".repeat(500), ")\"".repeat(500)),
    ] {
        assert!(analyze(&script).unknown.is_some());
    }
}

#[test]
fn text_the_parser_skips_is_unknown() {
    assert!(
        analyze("python3 - <<'EOF'\nprint(1)\nEOF")
            .unknown
            .is_some()
    );
    for fine in [
        "cat <<EOF > out && rm x\nhello $x `id`\nEOF\necho done",
        "echo \"a $b c\" 'd' $'e' ${f:-g} $((1 + 2)) # note",
        "ls \\\n  -la",
        "if true; then :; fi; for i in a b; do echo \"$i\"; done",
    ] {
        let a = analyze(fine);
        assert!(a.unknown.is_none(), "{fine:?}: {:?}", a.unknown);
    }
}

#[test]
fn parse_errors_are_unknown() {
    assert!(analyze("echo 'unterminated").unknown.is_some());
    assert!(analyze("if then fi (").unknown.is_some());
    assert!(analyze("a\0b").unknown.is_some());
}
