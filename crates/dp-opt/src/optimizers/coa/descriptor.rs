//! COA's entry in the optimizer registry.

use super::{Coa, CoaOptions};
use crate::PrivacyModel;
use crate::descriptor::Descriptor;
use crate::support::Completed;

/// [`Coa`] in the registry, its support repaired where the Gram's
/// rounding hides part of W ([`Completed`]); weakened: gap tolerance
/// 0.05, 2 Newton steps per stage and 2 dual iterations.
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "coa",
    labels: &["COA"],
    description: "COA: convex optimization of the (ε,δ)-DP strategy Gram, certified duality gap",
    privacy: &[PrivacyModel::Approx],
    params: &[],
    builder: |_| Box::new(Completed(Box::new(Coa::default()))),
    weakened: Some(|| {
        Box::new(Coa {
            options: CoaOptions {
                gap_tolerance: 0.05,
                max_newton_steps: 2,
                dual_iterations: 2,
                ..CoaOptions::default()
            },
        })
    }),
};
