//! The privacy core of dpmm: the privacy kernel (private data, exact
//! samplers, budget accountant, persistent ledger), validated privacy
//! parameters, sensitivities and noise calibrations, the matrix mechanism
//! (measure, least squares reconstruction, answer) and its error formulas.
//!
//! [`kernel`] is the only code that reads the private histogram, draws
//! noise or charges a budget: a [`Session`] holds the total budget and the
//! noise source, and every measurement ([`Session::measure_linear`]) is
//! charged before its noise is drawn. Optimizers, error formulas and
//! experiments see strategies and measurements only; what they compute
//! from a measurement is post-processing. Reproducible (seeded) sessions
//! exist only under [`experiments`].
//!
//! ```
//! use dp_core::{Cost, LinearStrategy, MatrixMechanism, PrivacyBudget, PrivateHistogram, Session};
//! use dp_linalg::Mat;
//!
//! // The data owner aggregates records into counts; the kernel keeps them opaque.
//! let data = PrivateHistogram::from_counts(vec![10, 20, 30]).unwrap();
//! // A session holding ε = 1 in total, drawing from the operating system.
//! let mut session = Session::pure(1.0).unwrap();
//!
//! // A direct measurement: the identity strategy at ε = 0.4. The kernel
//! // computes the sensitivity (1) itself; values are multiples of the grid.
//! let identity = LinearStrategy::dense(Mat::<f64>::identity(3, 3).as_ref()).unwrap();
//! let m = session.measure_linear(&identity, &data, Cost::Epsilon(0.4)).unwrap();
//! assert!(m.values.iter().all(|v| (v / m.granularity).fract() == 0.0));
//!
//! // The matrix mechanism (ε = 0.6): prefix sums answered from the identity strategy.
//! let workload = Mat::from_fn(3, 3, |i, j| if j <= i { 1.0 } else { 0.0 });
//! let strategy = Mat::<f64>::identity(3, 3);
//! let mechanism = MatrixMechanism::new(strategy.as_ref(), PrivacyBudget::pure(0.6).unwrap()).unwrap();
//! let answers = mechanism.release(workload.as_ref(), &data, &mut session).unwrap();
//! assert_eq!(answers.len(), 3);
//!
//! // The budget is spent: a further measurement is refused, nothing drawn.
//! assert!(session.measure_linear(&identity, &data, Cost::Epsilon(0.1)).is_err());
//! ```

pub mod accuracy;
pub mod calibration;
mod error;
pub mod experiments;
pub mod interrupt;
pub mod intervals;
pub mod kernel;
mod least_squares;
pub mod ledger;
pub mod mechanism;
pub mod privacy;
pub mod progress;
mod sampling;
pub mod sensitivity;
pub mod validate;

pub use accuracy::{
    StrategyEvaluation, evaluate_strategy, evaluate_strategy_gram,
    evaluate_strategy_gram_with_root, evaluate_strategy_rows, expected_per_query_squared_error,
    expected_total_squared_error, l1_obj, l2_obj, structural_squared_error, svd_lower_bound,
    svd_lower_bound_from_gram, trace_objective,
};
pub use calibration::{GaussianCalibration, NoiseCalibration, NoiseDistribution};
pub use error::{DpError, Result};
pub use kernel::{
    Contribution, Cost, KronTerm, LinearStrategy, MarginalStrategy, MeasuredStrategy, MeasuredTerm,
    Measurement, MeasurementNoise, PrivateHistogram, PrivateMarginals, Session, StreamFigures,
    StreamMechanism, StreamSpec, TotalBudget, TreeFigures, TreeSpec, TreeStream,
};
pub use mechanism::{MatrixMechanism, SupportCheck, check_support};
pub use privacy::{Delta, Epsilon, PrivacyBudget};
pub use sampling::NoiseSource;
pub use sensitivity::{sensitivity_l1, sensitivity_l2};
