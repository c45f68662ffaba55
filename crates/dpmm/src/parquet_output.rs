//! Answers as a Parquet table: the
//! answers file of a release whose `--out` ends in `.parquet`. A CSV of
//! 10⁸ rows is not how such a release is read; Parquet keeps the answers
//! typed (the numbers as IEEE doubles, bit for bit the ones computed),
//! compressed (Snappy) and readable a column at a time by DuckDB, polars,
//! pandas or Spark.
//!
//! One text column (the query's label, UTF-8) and `f64` columns, all
//! required; the table is written a row group at a time, each row group's
//! rows formatted on rayon's pool, so memory holds one row group and not
//! the table. The JSON sidecar is also stored in the file's key-value
//! metadata under [`SIDECAR_KEY`], so that the answers travel with how
//! they were made.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use rayon::prelude::*;

/// The key-value metadata key holding the release's JSON sidecar.
pub const SIDECAR_KEY: &str = "dpmm.sidecar";

/// Rows formatted on one thread at a time.
const CHUNK: usize = 1 << 16;

/// One row of a table: its label written into the string, its numbers
/// (one per numeric column) into the slice.
pub(crate) type Row<'a> = &'a (dyn Fn(usize, &mut String, &mut [f64]) + Sync);

/// A table to write: a text column then numeric ones.
pub(crate) struct Table<'a> {
    /// The column names, the text column's first (plain identifiers).
    pub columns: &'a [&'a str],
    /// The number of rows.
    pub rows: usize,
    /// Row `i`'s label and numbers.
    pub row: Row<'a>,
    /// Rows per row group (and held in memory at once).
    pub group_rows: usize,
    /// The JSON stored under [`SIDECAR_KEY`].
    pub sidecar: String,
}

/// Writes `table` to `out` as a Parquet file. Fails only as `out` does
/// (the parquet crate's own errors, which cannot hold a value of the
/// data, are reported as I/O errors).
pub(crate) fn write_table(out: &mut (dyn Write + Send), table: &Table<'_>) -> std::io::Result<()> {
    let io = |e: parquet::errors::ParquetError| std::io::Error::other(e.to_string());
    let numbers = table.columns.len().saturating_sub(1);
    let mut message = String::from("message answers {");
    for (i, name) in table.columns.iter().enumerate() {
        match i {
            0 => message.push_str(&format!(" REQUIRED BYTE_ARRAY {name} (UTF8);")),
            _ => message.push_str(&format!(" REQUIRED DOUBLE {name};")),
        }
    }
    message.push_str(" }");
    let schema = Arc::new(parse_message_type(&message).map_err(io)?);
    // Labels and estimates are (nearly) all distinct: a dictionary would
    // be built and then abandoned in every column chunk.
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SIDECAR_KEY.to_string(),
            table.sidecar.clone(),
        )]))
        .build();
    let mut writer = SerializedFileWriter::new(out, schema, Arc::new(props)).map_err(io)?;
    let group_rows = table.group_rows.max(1);
    for first in (0..table.rows).step_by(group_rows) {
        let last = (first + group_rows).min(table.rows);
        let (labels, columns) = format_rows(table, numbers, first, last);
        let mut group = writer.next_row_group().map_err(io)?;
        if let Some(mut column) = group.next_column().map_err(io)? {
            column
                .typed::<ByteArrayType>()
                .write_batch(&labels, None, None)
                .map_err(io)?;
            column.close().map_err(io)?;
        }
        for values in &columns {
            if let Some(mut column) = group.next_column().map_err(io)? {
                column
                    .typed::<DoubleType>()
                    .write_batch(values, None, None)
                    .map_err(io)?;
                column.close().map_err(io)?;
            }
        }
        group.close().map_err(io)?;
    }
    writer.close().map_err(io)?;
    Ok(())
}

/// Rows `first..last`: their labels (slices of one shared buffer per
/// chunk) and each numeric column's values.
fn format_rows(
    table: &Table<'_>,
    numbers: usize,
    first: usize,
    last: usize,
) -> (Vec<ByteArray>, Vec<Vec<f64>>) {
    let chunks: Vec<(Vec<ByteArray>, Vec<Vec<f64>>)> = (first..last)
        .step_by(CHUNK)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|start| {
            let end = (start + CHUNK).min(last);
            let mut text = String::new();
            let mut ends = Vec::with_capacity(end - start);
            let mut columns = vec![Vec::with_capacity(end - start); numbers];
            let mut row = vec![0.0; numbers];
            for i in start..end {
                (table.row)(i, &mut text, &mut row);
                ends.push(text.len());
                for (column, v) in columns.iter_mut().zip(&row) {
                    column.push(*v);
                }
            }
            let text = Bytes::from(text);
            let mut begin = 0;
            let labels = ends
                .into_iter()
                .map(|end| {
                    let label = ByteArray::from(text.slice(begin..end));
                    begin = end;
                    label
                })
                .collect();
            (labels, columns)
        })
        .collect();
    let mut labels = Vec::with_capacity(last - first);
    let mut columns = vec![Vec::with_capacity(last - first); numbers];
    for (l, c) in chunks {
        labels.extend(l);
        for (all, part) in columns.iter_mut().zip(c) {
            all.extend(part);
        }
    }
    (labels, columns)
}

#[cfg(test)]
mod tests {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    use super::*;

    /// A row read back: its label and numbers.
    type ReadRow = (String, Vec<f64>);

    /// Reads a table written by [`write_table`]: its rows, its row-group
    /// count and its sidecar metadata.
    fn read_table(bytes: Vec<u8>) -> (Vec<ReadRow>, usize, Option<String>) {
        let reader = SerializedFileReader::new(Bytes::from(bytes)).expect("a Parquet file");
        let meta = reader.metadata();
        let groups = meta.num_row_groups();
        let sidecar = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == SIDECAR_KEY))
            .and_then(|k| k.value.clone());
        let rows = reader
            .get_row_iter(None)
            .expect("rows")
            .map(|row| {
                let row = row.expect("row");
                let mut label = String::new();
                let mut values = Vec::new();
                for (_, field) in row.get_column_iter() {
                    match field {
                        Field::Str(s) => label = s.clone(),
                        Field::Double(v) => values.push(*v),
                        other => panic!("unexpected field {other:?}"),
                    }
                }
                (label, values)
            })
            .collect();
        (rows, groups, sidecar)
    }

    /// Every row read back equals the row written, bit for bit, across
    /// several row groups and chunk boundaries, labels with separators and
    /// non-ASCII text included; the sidecar is in the metadata.
    #[test]
    fn a_table_reads_back_as_written() {
        let rows = 2 * CHUNK + 77;
        let row = |i: usize, label: &mut String, v: &mut [f64]| {
            label.push_str(&format!("q{i}, \"é\" = {}", i % 7));
            v[0] = (i as f64).sqrt() * if i.is_multiple_of(2) { 1.0 } else { -1.0 };
            v[1] = f64::from_bits(0x3ff0_0000_0000_0000 + i as u64);
            v[2] = if i.is_multiple_of(5) {
                0.0
            } else {
                1e-300 * i as f64
            };
        };
        let table = Table {
            columns: &["query", "a", "b", "c"],
            rows,
            row: &row,
            group_rows: CHUNK + 1000,
            sidecar: "{\"mechanism\": \"test\"}".into(),
        };
        let mut bytes = Vec::new();
        write_table(&mut bytes, &table).expect("write");
        let (read, groups, sidecar) = read_table(bytes);
        assert_eq!(groups, rows.div_ceil(CHUNK + 1000));
        assert_eq!(sidecar.as_deref(), Some("{\"mechanism\": \"test\"}"));
        assert_eq!(read.len(), rows);
        for (i, (label, values)) in read.iter().enumerate() {
            let mut want = String::new();
            let mut v = [0.0; 3];
            row(i, &mut want, &mut v);
            assert_eq!(label, &want);
            let bits = |x: &[f64]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(values), bits(&v), "row {i}");
        }
    }

    /// An empty table is a valid file with no rows; a writer that fails
    /// part-way fails the write.
    #[test]
    fn empty_tables_and_failing_writers() {
        let row = |_: usize, _: &mut String, _: &mut [f64]| {};
        let mut table = Table {
            columns: &["query", "answer"],
            rows: 0,
            row: &row,
            group_rows: 10,
            sidecar: "{}".into(),
        };
        let mut bytes = Vec::new();
        write_table(&mut bytes, &table).expect("write");
        let (read, groups, _) = read_table(bytes.clone());
        assert!(read.is_empty());
        assert_eq!(groups, 0);

        let row = |i: usize, l: &mut String, v: &mut [f64]| {
            l.push_str(&i.to_string());
            v[0] = i as f64;
        };
        table.rows = 1000;
        table.row = &row;
        let mut full = Vec::new();
        write_table(&mut full, &table).expect("write");
        let mut short = vec![0u8; full.len() - 1];
        let mut cursor = std::io::Cursor::new(&mut short[..]);
        assert!(write_table(&mut cursor, &table).is_err());
    }

    /// A release with `out` named `*.parquet` writes its answers as a
    /// Parquet table: the same rows as [`crate::Answers::iter`], bit for
    /// bit, the sidecar in the file's metadata equal to `<out>.json`, the
    /// non-negative estimates as `answers.nonneg.parquet`; no CSV.
    #[test]
    fn a_release_to_parquet_holds_its_answers() {
        use crate::{Data, PrivacyBudget, Release};
        let dir = std::env::temp_dir().join(format!("dpmm-parquet-release-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let schema = r#"{"domain": [
          {"name": "sex", "column": "sex", "values": ["f", "m"]},
          {"name": "age", "column": "age", "bins": {"start": 20, "stop": 60, "width": 10}}]}"#;
        let spec = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
          "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}]}"#;
        std::fs::write(dir.join("schema.json"), schema).expect("schema");
        std::fs::write(dir.join("spec.json"), spec).expect("spec");
        let mut records = String::from("sex,age\n");
        for i in 0..200 {
            let sex = if i % 3 == 0 { "m" } else { "f" };
            records.push_str(&format!("{sex},{}\n", 20 + (i * 7) % 40));
        }
        std::fs::write(dir.join("records.csv"), records).expect("records");
        let book = dir.join("ledger.jsonl");
        crate::ledger::create(&book, PrivacyBudget::pure(10.0).expect("budget")).expect("ledger");
        let out = dir.join("answers.parquet");
        let release = Release {
            out: Some(out.clone()),
            nonneg: true,
            ..Release::new(
                dir.join("schema.json"),
                dir.join("spec.json"),
                PrivacyBudget::pure(0.5).expect("budget"),
                &book,
            )
        };
        let answers = release
            .run(Data::Records(dir.join("records.csv")))
            .expect("release");
        let (rows, groups, sidecar) = read_table(std::fs::read(&out).expect("answers"));
        assert_eq!(groups, 1);
        assert_eq!(rows.len(), answers.len());
        assert_eq!(rows.len(), 2 + 4 + 8);
        for ((label, values), a) in rows.iter().zip(answers.iter()) {
            assert_eq!(label, &a.query);
            let want = [a.answer, a.std_error, a.ci_low, a.ci_high].map(f64::to_bits);
            assert_eq!(values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
        }
        let side: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("answers.parquet.json")).expect("json"))
                .expect("sidecar");
        let stored: serde_json::Value =
            serde_json::from_str(&sidecar.expect("metadata")).expect("metadata json");
        assert_eq!(stored, side);
        assert_eq!(&stored, answers.sidecar());
        let nonneg = std::fs::read(dir.join("answers.nonneg.parquet")).expect("nonneg");
        let (rows, _, _) = read_table(nonneg);
        let estimates = answers.nonneg().expect("estimates");
        assert_eq!(rows.len(), estimates.len());
        for (((label, values), a), v) in rows.iter().zip(answers.iter()).zip(estimates) {
            assert_eq!(label, &a.query);
            assert_eq!(values, &vec![*v]);
        }
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("answers") && n.ends_with(".csv")),
            "{names:?}"
        );
        std::fs::remove_dir_all(&dir).expect("remove");
    }
}
