//! Completing a strategy's support: directions of W that a (truncated or
//! low-rank) strategy misses are appended as extra rows at the weight that
//! costs least, so that the estimate stays unbiased.

use dp_core::Result;
use dp_linalg::{Mat, Par, symmetrize};

use crate::dense::{append_rows, gemm, inner, row_space_complement};

/// Makes a strategy support every direction the workload has, and returns
/// it with its objective `l2_obj` against `V₀`.
///
/// The dual works with a (possibly truncated) Gram root, so its strategy
/// misses the directions dropped there; a workload whose rows are scaled
/// over many orders of magnitude still has small components in them. With
/// `P` an orthonormal basis of the complement of A's row space and
/// `t = tr(PᵀV₀P)` the workload energy there, appending `η·Pᵀ` and
/// rescaling to `Δ₂ = 1` costs about `(1 + η²)·F_A + t/η²`, least at
/// `η² = √(t / F_A)`. Complements that carry no energy above the Gram's
/// rounding level are left alone (a genuinely low-rank W keeps its
/// low-rank strategy).
///
/// `force` (used when the support test of the final strategy failed)
/// counts directions of A with eigenvalue of `AᵀA` below `1e-12·max` as
/// missing and completes them whatever their energy.
pub(super) fn complete_support(
    strategy: Mat<f64>,
    v0: &Mat<f64>,
    force: bool,
) -> Result<(Mat<f64>, f64, f64)> {
    let objective_of = |a: &Mat<f64>| -> Result<f64> {
        Ok(dp_core::accuracy::evaluate_strategy_gram(v0.as_ref(), a.as_ref())?.l2_obj())
    };
    let n = strategy.ncols();
    let level = if force {
        1e-12
    } else {
        n as f64 * f64::EPSILON
    };
    let p = row_space_complement(&strategy, level)?;
    let complement = p.ncols();
    let vp = gemm(v0.as_ref(), p.as_ref(), Par::Seq);
    let t = inner(&p, &vp);
    let vmax = (0..n).map(|i| v0[(i, i)]).sum::<f64>();
    // Energy the Gram cannot resolve: per direction about ε·tr V (the
    // rounding of WᵀW); the unforced test is far more conservative.
    let rounding = if force {
        complement as f64 * f64::EPSILON * vmax
    } else {
        100.0 * complement as f64 * n as f64 * f64::EPSILON * vmax
    };
    if complement == 0 || t <= rounding {
        let f = objective_of(&strategy)?;
        return Ok((strategy, f, 0.0));
    }
    // F_A on the part A supports: the objective against V₀ minus its
    // complement (projected out).
    let f_a = {
        let proj = gemm(p.as_ref(), p.transpose(), Par::Seq);
        let mut q = Mat::<f64>::identity(n, n) - proj;
        symmetrize(&mut q);
        let vq = gemm(
            gemm(q.as_ref(), v0.as_ref(), Par::Seq).as_ref(),
            q.as_ref(),
            Par::Seq,
        );
        dp_core::accuracy::evaluate_strategy_gram(vq.as_ref(), strategy.as_ref())?.l2_obj()
    };
    if !(f_a.is_finite() && f_a > 0.0) {
        let f = objective_of(&strategy)?;
        return Ok((strategy, f, 0.0));
    }
    // Candidates: one weight for all missing directions (η² = √(t/F_A)),
    // and per-direction weights η_k² = α√t_k in the eigenbasis of PᵀV₀P
    // (the SVD bound's allocation: the completion then costs about
    // 2√(α-independent Σ√t_k · max_j Σ_k √t_k P_jk² / F_A), never more than
    // the shared weight by Cauchy–Schwarz), α by golden section on the
    // exact `(max_j ‖a_j‖²)(F_A + Σ t_k/η_k²)`. Both are recomputed exactly.
    let mut candidates: Vec<Mat<f64>> = Vec::new();
    let eta = (t / f_a).sqrt().sqrt();
    if eta.is_finite() && eta > 0.0 {
        candidates.push(append_rows(&strategy, &p, eta));
    }
    if let Some(weighted) = weighted_completion(&strategy, &p, &vp, f_a) {
        candidates.push(weighted);
    }
    let mut best: Option<(Mat<f64>, f64)> = None;
    for mut out in candidates {
        let delta = (0..n)
            .map(|j| out.col(j).squared_norm_l2())
            .fold(0.0, f64::max)
            .sqrt();
        out *= dp_linalg::Scale(1.0 / delta);
        let Ok(f) = objective_of(&out) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| f < b.1) {
            best = Some((out, f));
        }
    }
    match best {
        Some((out, f)) => Ok((out, f, (f / f_a - 1.0).max(0.0))),
        None => {
            let f = objective_of(&strategy)?;
            Ok((strategy, f, 0.0))
        }
    }
}

/// `[A; diag(η) P'ᵀ]` with `P' = P R`, `PᵀV₀P = R diag(t) Rᵀ`,
/// `η_k² = max(α√t_k, floor)`: the completion of [`complete_support`] with
/// per-direction weights. Since `P'` is orthogonal to A's row space,
/// `(AᵀA + P'H²P'ᵀ)⁺ = (AᵀA)⁺ + P'H⁻²P'ᵀ` and the objective is exactly
/// `(max_j d_j + Σ_k η_k² P'_jk²) · (F_A + Σ_k t_k/η_k²)` with `d_j` the
/// squared column norms of A; α minimizes it by golden section over
/// `α₀·[10⁻³, 10³]`, `α₀ = √(T/(s_max F_A))`. The floor keeps every
/// appended row above the rank tolerance of the support test.
fn weighted_completion(a: &Mat<f64>, p: &Mat<f64>, vp: &Mat<f64>, f_a: f64) -> Option<Mat<f64>> {
    let (n, c) = (a.ncols(), p.ncols());
    let mut ptvp = gemm(p.transpose(), vp.as_ref(), Par::Seq);
    symmetrize(&mut ptvp);
    let eig = dp_linalg::SymmetricEigen::new(ptvp.as_ref()).ok()?;
    let rotated = gemm(p.as_ref(), eig.vectors.as_ref(), Par::Seq);
    let root_t: Vec<f64> = eig.values.iter().map(|v| v.max(0.0).sqrt()).collect();
    let total: f64 = root_t.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    let d: Vec<f64> = (0..n).map(|j| a.col(j).squared_norm_l2()).collect();
    let s: Vec<f64> = (0..n)
        .map(|j| (0..c).map(|k| root_t[k] * rotated[(j, k)].powi(2)).sum())
        .collect();
    let dmax = d.iter().copied().fold(0.0, f64::max);
    let floor = 1e-12 * dmax;
    let cost = |alpha: f64| {
        let delta2 = (0..n)
            .map(|j| {
                d[j] + (0..c)
                    .map(|k| (alpha * root_t[k]).max(floor) * rotated[(j, k)].powi(2))
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        let missing: f64 = (0..c)
            .map(|k| root_t[k] * root_t[k] / (alpha * root_t[k]).max(floor))
            .sum();
        delta2 * (f_a + missing)
    };
    let smax = s.iter().copied().fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let alpha0 = (total / (smax * f_a)).sqrt();
    let (mut lo, mut hi) = ((alpha0 * 1e-3).ln(), (alpha0 * 1e3).ln());
    let golden = 0.5 * (5f64.sqrt() - 1.0);
    for _ in 0..80 {
        let (x1, x2) = (hi - golden * (hi - lo), lo + golden * (hi - lo));
        if cost(x1.exp()) <= cost(x2.exp()) {
            hi = x2;
        } else {
            lo = x1;
        }
    }
    let alpha = (0.5 * (lo + hi)).exp();
    if !alpha.is_finite() {
        return None;
    }
    let k0 = a.nrows();
    Some(Mat::from_fn(k0 + c, n, |i, j| {
        if i < k0 {
            a[(i, j)]
        } else {
            let k = i - k0;
            (alpha * root_t[k]).max(floor).sqrt() * rotated[(j, k)]
        }
    }))
}
