//! The (ε,δ) strategy for weighted marginal workloads that minimizes the
//! largest per-query variance (the second loss ResidualPlanner optimizes,
//! Xiao, He, Zhang, Kifer, NeurIPS 2023), with a duality-gap certificate.
//!
//! **Reduction.** The workload's Gram and every loss that is convex and
//! invariant under permutations of each attribute's values are invariant
//! under that group, so averaging any strategy's `AᵀA` over the group
//! keeps its sensitivity's bound and does not raise the loss: an optimum
//! is diagonal in the residual basis, `AᵀA = Σ_T μ_T P_T` (as in
//! ResidualPlanner; [`dp_workloads::marginals`] for the `P_T`, rank
//! `mult_T = Π_{i∈T}(nᵢ−1)`, constant diagonal `mult_T/N`). Then
//! `Δ₂² = Σ_T μ_T mult_T/N`, and by symmetry every cell of the marginal on
//! S (row weight `w_S`) has the same variance `Δ₂² q(AᵀA)⁻¹qᵀ`, where
//! `q P_T qᵀ = w_S² mult_T N/Π_{i∈S}nᵢ²` for `T ⊆ S` and 0 otherwise.
//! With the budget shares `ν_T = μ_T mult_T/N` (`Σν = 1`, i.e. `Δ₂ = 1`):
//!
//! `v_S(ν) = Σ_{T⊆S} a_{S,T}/ν_T`, `a_{S,T} = w_S² (mult_T/Π_{i∈S}nᵢ)²`,
//!
//! and the problem is `min_ν max_S v_S(ν)` over the simplex: convex.
//!
//! **Dual.** `max_S v_S = max_{λ∈Δ} Σ_S λ_S v_S`, and by Sion's minimax
//! theorem the optimum is `max_λ g(λ)` with
//!
//! `g(λ) = min_ν Σ_T b_T(λ)/ν_T = (Σ_T √b_T)²`, `b_T = Σ_{S⊇T} λ_S a_{S,T}`,
//!
//! attained at `ν_T ∝ √b_T` (Cauchy–Schwarz). So every λ in the simplex
//! gives a lower bound `g(λ)` and its `ν(λ)` an upper bound
//! `max_S v_S(ν(λ))`: the certificate. `g` is concave (a minimum of
//! linear functions) and homogeneous of degree 1, and its gradient is the
//! primal variances, `∂g/∂λ_S = v_S(ν(λ))`, so `g = ⟨λ, v⟩` (Euler) and
//! the gap of an iterate is `max_S v_S − ⟨λ, v⟩` (Frank–Wolfe's gap).
//!
//! **Solver.** The multiplicative algorithm of optimal design (Silvey,
//! Titterington & Torsney 1978; its monotone variants with an exponent,
//! Yu, Ann. Statist. 2010): `λ_S ← λ_S (v_S/g)^κ`, renormalized — a fixed
//! point has `v_S = g` on its support, the optimality condition. Here
//! monotonicity is enforced, not assumed: a step must not lower `g` beyond
//! rounding (`FLAT`; κ halves until it does not, and doubles, up to 4,
//! after a success); the best lower and upper bounds seen are kept. It stops
//! when the relative gap is at most the tolerance, or says why it could
//! not ([`Termination`]). On a workload invariant under
//! permutations of the attributes as well (all k-way marginals, equal
//! sizes and weights) the uniform start is optimal and one evaluation
//! certifies it. Cost per step: `O(Σ_S 2^{|S|})`, the residual sets of the
//! workload's marginals; nothing is quadratic in the number of marginals.

use std::collections::HashMap;
use std::sync::Arc;

use dp_core::{DpError, Result};
use dp_linalg::helmert;
use dp_workloads::marginals::residual_spectrum;
use dp_workloads::structured::{AttrSet, StructuredWorkload};

use super::marginal::marginal_group_errors;
use super::{KronTerm, PlanOptions, StructuredPlan, StructuredStrategy, certificate, overflow};
use dp_opt::{Budget, Executor, PrivacyModel, Solver, Termination};

/// Largest exponent κ of the multiplicative step (κ = 2 is the exact step
/// when every residual set lies in one marginal only).
const MAX_EXPONENT: f64 = 4.0;

/// Relative fall of `g` a step may make and still be taken. `g` is flat
/// at its maximum (its error is quadratic in λ's, the variances' only
/// linear), so once `g` has converged to rounding a step that still
/// halves the primal gap can lower the computed `g` slightly; refusing it
/// stalled the 0-3-way marginals on 100 attributes at a gap of 1.2e-6.
/// The certificate is unaffected: its bounds are the best seen.
const FLAT: f64 = 1e-10;

/// Smallest exponent tried before the solver reports a stall.
const MIN_EXPONENT: f64 = 1e-12;

/// The coefficients `a_{S,T}` in compressed rows: row S lists its residual
/// sets `T ⊆ S` (with `mult_T > 0`) by index, scaled by `1/scale`.
struct Coefficients {
    /// Row S spans `offsets[S]..offsets[S + 1]`.
    offsets: Vec<usize>,
    /// Index of T in the residual list.
    sets: Vec<u32>,
    /// `a_{S,T}/scale`.
    values: Vec<f64>,
    /// Number of residual sets.
    residuals: usize,
    /// The common factor taken out of every `a_{S,T}`.
    scale: f64,
}

/// One evaluation at λ: the shares ν, the variances v (in units of
/// `scale`), `g = (Σ√b)²` and `max v`.
struct Point {
    nu: Vec<f64>,
    variances: Vec<f64>,
    lower: f64,
    upper: f64,
}

impl Coefficients {
    /// `a_{S,T}` for marginals `(S, w_S²)`, residual sets from the
    /// workload's spectrum (its `T` with `mult_T > 0`), in logs: products
    /// of sizes may overflow.
    fn new(
        shape: &[usize],
        marginals: &[(AttrSet, f64)],
        residual_sets: &[AttrSet],
    ) -> Result<Self> {
        let index: HashMap<AttrSet, u32> = residual_sets
            .iter()
            .enumerate()
            .map(|(k, t)| (t.clone(), k as u32))
            .collect();
        let ln_n: Vec<f64> = shape.iter().map(|&n| (n as f64).ln()).collect();
        // ln((nᵢ−1)/nᵢ)², −∞ for nᵢ = 1 (no residual: never looked up).
        let ln_share: Vec<f64> = shape
            .iter()
            .map(|&n| 2.0 * ((n as f64 - 1.0) / n as f64).ln())
            .collect();
        let mut offsets = vec![0];
        let mut sets = Vec::new();
        let mut ln_values = Vec::new();
        for (m, (s, w2)) in marginals.iter().enumerate() {
            if m.is_multiple_of(1024) {
                dp_core::interrupt::check()?;
            }
            let ln_w2 = w2.ln();
            for t in s.subsets() {
                if let Some(&k) = index.get(&t) {
                    let inside: f64 = t.members().map(|i| ln_share[i]).sum();
                    let rest: f64 = s.difference(&t).members().map(|i| 2.0 * ln_n[i]).sum();
                    sets.push(k);
                    ln_values.push(ln_w2 + inside - rest);
                }
            }
            offsets.push(sets.len());
        }
        let ln_scale = ln_values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let values: Vec<f64> = ln_values.iter().map(|v| (v - ln_scale).exp()).collect();
        let scale = ln_scale.exp();
        if !(scale.is_finite() && scale > 0.0) || values.iter().any(|&v| v.is_nan() || v <= 0.0) {
            return Err(overflow("the per-query variance coefficients"));
        }
        Ok(Self {
            offsets,
            sets,
            values,
            residuals: residual_sets.len(),
            scale,
        })
    }

    fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    fn row(&self, s: usize) -> impl Iterator<Item = (usize, f64)> + '_ {
        let span = self.offsets[s]..self.offsets[s + 1];
        self.sets[span.clone()]
            .iter()
            .zip(&self.values[span])
            .map(|(&k, &a)| (k as usize, a))
    }

    /// `ν(λ)`, `v(ν(λ))`, `g(λ)` and `max_S v_S`.
    fn evaluate(&self, lambda: &[f64]) -> Point {
        let mut b = vec![0.0; self.residuals];
        for (s, &l) in lambda.iter().enumerate() {
            for (k, a) in self.row(s) {
                b[k] += l * a;
            }
        }
        let root: Vec<f64> = b.iter().map(|x| x.sqrt()).collect();
        let sum: f64 = root.iter().sum();
        let nu: Vec<f64> = root.iter().map(|r| r / sum).collect();
        let variances: Vec<f64> = (0..self.rows())
            .map(|s| self.row(s).map(|(k, a)| a / nu[k]).sum())
            .collect();
        let upper = variances.iter().copied().fold(0.0, f64::max);
        Point {
            nu,
            variances,
            lower: sum * sum,
            upper,
        }
    }

    /// `max_S v_S(ν)` for shares `ν` (tests: the upper bound at any ν).
    #[cfg(test)]
    fn max_variance(&self, nu: &[f64]) -> f64 {
        (0..self.rows())
            .map(|s| self.row(s).map(|(k, a)| a / nu[k]).sum::<f64>())
            .fold(0.0, f64::max)
            * self.scale
    }
}

/// The optimum of `min_ν max_S v_S(ν)`: the best shares found, the
/// bounds (in objective units) and why the solver stopped.
struct Solution {
    nu: Vec<f64>,
    upper: f64,
    lower: f64,
    iterations: usize,
    termination: Termination,
}

/// The multiplicative algorithm of the module doc from the uniform λ, run
/// by dp-opt's [`Executor`] under `budget`.
fn solve(c: &Coefficients, tolerance: f64, budget: Budget) -> Solution {
    let run = Executor::new(budget, &mut ())
        .scale(c.scale)
        .run(Multiplicative::new(c, tolerance));
    let (nu, upper, lower) = run.output;
    Solution {
        nu,
        upper,
        lower,
        iterations: run.iterations,
        termination: run.termination,
    }
}

/// The state of the multiplicative algorithm: the dual point λ and its
/// evaluation, the step's exponent κ, the best upper bound (with its
/// shares) and the best lower bound, in units of `c.scale`.
struct Multiplicative<'c> {
    c: &'c Coefficients,
    tolerance: f64,
    lambda: Vec<f64>,
    at: Point,
    best_nu: Vec<f64>,
    upper: f64,
    lower: f64,
    exponent: f64,
}

impl<'c> Multiplicative<'c> {
    /// The uniform λ, evaluated.
    fn new(c: &'c Coefficients, tolerance: f64) -> Self {
        let m = c.rows();
        let lambda = vec![1.0 / m as f64; m];
        let at = c.evaluate(&lambda);
        Self {
            c,
            tolerance,
            best_nu: at.nu.clone(),
            upper: at.upper,
            lower: at.lower,
            lambda,
            at,
            exponent: 1.0,
        }
    }

    fn gap(&self) -> f64 {
        (self.upper - self.lower) / self.upper
    }
}

impl Solver for Multiplicative<'_> {
    /// The best shares and the upper and lower bounds, in objective units.
    type Output = (Vec<f64>, f64, f64);

    /// The dual bound `g(λ)`, the value the steps raise (finite: for λ on
    /// the simplex every `b_T` lies in `[0, 1]`, as every `a_{S,T}/scale`
    /// does, and a step is taken only to a finite `g`).
    fn init(&mut self) -> f64 {
        self.lower
    }

    fn terminate(&self) -> Option<Termination> {
        let (gap, tolerance) = (self.gap(), self.tolerance);
        (gap <= tolerance).then(|| Termination::Converged {
            criterion: format!("relative duality gap {gap:.1e} <= {tolerance:.0e}"),
        })
    }

    /// One multiplicative step `λ_S ← λ_S (v_S/g)^κ`, renormalized, with κ
    /// halved until the step does not lower `g` (stalled below
    /// [`MIN_EXPONENT`]) and doubled, up to [`MAX_EXPONENT`], after it.
    fn next_iter(&mut self) -> std::result::Result<f64, Termination> {
        let gap = self.gap();
        // A step that does not lower g, found by halving κ.
        let stepped = loop {
            let mut next: Vec<f64> = self
                .lambda
                .iter()
                .zip(&self.at.variances)
                .map(|(l, v)| l * (v / self.at.lower).powf(self.exponent))
                .collect();
            let total: f64 = next.iter().sum();
            next.iter_mut().for_each(|l| *l /= total);
            let trial = self.c.evaluate(&next);
            if trial.lower.is_finite() && trial.lower >= self.at.lower * (1.0 - FLAT) {
                self.exponent = (2.0 * self.exponent).min(MAX_EXPONENT);
                break Some((next, trial));
            }
            self.exponent /= 2.0;
            if self.exponent < MIN_EXPONENT {
                break None;
            }
        };
        let Some((next, trial)) = stepped else {
            return Err(Termination::Stalled {
                reason: format!(
                    "no multiplicative step raises the dual bound (relative gap {gap:.1e})"
                ),
            });
        };
        (self.lambda, self.at) = (next, trial);
        self.lower = self.lower.max(self.at.lower);
        if self.at.upper < self.upper {
            self.upper = self.at.upper;
            self.best_nu.clone_from(&self.at.nu);
        }
        Ok(self.lower)
    }

    fn finish(self, _termination: &Termination) -> Self::Output {
        (
            self.best_nu,
            self.upper * self.c.scale,
            self.lower * self.c.scale,
        )
    }
}

/// The strategy minimizing the largest per-query variance
/// `Δ₂² q(AᵀA)⁺qᵀ` over the rows q of the marginal workload `w`, with the
/// duality-gap certificate of the module doc. Its `objective` is that
/// largest variance; `groups` hold each group's total `Δ₂² tr(W_gᵀW_g
/// (AᵀA)⁺)` as for every plan.
pub fn max_variance_marginal_plan(
    w: &StructuredWorkload,
    options: &PlanOptions,
) -> Result<StructuredPlan> {
    if !(options.gap_tolerance.is_finite() && options.gap_tolerance > 0.0) {
        return Err(DpError::InvalidParameter {
            name: "plan options",
            reason: format!("gap_tolerance {} must be > 0", options.gap_tolerance),
        });
    }
    let budget = Budget::iterations(options.max_iterations).with_seconds(options.max_seconds);
    budget.validate()?;
    let Some(marginals) = w.marginal_max_weights() else {
        return Err(not_marginal());
    };
    let domain = w.domain();
    let shape = domain.shape();
    // The residual sets the workload touches, with their multiplicities.
    let spectrum = residual_spectrum(domain, &marginals)?;
    dp_core::interrupt::check()?;
    let residual_sets: Vec<AttrSet> = spectrum.iter().map(|e| e.set.clone()).collect();
    let c = Coefficients::new(&shape, &marginals, &residual_sets)?;
    let solution = solve(&c, options.gap_tolerance, budget);
    let ln_n: Vec<f64> = shape.iter().map(|&n| (n as f64).ln()).collect();
    let q: HashMap<usize, Arc<dp_linalg::Mat<f64>>> = residual_sets
        .iter()
        .fold(AttrSet::EMPTY, |a, t| a.union(t))
        .members()
        .map(|i| (i, Arc::new(helmert(shape[i]))))
        .collect();
    // Term T: c_T ⊗_{i∈T} Qᵢ ⊗_{i∉T} 1ᵀ has Gram c_T² Π_{i∉T} nᵢ P_T, so
    // μ_T = ν_T N/mult_T needs c_T² = ν_T Π_{i∈T} nᵢ / mult_T; its columns
    // have squared norm ν_T, so Δ₂² = Σν = 1.
    let terms: Vec<KronTerm> = spectrum
        .iter()
        .zip(&solution.nu)
        .map(|(e, &nu)| {
            let inside: f64 = e.set.members().map(|i| ln_n[i]).sum();
            KronTerm {
                weight: (0.5 * (nu.ln() + inside - e.multiplicity.ln())).exp(),
                factors: e.set.members().map(|i| (i, q[&i].clone())).collect(),
            }
        })
        .collect();
    let sensitivity = solution.nu.iter().sum::<f64>().sqrt();
    // N mult_T/μ_T = mult_T²/ν_T (marginal_group_errors' scaled inverse).
    let scaled_inverse: HashMap<AttrSet, f64> = spectrum
        .iter()
        .zip(&solution.nu)
        .map(|(e, &nu)| (e.set.clone(), e.multiplicity * e.multiplicity / nu))
        .collect();
    let groups = marginal_group_errors(w, &scaled_inverse, 2.0 * sensitivity.ln());
    if !(solution.upper.is_finite() && solution.lower.is_finite()) {
        return Err(overflow("the max-variance objective"));
    }
    Ok(StructuredPlan {
        privacy: PrivacyModel::Approx,
        method: "residual-max-variance".into(),
        objective_kind: super::PlanObjective::MaxVariance,
        strategy: StructuredStrategy { shape, terms },
        sensitivity,
        objective: solution.upper,
        groups,
        certificate: certificate(solution.upper, solution.lower),
        rounds: solution.iterations,
        termination: solution.termination,
        seconds: 0.0,
    })
}

/// The optimum of every 0..=k-way marginal on `d` attributes of `n` values
/// by the symmetry reduction: the optimal λ is uniform within each level
/// (marginal size), so the dual has k + 1 variables, `b_j` for a residual
/// set of size j is `Σ_{m≥j} l_m C(d−j, m−j) a_{m,j}`, `a_{m,j} =
/// ((n−1)^j/n^m)²`, and `g = (Σ_j C(d,j) √b_j)²`. Solved by the same
/// multiplicative steps on k + 1 numbers, where rounding is negligible.
/// An independent check of [`max_variance_marginal_plan`] on the
/// symmetric workloads (tests and the ResidualPlanner benchmark), which
/// share nothing with it but the formula.
pub fn symmetric_all_k_way_optimum(d: usize, n: usize, k: usize) -> Result<f64> {
    if k > d || n < 2 {
        return Err(DpError::InvalidParameter {
            name: "workload",
            reason: format!("all 0..={k}-way marginals on {d} attributes of {n} values"),
        });
    }
    let choose = |a: usize, b: usize| -> f64 {
        (0..b).fold(1.0, |acc, i| acc * (a - i) as f64 / (i + 1) as f64)
    };
    let a =
        |m: usize, j: usize| ((n as f64 - 1.0).powi(j as i32) / (n as f64).powi(m as i32)).powi(2);
    let count: Vec<f64> = (0..=k).map(|m| choose(d, m)).collect();
    if count.iter().any(|c| !c.is_finite()) {
        return Err(overflow("the symmetry-reduced max-variance optimum"));
    }
    let mut l: Vec<f64> = vec![1.0 / count.iter().sum::<f64>(); k + 1];
    let mut g = 0.0;
    for _ in 0..200_000 {
        let b: Vec<f64> = (0..=k)
            .map(|j| (j..=k).map(|m| l[m] * choose(d - j, m - j) * a(m, j)).sum())
            .collect();
        let s: f64 = (0..=k).map(|j| count[j] * b[j].sqrt()).sum();
        g = s * s;
        let nu: Vec<f64> = b.iter().map(|x| x.sqrt() / s).collect();
        let v: Vec<f64> = (0..=k)
            .map(|m| (0..=m).map(|j| choose(m, j) * a(m, j) / nu[j]).sum())
            .collect();
        l = (0..=k).map(|m| l[m] * (v[m] / g).powi(2)).collect();
        let z: f64 = (0..=k).map(|m| count[m] * l[m]).sum();
        l.iter_mut().for_each(|x| *x /= z);
    }
    if !(g.is_finite() && g > 0.0) {
        return Err(overflow("the symmetry-reduced max-variance optimum"));
    }
    Ok(g)
}

/// The refusal for workloads that are not unions of marginals.
pub(crate) fn not_marginal() -> DpError {
    DpError::InvalidParameter {
        name: "objective",
        reason: "max_variance is supported for marginal workloads only (every query group \
                 a marginal: identity or total on each attribute)"
            .into(),
    }
}

#[cfg(test)]
#[path = "max_variance_tests.rs"]
mod tests;
