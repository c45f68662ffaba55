//! Opening record input: plain or gzip'ed CSV, told apart by the gzip
//! magic bytes (RFC 1952 §2.3.1: `1f 8b`), never by the file name.

use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::RecordsError;

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// `input`, decompressed if it starts with the gzip magic bytes.
///
/// Multi-member gzip (concatenated `.gz` files, bgzip) is read to the end.
pub fn decompressing<'a, R: Read + Send + 'a>(
    mut input: R,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    let mut head = [0u8; 2];
    let mut filled = 0;
    while filled < head.len() {
        match input.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let rejoined = Cursor::new(head).take(filled as u64).chain(input);
    if filled == head.len() && head == GZIP_MAGIC {
        Ok(Box::new(MultiGzDecoder::new(io::BufReader::new(rejoined))))
    } else {
        Ok(Box::new(rejoined))
    }
}

/// The magic bytes that open (and close) a Parquet file.
pub const PARQUET_MAGIC: &[u8; 4] = b"PAR1";

/// Whether the file at `path` starts with [`PARQUET_MAGIC`] (read as
/// Parquet, never as CSV).
pub fn is_parquet(path: &Path) -> bool {
    // Only a regular file can be opened twice: peeking at a pipe
    // (`--data <(zcat …)`, /dev/stdin) would eat the first bytes of the CSV
    // that is read next. A Parquet file is never a pipe (its footer is read
    // first).
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut head = [0u8; 4];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| &head == PARQUET_MAGIC)
}

/// Opens `path` for reading, decompressing gzip.
pub fn open_path(path: &Path) -> Result<Box<dyn Read + Send>, RecordsError> {
    let io_error = |e: io::Error| RecordsError::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let file = File::open(path).map_err(io_error)?;
    decompressing(file).map_err(io_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = GzEncoder::new(Vec::new(), Compression::default());
        enc.write_all(bytes).expect("in-memory write");
        enc.finish().expect("in-memory gzip")
    }

    fn read_all(input: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        decompressing(input)
            .expect("open")
            .read_to_end(&mut out)
            .expect("read");
        out
    }

    #[test]
    fn plain_and_gzip_read_back_the_same_bytes() {
        let text = b"a,b\n1,2\n";
        assert_eq!(read_all(text), text);
        assert_eq!(read_all(&gzip(text)), text);
        // Concatenated members read as one stream.
        let mut two = gzip(b"a,b\n");
        two.extend(gzip(b"1,2\n"));
        assert_eq!(read_all(&two), text);
        // Inputs shorter than the magic are passed through.
        assert_eq!(read_all(b""), b"");
        assert_eq!(read_all(&[0x1f]), [0x1f]);
    }

    #[test]
    fn a_truncated_gzip_is_an_error_not_a_short_read() {
        let full = gzip(b"a,b\n1,2\n3,4\n");
        let mut out = Vec::new();
        let result = decompressing(&full[..full.len() - 6])
            .expect("open")
            .read_to_end(&mut out);
        assert!(result.is_err());
    }
}
