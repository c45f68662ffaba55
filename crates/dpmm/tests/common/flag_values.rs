//! Hostile values for numeric command-line flags, shared by the flag tests
//! of `dpmm` and of `cargo xtask` (xtask includes this file by path), so
//! both commands face the same values.

use proptest::prelude::*;

/// Special values: NaN and infinities in several spellings, zeros, the
/// subnormal range, the edges of the documented ranges and just past them,
/// and text that is not a number.
const SPECIALS: &[&str] = &[
    "NaN",
    "nan",
    "inf",
    "-inf",
    "infinity",
    "0",
    "-0",
    "0.0",
    "1e-310",
    "4.9e-324",
    "-1",
    "1e308",
    "1e309",
    "1e-6",
    "100",
    "100.0000001",
    "0.5",
    "0.5000001",
    "1e-100",
    "1e-101",
    "abc",
    "",
    " 1",
    "1,5",
    "0x10",
    "--",
    "1e",
    "+1",
];

/// Values a flag might be given: the special ones, any f64 in Rust's and
/// in exponent notation, powers of ten, and arbitrary short text.
pub fn flag_value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(SPECIALS).prop_map(str::to_string),
        any::<f64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_map(|v| format!("{v:e}")),
        (-320i32..320).prop_map(|e| format!("1e{e}")),
        "[ -~]{0,10}",
    ]
}

/// Whether `value` parses as an f64 in `[lo, hi]` (the documented ranges,
/// `dp_core::kernel::accounting`).
pub fn in_range(value: &str, lo: f64, hi: f64) -> bool {
    value.parse::<f64>().is_ok_and(|v| (lo..=hi).contains(&v))
}
