//! Splitting a URL into the parts Talon's rules look at, without resolving or normalising
//! anything: the credential destinations (`talon_exec::credentialed`) and the configuration's
//! redaction (`talon_runtime::gateway_tool`) read URLs the same way.

/// The parts of `scheme://[userinfo@]host[:port][/path][?query][#fragment]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlParts<'a> {
    pub scheme: &'a str,
    /// What stands before the last `@` of the authority, if anything does.
    pub userinfo: Option<&'a str>,
    /// `host[:port]`, brackets of an IPv6 literal kept.
    pub host_port: &'a str,
    /// The path, query and fragment as written (empty or starting with `/`, `?` or `#`).
    pub rest: &'a str,
}

/// `text`'s parts when it is a URL with a scheme of letters, digits, `+`, `.` or `-`.
pub fn url_parts(text: &str) -> Option<UrlParts<'_>> {
    let (scheme, after) = text.split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
    {
        return None;
    }
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority),
    };
    Some(UrlParts {
        scheme,
        userinfo,
        host_port,
        rest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_their_parts() {
        let p = url_parts("https://u:pw@example.com:8443/a/b?x=1#f").unwrap();
        assert_eq!(
            (p.scheme, p.userinfo, p.host_port, p.rest),
            ("https", Some("u:pw"), "example.com:8443", "/a/b?x=1#f")
        );
        let p = url_parts("ssh://git@[::1]:22").unwrap();
        assert_eq!(
            (p.userinfo, p.host_port, p.rest),
            (Some("git"), "[::1]:22", "")
        );
        assert!(url_parts("not a url://x").is_none());
        assert!(url_parts("git@github.com:o/r").is_none());
    }
}
