//! One record per physical line: the CSV dialect the readers accept.
//!
//! The input is split on `\n` (one trailing `\r` of a line is dropped;
//! [`crate::csv_batches`] does the splitting, on every core),
//! and each line is split into fields by RFC 4180's rules *within that
//! line*: fields are separated by `,`; a field may be quoted (`"…"`, a
//! `""` inside standing for one `"`), so a quoted field may hold commas
//! but never a line break. A quote is the first non-blank byte of its
//! field or it is an error, and after a closing quote only blanks may come
//! before the next `,` or the end of the line.
//!
//! Why not the csv crate's reader: it lets a quoted field run over line
//! breaks and accepts a quote left open at the end of the input, so one
//! added line `x,"p` swallows every following line up to the next `"` into
//! one field. Counting on "one record changes one count" (the stability of
//! the `drop` policy) needs the opposite: whatever bytes one line holds, it
//! is at most one record, and it never changes how its neighbours are read.
//! Here a line is either one record or one [`Malformed`] record, decided
//! from that line's bytes alone.
//!
//! An empty line (nothing, or a lone `\r`) is no record at all, before the
//! header as after it: adding or removing one changes nothing.

use csv::ByteRecord;

/// The longest line read (bytes, without its line break). A longer data
/// line is one `Malformed::TooLong` record, skipped to its end without
/// being buffered; a longer header is refused. This bounds the memory one
/// line can take, whatever the input.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Why one line is not a record. Each names the kind of problem only,
/// never a byte of the line or where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// A quote left open, one inside an unquoted field, or text after a
    /// closing quote.
    Quote,
    /// Bytes that are not UTF-8 text.
    NotUtf8,
    /// Another number of fields than the header.
    FieldCount,
    /// Longer than [`MAX_LINE_BYTES`].
    TooLong,
    /// A counts table's count that is not a non-negative whole number.
    BadCount,
    /// A time value that is not a whole number (a stream's time column).
    BadTime,
    /// A time value outside the stream's steps.
    OutsideSteps,
    /// A record without its privacy unit (null).
    NoUnit,
    /// A weight that is not a finite non-negative number.
    BadWeight,
}

impl Malformed {
    /// What is wrong, for [`crate::RecordsError::MalformedRow`].
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Malformed::Quote => "an unbalanced or misplaced quote",
            Malformed::NotUtf8 => "bytes that are not UTF-8 text",
            Malformed::FieldCount => "another number of fields than the header",
            Malformed::TooLong => "a line longer than the limit",
            Malformed::BadCount => "a count that is not a non-negative whole number",
            Malformed::BadTime => {
                "a time value that is not a whole number (with a calendar: not a date or time)"
            }
            Malformed::OutsideSteps => "a time value outside the stream's steps",
            Malformed::NoUnit => "a record without its privacy unit",
            Malformed::BadWeight => "a weight that is not a finite non-negative number",
        }
    }
}

/// Where the fields of a line go, as [`split_fields`] finds them.
pub(crate) trait FieldSink {
    /// The buffer field `index`'s content is appended to (`None`: the
    /// field is not kept), or an error (a line with too many fields).
    fn start(&mut self, index: usize) -> Result<Option<&mut Vec<u8>>, Malformed>;
    /// Field `index` is complete.
    fn finish(&mut self, _index: usize) {}
}

/// Splits one line (no line break in it, UTF-8) into its fields by the
/// dialect of this module, handing each to `sink`; returns the number of
/// fields. The one place the dialect is written: the header, the draft
/// and every record are split here.
pub(crate) fn split_fields(line: &[u8], sink: &mut impl FieldSink) -> Result<usize, Malformed> {
    let mut rest = line;
    let mut index = 0;
    loop {
        let start = rest.trim_ascii_start();
        let after = if let [b'"', quoted @ ..] = start {
            unquote(quoted, sink.start(index)?)?.trim_ascii_start()
        } else {
            let end = rest
                .iter()
                .position(|&b| b == b',' || b == b'"')
                .unwrap_or(rest.len());
            if let Some(out) = sink.start(index)? {
                out.extend_from_slice(&rest[..end]);
            }
            &rest[end..]
        };
        sink.finish(index);
        index += 1;
        match after {
            [] => return Ok(index),
            [b',', next @ ..] => rest = next,
            _ => return Err(Malformed::Quote),
        }
    }
}

/// The content of a quoted field starting just past its opening quote,
/// appended to `out` when the field is kept; returns the bytes after the
/// closing quote.
fn unquote<'a>(mut quoted: &'a [u8], mut out: Option<&mut Vec<u8>>) -> Result<&'a [u8], Malformed> {
    loop {
        let close = memchr::memchr(b'"', quoted).ok_or(Malformed::Quote)?;
        if let Some(out) = out.as_deref_mut() {
            out.extend_from_slice(&quoted[..close]);
        }
        match quoted.get(close + 1) {
            Some(b'"') => {
                if let Some(out) = out.as_deref_mut() {
                    out.push(b'"');
                }
                quoted = &quoted[close + 2..];
            }
            _ => return Ok(&quoted[close + 1..]),
        }
    }
}

/// Every field into a `ByteRecord`, through one scratch buffer.
struct RecordSink<'r> {
    record: &'r mut ByteRecord,
    scratch: &'r mut Vec<u8>,
}

impl FieldSink for RecordSink<'_> {
    fn start(&mut self, _index: usize) -> Result<Option<&mut Vec<u8>>, Malformed> {
        self.scratch.clear();
        Ok(Some(self.scratch))
    }

    fn finish(&mut self, _index: usize) {
        self.record.push_field(self.scratch);
    }
}

/// Splits one line (no line break in it) into the fields of `record`,
/// unescaping quoted fields through `scratch`; bytes that are not UTF-8
/// are [`Malformed::NotUtf8`].
pub(crate) fn split_line(
    line: &[u8],
    record: &mut ByteRecord,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    record.clear();
    if !line.is_ascii() && std::str::from_utf8(line).is_err() {
        return Err(Malformed::NotUtf8);
    }
    split_fields(line, &mut RecordSink { record, scratch }).map(|_| ())
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
