//! Reading and writing matrices and histograms as NumPy `.npy` files
//! (through the maintained `npyz` crate).
//!
//! Accepted element types: float64 and float32, signed and unsigned
//! integers (1–8 bytes), any byte order, C or Fortran order. Everything is
//! converted to f64. Complex, string, object and structured arrays are
//! refused with an error naming the dtype.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
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
pub fn read_array_from<R: Read>(reader: R, path: &Path) -> Result<NpyArray> {
    let npy =
        NpyFile::new(reader).map_err(|e| io_error(path, format!("not a valid .npy file ({e})")))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
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
    let len: usize = shape.iter().product();
    let data: Vec<f64> = match (type_str.type_char(), size) {
        (TypeChar::Float, 8) => read_all::<f64, _>(npy, path)?,
        (TypeChar::Float, 4) => to_f64(read_all::<f32, _>(npy, path)?),
        (TypeChar::Int, 1) => to_f64(read_all::<i8, _>(npy, path)?),
        (TypeChar::Int, 2) => to_f64(read_all::<i16, _>(npy, path)?),
        (TypeChar::Int, 4) => to_f64(read_all::<i32, _>(npy, path)?),
        (TypeChar::Int, 8) => read_all::<i64, _>(npy, path)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        (TypeChar::Uint, 1) => to_f64(read_all::<u8, _>(npy, path)?),
        (TypeChar::Uint, 2) => to_f64(read_all::<u16, _>(npy, path)?),
        (TypeChar::Uint, 4) => to_f64(read_all::<u32, _>(npy, path)?),
        (TypeChar::Uint, 8) => read_all::<u64, _>(npy, path)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        (TypeChar::Bool, _) => read_all::<bool, _>(npy, path)?
            .into_iter()
            .map(|v| if v { 1.0 } else { 0.0 })
            .collect(),
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

fn to_f64<T: Into<f64>>(v: Vec<T>) -> Vec<f64> {
    v.into_iter().map(Into::into).collect()
}

fn read_all<T: npyz::Deserialize, R: Read>(npy: NpyFile<R>, path: &Path) -> Result<Vec<T>> {
    npy.into_vec::<T>().map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            io_error(
                path,
                "truncated: the file ends before the data its header announces",
            )
        } else {
            io_error(path, format!("cannot read data ({e})"))
        }
    })
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
