//! The `.npy` reader against files written byte by byte here: every
//! supported dtype in both byte orders, C and Fortran order, matrices
//! spanning several read chunks, and the position a non-finite entry is
//! reported at. The expected values are the integers the bytes encode.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::{Path, PathBuf};

use dp_core::DpError;
use dp_workloads::npy::{read_array_from, read_matrix};

mod common;

/// A `.npy` file with the given header fields and data bytes.
fn npy_bytes(descr: &str, fortran: bool, shape: (usize, usize), data: &[u8]) -> Vec<u8> {
    let order = if fortran { "True" } else { "False" };
    let header = format!(
        "{{'descr': '{descr}', 'fortran_order': {order}, 'shape': ({}, {}), }}",
        shape.0, shape.1
    );
    common::npy_bytes(&header, data)
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Entry (i, j) of the test matrices: distinct small integers, some
/// negative for the signed types.
fn value(i: usize, j: usize, signed: bool) -> i64 {
    let v = (i * 7 + j * 3) as i64 % 100;
    if signed && (i + j) % 2 == 1 { -v } else { v }
}

/// The entries in file order (C: row by row; Fortran: column by column).
fn file_order(rows: usize, cols: usize, fortran: bool) -> Vec<(usize, usize)> {
    if fortran {
        (0..cols)
            .flat_map(|j| (0..rows).map(move |i| (i, j)))
            .collect()
    } else {
        (0..rows)
            .flat_map(|i| (0..cols).map(move |j| (i, j)))
            .collect()
    }
}

/// The encoder of one value as the numeric type `$t`, in either byte
/// order (one-byte types have only one).
macro_rules! encode {
    ($t:ty) => {
        |v: i64, big_endian: bool| {
            let x = v as $t;
            if big_endian {
                x.to_be_bytes().to_vec()
            } else {
                x.to_le_bytes().to_vec()
            }
        }
    };
}

#[test]
fn every_dtype_byte_order_and_layout_reads_back_its_integers() {
    // (descr without the byte-order mark, signed, encoder of one value).
    type Encode = fn(i64, bool) -> Vec<u8>;
    let kinds: [(&str, bool, Encode); 10] = [
        ("f8", true, encode!(f64)),
        ("f4", true, encode!(f32)),
        ("i1", true, encode!(i8)),
        ("i2", true, encode!(i16)),
        ("i4", true, encode!(i32)),
        ("i8", true, encode!(i64)),
        ("u1", false, encode!(u8)),
        ("u2", false, encode!(u16)),
        ("u4", false, encode!(u32)),
        ("u8", false, encode!(u64)),
    ];
    let (rows, cols) = (3, 4);
    for (descr, signed, encode) in kinds {
        for big_endian in [false, true] {
            let mark = if descr.ends_with('1') {
                '|'
            } else if big_endian {
                '>'
            } else {
                '<'
            };
            for fortran in [false, true] {
                let data: Vec<u8> = file_order(rows, cols, fortran)
                    .into_iter()
                    .flat_map(|(i, j)| encode(value(i, j, signed), big_endian))
                    .collect();
                let bytes = npy_bytes(&format!("{mark}{descr}"), fortran, (rows, cols), &data);
                let tag = format!("{mark}{descr} fortran={fortran}");
                let m = read_matrix(&write(
                    &format!("layout-{mark}{descr}-{fortran}.npy"),
                    &bytes,
                ))
                .unwrap_or_else(|e| panic!("{tag}: {e}"));
                assert_eq!(m.shape(), (rows, cols), "{tag}");
                let array = read_array_from(bytes.as_slice(), Path::new("x.npy")).unwrap();
                assert_eq!(array.shape, vec![rows, cols], "{tag}");
                for i in 0..rows {
                    for j in 0..cols {
                        let want = value(i, j, signed) as f64;
                        assert_eq!(m[(i, j)], want, "{tag} ({i},{j})");
                        assert_eq!(array.data[i * cols + j], want, "{tag} ({i},{j})");
                    }
                }
            }
        }
    }
}

#[test]
fn bools_are_zero_or_one_and_other_bytes_are_refused() {
    let bytes = npy_bytes("|b1", false, (2, 2), &[0, 1, 1, 0]);
    let m = read_matrix(&write("bool.npy", &bytes)).unwrap();
    assert_eq!(
        (m[(0, 0)], m[(0, 1)], m[(1, 0)], m[(1, 1)]),
        (0.0, 1.0, 1.0, 0.0)
    );
    let bad = npy_bytes("|b1", false, (2, 2), &[0, 1, 2, 0]);
    let err = read_matrix(&write("bool-bad.npy", &bad)).unwrap_err();
    assert!(
        err.to_string().contains("invalid value for bool: 2"),
        "{err}"
    );
}

/// Matrices of several read chunks (over 2¹⁷ entries), including one whose
/// rows do not divide a chunk and lines (rows in C order, columns in
/// Fortran order) longer than a chunk, in both orders.
#[test]
fn matrices_spanning_many_chunks_are_read_whole() {
    for (rows, cols) in [(700, 301), (3, 70_001), (150_001, 2), (2, 140_001)] {
        for fortran in [false, true] {
            let data: Vec<u8> = file_order(rows, cols, fortran)
                .into_iter()
                .flat_map(|(i, j)| ((i * cols + j) as f64).to_le_bytes())
                .collect();
            let bytes = npy_bytes("<f8", fortran, (rows, cols), &data);
            let m = read_matrix(&write(&format!("chunks-{rows}-{fortran}.npy"), &bytes)).unwrap();
            for i in 0..rows {
                for j in 0..cols {
                    assert_eq!(m[(i, j)], (i * cols + j) as f64, "{rows}x{cols} ({i},{j})");
                }
            }
        }
    }
}

#[test]
fn a_non_finite_entry_is_reported_at_its_row_and_column() {
    let (rows, cols) = (4, 5);
    for fortran in [false, true] {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let data: Vec<u8> = file_order(rows, cols, fortran)
                .into_iter()
                .flat_map(|(i, j)| if (i, j) == (2, 3) { bad } else { 1.0 }.to_le_bytes())
                .collect();
            let bytes = npy_bytes("<f8", fortran, (rows, cols), &data);
            match read_matrix(&write(&format!("nonfinite-{fortran}.npy"), &bytes)) {
                Err(DpError::NonFinite { row, col, .. }) => assert_eq!((row, col), (2, 3)),
                other => panic!("fortran={fortran} {bad}: {other:?}"),
            }
        }
    }
}

/// A header announcing more entries than the file holds is "truncated"
/// before anything the size of the announcement is allocated; a file one
/// byte short is too.
#[test]
fn files_shorter_than_their_header_are_truncated() {
    for (shape, data_len) in [((1 << 20, 1 << 20), 64), ((3, 4), 95)] {
        let bytes = npy_bytes("<f8", false, shape, &vec![0; data_len]);
        let err = read_matrix(&write("short.npy", &bytes)).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");
    }
}
