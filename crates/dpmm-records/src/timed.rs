//! Time-stamped records for continual release (`dpmm stream`): the same
//! sources, schema and policies as [`mod@crate::aggregate`], each kept
//! record counted at the step its time column names.
//!
//! # Time values and steps
//!
//! The time column holds whole numbers (integers of any width; floats,
//! decimals or text whose value is a whole number, `27` and `27.0` alike):
//! the step is `time − start`, so steps are public (the caller states
//! `start` and the horizon; nothing about the steps is derived from the
//! data). A time value that is not a whole number, or outside the
//! horizon, is a malformed row (dropped or refused by the schema's
//! `malformed` policy). Both depend on that record alone, so the
//! stability of [`mod@crate::aggregate`] holds: adding or removing one
//! record changes one step's count tables by at most one record. Records
//! may come in any order.

use crate::aggregate::{People, Reading, Rows, Source, count};
use crate::clock::Calendar;
use crate::counts::{Layout, PrivateCounts};
use crate::encode::TimeSpec;
use crate::error::RecordsError;
use crate::schema::Schema;

/// A stream's time: the column, the time value of step 0 and the horizon.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing<'a> {
    /// The time column's name.
    pub column: &'a str,
    /// The time value of step 0 (whole-number times, without a calendar).
    pub start: i64,
    /// Steps `0..steps` are released.
    pub steps: u64,
    /// Dates and times put on a public calendar's steps instead of whole
    /// numbers ([`crate::Calendar`]).
    pub calendar: Option<Calendar>,
}

impl Timing<'_> {
    pub(crate) fn spec(&self) -> TimeSpec {
        TimeSpec {
            start: self.start,
            steps: self.steps,
            calendar: self.calendar,
        }
    }
}

/// Counts the records of `source` (each at its step) into the tables of
/// `layout`, which must be kept for `timing.steps` steps
/// ([`Layout::marginals_over_steps`]), bounding each unit of `people`
/// as its contributions say (a privacy unit with a bound on its steps;
/// `People::records()`: one record a unit).
pub fn aggregate_steps(
    source: Source<'_>,
    schema: &Schema,
    timing: Timing<'_>,
    layout: &Layout,
    people: &People,
) -> Result<PrivateCounts, RecordsError> {
    if layout.steps() as u64 != timing.steps || timing.steps > u64::from(u32::MAX) {
        return Err(RecordsError::LayoutMismatch);
    }
    let reading = Reading {
        rows: Rows::Records,
        time: Some((timing.column, timing.spec())),
        people,
    };
    count(source, schema, layout, reading)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::schema::Policy;

    fn schema() -> Schema {
        Schema::from_json(
            r#"{"domain": [
                {"name": "sex", "column": "sex", "values": ["F", "M"]},
                {"name": "age", "column": "age", "bins": [0, 18, 65, 120]}
            ]}"#,
        )
        .unwrap()
    }

    /// Each step's counts of the sex × age table (6 cells a step), for
    /// steps 10..15 of the time column `day`.
    fn steps(text: &str, schema: &Schema) -> Result<Vec<i64>, RecordsError> {
        steps_on(text, schema, None)
    }

    /// [`steps`], times read on `calendar` when one is given.
    fn steps_on(
        text: &str,
        schema: &Schema,
        calendar: Option<Calendar>,
    ) -> Result<Vec<i64>, RecordsError> {
        let layout =
            Layout::marginals_over_steps(schema.domain(), &[vec![0, 1]], 5, 1 << 20).unwrap();
        let source = Source::Csv {
            reader: Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
            name: "test".into(),
        };
        let timing = Timing {
            column: "day",
            start: 10,
            steps: 5,
            calendar,
        };
        Ok(
            aggregate_steps(source, schema, timing, &layout, &People::records())?
                .into_step_counts(&[vec![0, 1]])?
                .cells()
                .to_vec(),
        )
    }

    /// The counts of one record of (sex, age bin) at step `s`, added to
    /// `counts`.
    fn add(counts: &mut [i64], s: usize, sex: usize, bin: usize) {
        counts[s * 6 + sex * 3 + bin] += 1;
    }

    #[test]
    fn records_are_counted_at_their_steps_and_bad_lines_dropped() {
        let text = "day,sex,age\n10,F,3\n 11 ,M,70\n\n12,X,30\nabc,F,3\n9,F,3\n15,F,3\n14,M,20\n\
                    -3,F,1\n\"14,M,20\n13.0,F,20\n1.3e1,M,1\n13.5,F,1\n";
        let got = steps(text, &schema()).unwrap();
        let mut want = vec![0i64; 30];
        add(&mut want, 0, 0, 0);
        add(&mut want, 1, 1, 2);
        add(&mut want, 4, 1, 1);
        add(&mut want, 3, 0, 1);
        add(&mut want, 3, 1, 0);
        assert_eq!(got, want);
    }

    /// On a calendar, one added line of any bytes moves the step counts
    /// by at most one record in L1: its time is read by itself, never by
    /// its neighbours' (brute force over lines near every edge).
    #[test]
    fn one_added_line_moves_calendar_step_counts_by_at_most_one() {
        use crate::clock::Step;
        let calendar = Calendar::new(Step::Day, "2017-03-10", "America/Chicago").unwrap();
        let base = "day,sex,age\n2017-03-10,F,3\n2017-03-12T01:30,M,70\n                    2017-03-13T04:59:59Z,F,20\n2017-03-14 23:59,M,1\n2017-03-15,F,3\n";
        let before = steps_on(base, &schema(), Some(calendar)).unwrap();
        let added = [
            "2017-03-10,F,3",
            "2017-03-12T02:30,M,70",
            "2017-03-14T23:59:59-05:00,F,20",
            "2017-03-15T04:59:59Z,M,1",
            "2017-03-15T05:00:00Z,M,1",
            "2017-03-09T23:59,F,3",
            "17,F,3",
            "\"2017-03-11,F,3",
            "2017-03-11,F,3,extra",
            "+262142-12-31T23:59:59+14:00,F,3",
            "2017-03-11T00:00\r,F,3",
        ];
        for line in added {
            let after = steps_on(&format!("{base}{line}\n"), &schema(), Some(calendar)).unwrap();
            let moved: i64 = after.iter().zip(&before).map(|(a, b)| (a - b).abs()).sum();
            assert!(moved <= 1, "{line}: moved {moved}");
        }
        // The ordinary record is counted, at its local day.
        let one = steps_on(
            &format!("{base}2017-03-14T23:59:59-05:00,F,20\n"),
            &schema(),
            Some(calendar),
        )
        .unwrap();
        let mut want = before.clone();
        add(&mut want, 4, 0, 1);
        assert_eq!(one, want);
    }

    #[test]
    fn under_error_a_bad_time_is_refused() {
        let strict = schema().with_malformed(Policy::Error);
        for bad in [
            "day,sex,age\nabc,F,3\n",
            "day,sex,age\n99,F,3\n",
            "day,sex,age\n1.5,F,3\n",
        ] {
            assert!(matches!(
                steps(bad, &strict),
                Err(RecordsError::MalformedRow { .. })
            ));
        }
        assert!(steps("day,sex,age\n12,F,3\n", &strict).is_ok());
    }

    #[test]
    fn the_time_column_must_be_there_once() {
        assert!(matches!(
            steps("when,sex,age\n10,F,3\n", &schema()),
            Err(RecordsError::MissingColumn { .. })
        ));
        assert!(matches!(
            steps("day,sex,age,day\n10,F,3,10\n", &schema()),
            Err(RecordsError::DuplicateHeaderColumn(_))
        ));
    }
}
