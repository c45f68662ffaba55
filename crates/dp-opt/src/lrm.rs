//! The low-rank mechanism (Yuan et al., "Low-rank mechanism: optimizing
//! batch queries under differential privacy", VLDB 2012) for ε-DP, and
//! its (ε,δ)-DP form, program (4) of the COA paper (Yuan et al., KDD 2016):
//! the same program with every column of L in the unit **L2** ball
//! (`‖L‖_{2,∞} ≤ 1`, the L2 sensitivity that Gaussian noise is calibrated
//! to). [`StrategyOptimizer::optimize`] picks the column norm from the
//! problem's privacy model ([`ColumnNorm::for_privacy`]); everything below
//! is written for L1 and holds for L2 with the radial projection.
//!
//! Formulation (8): `min tr(BᵀB)` s.t. `‖W − BL‖_F ≤ γ` and every column of
//! `L` in the unit L1 ball, solved by the inexact augmented Lagrangian of
//! Algorithm 1 (closed-form B update (9), multiplier update
//! `π ← π + β(W − BL)`, β growth) with Nesterov's accelerated projected
//! gradient (Algorithm 2, backtracking on the Lipschitz constant ω) for
//! the L subproblem (10), whose projection (11) is the exact L1-ball
//! projection of each column ([`project_l1_ball`]).
//!
//! The release of Eq. (6) is `B (L x + Lap(Δ₁(L)/ε)^r)` with
//! `Δ₁(L) ≤ 1`, expected total squared error `2 tr(BᵀB) Δ₁(L)² / ε²`
//! (Theorem 3 adds `γ Σ xᵢ²` when `W ≠ BL`). The strategy returned behind
//! [`StrategyOptimizer`] is `L` answered by least squares, whose error
//! `l1_obj(L) = tr(WᵀW (LᵀL)⁺) Δ₁(L)²` is never above `tr(BᵀB) Δ₁(L)²`
//! when `W = BL` (Gauss–Markov).
//!
//! **Three solvers** ([`LrmSolver`]). The reference alternation (B by
//! (9), L by Algorithm 2, β ×5 every 8 outer steps) is kept as
//! [`LrmSolver::Alternating`]; measured here it lets L lose rank on range
//! workloads (WRange n = 256: residual 45 of ‖W‖_F ≈ 149 after 100 outer
//! steps and 119 s), the failure the COA paper describes in its §2.
//! [`LrmSolver::Reduced`] eliminates B exactly inside each
//! augmented-Lagrangian subproblem and solves for L by spectral projected
//! gradient over the same L1-ball constraint; it converges but slowly and
//! to poor points (WRange 256×256: 15,328 in 30 s, identity 21,859). The
//! default [`LrmSolver::Penalty`] solves formulation (7) itself with B
//! eliminated: `min tr(WᵀW (LᵀL)⁻¹)` over L with columns in the unit L1
//! ball ([`barrier_objective`]), by SPG from the identity plus random rows
//! when the workload is not low-rank (r ≥ n), and by a quadratic-penalty
//! path from the SVD start when it is (r < n/2). Measured (release, 2
//! cores, `l1_obj`; p-Identity with its defaults for comparison):
//!
//! | workload | identity | Penalty | time | p-Identity |
//! |---|---|---|---|---|
//! | WRange 128×128 | 5,555 | 2,909 | 1.1 s | 2,795 |
//! | WRange 256×256 | 21,859 | 8,605 | 5.5 s | 7,965 |
//! | WRange 64×256 (r = 77) | 5,231 | 1,698 | 5.1 s | 1,733 |
//! | WRange 1024×1024 | 361,924 | 67,470 | 158 s | 62,124 (57 s) |
//!
//! It is a local method on a non-convex problem. On WRelated with
//! s = 0.2·min(m, n) no ε-DP strategy it or p-Identity finds beats the
//! identity (the SVD strategy costs κ²‖W‖²_F with κ ≈ s·(2/(πn))^½ the
//! largest column L1 norm of V_sᵀ, above 1 unless n > 2s²/π), so the identity
//! is returned there (flagged in the report). [`crate::EpsilonDefault`]
//! takes the best of p-Identity and LRM.
//!
//! LRM only sees W through `WᵀW`: every W with the same Gram matrix is
//! `Q C` for the Gram root C and an orthonormal Q, and `(QB, L)` solves the
//! problem for `QC` exactly when `(B, L)` solves it for C, with the same
//! `tr(BᵀB)` and residual. So the decomposition runs on the `rank × n`
//! root, whatever m is.

use std::time::Instant;

use dp_core::{DpError, Result};
use dp_linalg::gram_root_and_spectrum;
use dp_linalg::{Cholesky, Mat, MatMut, MatRef, Par, SymmetricEigen};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::dense::{append_rows, gemm, inner, row_space_complement};
use crate::spg::{self, SpgOptions};
use crate::{
    Observer, OptimizeReport, Optimized, PrivacyModel, Problem, StrategyOptimizer,
    TerminationReason,
};

/// Euclidean projection of `v` onto the L1 ball of radius `radius`
/// (Duchi, Shalev-Shwartz, Singer, Chandra 2008, Figure 1): sort `|v|`
/// decreasingly, find `ρ = max{j : uⱼ − (Σᵢ≤ⱼ uᵢ − z)/j > 0}`, threshold
/// `θ = (Σᵢ≤ρ uᵢ − z)/ρ`, and shrink `vᵢ ← sign(vᵢ) max(|vᵢ| − θ, 0)`.
/// O(r log r). Points inside the ball are returned unchanged.
///
/// Only the entries that can be in the support are sorted: for any set S
/// holding the support, `θ ≥ (Σ_S |vᵢ| − z)/|S|` (the shrunk entries of S
/// sum to at least z at that level), so entries at or below that bound
/// are dropped, repeatedly (Michelot's filter, 1986), before the sort.
/// The result is the same; on the dense-then-sparse columns of LRM's L
/// the sort shrinks to a few entries.
pub fn project_l1_ball(v: &mut [f64], radius: f64) {
    let norm: f64 = v.iter().map(|x| x.abs()).sum();
    if norm <= radius {
        return;
    }
    if radius <= 0.0 {
        v.fill(0.0);
        return;
    }
    let mut u: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    let mut sum = norm;
    loop {
        let bound = (sum - radius) / u.len() as f64;
        let before = u.len();
        u.retain(|&x| x > bound);
        sum = u.iter().sum();
        if u.len() == before {
            break;
        }
    }
    u.sort_unstable_by(|a, b| b.total_cmp(a));
    let mut cumulative = 0.0;
    let mut theta = 0.0;
    for (j, &uj) in u.iter().enumerate() {
        cumulative += uj;
        let t = (cumulative - radius) / (j + 1) as f64;
        if uj - t > 0.0 {
            theta = t;
        }
    }
    for x in v.iter_mut() {
        *x = x.signum() * (x.abs() - theta).max(0.0);
    }
}

/// The column constraint `‖L‖_{p,∞} ≤ 1` of LRM's program: p = 1 for
/// ε-DP (formulation (7) of the LRM paper, `Δ₁(L) ≤ 1`), p = 2 for
/// (ε,δ)-DP (program (4) of the COA paper, `Δ₂(L) ≤ 1`, whose Gaussian
/// noise is calibrated to the L2 sensitivity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnNorm {
    /// Every column in the unit L1 ball.
    L1,
    /// Every column in the unit L2 ball.
    L2,
}

impl ColumnNorm {
    /// The norm whose sensitivity calibrates `model`'s noise.
    pub fn for_privacy(model: PrivacyModel) -> Self {
        match model {
            PrivacyModel::Pure => Self::L1,
            PrivacyModel::Approx => Self::L2,
        }
    }

    /// `‖v‖_p`.
    pub fn norm(self, v: impl IntoIterator<Item = f64>) -> f64 {
        match self {
            Self::L1 => v.into_iter().map(f64::abs).sum(),
            Self::L2 => v.into_iter().map(|x| x * x).sum::<f64>().sqrt(),
        }
    }

    /// Euclidean projection onto the unit ball: (11) for L1
    /// ([`project_l1_ball`]), radial scaling for L2.
    pub fn project(self, v: &mut [f64]) {
        match self {
            Self::L1 => project_l1_ball(v, 1.0),
            Self::L2 => {
                let norm = Self::L2.norm(v.iter().copied());
                if norm > 1.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
            }
        }
    }

    /// The largest column norm of `l` (its sensitivity).
    fn max_column(self, l: MatRef<'_, f64>) -> f64 {
        (0..l.ncols())
            .map(|j| self.norm(l.col(j).iter().copied()))
            .fold(0.0, f64::max)
    }
}

fn project_columns(l: &mut Mat<f64>, norm: ColumnNorm) {
    for j in 0..l.ncols() {
        norm.project(l.col_as_slice_mut(j));
    }
}

/// Options of LRM. Defaults are the authors' reference implementation's.
#[derive(Debug, Clone, Copy)]
pub struct LrmOptions {
    /// Rank r of the decomposition; `None` = ⌈rank_factor · rank(W)⌉ (the
    /// paper's default), except for [`LrmSolver::Penalty`] when that is at
    /// least n/2: then r = n + ⌈n/16⌉ (HDMM's p beyond the n rows full
    /// column rank needs) and the barrier form runs. Measured, WRange
    /// 128×256 (rank 128): r = 154 by the penalty path gives 4,398 in
    /// 19.6 s, r = 308 by the barrier form 4,094 in 13.3 s; WRange 64×256
    /// (rank 64): r = 77 gives 1,695, r = 308 1,791; WRange 512×512:
    /// r = 544 gives 24,258 in 34 s, r = 615 24,644 in 36 s.
    pub rank: Option<usize>,
    /// Factor on rank(W) for the default r (1.2).
    pub rank_factor: f64,
    /// Relaxation γ of Formula (8): the paper's Algorithm 1
    /// ([`LrmSolver::Alternating`]) stops once `‖W − BL‖_F ≤ γ` (or the
    /// residual tolerance, whichever is larger). The other solvers do not
    /// use it.
    pub gamma: f64,
    /// Initial penalty β₀. The paper starts at 1; measured here, β₀ = 1
    /// lets the early, weakly penalized steps collapse L's rank (the
    /// 3-query example then stalls at residual 0.71 with β = 1e5), while
    /// β₀ = 10 reaches l1_obj 19.01 < 19.5. `β` is scale-free (W → cW
    /// scales both terms of the Lagrangian by c²).
    pub beta_initial: f64,
    /// B/L alternations per outer step (5).
    pub inner_iterations: usize,
    /// β growth factor (5) …
    pub beta_growth: f64,
    /// … applied every this many outer steps (8) …
    pub beta_every: usize,
    /// … up to this value (1e5).
    pub beta_max: f64,
    /// Residual `‖W − BL‖_F` ending the run (0.01), with W scaled to unit
    /// largest column norm.
    pub residual_tolerance: f64,
    /// Residual above which the run is flagged as failed (0.1), same scale.
    pub failure_residual: f64,
    /// Outer steps (100).
    pub max_outer: usize,
    /// Accelerated-gradient iterations per L update.
    pub apg_iterations: usize,
    /// How each augmented-Lagrangian subproblem is solved.
    pub solver: LrmSolver,
    /// [`LrmSolver::Penalty`] with `r < n`: penalty stages (η = λ·10^-k,
    /// k = 1 … stages).
    pub penalty_stages: usize,
    /// [`LrmSolver::Penalty`]: the SPG settings (per stage when `r < n`).
    /// The stall test (relative decrease below `stall_tolerance` over 40
    /// iterations) is what usually ends the run; it is reported.
    pub penalty_spg: SpgOptions,
    /// [`LrmSolver::Penalty`] with `r ≥ n`: seed of the random extra rows
    /// of the start (ChaCha8).
    pub seed: u64,
    /// [`LrmSolver::Reduced`]: initial penalty as a multiple of r (β₀ =
    /// `reduced_beta_per_rank · r`, default 10). At the SVD start `LLᵀ ≈ I/r`,
    /// so β = r weighs the ridge `I` and `βLLᵀ` of update (9) equally;
    /// measured, β₀ = r lets the first subproblem collapse L to 0 (a
    /// stationary point: B = 0, ∇φ = 0), while 10r and 100r keep L's rank
    /// (AllRange-like ranges, n = 64: l1_obj 1052 at 10r, 1217 at 100r;
    /// identity 1494).
    pub reduced_beta_per_rank: f64,
    /// [`LrmSolver::Reduced`]: outer (multiplier) steps.
    pub reduced_max_outer: usize,
    /// [`LrmSolver::Reduced`]: relative residual `‖W − BL‖_F / ‖W‖_F`
    /// ending the outer loop.
    pub reduced_residual_tolerance: f64,
    /// [`LrmSolver::Reduced`]: the SPG settings of each subproblem.
    pub spg: SpgOptions,
    /// [`LrmSolver::Reduced`] and [`LrmSolver::Penalty`]: wall-clock budget
    /// for the whole decomposition (the run is then flagged as not
    /// converged).
    pub max_seconds: Option<f64>,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

/// The subproblem solver of Algorithm 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LrmSolver {
    /// The reference implementation: `inner_iterations` alternations of
    /// the closed-form B update (9) and Algorithm 2 (accelerated projected
    /// gradient) for L, β ×`beta_growth` every `beta_every` outer steps.
    /// Measured here it lets L lose rank on range workloads (the failure
    /// mode the COA paper describes in §2) and stalls.
    Alternating,
    /// Exact minimization over B for each L (update (9) in closed form
    /// inside the objective): the subproblem becomes
    /// `φ(L) = min_B ½‖B‖² + β/2‖T − BL‖²`, `T = W + π/β`, whose gradient is
    /// `−β Bᵀ(T − BL)` at the optimal B (envelope theorem). It is minimized
    /// over the same feasible set (columns of L in the unit L1 ball, the
    /// exact projection (11)) by the nonmonotone spectral projected
    /// gradient ([`crate::spg`]); then the multiplier update
    /// `π ← π + β(W − BL)`, and β ×`beta_growth` when the residual did not
    /// fall by 4×.
    Reduced,
    /// Formulation (7) with B eliminated exactly and a quadratic-penalty
    /// path instead of multipliers. For L with full column rank the
    /// smallest B with `BL = W` is `W L⁺`, so (7) is
    /// `min f(L) = tr(WᵀW (LᵀL)⁻¹)` over columns of L in the unit L1 ball
    /// ([`barrier_objective`]); f is finite exactly where L has full
    /// column rank, a barrier that keeps every iterate supporting W.
    ///
    /// - `r ≥ n`: f itself is minimized by SPG with projection (11), from
    ///   the identity plus `r − n` rows of HDMM's random start (uniform,
    ///   scaled so that every column of the extra rows sums to 2 on
    ///   average), columns scaled to unit L1 norm. The identity alone is a
    ///   KKT point on range workloads (every column is a vertex of its L1
    ///   ball and `(WᵀW)ⱼⱼ ≥ (WᵀW)ᵢⱼ`), so the extra rows are what lets the
    ///   iteration leave it. r is not capped at n (the paper's Table 1
    ///   goes to 3.6·rank(W)).
    /// - `r < n`: LᵀL is singular and f is the limit η → 0 of
    ///   `f_η(L) = tr(WᵀW (LᵀL + ηI)⁻¹) = min_B ‖B‖² + ‖W − BL‖²/η`,
    ///   Algorithm 1's subproblem with π = 0 and β = 1/η. It is minimized
    ///   for `η = λ·10^-k`, k = 1 … `penalty_stages` (λ the largest
    ///   eigenvalue of L₀L₀ᵀ), each stage warm-started from the last, from
    ///   the SVD start; then the exact refit B = W L⁺.
    ///
    /// Measured (WRange, ε-DP `l1_obj`, identity = ‖W‖²_F): 256×256
    /// 8,605 vs identity 21,859 and [`LrmSolver::Reduced`]'s 15,328;
    /// 64×256 (r = 77 < n) 1,698 vs identity 5,231 and Reduced's 2,958.
    /// The default.
    Penalty,
}

impl Default for LrmOptions {
    fn default() -> Self {
        Self {
            rank: None,
            rank_factor: 1.2,
            gamma: 0.0,
            beta_initial: 10.0,
            inner_iterations: 5,
            beta_growth: 5.0,
            beta_every: 8,
            beta_max: 1e5,
            residual_tolerance: 0.01,
            failure_residual: 0.1,
            max_outer: 100,
            apg_iterations: 50,
            solver: LrmSolver::Penalty,
            penalty_stages: 6,
            penalty_spg: SpgOptions {
                max_iterations: 1000,
                tolerance: 1e-10,
                stall_tolerance: 1e-4,
                gradient_initial_step: true,
                ..SpgOptions::default()
            },
            seed: 0,
            reduced_beta_per_rank: 10.0,
            reduced_max_outer: 30,
            reduced_residual_tolerance: 1e-6,
            spg: SpgOptions {
                max_iterations: 300,
                tolerance: 1e-10,
                stall_tolerance: 1e-8,
                ..SpgOptions::default()
            },
            max_seconds: None,
            parallelism: Par::rayon(0),
        }
    }
}

/// LRM behind the optimizer trait (ε-DP: minimizes `l1_obj`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lrm {
    /// Options.
    pub options: LrmOptions,
}

/// A decomposition `W ≈ B L`.
#[derive(Debug, Clone)]
pub struct Decomposition {
    /// B (rank(W) × r in the root's coordinates).
    pub b: Mat<f64>,
    /// L (r × n), columns in the unit ball of the [`ColumnNorm`].
    pub l: Mat<f64>,
    /// `‖W − BL‖_F` in the workload's own scale.
    pub residual: f64,
    /// `tr(BᵀB)` in the workload's own scale.
    pub trace_btb: f64,
    /// Outer steps taken (SPG iterations for the barrier form of
    /// [`LrmSolver::Penalty`]).
    pub outer_steps: usize,
    /// Whether the residual ended below `failure_residual` (scaled W) and
    /// `‖B‖_F² ≤ ‖W‖_F²` (and, for the barrier form, SPG's own test held
    /// rather than its iteration or time limit).
    pub converged: bool,
    /// How the run ended, in words (the report's criterion).
    pub stop: String,
}

impl Lrm {
    fn check(&self) -> Result<()> {
        let o = &self.options;
        let bad = |name: &'static str, reason: &str| {
            Err(DpError::InvalidParameter {
                name,
                reason: reason.into(),
            })
        };
        if o.rank == Some(0) {
            return bad("rank", "must be at least 1");
        }
        if !(o.rank_factor.is_finite() && o.rank_factor >= 1.0) {
            return bad("rank_factor", "must be finite and >= 1");
        }
        if !(o.gamma.is_finite() && o.gamma >= 0.0) {
            return bad("gamma", "must be finite and >= 0");
        }
        if o.inner_iterations == 0
            || o.max_outer == 0
            || o.apg_iterations == 0
            || o.beta_every == 0
            || o.penalty_stages == 0
            || o.penalty_spg.max_iterations == 0
        {
            return bad("iteration limits", "must be at least 1");
        }
        if !(o.beta_growth > 1.0 && o.beta_initial > 0.0 && o.beta_max >= o.beta_initial) {
            return bad("beta_growth / beta_max", "need growth > 1 and max >= 1");
        }
        if !(o.residual_tolerance > 0.0 && o.failure_residual >= o.residual_tolerance) {
            return bad("residual tolerances", "need 0 < tolerance <= failure");
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !(positive(o.reduced_beta_per_rank) && positive(o.reduced_residual_tolerance))
            || o.max_seconds.is_some_and(|t| t.is_nan())
        {
            return bad(
                "reduced_beta_per_rank / reduced_residual_tolerance / max_seconds",
                "need a positive finite β factor, a positive tolerance and a number of seconds",
            );
        }
        Ok(())
    }

    /// Algorithm 1 on the Gram root of `gram`, with every column of L in
    /// the unit ball of `norm`.
    pub fn decompose(
        &self,
        gram: dp_linalg::MatRef<'_, f64>,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        self.check()?;
        let o = self.options;
        let par = o.parallelism;
        let n = gram.nrows();
        // Scale W to unit largest column norm (the tolerances' scale).
        let colmax = (0..n).map(|i| gram[(i, i)]).fold(0.0, f64::max).sqrt();
        if !(colmax.is_finite() && colmax > 0.0) {
            return Err(DpError::ZeroMatrix {
                what: "workload".into(),
            });
        }
        let g = Mat::from_fn(n, n, |i, j| gram[(i, j)] / (colmax * colmax));
        let (c, _) = gram_root_and_spectrum(g.as_ref())?;
        let rank_w = c.nrows().max(1);
        let scaled = |k: usize| ((o.rank_factor * k as f64).ceil() as usize).max(1);
        let mut r = o.rank.unwrap_or(scaled(rank_w));
        if o.solver == LrmSolver::Penalty {
            // Not low-rank enough for r < n to pay: the barrier form, with
            // HDMM's ⌈n/16⌉ rows beyond the n that full column rank needs.
            if o.rank.is_none() && 2 * r >= n {
                r = n + n.div_ceil(16);
            }
            if r >= n {
                return self.decompose_barrier(&c, r, colmax, norm, observer);
            }
        }
        // The SVD start has at most n rows.
        let r = r.min(n);
        // Start (reference implementation): W = UΣVᵀ, B = UΣ√r, L = Vᵀ/√r,
        // feasible since ‖Vᵀeⱼ‖₁ ≤ √r ‖Vᵀeⱼ‖₂ ≤ √r (L2 columns: L = Vᵀ,
        // ‖Vᵀeⱼ‖₂ ≤ 1). In root coordinates B = C V_r √r with V_r the top r
        // eigenvectors of WᵀW.
        let eig = SymmetricEigen::new(g.as_ref())?;
        let sqrt_r = (r as f64).sqrt();
        let vr = Mat::from_fn(n, r, |i, k| eig.vectors[(i, n - 1 - k)]);
        // The reduced solver divides by the largest column norm of V_rᵀ
        // itself (≤ √r for L1, ≤ 1 for L2): still feasible, and a smaller B.
        let scale = match (o.solver, norm) {
            (LrmSolver::Alternating, ColumnNorm::L1) => sqrt_r,
            (LrmSolver::Alternating, ColumnNorm::L2) => 1.0,
            _ => norm.max_column(vr.transpose()).max(f64::MIN_POSITIVE),
        };
        let mut l = Mat::from_fn(r, n, |k, j| vr[(j, k)] / scale);
        let mut b = gemm(c.as_ref(), vr.as_ref(), par) * dp_linalg::Scale(scale);
        match o.solver {
            LrmSolver::Reduced => {
                return self.decompose_reduced(&c, l, colmax, norm, observer, None);
            }
            // λ_max(L₀L₀ᵀ) = 1/scale² (orthonormal rows scaled).
            LrmSolver::Penalty => {
                let beta0 = 10.0 * scale * scale;
                return self.decompose_reduced(&c, l, colmax, norm, observer, Some(beta0));
            }
            LrmSolver::Alternating => {}
        }
        let mut pi = Mat::<f64>::zeros(c.nrows(), n);
        let mut beta = o.beta_initial;
        let w_fro2 = inner(&c, &c);
        let tolerance = o.residual_tolerance.max(o.gamma / colmax);
        let mut residual = frob_residual(&c, &b, &l, par);
        let mut outer = 0;
        let mut omega = 1.0;
        while outer < o.max_outer {
            outer += 1;
            for _ in 0..o.inner_iterations {
                // (9): B = (βW + π) Lᵀ (β L Lᵀ + I)⁻¹.
                let target = &c * dp_linalg::Scale(beta) + &pi;
                let rhs = gemm(target.as_ref(), l.transpose(), par); // s×r
                let mut sys = gemm(l.as_ref(), l.transpose(), par) * dp_linalg::Scale(beta);
                for k in 0..r {
                    sys[(k, k)] += 1.0;
                }
                let chol = Cholesky::factor(sys.as_ref())?;
                let mut bt = rhs.transpose().to_owned();
                chol.solve_in_place(bt.as_mut())?;
                b = bt.transpose().to_owned();
                // (10) by Algorithm 2.
                omega = apg(&b, &target, &mut l, norm, beta, omega, &o)?;
            }
            residual = frob_residual(&c, &b, &l, par);
            let trace_btb = inner(&b, &b);
            observer.observe(
                outer,
                &[
                    ("beta", beta),
                    ("residual", residual * colmax),
                    ("trace_btb", trace_btb * colmax * colmax),
                ],
            );
            if residual < tolerance {
                break;
            }
            if outer % o.beta_every == 0 {
                beta = (beta * o.beta_growth).min(o.beta_max);
            }
            let diff = &c - gemm(b.as_ref(), l.as_ref(), par);
            pi += &diff * dp_linalg::Scale(beta);
        }
        let trace_btb = inner(&b, &b);
        // The reference implementation stops below the residual tolerance
        // and flags failure above `failure_residual` or when
        // ‖B‖²_F > ‖W‖²_F (worse than noise on the data).
        let converged =
            residual < o.failure_residual.max(tolerance) && trace_btb <= w_fro2 * (1.0 + 1e-12);
        Ok(Decomposition {
            b: b * dp_linalg::Scale(colmax),
            l,
            residual: residual * colmax,
            trace_btb: trace_btb * colmax * colmax,
            outer_steps: outer,
            converged,
            stop: format!(
                "alternating: residual {:.2e} after {outer} outer steps",
                residual * colmax
            ),
        })
    }
}

impl Lrm {
    /// Algorithm 1 with B eliminated exactly (see [`LrmSolver::Reduced`]),
    /// on the scaled root `c` from the start `l`; ends with the exact
    /// least-squares B = W L⁺ when L supports W.
    ///
    /// `penalty = Some(β₀)` runs [`LrmSolver::Penalty`]'s path instead:
    /// π stays 0 and β = β₀·10^k at stage k.
    fn decompose_reduced(
        &self,
        c: &Mat<f64>,
        mut l: Mat<f64>,
        colmax: f64,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
        penalty: Option<f64>,
    ) -> Result<Decomposition> {
        let o = self.options;
        let par = o.parallelism;
        let (s, n, r) = (c.nrows(), c.ncols(), l.nrows());
        let w_fro = inner(c, c).sqrt();
        let mut pi = Mat::<f64>::zeros(s, n);
        let mut beta = penalty.unwrap_or(o.reduced_beta_per_rank * r as f64);
        let beta_max = o.beta_max * r as f64;
        let (max_outer, stage_spg) = match penalty {
            Some(_) => (o.penalty_stages, o.penalty_spg),
            None => (o.reduced_max_outer, o.spg),
        };
        let mut residual = f64::INFINITY;
        let mut outer = 0;
        let mut last_b: Option<Mat<f64>> = None;
        let optimal_b = |t: &Mat<f64>, l: &Mat<f64>, beta: f64| ridge_b(t, l, beta, par);
        let started = Instant::now();
        let mut out_of_time = false;
        while outer < max_outer {
            let remaining = o.max_seconds.map(|t| t - started.elapsed().as_secs_f64());
            if remaining.is_some_and(|t| t <= 0.0) {
                out_of_time = true;
                break;
            }
            outer += 1;
            let t = c + &pi * dp_linalg::Scale(1.0 / beta);
            let eval = |lx: MatRef<'_, f64>, mut grad: MatMut<'_, f64>| -> f64 {
                let Some((f, g)) = reduced_objective(&t, &lx.to_owned(), beta, par) else {
                    return f64::INFINITY;
                };
                grad.copy_from(&g);
                f
            };
            let spg_options = SpgOptions {
                max_seconds: remaining,
                ..stage_spg
            };
            let (next, solved) = spg_over_columns(&l, norm, eval, &spg_options, |_, _, _| {});
            l = next;
            let b = optimal_b(&t, &l, beta).ok_or_else(|| DpError::NotConverged {
                solver: "LRM",
                reason: "I + βLLᵀ is not positive definite".into(),
            })?;
            let diff = c - gemm(b.as_ref(), l.as_ref(), par);
            let new_residual = inner(&diff, &diff).sqrt();
            observer.observe(
                outer,
                &[
                    ("beta", beta),
                    ("residual", new_residual * colmax),
                    ("trace_btb", inner(&b, &b) * colmax * colmax),
                    ("spg_iterations", solved.iterations as f64),
                ],
            );
            last_b = Some(b);
            if penalty.is_some() {
                beta *= 10.0;
            } else {
                pi += &diff * dp_linalg::Scale(beta);
                if new_residual > 0.25 * residual {
                    beta = (beta * o.beta_growth).min(beta_max);
                }
            }
            residual = new_residual;
            if residual <= o.reduced_residual_tolerance * w_fro {
                break;
            }
        }
        // Exact refit: B = W L⁺ (least squares), residual zero when L's
        // row space holds W's; otherwise keep the ridge B of (9).
        let llt = gemm(l.as_ref(), l.transpose(), par);
        let refit = Cholesky::factor(llt.as_ref()).ok().and_then(|chol| {
            let mut bt = gemm(l.as_ref(), c.transpose(), par);
            chol.solve_in_place(bt.as_mut()).ok()?;
            Some(bt.transpose().to_owned())
        });
        let ridge = optimal_b(c, &l, beta).ok_or_else(|| DpError::NotConverged {
            solver: "LRM",
            reason: "I + βLLᵀ is not positive definite".into(),
        })?;
        // The smallest tr(BᵀB) among the candidates that fit W below the
        // failure level (an ill-conditioned L makes the exact refit huge);
        // if none does, the best fit.
        let mut scored: Vec<(f64, f64, Mat<f64>)> = [Some(ridge), refit, last_b.take()]
            .into_iter()
            .flatten()
            .map(|b| (frob_residual(c, &b, &l, par), inner(&b, &b), b))
            .collect();
        let fits = |res: f64| res < o.failure_residual;
        scored.sort_by(|a, b| match (fits(a.0), fits(b.0)) {
            (true, true) => a.1.total_cmp(&b.1),
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            (false, false) => a.0.total_cmp(&b.0),
        });
        let Some((_, _, b)) = scored.into_iter().next() else {
            return Err(DpError::NotConverged {
                solver: "LRM",
                reason: "no B candidate".into(),
            });
        };
        let final_residual = frob_residual(c, &b, &l, par);
        let trace_btb = inner(&b, &b);
        let converged = !out_of_time
            && final_residual
                < o.failure_residual
                    .min(o.residual_tolerance.max(1e-6 * w_fro))
            && trace_btb <= inner(c, c) * (1.0 + 1e-12);
        let path = if penalty.is_some() {
            "penalty path"
        } else {
            "augmented Lagrangian"
        };
        Ok(Decomposition {
            b: b * dp_linalg::Scale(colmax),
            l,
            residual: final_residual * colmax,
            trace_btb: trace_btb * colmax * colmax,
            outer_steps: outer,
            converged,
            stop: format!(
                "{path}: residual {:.2e} after {outer} stages{}",
                final_residual * colmax,
                if out_of_time { " (time budget)" } else { "" }
            ),
        })
    }
}

impl Lrm {
    /// [`LrmSolver::Penalty`] for `r ≥ n`: SPG on [`barrier_objective`]
    /// over the unit balls of `norm`, from the identity plus random rows; the
    /// exact `B = W L⁺` (residual 0) at the end.
    fn decompose_barrier(
        &self,
        c: &Mat<f64>,
        r: usize,
        colmax: f64,
        norm: ColumnNorm,
        observer: &mut dyn Observer,
    ) -> Result<Decomposition> {
        let o = self.options;
        let par = o.parallelism;
        let n = c.ncols();
        let extra = r - n;
        let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
        // Identity plus HDMM's uniform start on the extra rows, each
        // extra column summing to about 2 before the columns are
        // normalized; with no extra row, a small uniform perturbation of
        // the identity (the identity itself is a KKT point).
        let scale = if extra > 0 {
            4.0 / extra as f64
        } else {
            1.0 / n as f64
        };
        let mut l = Mat::from_fn(r, n, |i, j| {
            let noise = if extra == 0 || i >= n {
                scale * rng.random::<f64>()
            } else {
                0.0
            };
            f64::from(u8::from(i == j)) + noise
        });
        for j in 0..n {
            let length = norm.norm(l.col(j).iter().copied());
            l.col_mut(j).iter_mut().for_each(|v| *v /= length);
        }
        let eval = |lx: MatRef<'_, f64>, grad: MatMut<'_, f64>| {
            barrier_objective_into(c, lx, grad, par).unwrap_or(f64::INFINITY)
        };
        let spg_options = SpgOptions {
            max_seconds: o.max_seconds,
            ..o.penalty_spg
        };
        let (l, solved) = spg_over_columns(&l, norm, eval, &spg_options, |k, f, pg| {
            observer.observe(
                k,
                &[
                    ("trace_btb", f * colmax * colmax),
                    ("projected_gradient", pg),
                ],
            );
        });
        // B = W L⁺ = C (LᵀL)⁻¹ Lᵀ.
        let b = Cholesky::factor(gemm(l.transpose(), l.as_ref(), par).as_ref())
            .and_then(|chol| {
                let mut yt = c.transpose().to_owned();
                chol.solve_in_place(yt.as_mut())?;
                Ok(gemm(yt.transpose(), l.transpose(), par))
            })
            .map_err(|_| DpError::NotConverged {
                solver: "LRM",
                reason: "L lost full column rank".into(),
            })?;
        let residual = frob_residual(c, &b, &l, par);
        let trace_btb = inner(&b, &b);
        let w_fro2 = inner(c, c);
        let converged = solved.stop != spg::SpgStop::MaxIterations
            && solved.stop != spg::SpgStop::LineSearch
            && residual <= 1e-6 * w_fro2.sqrt()
            && trace_btb <= w_fro2 * (1.0 + 1e-12);
        let stop = match solved.stop {
            spg::SpgStop::Stalled => format!(
                "barrier form: SPG decreased f by less than {:.0e} (relative) over the last \
                 {} of its {} iterations",
                spg_options.stall_tolerance,
                4 * spg_options.memory.max(1),
                solved.iterations
            ),
            other => format!(
                "barrier form: SPG {other:?} after {} iterations",
                solved.iterations
            ),
        };
        Ok(Decomposition {
            b: b * dp_linalg::Scale(colmax),
            l,
            residual: residual * colmax,
            trace_btb: trace_btb * colmax * colmax,
            outer_steps: solved.iterations,
            converged,
            stop,
        })
    }
}

/// SPG ([`crate::spg`]) over L (r × n) with every column in the unit ball
/// of `norm` (projection (11) for L1), from `l`. `eval(L, ∇)` sees L and writes the
/// gradient through column-major views of SPG's vectors (column j at
/// j·r), so nothing is copied. Returns the solution as a matrix.
fn spg_over_columns(
    l: &Mat<f64>,
    norm: ColumnNorm,
    mut eval: impl FnMut(MatRef<'_, f64>, MatMut<'_, f64>) -> f64,
    options: &SpgOptions,
    on_iteration: impl FnMut(usize, f64, f64),
) -> (Mat<f64>, spg::SpgResult) {
    let (r, n) = (l.nrows(), l.ncols());
    let x0: Vec<f64> = (0..n).flat_map(|j| l.col(j).iter().copied()).collect();
    let solved = spg::minimize(
        |x: &[f64], g: &mut [f64]| {
            eval(
                MatRef::from_column_major_slice(x, r, n),
                MatMut::from_column_major_slice_mut(g, r, n),
            )
        },
        |x: &mut [f64]| {
            for col in x.chunks_mut(r) {
                norm.project(col);
            }
        },
        x0,
        options,
        on_iteration,
    );
    let out = Mat::from_fn(r, n, |i, j| solved.x[j * r + i]);
    (out, solved)
}

/// The objective of formulation (7) with B eliminated, for L (r × n) with
/// full column rank: `f(L) = tr(C (LᵀL)⁻¹ Cᵀ) = min{‖B‖²_F : BL = C}`
/// (the minimizer is `B = C L⁺`), with gradient
/// `∇f = −2 L (LᵀL)⁻¹ CᵀC (LᵀL)⁻¹`. `None` when LᵀL is not numerically
/// positive definite (f = +∞ there).
///
/// The L1-ball projection leaves L sparse (WRange 256 after 200 SPG
/// steps: 9 nonzeros per column of 272), so `LᵀL` and `L Z` are formed
/// row by row for rows with at most n/8 nonzeros and by dense products for
/// the rest. The dense work is the Cholesky factor (n³/3), the solve
/// `(LᵀL)⁻¹Cᵀ` (2n²s) and `Z = (LᵀL)⁻¹CᵀC(LᵀL)⁻¹` (2n²s), s = rank(W).
pub fn barrier_objective(c: &Mat<f64>, l: &Mat<f64>, par: Par) -> Option<(f64, Mat<f64>)> {
    let mut grad = Mat::<f64>::zeros(l.nrows(), l.ncols());
    let f = barrier_objective_into(c, l.as_ref(), grad.as_mut(), par)?;
    Some((f, grad))
}

/// [`barrier_objective`] writing the gradient into `grad` (r × n).
fn barrier_objective_into(
    c: &Mat<f64>,
    l: MatRef<'_, f64>,
    mut grad: MatMut<'_, f64>,
    par: Par,
) -> Option<f64> {
    let n = l.ncols();
    let rows = SplitRows::new(l);
    // The dense rows of L, gathered once for LᵀL and for L Z.
    let ld = (!rows.dense.is_empty())
        .then(|| Mat::from_fn(rows.dense.len(), n, |k, j| l[(rows.dense[k], j)]));
    let mut m = match &ld {
        Some(ld) => gemm(ld.transpose(), ld.as_ref(), par),
        None => Mat::zeros(n, n),
    };
    for (_, entries) in &rows.sparse {
        for &(a, va) in entries {
            for &(b, vb) in entries {
                m[(a, b)] += va * vb;
            }
        }
    }
    let chol = Cholesky::factor(m.as_ref()).ok()?;
    // Yᵀ = (LᵀL)⁻¹ Cᵀ (n × s).
    let mut yt = c.transpose().to_owned();
    chol.solve_in_place(yt.as_mut()).ok()?;
    let f: f64 = (0..yt.ncols())
        .map(|k| {
            c.row(k)
                .iter()
                .zip(yt.col(k).iter())
                .map(|(a, b)| a * b)
                .sum::<f64>()
        })
        .sum();
    if !(f.is_finite() && f >= 0.0) {
        return None;
    }
    // Z = YᵀY (symmetric), ∇f = −2 L Z.
    let z = gemm(yt.as_ref(), yt.transpose(), par);
    grad.fill(0.0);
    if let Some(ld) = &ld {
        let gd = gemm(ld.as_ref(), z.as_ref(), par);
        for (k, &i) in rows.dense.iter().enumerate() {
            for j in 0..n {
                grad[(i, j)] = -2.0 * gd[(k, j)];
            }
        }
    }
    let mut row = vec![0.0; n];
    for (i, entries) in &rows.sparse {
        row.fill(0.0);
        for &(k, v) in entries {
            row.iter_mut()
                .zip(z.col(k).iter())
                .for_each(|(acc, zk)| *acc += v * zk);
        }
        for (j, value) in row.iter().enumerate() {
            grad[(*i, j)] = -2.0 * value;
        }
    }
    Some(f)
}

/// The rows of L split into dense ones (more than n/8 nonzeros) and the
/// nonzero entries of the others.
struct SplitRows {
    dense: Vec<usize>,
    sparse: Vec<(usize, Vec<(usize, f64)>)>,
}

impl SplitRows {
    fn new(l: MatRef<'_, f64>) -> Self {
        let (r, n) = (l.nrows(), l.ncols());
        let mut entries: Vec<Vec<(usize, f64)>> = vec![Vec::new(); r];
        for j in 0..n {
            for (i, &v) in l.col(j).iter().enumerate() {
                if v != 0.0 {
                    entries[i].push((j, v));
                }
            }
        }
        let mut dense = Vec::new();
        let mut sparse = Vec::new();
        for (i, e) in entries.into_iter().enumerate() {
            if 8 * e.len() > n {
                dense.push(i);
            } else if !e.is_empty() {
                sparse.push((i, e));
            }
        }
        Self { dense, sparse }
    }
}

/// The B of update (9) for target `t`: `βTLᵀ(I + βLLᵀ)⁻¹`, minimizing
/// `½‖B‖² + β/2‖T − BL‖²`.
fn ridge_b(t: &Mat<f64>, l: &Mat<f64>, beta: f64, par: Par) -> Option<Mat<f64>> {
    let r = l.nrows();
    let mut k = gemm(l.as_ref(), l.transpose(), par) * dp_linalg::Scale(beta);
    for i in 0..r {
        k[(i, i)] += 1.0;
    }
    let chol = Cholesky::factor(k.as_ref()).ok()?;
    let mut bt = gemm(l.as_ref(), t.transpose(), par) * dp_linalg::Scale(beta);
    chol.solve_in_place(bt.as_mut()).ok()?;
    Some(bt.transpose().to_owned())
}

/// The reduced subproblem of [`LrmSolver::Reduced`]:
/// `φ(L) = min_B ½‖B‖² + β/2‖T − BL‖²` and its gradient `−βBᵀ(T − BL)` at
/// the minimizing B (envelope theorem).
pub fn reduced_objective(
    t: &Mat<f64>,
    l: &Mat<f64>,
    beta: f64,
    par: Par,
) -> Option<(f64, Mat<f64>)> {
    let b = ridge_b(t, l, beta, par)?;
    let res = t - gemm(b.as_ref(), l.as_ref(), par);
    let grad = gemm(b.transpose(), res.as_ref(), par) * dp_linalg::Scale(-beta);
    Some((0.5 * inner(&b, &b) + 0.5 * beta * inner(&res, &res), grad))
}

fn frob_residual(c: &Mat<f64>, b: &Mat<f64>, l: &Mat<f64>, par: Par) -> f64 {
    let d = c - gemm(b.as_ref(), l.as_ref(), par);
    inner(&d, &d).sqrt()
}

/// Algorithm 2: Nesterov's accelerated projected gradient on
/// `G(L) = β/2 tr(LᵀBᵀBL) − tr(TᵀBL)` with `T = βW + π`,
/// `∇G = βBᵀBL − BᵀT`, backtracking `ω ← 2ω` until the quadratic model
/// `G(S) + ⟨∇G(S), U − S⟩ + ω/2 ‖U − S‖²` majorizes `G(U)`; stops when
/// `‖S − L⁺‖_F < χ = r·n·1e-12`. Returns the last ω (warm start).
fn apg(
    b: &Mat<f64>,
    target: &Mat<f64>,
    l: &mut Mat<f64>,
    norm: ColumnNorm,
    beta: f64,
    omega0: f64,
    options: &LrmOptions,
) -> Result<f64> {
    let (max_iter, par) = (options.apg_iterations, options.parallelism);
    let btb = gemm(b.transpose(), b.as_ref(), par) * dp_linalg::Scale(beta);
    let btt = gemm(b.transpose(), target.as_ref(), par);
    let value = |x: &Mat<f64>| {
        let q = gemm(btb.as_ref(), x.as_ref(), par);
        0.5 * inner(x, &q) - inner(&btt, x)
    };
    let grad = |x: &Mat<f64>| gemm(btb.as_ref(), x.as_ref(), par) - &btt;
    let chi = (l.nrows() * l.ncols()) as f64 * 1e-12;
    let mut prev = l.clone();
    let (mut d_prev, mut d) = (0.0f64, 1.0f64);
    let mut omega = omega0.max(1e-12);
    for _ in 0..max_iter {
        let alpha = (d_prev - 1.0) / d;
        let s = &*l + (&*l - &prev) * dp_linalg::Scale(alpha.max(0.0));
        let gs = grad(&s);
        let fs = value(&s);
        let mut next;
        loop {
            next = &s - &gs * dp_linalg::Scale(1.0 / omega);
            project_columns(&mut next, norm);
            let step = &next - &s;
            let model = fs + inner(&gs, &step) + 0.5 * omega * inner(&step, &step);
            if value(&next) <= model + 1e-12 * fs.abs().max(1.0) || omega > 1e300 {
                break;
            }
            omega *= 2.0;
        }
        let moved = {
            let step = &next - &s;
            inner(&step, &step).sqrt()
        };
        prev = std::mem::replace(l, next);
        if moved < chi {
            break;
        }
        d_prev = d;
        d = (1.0 + (1.0 + 4.0 * d * d).sqrt()) / 2.0;
    }
    if !l.as_ref().is_all_finite() {
        return Err(DpError::NotConverged {
            solver: "LRM",
            reason: "non-finite L in the accelerated gradient".into(),
        });
    }
    Ok(omega)
}

/// The best of `L` itself (when it supports W) and `[L; η Pᵀ]`, with `P`
/// an orthonormal basis of the directions where `LᵀL` has eigenvalue at
/// most `level · λ_max` (`level` ∈ {1e-12, 1e-8, 1e-6, 1e-4}: a nearly
/// singular L answers those directions of W with amplified noise, a few
/// appended rows answer them cheaply), rescaled to unit sensitivity in `norm`, η over
/// a small grid. Every objective is recomputed from the candidate.
fn supported_strategy(
    problem: &Problem,
    l: &Mat<f64>,
    norm: ColumnNorm,
) -> Result<(Mat<f64>, f64)> {
    let mut best: Option<(Mat<f64>, f64)> = match problem.objective(l.as_ref()) {
        Ok(obj) => Some((l.clone(), obj)),
        Err(DpError::UnsupportedWorkload { .. }) => None,
        Err(e) => return Err(e),
    };
    let mut seen = usize::MAX;
    for level in [1e-12, 1e-8, 1e-6, 1e-4] {
        let p = row_space_complement(l, level)?;
        if p.ncols() == 0 || p.ncols() == seen {
            continue;
        }
        seen = p.ncols();
        for eta in [1e-3, 1e-2, 3e-2, 1e-1, 3e-1] {
            let mut a = append_rows(l, &p, eta);
            let sensitivity = norm.max_column(a.as_ref());
            a *= dp_linalg::Scale(1.0 / sensitivity);
            if let Ok(obj) = problem.objective(a.as_ref())
                && best.as_ref().is_none_or(|b| obj < b.1)
            {
                best = Some((a, obj));
            }
        }
    }
    best.ok_or_else(|| DpError::NotConverged {
        solver: "LRM",
        reason: "could not complete the support of L".into(),
    })
}

impl StrategyOptimizer for Lrm {
    fn name(&self) -> &'static str {
        "lrm"
    }

    fn optimize(&self, problem: &Problem, observer: &mut dyn Observer) -> Result<Optimized> {
        let start = Instant::now();
        let norm = ColumnNorm::for_privacy(problem.privacy());
        let dec = self.decompose(problem.gram(), norm, observer)?;
        let n = problem.domain_size();
        // L answered by least squares; if BL ≠ W leaves part of W outside
        // L's row space, measure that part too (identity rows scaled so
        // that the sensitivity stays 1 … compared below with the identity).
        let mut candidates: Vec<(Mat<f64>, f64, &'static str)> = Vec::new();
        if let Ok((l, obj)) = supported_strategy(problem, &dec.l, norm) {
            candidates.push((l, obj, "lrm"));
        }
        let identity = Mat::<f64>::identity(n, n);
        let id_obj = problem.objective(identity.as_ref())?;
        candidates.push((identity, id_obj, "identity"));
        let (strategy, objective, which) = candidates
            .into_iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .ok_or_else(|| DpError::NotConverged {
                solver: "LRM",
                reason: "no strategy".into(),
            })?;
        let lrm_won = which == "lrm";
        let termination = if dec.converged && lrm_won {
            TerminationReason::Converged {
                criterion: dec.stop.clone(),
            }
        } else if !lrm_won {
            TerminationReason::Stalled {
                reason: format!(
                    "LRM's decomposition (residual {:.2e}, tr(BᵀB) {:.4e}) is not better than \
                     the identity strategy, which is returned",
                    dec.residual, dec.trace_btb
                ),
            }
        } else {
            TerminationReason::MaxIterations
        };
        Ok(Optimized {
            strategy,
            report: OptimizeReport {
                objective_history: vec![objective],
                iterations: dec.outer_steps,
                termination,
                seconds: start.elapsed().as_secs_f64(),
                converged: dec.converged,
                objective,
                certificate: None,
                diagnostics: vec![
                    ("residual", dec.residual),
                    ("rank", dec.l.nrows() as f64),
                    ("trace_btb", dec.trace_btb),
                ],
            },
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Reference projection: bisection on the threshold θ of
    /// `Σ max(|vᵢ| − θ, 0) = z` (independent of the sort-based formula).
    fn reference(v: &[f64], z: f64) -> Vec<f64> {
        if v.iter().map(|x| x.abs()).sum::<f64>() <= z {
            return v.to_vec();
        }
        let (mut lo, mut hi) = (0.0, v.iter().map(|x| x.abs()).fold(0.0, f64::max));
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            let s: f64 = v.iter().map(|x| (x.abs() - mid).max(0.0)).sum();
            if s > z { lo = mid } else { hi = mid }
        }
        let t = 0.5 * (lo + hi);
        v.iter()
            .map(|x| x.signum() * (x.abs() - t).max(0.0))
            .collect()
    }

    #[test]
    fn l1_projection_is_exact_and_optimal() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for trial in 0..500 {
            let r = 1 + trial % 17;
            let scale = [0.1, 1.0, 10.0][trial % 3];
            let v: Vec<f64> = (0..r)
                .map(|_| scale * (rng.random::<f64>() * 2.0 - 1.0))
                .collect();
            let mut p = v.clone();
            project_l1_ball(&mut p, 1.0);
            let q = reference(&v, 1.0);
            for (a, b) in p.iter().zip(&q) {
                assert!((a - b).abs() < 1e-12, "{v:?}");
            }
            assert!(p.iter().map(|x| x.abs()).sum::<f64>() <= 1.0 + 1e-12);
            // Optimality: no feasible random point is closer to v.
            let d = |x: &[f64]| x.iter().zip(&v).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
            for _ in 0..20 {
                let mut w: Vec<f64> = (0..r).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
                let s: f64 = w.iter().map(|x| x.abs()).sum();
                if s > 1.0 {
                    w.iter_mut().for_each(|x| *x /= s);
                }
                assert!(d(&p) <= d(&w) + 1e-12);
            }
        }
        // Inside the ball: unchanged; ties and zeros are fine.
        let mut inside = vec![0.2, -0.3, 0.0];
        project_l1_ball(&mut inside, 1.0);
        assert_eq!(inside, vec![0.2, -0.3, 0.0]);
        let mut ties = vec![1.0, -1.0, 1.0, -1.0];
        project_l1_ball(&mut ties, 1.0);
        assert!(ties.iter().all(|x| (x.abs() - 0.25).abs() < 1e-15));
    }

    /// Both column norms: the projection lands in the unit ball, leaves
    /// points inside unchanged, and is the nearest point of the ball (the
    /// obtuse-angle condition ⟨v − P(v), w − P(v)⟩ ≤ 0 for random w in the
    /// ball); `max_column` and `norm` agree with the plain sums; an L1
    /// ball of radius 0 is the origin.
    #[test]
    fn column_norm_projections_are_nearest_points() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for norm in [ColumnNorm::L1, ColumnNorm::L2] {
            for trial in 0..300 {
                let r = 1 + trial % 9;
                let scale = [0.2, 1.0, 5.0][trial % 3];
                let v: Vec<f64> = (0..r)
                    .map(|_| scale * (rng.random::<f64>() * 2.0 - 1.0))
                    .collect();
                let mut p = v.clone();
                norm.project(&mut p);
                let length = norm.norm(p.iter().copied());
                assert!(length <= 1.0 + 1e-12, "{norm:?} {length}");
                if norm.norm(v.iter().copied()) <= 1.0 {
                    assert_eq!(p, v);
                }
                for _ in 0..20 {
                    let mut w: Vec<f64> = (0..r).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect();
                    let wl = norm.norm(w.iter().copied());
                    if wl > 1.0 {
                        w.iter_mut().for_each(|x| *x /= wl);
                    }
                    let angle: f64 = (0..r).map(|i| (v[i] - p[i]) * (w[i] - p[i])).sum();
                    assert!(angle <= 1e-12, "{norm:?} {v:?}");
                }
            }
        }
        let m = Mat::from_fn(2, 3, |i, j| (i as f64 + 1.0) * (j as f64 - 1.0));
        assert_eq!(ColumnNorm::L1.max_column(m.as_ref()), 3.0);
        assert!((ColumnNorm::L2.max_column(m.as_ref()) - 5f64.sqrt()).abs() < 1e-15);
        assert_eq!(
            ColumnNorm::for_privacy(PrivacyModel::Approx),
            ColumnNorm::L2
        );
        let mut zero = vec![0.5, -2.0];
        project_l1_ball(&mut zero, 0.0);
        assert_eq!(zero, vec![0.0, 0.0]);
    }

    /// The reduced subproblem's gradient against central differences, and
    /// its value against a direct minimization over B (normal equations).
    #[test]
    fn reduced_objective_gradient_matches_finite_differences() {
        let (s, r, n) = (3, 4, 6);
        let t = Mat::from_fn(s, n, |i, j| (((i * 5 + j * 3) % 7) as f64 - 3.0) / 2.0);
        let l = Mat::from_fn(r, n, |i, j| (((i * 2 + j * 7) % 5) as f64 - 2.0) / 5.0);
        let beta = 3.0;
        let (f, g) = reduced_objective(&t, &l, beta, Par::Seq).unwrap();
        // Any other B gives a larger value.
        let b = ridge_b(&t, &l, beta, Par::Seq).unwrap();
        let value = |b: &Mat<f64>| {
            let res = &t - b * &l;
            0.5 * inner(b, b) + 0.5 * beta * inner(&res, &res)
        };
        assert!((value(&b) - f).abs() < 1e-12 * f);
        let bumped = &b + Mat::from_fn(s, r, |i, k| 1e-3 * ((i + k) % 2) as f64);
        assert!(value(&bumped) > f);
        crate::dense::assert_gradient_by_central_differences(
            "reduced objective",
            |x| reduced_objective(&t, x, beta, Par::Seq).unwrap().0,
            &l,
            &g,
            1e-6,
            1e-6,
        );
    }

    /// The barrier objective against a direct computation (normal
    /// equations: tr(C (LᵀL)⁻¹ Cᵀ) by explicit inverse) and its gradient
    /// against central differences, on an L with both dense rows (more
    /// than n/8 nonzeros) and sparse ones, so both product paths run.
    #[test]
    fn barrier_objective_gradient_matches_finite_differences() {
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
        let (f, g) = barrier_objective(&c, &l, Par::Seq).unwrap();
        let ltl = l.transpose() * &l;
        let inv = dp_linalg::Lu::factor(ltl.as_ref()).unwrap().inverse();
        let direct = (&c * &inv * c.transpose()).diagonal().column_vector().sum();
        assert!((f - direct).abs() < 1e-10 * direct, "{f} vs {direct}");
        crate::dense::assert_gradient_by_central_differences(
            "barrier objective",
            |x| barrier_objective(&c, x, Par::Seq).unwrap().0,
            &l,
            &g,
            1e-6,
            1e-6,
        );
        // Rank-deficient L (fewer rows than columns): +∞ (None).
        let thin = Mat::from_fn(4, n, |i, j| f64::from(u8::from(i == j)));
        assert!(barrier_objective(&c, &thin, Par::Seq).is_none());
    }

    /// The LRM paper's 3-query example: total error 2·l1_obj/ε² at most
    /// 39.2/ε² (paper's optimum 39/ε², noise on the data 40/ε²).
    #[test]
    fn three_query_example_beats_noise_on_data() {
        let w = [[0., 2., 1., 1.], [0., 1., 0., 2.], [1., 0., 2., 2.]];
        let w = Mat::from_fn(3, 4, |i, j| w[i][j]);
        let p = Problem::from_workload(w.as_ref(), crate::PrivacyModel::Pure).unwrap();
        let r = Lrm::default().optimize(&p, &mut ()).unwrap();
        assert!(r.report.objective * 2.0 <= 39.2, "{}", r.report.objective);
        let l1: f64 = (0..4)
            .map(|j| r.strategy.col(j).iter().map(|v| v.abs()).sum::<f64>())
            .fold(0.0, f64::max);
        assert!(l1 <= 1.0 + 1e-12);
    }
}
