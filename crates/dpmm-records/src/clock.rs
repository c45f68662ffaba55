//! Time as people write it: ISO 8601 dates and date-times (with or
//! without an offset) and Arrow dates and timestamps, put on steps of a
//! public calendar — `--step day|hour|week|month|<N>s`, `--start` (a local
//! date or date-time) and `--timezone` (an IANA zone, UTC by default).
//!
//! Each record's step depends on its own time value and the public
//! calendar alone (never on other records), so the stability of the
//! records' reading holds: one record is at most one step's record.
//!
//! * A value with an offset (`2017-03-05T22:10:00-06:00`, `…Z`, an Arrow
//!   timestamp with a time zone) is an instant, read on the zone's clock.
//! * A value without one (`2017-03-05`, `2017-03-05 22:10`, an Arrow date,
//!   a timestamp without a zone) is a wall-clock time in the zone.
//! * Days, weeks and months are counted on the zone's calendar (a day is
//!   a local date, 23 or 25 hours long across a change of clocks); hours
//!   and `<N>s` steps are elapsed time from the start's instant. A
//!   wall-clock time the zone skips (clocks going forward) is no time
//!   there: malformed for hour and second steps; one the zone repeats
//!   (clocks going back) is read as its first occurrence.
//! * Anything else, numbers included, is malformed.

use std::str::FromStr;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrowPrimitiveType};
use arrow_schema::{DataType, TimeUnit};
use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;

use crate::encode::is_null;
use crate::error::RecordsError;

/// The length of one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `N` seconds of elapsed time.
    Seconds(u32),
    /// An hour of elapsed time.
    Hour,
    /// A local calendar day.
    Day,
    /// Seven local calendar days.
    Week,
    /// A local calendar month.
    Month,
}

impl FromStr for Step {
    type Err = RecordsError;

    /// `day`, `hour`, `week`, `month`, or `<N>s` (`N` from 1 to 2³¹).
    fn from_str(s: &str) -> Result<Self, RecordsError> {
        let bad = || {
            RecordsError::BadTiming(format!(
                "--step must be day, hour, week, month or a number of seconds such as 900s, got \
                 '{s}'"
            ))
        };
        match s {
            "day" => Ok(Self::Day),
            "hour" => Ok(Self::Hour),
            "week" => Ok(Self::Week),
            "month" => Ok(Self::Month),
            _ => {
                let n: u32 = s
                    .strip_suffix('s')
                    .ok_or_else(bad)?
                    .parse()
                    .map_err(|_| bad())?;
                if n == 0 || n > 1 << 31 {
                    return Err(bad());
                }
                Ok(Self::Seconds(n))
            }
        }
    }
}

/// A public calendar of steps: `step`-long steps from `start`, a local
/// date-time in `zone`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calendar {
    step: Step,
    start: NaiveDateTime,
    /// `start`'s instant, in Unix seconds.
    start_seconds: i64,
    zone: Tz,
}

/// One record's time, before it is put on the calendar.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Moment {
    /// A wall-clock time in the calendar's zone.
    Local(NaiveDateTime),
    /// An instant, in Unix seconds (floored).
    Instant(i64),
}

impl Calendar {
    /// The calendar of `step`-long steps from `start` (a date,
    /// `2017-01-01`, or a local date-time, `2017-01-01T06:00`) in `zone`
    /// (an IANA name such as `America/Chicago`; `UTC`). Day, week and
    /// month steps start at a date's midnight, months on a first day.
    pub fn new(step: Step, start: &str, zone: &str) -> Result<Self, RecordsError> {
        let zone: Tz = zone.parse().map_err(|_| {
            RecordsError::BadTiming(format!(
                "--timezone: '{zone}' is not an IANA time zone (such as America/Chicago or UTC)"
            ))
        })?;
        let start_local = match parse_text(start.trim()) {
            Some(Moment::Local(t)) => t,
            _ => {
                return Err(RecordsError::BadTiming(format!(
                    "--start: '{start}' is not a date (2017-01-01) or a local date-time \
                     (2017-01-01T06:00) without an offset"
                )));
            }
        };
        let midnight = start_local.time() == chrono::NaiveTime::MIN;
        match step {
            Step::Day | Step::Week | Step::Month if !midnight => {
                return Err(RecordsError::BadTiming(
                    "--start: day, week and month steps start at a date (2017-01-01)".into(),
                ));
            }
            Step::Month if start_local.day() != 1 => {
                return Err(RecordsError::BadTiming(
                    "--start: month steps start on the first day of a month".into(),
                ));
            }
            _ => {}
        }
        // Elapsed-time steps start at an instant; calendar steps at a date,
        // whatever the zone's clocks do at its midnight.
        let calendar_step = matches!(step, Step::Day | Step::Week | Step::Month);
        let start_seconds = match instants_of(zone, start_local) {
            Instants::One(s) => s,
            Instants::Repeated(s) if calendar_step => s,
            Instants::None if calendar_step => 0,
            _ => {
                return Err(RecordsError::BadTiming(format!(
                    "--start: {start_local} is skipped or repeated by {zone}'s clocks"
                )));
            }
        };
        Ok(Self {
            step,
            start: start_local,
            start_seconds,
            zone,
        })
    }

    /// The step of one moment (negative: before the start), or `None`
    /// for a wall-clock time the zone skips under an elapsed-time step.
    fn step_of(&self, moment: Moment) -> Option<i64> {
        let local = |m: Moment| match m {
            Moment::Local(t) => Some(t),
            Moment::Instant(s) => self.wall_clock(s).map(|(t, _)| t),
        };
        match self.step {
            Step::Day | Step::Week => {
                let days = (local(moment)?.date() - self.start.date()).num_days();
                Some(if self.step == Step::Week {
                    days.div_euclid(7)
                } else {
                    days
                })
            }
            Step::Month => {
                let t = local(moment)?;
                let months = |y: i32, m: u32| i64::from(y) * 12 + i64::from(m);
                Some(months(t.year(), t.month0()) - months(self.start.year(), self.start.month0()))
            }
            Step::Hour | Step::Seconds(_) => {
                let seconds = match moment {
                    Moment::Instant(s) => s,
                    Moment::Local(t) => match instants_of(self.zone, t) {
                        Instants::One(s) | Instants::Repeated(s) => s,
                        Instants::None => return None,
                    },
                };
                let length = match self.step {
                    Step::Seconds(n) => i64::from(n),
                    _ => 3600,
                };
                Some(seconds.checked_sub(self.start_seconds)?.div_euclid(length))
            }
        }
    }

    /// When step `k` begins, as people write it: a date for day, week and
    /// month steps, a date-time with the zone's offset otherwise.
    pub fn label(&self, k: u64) -> String {
        let k = i64::try_from(k).unwrap_or(i64::MAX);
        match self.step {
            Step::Day | Step::Week => {
                let days = if self.step == Step::Week {
                    k.saturating_mul(7)
                } else {
                    k
                };
                self.start
                    .date()
                    .checked_add_signed(chrono::TimeDelta::try_days(days).unwrap_or_default())
                    .map_or_else(String::new, |d| d.format("%Y-%m-%d").to_string())
            }
            Step::Month => self
                .start
                .date()
                .checked_add_months(chrono::Months::new(u32::try_from(k).unwrap_or(u32::MAX)))
                .map_or_else(String::new, |d| d.format("%Y-%m-%d").to_string()),
            Step::Hour | Step::Seconds(_) => {
                let length = match self.step {
                    Step::Seconds(n) => i64::from(n),
                    _ => 3600,
                };
                k.checked_mul(length)
                    .and_then(|s| s.checked_add(self.start_seconds))
                    .and_then(|s| self.wall_clock(s))
                    .map_or_else(String::new, |(t, offset)| {
                        let offset = if offset.local_minus_utc() == 0 {
                            "Z".to_string()
                        } else {
                            offset.to_string()
                        };
                        format!("{}{offset}", t.format("%Y-%m-%dT%H:%M:%S"))
                    })
            }
        }
    }

    /// The zone's wall-clock time and offset at Unix second `s`, or `None`
    /// past the range of dates (chrono's `naive_local` would panic there).
    fn wall_clock(&self, s: i64) -> Option<(NaiveDateTime, chrono::FixedOffset)> {
        let utc = DateTime::<Utc>::from_timestamp(s, 0)?.naive_utc();
        let offset = self.zone.offset_from_utc_datetime(&utc).fix();
        Some((utc.checked_add_offset(offset)?, offset))
    }

    /// What the calendar is, for messages and the sidecar.
    pub fn describe(&self) -> String {
        let step = match self.step {
            Step::Seconds(n) => format!("{n}-second steps"),
            Step::Hour => "hours".into(),
            Step::Day => "days".into(),
            Step::Week => "weeks".into(),
            Step::Month => "months".into(),
        };
        format!("{step} from {} in {}", self.label(0), self.zone.name())
    }

    /// Each row's step (negative before the start), or `None` for a value
    /// that is no time: text that is not an ISO 8601 date or date-time, a
    /// number, a null, a wall-clock time the zone skips (elapsed-time
    /// steps).
    pub(crate) fn steps_of(&self, array: &dyn Array, out: &mut Vec<Option<i64>>) {
        let mut moments = Vec::with_capacity(array.len());
        read_moments(array, &mut moments);
        out.extend(moments.into_iter().map(|m| self.step_of(m?)));
    }
}

/// The instants a wall-clock time names in a zone.
enum Instants {
    /// None: the clocks skip it, or it is past the range of dates.
    None,
    /// One.
    One(i64),
    /// The earlier of two (the clocks repeat it).
    Repeated(i64),
}

/// The Unix seconds wall-clock time `t` names in `zone`, computed with
/// checked arithmetic (chrono's `from_local_datetime` can panic near the
/// ends of its range).
fn instants_of(zone: Tz, t: NaiveDateTime) -> Instants {
    let at = |o: <Tz as TimeZone>::Offset| {
        t.checked_sub_offset(o.fix())
            .map(|u| u.and_utc().timestamp())
    };
    match zone.offset_from_local_datetime(&t) {
        LocalResult::Single(o) => at(o).map_or(Instants::None, Instants::One),
        LocalResult::Ambiguous(a, b) => match (at(a), at(b)) {
            (Some(a), Some(b)) => Instants::Repeated(a.min(b)),
            (Some(s), None) | (None, Some(s)) => Instants::One(s),
            (None, None) => Instants::None,
        },
        LocalResult::None => Instants::None,
    }
}

/// `text` as a moment, in ISO 8601's extended forms: a date-time
/// `YYYY-MM-DD(T| )HH:MM[:SS[.f]]` followed by an offset (`Z`, ` UTC`,
/// `±HH:MM`, `±HHMM`, `±HH`, with or without a blank before it) is an
/// instant; without one it is a wall-clock time, as is a date
/// `YYYY-MM-DD`.
fn parse_text(text: &str) -> Option<Moment> {
    const TIMES: [&str; 4] = [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ];
    let utc = text
        .strip_suffix(['Z', 'z'])
        .or_else(|| text.strip_suffix(" UTC"))
        .map(|t| format!("{}+00:00", t.trim_end()));
    let zoned = utc.as_deref().unwrap_or(text);
    for time in TIMES {
        for offset in ["%#z", " %#z"] {
            if let Ok(t) = DateTime::parse_from_str(zoned, &format!("{time}{offset}")) {
                return Some(Moment::Instant(t.timestamp()));
            }
        }
    }
    if utc.is_some() {
        return None;
    }
    for time in TIMES {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, time) {
            return Some(Moment::Local(t));
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(|d| Moment::Local(d.and_time(chrono::NaiveTime::MIN)))
}

/// Each row of `array` as a moment: text, Arrow dates and timestamps (a
/// timestamp with a zone is an instant, one without a wall-clock time);
/// anything else is `None`.
fn read_moments(array: &dyn Array, out: &mut Vec<Option<Moment>>) {
    let n = array.len();
    let nulls = array.logical_nulls();
    let nulls = nulls.as_ref();
    let text = |v: &str| parse_text(v.trim());
    macro_rules! each {
        ($values:expr, $read:expr) => {{
            let values = $values;
            for r in 0..n {
                out.push(if is_null(nulls, r) {
                    None
                } else {
                    $read(values.value(r))
                });
            }
        }};
    }
    fn stamp<T: ArrowPrimitiveType<Native = i64>>(
        array: &dyn Array,
        per_second: i64,
        zoned: bool,
        nulls: Option<&arrow_buffer::NullBuffer>,
        out: &mut Vec<Option<Moment>>,
    ) {
        let values = array.as_primitive::<T>();
        for r in 0..array.len() {
            out.push(if is_null(nulls, r) {
                None
            } else {
                let v = values.value(r);
                let seconds = v.div_euclid(per_second);
                if zoned {
                    Some(Moment::Instant(seconds))
                } else {
                    DateTime::<Utc>::from_timestamp(seconds, 0)
                        .map(|t| Moment::Local(t.naive_utc()))
                }
            });
        }
    }
    use DataType as D;
    match array.data_type() {
        D::Utf8 => each!(array.as_string::<i32>(), text),
        D::LargeUtf8 => each!(array.as_string::<i64>(), text),
        D::Utf8View => each!(array.as_string_view(), text),
        D::Date32 => each!(array.as_primitive::<Date32Type>(), |d: i32| {
            NaiveDate::from_num_days_from_ce_opt(d.checked_add(719_163)?)
                .map(|d| Moment::Local(d.and_time(chrono::NaiveTime::MIN)))
        }),
        D::Date64 => each!(array.as_primitive::<Date64Type>(), |ms: i64| {
            DateTime::<Utc>::from_timestamp(ms.div_euclid(1000), 0)
                .map(|t| Moment::Local(t.naive_utc()))
        }),
        D::Timestamp(unit, zone) => {
            let zoned = zone.is_some();
            match unit {
                TimeUnit::Second => stamp::<TimestampSecondType>(array, 1, zoned, nulls, out),
                TimeUnit::Millisecond => {
                    stamp::<TimestampMillisecondType>(array, 1_000, zoned, nulls, out)
                }
                TimeUnit::Microsecond => {
                    stamp::<TimestampMicrosecondType>(array, 1_000_000, zoned, nulls, out)
                }
                TimeUnit::Nanosecond => {
                    stamp::<TimestampNanosecondType>(array, 1_000_000_000, zoned, nulls, out)
                }
            }
        }
        D::Dictionary(..) => {
            let Some(dictionary) = array.as_any_dictionary_opt() else {
                out.extend((0..n).map(|_| None));
                return;
            };
            let mut entries = Vec::new();
            read_moments(dictionary.values().as_ref(), &mut entries);
            let keys = dictionary.normalized_keys();
            let key_nulls = dictionary.keys().logical_nulls();
            for (r, &k) in keys.iter().enumerate() {
                out.push(if is_null(key_nulls.as_ref(), r) {
                    None
                } else {
                    entries.get(k).copied().flatten()
                });
            }
        }
        _ => out.extend((0..n).map(|_| None)),
    }
}

#[cfg(test)]
#[path = "clock_tests.rs"]
mod tests;
