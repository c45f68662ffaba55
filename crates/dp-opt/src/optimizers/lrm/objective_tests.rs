//! LRM's objectives against independent truth: each value against a
//! closed form evaluated by an explicit inverse, each gradient against
//! central differences, on one L with both dense rows (more than n/8
//! nonzeros) and sparse ones, so both product paths of the eliminated-B
//! objective run.

#![allow(clippy::unwrap_used)]

use dp_linalg::{Lu, Mat, Par};

use super::augmented_lagrangian::{reduced_objective, ridge_b};
use super::eliminated_objective::{SplitRows, eliminated_b_objective};
use super::quasi_newton::split_objective;
use crate::dense::{assert_gradient_by_central_differences, inner};

/// `tr(C M⁻¹ Cᵀ)` by an explicit inverse.
fn trace_form(c: &Mat<f64>, m: &Mat<f64>) -> f64 {
    let inv = Lu::factor(m.as_ref()).unwrap().inverse();
    (c * &inv * c.transpose()).diagonal().column_vector().sum()
}

/// An objective of L: its value and gradient, and the closed form of the
/// value.
type Case<'a> = (
    &'a str,
    Box<dyn Fn(&Mat<f64>) -> Option<(f64, Mat<f64>)> + 'a>,
    Box<dyn Fn(&Mat<f64>) -> f64 + 'a>,
);

#[test]
fn objectives_match_closed_forms_and_central_differences() {
    let (s, r, n) = (3, 23, 20);
    let c = Mat::from_fn(s, n, |i, j| (((i * 5 + j * 3) % 7) as f64 - 3.0) / 2.0);
    let l = Mat::from_fn(r, n, |i, j| {
        if i < n {
            // Identity block with a few off-diagonal entries (sparse rows).
            f64::from(u8::from(i == j)) + if (i + 2 * j) % 17 == 0 { 0.3 } else { 0.0 }
        } else {
            // Dense rows.
            (((i * 2 + j * 7) % 5) as f64 - 2.0) / 5.0
        }
    });
    let rows = SplitRows::new(l.as_ref());
    assert!(!rows.dense.is_empty() && !rows.sparse.is_empty());
    let beta = 3.0;
    let gram = |l: &Mat<f64>| l.transpose() * l;
    let cases: Vec<Case<'_>> = vec![
        // min{‖B‖² : BL = C} = tr(C (LᵀL)⁻¹ Cᵀ).
        (
            "eliminated-B",
            Box::new(|x| eliminated_b_objective(&c, x, Par::Seq)),
            Box::new(|x| trace_form(&c, &gram(x))),
        ),
        // min_B ½‖B‖² + β/2‖C − BL‖² = β/2 tr(C (I + βLᵀL)⁻¹ Cᵀ)
        // (Woodbury on the optimal B's residual).
        (
            "reduced",
            Box::new(|x| {
                let mut grad = Mat::zeros(r, n);
                let f = reduced_objective(&c, x.as_ref(), beta, grad.as_mut(), Par::Seq)?;
                Some((f, grad))
            }),
            Box::new(|x| {
                let mut m = gram(x) * dp_linalg::Scale(beta);
                (0..n).for_each(|i| m[(i, i)] += 1.0);
                0.5 * beta * trace_form(&c, &m)
            }),
        ),
        // The split X = [P; Q] ≥ 0 of the quasi-Newton form: f at
        // L = (P − Q) diag(1ᵀX)⁻¹, the eliminated-B objective there.
        (
            "split",
            Box::new(|x| {
                let mut grad = Mat::zeros(2 * r, n);
                let f = split_objective(&c, x.as_ref(), grad.as_mut(), Par::Seq)?;
                Some((f, grad))
            }),
            Box::new(|x| {
                let l = Mat::from_fn(r, n, |i, j| {
                    (x[(i, j)] - x[(r + i, j)]) / x.col(j).iter().sum::<f64>()
                });
                trace_form(&c, &gram(&l))
            }),
        ),
    ];
    // P and Q: the positive part of L plus a margin, and that margin
    // (both positive, so central differences stay inside X ≥ 0).
    let split = Mat::from_fn(2 * r, n, |i, j| {
        let (k, margin) = (i % r, 0.1 + 0.01 * ((i + j) % 3) as f64);
        if i < r {
            l[(k, j)].max(0.0) + margin
        } else {
            (-l[(k, j)]).max(0.0) + margin
        }
    });
    for (what, objective, closed_form) in &cases {
        let at = if *what == "split" { &split } else { &l };
        let (f, g) = objective(at).unwrap();
        let direct = closed_form(at);
        assert!(
            (f - direct).abs() < 1e-10 * direct,
            "{what}: {f} vs {direct}"
        );
        assert_gradient_by_central_differences(
            what,
            |x| objective(x).unwrap().0,
            at,
            &g,
            1e-6,
            1e-6,
        );
    }
    // The reduced objective's B is the minimizer: any other B costs more.
    let b = ridge_b(&c, &l, beta, Par::Seq).unwrap();
    let value = |b: &Mat<f64>| {
        let res = &c - b * &l;
        0.5 * inner(b, b) + 0.5 * beta * inner(&res, &res)
    };
    let bumped = &b + Mat::from_fn(s, r, |i, k| 1e-3 * ((i + k) % 2) as f64);
    assert!(value(&bumped) > value(&b));
    // Rank-deficient L (fewer rows than columns): +∞ (None).
    let thin = Mat::from_fn(4, n, |i, j| f64::from(u8::from(i == j)));
    assert!(eliminated_b_objective(&c, &thin, Par::Seq).is_none());
}
