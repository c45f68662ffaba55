use super::*;
use proptest::prelude::*;

fn split(line: &[u8]) -> Result<Vec<Vec<u8>>, Malformed> {
    let mut record = ByteRecord::new();
    split_line(line, &mut record, &mut Vec::new())?;
    Ok(record.iter().map(<[u8]>::to_vec).collect())
}

#[test]
fn quotes_never_run_past_their_line() {
    // The attack of issue 30: an open quote would swallow the next lines.
    assert_eq!(split(b"x,\"p"), Err(Malformed::Quote));
    assert_eq!(split(b"\"unterminated"), Err(Malformed::Quote));
    // A quote inside an unquoted field, text after a closing quote.
    assert_eq!(split(b"a\"b,c"), Err(Malformed::Quote));
    assert_eq!(split(b"\"a\"b,c"), Err(Malformed::Quote));
    assert_eq!(split(b"\"a\" \"b\""), Err(Malformed::Quote));
    // Not UTF-8.
    assert_eq!(split(b"a,\xff\xfe"), Err(Malformed::NotUtf8));
    assert_eq!(split(b"\"\xc3\""), Err(Malformed::NotUtf8));
    // Well formed: escaped quotes, commas and a CR inside quotes, blanks
    // around a quoted field, empty fields.
    let want = |fields: &[&[u8]]| Ok(fields.iter().map(|f| f.to_vec()).collect::<Vec<_>>());
    assert_eq!(
        split(b"\"a,\"\"b\"\"\", c ,\"\", \"x\r\" ,"),
        want(&[b"a,\"b\"", b" c ", b"", b"x\r", b""])
    );
    assert_eq!(split(b""), want(&[b""]));
    assert_eq!(
        split("é,ü".as_bytes()),
        want(&["é".as_bytes(), "ü".as_bytes()])
    );
}

/// A field as text: printable ASCII with commas, quotes, blanks and some
/// non-ASCII letters, so quoting is exercised.
fn field() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z0-9 ,\"\té€]{0,8}").expect("regex")
}

proptest! {
    /// Every line the csv crate's writer makes from fields without line
    /// breaks splits back into those fields, as the csv crate reads them
    /// (the independent parser, on inputs where the dialects agree).
    #[test]
    fn written_records_split_back_into_their_fields(
        fields in proptest::collection::vec(field(), 1..6),
        always_quote in any::<bool>(),
    ) {
        let style = if always_quote { csv::QuoteStyle::Always } else { csv::QuoteStyle::Necessary };
        let mut writer = csv::WriterBuilder::new().quote_style(style).from_writer(Vec::new());
        writer.write_record(&fields).expect("in-memory write");
        let mut text = writer.into_inner().expect("flush");
        prop_assert_eq!(text.pop(), Some(b'\n'));
        let ours = split(&text).expect("well formed");
        let mut reader = csv::ReaderBuilder::new().has_headers(false).from_reader(&text[..]);
        let theirs: Vec<Vec<u8>> = reader
            .byte_records()
            .next()
            .expect("one record")
            .expect("readable")
            .iter()
            .map(<[u8]>::to_vec)
            .collect();
        let want: Vec<Vec<u8>> = fields.iter().map(|f| f.as_bytes().to_vec()).collect();
        // A lone empty field is written as `""` only when quoted.
        if !(fields.len() == 1 && fields[0].is_empty()) {
            prop_assert_eq!(&theirs, &want);
        }
        prop_assert_eq!(ours, want);
    }
}
