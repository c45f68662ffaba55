#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;

use arrow_array::{ArrayRef, Date32Array, Int64Array, StringArray, TimestampSecondArray};

use super::*;

fn steps(calendar: &Calendar, values: &[&str]) -> Vec<Option<i64>> {
    let array: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
    let mut out = Vec::new();
    calendar.steps_of(array.as_ref(), &mut out);
    out
}

/// Unix seconds of a UTC date-time, by hand (days from civil, Howard
/// Hinnant's algorithm): independent of chrono.
fn unix(y: i64, m: i64, d: i64, h: i64, min: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + h * 3_600 + min * 60
}

/// Chicago's 2017 local day of an instant, by hand: UTC−5 from 2017-03-12
/// 08:00 UTC to 2017-11-05 07:00 UTC, UTC−6 otherwise; day 0 is
/// 2017-01-01.
fn chicago_day(s: i64) -> i64 {
    let dst = (unix(2017, 3, 12, 8, 0)..unix(2017, 11, 5, 7, 0)).contains(&s);
    let offset = if dst { -5 } else { -6 } * 3_600;
    (s + offset - unix(2017, 1, 1, 0, 0)).div_euclid(86_400)
}

#[test]
fn days_in_a_zone_are_its_local_days_across_clock_changes_and_the_year_end() {
    let calendar = Calendar::new(Step::Day, "2017-01-01", "America/Chicago").unwrap();
    let mut state = 5u64;
    let (first, last) = (unix(2016, 12, 30, 0, 0), unix(2018, 1, 2, 0, 0));
    let mut instants: Vec<i64> = (0..2_000)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            first + (state >> 20) as i64 % (last - first)
        })
        .collect();
    // The edges: around both changes of clocks and the local year end.
    for edge in [
        unix(2017, 3, 12, 8, 0),
        unix(2017, 11, 5, 7, 0),
        unix(2018, 1, 1, 6, 0),
        unix(2017, 1, 1, 6, 0),
    ] {
        instants.extend([edge - 1, edge, edge + 1]);
    }
    let texts: Vec<String> = instants
        .iter()
        .map(|&s| {
            DateTime::<Utc>::from_timestamp(s, 0)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let got = steps(&calendar, &refs);
    for ((s, text), step) in instants.iter().zip(&texts).zip(got) {
        assert_eq!(step, Some(chicago_day(*s)), "{text}");
    }
    // The year's last stops are in 2017 in Chicago, in 2018 in UTC.
    let late = steps(
        &calendar,
        &["2017-12-31T23:30:00-06:00", "2018-01-01T05:30:00Z"],
    );
    assert_eq!(late, vec![Some(364), Some(364)]);
}

#[test]
fn one_time_written_every_way_is_one_step() {
    let calendar = Calendar::new(Step::Day, "2017-01-01", "America/Chicago").unwrap();
    let got = steps(
        &calendar,
        &[
            "2017-03-05",
            " 2017-03-05 22:10 ",
            "2017-03-05T22:10:00",
            "2017-03-05T22:10:00.250",
            "2017-03-06T04:10:00Z",
            "2017-03-06 04:10:00+00:00",
            "2017-03-05T23:10:00-05:00",
            "2017-03-06T04:10Z",
            "2017-03-05T22:10-06:00",
            "2017-03-06T04:10:00+0000",
            "2017-03-06 04:10:00 +00:00",
            "2017-03-06 04:10:00 UTC",
            "2017-03-05T22:10:00-06",
        ],
    );
    assert!(got.iter().all(|&s| s == Some(63)), "{got:?}");
    // Not a time: malformed, whatever it looks like.
    let none = steps(
        &calendar,
        &[
            "",
            "17",
            "1488758400",
            "2017-13-01",
            "yesterday",
            "2017-03-05T25:00",
            "2017-03-05Z",
            "2017-03-05T22:10:00+25:00",
        ],
    );
    assert!(none.iter().all(Option::is_none), "{none:?}");
    let numbers: ArrayRef = Arc::new(Int64Array::from(vec![63, 1_488_758_400]));
    let mut out = Vec::new();
    calendar.steps_of(numbers.as_ref(), &mut out);
    assert_eq!(out, vec![None, None], "numbers are no dates");
}

#[test]
fn arrow_dates_and_timestamps_are_times() {
    let calendar = Calendar::new(Step::Day, "2017-01-01", "America/Chicago").unwrap();
    let days: ArrayRef = Arc::new(Date32Array::from(vec![17_230, 17_167])); // 2017-03-05, 2017-01-01
    let mut out = Vec::new();
    calendar.steps_of(days.as_ref(), &mut out);
    assert_eq!(out, vec![Some(63), Some(0)]);
    let s = unix(2017, 3, 6, 4, 10);
    let zoned: ArrayRef = Arc::new(TimestampSecondArray::from(vec![s]).with_timezone("UTC"));
    let wall: ArrayRef = Arc::new(TimestampSecondArray::from(vec![s]));
    let mut out = Vec::new();
    calendar.steps_of(zoned.as_ref(), &mut out);
    calendar.steps_of(wall.as_ref(), &mut out);
    // An instant is 22:10 on the 5th in Chicago; a zoneless timestamp is
    // the wall-clock time 04:10 on the 6th.
    assert_eq!(out, vec![Some(63), Some(64)]);
}

#[test]
fn hours_are_elapsed_time_and_months_calendar_months() {
    let hours = Calendar::new(Step::Hour, "2017-03-12", "America/Chicago").unwrap();
    let got = steps(
        &hours,
        &[
            "2017-03-12T01:59",
            "2017-03-12T02:30", // skipped by the clocks
            "2017-03-12T03:00",
            "2017-03-12T23:00",
        ],
    );
    // 01:59 CST, then 03:00 CDT is the second hour: the day has 23.
    assert_eq!(got, vec![Some(1), None, Some(2), Some(22)]);
    let fifteen = Calendar::new(Step::Seconds(900), "2017-11-05T00:00", "America/Chicago").unwrap();
    // 01:30 happens twice; the first is read: 90 minutes in.
    assert_eq!(
        steps(&fifteen, &["2017-11-05T01:30", "2017-11-05T07:30:00Z"]),
        vec![Some(6), Some(10)]
    );
    let months = Calendar::new(Step::Month, "2017-01-01", "UTC").unwrap();
    assert_eq!(
        steps(
            &months,
            &["2017-01-31", "2017-02-01", "2017-12-31T23:59", "2016-12-31"]
        ),
        vec![Some(0), Some(1), Some(11), Some(-1)]
    );
    let weeks = Calendar::new(Step::Week, "2017-01-02", "UTC").unwrap();
    assert_eq!(
        steps(&weeks, &["2017-01-08", "2017-01-09", "2017-01-01"]),
        vec![Some(0), Some(1), Some(-1)]
    );
}

#[test]
fn labels_name_each_step_s_start() {
    let days = Calendar::new(Step::Day, "2017-12-30", "America/Chicago").unwrap();
    assert_eq!(
        (days.label(0), days.label(2)),
        ("2017-12-30".into(), "2018-01-01".into())
    );
    let months = Calendar::new(Step::Month, "2017-11-01", "UTC").unwrap();
    assert_eq!(months.label(2), "2018-01-01");
    let hours = Calendar::new(Step::Hour, "2017-03-12", "America/Chicago").unwrap();
    assert_eq!(hours.label(3), "2017-03-12T04:00:00-05:00");
    assert_eq!(days.describe(), "days from 2017-12-30 in America/Chicago");
}

/// Times at the ends of the range of dates are malformed or outside,
/// never a panic; labels past it are empty.
#[test]
fn the_ends_of_the_range_of_dates_are_no_panic() {
    let kiritimati = Calendar::new(Step::Day, "2017-01-01", "Pacific/Kiritimati").unwrap();
    let chicago = Calendar::new(Step::Month, "2017-01-01", "America/Chicago").unwrap();
    for calendar in [&kiritimati, &chicago] {
        let stamps: ArrayRef = Arc::new(
            arrow_array::TimestampMillisecondArray::from(vec![
                8_210_266_876_799_000,
                -8_334_601_228_800_000,
                i64::MAX,
                i64::MIN,
            ])
            .with_timezone("UTC"),
        );
        let mut out = Vec::new();
        calendar.steps_of(stamps.as_ref(), &mut out);
        assert!(
            out.iter()
                .all(|s| s.is_none_or(|s| !(0..1000).contains(&s))),
            "{out:?}"
        );
    }
    let far = Calendar::new(Step::Hour, "+262142-12-31T00:00", "Pacific/Kiritimati").unwrap();
    // 48 hours on, the wall clock is past the last date: no label.
    assert!(
        far.label(0).starts_with("+262142-12-31T00:00:00"),
        "{}",
        far.label(0)
    );
    assert_eq!(far.label(48), "");
    assert_eq!(far.label(u64::MAX), "");
    // A midnight the zone skips is still a day's start.
    assert!(Calendar::new(Step::Day, "2018-11-04", "America/Sao_Paulo").is_ok());
    assert!(Calendar::new(Step::Hour, "2018-11-04T00:00", "America/Sao_Paulo").is_err());
}

#[test]
fn a_calendar_that_cannot_be_is_refused() {
    for (step, start, zone) in [
        (Step::Day, "2017-01-01", "America/Chicag"),
        (Step::Day, "2017-01-01T06:00", "UTC"),
        (Step::Month, "2017-01-02", "UTC"),
        (Step::Day, "2017-01-01T00:00:00Z", "UTC"),
        (Step::Hour, "2017-03-12T02:30", "America/Chicago"),
        (Step::Day, "January", "UTC"),
    ] {
        assert!(
            Calendar::new(step, start, zone).is_err(),
            "{step:?} {start} {zone}"
        );
    }
    for bad in ["days", "0s", "s", "-5s", "1.5s", "3000000000s"] {
        assert!(bad.parse::<Step>().is_err(), "{bad}");
    }
    assert_eq!("900s".parse::<Step>().unwrap(), Step::Seconds(900));
}
