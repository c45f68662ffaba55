//! Lower-triangular Toeplitz matrices as coefficient sequences (the
//! first column, truncated to the horizon): products are convolutions,
//! inverses power-series inverses, and every figure of a factorization
//! whose factors are Toeplitz is a sum over coefficients.

use dp_core::{DpError, Result};

use crate::workload::{Stream, StreamQuery};

/// The coefficients of `(1 − x)^{−1/2}`: `a_k = C(2k, k) / 4ᵏ`, by
/// `a_k = a_{k−1} (2k − 1) / (2k)`.
pub fn inverse_sqrt_series(len: usize) -> Vec<f64> {
    let mut a = Vec::with_capacity(len);
    let mut v = 1.0;
    for k in 0..len {
        if k > 0 {
            v *= (2 * k - 1) as f64 / (2 * k) as f64;
        }
        a.push(v);
    }
    a
}

/// The coefficients of `(1 − x)^{1/2}`: `1, −1/2, −1/8, …`, by
/// `s_k = s_{k−1} (2k − 3) / (2k)`.
pub fn sqrt_series(len: usize) -> Vec<f64> {
    let mut s = Vec::with_capacity(len);
    let mut v = 1.0;
    for k in 0..len {
        if k > 0 {
            v *= (2 * k as i64 - 3) as f64 / (2 * k) as f64;
        }
        s.push(v);
    }
    s
}

/// Work (multiply–adds) a Toeplitz computation may take before it is
/// refused as too large for the horizon.
pub const MAX_WORK: f64 = 4e10;

/// The square root of the workload's series, `C` with `C·C = W` (the
/// square-root factorization `B = C`, Henzinger, Upadhyay & Upadhyay,
/// SODA 2023), length `T`: closed forms for running and decayed sums
/// (`(1 − λx)^{−1/2}`), and for a window of width `h`
/// `(1 − xʰ)^{1/2} (1 − x)^{−1/2}`, a convolution with a series that is
/// non-zero only at multiples of `h` (`O(T²/h)`).
pub fn workload_sqrt(stream: &Stream) -> Result<Vec<f64>> {
    let t = stream.steps();
    let a = inverse_sqrt_series(t);
    match stream.query() {
        StreamQuery::Prefix => Ok(a),
        StreamQuery::Decayed { rate } => {
            let mut scale = 1.0;
            Ok(a.into_iter()
                .map(|v| {
                    let out = v * scale;
                    scale *= rate;
                    out
                })
                .collect())
        }
        StreamQuery::SlidingWindow { width } => {
            let terms = t.div_ceil(width);
            let work = t as f64 * terms as f64;
            if work > MAX_WORK {
                return Err(DpError::InvalidParameter {
                    name: "steps",
                    reason: format!(
                        "the square root of a window of {width} over {t} steps takes {work:.1e} \
                         operations (at most {MAX_WORK:.0e})"
                    ),
                });
            }
            let s = sqrt_series(terms);
            Ok((0..t)
                .map(|n| (0..=n / width).map(|m| s[m] * a[n - m * width]).sum())
                .collect())
        }
    }
}

/// `c₀`, the diagonal of the Toeplitz matrix of `c`; refused when zero
/// or not finite (the matrix is not invertible).
fn diagonal(c: &[f64]) -> Result<f64> {
    match c.first() {
        Some(&c0) if c0 != 0.0 && c0.is_finite() => Ok(c0),
        _ => Err(DpError::InvalidParameter {
            name: "factor",
            reason: "a lower-triangular factor with a zero diagonal is not invertible".into(),
        }),
    }
}

/// `r` with `c ∗ r = 1` (the inverse of the Toeplitz matrix of `c`),
/// truncated to `len`; `O(len · c.len())`. Refuses `c₀ = 0`.
pub fn inverse(c: &[f64], len: usize) -> Result<Vec<f64>> {
    let c0 = diagonal(c)?;
    let mut r = vec![0.0; len];
    for n in 0..len {
        let mut acc = if n == 0 { 1.0 } else { 0.0 };
        for (j, cj) in c.iter().enumerate().take(n + 1).skip(1) {
            acc -= cj * r[n - j];
        }
        r[n] = acc / c0;
    }
    Ok(r)
}

/// `λ` with `Cᵀλ = ρ` for the Toeplitz `C` of `c` over `ρ.len()` steps
/// (the adjoint solve of [`inverse`]). Refuses `c₀ = 0`.
pub fn solve_transpose(c: &[f64], rho: &[f64]) -> Result<Vec<f64>> {
    let t = rho.len();
    let c0 = diagonal(c)?;
    let mut lambda = vec![0.0; t];
    for n in (0..t).rev() {
        let mut acc = rho[n];
        for (j, cj) in c.iter().enumerate().skip(1) {
            if n + j >= t {
                break;
            }
            acc -= cj * lambda[n + j];
        }
        lambda[n] = acc / c0;
    }
    Ok(lambda)
}

/// `W r`: the workload's Toeplitz matrix times the Toeplitz matrix of `r`,
/// as a sequence (the workloads' own recurrences, `O(T)`).
pub fn apply_workload(stream: &Stream, r: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(r.len());
    match stream.query() {
        StreamQuery::Prefix => {
            let mut acc = 0.0;
            for v in r {
                acc += v;
                out.push(acc);
            }
        }
        StreamQuery::Decayed { rate } => {
            let mut acc = 0.0;
            for v in r {
                acc = acc * rate + v;
                out.push(acc);
            }
        }
        StreamQuery::SlidingWindow { width } => {
            let mut acc = 0.0;
            for n in 0..r.len() {
                acc += r[n];
                if n >= width {
                    acc -= r[n - width];
                }
                out.push(acc);
            }
        }
    }
    out
}

/// The adjoint of [`apply_workload`]: `ρ_n = Σ_k g_k w_{k−n}`.
pub fn apply_workload_adjoint(stream: &Stream, g: &[f64]) -> Vec<f64> {
    let t = g.len();
    let mut out = vec![0.0; t];
    match stream.query() {
        StreamQuery::Prefix => {
            let mut acc = 0.0;
            for n in (0..t).rev() {
                acc += g[n];
                out[n] = acc;
            }
        }
        StreamQuery::Decayed { rate } => {
            let mut acc = 0.0;
            for n in (0..t).rev() {
                acc = acc * rate + g[n];
                out[n] = acc;
            }
        }
        StreamQuery::SlidingWindow { width } => {
            let mut acc = 0.0;
            for n in (0..t).rev() {
                acc += g[n];
                if width < t - n {
                    acc -= g[n + width];
                }
                out[n] = acc;
            }
        }
    }
    out
}

/// `X = CᵀC` of the Toeplitz `C` of `c` over `t` steps, dense (`t²`
/// entries), by `X_{jl} = X_{j+1,l+1} + c_{t−1−j} c_{t−1−l}`.
pub fn gram(c: &[f64], t: usize) -> Vec<f64> {
    let coef = |k: usize| c.get(k).copied().unwrap_or(0.0);
    let mut x = vec![0.0; t * t];
    for j in (0..t).rev() {
        for l in (0..t).rev() {
            let next = if j + 1 < t && l + 1 < t {
                x[(j + 1) * t + l + 1]
            } else {
                0.0
            };
            x[j * t + l] = next + coef(t - 1 - j) * coef(t - 1 - l);
        }
    }
    x
}

/// Squared column norms of the Toeplitz `C` of `c` over `t` steps:
/// column `j` holds `c_0 … c_{t−1−j}`.
pub fn column_norms2(c: &[f64], t: usize) -> Vec<f64> {
    let mut out = vec![0.0; t];
    let mut acc = 0.0;
    // Column t−1 holds c_0 only; column j adds c_{t−1−j}.
    for j in (0..t).rev() {
        acc += c.get(t - 1 - j).map_or(0.0, |v| v * v);
        out[j] = acc;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#[allow(clippy::needless_range_loop)] // tests index matrices as the math does
mod tests {
    use super::*;

    fn dense(c: &[f64], t: usize) -> Vec<Vec<f64>> {
        (0..t)
            .map(|i| {
                (0..t)
                    .map(|j| {
                        if j <= i {
                            c.get(i - j).copied().unwrap_or(0.0)
                        } else {
                            0.0
                        }
                    })
                    .collect()
            })
            .collect()
    }

    fn matmul(a: &[Vec<f64>], b: &[Vec<f64>]) -> Vec<Vec<f64>> {
        let n = a.len();
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (0..n).map(|k| a[i][k] * b[k][j]).sum())
                    .collect()
            })
            .collect()
    }

    /// `C·C = W` for each workload's square root, on dense matrices.
    #[test]
    fn square_roots_square_to_the_workload() {
        for query in [
            StreamQuery::Prefix,
            StreamQuery::SlidingWindow { width: 3 },
            StreamQuery::Decayed { rate: 0.8 },
        ] {
            let stream = Stream::new(query, 17).unwrap();
            let c = workload_sqrt(&stream).unwrap();
            let square = matmul(&dense(&c, 17), &dense(&c, 17));
            let w = stream.to_dense().unwrap();
            for i in 0..17 {
                for j in 0..17 {
                    assert!((square[i][j] - w[(i, j)]).abs() < 1e-12, "{query:?}");
                }
            }
        }
        // (1 − x)^{1/2} (1 − x)^{−1/2} = 1.
        let r = inverse(&inverse_sqrt_series(30), 30).unwrap();
        for (a, b) in r.iter().zip(sqrt_series(30)) {
            assert!((a - b).abs() < 1e-14);
        }
    }

    /// The inverse, the adjoint solve, the workload products and the Gram
    /// against dense arithmetic.
    #[test]
    fn sequence_operations_match_dense_ones() {
        let c = [1.3, -0.4, 0.25, 0.1];
        let t = 11;
        let r = inverse(&c, t).unwrap();
        let id = matmul(&dense(&c, t), &dense(&r, t));
        for i in 0..t {
            for j in 0..t {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((id[i][j] - want).abs() < 1e-12);
            }
        }
        let rho: Vec<f64> = (0..t).map(|i| (i as f64).sin()).collect();
        let lambda = solve_transpose(&c, &rho).unwrap();
        let cm = dense(&c, t);
        for n in 0..t {
            let got: f64 = (0..t).map(|i| cm[i][n] * lambda[i]).sum();
            assert!((got - rho[n]).abs() < 1e-12);
        }
        for query in [
            StreamQuery::Prefix,
            StreamQuery::SlidingWindow { width: 4 },
            StreamQuery::Decayed { rate: 0.7 },
        ] {
            let stream = Stream::new(query, t).unwrap();
            let w = stream.to_dense().unwrap();
            let wr = apply_workload(&stream, &r);
            for i in 0..t {
                let want: f64 = (0..t).map(|k| w[(i, k)] * dense(&r, t)[k][0]).sum();
                assert!((wr[i] - want).abs() < 1e-12, "{query:?}");
            }
            let adj = apply_workload_adjoint(&stream, &rho);
            for n in 0..t {
                let want: f64 = (0..t).map(|k| w[(k, n)] * rho[k]).sum();
                assert!((adj[n] - want).abs() < 1e-12, "{query:?}");
            }
        }
        let x = gram(&c, t);
        let norms = column_norms2(&c, t);
        for j in 0..t {
            for l in 0..t {
                let want: f64 = (0..t).map(|i| cm[i][j] * cm[i][l]).sum();
                assert!((x[j * t + l] - want).abs() < 1e-12);
            }
            assert!((norms[j] - x[j * t + j]).abs() < 1e-12);
        }
        assert!(inverse(&[0.0, 1.0], 3).is_err());
        assert!(inverse(&[], 3).is_err());
        assert!(solve_transpose(&[], &rho).is_err());
        assert!(solve_transpose(&[f64::NAN], &rho).is_err());
    }
}
