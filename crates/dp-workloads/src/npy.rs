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
use npyz::{DType, NpyFile, Order, TypeChar, WriterBuilder};

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
pub fn read_array_from<R: Read>(mut reader: R, path: &Path) -> Result<NpyArray> {
    let preamble = read_preamble(&mut reader, path)?;
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
    let size = type_str.size_field();
    let len = checked_len(&shape).ok_or_else(|| too_large(path, &shape))?;
    let data: Vec<f64> = match (type_str.type_char(), size) {
        (TypeChar::Float, 8) => read_all::<f64, _>(npy, len, path)?,
        (TypeChar::Float, 4) => read_all::<f32, _>(npy, len, path)?,
        (TypeChar::Int, 1) => read_all::<i8, _>(npy, len, path)?,
        (TypeChar::Int, 2) => read_all::<i16, _>(npy, len, path)?,
        (TypeChar::Int, 4) => read_all::<i32, _>(npy, len, path)?,
        (TypeChar::Int, 8) => read_all::<i64, _>(npy, len, path)?,
        (TypeChar::Uint, 1) => read_all::<u8, _>(npy, len, path)?,
        (TypeChar::Uint, 2) => read_all::<u16, _>(npy, len, path)?,
        (TypeChar::Uint, 4) => read_all::<u32, _>(npy, len, path)?,
        (TypeChar::Uint, 8) => read_all::<u64, _>(npy, len, path)?,
        (TypeChar::Bool, _) => read_all::<bool, _>(npy, len, path)?,
        _ => {
            return Err(io_error(
                path,
                format!(
                    "unsupported dtype {dtype}: expected float64, float32, an integer type or bool"
                ),
            ));
        }
    };
    if data.len() != len {
        return Err(io_error(
            path,
            format!(
                "truncated: shape {shape:?} needs {len} entries, found {}",
                data.len()
            ),
        ));
    }
    let data = if order == Order::Fortran && shape.len() > 1 {
        fortran_to_c(&data, &shape)
    } else {
        data
    };
    Ok(NpyArray { shape, data, dtype })
}

/// A supported `.npy` cell type and its value as f64: exact, but for
/// 64-bit integers beyond 2⁵³, which round to the nearest f64; `true` is 1.
trait Cell: npyz::Deserialize {
    fn to_f64(self) -> f64;
}

macro_rules! cells_converted_by {
    ($convert:expr; $($t:ty),*) => {
        $(impl Cell for $t {
            fn to_f64(self) -> f64 {
                $convert(self)
            }
        })*
    };
}

cells_converted_by!(f64::from; f64, f32, i8, i16, i32, u8, u16, u32);
cells_converted_by!(|v| v as f64; i64, u64);
cells_converted_by!(|v| f64::from(u8::from(v)); bool);

/// The `len` entries as f64, read one by one: memory grows with the bytes
/// actually present, never with what the header announces.
fn read_all<T: Cell, R: Read>(npy: NpyFile<R>, len: usize, path: &Path) -> Result<Vec<f64>> {
    let entries = npy
        .data::<T>()
        .map_err(|e| io_error(path, format!("cannot read data ({e})")))?;
    let mut out = Vec::with_capacity(len.min(1 << 16));
    for entry in entries {
        out.push(Cell::to_f64(entry.map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                io_error(
                    path,
                    "truncated: the file ends before the data its header announces",
                )
            } else {
                io_error(path, format!("cannot read data ({e})"))
            }
        })?));
    }
    Ok(out)
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

fn check_finite(path: &Path, shape: &[usize], data: &[f64]) -> Result<()> {
    if let Some(pos) = data.iter().position(|v| !v.is_finite()) {
        let (row, col) = if shape.len() == 2 {
            (pos / shape[1], pos % shape[1])
        } else {
            (pos, 0)
        };
        return Err(DpError::NonFinite {
            what: path.display().to_string(),
            row,
            col,
            value: data[pos],
        });
    }
    Ok(())
}

/// Reads a 2-D matrix (workload or strategy). Refuses 1-D and n-d arrays,
/// empty arrays and non-finite entries.
pub fn read_matrix(path: &Path) -> Result<Mat<f64>> {
    let arr = read_array(path)?;
    if arr.shape.len() != 2 {
        return Err(io_error(
            path,
            format!(
                "expected a 2-D matrix, found a {}-D array of shape {:?}",
                arr.shape.len(),
                arr.shape
            ),
        ));
    }
    let (rows, cols) = (arr.shape[0], arr.shape[1]);
    if rows == 0 || cols == 0 {
        return Err(DpError::Empty {
            what: path.display().to_string(),
            rows,
            cols,
        });
    }
    check_finite(path, &arr.shape, &arr.data)?;
    Ok(Mat::from_fn(rows, cols, |i, j| arr.data[i * cols + j]))
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
