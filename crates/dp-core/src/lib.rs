//! The privacy core of dpmm: validated privacy parameters, sensitivities,
//! noise calibration and sampling, the matrix mechanism (measure, least
//! squares reconstruction, answer) and its error formulas.
//!
//! Everything that touches the private histogram `x` and draws noise lives
//! in [`mechanism`]; optimizers and experiments only see strategies and
//! error formulas (Ektelo's privacy-kernel split).
//!
//! ```
//! use dp_core::{MatrixMechanism, NoiseSource, PrivacyBudget, l1_obj};
//! use dp_linalg::Mat;
//!
//! // Identity strategy on 3 cells, workload = the three prefix sums.
//! let workload = Mat::from_fn(3, 3, |i, j| if j <= i { 1.0 } else { 0.0 });
//! let strategy = Mat::<f64>::identity(3, 3);
//! // l1_obj = Δ₁(I)² · tr(WᵀW) = 1 · (1 + 2 + 3) = 6.
//! assert!((l1_obj(workload.as_ref(), strategy.as_ref()).unwrap() - 6.0).abs() < 1e-12);
//!
//! let budget = PrivacyBudget::pure(1.0).unwrap();
//! let mechanism = MatrixMechanism::new(strategy.as_ref(), budget).unwrap();
//! // Experiments use a seeded generator; real releases use NoiseSource::default().
//! let mut rng = NoiseSource::seeded(7);
//! let answers = mechanism
//!     .release(workload.as_ref(), &[10.0, 20.0, 30.0], &mut rng)
//!     .unwrap();
//! assert_eq!(answers.len(), 3);
//! ```

pub mod accuracy;
pub mod calibration;
mod error;
mod least_squares;
pub mod mechanism;
pub mod privacy;
pub mod sampling;
pub mod sensitivity;
pub mod validate;

pub use accuracy::{
    StrategyEvaluation, evaluate_strategy, evaluate_strategy_gram,
    expected_per_query_squared_error, expected_total_squared_error, l1_obj, l2_obj,
    structural_squared_error, svd_lower_bound, svd_lower_bound_from_gram, trace_objective,
};
pub use calibration::{GaussianCalibration, NoiseCalibration, NoiseDistribution};
pub use error::{DpError, Result};
pub use mechanism::{MatrixMechanism, SupportCheck, check_support};
pub use privacy::{Delta, Epsilon, PrivacyBudget};
pub use sampling::NoiseSource;
pub use sensitivity::{sensitivity_l1, sensitivity_l2};
