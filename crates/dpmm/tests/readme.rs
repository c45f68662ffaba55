//! The README's library example is `tests/readme/tour.rs`, word for
//! word, and it runs from the repository root as the README says: it
//! releases the embedded census extract's 2-way marginals and writes them.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::Path;

mod tour {
    include!("readme/tour.rs");

    /// The example's `main`.
    pub fn run() -> Result<(), Box<dyn std::error::Error>> {
        main()
    }
}

/// The first ```rust block of the README's section `heading`.
fn first_rust_block(readme: &str, heading: &str) -> String {
    let section = &readme[readme.find(heading).unwrap()..];
    let start = section.find("```rust\n").unwrap() + "```rust\n".len();
    let end = start + section[start..].find("```").unwrap();
    section[start..end].to_string()
}

#[test]
fn the_readme_example_is_the_tour_and_releases_the_census_extract() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let example = std::fs::read_to_string(root.join("crates/dpmm/tests/readme/tour.rs")).unwrap();
    assert_eq!(
        first_rust_block(&readme, "## A five-minute tour: the Rust library"),
        example
    );

    // Run exactly as a user would, from the repository root (the only test
    // of this binary, so no other test sees the directory change).
    std::env::set_current_dir(&root).unwrap();
    tour::run().unwrap();
    let dir = std::env::temp_dir().join(format!("dpmm-tour-{}", std::process::id()));
    let csv = std::fs::read_to_string(dir.join("answers.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    // The header, then the 28 2-way marginals of the 8 attributes: 1,671
    // cells in all (the README's count).
    assert_eq!(rows[0], "query,answer,std_error,ci_low,ci_high");
    assert_eq!(rows.len(), 1 + 1671);
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("answers.csv.json")).unwrap())
            .unwrap();
    assert_eq!(sidecar["epsilon"], 1.0);
    assert_eq!(sidecar["charged"], 1.0);
    assert_eq!(sidecar["ledger"]["entry"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
