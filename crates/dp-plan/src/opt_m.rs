//! OPT_M: HDMM's marginals template for ε-DP (McKenna et al. VLDB 2018,
//! §6.3), evaluated in the residual basis of [`dp_workloads::marginals`].
//!
//! The strategy is a weighted union of marginals `A(θ) = [θ_S M_S]_{S∈F}`,
//! `θ ≥ 0`, over a family F of attribute sets (`M_S`: identity on S, `1ᵀ`
//! elsewhere). Every column of `M_S` holds exactly one 1, so
//!
//! `Δ₁(A) = Σ_S θ_S`.
//!
//! `M_SᵀM_S = Π_{i∉S} nᵢ Σ_{T⊆S} P_T` with the orthogonal residual
//! projectors `P_T` (rank `mult_T = Π_{i∈T}(nᵢ−1)`), so both Grams are
//! diagonal in that basis: `AᵀA = Σ_T μ_T P_T`, `WᵀW = Σ_T λ_T P_T` with
//!
//! `μ_T = Σ_{S∈F, S⊇T} θ_S² Π_{i∉S} nᵢ`, `λ_T = Σ_{S∈W, S⊇T} w_S² Π_{i∉S} nᵢ`,
//!
//! and the objective and its gradient are closed forms over subsets:
//!
//! `l1_obj(θ) = (Σθ)² E`, `E = Σ_T mult_T λ_T / μ_T` (∞ when some
//! `μ_T = 0 < λ_T`: A does not support W),
//!
//! `∂l1_obj/∂θ_S = 2(Σθ) E − 2(Σθ)² θ_S Π_{i∉S} nᵢ Σ_{T⊆S} mult_T λ_T/μ_T²`.
//!
//! μ is a superset sum over F and the gradient's inner sum a subset sum;
//! on a family closed under subsets both are zeta transforms along its
//! Hasse edges, `O(Σ_{S∈F} |S|)` per evaluation (HDMM solves a triangular
//! system in its marginals algebra of dimension `2^d` instead).
//!
//! F is HDMM's: every subset of the attributes the workload uses, while
//! they are at most [`FULL_FAMILY_MAX_ATTRIBUTES`] (a marginal that also
//! covers an unused attribute j is dominated by the one without j: the same
//! sensitivity and `nⱼ` times the Gram on every subspace the workload
//! touches). Past that, F is the down-set of the workload's marginals
//! (every subset of one of them), a restriction of the template that keeps
//! 100-attribute workloads tractable. The objective is invariant to
//! scaling θ, so `ln l1_obj` is minimized over the simplex `θ ≥ 0, Σθ = 1`
//! (`Δ₁ = 1`) by the spectral projected gradient method ([`dp_opt::solvers::spg`];
//! HDMM uses L-BFGS-B with bounds: a parametrization `θ = φ²` would stop
//! at `φ_S = 0` even where increasing `θ_S` lowers the objective, and a
//! box lets scale-free steps grow without bound) from several starts
//! (uniform, the workload's marginals, the maximal sets, HDMM's random
//! start), then by support moves: the objective is not convex, and
//! restarting from the best point with one unused marginal added reaches
//! basins no start does (measured on random weighted census marginals,
//! where HDMM's single random start otherwise did better).

use std::collections::HashMap;
use std::sync::Arc;

use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_workloads::domain::StructuredError;
use dp_workloads::structured::{AttrSet, StructuredWorkload};

use super::marginal::marginal_group_errors;
use super::{KronTerm, StructuredPlan, StructuredStrategy, overflow};
use dp_opt::{PrivacyModel, Termination};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use dp_opt::optimizers::lrm::l1_ball::project_l1_ball;
use dp_opt::solvers::engine::Budget;
use dp_opt::solvers::spg::{self, SpgOptions};

/// Largest number of used attributes for which F is every subset of them
/// (2¹⁶ marginals).
pub const FULL_FAMILY_MAX_ATTRIBUTES: usize = 16;

/// Most marginals in the family F.
pub const MAX_FAMILY_SETS: usize = 1 << 22;

/// Options of [`opt_marginals`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptMOptions {
    /// The SPG settings (on `ln l1_obj` over `θ ≥ 0`).
    pub spg: SpgOptions,
    /// Weights below this fraction of the largest are dropped from the
    /// returned strategy when that does not raise the objective.
    pub prune_below: f64,
    /// F is every subset of the used attributes while they are at most
    /// this many, the workload's down-set otherwise.
    pub full_family_max_attributes: usize,
    /// Random starts besides the uniform and the maximal-sets ones.
    pub random_starts: usize,
    /// Seed of the random starts.
    pub seed: u64,
    /// Rounds of support moves after the starts ([`opt_marginals`]): 0
    /// keeps the best start's local minimum.
    pub support_rounds: usize,
    /// Marginals outside the support tried per round, those whose weight
    /// the objective penalizes least first.
    pub support_candidates: usize,
}

impl Default for OptMOptions {
    fn default() -> Self {
        Self {
            spg: SpgOptions {
                budget: Budget::iterations(5000),
                tolerance: 1e-9,
                stall_tolerance: 1e-12,
                ..SpgOptions::default()
            },
            prune_below: 1e-12,
            full_family_max_attributes: FULL_FAMILY_MAX_ATTRIBUTES,
            random_starts: 8,
            seed: 0,
            support_rounds: 4,
            support_candidates: 16,
        }
    }
}

/// The family F with what the objective needs, in units of `N = Π nᵢ`.
pub struct Family {
    /// The attribute sets, ordered by size then mask.
    pub sets: Vec<AttrSet>,
    /// Per attribute, the Hasse edges `(S, S∖{i})` for every `S ∋ i` in F.
    edges: Vec<Vec<(u32, u32)>>,
    /// `1/Π_{i∈S} nᵢ = Π_{i∉S} nᵢ / N`.
    inv_size: Vec<f64>,
    /// `mult_T`.
    mult: Vec<f64>,
    /// `mult_T λ_T / N`.
    a: Vec<f64>,
}

impl Family {
    /// The family of the module doc for marginal weights `(S, w_S²)`:
    /// every subset of the used attributes while they are at most
    /// `full_max`, the down-set of the workload's marginals otherwise.
    pub fn new(shape: &[usize], weights: &[(AttrSet, f64)], full_max: usize) -> Result<Self> {
        let used = weights
            .iter()
            .fold(AttrSet::EMPTY, |acc, (s, _)| acc.union(s));
        let attrs: Vec<usize> = used.members().collect();
        let mut index: HashMap<AttrSet, u32> = HashMap::new();
        let mut sets: Vec<AttrSet> = Vec::new();
        let mut add = |s: AttrSet, sets: &mut Vec<AttrSet>| -> Result<bool> {
            if index.contains_key(&s) {
                return Ok(false);
            }
            if sets.len() >= MAX_FAMILY_SETS {
                return Err(DpError::from(StructuredError::TooLarge {
                    what: "marginals in the OPT_M family",
                    cells: MAX_FAMILY_SETS as f64,
                    action: "optimize",
                }));
            }
            index.insert(s.clone(), 0);
            sets.push(s);
            Ok(true)
        };
        if attrs.len() <= full_max.min(FULL_FAMILY_MAX_ATTRIBUTES) {
            for t in used.subsets() {
                add(t, &mut sets)?;
            }
        } else {
            let mut queue: Vec<AttrSet> = Vec::new();
            for (s, _) in weights {
                if add(s.clone(), &mut sets)? {
                    queue.push(s.clone());
                }
            }
            while let Some(s) = queue.pop() {
                for i in s.members() {
                    let child = s.without(i);
                    if add(child.clone(), &mut sets)? {
                        queue.push(child);
                    }
                }
            }
        }
        sets.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
        let index: HashMap<AttrSet, u32> = sets
            .iter()
            .enumerate()
            .map(|(k, s)| (s.clone(), k as u32))
            .collect();
        let edges: Vec<Vec<(u32, u32)>> = attrs
            .iter()
            .map(|&i| {
                sets.iter()
                    .enumerate()
                    .filter(|(_, s)| s.contains(i))
                    .map(|(k, s)| (k as u32, index[&s.without(i)]))
                    .collect()
            })
            .collect();
        let ln_n: Vec<f64> = shape.iter().map(|&n| (n as f64).ln()).collect();
        let inv_size: Vec<f64> = sets
            .iter()
            .map(|s| (-s.members().map(|i| ln_n[i]).sum::<f64>()).exp())
            .collect();
        let mult: Vec<f64> = sets
            .iter()
            .map(|s| s.members().map(|i| (shape[i] - 1) as f64).product())
            .collect();
        let mut lambda = vec![0.0; sets.len()];
        for (s, w2) in weights {
            let k = index[s] as usize;
            lambda[k] += w2 * inv_size[k];
        }
        let mut family = Self {
            sets,
            edges,
            inv_size,
            a: Vec::new(),
            mult,
        };
        family.superset_sums(&mut lambda);
        family.a = lambda
            .iter()
            .zip(&family.mult)
            .map(|(l, m)| l * m)
            .collect();
        if family.a.iter().any(|v| !v.is_finite()) {
            return Err(overflow("a workload Gram eigenvalue"));
        }
        Ok(family)
    }

    /// `x_T ← Σ_{S∈F, S⊇T} x_S` (Yates' zeta transform, one attribute at
    /// a time; on a down-set a superset missing from F has no superset in
    /// F, so its term is zero).
    fn superset_sums(&self, x: &mut [f64]) {
        for edges in &self.edges {
            for &(with, without) in edges {
                x[without as usize] += x[with as usize];
            }
        }
    }

    /// `x_S ← Σ_{T⊆S} x_T`.
    fn subset_sums(&self, x: &mut [f64]) {
        for edges in &self.edges {
            for &(with, without) in edges {
                x[with as usize] += x[without as usize];
            }
        }
    }

    /// `μ_T / N` for weights θ.
    fn strategy_eigenvalues(&self, theta: &[f64]) -> Vec<f64> {
        let mut mu: Vec<f64> = theta
            .iter()
            .zip(&self.inv_size)
            .map(|(t, c)| t * t * c)
            .collect();
        self.superset_sums(&mut mu);
        mu
    }

    /// `ln l1_obj(θ)` and, if `grad` is given, its gradient in θ; `+∞`
    /// when θ does not support the workload or has no positive weight.
    pub fn ln_objective(&self, theta: &[f64], grad: Option<&mut [f64]>) -> f64 {
        let s: f64 = theta.iter().sum();
        let mu = self.strategy_eigenvalues(theta);
        let mut e = 0.0;
        let mut u = vec![0.0; mu.len()];
        for (k, (&a, &m)) in self.a.iter().zip(&mu).enumerate() {
            if a > 0.0 {
                if m.is_nan() || m <= 0.0 {
                    return f64::INFINITY;
                }
                e += a / m;
                u[k] = a / (m * m);
            }
        }
        let value = 2.0 * s.ln() + e.ln();
        if !(value.is_finite() && s > 0.0) {
            return f64::INFINITY;
        }
        if let Some(g) = grad {
            self.subset_sums(&mut u);
            for (k, gk) in g.iter_mut().enumerate() {
                *gk = 2.0 / s - 2.0 * theta[k] * self.inv_size[k] * u[k] / e;
            }
        }
        value
    }
}

/// Euclidean projection onto the simplex `{θ ≥ 0, Σθ = 1}`: it is
/// `max(v − τ, 0)` for the τ that makes the sum 1, unchanged by adding a
/// constant to every entry, so after shifting every entry to ≥ 1 it is
/// the projection onto the unit L1 ball.
fn project_simplex(v: &mut [f64]) {
    let low = v.iter().copied().fold(f64::INFINITY, f64::min);
    v.iter_mut().for_each(|x| *x += 1.0 - low);
    project_l1_ball(v, 1.0);
}

/// The starting points: uniform weights on F; equal weights on the
/// workload's own marginals; every weight on the maximal sets of F (for
/// the full family, the single marginal on every used attribute: the
/// identity on them); `options.random_starts` draws of HDMM's start
/// (uniform on [0, 1), ChaCha8 from `options.seed`). All on the simplex.
/// The objective is not convex in θ: the starts reach different local
/// minima, and the best is kept.
fn starts(family: &Family, weights: &[(AttrSet, f64)], options: &OptMOptions) -> Vec<Vec<f64>> {
    let size = family.sets.len();
    let mut out = vec![vec![1.0 / size as f64; size]];
    out.push(
        family
            .sets
            .iter()
            .map(|s| f64::from(u8::from(weights.iter().any(|(w, _)| w == s))))
            .collect(),
    );
    // The maximal sets: taken largest first (the sets are ordered by size),
    // a set is maximal unless a maximal set found before contains it (any
    // strict superset lies in one). Linear in the family for every down-set
    // with few maximal sets, where comparing all pairs was quadratic.
    let mut tops: Vec<AttrSet> = Vec::new();
    let mut maximal = vec![0.0; size];
    for (i, s) in family.sets.iter().enumerate().rev() {
        if !tops.iter().any(|t| s.is_subset(t)) {
            tops.push(s.clone());
            maximal[i] = 1.0;
        }
    }
    out.push(maximal);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    for _ in 0..options.random_starts {
        out.push((0..size).map(|_| rng.random::<f64>()).collect());
    }
    for v in &mut out {
        let s: f64 = v.iter().sum();
        v.iter_mut().for_each(|x| *x /= s);
    }
    out
}

/// OPT_M on a marginal workload with weights `(S, w_S²)` (see the module
/// doc): the weighted union of marginals minimizing `l1_obj`, normalized to
/// `Δ₁ = Σθ = 1`.
pub fn opt_marginals(
    w: &StructuredWorkload,
    weights: &[(AttrSet, f64)],
    options: &OptMOptions,
) -> Result<StructuredPlan> {
    if !(0.0..1.0).contains(&options.prune_below) {
        return Err(DpError::InvalidParameter {
            name: "prune_below",
            reason: format!("{} is not in [0, 1)", options.prune_below),
        });
    }
    let shape = w.domain().shape();
    let family = Family::new(&shape, weights, options.full_family_max_attributes)?;
    let mut best: Option<(f64, Vec<f64>, usize, Termination)> = None;
    for start in starts(&family, weights, options) {
        let eval = |theta: &[f64], g: &mut [f64]| -> f64 { family.ln_objective(theta, Some(g)) };
        let run = spg::minimize(eval, project_simplex, start, &options.spg, &mut ());
        let value = run.output.value;
        if value.is_finite() && best.as_ref().is_none_or(|b| value < b.0) {
            best = Some((value, run.output.x, run.iterations, run.termination));
        }
    }
    let Some((mut value, mut theta, mut iterations, mut termination)) = best else {
        return Err(DpError::NotConverged {
            solver: "OPT_M",
            reason: "no start gave a finite objective".into(),
        });
    };
    // Support moves: the objective is not convex and a local minimum is a
    // choice of marginals; from the best one, each round restarts from it
    // with one unused marginal given a share of the weight, and keeps the
    // best restart that lowers the objective (HDMM's single L-BFGS-B run
    // from a random point can land in a basin no start above reaches).
    for _ in 0..options.support_rounds {
        let mut g = vec![0.0; theta.len()];
        family.ln_objective(&theta, Some(&mut g));
        let top = theta.iter().copied().fold(0.0, f64::max);
        let support = theta.iter().filter(|&&t| t > 1e-9 * top).count().max(1);
        let mut unused: Vec<usize> = (0..theta.len())
            .filter(|&k| theta[k] <= 1e-9 * top && g[k].is_finite())
            .collect();
        unused.sort_by(|&a, &b| g[a].total_cmp(&g[b]));
        unused.truncate(options.support_candidates);
        let mut improved: Option<(f64, Vec<f64>, usize, Termination)> = None;
        for k in unused {
            let mut start = theta.clone();
            start[k] += 1.0 / support as f64;
            let eval = |t: &[f64], g: &mut [f64]| -> f64 { family.ln_objective(t, Some(g)) };
            let run = spg::minimize(eval, project_simplex, start, &options.spg, &mut ());
            let v = run.output.value;
            let best_so_far = improved.as_ref().map_or(value, |b| b.0);
            if v.is_finite() && v < best_so_far - 1e-12 * best_so_far.abs().max(1.0) {
                improved = Some((v, run.output.x, run.iterations, run.termination));
            }
        }
        match improved {
            Some(b) => (value, theta, iterations, termination) = b,
            None => break,
        }
    }
    let sum: f64 = theta.iter().sum();
    theta.iter_mut().for_each(|t| *t /= sum);
    let mut ln_obj = family.ln_objective(&theta, None);
    let top = theta.iter().copied().fold(0.0, f64::max);
    let pruned: Vec<f64> = theta
        .iter()
        .map(|&t| {
            if t < options.prune_below * top {
                0.0
            } else {
                t
            }
        })
        .collect();
    let sum: f64 = pruned.iter().sum();
    let pruned: Vec<f64> = pruned.iter().map(|t| t / sum).collect();
    let ln_pruned = family.ln_objective(&pruned, None);
    if ln_pruned <= ln_obj {
        (theta, ln_obj) = (pruned, ln_pruned);
    }
    let objective = ln_obj.exp();
    if !objective.is_finite() {
        return Err(overflow("the OPT_M objective"));
    }
    finish(w, &family, &theta, objective, (iterations, termination))
}

fn finish(
    w: &StructuredWorkload,
    family: &Family,
    theta: &[f64],
    objective: f64,
    (iterations, termination): (usize, Termination),
) -> Result<StructuredPlan> {
    let shape = w.domain().shape();
    let mu = family.strategy_eigenvalues(theta);
    // N mult_T/μ_T (`mu` holds μ_T/N).
    let scaled_inverse: HashMap<AttrSet, f64> = family
        .sets
        .iter()
        .zip(mu.iter().zip(&family.mult))
        .filter(|(_, (m, mult))| **m > 0.0 && **mult > 0.0)
        .map(|(t, (m, mult))| (t.clone(), mult / m))
        .collect();
    let sensitivity: f64 = theta.iter().sum();
    let groups = marginal_group_errors(w, &scaled_inverse, 2.0 * sensitivity.ln());
    // Identities only for the attributes a kept marginal lists (a dense
    // n×n matrix per attribute).
    let used = family
        .sets
        .iter()
        .zip(theta)
        .filter(|(_, t)| **t > 0.0)
        .fold(AttrSet::EMPTY, |acc, (s, _)| acc.union(s));
    let identities: HashMap<usize, Arc<Mat<f64>>> = used
        .members()
        .map(|i| (i, Arc::new(Mat::identity(shape[i], shape[i]))))
        .collect();
    let terms = family
        .sets
        .iter()
        .zip(theta)
        .filter(|(_, t)| **t > 0.0)
        .map(|(s, &t)| KronTerm {
            weight: t,
            factors: s.members().map(|i| (i, identities[&i].clone())).collect(),
        })
        .collect();
    Ok(StructuredPlan {
        privacy: PrivacyModel::Pure,
        method: "opt-m".into(),
        objective_kind: super::PlanObjective::TotalVariance,
        strategy: StructuredStrategy { shape, terms },
        sensitivity,
        objective,
        groups,
        certificate: None,
        rounds: iterations,
        termination,
        seconds: 0.0,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    /// The maximal-sets start marks exactly the sets no other set of the
    /// family contains (checked against all pairs), for the full family and
    /// for down-sets of overlapping marginals.
    #[test]
    fn the_maximal_start_marks_the_sets_no_other_contains() {
        let cases: [(&[u128], usize); 3] = [
            (&[0b0111, 0b1100, 0b1_0001], 0),
            (&[0b0111, 0b1100, 0b1_0001], 10),
            (&[0b11, 0b110, 0b1, 0b1_1000, 0b1_0000], 0),
        ];
        for (marginals, full_max) in cases {
            let weights: Vec<(AttrSet, f64)> = marginals
                .iter()
                .map(|&s| (AttrSet::from_bits(s), 1.0))
                .collect();
            let family = Family::new(&[2, 3, 2, 4, 2], &weights, full_max).unwrap();
            let starts = starts(&family, &weights, &OptMOptions::default());
            let marked: Vec<bool> = starts[2].iter().map(|&v| v > 0.0).collect();
            let brute: Vec<bool> = family
                .sets
                .iter()
                .map(|s| !family.sets.iter().any(|t| t != s && s.is_subset(t)))
                .collect();
            assert_eq!(marked, brute, "{marginals:?} full_max {full_max}");
            assert!(brute.iter().any(|&m| m));
        }
    }
}
