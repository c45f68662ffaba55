//! Time-stamped records for continual release (`dpmm stream`): the same
//! lines, dialect, schema and policies as [`mod@crate::aggregate`], read one
//! record at a time with the step its time column names.
//!
//! # Time values and steps
//!
//! The time column holds an integer (decimal digits, an optional leading
//! `-`, blanks around): the step is `time − start`, so steps are public
//! (the caller states `start` and the horizon; nothing about the steps is
//! derived from the data). A time value that is not an integer is a
//! malformed row (dropped or refused by the schema's `malformed` policy);
//! one outside the horizon is a value outside the domain of time, dropped
//! the same way. Both depend on that line alone, so the stability of
//! [`mod@crate::aggregate`] holds: adding or removing one line changes one
//! step's count tables by at most one record.
//!
//! Lines may come in any order: each record carries its own step
//! (`dpmm::stream` counts every record at its step before releasing any).

use std::io::{BufReader, Read};

use csv::ByteRecord;

use crate::aggregate::{Reader, Verdict, header, io_error, lines_of};
use crate::error::RecordsError;
use crate::lines::{Lines, Malformed, record_of};
use crate::schema::{Policy, Schema};

/// A records input read record by record with each record's step.
pub struct TimedRecords<'a> {
    lines: Lines<BufReader<Box<dyn Read + 'a>>>,
    source_name: String,
    compiled: Reader,
    time_column: usize,
    start: i64,
    steps: u64,
    row: ByteRecord,
    scratch: Vec<u8>,
    codes: Vec<usize>,
    read: usize,
}

/// One kept record: its step and the domain code of each attribute (in
/// schema order).
#[derive(Debug, PartialEq, Eq)]
pub struct TimedRecord<'r> {
    /// `time − start`, in `0..steps`.
    pub step: u64,
    /// One code per schema attribute.
    pub codes: &'r [usize],
}

impl<'a> TimedRecords<'a> {
    /// Reads the header of `input` (plain or gzip'ed CSV) and compiles
    /// `schema` against it; `time_column` names the time column, whose
    /// values `start..start + steps` are steps `0..steps`.
    pub fn new<R: Read + 'a>(
        input: R,
        source_name: &str,
        schema: &Schema,
        time_column: &str,
        start: i64,
        steps: u64,
    ) -> Result<Self, RecordsError> {
        let mut lines = lines_of(input, source_name)?;
        let header = header(&mut lines, source_name)?;
        let compiled = Reader::new(schema, &header)?;
        let mut found = header
            .iter()
            .enumerate()
            .filter(|(_, h)| h.trim_ascii() == time_column.as_bytes());
        let Some((time_column_index, _)) = found.next() else {
            return Err(RecordsError::MissingColumn {
                column: time_column.to_string(),
                attribute: "time".into(),
            });
        };
        if found.next().is_some() {
            return Err(RecordsError::DuplicateHeaderColumn(time_column.to_string()));
        }
        Ok(Self {
            lines,
            source_name: source_name.to_string(),
            codes: vec![0; compiled.columns.len()],
            compiled,
            time_column: time_column_index,
            start,
            steps,
            row: ByteRecord::new(),
            scratch: Vec::new(),
            read: 0,
        })
    }

    /// The next kept record, or `None` at the end of the input. Rows the
    /// schema's policies drop are skipped; one they refuse is an error.
    pub fn next_record(&mut self) -> Result<Option<TimedRecord<'_>>, RecordsError> {
        loop {
            let Some(line) = self
                .lines
                .next_line()
                .map_err(|e| io_error(&e, &self.source_name))?
            else {
                return Ok(None);
            };
            self.read = self.read.wrapping_add(1);
            if self.read.is_multiple_of(crate::aggregate::INTERRUPT_EVERY)
                && dp_core::interrupt::interrupted()
            {
                return Err(RecordsError::Interrupted);
            }
            if line.is_ok_and(<[u8]>::is_empty) {
                continue;
            }
            let parsed = record_of(line, self.compiled.fields, &mut self.row, &mut self.scratch)
                .and_then(|()| time_of(&self.row[self.time_column]).ok_or(Malformed::BadTime));
            let time = match (parsed, self.compiled.malformed) {
                (Ok(time), _) => time,
                (Err(_), Policy::Drop) => continue,
                (Err(m), Policy::Error) => {
                    return Err(RecordsError::MalformedRow { reason: m.reason() });
                }
            };
            let step = time
                .checked_sub(self.start)
                .and_then(|s| u64::try_from(s).ok());
            let Some(step) = step.filter(|&s| s < self.steps) else {
                match self.compiled.malformed {
                    Policy::Drop => continue,
                    Policy::Error => {
                        return Err(RecordsError::MalformedRow {
                            reason: "a time value outside the stream's steps",
                        });
                    }
                }
            };
            match self.compiled.encode(&self.row, &mut self.codes)? {
                Verdict::Keep => {
                    return Ok(Some(TimedRecord {
                        step,
                        codes: &self.codes,
                    }));
                }
                Verdict::Drop => continue,
            }
        }
    }
}

/// A time value: an integer in decimal, blanks around.
fn time_of(field: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(field.trim_ascii()).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::from_json(
            r#"{"domain": [
                {"name": "sex", "column": "sex", "values": ["F", "M"]},
                {"name": "age", "column": "age", "bins": [0, 18, 65, 120]}
            ]}"#,
        )
        .unwrap()
    }

    fn read_all(text: &str, schema: &Schema) -> Result<Vec<(u64, Vec<usize>)>, RecordsError> {
        let mut r = TimedRecords::new(text.as_bytes(), "test", schema, "day", 10, 5)?;
        let mut out = Vec::new();
        while let Some(rec) = r.next_record()? {
            out.push((rec.step, rec.codes.to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn records_come_with_their_steps_and_bad_lines_are_dropped() {
        let text = "day,sex,age\n10,F,3\n 11 ,M,70\n\n12,X,30\nabc,F,3\n9,F,3\n15,F,3\n14,M,20\n-3,F,1\n\"14,M,20\n";
        let got = read_all(text, &schema()).unwrap();
        assert_eq!(got, vec![(0, vec![0, 0]), (1, vec![1, 2]), (4, vec![1, 1])]);
    }

    #[test]
    fn under_error_a_bad_time_is_refused() {
        let strict = schema().with_malformed(Policy::Error);
        for bad in [
            "day,sex,age\nabc,F,3\n",
            "day,sex,age\n99,F,3\n",
            "day,sex,age\n1e3,F,3\n",
        ] {
            assert!(matches!(
                read_all(bad, &strict),
                Err(RecordsError::MalformedRow { .. })
            ));
        }
        assert!(read_all("day,sex,age\n12,F,3\n", &strict).is_ok());
    }

    #[test]
    fn the_time_column_must_be_there_once() {
        assert!(matches!(
            read_all("when,sex,age\n10,F,3\n", &schema()),
            Err(RecordsError::MissingColumn { .. })
        ));
        assert!(matches!(
            read_all("day,sex,age,day\n10,F,3,10\n", &schema()),
            Err(RecordsError::DuplicateHeaderColumn(_))
        ));
    }

    #[test]
    fn time_values_parse_as_integers_only() {
        assert_eq!(time_of(b" 42 "), Some(42));
        assert_eq!(time_of(b"-7"), Some(-7));
        for bad in [
            &b""[..],
            b"-",
            b"+3",
            b"4.0",
            b"1e3",
            b"99999999999999999999",
            b"\xff",
        ] {
            assert_eq!(time_of(bad), None);
        }
    }
}
