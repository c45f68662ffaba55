//! The privacy kernel has no fault-injection switch (issue 30, item 11).
//!
//! The audit's broken variants run the real kernel with mis-stated
//! parameters (dp-bench's `audit` module); nothing in dp-core can make a
//! measurement weaker than it claims. Cargo unifies features across a
//! workspace build, so a feature on dp-core that some other crate enabled
//! would reach the `dpmm` binary: dp-core therefore declares no feature
//! at all, and no source file is compiled conditionally on one.

use std::path::Path;

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn dp_core_declares_no_feature() {
    let manifest = read(&manifest_dir().join("Cargo.toml"));
    let tables: Vec<&str> = manifest
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with('['))
        .collect();
    assert!(
        !tables.iter().any(|t| t.contains("features")),
        "dp-core's Cargo.toml declares features: {tables:?}"
    );
    assert!(!manifest.contains("broken"), "{manifest}");
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_source_is_compiled_on_a_feature() {
    let mut files = Vec::new();
    rust_files(&manifest_dir().join("src"), &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    for file in files {
        let text = read(&file);
        assert!(
            !text.contains("feature ="),
            "{} is compiled conditionally on a feature",
            file.display()
        );
    }
}
