//! Reading and writing matrices and histograms as NumPy `.npy` files
//! (through the maintained `npyz` crate).
//!
//! Accepted element types: float64 and float32, signed and unsigned
//! integers (1–8 bytes), any byte order, C or Fortran order. Everything is
//! converted to f64. Complex, string, object and structured arrays are
//! refused with an error naming the dtype.
//!
//! Untrusted bytes never panic or exhaust memory here: the header's shape
//! is checked for overflow before `npyz` sees it (its element count is an
//! unchecked product), and the data are read incrementally, so a header
//! announcing more entries than the file holds is "truncated", not a huge
//! allocation.

use std::fs::File;
use std::io::{BufReader, BufWriter, Cursor, Read};
use std::path::Path;

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef};
use npyz::{DType, Endianness, NpyFile, Order, TypeChar, WriterBuilder};

/// An array read from a `.npy` file, converted to f64, with its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// The shape as stored.
    pub shape: Vec<usize>,
    /// Entries in C (row-major) order.
    pub data: Vec<f64>,
    /// The stored dtype, e.g. `<i8` or `<f8`.
    pub dtype: String,
}

fn io_error(path: &Path, what: impl std::fmt::Display) -> DpError {
    DpError::Io(format!("{}: {what}", path.display()))
}

/// Reads any supported `.npy` array.
pub fn read_array(path: &Path) -> Result<NpyArray> {
    let file = File::open(path).map_err(|e| io_error(path, format!("cannot open: {e}")))?;
    read_array_from(BufReader::new(file), path)
}

/// Reads a supported `.npy` array from a reader; `path` only names it in
/// errors.
pub fn read_array_from<R: Read>(reader: R, path: &Path) -> Result<NpyArray> {
    let (header, data_reader) = read_header(reader, path)?;
    // Grows with the entries actually read, never with the header's claim.
    let mut data = Vec::with_capacity(header.len.min(CHUNK_ENTRIES));
    stream_data(data_reader, &header, CHUNK_ENTRIES, path, |_, values| {
        data.extend_from_slice(values);
        Ok(())
    })?;
    let data = if header.order == Order::Fortran && header.shape.len() > 1 {
        fortran_to_c(&data, &header.shape)
    } else {
        data
    };
    Ok(NpyArray {
        shape: header.shape,
        data,
        dtype: header.dtype,
    })
}

/// A parsed `.npy` header: what the data bytes after it hold.
struct Header {
    shape: Vec<usize>,
    /// The element count, checked not to overflow.
    len: usize,
    order: Order,
    decoder: Decoder,
    /// The stored dtype, e.g. `<f8`.
    dtype: String,
    /// Bytes before the data (magic, version, header).
    preamble_bytes: usize,
}

/// Reads and checks the header; returns it with the reader positioned at
/// the first data byte.
fn read_header<R: Read>(mut reader: R, path: &Path) -> Result<(Header, impl Read)> {
    let preamble = read_preamble(&mut reader, path)?;
    let preamble_bytes = preamble.len();
    let npy = NpyFile::new(Cursor::new(preamble).chain(reader))
        .map_err(|e| io_error(path, format!("not a valid .npy file ({e})")))?;
    let shape = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|_| io_error(path, "a dimension does not fit in memory"))?;
    let order = npy.order();
    let type_str = match npy.dtype() {
        DType::Plain(ts) => ts,
        other => {
            return Err(io_error(
                path,
                format!(
                    "unsupported dtype {}: expected a plain numeric array",
                    other.descr()
                ),
            ));
        }
    };
    let dtype = type_str.to_string();
    let decoder = Decoder::of(&type_str).ok_or_else(|| {
        io_error(
            path,
            format!(
                "unsupported dtype {dtype}: expected float64, float32, an integer type or bool"
            ),
        )
    })?;
    let len = checked_len(&shape).ok_or_else(|| too_large(path, &shape))?;
    let header = Header {
        shape,
        len,
        order,
        decoder,
        dtype,
        preamble_bytes,
    };
    Ok((header, npy.into_inner()))
}

/// Entries decoded per read: 1 MiB of f64.
const CHUNK_ENTRIES: usize = 1 << 17;

/// How one stored element becomes an f64: exactly, but for 64-bit
/// integers beyond 2⁵³, which round to the nearest f64; a bool is 0 or 1
/// (any other byte is an error, as NumPy writes only those).
#[derive(Debug, Clone, Copy)]
struct Decoder {
    kind: TypeChar,
    size: usize,
    big_endian: bool,
}

impl Decoder {
    /// The decoder of a supported plain dtype.
    fn of(type_str: &npyz::TypeStr) -> Option<Self> {
        let kind = type_str.type_char();
        let size = usize::try_from(type_str.size_field()).ok()?;
        let supported = match kind {
            TypeChar::Float => matches!(size, 4 | 8),
            TypeChar::Int | TypeChar::Uint => matches!(size, 1 | 2 | 4 | 8),
            TypeChar::Bool => size == 1,
            _ => false,
        };
        supported.then_some(Self {
            kind,
            size,
            big_endian: type_str.endianness() == Endianness::Big,
        })
    }

    /// Appends the values of `bytes`, a whole number of elements.
    fn decode(self, bytes: &[u8], out: &mut Vec<f64>, path: &Path) -> Result<()> {
        macro_rules! push {
            ($t:ty, $n:literal) => {
                out.extend(bytes.chunks_exact($n).map(|c| {
                    let raw: [u8; $n] = c.try_into().unwrap_or([0; $n]);
                    let v = if self.big_endian {
                        <$t>::from_be_bytes(raw)
                    } else {
                        <$t>::from_le_bytes(raw)
                    };
                    v as f64
                }))
            };
        }
        match (self.kind, self.size) {
            (TypeChar::Float, 8) => push!(f64, 8),
            (TypeChar::Float, _) => push!(f32, 4),
            (TypeChar::Int, 1) => push!(i8, 1),
            (TypeChar::Int, 2) => push!(i16, 2),
            (TypeChar::Int, 4) => push!(i32, 4),
            (TypeChar::Int, _) => push!(i64, 8),
            (TypeChar::Uint, 1) => push!(u8, 1),
            (TypeChar::Uint, 2) => push!(u16, 2),
            (TypeChar::Uint, 4) => push!(u32, 4),
            (TypeChar::Uint, _) => push!(u64, 8),
            _ => {
                if let Some(&bad) = bytes.iter().find(|&&b| b > 1) {
                    return Err(io_error(
                        path,
                        format!("cannot read data (invalid value for bool: {bad})"),
                    ));
                }
                out.extend(bytes.iter().map(|&b| f64::from(b)));
            }
        }
        Ok(())
    }
}

/// Reads the `header.len` entries after the header, decoded to f64 in the
/// file's order, and hands them to `sink(first index, values)` in chunks
/// of `chunk` entries (the last shorter): memory is one chunk, whatever
/// the header announces. A file that ends early is "truncated".
fn stream_data<R: Read>(
    mut reader: R,
    header: &Header,
    chunk: usize,
    path: &Path,
    mut sink: impl FnMut(usize, &[f64]) -> Result<()>,
) -> Result<()> {
    let size = header.decoder.size;
    let chunk = chunk.max(1);
    let mut bytes = vec![0u8; chunk.min(header.len) * size];
    let mut values = Vec::with_capacity(chunk.min(header.len));
    let mut done = 0;
    while done < header.len {
        let take = chunk.min(header.len - done);
        let raw = &mut bytes[..take * size];
        reader.read_exact(raw).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                io_error(
                    path,
                    "truncated: the file ends before the data its header announces",
                )
            } else {
                io_error(path, format!("cannot read data ({e})"))
            }
        })?;
        values.clear();
        header.decoder.decode(raw, &mut values, path)?;
        sink(done, &values)?;
        done += take;
    }
    Ok(())
}

/// Largest header accepted (NumPy itself refuses headers over 10 000
/// bytes unless told otherwise).
const MAX_HEADER_BYTES: usize = 1 << 16;

/// Reads the magic string, version, header length and header text (the
/// format of NumPy's `numpy.lib.format`), refuses an oversized header or a
/// shape whose element count overflows, and returns the bytes read so the
/// parser can be handed them again.
fn read_preamble<R: Read>(reader: &mut R, path: &Path) -> Result<Vec<u8>> {
    let truncated = |_| io_error(path, "not a valid .npy file (truncated header)");
    let mut bytes = vec![0u8; 10];
    reader.read_exact(&mut bytes[..8]).map_err(truncated)?;
    if &bytes[..6] != b"\x93NUMPY" {
        return Err(io_error(path, "not a valid .npy file (no magic string)"));
    }
    let header_len = match bytes[6] {
        1 => {
            reader.read_exact(&mut bytes[8..10]).map_err(truncated)?;
            usize::from(u16::from_le_bytes([bytes[8], bytes[9]]))
        }
        2 | 3 => {
            bytes.resize(12, 0);
            reader.read_exact(&mut bytes[8..12]).map_err(truncated)?;
            let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            usize::try_from(n).unwrap_or(usize::MAX)
        }
        v => return Err(io_error(path, format!("unsupported .npy version {v}"))),
    };
    if header_len > MAX_HEADER_BYTES {
        return Err(io_error(
            path,
            format!("not a valid .npy file (header of {header_len} bytes)"),
        ));
    }
    let start = bytes.len();
    bytes.resize(start + header_len, 0);
    reader.read_exact(&mut bytes[start..]).map_err(truncated)?;
    let Some(shape) = header_shape(&bytes[start..]) else {
        return Err(io_error(
            path,
            "not a valid .npy file (no readable 'shape' in its header)".to_string(),
        ));
    };
    // The product of the nonzero dimensions too: npyz's strides multiply
    // them unchecked even when another dimension is 0.
    let product = |nonzero: bool| {
        shape
            .iter()
            .filter(|&&d| !nonzero || d != 0)
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .and_then(|n| usize::try_from(n).ok())
    };
    if product(false).is_none() || product(true).is_none() {
        return Err(too_large(path, &shape));
    }
    Ok(bytes)
}

/// The integers of the header's shape, `'shape'` or `"shape"`, as a tuple
/// `(…)` or a list `[…]` (both are Python literals npyz's parser reads);
/// `None` when it does not read as one.
fn header_shape(header: &[u8]) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(header).ok()?;
    let key = text.find("'shape'").or_else(|| text.find("\"shape\""))?;
    let after = &text[key + "'shape'".len()..];
    let open = after.find(['(', '['])?;
    let closer = if after.as_bytes()[open] == b'(' {
        ')'
    } else {
        ']'
    };
    let close = after[open..].find(closer)? + open;
    after[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.trim_end_matches('L').parse::<u64>().ok())
        .collect()
}

/// The element count of `shape`, when it fits in `usize`.
fn checked_len(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

fn too_large<T: std::fmt::Debug>(path: &Path, shape: &[T]) -> DpError {
    io_error(
        path,
        format!("shape {shape:?} has more entries than fit in memory"),
    )
}

/// Reorders column-major (Fortran) data of an n-d array into row-major.
fn fortran_to_c(data: &[f64], shape: &[usize]) -> Vec<f64> {
    let nd = shape.len();
    let mut out = vec![0.0; data.len()];
    let mut index = vec![0usize; nd];
    for (f_pos, &v) in data.iter().enumerate() {
        // Decompose f_pos in Fortran order (first index fastest).
        let mut rem = f_pos;
        for (k, &d) in shape.iter().enumerate() {
            index[k] = rem % d;
            rem /= d;
        }
        let mut c_pos = 0;
        for (k, &d) in shape.iter().enumerate() {
            c_pos = c_pos * d + index[k];
        }
        out[c_pos] = v;
    }
    out
}

/// Reads a 2-D matrix (workload or strategy). Refuses 1-D and n-d arrays,
/// empty arrays and non-finite entries.
///
/// The entries go straight into the matrix, a block of whole rows (or
/// columns, for Fortran order) at a time: no second copy of a large W.
/// The file's length is checked against the header before the matrix is
/// allocated, so a header announcing more than the file holds is
/// "truncated", not a huge allocation.
pub fn read_matrix(path: &Path) -> Result<Mat<f64>> {
    let file = File::open(path).map_err(|e| io_error(path, format!("cannot open: {e}")))?;
    let file_bytes = file
        .metadata()
        .map_err(|e| io_error(path, format!("cannot read: {e}")))?
        .len();
    let (header, data) = read_header(BufReader::new(file), path)?;
    if header.shape.len() != 2 {
        return Err(io_error(
            path,
            format!(
                "expected a 2-D matrix, found a {}-D array of shape {:?}",
                header.shape.len(),
                header.shape
            ),
        ));
    }
    let (rows, cols) = (header.shape[0], header.shape[1]);
    if rows == 0 || cols == 0 {
        return Err(DpError::Empty {
            what: path.display().to_string(),
            rows,
            cols,
        });
    }
    let needed = u64::try_from(header.len)
        .ok()
        .and_then(|n| n.checked_mul(header.decoder.size as u64))
        .and_then(|n| n.checked_add(header.preamble_bytes as u64));
    if needed.is_none_or(|n| n > file_bytes) {
        return Err(io_error(
            path,
            "truncated: the file ends before the data its header announces",
        ));
    }
    // The file holds lines: rows in C order, columns in Fortran order.
    let fortran = header.order == Order::Fortran;
    let line = if fortran { rows } else { cols };
    // Chunks of whole lines where a line fits in one; a longer line (a
    // 1×10⁸ row, say) is read in plain chunks, never one line at once.
    let whole_lines = line <= CHUNK_ENTRIES;
    let chunk = if whole_lines {
        (CHUNK_ENTRIES / line) * line
    } else {
        CHUNK_ENTRIES
    };
    let mut m = Mat::<f64>::zeros(rows, cols);
    stream_data(data, &header, chunk, path, |first, values| {
        if let Some(pos) = values.iter().position(|v| !v.is_finite()) {
            let (along, across) = ((first + pos) % line, (first + pos) / line);
            let (row, col) = if fortran {
                (along, across)
            } else {
                (across, along)
            };
            return Err(DpError::NonFinite {
                what: path.display().to_string(),
                row,
                col,
                value: values[pos],
            });
        }
        if !whole_lines {
            for (k, &v) in values.iter().enumerate() {
                let (along, across) = ((first + k) % line, (first + k) / line);
                let (i, j) = if fortran {
                    (along, across)
                } else {
                    (across, along)
                };
                m[(i, j)] = v;
            }
            return Ok(());
        }
        let (start, count) = (first / line, values.len() / line);
        if fortran {
            m.as_mut()
                .subcols_mut(start, count)
                .copy_from(MatRef::from_column_major_slice(values, rows, count));
            return Ok(());
        }
        // Column by column: the chunk's rows stay in cache while each
        // column is written contiguously (faer's copy between layouts goes
        // entry by entry, at twice the time).
        for (j, col) in m
            .as_mut()
            .subrows_mut(start, count)
            .col_iter_mut()
            .enumerate()
        {
            let dst = col
                .try_as_col_major_mut()
                .ok_or_else(|| io_error(path, "a matrix column is not contiguous"))?
                .as_slice_mut();
            for (d, &v) in dst.iter_mut().zip(values[j..].iter().step_by(cols)) {
                *d = v;
            }
        }
        Ok(())
    })?;
    Ok(m)
}

/// Writes a matrix as a C-order float64 `.npy` file.
pub fn write_matrix(path: &Path, matrix: MatRef<'_, f64>) -> Result<()> {
    let file = File::create(path).map_err(|e| io_error(path, format!("cannot create: {e}")))?;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[matrix.nrows() as u64, matrix.ncols() as u64])
        .writer(BufWriter::new(file))
        .begin_nd()
        .map_err(|e| io_error(path, e))?;
    for i in 0..matrix.nrows() {
        for j in 0..matrix.ncols() {
            writer
                .push(&matrix[(i, j)])
                .map_err(|e| io_error(path, e))?;
        }
    }
    writer.finish().map_err(|e| io_error(path, e))
}

/// Writes a 1-D float64 `.npy` file.
pub fn write_vector(path: &Path, values: &[f64]) -> Result<()> {
    npyz::to_file_1d(path, values.iter().copied()).map_err(|e| io_error(path, e))
}
