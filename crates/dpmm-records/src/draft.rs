//! `schema draft`: a starting schema from a CSV's header line alone.
//!
//! The draft names one attribute per column and leaves `values`/`bins` as
//! placeholders that the schema loader refuses, so a draft cannot be used
//! before a person has filled in every domain. It never reads past the
//! first line: a domain read off the data (the categories present, the
//! largest age) is itself a statistic of the private data.

use std::io::{ErrorKind, Read};
use std::path::Path;

use serde_json::Value;

use crate::error::RecordsError;
use crate::lines::split_line;
use crate::schema::PLACEHOLDER_PREFIX;
use crate::source;

/// The note at the top of every draft (and for a command to print).
pub const DRAFT_NOTE: &str = "DRAFT: every attribute's values or bins must come from PUBLIC \
     knowledge (a codebook, a questionnaire, the law), never from the private data: a domain \
     read off the records leaks. Replace each TODO and delete attributes you do not need \
     (keep \"columns\": it pins the file's header, so a file with another header is refused). \
     Policies are drop: a record outside the domain, missing a value or malformed is left out. \
     \"error\" instead refuses the whole file for one such record: a check of your own data, \
     whose outcome depends on the data, not for pipelines whose exit status others see.";

/// The longest header line read (bytes); a longer first line is refused
/// rather than read on.
pub const MAX_HEADER_BYTES: usize = crate::lines::MAX_LINE_BYTES;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A starting schema: the header's column names, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaDraft {
    columns: Vec<String>,
}

impl SchemaDraft {
    /// The column names, in header order.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// The draft as schema JSON: the note first, the `malformed` policy,
    /// the header pinned as `columns` (a file with another header, or a
    /// line inserted before it, is then refused), then one attribute per
    /// line (name, column, a `values` placeholder, both policies `drop`,
    /// the default written out), in header order.
    pub fn to_json(&self) -> String {
        // The note explains; the placeholder only has to be unmissable.
        let placeholder = format!(
            "{PLACEHOLDER_PREFIX}: categories in order, or \"bins\" instead (public knowledge)"
        );
        let attributes: Vec<String> = self
            .columns
            .iter()
            .map(|c| {
                let c = quoted(c);
                format!(
                    "    {{\"name\": {c}, \"column\": {c}, \"values\": {}, \
                     \"outside\": \"drop\", \"missing\": \"drop\"}}",
                    quoted(&placeholder)
                )
            })
            .collect();
        let columns: Vec<String> = self.columns.iter().map(|c| quoted(c)).collect();
        format!(
            "{{\n  \"note\": {},\n  \"malformed\": \"drop\",\n  \"columns\": [{}],\n  \
             \"domain\": [\n{}\n  ]\n}}",
            quoted(DRAFT_NOTE),
            columns.join(", "),
            attributes.join(",\n")
        )
    }
}

/// `text` as a JSON string literal.
fn quoted(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// Reads the header line of `input` (plain or gzip'ed) and nothing after
/// it: the text is consumed one byte at a time up to the end of the first
/// line that is not empty, the header as [`crate::aggregate()`] reads it (a
/// gzip decoder may inflate a block ahead, which is never looked at).
pub fn draft_from_header<R: Read + Send>(
    input: R,
    source_name: &str,
) -> Result<SchemaDraft, RecordsError> {
    let io_error = |e: std::io::Error| RecordsError::Io {
        path: source_name.to_string(),
        reason: e.to_string(),
    };
    let mut input = source::decompressing(input).map_err(io_error)?;
    let line = read_header_line(&mut input).map_err(io_error)?;
    let Some(line) = line else {
        return Err(RecordsError::BadHeader(format!(
            "the header line is longer than {MAX_HEADER_BYTES} bytes"
        )));
    };
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(&line);
    let mut record = csv::ByteRecord::new();
    split_line(line, &mut record, &mut Vec::new()).map_err(|m| {
        RecordsError::BadHeader(format!("not a CSV line of UTF-8 text ({})", m.reason()))
    })?;
    if line.is_empty() || record.iter().all(|f| f.trim_ascii().is_empty()) {
        return Err(RecordsError::NoHeader(source_name.to_string()));
    }
    // split_line checked the line is UTF-8, and a field is a part of it
    // cut at ASCII bytes.
    let columns: Vec<String> = record
        .iter()
        .map(|f| String::from_utf8_lossy(f.trim_ascii()).into_owned())
        .collect();
    if let Some(i) = columns.iter().position(String::is_empty) {
        return Err(RecordsError::EmptyHeaderColumn(i + 1));
    }
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(RecordsError::DuplicateHeaderColumn(c.clone()));
        }
    }
    Ok(SchemaDraft { columns })
}

/// [`draft_from_header`] on a file.
pub fn draft_from_path(path: &Path) -> Result<SchemaDraft, RecordsError> {
    draft_from_header(source::open_path(path)?, &path.display().to_string())
}

/// The first line that is not empty, without its line break or one
/// trailing `\r`, read one byte at a time so not a byte past it is
/// consumed. `None` if the line exceeds [`MAX_HEADER_BYTES`].
fn read_header_line(input: &mut dyn Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        match input.read(&mut byte) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        if byte[0] == b'\n' {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() || line == UTF8_BOM {
                line.clear();
                continue;
            }
            break;
        }
        if line.len() == MAX_HEADER_BYTES + 1 {
            return Ok(None);
        }
        line.push(byte[0]);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok((line.len() <= MAX_HEADER_BYTES).then_some(line))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SchemaError;
    use crate::schema::{Policy, Schema};

    /// A reader that serves `header` and fails the test if asked for more.
    struct HeaderThenPoison {
        data: Vec<u8>,
        header_len: usize,
        pos: usize,
    }

    impl Read for HeaderThenPoison {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            assert!(
                self.pos < self.header_len || buf.is_empty(),
                "the draft read past the header line"
            );
            let end = (self.pos + buf.len()).min(self.header_len);
            let n = end - self.pos;
            buf[..n].copy_from_slice(&self.data[self.pos..end]);
            self.pos = end;
            Ok(n)
        }
    }

    #[test]
    fn draft_reads_the_header_and_not_one_byte_more() {
        // The second line is malformed (wrong field count, invalid UTF-8):
        // reading it would fail; the poison reader would also panic.
        let header = b"age,\"home, town\",work\n";
        let mut data = header.to_vec();
        data.extend_from_slice(b"1,2\n\xff\xfe,,,,\n");
        let reader = HeaderThenPoison {
            data,
            header_len: header.len(),
            pos: 0,
        };
        let draft = draft_from_header(reader, "test").expect("header only");
        assert_eq!(draft.columns(), ["age", "home, town", "work"]);
    }

    #[test]
    fn draft_json_is_refused_until_a_person_fills_the_domains() {
        let draft = draft_from_header(&b"a,b\nnot,read\n"[..], "t").expect("draft");
        let text = draft.to_json();
        assert!(text.contains("PUBLIC"));
        let parsed: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed["domain"][1]["name"], "b");
        assert_eq!(parsed["domain"][1]["column"], "b");
        assert_eq!(
            Schema::from_json(&text),
            Err(SchemaError::Placeholder("a".to_string()))
        );
    }

    #[test]
    fn a_completed_draft_drops_by_default() {
        let draft = draft_from_header(&b"a,b\n"[..], "t").expect("draft");
        let mut json: Value = serde_json::from_str(&draft.to_json()).expect("valid JSON");
        assert_eq!(json["malformed"], "drop");
        for attribute in json["domain"].as_array_mut().expect("a list") {
            assert_eq!(attribute["outside"], "drop");
            assert_eq!(attribute["missing"], "drop");
            attribute["values"] = serde_json::json!(["x", "y"]);
        }
        let schema = Schema::from_json(&json.to_string()).expect("completed");
        assert_eq!(schema.malformed(), Policy::Drop);
        assert_eq!(
            schema.columns(),
            Some(&["a".to_string(), "b".to_string()][..])
        );
        for a in schema.attributes() {
            assert_eq!((a.outside, a.missing), (Policy::Drop, Policy::Drop));
        }
    }

    #[test]
    fn the_header_is_one_physical_line() {
        // A quote left open is a damaged header, not a name running into
        // the next line.
        assert!(matches!(
            draft_from_header(&b"a,\"b\nc\",d\n"[..], "t"),
            Err(RecordsError::BadHeader(_))
        ));
        // Empty lines before it are skipped, as when records are read.
        let draft = draft_from_header(&b"\r\n\na,b\n1,2\n"[..], "t").expect("draft");
        assert_eq!(draft.columns(), ["a", "b"]);
    }

    #[test]
    fn a_byte_order_mark_and_crlf_are_not_part_of_the_names() {
        let draft = draft_from_header("\u{feff}a,b\r\n1,2\r\n".as_bytes(), "t").expect("draft");
        assert_eq!(draft.columns(), ["a", "b"]);
    }

    #[test]
    fn bad_headers_are_typed_errors() {
        assert!(matches!(
            draft_from_header(&b""[..], "t"),
            Err(RecordsError::NoHeader(_))
        ));
        assert_eq!(
            draft_from_header(&b"a,,b\n"[..], "t"),
            Err(RecordsError::EmptyHeaderColumn(2))
        );
        assert_eq!(
            draft_from_header(&b"a,b,a\n"[..], "t"),
            Err(RecordsError::DuplicateHeaderColumn("a".to_string()))
        );
    }
}
