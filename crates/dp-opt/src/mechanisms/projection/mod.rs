//! Nikolov's projection mechanism ("An improved private mechanism for
//! small databases"): the generalized Gaussian mechanism of Theorem 2.2,
//! the optimal covariance of program (4)–(6) and the least-squares
//! projection of Algorithm 1.
//!
//! - [`GeneralizedGaussian`]: `y = W x + N(0, c² Σ)`, (ε,δ)-DP whenever
//!   `w_eᵀ Σ⁻¹ w_e ≤ 1` for every column `w_e` of W (Theorem 2.2), with
//!   `c = (0.5√ε + √(2 ln(1/δ)))/ε` as the paper defines it
//!   ([`GaussianCalibration::Projection`]), or the exact analytic multiplier
//!   for L2 sensitivity 1 ([`GaussianCalibration::Analytic`]): the
//!   condition says exactly that `Σ^{-1/2} W` has largest column norm ≤ 1,
//!   and `Σ^{1/2}·N(0, c²I)` post-processes the Gaussian mechanism on it.
//!   The condition is verified (relative slack 1e-12) before any release.
//! - [`covariance::optimal_covariance`]: `min ‖Σ‖_(k)` under that
//!   condition, by projected Newton on the dual of Theorem 4.2, with a
//!   duality-gap certificate.
//! - [`hull::SymmetricHull`]: `argmin ‖z − t‖²` over `conv{±v_e}` (the
//!   scaled sensitivity polytope `N (I − Π) K_W` when
//!   `v_e = N (I − Π) w_e`) by pairwise Frank–Wolfe, whose linear oracle is
//!   one column search.
//! - [`ProjectionMechanism`]: Algorithm 1 for a given Σ, or
//!   [`ProjectionMechanism::optimal`] with the covariance above at
//!   `k = ⌊εN⌋`.

pub mod covariance;
pub mod hull;
pub mod ky_fan;

pub use covariance::{KyFanCovariance, KyFanOptions, optimal_covariance};
pub use hull::{HullProjection, SymmetricHull, project_symmetric_hull};

use dp_core::calibration::GaussianCalibration;
use dp_core::mechanism::cost_for;
use dp_core::{Cost, DpError, LinearStrategy, PrivacyBudget, PrivateHistogram, Result, Session};
use dp_linalg::{Cholesky, Mat, MatRef};

/// The generalized Gaussian mechanism of Theorem 2.2.
#[derive(Debug, Clone)]
pub struct GeneralizedGaussian {
    /// `L⁻¹ W`, the strategy the kernel measures (`L Lᵀ = Σ`).
    whitened: LinearStrategy,
    /// W itself (public), for mechanisms that post-process the release.
    workload: Mat<f64>,
    budget: PrivacyBudget,
    cost: Cost,
    covariance: Mat<f64>,
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
        chol.solve_lower_in_place(whitened.as_mut(), dp_linalg::Par::rayon(0))?;
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
            whitened: LinearStrategy::dense(whitened.as_ref())?,
            workload: workload.to_owned(),
            budget,
            // The kernel draws σ = Δ₂(L⁻¹W)/√(2ρ); charging the cost of
            // multiplier c scaled by the condition's value keeps σ = c
            // (the stated noise) and charges only what it buys.
            cost: match cost_for(budget, calibration)? {
                Cost::Rho(rho) => Cost::Rho(rho * largest.min(1.0)),
                other => other,
            },
            covariance: covariance.to_owned(),
            factor: chol.lower().to_owned(),
            multiplier,
            largest_condition: largest,
        })
    }

    /// The noise multiplier c: the noise is `N(0, c² Σ)`.
    pub fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// Σ.
    pub fn covariance(&self) -> MatRef<'_, f64> {
        self.covariance.as_ref()
    }

    /// The workload W.
    pub fn workload(&self) -> MatRef<'_, f64> {
        self.workload.as_ref()
    }

    /// The privacy budget it spends per release.
    pub fn budget(&self) -> PrivacyBudget {
        self.budget
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

    /// One release `L (L⁻¹W x + z)` (`L Lᵀ = Σ`): the kernel measures the
    /// whitened strategy `L⁻¹ W` (L2 sensitivity ≤ 1 by the privacy
    /// condition; the kernel computes it itself) with i.i.d. discrete
    /// Gaussian noise of standard deviation `Δ₂ c` charged to `session`, and
    /// `L` maps the measurement back: correlated noise `N(0, c²Σ)` in
    /// distribution up to the discretization, as post-processing.
    pub fn release(&self, data: &PrivateHistogram, session: &mut Session) -> Result<Vec<f64>> {
        let measured = session.measure_linear(&self.whitened, data, self.cost)?;
        let m = self.factor.nrows();
        Ok((0..m)
            .map(|i| {
                (0..=i)
                    .map(|k| self.factor[(i, k)] * measured.values[k])
                    .sum()
            })
            .collect())
    }
}

/// Algorithm 1 (the projection mechanism): `ỹ = W x + N(0, c²Σ)` by
/// [`GeneralizedGaussian`], `Π` the orthogonal projector onto the
/// eigenvectors of the `k = min(⌊ε N⌋, m)` largest eigenvalues of Σ,
/// `ȳ = argmin{‖z − (I − Π)ỹ‖ : z ∈ N (I − Π) K_W}` by [`SymmetricHull`],
/// answers `Π ỹ + ȳ`. Private for any database (post-processing of
/// Theorem 2.2); accurate for databases of at most N records
/// (Lemma 3.0.2). N is public: it must be a bound, not the private count.
/// When `ε N ≥ m`, Π = I and the mechanism is the generalized Gaussian.
///
/// The projection is computed to a Frank–Wolfe gap of
/// `tolerance · ‖(I − Π)ỹ‖²`, so the returned ȳ is within
/// `√(2 · tolerance) · ‖(I − Π)ỹ‖` of the exact projection.
#[derive(Debug, Clone)]
pub struct ProjectionMechanism {
    gaussian: GeneralizedGaussian,
    /// Π (m×m).
    top: Mat<f64>,
    /// `conv{±N (I − Π) w_e}`.
    hull: SymmetricHull,
    k: usize,
    records: f64,
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

/// Frank–Wolfe steps per projection at most (each costs O(n)).
const MAX_PROJECTION_STEPS: usize = 2_000_000;

impl ProjectionMechanism {
    /// Builds Algorithm 1 on the generalized Gaussian mechanism `gaussian`
    /// (its W, Σ and budget; the privacy condition was checked when it was
    /// built) for the public database-size bound `records` (N ≥ 1, finite);
    /// `tolerance` (> 0) is the projection's relative Frank–Wolfe gap.
    pub fn new(gaussian: GeneralizedGaussian, records: f64, tolerance: f64) -> Result<Self> {
        let workload = gaussian.workload();
        let k = projection_rank(workload.nrows(), gaussian.budget(), records)?;
        if tolerance.is_nan() || tolerance <= 0.0 {
            return Err(DpError::InvalidParameter {
                name: "tolerance",
                reason: "the projection tolerance must be positive".into(),
            });
        }
        let m = workload.nrows();
        let eig = dp_linalg::SymmetricEigen::new(gaussian.covariance())?;
        // Eigenvalues ascending: the top k are the last k.
        let top_vectors = Mat::from_fn(m, k, |i, c| eig.vectors[(i, m - 1 - c)]);
        let top = top_vectors.as_ref() * top_vectors.transpose();
        let mut rest = Mat::<f64>::identity(m, m) - &top;
        dp_linalg::symmetrize(&mut rest);
        let vertices = (rest.as_ref() * workload) * dp_linalg::Scale(records);
        let hull = SymmetricHull::new(vertices.as_ref())?;
        Ok(Self {
            gaussian,
            top,
            hull,
            k,
            records,
            tolerance,
        })
    }

    /// The mechanism with the optimal covariance of program (4)–(6) at
    /// `k = min(⌊ε N⌋, m)` ([`optimal_covariance`]); refuses N < 1/ε
    /// (k = 0: the Ky Fan 0-norm is no objective). Returns the covariance
    /// with its certificate as well.
    pub fn optimal(
        workload: MatRef<'_, f64>,
        budget: PrivacyBudget,
        calibration: GaussianCalibration,
        records: f64,
        options: &KyFanOptions,
        tolerance: f64,
    ) -> Result<(Self, KyFanCovariance)> {
        let k = projection_rank(workload.nrows(), budget, records)?;
        if k == 0 {
            return Err(DpError::InvalidParameter {
                name: "records",
                reason: format!(
                    "k = ⌊εN⌋ = 0 for N = {records}, ε = {}: the optimal covariance needs N ≥ 1/ε",
                    budget.epsilon().get()
                ),
            });
        }
        let cov = optimal_covariance(workload, k, options)?;
        let gaussian =
            GeneralizedGaussian::new(workload, cov.covariance.as_ref(), budget, calibration)?;
        let mech = Self::new(gaussian, records, tolerance)?;
        Ok((mech, cov))
    }

    /// k = min(⌊ε N⌋, m).
    pub fn k(&self) -> usize {
        self.k
    }

    /// The database-size bound N.
    pub fn records(&self) -> f64 {
        self.records
    }

    /// Π, the projector onto the top-k eigenvectors of Σ (m×m).
    pub fn projector(&self) -> MatRef<'_, f64> {
        self.top.as_ref()
    }

    /// The underlying generalized Gaussian mechanism.
    pub fn gaussian(&self) -> &GeneralizedGaussian {
        &self.gaussian
    }

    /// The expected squared error of the kept directions, `c² ‖Σ‖_(k)`
    /// (the first term of Lemma 3.0.2's proof; the projected part adds at
    /// most `4 E‖(I − Π)w‖_{L°}` by Lemma 3.0.1).
    pub fn expected_kept_error(&self) -> f64 {
        let c = self.gaussian.multiplier();
        let cov = self.gaussian.covariance();
        let m = cov.nrows();
        let trace: f64 = (0..m)
            .map(|i| (0..m).map(|j| self.top[(i, j)] * cov[(j, i)]).sum::<f64>())
            .sum();
        c * c * trace
    }

    /// One release for the private histogram x.
    pub fn release(
        &self,
        data: &PrivateHistogram,
        session: &mut Session,
    ) -> Result<ProjectionRelease> {
        let y = self.gaussian.release(data, session)?;
        let m = y.len();
        let py: Vec<f64> = (0..m)
            .map(|i| (0..m).map(|j| self.top[(i, j)] * y[j]).sum())
            .collect();
        let rest: Vec<f64> = y.iter().zip(&py).map(|(a, b)| a - b).collect();
        let projection = if self.k == m {
            // Π = I: nothing is left to project (the rest is rounding).
            HullProjection {
                point: vec![0.0; m],
                distance: 0.0,
                gap: 0.0,
                iterations: 0,
                converged: true,
            }
        } else {
            let scale = rest
                .iter()
                .map(|v| v * v)
                .sum::<f64>()
                .max(f64::MIN_POSITIVE);
            self.hull
                .project(&rest, self.tolerance * scale, MAX_PROJECTION_STEPS)?
        };
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

/// `min(⌊ε N⌋, m)` for a validated N.
fn projection_rank(m: usize, budget: PrivacyBudget, records: f64) -> Result<usize> {
    if !(records.is_finite() && records >= 1.0) {
        return Err(DpError::InvalidParameter {
            name: "records",
            reason: format!("the database-size bound N must be finite and ≥ 1, got {records}"),
        });
    }
    let k = (budget.epsilon().get() * records).floor();
    Ok(if k >= m as f64 { m } else { k as usize })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    /// `m` fixed, irregular range queries over `n` cells: query i sums the
    /// cells `a..=b`, `a = 7i mod n`, `b = min(a + lo + (5i mod spread), n − 1)`.
    fn ranges(m: usize, n: usize, lo: usize, spread: usize) -> Mat<f64> {
        Mat::from_fn(m, n, |i, j| {
            let a = (i * 7) % n;
            let b = (a + lo + (i * 5) % spread).min(n - 1);
            f64::from(u8::from(j >= a && j <= b))
        })
    }

    /// `M v`.
    fn times(m: MatRef<'_, f64>, v: &[f64]) -> Vec<f64> {
        (0..m.nrows())
            .map(|i| (0..m.ncols()).map(|j| m[(i, j)] * v[j]).sum())
            .collect()
    }

    /// `‖a − b‖²`.
    fn squared_distance(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
    }

    /// The generalized Gaussian mechanism with the paper's multiplier.
    fn projection_gaussian(
        w: &Mat<f64>,
        sigma: &Mat<f64>,
        budget: PrivacyBudget,
    ) -> Result<GeneralizedGaussian> {
        let calibration = GaussianCalibration::Projection;
        GeneralizedGaussian::new(w.as_ref(), sigma.as_ref(), budget, calibration)
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
            chol.solve_lower_in_place(wh.as_mut(), dp_linalg::Par::Seq)
                .unwrap();
            let q = (0..n)
                .map(|e| wh.col(e).squared_norm_l2())
                .fold(0.0, f64::max);
            let sigma = &shape * dp_linalg::Scale(q);
            let g = projection_gaussian(&w, &sigma, budget).unwrap();
            assert!((g.largest_condition() - 1.0).abs() < 1e-9);
            // Theorem 2.2 at ε = 1, δ = 1e-6: (0.5√ε + √(2 ln(1/δ)))/ε.
            let c = 0.5 * 1f64.sqrt() + (2.0 * 1e6f64.ln()).sqrt();
            assert!((g.multiplier() - c).abs() < 1e-12);
            let tight = &sigma * dp_linalg::Scale(0.999);
            assert!(projection_gaussian(&w, &tight, budget).is_err());
        }
        let w = Mat::<f64>::identity(3, 3);
        let pure = PrivacyBudget::pure(1.0).unwrap();
        let eye = Mat::<f64>::identity(3, 3);
        assert!(projection_gaussian(&w, &eye, pure).is_err());
        let wrong = Mat::<f64>::identity(2, 2);
        assert!(projection_gaussian(&w, &wrong, budget).is_err());
    }

    /// On a database of 4 records, ranges over 48 cells at ε = 1 with
    /// Σ = r²I: k = 4 of 40 directions keep their Gaussian noise, the rest
    /// is projected onto N·K_W, and the mean squared error falls far below
    /// the Gaussian mechanism's (fixed seed, 200 releases; Lemma 3.0.2).
    #[test]
    fn projection_beats_the_gaussian_mechanism_on_a_small_database() {
        let (m, n) = (40, 48);
        let w = ranges(m, n, 3, 20);
        let r2 = (0..n)
            .map(|e| w.col(e).squared_norm_l2())
            .fold(0.0, f64::max);
        let sigma = Mat::<f64>::identity(m, m) * dp_linalg::Scale(r2);
        let budget = PrivacyBudget::approx(1.0, 1e-6).unwrap();
        let gaussian = projection_gaussian(&w, &sigma, budget).unwrap();
        let mech = ProjectionMechanism::new(gaussian.clone(), 4.0, 1e-9).unwrap();
        assert_eq!(mech.k(), 4);
        let mut x = vec![0.0; n];
        x[3] = 2.0;
        x[30] = 1.0;
        x[31] = 1.0;
        let truth = times(w.as_ref(), &x);
        let mut session = dp_core::experiments::SeededSession::unlimited(17);
        let data = PrivateHistogram::from_f64_counts(&x).unwrap();
        let (mut proj, mut gauss) = (0.0, 0.0);
        let reps = 200;
        for _ in 0..reps {
            let out = mech.release(&data, &mut session).unwrap();
            assert!(out.projection.converged);
            proj += squared_distance(&out.answers, &truth);
            gauss += squared_distance(&out.gaussian, &truth);
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
        let bad = |records: f64| ProjectionMechanism::new(gaussian.clone(), records, 1e-9).is_err();
        assert!(bad(0.0) && bad(-3.0) && bad(f64::NAN) && bad(f64::INFINITY));
    }

    /// The mechanism with the optimal covariance: k = ⌊εN⌋, the kept
    /// part's expected error is c² times the certified Ky Fan optimum, and
    /// the measured kept error matches it (fixed seed, 400 releases, 5
    /// standard errors of a chi-square-like mean); N < 1/ε is refused.
    #[test]
    fn optimal_mechanism_keeps_the_ky_fan_error() {
        let (m, n) = (30, 40);
        let w = ranges(m, n, 2, 15);
        let budget = PrivacyBudget::approx(1.0, 1e-6).unwrap();
        let (mech, cov) = ProjectionMechanism::optimal(
            w.as_ref(),
            budget,
            GaussianCalibration::Projection,
            5.0,
            &KyFanOptions::default(),
            1e-8,
        )
        .unwrap();
        assert_eq!((mech.k(), cov.k), (5, 5));
        assert!(cov.converged);
        let c2 = mech.gaussian().multiplier().powi(2);
        let expected = mech.expected_kept_error();
        assert!((expected - c2 * cov.objective).abs() < 1e-8 * expected);
        // N = 5 records, one in each of five cells.
        let x: Vec<f64> = (0..n).map(|j| if j % 8 == 0 { 1.0 } else { 0.0 }).collect();
        let truth = times(w.as_ref(), &x);
        let pi = mech.projector();
        let kept_truth = times(pi, &truth);
        let mut session = dp_core::experiments::SeededSession::unlimited(23);
        let data = PrivateHistogram::from_f64_counts(&x).unwrap();
        let reps = 400;
        let mut samples = Vec::with_capacity(reps);
        for _ in 0..reps {
            let out = mech.release(&data, &mut session).unwrap();
            assert!(out.projection.converged);
            samples.push(squared_distance(&times(pi, &out.gaussian), &kept_truth));
        }
        let mean = samples.iter().sum::<f64>() / reps as f64;
        let var = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (reps - 1) as f64;
        let se = (var / reps as f64).sqrt();
        assert!(
            (mean - expected).abs() < 5.0 * se,
            "{mean} vs {expected} (se {se})"
        );
        // N < 1/ε: k = 0 has no Ky Fan objective.
        assert!(
            ProjectionMechanism::optimal(
                w.as_ref(),
                budget,
                GaussianCalibration::Projection,
                0.5,
                &KyFanOptions::default(),
                1e-8,
            )
            .is_err()
        );
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
        let mut session = dp_core::experiments::SeededSession::unlimited(3);
        let data = PrivateHistogram::from_f64_counts(&x).unwrap();
        let draws = 20_000;
        let (mut s0, mut s1, mut s00, mut s11, mut s01) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for _ in 0..draws {
            let y = g.release(&data, &mut session).unwrap();
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
