//! Validated privacy parameters.

use serde::{Deserialize, Serialize};

use crate::{DpError, Result};

/// A privacy parameter: an `f64` newtype validated by `$check` when built
/// ([`Epsilon::new`], [`Delta::new`]) and when deserialized, so that an
/// out-of-range value cannot be held.
macro_rules! validated_parameter {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "f64", into = "f64")]
        pub struct $name(f64);

        impl TryFrom<f64> for $name {
            type Error = DpError;
            fn try_from(v: f64) -> Result<Self> {
                Self::new(v)
            }
        }

        impl From<$name> for f64 {
            fn from(p: $name) -> f64 {
                p.0
            }
        }

        impl $name {
            /// Validates the value.
            pub fn new(value: f64) -> Result<Self> {
                $check(value).map(Self)
            }

            /// The value.
            pub fn get(self) -> f64 {
                self.0
            }
        }
    };
}

validated_parameter!(
    /// The privacy-loss parameter ε, in the documented range
    /// [`crate::kernel::MIN_EPSILON`]`..=`[`crate::kernel::MAX_EPSILON`]
    /// (deserialization validates too).
    Epsilon,
    crate::kernel::check_epsilon
);

validated_parameter!(
    /// The failure probability δ of approximate differential privacy, in the
    /// documented range [`crate::kernel::MIN_DELTA`]`..=`[`crate::kernel::MAX_DELTA`].
    Delta,
    crate::kernel::check_delta
);

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
