//! Every strategy optimizer at fixed, seeded sizes, beside a dense n×n
//! matrix product timed in the same run (the unit `cargo xtask regress`
//! and `cargo xtask bench` report times in, so a result reads as "so many
//! products" whatever the machine).
//!
//! Sizes are the regression gate's and a step up, chosen so one sample
//! takes at most about a second except for ESM at 64 (about 2 s), whose
//! iterations are O(n³). Measured with `-- --quick` on the 2-core machine
//! (one run; times here vary by up to 2× between runs, so read them as
//! ratios to the dense product of the same run): dense product 0.34 ms
//! (256) and 2.6 ms (512); COA 35 / 79 / 27 ms at 128 (AllRange / WRange /
//! WRelated) and 0.12 / 0.22 / 0.07 s at 256; p-Identity 0.61 s on
//! AllRange(128); LRM 0.87 s (L1) and 0.72 s (L2) on WRange(128); ESM
//! 1.9 s on WRange(64); AM 76 ms on WRange(128); classic strategies
//! 3–11 ms at 256.
//!
//! | group | workloads |
//! |---|---|
//! | `coa` | AllRange, WRange and WRelated (s = 0.2·n) at n = 128 and 256, (ε,δ) |
//! | `pidentity` | AllRange and WRange at n = 64 and 128, ε-DP |
//! | `lrm` | WRange at n = 32 and 128, ε-DP (L1 columns) and (ε,δ) (L2 columns) |
//! | `esm` | WRange at n = 32 and 64, (ε,δ) |
//! | `am` | WRange at n = 32 and 128, (ε,δ) |
//! | `classic` | identity, hierarchical, wavelet and the SVD bound on AllRange(256) |
//!
//! `cargo bench -p dpmm-benches --bench optimizers [-- FILTER]`.

#![allow(clippy::unwrap_used)] // a failed setup is a failed benchmark

use criterion::{Criterion, criterion_group, criterion_main};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, by_name};
use dp_workloads::Workload;
use dp_workloads::generators::{wrange, wrelated};
use dp_workloads::workload::AllRange;
use std::hint::black_box;
use std::time::Duration;

fn allrange(n: usize) -> Mat<f64> {
    AllRange::new(n).unwrap().gram()
}

fn wrange_gram(n: usize) -> Mat<f64> {
    wrange(n, n, 7).unwrap().gram()
}

fn wrelated_gram(n: usize) -> Mat<f64> {
    wrelated(n, n, (n / 5).max(1), 7).unwrap().gram()
}

/// Benchmarks `optimizer` on each `(label, gram)` under `privacy`.
fn group(
    c: &mut Criterion,
    optimizer: &str,
    privacy: PrivacyModel,
    cases: Vec<(String, Mat<f64>)>,
) {
    let mut g = c.benchmark_group(optimizer);
    g.sample_size(10).warm_up_time(Duration::from_millis(500));
    for (label, gram) in cases {
        let problem = Problem::from_gram(gram, privacy).unwrap();
        let opt = by_name(optimizer).unwrap();
        g.bench_function(format!("{}/{label}", privacy.name()), |b| {
            b.iter(|| black_box(opt.optimize(&problem, &mut ()).unwrap()))
        });
    }
    g.finish();
}

fn reference(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference");
    for n in [256usize, 512] {
        let a = Mat::from_fn(n, n, |i, j| ((i * 31 + j * 17) % 13) as f64 - 6.0);
        g.bench_function(format!("dense_product/{n}"), |b| {
            b.iter(|| black_box(&a * &a))
        });
    }
    g.finish();
}

/// A workload family: its label and its Gram at domain size n.
type Family = (fn(usize) -> String, fn(usize) -> Mat<f64>);

const ALL_RANGE: Family = (|n| format!("AllRange({n})"), allrange);
const WRANGE: Family = (|n| format!("WRange({n}x{n})"), wrange_gram);
const WRELATED: Family = (|n| format!("WRelated({n}x{n})"), wrelated_gram);

/// Every family at every size, size-major.
fn cases(sizes: &[usize], families: &[Family]) -> Vec<(String, Mat<f64>)> {
    sizes
        .iter()
        .flat_map(|&n| {
            families
                .iter()
                .map(move |(label, gram)| (label(n), gram(n)))
        })
        .collect()
}

fn coa(c: &mut Criterion) {
    let cases = cases(&[128, 256], &[ALL_RANGE, WRANGE, WRELATED]);
    group(c, "coa", PrivacyModel::Approx, cases);
}

fn pidentity(c: &mut Criterion) {
    let cases = cases(&[64, 128], &[ALL_RANGE, WRANGE]);
    group(c, "pidentity", PrivacyModel::Pure, cases);
}

fn lrm(c: &mut Criterion) {
    group(c, "lrm", PrivacyModel::Pure, cases(&[32, 128], &[WRANGE]));
    group(c, "lrm", PrivacyModel::Approx, cases(&[32, 128], &[WRANGE]));
}

fn esm_and_am(c: &mut Criterion) {
    // ESM at 128 takes 12 s per run: 64 keeps the group under a minute.
    group(c, "esm", PrivacyModel::Approx, cases(&[32, 64], &[WRANGE]));
    group(c, "am", PrivacyModel::Approx, cases(&[32, 128], &[WRANGE]));
}

fn classic(c: &mut Criterion) {
    for name in ["identity", "hierarchical", "wavelet", "svdb"] {
        group(c, name, PrivacyModel::Pure, cases(&[256], &[ALL_RANGE]));
    }
}

criterion_group!(benches, reference, coa, pidentity, lrm, esm_and_am, classic);
criterion_main!(benches);
