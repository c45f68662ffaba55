//! Parquet records (the non-default `parquet` feature): each row of a
//! Parquet file is one record, read through the Apache Arrow `parquet`
//! crate's row API (no Arrow arrays: only the reader and the Snappy codec
//! are built), its top-level columns named as in a CSV header. Each field
//! is rendered as the text a CSV would hold (a null as an empty field,
//! which the default missing-value markers treat as missing) and encoded
//! by the same schema, policies and count tables as CSV records.

use std::fmt::Write as _;
use std::fs::File;
use std::path::Path;

use csv::ByteRecord;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;

use crate::aggregate::{Layout, PrivateCounts, Reader, check_layout};
use crate::error::RecordsError;
use crate::schema::Schema;

/// Streams the records of the Parquet file at `path` into the counts of
/// `layout`, applying the schema's policies (one row group at a time:
/// memory is the count tables and the reader's buffers).
pub fn aggregate_parquet_file(
    path: &Path,
    schema: &Schema,
    layout: &Layout,
) -> Result<PrivateCounts, RecordsError> {
    check_layout(schema, layout)?;
    // The parquet crate's errors are about the file's format, never a value.
    let io = |e: &dyn std::fmt::Display| RecordsError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let file = File::open(path).map_err(|e| io(&e))?;
    let reader = SerializedFileReader::new(file).map_err(|e| io(&e))?;
    let fields = reader.metadata().file_metadata().schema().get_fields();
    let header: ByteRecord = fields.iter().map(|f| f.name().as_bytes()).collect();
    let compiled = Reader::new(schema, &header)?;
    let mut counts = PrivateCounts::zeros(layout)?;
    let mut codes = vec![0usize; schema.attributes().len()];
    let mut record = ByteRecord::new();
    let mut text = String::new();
    for (i, row) in reader.get_row_iter(None).map_err(|e| io(&e))?.enumerate() {
        if i.is_multiple_of(crate::aggregate::INTERRUPT_EVERY) && dp_core::interrupt::interrupted()
        {
            return Err(RecordsError::Interrupted);
        }
        let row = row.map_err(|e| io(&e))?;
        record.clear();
        for (_, field) in row.get_column_iter() {
            text.clear();
            field_text(field, &mut text);
            record.push_field(text.as_bytes());
        }
        counts.add_row(&compiled, &record, &mut codes, 1)?;
    }
    counts.flush()?;
    Ok(counts)
}

/// `field` as the text of a CSV field: strings as they are, numbers in
/// Rust's shortest round-trip form, a null as the empty field.
fn field_text(field: &Field, out: &mut String) {
    let _ = match field {
        Field::Null => Ok(()),
        Field::Str(s) => {
            out.push_str(s);
            Ok(())
        }
        Field::Bool(v) => write!(out, "{v}"),
        Field::Byte(v) => write!(out, "{v}"),
        Field::Short(v) => write!(out, "{v}"),
        Field::Int(v) => write!(out, "{v}"),
        Field::Long(v) => write!(out, "{v}"),
        Field::UByte(v) => write!(out, "{v}"),
        Field::UShort(v) => write!(out, "{v}"),
        Field::UInt(v) => write!(out, "{v}"),
        Field::ULong(v) => write!(out, "{v}"),
        Field::Float(v) => write!(out, "{v}"),
        Field::Double(v) => write!(out, "{v}"),
        other => write!(out, "{other}"),
    };
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType, DoubleType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;

    use super::*;
    use crate::aggregate::{Rows, aggregate};

    const SCHEMA: &str = r#"{"domain": [
        {"name": "sex", "column": "sex", "values": ["f", "m"], "missing": "drop"},
        {"name": "age", "column": "age", "bins": [0, 18, 65, 120], "outside": "drop",
         "missing": "drop"}
    ]}"#;

    /// The same records as CSV and as a Snappy-compressed Parquet file
    /// (nulls for the CSV's empty fields) give the same counts.
    #[test]
    fn parquet_records_count_as_their_csv() {
        let sex = ["f", "m", "", "m", "f", "f", "m"];
        let age = [
            Some(30.0),
            Some(70.5),
            Some(40.0),
            None,
            Some(150.0),
            Some(3.0),
            Some(30.0),
        ];
        let mut csv = String::from("sex,age\n");
        for (s, a) in sex.iter().zip(&age) {
            let a = a.map(|a| a.to_string()).unwrap_or_default();
            csv.push_str(&format!("{s},{a}\n"));
        }
        let schema = Schema::from_json(SCHEMA).expect("schema");
        let layout = Layout::full(schema.domain(), 100).expect("layout");
        let from_csv = aggregate(csv.as_bytes(), "csv", &schema, &layout, Rows::Records);

        let path =
            std::env::temp_dir().join(format!("dpmm-records-{}.parquet", std::process::id()));
        let message = "message m { OPTIONAL BYTE_ARRAY sex (UTF8); OPTIONAL DOUBLE age; }";
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let file = File::create(&path).expect("create");
        let mut writer = SerializedFileWriter::new(
            file,
            Arc::new(parse_message_type(message).expect("message")),
            Arc::new(props),
        )
        .expect("writer");
        let mut group = writer.next_row_group().expect("row group");
        let present = |v: bool| i16::from(v);
        let mut column = group.next_column().expect("column").expect("sex");
        let values: Vec<ByteArray> = sex
            .iter()
            .filter(|s| !s.is_empty())
            .map(|s| (*s).into())
            .collect();
        let levels: Vec<i16> = sex.iter().map(|s| present(!s.is_empty())).collect();
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        let mut column = group.next_column().expect("column").expect("age");
        let values: Vec<f64> = age.iter().flatten().copied().collect();
        let levels: Vec<i16> = age.iter().map(|a| present(a.is_some())).collect();
        column
            .typed::<DoubleType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        group.close().expect("close group");
        writer.close().expect("close file");

        assert!(crate::source::is_parquet(&path));
        let from_parquet = aggregate_parquet_file(&path, &schema, &layout);
        std::fs::remove_file(&path).expect("remove");
        let (a, b) = (from_csv.expect("csv"), from_parquet.expect("parquet"));
        assert_eq!(a.tables(), b.tables());
        // Kept: (f, [18, 65)), (m, [65, 120)), (f, [0, 18)), (m, [18, 65)).
        assert_eq!(a.tables()[0].counts, vec![1, 1, 0, 0, 1, 1]);
    }
}
