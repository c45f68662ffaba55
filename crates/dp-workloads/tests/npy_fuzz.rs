//! The `.npy` reader on untrusted bytes: random files, corrupted valid
//! files and hostile headers give a typed error (or a valid array), never
//! a panic, a hang or an allocation sized by the header alone.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::Path;

use dp_core::DpError;
use dp_workloads::npy::{read_array_from, read_matrix, write_matrix};
use proptest::prelude::*;

mod common;
use common::npy_bytes;

fn f8_header(shape: &str) -> String {
    format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}")
}

fn read(bytes: &[u8]) -> Result<Vec<f64>, DpError> {
    read_array_from(bytes, Path::new("fuzz.npy")).map(|a| a.data)
}

#[test]
fn the_helper_writes_what_numpy_reads() {
    let data: Vec<u8> = [1.5f64, -2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(
        read(&npy_bytes(&f8_header("(2,)"), &data)).unwrap(),
        vec![1.5, -2.0]
    );
}

#[test]
fn hostile_headers_are_typed_errors() {
    // Element counts overflowing u64 (npyz multiplies unchecked).
    for shape in ["(4294967296, 4294967296)", "(18446744073709551615, 2)"] {
        let err = read(&npy_bytes(&f8_header(shape), &[])).unwrap_err();
        assert!(err.to_string().contains("fit in memory"), "{err}");
    }
    // The same in the other spellings npyz's parser reads (double quotes,
    // a list), and a zero dimension that hides the overflow from the
    // element count but not from npyz's strides.
    for header in [
        r#"{"descr": "<f8", "fortran_order": False, "shape": (4294967296, 4294967296)}"#,
        "{'descr': '<f8', 'fortran_order': False, 'shape': [4294967296, 4294967296]}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776)}",
    ] {
        let err = read(&npy_bytes(header, &[])).unwrap_err();
        assert!(err.to_string().contains("fit in memory"), "{header}: {err}");
    }
    // No shape at all: refused before npyz.
    let err = read(&npy_bytes("{'descr': '<f8', 'fortran_order': False}", &[])).unwrap_err();
    assert!(err.to_string().contains("shape"), "{err}");
    // A billion entries announced, none present: truncated, at once.
    let err = read(&npy_bytes(&f8_header("(1000000000,)"), &[0; 16])).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
    // Oversized header length, unknown version, no magic, empty input.
    let mut big = b"\x93NUMPY\x02\x00".to_vec();
    big.extend_from_slice(&u32::MAX.to_le_bytes());
    for bytes in [
        big,
        b"\x93NUMPY\x07\x00\x10\x00".to_vec(),
        b"PK\x03\x04".to_vec(),
        vec![],
    ] {
        assert!(matches!(read(&bytes), Err(DpError::Io(_))));
    }
}

// proptest's default case count (PROPTEST_CASES overrides it): the long
// run is `PROPTEST_CASES=100000 cargo test --release -p dp-workloads --test npy_fuzz`.
proptest! {
    /// Arbitrary bytes.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read(&bytes);
    }

    /// A valid magic and version, then arbitrary header text and data.
    #[test]
    fn random_headers_never_panic(
        header in "\\{('[a-z_]{1,14}': [-\\w'<>|(), ]{0,24}, ){0,4}\\}",
        data in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        let _ = read(&npy_bytes(&header, &data));
    }

    /// Shapes of any dimension and size over a short data block.
    #[test]
    fn random_shapes_never_panic(
        dims in proptest::collection::vec(any::<u64>(), 0..4),
        data in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        let shape = format!("({})", dims.iter().map(|d| format!("{d},")).collect::<String>());
        if let Ok(values) = read(&npy_bytes(&f8_header(&shape), &data)) {
            // Accepted only when the data hold exactly the announced entries.
            let len = dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
            prop_assert_eq!(len, Some(values.len() as u64));
        }
    }

    /// A valid matrix file with bytes overwritten: a typed error or a
    /// matrix of the written shape.
    #[test]
    fn corrupted_matrix_files_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join(format!("npy-fuzz-{:?}.npy", std::thread::current().id()));
        let m = dp_linalg::Mat::from_fn(3, 4, |i, j| (i * 4 + j) as f64 - 5.5);
        write_matrix(&path, m.as_ref()).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, value) in &flips {
            let i = at.index(bytes.len());
            bytes[i] = *value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(read_back) = read_matrix(&path) {
            prop_assert!(read_back.nrows() * read_back.ncols() > 0);
        }
    }
}
