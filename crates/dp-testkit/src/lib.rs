//! Test support shared by the workspace's fuzz targets: proptest
//! strategies that damage a valid input, so that a reader of untrusted
//! bytes (records, ledgers, plan files, specs) is exercised near the inputs
//! it accepts as well as on arbitrary bytes.

use proptest::prelude::*;

/// `valid` with `edits` single-byte edits (overwrite, insert or remove, at
/// any position including the end), each byte drawn half the time from
/// `favoured` (a format's structure characters, when not empty) and
/// otherwise from all 256 values.
pub fn byte_edits(
    valid: Vec<u8>,
    favoured: &'static [u8],
    edits: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<u8>> {
    let byte = if favoured.is_empty() {
        any::<u8>().boxed()
    } else {
        prop_oneof![prop::sample::select(favoured.to_vec()), any::<u8>()].boxed()
    };
    prop::collection::vec((any::<prop::sample::Index>(), byte, 0..3u8), edits).prop_map(
        move |edits| {
            let mut bytes = valid.clone();
            for (at, b, kind) in edits {
                let i = at.index(bytes.len() + 1);
                match kind {
                    0 if i < bytes.len() => bytes[i] = b,
                    1 => bytes.insert(i, b),
                    _ if i < bytes.len() => {
                        bytes.remove(i);
                    }
                    _ => bytes.push(b),
                }
            }
            bytes
        },
    )
}

/// The names of the entries of `dir`, sorted: what a test sees a command
/// leave behind (panics, failing the test, when `dir` cannot be read).
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the directory is readable")
        .map(|e| {
            let entry = e.expect("the directory's entries are readable");
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    names.sort();
    names
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    /// Each edit changes the length by at most one, and no edits leave the
    /// input as it was.
    #[test]
    fn edits_stay_near_the_input() {
        let valid = b"{\"a\": [1, 2]}".to_vec();
        let mut runner = TestRunner::deterministic();
        for edits in [0..1, 3..4] {
            let strategy = byte_edits(valid.clone(), b"{}[]", edits.clone());
            for _ in 0..200 {
                let bytes = strategy.new_tree(&mut runner).unwrap().current();
                let (lo, hi) = (valid.len() - edits.start, valid.len() + edits.start);
                assert!((lo..=hi).contains(&bytes.len()), "{bytes:?}");
                if edits.start == 0 {
                    assert_eq!(bytes, valid);
                }
            }
        }
    }
}
