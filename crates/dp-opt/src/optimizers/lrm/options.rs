//! LRM's options: the rank, the solver ([`LrmSolver`]) and each solver's
//! own settings, with the defaults of the reference implementation where
//! the paper fixes a value.

use dp_linalg::Par;

#[allow(unused_imports)] // doc links
use super::quasi_newton;
use crate::solvers::engine::Budget;
use crate::solvers::lbfgs::LbfgsOptions;
use crate::solvers::spg::SpgOptions;

/// Options of LRM. Defaults are the authors' reference implementation's
/// where the paper fixes a value; each solver's own settings sit in its
/// own struct, used only when [`LrmOptions::solver`] selects it.
#[derive(Debug, Clone, Copy)]
pub struct LrmOptions {
    /// Rank r of the decomposition; `None` = ⌈rank_factor · rank(W)⌉ (the
    /// paper's default), except for [`LrmSolver::Penalty`] when that is at
    /// least n/2: then r = n + ⌈n/16⌉ (the rows beyond n that let the
    /// iteration leave the identity, see [`LrmSolver::Penalty`]) and the
    /// eliminated-B form runs.
    pub rank: Option<usize>,
    /// Factor on rank(W) for the default r (1.2).
    pub rank_factor: f64,
    /// How formulation (7) is solved.
    pub solver: LrmSolver,
    /// Residual `‖W − BL‖_F` ending the run (0.01), with W scaled to unit
    /// largest column norm.
    pub residual_tolerance: f64,
    /// Residual above which the run is flagged as failed (0.1), same scale.
    pub failure_residual: f64,
    /// [`LrmSolver::Alternating`]'s settings.
    pub alternating: AlternatingOptions,
    /// [`LrmSolver::Reduced`]'s settings.
    pub reduced: ReducedOptions,
    /// [`LrmSolver::Penalty`]'s settings.
    pub penalty: PenaltyOptions,
    /// Wall-clock budget of the decomposition (`None`: no limit). The
    /// outer steps of [`LrmSolver::Alternating`] and [`LrmSolver::Reduced`]
    /// and the penalty stages stop when it runs out (each stage's SPG gets
    /// the time left); the eliminated-B form's SPG and L-BFGS runs each get
    /// it. A cut run is reported as [`crate::Termination::Timeout`].
    pub max_seconds: Option<f64>,
    /// Parallelism of the matrix products.
    pub parallelism: Par,
}

/// [`LrmSolver::Alternating`]: Algorithm 1 of the LRM paper with
/// Algorithm 2 for the L subproblem.
#[derive(Debug, Clone, Copy)]
pub struct AlternatingOptions {
    /// Relaxation γ of Formula (8): the run stops once `‖W − BL‖_F ≤ γ`
    /// (or the residual tolerance, whichever is larger).
    pub gamma: f64,
    /// Initial penalty β₀ (10; the paper starts at 1, which lets the
    /// early, weakly penalized steps collapse L's rank). `β` is scale-free
    /// (W → cW scales both terms of the Lagrangian by c²).
    pub beta_initial: f64,
    /// B/L alternations per outer step (5).
    pub inner_iterations: usize,
    /// β growth factor (5) …
    pub beta_growth: f64,
    /// … applied every this many outer steps (8) …
    pub beta_every: usize,
    /// … up to this value (1e5).
    pub beta_max: f64,
    /// Outer steps (100).
    pub max_outer: usize,
    /// Accelerated-gradient iterations per L update (50).
    pub apg_iterations: usize,
}

/// [`LrmSolver::Reduced`]: Algorithm 1 with B eliminated inside each
/// augmented-Lagrangian subproblem.
#[derive(Debug, Clone, Copy)]
pub struct ReducedOptions {
    /// Initial penalty as a multiple of r (β₀ = `beta_per_rank · r`,
    /// 10). At the SVD start `LLᵀ ≈ I/r`, so β = r weighs the ridge `I`
    /// and `βLLᵀ` of update (9) equally; β₀ = r lets the first subproblem
    /// collapse L to the stationary point L = 0, B = 0.
    pub beta_per_rank: f64,
    /// β growth factor (5) when the residual did not fall by 4× …
    pub beta_growth: f64,
    /// … up to this multiple of r (1e5).
    pub beta_max_per_rank: f64,
    /// Outer (multiplier) steps (30).
    pub max_outer: usize,
    /// Relative residual `‖W − BL‖_F / ‖W‖_F` ending the outer loop (1e-6).
    pub residual_tolerance: f64,
    /// The SPG settings of each subproblem.
    pub spg: SpgOptions,
}

/// [`LrmSolver::Penalty`]: formulation (7) with B eliminated.
#[derive(Debug, Clone, Copy)]
pub struct PenaltyOptions {
    /// With `r < n`: penalty stages (η = λ·10^-k, k = 1 … stages; 6).
    pub stages: usize,
    /// With `r < n`: relative residual `‖W − BL‖_F / ‖W‖_F` ending the
    /// stages early (1e-6).
    pub residual_tolerance: f64,
    /// The SPG settings (per stage when `r < n`). The stall test
    /// (relative decrease below `stall_tolerance` over `4·memory`
    /// iterations) is what usually ends the run; it is reported.
    pub spg: SpgOptions,
    /// With `r ≥ n` and no start handed in: where the run starts.
    pub start: EliminatedStart,
    /// With [`EliminatedStart::PIdentity`] on at most this many cells
    /// (128), the run from [`EliminatedStart::Random`] is made as well and
    /// the lower `tr(BᵀB)` kept: on small domains both are cheap and
    /// either can end in the lower local minimum, while on large ones the
    /// random start's iteration needs hundreds of O(n³) steps and ends
    /// higher.
    pub random_start_up_to: usize,
    /// With `r ≥ n`: seed of the start's random rows (ChaCha8): p-Identity's
    /// random Θ, or the extra rows of [`EliminatedStart::Random`].
    pub seed: u64,
    /// With `r ≥ n` under ε-DP (L1 columns): how the eliminated-B form is
    /// minimized (SPG).
    pub method: EliminatedMethod,
    /// [`EliminatedMethod::QuasiNewton`]'s settings (`nonnegative` is
    /// set by the method).
    pub lbfgs: LbfgsOptions,
}

/// How [`LrmSolver::Penalty`] minimizes the eliminated-B form (`r ≥ n`)
/// when L's columns lie in the unit L1 ball; with L2 columns SPG runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EliminatedMethod {
    /// SPG with the exact L1-ball projection (11) (`PenaltyOptions::spg`).
    /// The default: per unit of work it is ahead of the quasi-Newton form
    /// on WRange (`benches/MEASUREMENTS.md`).
    Spg,
    /// `spg_iterations` SPG steps (which find the sparsity pattern), then
    /// projected L-BFGS (`PenaltyOptions::lbfgs`) over the scale-free
    /// split `L = (P − Q) diag(1ᵀ(P + Q))⁻¹`, `P, Q ≥ 0`
    /// ([`quasi_newton`]). It ends at lower objectives than SPG's stall
    /// test on WRange n ≥ 256, at more evaluations.
    QuasiNewton {
        /// SPG steps before L-BFGS.
        spg_iterations: usize,
    },
}

/// Where [`LrmSolver::Penalty`]'s eliminated-B form (`r ≥ n`) starts
/// when no strategy is handed in (see [`super::Lrm::decompose_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EliminatedStart {
    /// The optimum of HDMM's p-Identity family (McKenna et al. 2018, §5,
    /// [`crate::optimizers::pidentity`]) with p = r − n extra rows: `L = [I; Θ] D`,
    /// the shape of LRM's L, with the extra rows optimized while the
    /// identity block is held (O(p n²) per evaluation by Woodbury, against
    /// the O(n³) of (7)); the eliminated-B iteration then frees every
    /// entry of L. From the random start below, SPG spends hundreds of
    /// O(n³) iterations finding what the restricted family finds at a
    /// fraction of the cost. The default (on small domains together with
    /// the random start, [`PenaltyOptions::random_start_up_to`]).
    PIdentity,
    /// The identity plus `r − n` uniform random rows (`seed`), each extra
    /// column summing to about 2 before the columns are normalized: a
    /// randomly initialized LRM, as in the paper's reference code.
    Random,
}

/// How LRM's program is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LrmSolver {
    /// The reference implementation (LRM paper, Algorithm 1 with
    /// Algorithm 2): `inner_iterations` alternations of the closed-form B
    /// update (9) and Nesterov's accelerated projected gradient for L,
    /// then the multiplier update `π ← π + β(W − BL)`, β ×`beta_growth`
    /// every `beta_every` outer steps. On range workloads it can let L
    /// lose rank (the failure mode the COA paper describes in its §2).
    Alternating,
    /// Algorithm 1 with B minimized exactly for each L (update (9) in
    /// closed form inside the objective): the subproblem becomes
    /// `φ(L) = min_B ½‖B‖² + β/2‖T − BL‖²`, `T = W + π/β`, whose gradient
    /// is `−β Bᵀ(T − BL)` at the optimal B (envelope theorem). It is
    /// minimized over the same feasible set (columns of L in the unit L1
    /// ball, the exact projection (11)) by the nonmonotone spectral
    /// projected gradient ([`crate::solvers::spg`]); then the multiplier update
    /// `π ← π + β(W − BL)`, and β ×`beta_growth` when the residual did
    /// not fall by 4×.
    Reduced,
    /// Formulation (7) with B eliminated exactly and a quadratic-penalty
    /// path instead of multipliers. For L with full column rank the
    /// smallest B with `BL = W` is `W L⁺`, so (7) is
    /// `min f(L) = tr(WᵀW (LᵀL)⁻¹)` over columns of L in the unit L1 ball
    /// ([`super::eliminated_b_objective`]); f is finite exactly where L has full
    /// column rank, so every iterate supports W.
    ///
    /// - `r ≥ n`: f itself is minimized by SPG with projection (11), from
    ///   the identity with `r − n` extra rows, chosen by
    ///   [`EliminatedStart`] (p-Identity's optimum by default, or
    ///   uniform random rows), columns scaled to unit norm. The identity
    ///   alone is a KKT point on range workloads (every column is a vertex
    ///   of its L1 ball and `(WᵀW)ⱼⱼ ≥ (WᵀW)ᵢⱼ`), so the extra rows are
    ///   what lets the iteration leave it. r is not capped at n (the
    ///   paper's Table 1 goes to 3.6·rank(W)).
    /// - `r < n`: LᵀL is singular and f is the limit η → 0 of
    ///   `f_η(L) = tr(WᵀW (LᵀL + ηI)⁻¹) = min_B ‖B‖² + ‖W − BL‖²/η`,
    ///   Algorithm 1's subproblem with π = 0 and β = 1/η. It is minimized
    ///   for `η = λ·10^-k`, k = 1 … `stages` (λ the largest eigenvalue of
    ///   L₀L₀ᵀ), each stage warm-started from the last, from the SVD
    ///   start; then the exact refit B = W L⁺.
    ///
    /// The default.
    Penalty,
}

impl Default for LrmOptions {
    fn default() -> Self {
        Self {
            rank: None,
            rank_factor: 1.2,
            solver: LrmSolver::Penalty,
            residual_tolerance: 0.01,
            failure_residual: 0.1,
            alternating: AlternatingOptions::default(),
            reduced: ReducedOptions::default(),
            penalty: PenaltyOptions::default(),
            max_seconds: None,
            parallelism: Par::rayon(0),
        }
    }
}

impl Default for AlternatingOptions {
    fn default() -> Self {
        Self {
            gamma: 0.0,
            beta_initial: 10.0,
            inner_iterations: 5,
            beta_growth: 5.0,
            beta_every: 8,
            beta_max: 1e5,
            max_outer: 100,
            apg_iterations: 50,
        }
    }
}

impl Default for ReducedOptions {
    fn default() -> Self {
        Self {
            beta_per_rank: 10.0,
            beta_growth: 5.0,
            beta_max_per_rank: 1e5,
            max_outer: 30,
            residual_tolerance: 1e-6,
            spg: SpgOptions {
                budget: Budget::iterations(300),
                tolerance: 1e-10,
                stall_tolerance: 1e-8,
                ..SpgOptions::default()
            },
        }
    }
}

impl Default for PenaltyOptions {
    fn default() -> Self {
        Self {
            stages: 6,
            residual_tolerance: 1e-6,
            spg: SpgOptions {
                budget: Budget::iterations(1000),
                tolerance: 1e-10,
                stall_tolerance: 1e-4,
                gradient_initial_step: true,
                ..SpgOptions::default()
            },
            start: EliminatedStart::PIdentity,
            random_start_up_to: 128,
            seed: 0,
            method: EliminatedMethod::Spg,
            lbfgs: LbfgsOptions {
                memory: 10,
                budget: Budget::iterations(1000),
                gradient_tolerance: 1e-7,
                function_tolerance: 1e-6,
                nonnegative: true,
            },
        }
    }
}
