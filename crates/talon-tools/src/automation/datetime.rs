//! `datetime`: the current date and time in any IANA time zone (UTC by default).
//!
//! Models have no clock; this is the one they should use. The time zone database is compiled in
//! (jiff's bundled tzdb), so the answer does not depend on the host's `/usr/share/zoneinfo`.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use schemars::JsonSchema;
use serde::Deserialize;
use talon_core::{Authorized, SideEffect, Tool, ToolOutput, ToolSpec};

/// Input of [`Datetime`].
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatetimeInput {
    /// IANA time zone name such as "Europe/Berlin" or "America/New_York". Defaults to UTC.
    #[serde(default)]
    pub timezone: Option<String>,
}

/// The `datetime` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct Datetime;

/// Formats `now` in `timezone` (or UTC); the error text tells the model how to fix the name.
pub fn describe(now: Timestamp, timezone: Option<&str>) -> Result<String, String> {
    let name = timezone
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("UTC");
    let tz = TimeZone::get(name).map_err(|_| {
        format!(
            "unknown time zone {name:?}: use an IANA name such as \"UTC\", \"Europe/Berlin\", \"America/New_York\" or \"Asia/Ho_Chi_Minh\""
        )
    })?;
    let zoned = now.to_zoned(tz);
    Ok(format!(
        "Current date and time: {} ({})\nTime zone: {name} (UTC{})\nISO 8601: {}\nUnix timestamp: {}",
        zoned.strftime("%A, %B %-d, %Y %H:%M:%S"),
        zoned.strftime("%Z"),
        zoned.strftime("%:z"),
        zoned.strftime("%Y-%m-%dT%H:%M:%S%:z"),
        now.as_second(),
    ))
}

impl Tool for Datetime {
    type Input = DatetimeInput;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "datetime",
            "Get the current date and time. Optionally pass an IANA time zone (for example \
             \"Europe/Berlin\"); the default is UTC. Use this instead of guessing today's date.",
            SideEffect::None,
        )
        .in_group("automation")
    }

    async fn execute(&self, call: Authorized<DatetimeInput>) -> ToolOutput {
        match describe(Timestamp::now(), call.input().timezone.as_deref()) {
            Ok(text) => ToolOutput::text(text),
            Err(message) => ToolOutput::error(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        // 2026-11-22T15:04:05Z, a Sunday.
        Timestamp::from_second(1_795_359_845).expect("valid")
    }

    #[test]
    fn utc_by_default() {
        let text = describe(at(), None).expect("utc");
        assert!(
            text.contains("Sunday, November 22, 2026 15:04:05 (UTC)"),
            "{text}"
        );
        assert!(
            text.contains("ISO 8601: 2026-11-22T15:04:05+00:00"),
            "{text}"
        );
        assert!(text.contains("Unix timestamp: 1795359845"), "{text}");
        assert_eq!(describe(at(), Some("  ")), describe(at(), None));
    }

    #[test]
    fn iana_zones_with_dst_rules() {
        let berlin = describe(at(), Some("Europe/Berlin")).expect("berlin");
        assert!(berlin.contains("16:04:05 (CET)"), "{berlin}");
        assert!(berlin.contains("UTC+01:00"), "{berlin}");
        let ny = describe(
            Timestamp::from_second(1_784_000_000).expect("valid"),
            Some("America/New_York"),
        )
        .expect("ny");
        assert!(ny.contains("(EDT)"), "July is daylight time: {ny}");
        let hcm = describe(at(), Some("Asia/Ho_Chi_Minh")).expect("hcm");
        assert!(hcm.contains("22:04:05"), "{hcm}");
    }

    #[test]
    fn unknown_zone_is_a_clear_error() {
        let err = describe(at(), Some("Mars/Olympus")).expect_err("unknown");
        assert!(
            err.starts_with("unknown time zone \"Mars/Olympus\": use an IANA name"),
            "{err}"
        );
    }
}
