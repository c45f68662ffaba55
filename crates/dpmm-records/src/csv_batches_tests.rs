use super::*;
use arrow_array::cast::AsArray;
use proptest::prelude::*;

/// Every row of `input` (after its header), each the fields at `read`
/// or why the line is malformed.
fn rows(input: &[u8], read: &[usize]) -> Vec<Result<Vec<String>, Malformed>> {
    let mut blocks = CsvBlocks::new(input);
    let header = blocks.header("test").expect("a header");
    let columns = CsvColumns::new(&header, read);
    let mut parsed = Parsed::new(read.len());
    let mut out = Vec::new();
    while let Some(block) = blocks.next_block().expect("in-memory read") {
        parse_block(&block, &columns, &mut parsed);
        let (batch, malformed) = parsed.take(&columns).expect("a batch");
        for r in 0..batch.num_rows() {
            out.push(match malformed.get(r).copied().flatten() {
                Some(m) => Err(m),
                None => Ok((0..read.len())
                    .map(|c| batch.column(c).as_string::<i32>().value(r).to_string())
                    .collect()),
            });
        }
    }
    out
}

/// The rows of a one-column file: each line's whole content.
fn lines(body: &[u8]) -> Vec<Result<Vec<u8>, Malformed>> {
    let mut input = b"h\n".to_vec();
    input.extend_from_slice(body);
    rows(&input, &[0])
        .into_iter()
        .map(|r| r.map(|f| f[0].clone().into_bytes()))
        .collect()
}

#[test]
fn lines_split_on_lf_and_drop_one_trailing_cr() {
    let got = lines(b"a\r\nb\n\r\nc\r\r\nd\re\n\nlast");
    let want: Vec<Result<Vec<u8>, Malformed>> = [&b"a"[..], b"b", b"c\r", b"d\re", b"last"]
        .iter()
        .map(|l| Ok(l.to_vec()))
        .collect();
    assert_eq!(got, want, "empty lines are no rows");
    assert!(lines(b"").is_empty());
    assert!(lines(b"\n\r\n").is_empty());
}

#[test]
fn an_overlong_line_is_one_malformed_row_and_the_next_is_read() {
    let mut body = vec![b'x'; MAX_LINE_BYTES];
    body.extend_from_slice(b"\n");
    body.extend(vec![b'y'; MAX_LINE_BYTES + 1]);
    body.extend_from_slice(b"\r\nz\n");
    body.extend(vec![b'w'; 3 * MAX_LINE_BYTES]);
    let got = lines(&body);
    assert_eq!(got.len(), 4);
    assert_eq!(got[0].as_ref().map(Vec::len), Ok(MAX_LINE_BYTES));
    assert_eq!(got[1], Err(Malformed::TooLong));
    assert_eq!(got[2], Ok(b"z".to_vec()));
    assert_eq!(got[3], Err(Malformed::TooLong));
    // Many long lines in a row, each one row.
    let mut body = Vec::new();
    for _ in 0..5 {
        body.extend(vec![b'q'; MAX_LINE_BYTES + 7]);
        body.push(b'\n');
    }
    body.extend_from_slice(b"ok");
    let got = lines(&body);
    assert_eq!(got[..5], vec![Err(Malformed::TooLong); 5][..]);
    assert_eq!(got[5], Ok(b"ok".to_vec()));
}

#[test]
fn only_the_columns_read_are_kept_and_every_field_is_checked() {
    let input = b"a,b,c\n1,\"x,y\",3\n4,5\n\"7\",8,\"9\"\"\"\n1,2\"q,3\n1,2,\"open\n";
    let got = rows(input, &[2, 0]);
    assert_eq!(
        got,
        vec![
            Ok(vec!["3".to_string(), "1".to_string()]),
            Err(Malformed::FieldCount),
            Ok(vec!["9\"".to_string(), "7".to_string()]),
            Err(Malformed::Quote),
            Err(Malformed::Quote),
        ]
    );
    // Too many fields, and bytes that are not UTF-8 in a field not read.
    let got = rows(b"a,b\n1,2,3\n1,\xff\n", &[0]);
    assert_eq!(
        got,
        vec![Err(Malformed::FieldCount), Err(Malformed::NotUtf8)]
    );
}

#[test]
fn the_header_is_the_first_line_that_is_not_empty() {
    let mut blocks = CsvBlocks::new(&b"\n\r\n\xEF\xBB\xBF a , b\nx,y\n"[..]);
    assert_eq!(blocks.header("t").expect("header"), vec!["a", "b"]);
    for bad in [&b""[..], b"\n\n", b" \n"] {
        assert!(matches!(
            CsvBlocks::new(bad).header("t"),
            Err(RecordsError::NoHeader(_))
        ));
    }
    let mut long = vec![b'h'; MAX_LINE_BYTES + 1];
    long.push(b'\n');
    assert!(matches!(
        CsvBlocks::new(&long[..]).header("t"),
        Err(RecordsError::BadHeader(_))
    ));
    assert!(matches!(
        CsvBlocks::new(&b"a,\"b\n"[..]).header("t"),
        Err(RecordsError::BadHeader(_))
    ));
}

/// Lines of a many-block input: each line's row is what `split_line`
/// (the per-line reference) makes of it, whatever block it falls in.
#[test]
fn rows_across_many_blocks_are_the_lines_split_one_by_one() {
    let mut body = Vec::new();
    let mut want = Vec::new();
    let mut i = 0u64;
    while body.len() < 3 * BLOCK_BYTES + 12_345 {
        let line = match i % 7 {
            0 => format!("{i},\"q,{i}\",x"),
            1 => format!("{i},\"open"),
            2 => String::new(),
            3 => format!(" {i} ,b,\"c\"\"\"\r"),
            _ => format!("{i},{},{}", i * 3, "z".repeat((i % 50) as usize)),
        };
        body.extend_from_slice(line.as_bytes());
        body.push(b'\n');
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if !line.is_empty() {
            let mut record = csv::ByteRecord::new();
            want.push(
                split_line(line.as_bytes(), &mut record, &mut Vec::new())
                    .and_then(|()| {
                        if record.len() == 3 {
                            Ok(())
                        } else {
                            Err(Malformed::FieldCount)
                        }
                    })
                    .map(|()| {
                        vec![
                            String::from_utf8_lossy(&record[2]).into_owned(),
                            String::from_utf8_lossy(&record[0]).into_owned(),
                        ]
                    }),
            );
        }
        i += 1;
    }
    let mut input = b"a,b,c\n".to_vec();
    input.extend_from_slice(&body);
    assert_eq!(rows(&input, &[2, 0]), want);
}

proptest! {
    /// Any bytes: the rows are the `\n`-separated pieces that are not
    /// empty (one trailing `\r` dropped), each split as `split_line`
    /// splits it, never a panic.
    #[test]
    fn any_bytes_split_into_their_lf_pieces(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let got = lines(&bytes);
        let mut pieces: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        if bytes.last().is_none_or(|&b| b == b'\n') {
            pieces.pop();
        }
        let pieces: Vec<&[u8]> = pieces
            .into_iter()
            .map(|p| p.strip_suffix(b"\r").unwrap_or(p))
            .filter(|p| !p.is_empty())
            .collect();
        prop_assert_eq!(got.len(), pieces.len());
        for (row, piece) in got.iter().zip(pieces) {
            let mut record = csv::ByteRecord::new();
            let want = split_line(piece, &mut record, &mut Vec::new()).and_then(|()| {
                if record.len() == 1 { Ok(record[0].to_vec()) } else { Err(Malformed::FieldCount) }
            });
            prop_assert_eq!(row, &want);
        }
    }
}
