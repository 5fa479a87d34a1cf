//! Tests of the parts of the walk that build one command (how a redirection is read).

use super::*;

#[test]
fn redirect_kinds() {
    let fd = Word::literal("1");
    let file = Word::literal("out");
    assert_eq!(redirect_kind(">&", &fd), RedirectKind::Duplicate);
    assert_eq!(redirect_kind(">&", &file), RedirectKind::Write);
    assert_eq!(redirect_kind(">>", &file), RedirectKind::Append);
    assert_eq!(redirect_kind("<", &file), RedirectKind::Read);
    assert_eq!(redirect_kind("&>", &file), RedirectKind::Write);
}

#[test]
fn substitution_syntax_and_zsh() {
    assert!(has_subst_syntax("a[$(id)]"));
    assert!(has_subst_syntax("`id`"));
    assert!(!has_subst_syntax("$HOME"));
    assert!(zsh_only("ls *(e:rm x:)"));
    assert!(zsh_only("cat =(ls)"));
    assert!(!zsh_only("echo $(ls) && (cd x; ls)"));
}
