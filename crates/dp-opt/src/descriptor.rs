//! What an optimizer file exports for the registry ([`crate::registry`]):
//! its [`Descriptor`] (name, label, description, privacy models, a
//! builder from typed [`Params`], the reduced variant the regression gate
//! runs). A leaf module, so that the optimizers and the registry that
//! lists them do not import each other.

use dp_core::{DpError, Result};

use crate::{PrivacyModel, StrategyOptimizer};

/// A typed parameter an optimizer's builder may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    /// [`Params::max_seconds`]: a wall-clock budget.
    MaxSeconds,
    /// [`Params::branching`]: a tree's branching factor.
    Branching,
    /// [`Params::effort`]: a time budget relative to a fast first stage.
    Effort,
    /// [`Params::support_repair`]: whether the strategy built from the Gram
    /// gets the directions it misses ([`crate::support::Completed`]).
    SupportRepair,
}

/// Parameters for [`Descriptor::build`]; `None` keeps the default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Params {
    /// Wall-clock budget in seconds (optimizers listing
    /// [`Param::MaxSeconds`]).
    pub max_seconds: Option<f64>,
    /// Branching factor (optimizers listing [`Param::Branching`]).
    pub branching: Option<usize>,
    /// Total time as a multiple of the optimizer's fast first stage
    /// (optimizers listing [`Param::Effort`], e.g. `epsilon-default`:
    /// a multiple of p-Identity's time); at least 1.
    pub effort: Option<f64>,
    /// Whether a strategy built from the Gram's numerically nonzero
    /// spectrum gets the directions it misses on the cells W touches
    /// appended ([`crate::support::Completed`]; optimizers listing
    /// [`Param::SupportRepair`], default on): needed when W's small rows
    /// vanish in a rounded Gram, a small cost where W truly lacks them. A
    /// caller whose Gram is exact (the structured planner's factors) turns
    /// it off.
    pub support_repair: Option<bool>,
}

/// One registered optimizer.
#[derive(Clone, Copy)]
pub struct Descriptor {
    /// Name on the command line and in reports.
    pub name: &'static str,
    /// The papers' labels for it (the sweeps' legend), e.g. `["HM"]`; the
    /// identity is "LM" under ε-DP and "GM" under (ε,δ)-DP.
    pub labels: &'static [&'static str],
    /// One line for `--help`.
    pub description: &'static str,
    /// The privacy models it optimizes for.
    pub privacy: &'static [PrivacyModel],
    /// The [`Params`] fields it reads.
    pub params: &'static [Param],
    /// Builds it from parameters already checked by [`Descriptor::build`].
    pub builder: fn(&Params) -> Box<dyn StrategyOptimizer>,
    /// Deliberately reduced settings (the regression gate's `--worsen`),
    /// `None` for closed forms (nothing to reduce) and combinations.
    pub weakened: Option<fn() -> Box<dyn StrategyOptimizer>>,
}

/// `T` at its default settings changed by `adjust`, boxed: the builders'
/// and weakened variants' common form (a time budget from the
/// [`Params`], fewer iterations).
pub(crate) fn adjusted<T>(adjust: impl FnOnce(&mut T)) -> Box<dyn StrategyOptimizer>
where
    T: StrategyOptimizer + Default + 'static,
{
    let mut optimizer = T::default();
    adjust(&mut optimizer);
    Box::new(optimizer)
}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor")
            .field("name", &self.name)
            .field("labels", &self.labels)
            .field("privacy", &self.privacy)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Descriptor {
    /// An optimizer for both privacy models that reads no parameter and
    /// has no reduced settings (a closed form); [`Descriptor::with_params`]
    /// and [`Descriptor::with_weakened`] state what differs (a
    /// single-model optimizer sets [`Descriptor::privacy`] in a literal).
    pub const fn new(
        name: &'static str,
        labels: &'static [&'static str],
        description: &'static str,
        builder: fn(&Params) -> Box<dyn StrategyOptimizer>,
    ) -> Self {
        Self {
            name,
            labels,
            description,
            privacy: &[PrivacyModel::Pure, PrivacyModel::Approx],
            params: &[],
            builder,
            weakened: None,
        }
    }

    /// The same, reading `params`.
    pub const fn with_params(self, params: &'static [Param]) -> Self {
        Self { params, ..self }
    }

    /// The same, with the regression gate's reduced settings.
    pub const fn with_weakened(self, weakened: fn() -> Box<dyn StrategyOptimizer>) -> Self {
        Self {
            weakened: Some(weakened),
            ..self
        }
    }

    /// Whether it optimizes for `privacy`.
    pub fn supports(&self, privacy: PrivacyModel) -> bool {
        self.privacy.contains(&privacy)
    }

    /// The optimizer with `params`. A parameter it does not read, a
    /// negative or NaN time budget, a branching factor below 2 or an
    /// effort below 1 (or not finite) is an error.
    pub fn build(&self, params: &Params) -> Result<Box<dyn StrategyOptimizer>> {
        let refuse =
            |name: &'static str, reason: String| Err(DpError::InvalidParameter { name, reason });
        if let Some(t) = params.max_seconds {
            if !self.params.contains(&Param::MaxSeconds) {
                return refuse(
                    "max_seconds",
                    format!("'{}' takes no time budget", self.name),
                );
            }
            if t.is_nan() || t < 0.0 {
                return refuse("max_seconds", format!("must be >= 0 seconds, got {t}"));
            }
        }
        if let Some(b) = params.branching {
            if !self.params.contains(&Param::Branching) {
                return refuse(
                    "branching",
                    format!("'{}' takes no branching factor", self.name),
                );
            }
            if b < 2 {
                return refuse("branching", format!("must be at least 2, got {b}"));
            }
        }
        if params.support_repair.is_some() && !self.params.contains(&Param::SupportRepair) {
            return refuse(
                "support_repair",
                format!("'{}' has no support repair to turn on or off", self.name),
            );
        }
        if let Some(e) = params.effort {
            if !self.params.contains(&Param::Effort) {
                return refuse("effort", format!("'{}' takes no effort", self.name));
            }
            if !(e.is_finite() && e >= 1.0) {
                return refuse("effort", format!("must be a finite number >= 1, got {e}"));
            }
        }
        Ok((self.builder)(params))
    }
}
