//! Validated privacy parameters.

use serde::{Deserialize, Serialize};

use crate::{DpError, Result};

/// The privacy-loss parameter ε: finite and strictly positive.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct Epsilon(f64);

impl Epsilon {
    /// Validates ε.
    pub fn new(value: f64) -> Result<Self> {
        if value.is_finite() && value > 0.0 {
            Ok(Self(value))
        } else {
            Err(DpError::InvalidEpsilon(value))
        }
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// The failure probability δ of approximate differential privacy, in (0, 1).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
pub struct Delta(f64);

impl Delta {
    /// Validates δ.
    pub fn new(value: f64) -> Result<Self> {
        if value.is_finite() && value > 0.0 && value < 1.0 {
            Ok(Self(value))
        } else {
            Err(DpError::InvalidDelta(value))
        }
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// A privacy budget: pure ε-DP (answered with Laplace noise) or
/// approximate (ε,δ)-DP (answered with Gaussian noise).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum PrivacyBudget {
    /// ε-differential privacy.
    Pure {
        /// ε.
        epsilon: Epsilon,
    },
    /// (ε,δ)-differential privacy.
    Approx {
        /// ε.
        epsilon: Epsilon,
        /// δ.
        delta: Delta,
    },
}

impl PrivacyBudget {
    /// ε-DP with a validated ε.
    pub fn pure(epsilon: f64) -> Result<Self> {
        Ok(Self::Pure {
            epsilon: Epsilon::new(epsilon)?,
        })
    }

    /// (ε,δ)-DP with validated ε and δ.
    pub fn approx(epsilon: f64, delta: f64) -> Result<Self> {
        Ok(Self::Approx {
            epsilon: Epsilon::new(epsilon)?,
            delta: Delta::new(delta)?,
        })
    }

    /// ε of either kind.
    pub fn epsilon(&self) -> Epsilon {
        match *self {
            Self::Pure { epsilon } | Self::Approx { epsilon, .. } => epsilon,
        }
    }

    /// δ, or `None` for pure DP.
    pub fn delta(&self) -> Option<Delta> {
        match *self {
            Self::Pure { .. } => None,
            Self::Approx { delta, .. } => Some(delta),
        }
    }
}
