//! Buffered linear Toeplitz factorizations (BLT; Dvijotham, McMahan,
//! Pillutla, Steinke & Thakurta, FOCS 2024): `C` lower-triangular Toeplitz
//! with `c₀ = 1` and `c_k = Σⱼ ωⱼ θⱼ^{k−1}` for `k ≥ 1` — a sum of `d`
//! decaying exponentials, so that `C` and `C⁻¹` are linear filters with
//! `d` buffers and DP-FTRL's correlated noise `C⁻¹z` is generated one step
//! at a time in `O(d)` memory per coordinate, whatever the horizon.
//!
//! As a filter: with buffers `s ∈ ℝᵈ`, `v = Cu` is
//! `v_t = u_t + ωᵀs_t`, `s_{t+1} = Θs_t + 1·u_t` (`Θ = diag(θ)`), and
//! `u = C⁻¹v` is `u_t = v_t − ωᵀs_t`, `s_{t+1} = Θs_t + 1·u_t`: the same
//! buffers, so `C⁻¹` has state matrix `A = Θ − 1ωᵀ` and
//! `r_k = −ωᵀA^{k−1}1` (`k ≥ 1`, `r₀ = 1`).
//!
//! The figures at any horizon come from finite-horizon Gramians by
//! doubling (`O(d³ log T)`, no pass over the steps): `Σ_{k<T} c_k²` in
//! closed form (Θ is diagonal), and for `B = WC⁻¹` of a running or decayed
//! sum (`b_k = λb_{k−1} + r_k`) the state `z_k = (s_k, b_{k−1})` with
//! `z_{k+1} = Mz_k`, `M = [[A, 0], [−ωᵀ, λ]]`, `b_k = hᵀz_k`,
//! `h = (−ω, λ)`, `z₁ = (1, 1)`: `Σ_{k<T} b_k² = 1 + hᵀS_{T−1}h` and
//! `Σ_{k<T} (T − k) b_k² = T + hᵀU_{T−1}h` with
//! `S_n = Σ_{m<n} Mᵐz₁z₁ᵀMᵐᵀ`, `U_n = Σ_{m<n} (n − m) Mᵐz₁z₁ᵀMᵐᵀ`.

use dp_core::{DpError, Result};
use dp_opt::Termination;
use dp_opt::solvers::lbfgs::{LbfgsOptions, minimize};

use crate::factorization::Objective;
use crate::workload::{Stream, StreamQuery};

/// The most buffers a BLT may have.
pub const MAX_BUFFERS: usize = 32;

/// A BLT's parameters: decays `θ` in `[0, 1)` and weights `ω`.
#[derive(Debug, Clone, PartialEq)]
pub struct Blt {
    theta: Vec<f64>,
    omega: Vec<f64>,
}

impl Blt {
    /// Refuses mismatched lengths, more than [`MAX_BUFFERS`] buffers, a
    /// decay outside `[0, 1)` or a non-finite weight.
    pub fn new(theta: Vec<f64>, omega: Vec<f64>) -> Result<Self> {
        let bad = |reason: String| {
            Err(DpError::InvalidParameter {
                name: "BLT",
                reason,
            })
        };
        if theta.len() != omega.len() || theta.len() > MAX_BUFFERS {
            return bad(format!(
                "{} decays and {} weights (equal, at most {MAX_BUFFERS})",
                theta.len(),
                omega.len()
            ));
        }
        if theta.iter().any(|t| !(0.0..1.0).contains(t)) || omega.iter().any(|w| !w.is_finite()) {
            return bad("decays in [0, 1) and finite weights".into());
        }
        Ok(Self { theta, omega })
    }

    /// The decays `θ`.
    pub fn theta(&self) -> &[f64] {
        &self.theta
    }

    /// The weights `ω`.
    pub fn omega(&self) -> &[f64] {
        &self.omega
    }

    /// The number of buffers `d`.
    pub fn buffers(&self) -> usize {
        self.theta.len()
    }

    /// `c₀ … c_{len−1}`, by the filter (`O(len · d)`).
    pub fn c_coefficients(&self, len: usize) -> Vec<f64> {
        let mut powers = vec![1.0; self.buffers()];
        (0..len)
            .map(|k| {
                if k == 0 {
                    return 1.0;
                }
                let v = self.omega.iter().zip(&powers).map(|(w, p)| w * p).sum();
                for (p, t) in powers.iter_mut().zip(&self.theta) {
                    *p *= t;
                }
                v
            })
            .collect()
    }

    /// `r₀ … r_{len−1}`, the coefficients of `C⁻¹`, by the inverse filter.
    pub fn inverse_coefficients(&self, len: usize) -> Vec<f64> {
        let mut s = vec![0.0; self.buffers()];
        (0..len)
            .map(|k| {
                let v = if k == 0 { 1.0 } else { 0.0 };
                let u = v - self.omega.iter().zip(&s).map(|(w, x)| w * x).sum::<f64>();
                for (x, t) in s.iter_mut().zip(&self.theta) {
                    *x = t * *x + u;
                }
                u
            })
            .collect()
    }

    /// `Σ_{k<t} c_k²` (the squared norm of `C`'s first column, its
    /// largest: the sensitivity² under single participation).
    pub fn c_energy(&self, t: usize) -> f64 {
        if t == 0 {
            return 0.0;
        }
        let n = (t - 1) as f64;
        let d = self.buffers();
        let mut sum = 1.0;
        for i in 0..d {
            for j in i..d {
                let q = self.theta[i] * self.theta[j];
                // Σ_{m<n} qᵐ = (1 − qⁿ)/(1 − q), qⁿ by expm1 near q = 1.
                let geometric = if n == 0.0 {
                    0.0
                } else if q == 0.0 {
                    1.0
                } else {
                    -(n * q.ln()).exp_m1() / (1.0 - q)
                };
                let weight = if i == j { 1.0 } else { 2.0 };
                sum += weight * self.omega[i] * self.omega[j] * geometric;
            }
        }
        sum
    }

    /// `(Σ_{k<T} b_k², Σ_{k<T} (T − k) b_k²)` for `B = WC⁻¹`: the largest
    /// row's squared norm (rows grow with the step) and `‖B‖²_F`. `None`
    /// for a window workload (not a finite filter) or a non-finite result
    /// (an unstable `C⁻¹`).
    pub fn b_energies(&self, stream: &Stream) -> Option<(f64, f64)> {
        let rate = match stream.query() {
            StreamQuery::Prefix => 1.0,
            StreamQuery::Decayed { rate } => rate,
            StreamQuery::SlidingWindow { .. } => return None,
        };
        let t = stream.steps();
        if t == 1 {
            return Some((1.0, 1.0));
        }
        let d = self.buffers();
        let n = d + 1;
        let mut m = vec![0.0; n * n];
        for i in 0..d {
            for j in 0..d {
                m[i * n + j] = if i == j { self.theta[i] } else { 0.0 } - self.omega[j];
            }
            m[d * n + i] = -self.omega[i];
        }
        m[d * n + d] = rate;
        let z1 = vec![1.0; n];
        let e: Vec<f64> = (0..n * n).map(|k| z1[k / n] * z1[k % n]).collect();
        let (_, s, u) = doubling(&m, &e, n, t - 1);
        let mut h: Vec<f64> = self.omega.iter().map(|w| -w).collect();
        h.push(rate);
        let quad = |a: &[f64]| -> f64 {
            (0..n)
                .map(|i| h[i] * (0..n).map(|j| a[i * n + j] * h[j]).sum::<f64>())
                .sum()
        };
        let (last, total) = (1.0 + quad(&s), t as f64 + quad(&u));
        (last.is_finite() && total.is_finite()).then_some((last, total))
    }

    /// `(max_variance, total_squared_error)` under single participation,
    /// without a pass over the steps.
    pub fn figures(&self, stream: &Stream) -> Option<(f64, f64)> {
        let s2 = self.c_energy(stream.steps());
        let (last, total) = self.b_energies(stream)?;
        Some((s2 * last, s2 * total))
    }

    /// Optimizes a BLT with `buffers` buffers for `objective` under single
    /// participation: L-BFGS over the coordinates of `from_params` on the
    /// logarithm of the objective (figures by doubling, gradients by
    /// central differences), from decays spread log-uniformly over the
    /// horizon with weights fitted to the square root's coefficients.
    pub fn optimize(
        stream: &Stream,
        buffers: usize,
        objective: Objective,
    ) -> Result<(Self, Termination)> {
        if buffers == 0 || buffers > MAX_BUFFERS {
            return Err(DpError::InvalidParameter {
                name: "buffers",
                reason: format!("{buffers}: between 1 and {MAX_BUFFERS}"),
            });
        }
        if matches!(stream.query(), StreamQuery::SlidingWindow { .. }) {
            return Err(DpError::InvalidParameter {
                name: "family",
                reason: "BLT factors running and decayed sums (a window is not a finite filter)"
                    .into(),
            });
        }
        let t = stream.steps();
        let value = |x: &[f64]| -> f64 {
            let Some(blt) = from_params(x) else {
                return f64::INFINITY;
            };
            match blt.figures(stream) {
                Some((max, total)) => match objective {
                    Objective::Max => max.ln(),
                    Objective::Total => total.ln(),
                },
                None => f64::INFINITY,
            }
        };
        let eval = |x: &[f64], g: &mut [f64]| -> f64 {
            let f = value(x);
            let mut y = x.to_vec();
            for i in 0..x.len() {
                let h = 1e-6 * x[i].abs().max(1.0);
                y[i] = x[i] + h;
                let up = value(&y);
                y[i] = x[i] - h;
                let down = value(&y);
                y[i] = x[i];
                g[i] = if up.is_finite() && down.is_finite() {
                    (up - down) / (2.0 * h)
                } else {
                    0.0
                };
            }
            f
        };
        let options = LbfgsOptions {
            budget: dp_opt::Budget::iterations(3000),
            gradient_tolerance: 1e-10,
            function_tolerance: 1e-14,
            ..LbfgsOptions::default()
        };
        // One start: decays spread over the horizon, weights fitted to
        // the square root (the optimum among Toeplitz factorizations for
        // the largest variance, which a BLT approaches from above).
        let start = fitted_start(t, buffers, 1.0);
        let run = minimize(eval, start, &options, &mut ())?;
        if !run.output.value.is_finite() {
            return Err(DpError::NotConverged {
                solver: "BLT",
                reason: "no stable factorization from the fitted start".into(),
            });
        }
        let (x, termination) = (run.output.x, run.termination);
        let blt = from_params(&x).ok_or_else(|| DpError::NotConverged {
            solver: "BLT",
            reason: "the optimum left the parameter domain".into(),
        })?;
        Ok((blt, termination))
    }
}

/// The optimizer's coordinates: `θⱼ = σ(xⱼ)` (logistic) and
/// `ωⱼ = e^{x_{d+j}} (1 − θⱼ)^{1/2}` — an exponential of time constant
/// `τ` carries weight about `τ^{−1/2}` in a square root's coefficients,
/// so every coordinate is of order one at the optimum.
fn from_params(x: &[f64]) -> Option<Blt> {
    let d = x.len() / 2;
    let theta: Vec<f64> = x[..d].iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect();
    let omega = x[d..]
        .iter()
        .zip(&x[..d])
        .map(|(w, v)| w.exp() * (1.0 / (1.0 + v.exp())).sqrt())
        .collect();
    Blt::new(theta, omega).ok()
}

/// [`from_params`]'s inverse for positive weights.
fn to_params(theta: &[f64], omega: &[f64]) -> Vec<f64> {
    let mut x: Vec<f64> = theta.iter().map(|th| (th / (1.0 - th)).ln()).collect();
    x.extend(
        omega
            .iter()
            .zip(theta)
            .map(|(w, th)| (w.max(1e-12) / (1.0 - th).sqrt()).ln()),
    );
    x
}

/// A start with `d` buffers: decays `1 − 1/τⱼ` with `τⱼ` log-spaced from
/// 1 to `T^spread`, weights fitting the square root's coefficients
/// `a_k ≈ (πk)^{−1/2}(1 − 1/(8k))` in relative terms (each step weighted
/// by `1/a_k`) on log-spaced steps, by least squares.
fn fitted_start(t: usize, d: usize, spread: f64) -> Vec<f64> {
    let top = (t.max(2) as f64).powf(spread).max(2.0);
    let theta: Vec<f64> = (0..d)
        .map(|j| {
            let tau = top.powf((j as f64 + 1.0) / d as f64);
            (1.0 - 1.0 / tau.max(1.5)).clamp(0.05, 1.0 - 1e-12)
        })
        .collect();
    let mut points: Vec<usize> = (0..256)
        .map(|i| (t.max(2) as f64).powf(i as f64 / 255.0).round() as usize)
        .filter(|&k| k >= 1 && k < t.max(2))
        .collect();
    points.dedup();
    let target =
        |k: usize| (std::f64::consts::PI * k as f64).powf(-0.5) * (1.0 - 1.0 / (8.0 * k as f64));
    let mut normal = vec![0.0; d * d];
    let mut rhs = vec![0.0; d];
    for &k in &points {
        let scale = 1.0 / target(k);
        let basis: Vec<f64> = theta
            .iter()
            .map(|th| th.powi((k - 1) as i32) * scale)
            .collect();
        for i in 0..d {
            rhs[i] += basis[i];
            for j in 0..d {
                normal[i * d + j] += basis[i] * basis[j];
            }
        }
    }
    let ridge = 1e-12 * (0..d).map(|i| normal[i * d + i]).fold(0.0, f64::max);
    for i in 0..d {
        normal[i * d + i] += ridge;
    }
    let omega = solve_small(&mut normal, &mut rhs, d).unwrap_or_else(|| vec![0.1; d]);
    to_params(&theta, &omega)
}

/// Solves the `d × d` system by Gaussian elimination with partial
/// pivoting (`None` when singular).
fn solve_small(a: &mut [f64], b: &mut [f64], d: usize) -> Option<Vec<f64>> {
    for col in 0..d {
        let pivot =
            (col..d).max_by(|&i, &j| a[i * d + col].abs().total_cmp(&a[j * d + col].abs()))?;
        if a[pivot * d + col].abs() < 1e-300 {
            return None;
        }
        for k in 0..d {
            a.swap(col * d + k, pivot * d + k);
        }
        b.swap(col, pivot);
        for row in col + 1..d {
            let f = a[row * d + col] / a[col * d + col];
            for k in col..d {
                a[row * d + k] -= f * a[col * d + k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; d];
    for row in (0..d).rev() {
        let s: f64 = (row + 1..d).map(|k| a[row * d + k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row * d + row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// `n × n` row-major product.
fn mul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let v = a[i * n + k];
            if v != 0.0 {
                for j in 0..n {
                    out[i * n + j] += v * b[k * n + j];
                }
            }
        }
    }
    out
}

/// `P X Pᵀ`.
fn congruence(p: &[f64], x: &[f64], n: usize) -> Vec<f64> {
    let px = mul(p, x, n);
    let mut out = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            out[i * n + j] = (0..n).map(|k| px[i * n + k] * p[j * n + k]).sum();
        }
    }
    out
}

/// `(Mⁿ, S_n, U_n)` with `S_n = Σ_{m<n} MᵐEMᵐᵀ` and
/// `U_n = Σ_{m<n} (n − m) MᵐEMᵐᵀ`, by binary doubling from
/// `(P, S, U)_{a+b} = (P_aP_b, S_a + P_aS_bP_aᵀ, U_a + b·S_a + P_aU_bP_aᵀ)`.
fn doubling(m: &[f64], e: &[f64], size: usize, n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let identity: Vec<f64> = (0..size * size)
        .map(|k| if k / size == k % size { 1.0 } else { 0.0 })
        .collect();
    let combine = |(pa, sa, ua, a): &(Vec<f64>, Vec<f64>, Vec<f64>, usize),
                   (pb, sb, ub, b): &(Vec<f64>, Vec<f64>, Vec<f64>, usize)| {
        let p = mul(pa, pb, size);
        let psp = congruence(pa, sb, size);
        let pup = congruence(pa, ub, size);
        let s: Vec<f64> = sa.iter().zip(&psp).map(|(x, y)| x + y).collect();
        let u: Vec<f64> = (0..size * size)
            .map(|k| ua[k] + *b as f64 * sa[k] + pup[k])
            .collect();
        (p, s, u, a + b)
    };
    let base = (m.to_vec(), e.to_vec(), e.to_vec(), 1usize);
    let mut acc = (
        identity,
        vec![0.0; size * size],
        vec![0.0; size * size],
        0usize,
    );
    for bit in (0..usize::BITS - n.leading_zeros()).rev() {
        acc = combine(&acc, &acc);
        if (n >> bit) & 1 == 1 {
            acc = combine(&acc, &base);
        }
    }
    (acc.0, acc.1, acc.2)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;
    use crate::toeplitz;

    fn example() -> Blt {
        Blt::new(vec![0.3, 0.9, 0.995], vec![0.2, 0.1, 0.03]).unwrap()
    }

    /// The filters reproduce the closed-form coefficients, and `C⁻¹`'s
    /// coefficients invert `C`'s.
    #[test]
    fn the_filters_are_the_toeplitz_factors() {
        let blt = example();
        let c = blt.c_coefficients(50);
        for (k, ck) in c.iter().enumerate().skip(1) {
            let want: f64 = blt
                .omega()
                .iter()
                .zip(blt.theta())
                .map(|(w, t)| w * t.powi(k as i32 - 1))
                .sum();
            assert!((ck - want).abs() < 1e-15);
        }
        let r = blt.inverse_coefficients(50);
        let inverse = toeplitz::inverse(&c, 50).unwrap();
        for (a, b) in r.iter().zip(&inverse) {
            assert!((a - b).abs() < 1e-13, "{a} vs {b}");
        }
    }

    /// The doubling figures equal sums over the explicit sequences, at
    /// horizons of every parity and for decayed sums.
    #[test]
    fn doubling_equals_the_sums_over_steps() {
        let blt = example();
        for query in [StreamQuery::Prefix, StreamQuery::Decayed { rate: 0.97 }] {
            for t in [1, 2, 3, 7, 64, 1000, 4097] {
                let stream = Stream::new(query, t).unwrap();
                let c = blt.c_coefficients(t);
                let b = toeplitz::apply_workload(&stream, &blt.inverse_coefficients(t));
                let c_energy: f64 = c.iter().map(|v| v * v).sum();
                let last: f64 = b.iter().map(|v| v * v).sum();
                let total: f64 = b
                    .iter()
                    .enumerate()
                    .map(|(k, v)| (t - k) as f64 * v * v)
                    .sum();
                let (l, f) = blt.b_energies(&stream).unwrap();
                assert!(
                    (blt.c_energy(t) - c_energy).abs() < 1e-10 * c_energy,
                    "{query:?} {t}"
                );
                assert!(
                    (l - last).abs() < 1e-9 * last,
                    "{query:?} {t}: {l} vs {last}"
                );
                assert!(
                    (f - total).abs() < 1e-9 * total,
                    "{query:?} {t}: {f} vs {total}"
                );
            }
        }
        let window = Stream::new(StreamQuery::SlidingWindow { width: 3 }, 10).unwrap();
        assert!(blt.b_energies(&window).is_none());
    }

    /// At a million steps the optimizer's result beats its start, more
    /// buffers do better, none goes below the square root (the best
    /// Toeplitz factorization for the largest variance), and the
    /// factorization built from it has the doubling's figures.
    #[test]
    fn an_optimized_blt_approaches_the_square_root_from_above() {
        let stream = Stream::prefix(1 << 20).unwrap();
        let sqrt = crate::Factorization::sqrt(&stream)
            .unwrap()
            .figures(crate::Participation::Single)
            .unwrap();
        let mut previous = f64::INFINITY;
        for buffers in [4, 8] {
            let f = crate::Factorization::blt(&stream, buffers, Objective::Max).unwrap();
            let blt = f.blt.clone().unwrap();
            let start = from_params(&fitted_start(1 << 20, buffers, 1.0)).unwrap();
            let (max, _) = blt.figures(&stream).unwrap();
            assert!(max < start.figures(&stream).unwrap().0);
            assert!(max < previous);
            assert!(
                max >= sqrt.max_variance * (1.0 - 1e-12),
                "{max} vs {}",
                sqrt.max_variance
            );
            let figures = f.figures(crate::Participation::Single).unwrap();
            assert!((figures.max_variance - max).abs() < 1e-9 * max);
            previous = max;
        }
        assert_eq!(example().c_energy(0), 0.0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(Blt::new(vec![0.5], vec![]).is_err());
        assert!(Blt::new(vec![1.0], vec![0.1]).is_err());
        assert!(Blt::new(vec![-0.1], vec![0.1]).is_err());
        assert!(Blt::new(vec![0.5], vec![f64::NAN]).is_err());
        assert!(Blt::new(vec![0.5; MAX_BUFFERS + 1], vec![0.1; MAX_BUFFERS + 1]).is_err());
        let stream = Stream::prefix(100).unwrap();
        assert!(Blt::optimize(&stream, 0, Objective::Max).is_err());
        let window = Stream::new(StreamQuery::SlidingWindow { width: 3 }, 100).unwrap();
        assert!(Blt::optimize(&window, 2, Objective::Max).is_err());
    }
}
