//! One record per physical line: the CSV dialect the readers accept.
//!
//! The input is split on `\n` (one trailing `\r` of a line is dropped),
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

use std::io::{self, BufRead, Read};

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
    /// A counts table's count that is not a non-negative integer.
    BadCount,
    /// A time value that is not an integer (a stream's time column).
    BadTime,
}

impl Malformed {
    /// What is wrong, for [`crate::RecordsError::MalformedRow`].
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Malformed::Quote => "an unbalanced or misplaced quote",
            Malformed::NotUtf8 => "bytes that are not UTF-8 text",
            Malformed::FieldCount => "another number of fields than the header",
            Malformed::TooLong => "a line longer than the limit",
            Malformed::BadCount => "a count that is not a non-negative integer",
            Malformed::BadTime => "a time value that is not an integer",
        }
    }
}

/// The physical lines of an input, one at a time, in one reused buffer.
pub(crate) struct Lines<R> {
    input: R,
    line: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(input: R) -> Self {
        Self {
            input,
            line: Vec::with_capacity(256),
        }
    }

    /// The next line without its line break (and without one trailing
    /// `\r`), `Err(TooLong)` for a line past [`MAX_LINE_BYTES`] (consumed
    /// to its end), or `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> io::Result<Option<Result<&[u8], Malformed>>> {
        self.line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.line)?;
        if read == 0 {
            return Ok(None);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
        } else if self.line.len() > MAX_LINE_BYTES {
            self.skip_to_line_end()?;
            return Ok(Some(Err(Malformed::TooLong)));
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        Ok(Some(Ok(&self.line)))
    }

    /// Consumes the input through the next `\n` (or to its end).
    fn skip_to_line_end(&mut self) -> io::Result<()> {
        loop {
            let available = match self.input.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(());
            }
            match available.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    self.input.consume(i + 1);
                    return Ok(());
                }
                None => {
                    let n = available.len();
                    self.input.consume(n);
                }
            }
        }
    }
}

/// Splits one line (no line break in it) into the fields of `record`,
/// unescaping quoted fields through `scratch`. The line must be UTF-8.
pub(crate) fn split_line(
    line: &[u8],
    record: &mut ByteRecord,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    record.clear();
    if !line.is_ascii() && std::str::from_utf8(line).is_err() {
        return Err(Malformed::NotUtf8);
    }
    let mut rest = line;
    loop {
        let start = rest.trim_ascii_start();
        let after = if let [b'"', quoted @ ..] = start {
            let after = unquote(quoted, scratch)?;
            record.push_field(scratch);
            after.trim_ascii_start()
        } else {
            let end = rest
                .iter()
                .position(|&b| b == b',' || b == b'"')
                .unwrap_or(rest.len());
            record.push_field(&rest[..end]);
            &rest[end..]
        };
        match after {
            [] => return Ok(()),
            [b',', next @ ..] => rest = next,
            _ => return Err(Malformed::Quote),
        }
    }
}

/// The content of a quoted field that starts at `quoted` (just past its
/// opening quote) into `scratch`; returns the bytes after the closing
/// quote.
fn unquote<'a>(mut quoted: &'a [u8], scratch: &mut Vec<u8>) -> Result<&'a [u8], Malformed> {
    scratch.clear();
    loop {
        let close = quoted
            .iter()
            .position(|&b| b == b'"')
            .ok_or(Malformed::Quote)?;
        scratch.extend_from_slice(&quoted[..close]);
        match quoted.get(close + 1) {
            Some(b'"') => {
                scratch.push(b'"');
                quoted = &quoted[close + 2..];
            }
            _ => return Ok(&quoted[close + 1..]),
        }
    }
}

/// A whole line split into a record with exactly `fields` fields, or why
/// it is malformed.
pub(crate) fn record_of(
    line: Result<&[u8], Malformed>,
    fields: usize,
    record: &mut ByteRecord,
    scratch: &mut Vec<u8>,
) -> Result<(), Malformed> {
    split_line(line?, record, scratch)?;
    if record.len() != fields {
        return Err(Malformed::FieldCount);
    }
    Ok(())
}

#[cfg(test)]
#[path = "lines_tests.rs"]
mod tests;
