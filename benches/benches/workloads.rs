//! Implicit against explicit Gram matrices of AllRange.
//!
//! The explicit AllRange(4096) workload has 8,390,656 rows (275 GB as
//! f64): building it and forming WᵀW is out of reach, so the explicit side
//! is timed on its first 16,384 rows only — a strict lower bound on the
//! full explicit cost, which is linear in the rows (WᵀW accumulates over
//! row blocks) and has 512× as many. At n = 256 both sides are timed in
//! full. The bar: implicit at least 100× faster than even that lower bound.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use criterion::{Criterion, criterion_group, criterion_main};
use dp_linalg::{Mat, gram};
use dp_workloads::workload::{AllRange, Workload};
use std::hint::black_box;

/// The first `rows` rows of AllRange(n) in its (a, b) order, built
/// explicitly.
fn explicit_rows(n: usize, rows: usize) -> Mat<f64> {
    let mut w = Mat::zeros(rows, n);
    let mut r = 0;
    'outer: for a in 0..n {
        for b in a..n {
            if r == rows {
                break 'outer;
            }
            for j in a..=b {
                w[(r, j)] = 1.0;
            }
            r += 1;
        }
    }
    w
}

fn allrange_gram(c: &mut Criterion) {
    let mut group = c.benchmark_group("allrange_gram");
    group.sample_size(10);
    for n in [256usize, 4096] {
        let w = AllRange::new(n).expect("n > 0");
        group.bench_function(format!("implicit/{n}"), |b| b.iter(|| black_box(w.gram())));
        let rows = if n <= 256 { w.num_queries() } else { 4 * n };
        group.bench_function(format!("explicit_first_{rows}_rows/{n}"), |b| {
            b.iter(|| {
                let e = explicit_rows(n, rows);
                black_box(gram(e.as_ref(), dp_linalg::Par::Seq))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, allrange_gram);
criterion_main!(benches);
