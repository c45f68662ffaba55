//! CSV text into Arrow record batches, one record per physical line.
//!
//! The reader ([`CsvBlocks`]) takes the header line, then cuts the rest of
//! the input into blocks of whole lines (about 256 KiB each) without
//! looking inside them; the blocks are parsed on worker threads
//! ([`parse_block`]) into text columns — only the columns the schema
//! reads — with one row per line that is not empty and, for a line that
//! is not one record of the header's width, the reason it is malformed.
//! The dialect is [`crate::lines`]'s: a line is split on `,` by RFC
//! 4180's quoting rules *within that line*, so whatever bytes a line
//! holds it is at most one row and never changes how another line is
//! read.

use std::io::{self, Read};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};

use crate::error::RecordsError;
use crate::lines::{FieldSink, MAX_LINE_BYTES, Malformed, split_fields, split_line};

/// Bytes per block handed to a worker (a block ends at a line break, so
/// it holds a little less, or a long line more).
pub(crate) const BLOCK_BYTES: usize = 1 << 18;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Whole lines of input, or lines too long to read.
pub(crate) struct Block {
    /// Whole lines (the last one of the input may lack its line break).
    pub(crate) bytes: Vec<u8>,
    /// Lines longer than [`MAX_LINE_BYTES`] met before `bytes`, skipped
    /// without being buffered: one malformed row each.
    pub(crate) too_long: usize,
}

/// An input cut into blocks of whole lines.
pub(crate) struct CsvBlocks<R> {
    input: R,
    buffer: Vec<u8>,
    eof: bool,
}

impl<R: Read> CsvBlocks<R> {
    pub(crate) fn new(input: R) -> Self {
        Self {
            input,
            buffer: Vec::with_capacity(BLOCK_BYTES + (1 << 16)),
            eof: false,
        }
    }

    /// Reads until the buffer holds `target` bytes or the input ends.
    fn fill(&mut self, target: usize) -> io::Result<()> {
        while !self.eof && self.buffer.len() < target {
            let len = self.buffer.len();
            let want = (target - len).max(1 << 16);
            self.buffer.resize(len + want, 0);
            let read = loop {
                match self.input.read(&mut self.buffer[len..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.buffer.truncate(len);
                        return Err(e);
                    }
                }
            };
            self.buffer.truncate(len + read);
            if read == 0 {
                self.eof = true;
            }
        }
        Ok(())
    }

    /// The header: the first line that is not empty (after a UTF-8 byte
    /// order mark), split into its names. Any flaw in it is a refusal: it
    /// is the file's structure, not a record.
    pub(crate) fn header(&mut self, source_name: &str) -> Result<Vec<String>, RecordsError> {
        let io_error = |e: io::Error| RecordsError::Io {
            path: source_name.to_string(),
            reason: e.to_string(),
        };
        loop {
            let newline = loop {
                if let Some(i) = memchr::memchr(b'\n', &self.buffer) {
                    break Some(i);
                }
                if self.eof {
                    break None;
                }
                if self.buffer.len() > MAX_LINE_BYTES {
                    return Err(too_long_header());
                }
                let target = self.buffer.len() + BLOCK_BYTES;
                self.fill(target).map_err(io_error)?;
            };
            let end = newline.unwrap_or(self.buffer.len());
            if end > MAX_LINE_BYTES {
                return Err(too_long_header());
            }
            let rest = self.buffer.split_off((end + 1).min(self.buffer.len()));
            let mut line = std::mem::replace(&mut self.buffer, rest);
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = line.strip_prefix(UTF8_BOM).unwrap_or(&line);
            if line.is_empty() {
                if newline.is_none() {
                    return Err(RecordsError::NoHeader(source_name.to_string()));
                }
                continue;
            }
            let mut fields = csv::ByteRecord::new();
            split_line(line, &mut fields, &mut Vec::new()).map_err(|m| {
                RecordsError::BadHeader(format!("not a CSV line of UTF-8 text ({})", m.reason()))
            })?;
            if fields.len() == 1 && fields[0].trim_ascii().is_empty() {
                return Err(RecordsError::NoHeader(source_name.to_string()));
            }
            // The line is UTF-8, and each field a piece of it cut at ASCII
            // bytes.
            return Ok(fields
                .iter()
                .map(|f| String::from_utf8_lossy(f.trim_ascii()).into_owned())
                .collect());
        }
    }

    /// The next block of whole lines, or `None` at the end of the input.
    pub(crate) fn next_block(&mut self) -> io::Result<Option<Block>> {
        let mut too_long = 0;
        loop {
            let target = self.buffer.len().max(BLOCK_BYTES / 2) + BLOCK_BYTES / 2;
            self.fill(target)?;
            if self.buffer.is_empty() {
                return Ok((too_long > 0).then(|| Block {
                    bytes: Vec::new(),
                    too_long,
                }));
            }
            if let Some(i) = memchr::memrchr(b'\n', &self.buffer) {
                let mut rest = Vec::with_capacity(BLOCK_BYTES + (1 << 16));
                rest.extend_from_slice(&self.buffer[i + 1..]);
                self.buffer.truncate(i + 1);
                let bytes = std::mem::replace(&mut self.buffer, rest);
                return Ok(Some(Block { bytes, too_long }));
            }
            if self.eof {
                // The last line, without its line break.
                let bytes = std::mem::take(&mut self.buffer);
                return Ok(Some(Block { bytes, too_long }));
            }
            if self.buffer.len() > MAX_LINE_BYTES {
                // One line too long: skipped to its end, never buffered.
                too_long += 1;
                self.buffer.clear();
                self.skip_line()?;
                if too_long >= 1 << 16 {
                    return Ok(Some(Block {
                        bytes: Vec::new(),
                        too_long,
                    }));
                }
            }
        }
    }

    /// Consumes the input through the next line break (or to its end).
    fn skip_line(&mut self) -> io::Result<()> {
        loop {
            self.fill(BLOCK_BYTES)?;
            if self.buffer.is_empty() {
                return Ok(());
            }
            match memchr::memchr(b'\n', &self.buffer) {
                Some(i) => {
                    self.buffer.drain(..=i);
                    return Ok(());
                }
                None => self.buffer.clear(),
            }
        }
    }
}

fn too_long_header() -> RecordsError {
    RecordsError::BadHeader(format!(
        "the header line is longer than {MAX_LINE_BYTES} bytes"
    ))
}

/// Which fields of a line go to which batch column.
#[derive(Debug, Clone)]
pub(crate) struct CsvColumns {
    /// The header's number of fields: every record has as many.
    pub(crate) fields: usize,
    /// For each field of the header, its batch column (`None`: not read).
    pub(crate) projection: Vec<Option<usize>>,
    /// The batch's schema: the columns read, as text.
    pub(crate) schema: Arc<ArrowSchema>,
}

impl CsvColumns {
    /// The columns at header positions `read` (batch column `i` is the
    /// field at `read[i]`) of a header of `names`.
    pub(crate) fn new(names: &[String], read: &[usize]) -> Self {
        let mut projection = vec![None; names.len()];
        for (column, &position) in read.iter().enumerate() {
            projection[position] = Some(column);
        }
        let fields: Vec<Field> = read
            .iter()
            .map(|&p| Field::new(names[p].clone(), DataType::Utf8, false))
            .collect();
        Self {
            fields: names.len(),
            projection,
            schema: Arc::new(ArrowSchema::new(fields)),
        }
    }
}

/// Text columns being built, and each row's reason to be malformed.
pub(crate) struct Parsed {
    values: Vec<Vec<u8>>,
    offsets: Vec<Vec<i32>>,
    pub(crate) malformed: Vec<Option<Malformed>>,
    any_malformed: bool,
}

impl Parsed {
    pub(crate) fn new(columns: usize) -> Self {
        Self {
            values: vec![Vec::new(); columns],
            offsets: vec![vec![0]; columns],
            malformed: Vec::new(),
            any_malformed: false,
        }
    }

    fn clear(&mut self) {
        for (v, o) in self.values.iter_mut().zip(&mut self.offsets) {
            v.clear();
            o.clear();
            o.push(0);
        }
        self.malformed.clear();
        self.any_malformed = false;
    }

    /// Ends the row: its fields are kept.
    fn commit(&mut self) {
        for (v, o) in self.values.iter().zip(&mut self.offsets) {
            // A block is at most a few MiB (checked by `parse_block`).
            o.push(v.len() as i32);
        }
        self.malformed.push(None);
    }

    /// Ends the row as malformed: its fields are dropped, its columns
    /// empty.
    fn reject(&mut self, why: Malformed) {
        for (v, o) in self.values.iter_mut().zip(&mut self.offsets) {
            let start = o.last().copied().unwrap_or(0);
            v.truncate(start as usize);
            o.push(start);
        }
        self.malformed.push(Some(why));
        self.any_malformed = true;
    }

    /// The rows parsed as a batch of `columns`' schema, and the malformed
    /// rows (empty when there is none); `self` is left empty for reuse.
    pub(crate) fn take(
        &mut self,
        columns: &CsvColumns,
    ) -> Result<(RecordBatch, Vec<Option<Malformed>>), RecordsError> {
        let rows = self.malformed.len();
        let arrays: Vec<ArrayRef> = self
            .values
            .iter_mut()
            .zip(&mut self.offsets)
            .map(|(v, o)| {
                let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(o, vec![0])));
                let values = Buffer::from_vec(std::mem::take(v));
                StringArray::try_new(offsets, values, None)
                    .map(|a| Arc::new(a) as ArrayRef)
                    .map_err(|e| RecordsError::Internal(format!("a CSV column: {e}")))
            })
            .collect::<Result<_, _>>()?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        let batch = RecordBatch::try_new_with_options(columns.schema.clone(), arrays, &options)
            .map_err(|e| RecordsError::Internal(format!("a CSV batch: {e}")))?;
        let malformed = if self.any_malformed {
            std::mem::take(&mut self.malformed)
        } else {
            Vec::new()
        };
        self.clear();
        Ok((batch, malformed))
    }
}

/// Parses the whole lines of `block` into `out`: one row per line that is
/// not empty (nothing, or a lone `\r`), each a record of `columns.fields`
/// fields or one malformed row.
pub(crate) fn parse_block(block: &Block, columns: &CsvColumns, out: &mut Parsed) {
    for _ in 0..block.too_long {
        out.reject(Malformed::TooLong);
    }
    let bytes = &block.bytes;
    // The common case, all text, is checked once for the block.
    let all_utf8 = bytes.is_ascii() || std::str::from_utf8(bytes).is_ok();
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let mut line = &bytes[start..end];
        start = end + 1;
        if line.len() > MAX_LINE_BYTES {
            out.reject(Malformed::TooLong);
            continue;
        }
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        if line.is_empty() {
            continue;
        }
        if !all_utf8 && std::str::from_utf8(line).is_err() {
            out.reject(Malformed::NotUtf8);
            continue;
        }
        match split_into(line, columns, out) {
            Ok(()) => out.commit(),
            Err(why) => out.reject(why),
        }
    }
}

/// The fields of a line that are read, each appended to its column.
struct ColumnSink<'c> {
    columns: &'c CsvColumns,
    values: &'c mut [Vec<u8>],
}

impl FieldSink for ColumnSink<'_> {
    fn start(&mut self, index: usize) -> Result<Option<&mut Vec<u8>>, Malformed> {
        match self.columns.projection.get(index) {
            None => Err(Malformed::FieldCount),
            Some(None) => Ok(None),
            Some(Some(c)) => Ok(self.values.get_mut(*c)),
        }
    }
}

/// Splits one line (UTF-8, no line break) into its fields, appending each
/// read field to its column; a line of another width than the header's
/// is [`Malformed::FieldCount`].
fn split_into(line: &[u8], columns: &CsvColumns, out: &mut Parsed) -> Result<(), Malformed> {
    let mut sink = ColumnSink {
        columns,
        values: &mut out.values,
    };
    if split_fields(line, &mut sink)? != columns.fields {
        return Err(Malformed::FieldCount);
    }
    Ok(())
}

#[cfg(test)]
#[path = "csv_batches_tests.rs"]
mod tests;
