//! When a job runs: GoClaw's three schedule kinds, read in the job's IANA time zone.
//!
//! - `at`: once, at an RFC 3339 instant or a local date and time in the job's zone;
//! - `every`: an interval (`30m`, `2h`, `1d`, `1h30m`, or milliseconds), at least a minute,
//!   counted from the last scheduled time, so runs keep their cadence instead of drifting by
//!   however long each run took;
//! - `cron`: 5 fields, or 6 with a leading seconds field (one second value: a job runs at most
//!   once a minute), evaluated by croner in the zone, so daylight-saving gaps and folds follow
//!   the library's rules, not ad-hoc arithmetic here.
//!
//! Pure functions of their inputs (no clock is read here), so every rule is unit-tested.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::StoreError;
use crate::fields::invalid;

/// The shortest interval of an `every` job.
pub const MIN_INTERVAL_MS: i64 = 60_000;
/// The longest interval of an `every` job (a year).
pub const MAX_INTERVAL_MS: i64 = 366 * 24 * 3_600_000;

/// The schedule kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    At,
    Every,
    Cron,
}

impl ScheduleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::At => "at",
            Self::Every => "every",
            Self::Cron => "cron",
        }
    }

    /// The kind named `name`; the error lists the kinds.
    pub fn parse(name: &str) -> Result<Self, StoreError> {
        match name {
            "at" => Ok(Self::At),
            "every" => Ok(Self::Every),
            "cron" => Ok(Self::Cron),
            other => Err(invalid(
                "schedule kind",
                format!("{other:?}: use at (once), every (an interval) or cron (an expression)"),
            )),
        }
    }
}

/// A job's schedule, checked: only the field of its kind is set.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Schedule {
    pub kind: ScheduleKind,
    /// `cron`: the expression as given.
    pub expression: String,
    /// `every`: the interval.
    pub interval_ms: i64,
    /// `at`: the instant (Unix ms).
    pub run_at: i64,
    /// The IANA zone cron expressions and local `at` times are read in.
    pub timezone: String,
}

/// The zone named `name` (`UTC` when empty); the error says what a zone name looks like.
pub fn time_zone(name: &str) -> Result<TimeZone, StoreError> {
    let name = name.trim();
    let name = if name.is_empty() { "UTC" } else { name };
    TimeZone::get(name).map_err(|_| {
        invalid(
            "time zone",
            format!(
                "{name:?} is not an IANA time zone: use a name such as UTC, Europe/Berlin, America/New_York or Asia/Ho_Chi_Minh"
            ),
        )
    })
}

impl Schedule {
    /// Parses `value` as a schedule of `kind` in `timezone` (empty: UTC). Every error says
    /// what the value should look like.
    pub fn parse(kind: ScheduleKind, value: &str, timezone: &str) -> Result<Self, StoreError> {
        let tz = time_zone(timezone)?;
        let timezone = tz.iana_name().unwrap_or("UTC").to_string();
        let value = value.trim();
        let mut schedule = Self {
            kind,
            expression: String::new(),
            interval_ms: 0,
            run_at: 0,
            timezone,
        };
        match kind {
            ScheduleKind::At => schedule.run_at = parse_at(value, &tz)?,
            ScheduleKind::Every => schedule.interval_ms = parse_interval(value)?,
            ScheduleKind::Cron => {
                cron(value)?;
                schedule.expression = value.to_string();
            }
        }
        Ok(schedule)
    }

    /// A schedule as stored (checked when it was written). Not parsed again here: listing
    /// 10,000 jobs should cost a read, not 10,000 time-zone lookups; a stored expression that
    /// no longer parses simply has no next time.
    pub(crate) fn stored(
        kind: &str,
        expression: &str,
        interval_ms: i64,
        run_at: i64,
        timezone: &str,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            kind: ScheduleKind::parse(kind)?,
            expression: expression.to_string(),
            interval_ms,
            run_at,
            timezone: timezone.to_string(),
        })
    }

    /// The job's first scheduled time, for a job created or rescheduled at `now`: an `at` time
    /// as given (in the past: due at once), `now` plus the interval, the expression's next time.
    pub fn first_run(&self, now: i64) -> Option<i64> {
        match self.kind {
            ScheduleKind::At => Some(self.run_at),
            ScheduleKind::Every => Some(now.saturating_add(self.interval_ms)),
            ScheduleKind::Cron => self.cron_after(now),
        }
    }

    /// The scheduled time after the run that was due at `due` and ends at `now`: strictly after
    /// `now`, so a job that missed many times (the gateways were down) runs once, not once per
    /// missed time. `None` for `at` (it ran).
    pub fn run_after(&self, due: i64, now: i64) -> Option<i64> {
        match self.kind {
            ScheduleKind::At => None,
            ScheduleKind::Every => {
                let interval = self.interval_ms.max(1);
                let base = due.min(now);
                let steps = (now - base) / interval + 1;
                Some(base.saturating_add(steps.saturating_mul(interval)))
            }
            ScheduleKind::Cron => self.cron_after(due.max(now)),
        }
    }

    /// The expression's first time strictly after `after` in the job's zone.
    fn cron_after(&self, after: i64) -> Option<i64> {
        let cron = cron(&self.expression).ok()?;
        let tz = time_zone(&self.timezone).ok()?;
        let start = Timestamp::from_millisecond(after).ok()?.to_zoned(tz);
        let next = cron.find_next_occurrence(&start, false).ok()?;
        Some(next.timestamp().as_millisecond())
    }

    /// The schedule in a few words (`every 30m`, `cron 0 9 * * * Europe/Berlin`, `at …`).
    pub fn describe(&self) -> String {
        match self.kind {
            ScheduleKind::At => format!("at {}", local_time(self.run_at, &self.timezone)),
            ScheduleKind::Every => format!("every {}", interval_text(self.interval_ms)),
            ScheduleKind::Cron => format!("cron {} ({})", self.expression, self.timezone),
        }
    }
}

/// `ms` (Unix) as a date and time in `timezone` (`2026-12-01 09:00:00 CET`); `-` for 0.
pub fn local_time(ms: i64, timezone: &str) -> String {
    if ms == 0 {
        return "-".into();
    }
    Timestamp::from_millisecond(ms)
        .ok()
        .zip(time_zone(timezone).ok())
        .map_or_else(
            || ms.to_string(),
            |(ts, tz)| ts.to_zoned(tz).strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        )
}

/// An instant: RFC 3339 with an offset, else a local date and time read in `tz` (a time that
/// a daylight-saving change skips or repeats resolves as jiff's "compatible" rule says: later
/// in a gap, earlier in a fold).
fn parse_at(value: &str, tz: &TimeZone) -> Result<i64, StoreError> {
    if let Ok(ts) = value.parse::<Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    let local = value
        .parse::<jiff::civil::DateTime>()
        .map_err(|_| {
            invalid(
                "at time",
                format!(
                    "{value:?}: give an RFC 3339 time such as 2026-12-01T09:00:00Z, or a local date and time such as 2026-12-01 09:00 (read in the job's time zone)"
                ),
            )
        })?;
    let zoned = local
        .to_zoned(tz.clone())
        .map_err(|e| invalid("at time", format!("{value:?}: {e}")))?;
    Ok(zoned.timestamp().as_millisecond())
}

/// An interval: digits alone are milliseconds; otherwise numbers with units (`ms`, `s`, `m`,
/// `h`, `d`), added up (`1h30m`).
pub fn parse_interval(value: &str) -> Result<i64, StoreError> {
    let bad = || {
        invalid(
            "interval",
            format!(
                "{value:?}: give an interval such as 30m, 2h, 1d or 1h30m (at least 1 minute), or milliseconds such as 600000"
            ),
        )
    };
    let text: String = value.chars().filter(|c| !c.is_whitespace()).collect();
    if text.is_empty() {
        return Err(bad());
    }
    let ms = if text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<i64>().map_err(|_| bad())?
    } else {
        let mut total: i64 = 0;
        let mut rest = text.as_str();
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(bad());
            }
            let number: i64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            let unit = match &rest[..unit_len] {
                "ms" => 1,
                "s" | "sec" => 1_000,
                "m" | "min" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(bad()),
            };
            rest = &rest[unit_len..];
            total = number
                .checked_mul(unit)
                .and_then(|n| total.checked_add(n))
                .ok_or_else(bad)?;
        }
        total
    };
    if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(&ms) {
        return Err(invalid(
            "interval",
            format!(
                "{value:?} is {}: use at least 1 minute and at most 366 days",
                interval_text(ms)
            ),
        ));
    }
    Ok(ms)
}

/// `ms` as the largest units that divide it (`1h30m`, `45s`, `1500ms`).
pub fn interval_text(ms: i64) -> String {
    let mut out = String::new();
    let mut rest = ms;
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    if rest > 0 || out.is_empty() {
        out.push_str(&format!("{rest}ms"));
    }
    out
}

/// Parses a cron expression: 5 fields, or 6 whose first (seconds) is one number.
fn cron(expression: &str) -> Result<Cron, StoreError> {
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let bad = |why: String| {
        invalid(
            "cron expression",
            format!(
                "{expression:?}: {why}; give 5 fields (minute hour day-of-month month day-of-week) such as \"0 9 * * MON-FRI\", or 6 with a leading seconds field"
            ),
        )
    };
    if fields.len() == 6 && !fields[0].parse::<u8>().is_ok_and(|s| s < 60) {
        return Err(bad(
            "the seconds field must be one second (0-59): a job runs at most once a minute".into(),
        ));
    }
    if !(fields.len() == 5
        || fields.len() == 6
        || (fields.len() == 1 && fields[0].starts_with('@')))
    {
        return Err(bad(format!("it has {} fields", fields.len())));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expression)
        .map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc3339: &str) -> i64 {
        rfc3339.parse::<Timestamp>().unwrap().as_millisecond()
    }

    #[test]
    fn intervals_take_units_or_milliseconds() {
        assert_eq!(parse_interval("30m").unwrap(), 1_800_000);
        assert_eq!(parse_interval("2h").unwrap(), 7_200_000);
        assert_eq!(parse_interval("1d").unwrap(), 86_400_000);
        assert_eq!(parse_interval("1h30m").unwrap(), 5_400_000);
        assert_eq!(parse_interval("90s").unwrap(), 90_000);
        assert_eq!(parse_interval("600000").unwrap(), 600_000);
        assert_eq!(interval_text(5_400_000), "1h30m");
        let short = parse_interval("30s").unwrap_err().to_string();
        assert!(short.contains("at least 1 minute"), "{short}");
        for bad in ["", "soon", "5x", "m5", "1.5h"] {
            let e = parse_interval(bad).unwrap_err().to_string();
            assert!(e.contains("such as 30m"), "{bad}: {e}");
        }
    }

    #[test]
    fn at_takes_rfc3339_or_a_local_time_in_the_zone() {
        let utc = Schedule::parse(ScheduleKind::At, "2026-12-01T09:00:00Z", "").unwrap();
        assert_eq!(utc.run_at, ms("2026-12-01T09:00:00Z"));
        assert_eq!(utc.timezone, "UTC");
        let berlin =
            Schedule::parse(ScheduleKind::At, "2026-12-01 09:00", "Europe/Berlin").unwrap();
        assert_eq!(berlin.run_at, ms("2026-12-01T08:00:00Z"), "CET is UTC+1");
        let summer =
            Schedule::parse(ScheduleKind::At, "2026-07-01T09:00", "Europe/Berlin").unwrap();
        assert_eq!(summer.run_at, ms("2026-07-01T07:00:00Z"), "CEST is UTC+2");
        assert_eq!(berlin.first_run(0), Some(berlin.run_at));
        assert_eq!(berlin.run_after(berlin.run_at, berlin.run_at + 5), None);
        let e = Schedule::parse(ScheduleKind::At, "tomorrow", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("RFC 3339"), "{e}");
    }

    #[test]
    fn unknown_zones_are_refused_clearly() {
        let e = Schedule::parse(ScheduleKind::Cron, "0 9 * * *", "Mars/Olympus")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("Mars/Olympus") && e.contains("IANA") && e.contains("Europe/Berlin"),
            "{e}"
        );
    }

    #[test]
    fn every_keeps_its_cadence_and_never_catches_up_one_run_per_miss() {
        let every = Schedule::parse(ScheduleKind::Every, "10m", "").unwrap();
        let start = ms("2026-01-01T00:00:00Z");
        assert_eq!(every.first_run(start), Some(start + 600_000));
        // Ran 3 s late: the next is still on the 10-minute grid.
        assert_eq!(
            every.run_after(start + 600_000, start + 603_000),
            Some(start + 1_200_000)
        );
        // Down for 5 hours: one run now, then the next grid time after now.
        let due = start + 600_000;
        let now = due + 5 * 3_600_000 + 1;
        let next = every.run_after(due, now).unwrap();
        assert!(next > now && next - now <= 600_000, "{next} after {now}");
        assert_eq!((next - due) % 600_000, 0);
    }

    #[test]
    fn cron_runs_in_its_zone_across_daylight_saving() {
        let nine = Schedule::parse(ScheduleKind::Cron, "0 9 * * *", "America/New_York").unwrap();
        // Before the March change 09:00 EST is 14:00 UTC; after it, 09:00 EDT is 13:00 UTC.
        assert_eq!(
            nine.first_run(ms("2026-03-07T15:00:00Z")),
            Some(ms("2026-03-08T13:00:00Z")),
            "8 March 2026 is the first day of EDT"
        );
        assert_eq!(
            nine.first_run(ms("2026-03-06T15:00:00Z")),
            Some(ms("2026-03-07T14:00:00Z"))
        );
        // 02:30 does not exist in Berlin on 29 March 2026: the job still runs once that day
        // (the library moves it past the gap), and the next day at 02:30 CEST.
        let gap = Schedule::parse(ScheduleKind::Cron, "30 2 * * *", "Europe/Berlin").unwrap();
        let first = gap.first_run(ms("2026-03-28T12:00:00Z")).unwrap();
        assert!(
            first >= ms("2026-03-29T01:00:00Z") && first < ms("2026-03-29T02:00:00Z"),
            "the 29th, after the gap: {first}"
        );
        assert_eq!(
            gap.run_after(first, first),
            Some(ms("2026-03-30T00:30:00Z"))
        );
        // 02:30 happens twice on 25 October 2026: the job runs once.
        let fold_start = ms("2026-10-24T12:00:00Z");
        let a = gap.first_run(fold_start).unwrap();
        let b = gap.run_after(a, a).unwrap();
        assert!(
            b - a > 23 * 3_600_000,
            "not twice in the fold: {a} then {b}"
        );
    }

    #[test]
    fn cron_takes_five_fields_or_one_second_value() {
        let every_minute = Schedule::parse(ScheduleKind::Cron, "* * * * *", "").unwrap();
        let t = ms("2026-01-01T00:00:30Z");
        assert_eq!(every_minute.first_run(t), Some(ms("2026-01-01T00:01:00Z")));
        let seconds = Schedule::parse(ScheduleKind::Cron, "15 * * * * *", "").unwrap();
        assert_eq!(seconds.first_run(t), Some(ms("2026-01-01T00:01:15Z")));
        assert!(Schedule::parse(ScheduleKind::Cron, "@daily", "").is_ok());
        for bad in [
            "* * * * * * *",
            "*/5 * * * * *",
            "61 * * * *",
            "0 9 * *",
            "hello",
        ] {
            let e = Schedule::parse(ScheduleKind::Cron, bad, "")
                .unwrap_err()
                .to_string();
            assert!(e.contains("5 fields"), "{bad}: {e}");
        }
    }

    #[test]
    fn schedules_describe_themselves() {
        let every = Schedule::parse(ScheduleKind::Every, "2h", "").unwrap();
        assert_eq!(every.describe(), "every 2h");
        let cron = Schedule::parse(ScheduleKind::Cron, "0 9 * * 1", "Europe/Berlin").unwrap();
        assert_eq!(cron.describe(), "cron 0 9 * * 1 (Europe/Berlin)");
        let at = Schedule::parse(ScheduleKind::At, "2026-12-01T09:00:00Z", "Asia/Tokyo").unwrap();
        assert_eq!(at.describe(), "at 2026-12-01 18:00:00 JST");
    }
}
