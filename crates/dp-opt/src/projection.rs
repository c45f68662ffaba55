//! Building blocks of Nikolov's projection mechanism ("An improved private
//! mechanism for small databases"): the generalized Gaussian mechanism of
//! Theorem 2.2 and the least-squares projection of Algorithm 1, step 3.
//!
//! **Status (issue 6, in progress):** the covariance optimizer of program
//! (4)–(6) (Ky Fan k-norm) and the experiment are not built yet; the
//! mechanism here takes any covariance that meets the privacy condition
//! (for example `r² I`, r the largest column norm of W).
//!
//! - [`GeneralizedGaussian`]: `y = W x + N(0, c² Σ)`, (ε,δ)-DP whenever
//!   `w_eᵀ Σ⁻¹ w_e ≤ 1` for every column `w_e` of W (Theorem 2.2), with
//!   `c = (0.5√ε + √(2 ln(1/δ)))/ε` as the paper defines it
//!   ([`GaussianCalibration::Projection`]), or the exact analytic multiplier
//!   for L2 sensitivity 1 ([`GaussianCalibration::Analytic`]): the
//!   condition says exactly that `Σ^{-1/2} W` has largest column norm ≤ 1,
//!   and `Σ^{1/2}·N(0, c²I)` post-processes the Gaussian mechanism on it.
//!   The condition is verified (relative slack 1e-12) before any release.
//! - [`project_symmetric_hull`]: `argmin ‖z − t‖²` over
//!   `conv{±v_e}` (the scaled sensitivity polytope `N (I − Π) K_W` when
//!   `v_e = N (I − Π) w_e`), by the pairwise Frank–Wolfe method (linear
//!   convergence on polytopes, Lacoste-Julien & Jaggi 2015), whose linear
//!   oracle is one column search `max_e |⟨∇, v_e⟩|`. It stops when the
//!   Frank–Wolfe gap `g = ⟨z − t, z − s⟩` is at most `tolerance`; since the
//!   objective is 1-strongly convex, `‖z − z*‖² ≤ 2g`.

use dp_core::calibration::GaussianCalibration;
use dp_core::{DpError, PrivacyBudget, Result};
use dp_linalg::{Cholesky, Mat, MatRef};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

/// The generalized Gaussian mechanism of Theorem 2.2.
#[derive(Debug, Clone)]
pub struct GeneralizedGaussian {
    workload: Mat<f64>,
    factor: Mat<f64>,
    multiplier: f64,
    largest_condition: f64,
}

impl GeneralizedGaussian {
    /// Validates W (m×n), Σ (m×m, symmetric positive definite) and the
    /// budget (approximate DP), and checks `w_eᵀ Σ⁻¹ w_e ≤ 1` for every
    /// column; refuses a covariance that breaks it.
    pub fn new(
        workload: MatRef<'_, f64>,
        covariance: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
    ) -> Result<Self> {
        dp_core::validate::check_nonzero_matrix("workload", workload)?;
        dp_core::validate::check_symmetric("covariance", covariance)?;
        let m = workload.nrows();
        if covariance.nrows() != m {
            return Err(DpError::DimensionMismatch {
                what: format!(
                    "covariance is {}x{} but the workload has {m} rows",
                    covariance.nrows(),
                    covariance.ncols()
                ),
            });
        }
        let Some(delta) = budget.delta() else {
            return Err(DpError::InvalidParameter {
                name: "budget",
                reason: "the generalized Gaussian mechanism needs (ε,δ)-DP".into(),
            });
        };
        let chol = Cholesky::factor(covariance).map_err(|_| DpError::InvalidParameter {
            name: "covariance",
            reason: "must be positive definite".into(),
        })?;
        // ‖L⁻¹ w_e‖² = w_eᵀ Σ⁻¹ w_e.
        let mut whitened = workload.to_owned();
        chol.solve_lower_in_place(whitened.as_mut())?;
        let largest = (0..whitened.ncols())
            .map(|e| whitened.col(e).squared_norm_l2())
            .fold(0.0, f64::max);
        if largest.is_nan() || largest > 1.0 + 1e-12 {
            let worst = (0..whitened.ncols())
                .max_by(|&a, &b| {
                    whitened
                        .col(a)
                        .squared_norm_l2()
                        .total_cmp(&whitened.col(b).squared_norm_l2())
                })
                .unwrap_or(0);
            return Err(DpError::InvalidParameter {
                name: "covariance",
                reason: format!(
                    "breaks the privacy condition w_eᵀ Σ⁻¹ w_e ≤ 1: column {worst} has {largest:.6e}"
                ),
            });
        }
        let multiplier = calibration.multiplier(budget.epsilon(), delta)?;
        Ok(Self {
            workload: workload.to_owned(),
            factor: chol.lower().to_owned(),
            multiplier,
            largest_condition: largest,
        })
    }

    /// The noise multiplier c: the noise is `N(0, c² Σ)`.
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// `max_e w_eᵀ Σ⁻¹ w_e` (at most 1).
    pub fn largest_condition(&self) -> f64 {
        self.largest_condition
    }

    /// Expected total squared error `c² tr Σ`.
    pub fn expected_total_squared_error(&self) -> f64 {
        let m = self.factor.nrows();
        let trace: f64 = (0..m).map(|i| self.factor.row(i).squared_norm_l2()).sum();
        self.multiplier * self.multiplier * trace
    }

    /// One release `W x + c L z` (`L Lᵀ = Σ`, z standard normal).
    pub fn release<R: Rng + ?Sized>(&self, x: &[f64], rng: &mut R) -> Result<Vec<f64>> {
        let (m, n) = (self.workload.nrows(), self.workload.ncols());
        if x.len() != n || x.iter().any(|v| !v.is_finite()) {
            return Err(DpError::InvalidParameter {
                name: "histogram",
                reason: format!("need {n} finite entries"),
            });
        }
        let z: Vec<f64> = (0..m).map(|_| StandardNormal.sample(rng)).collect();
        Ok((0..m)
            .map(|i| {
                let wx: f64 = (0..n).map(|j| self.workload[(i, j)] * x[j]).sum();
                let noise: f64 = (0..=i).map(|k| self.factor[(i, k)] * z[k]).sum();
                wx + self.multiplier * noise
            })
            .collect())
    }
}

/// Algorithm 1 (the projection mechanism) for a given covariance:
/// `ỹ = W x + N(0, c²Σ)` by [`GeneralizedGaussian`], `Π` the orthogonal
/// projector onto the eigenvectors of the `k = ⌊ε N⌋` largest eigenvalues
/// of Σ, `ȳ = argmin{‖z − (I − Π)ỹ‖ : z ∈ N (I − Π) K_W}` by
/// [`project_symmetric_hull`], answers `Π ỹ + ȳ`. Private for any
/// database (post-processing of Theorem 2.2); accurate for databases of at
/// most N records (Lemma 3.0.2). N is public: it must be a bound, not the
/// private count.
#[derive(Debug, Clone)]
pub struct ProjectionMechanism {
    gaussian: GeneralizedGaussian,
    /// Π (m×m).
    top: Mat<f64>,
    /// Columns `N (I − Π) w_e`.
    vertices: Mat<f64>,
    k: usize,
    tolerance: f64,
}

/// One release of [`ProjectionMechanism`].
#[derive(Debug, Clone)]
pub struct ProjectionRelease {
    /// The answers `Π ỹ + ȳ`.
    pub answers: Vec<f64>,
    /// The Gaussian answers `ỹ` before projection.
    pub gaussian: Vec<f64>,
    /// The projection step's result (distance, gap, convergence).
    pub projection: HullProjection,
}

impl ProjectionMechanism {
    /// Builds the mechanism for the public database-size bound
    /// `records` (N ≥ 1); k = ⌊ε N⌋ must lie in 0..=m.
    pub fn new(
        workload: MatRef<'_, f64>,
        covariance: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
        records: f64,
        tolerance: f64,
    ) -> Result<Self> {
        if records.is_nan() || records < 1.0 || !records.is_finite() {
            return Err(DpError::InvalidParameter {
                name: "records",
                reason: format!("the database-size bound N must be finite and ≥ 1, got {records}"),
            });
        }
        let gaussian = GeneralizedGaussian::new(workload, covariance, budget, calibration)?;
        let m = workload.nrows();
        let k = (budget.epsilon().get() * records).floor() as usize;
        if k > m {
            return Err(DpError::InvalidParameter {
                name: "k",
                reason: format!("k = ⌊εN⌋ = {k} exceeds the number of queries {m}"),
            });
        }
        let eig = dp_linalg::SymmetricEigen::new(covariance)?;
        // Eigenvalues ascending: the top k are the last k.
        let top_vectors = Mat::from_fn(m, k, |i, c| eig.vectors[(i, m - 1 - c)]);
        let top = top_vectors.as_ref() * top_vectors.transpose();
        let mut rest = Mat::<f64>::identity(m, m) - &top;
        dp_linalg::symmetrize(&mut rest);
        let vertices = (rest.as_ref() * workload) * faer::Scale(records);
        Ok(Self {
            gaussian,
            top,
            vertices,
            k,
            tolerance,
        })
    }

    /// k = ⌊ε N⌋.
    pub fn k(&self) -> usize {
        self.k
    }

    /// One release for the private histogram x.
    pub fn release<R: Rng + ?Sized>(&self, x: &[f64], rng: &mut R) -> Result<ProjectionRelease> {
        let y = self.gaussian.release(x, rng)?;
        let m = y.len();
        let py: Vec<f64> = (0..m)
            .map(|i| (0..m).map(|j| self.top[(i, j)] * y[j]).sum())
            .collect();
        let rest: Vec<f64> = y.iter().zip(&py).map(|(a, b)| a - b).collect();
        let projection =
            project_symmetric_hull(self.vertices.as_ref(), &rest, self.tolerance, 100_000)?;
        let answers = py
            .iter()
            .zip(&projection.point)
            .map(|(a, b)| a + b)
            .collect();
        Ok(ProjectionRelease {
            answers,
            gaussian: y,
            projection,
        })
    }
}

/// Result of [`project_symmetric_hull`].
#[derive(Debug, Clone)]
pub struct HullProjection {
    /// The projection z.
    pub point: Vec<f64>,
    /// `‖z − t‖`.
    pub distance: f64,
    /// Final Frank–Wolfe gap g (`‖z − z*‖² ≤ 2g`).
    pub gap: f64,
    /// Iterations.
    pub iterations: usize,
    /// Whether the gap met the tolerance.
    pub converged: bool,
}

/// Projects `target` onto `conv{±v_e}` (columns `v_e` of `vertices`, m×n)
/// by pairwise Frank–Wolfe, to a Frank–Wolfe gap of `tolerance`.
pub fn project_symmetric_hull(
    vertices: MatRef<'_, f64>,
    target: &[f64],
    tolerance: f64,
    max_iterations: usize,
) -> Result<HullProjection> {
    let (m, n) = (vertices.nrows(), vertices.ncols());
    if target.len() != m || n == 0 {
        return Err(DpError::DimensionMismatch {
            what: format!(
                "target has {} entries for {m}-dimensional vertices ({n} columns)",
                target.len()
            ),
        });
    }
    if !dp_linalg::all_finite(vertices) || target.iter().any(|v| !v.is_finite()) {
        return Err(DpError::InvalidParameter {
            name: "projection input",
            reason: "vertices and target must be finite".into(),
        });
    }
    if tolerance.is_nan() || tolerance <= 0.0 {
        return Err(DpError::InvalidParameter {
            name: "tolerance",
            reason: "must be positive".into(),
        });
    }
    // Vertex k: column k / 2 with sign + (k even) or − (k odd).
    let vertex = |k: usize| -> Vec<f64> {
        let s = if k.is_multiple_of(2) { 1.0 } else { -1.0 };
        (0..m).map(|i| s * vertices[(i, k / 2)]).collect()
    };
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    // The linear oracle: argmin_k ⟨g, s_k⟩ = −max_e |⟨g, v_e⟩|.
    let oracle = |g: &[f64]| -> usize {
        let mut best = (0usize, f64::INFINITY);
        for e in 0..n {
            let p: f64 = (0..m).map(|i| g[i] * vertices[(i, e)]).sum();
            for (k, val) in [(2 * e, p), (2 * e + 1, -p)] {
                if val < best.1 {
                    best = (k, val);
                }
            }
        }
        best.0
    };
    let first = oracle(&target.iter().map(|t| -t).collect::<Vec<_>>());
    let mut weights: Vec<(usize, f64)> = vec![(first, 1.0)];
    let mut z = vertex(first);
    let mut gap = f64::INFINITY;
    let mut iterations = 0;
    while iterations < max_iterations {
        let grad: Vec<f64> = z.iter().zip(target).map(|(a, b)| a - b).collect();
        let s_idx = oracle(&grad);
        let s = vertex(s_idx);
        gap = dot(&grad, &z) - dot(&grad, &s);
        if gap <= tolerance {
            break;
        }
        iterations += 1;
        // Away vertex: the active one with the largest ⟨g, s_k⟩.
        let (away_pos, _) = weights
            .iter()
            .enumerate()
            .map(|(pos, &(k, _))| (pos, dot(&grad, &vertex(k))))
            .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
        let (away_idx, away_weight) = weights[away_pos];
        let a = vertex(away_idx);
        let d: Vec<f64> = s.iter().zip(&a).map(|(x, y)| x - y).collect();
        let dd = dot(&d, &d);
        if dd <= 0.0 {
            break;
        }
        let gamma = (-dot(&grad, &d) / dd).clamp(0.0, away_weight);
        for (zi, di) in z.iter_mut().zip(&d) {
            *zi += gamma * di;
        }
        weights[away_pos].1 -= gamma;
        match weights.iter_mut().find(|(k, _)| *k == s_idx) {
            Some(w) => w.1 += gamma,
            None => weights.push((s_idx, gamma)),
        }
        weights.retain(|&(_, w)| w > 0.0);
    }
    let distance = z
        .iter()
        .zip(target)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    Ok(HullProjection {
        point: z,
        distance,
        gap,
        iterations,
        converged: gap <= tolerance,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::SeedableRng;

    /// Exact projection onto conv{±v_e} by enumerating vertex subsets of
    /// size ≤ m + 1 (Carathéodory): the affine least-squares point of each
    /// subset, kept when its weights are non-negative.
    fn brute_force(v: &Mat<f64>, t: &[f64]) -> f64 {
        let (m, n) = (v.nrows(), v.ncols());
        let verts: Vec<Vec<f64>> = (0..2 * n)
            .map(|k| {
                let s = if k.is_multiple_of(2) { 1.0 } else { -1.0 };
                (0..m).map(|i| s * v[(i, k / 2)]).collect()
            })
            .collect();
        let mut best = f64::INFINITY;
        let total = 1usize << (2 * n);
        for mask in 1..total {
            let idx: Vec<usize> = (0..2 * n).filter(|k| mask >> k & 1 == 1).collect();
            if idx.len() > m + 1 {
                continue;
            }
            let k = idx.len();
            // KKT of min ‖Σ αᵢ vᵢ − t‖² s.t. Σ αᵢ = 1.
            let mut a = Mat::<f64>::zeros(k + 1, k + 1);
            let mut b = Mat::<f64>::zeros(k + 1, 1);
            for (p, &i) in idx.iter().enumerate() {
                for (q, &j) in idx.iter().enumerate() {
                    a[(p, q)] = verts[i].iter().zip(&verts[j]).map(|(x, y)| x * y).sum();
                }
                a[(p, k)] = 1.0;
                a[(k, p)] = 1.0;
                b[(p, 0)] = verts[i].iter().zip(t).map(|(x, y)| x * y).sum();
            }
            b[(k, 0)] = 1.0;
            let lu = a.as_ref().partial_piv_lu();
            let sol = faer::linalg::solvers::Solve::solve(&lu, b.as_ref());
            if !sol.as_ref().is_all_finite() || (0..k).any(|p| sol[(p, 0)] < -1e-12) {
                continue;
            }
            let point: Vec<f64> = (0..m)
                .map(|r| (0..k).map(|p| sol[(p, 0)] * verts[idx[p]][r]).sum())
                .collect();
            let d: f64 = point
                .iter()
                .zip(t)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f64>();
            best = best.min(d.sqrt());
        }
        best
    }

    /// Frank–Wolfe against brute force on small random instances.
    #[test]
    fn frank_wolfe_matches_brute_force() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for trial in 0..40 {
            let (m, n) = (2 + trial % 2, 2 + trial % 3);
            let v = Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 2.0 - 1.0);
            let scale = [0.3, 1.0, 3.0][trial % 3];
            let t: Vec<f64> = (0..m)
                .map(|_| scale * (rng.random::<f64>() * 2.0 - 1.0))
                .collect();
            let fw = project_symmetric_hull(v.as_ref(), &t, 1e-14, 100_000).unwrap();
            assert!(fw.converged, "trial {trial}");
            let exact = brute_force(&v, &t);
            assert!(
                (fw.distance - exact).abs() < 1e-6,
                "trial {trial}: {} vs {exact}",
                fw.distance
            );
        }
    }

    /// The privacy condition: Σ = s·WWᵀ-free choice `Σ = r² I` with r the
    /// largest column norm is accepted exactly at the boundary and refused
    /// just inside; bad inputs are refused.
    #[test]
    fn privacy_condition_is_enforced() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let budget = PrivacyBudget::approx(1.0, 1e-6).unwrap();
        for _ in 0..20 {
            let (m, n) = (4, 6);
            let w = Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 4.0 - 2.0);
            // A random SPD shape B, scaled so that max_e w_eᵀ Σ⁻¹ w_e = 1.
            let b = Mat::from_fn(m, m, |_, _| rng.random::<f64>() - 0.5);
            let mut shape = b.as_ref() * b.transpose();
            for i in 0..m {
                shape[(i, i)] += 0.5;
            }
            let chol = Cholesky::factor(shape.as_ref()).unwrap();
            let mut wh = w.clone();
            chol.solve_lower_in_place(wh.as_mut()).unwrap();
            let q = (0..n)
                .map(|e| wh.col(e).squared_norm_l2())
                .fold(0.0, f64::max);
            let sigma = &shape * faer::Scale(q);
            let g = GeneralizedGaussian::new(
                w.as_ref(),
                sigma.as_ref(),
                budget,
                GaussianCalibration::Projection,
            )
            .unwrap();
            assert!((g.largest_condition() - 1.0).abs() < 1e-9);
            // Theorem 2.2 at ε = 1, δ = 1e-6: (0.5√ε + √(2 ln(1/δ)))/ε.
            let c = 0.5 * 1f64.sqrt() + (2.0 * 1e6f64.ln()).sqrt();
            assert!((g.multiplier() - c).abs() < 1e-12);
            let tight = &sigma * faer::Scale(0.999);
            assert!(
                GeneralizedGaussian::new(
                    w.as_ref(),
                    tight.as_ref(),
                    budget,
                    GaussianCalibration::Projection
                )
                .is_err()
            );
        }
        let w = Mat::<f64>::identity(3, 3);
        let pure = PrivacyBudget::pure(1.0).unwrap();
        let eye = Mat::<f64>::identity(3, 3);
        assert!(
            GeneralizedGaussian::new(
                w.as_ref(),
                eye.as_ref(),
                pure,
                GaussianCalibration::Projection
            )
            .is_err()
        );
        let wrong = Mat::<f64>::identity(2, 2);
        assert!(
            GeneralizedGaussian::new(
                w.as_ref(),
                wrong.as_ref(),
                budget,
                GaussianCalibration::Projection
            )
            .is_err()
        );
    }

    /// On a database of 4 records, ranges over 48 cells at ε = 1 with
    /// Σ = r²I: k = 4 of 40 directions keep their Gaussian noise, the rest
    /// is projected onto N·K_W, and the mean squared error falls far below
    /// the Gaussian mechanism's (fixed seed, 200 releases; Lemma 3.0.2).
    #[test]
    fn projection_beats_the_gaussian_mechanism_on_a_small_database() {
        let (m, n) = (40, 48);
        let w = Mat::from_fn(m, n, |i, j| {
            let a = (i * 7) % n;
            let b = (a + 3 + (i * 5) % 20).min(n - 1);
            f64::from(u8::from(j >= a && j <= b))
        });
        let r2 = (0..n)
            .map(|e| w.col(e).squared_norm_l2())
            .fold(0.0, f64::max);
        let sigma = Mat::<f64>::identity(m, m) * faer::Scale(r2);
        let budget = PrivacyBudget::approx(1.0, 1e-6).unwrap();
        let mech = ProjectionMechanism::new(
            w.as_ref(),
            sigma.as_ref(),
            budget,
            GaussianCalibration::Projection,
            4.0,
            1e-9,
        )
        .unwrap();
        assert_eq!(mech.k(), 4);
        let mut x = vec![0.0; n];
        x[3] = 2.0;
        x[30] = 1.0;
        x[31] = 1.0;
        let truth: Vec<f64> = (0..m)
            .map(|i| (0..n).map(|j| w[(i, j)] * x[j]).sum())
            .collect();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
        let (mut proj, mut gauss) = (0.0, 0.0);
        let reps = 200;
        for _ in 0..reps {
            let out = mech.release(&x, &mut rng).unwrap();
            assert!(out.projection.converged);
            proj += out
                .answers
                .iter()
                .zip(&truth)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>();
            gauss += out
                .gaussian
                .iter()
                .zip(&truth)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>();
        }
        let (proj, gauss) = (proj / reps as f64, gauss / reps as f64);
        // The Gaussian total squared error is c² tr Σ in expectation.
        let expected = mech.gaussian.expected_total_squared_error();
        assert!(
            (gauss - expected).abs() < 0.1 * expected,
            "{gauss} vs {expected}"
        );
        assert!(proj < 0.25 * gauss, "projection {proj} vs Gaussian {gauss}");
        // Bad inputs.
        let bad = |records: f64| {
            ProjectionMechanism::new(
                w.as_ref(),
                sigma.as_ref(),
                budget,
                GaussianCalibration::Projection,
                records,
                1e-9,
            )
            .is_err()
        };
        assert!(bad(0.0) && bad(-3.0) && bad(f64::NAN) && bad(1e6));
    }

    /// Releases are unbiased with covariance c²Σ (fixed seed, 20,000 draws,
    /// tolerances of 5 standard errors).
    #[test]
    fn release_has_the_stated_noise() {
        let w = Mat::from_fn(2, 3, |i, j| [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]][i][j]);
        let sigma = Mat::from_fn(2, 2, |i, j| [[2.0, 0.5], [0.5, 2.0]][i][j]);
        let budget = PrivacyBudget::approx(1.0, 1e-3).unwrap();
        let g = GeneralizedGaussian::new(
            w.as_ref(),
            sigma.as_ref(),
            budget,
            GaussianCalibration::Analytic,
        )
        .unwrap();
        let c2 = g.multiplier().powi(2);
        let x = [3.0, 5.0, 7.0];
        let truth = [10.0, 12.0];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let draws = 20_000;
        let (mut s0, mut s1, mut s00, mut s11, mut s01) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for _ in 0..draws {
            let y = g.release(&x, &mut rng).unwrap();
            let (a, b) = (y[0] - truth[0], y[1] - truth[1]);
            s0 += a;
            s1 += b;
            s00 += a * a;
            s11 += b * b;
            s01 += a * b;
        }
        let nf = draws as f64;
        let se_mean = (c2 * 2.0 / nf).sqrt();
        assert!((s0 / nf).abs() < 5.0 * se_mean && (s1 / nf).abs() < 5.0 * se_mean);
        // Var of a sample variance ≈ 2σ⁴/N.
        let var = c2 * 2.0;
        let se_var = var * (2.0 / nf).sqrt();
        assert!((s00 / nf - var).abs() < 5.0 * se_var);
        assert!((s11 / nf - var).abs() < 5.0 * se_var);
        assert!((s01 / nf - c2 * 0.5).abs() < 5.0 * var * (1.0 / nf).sqrt());
        assert!((g.expected_total_squared_error() - c2 * 4.0).abs() < 1e-9 * c2);
    }
}
