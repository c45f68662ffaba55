//! COA's entry in the optimizer registry.

use super::{Coa, CoaOptions};
use crate::PrivacyModel;
use crate::descriptor::{Descriptor, Param};
use crate::support::Completed;

/// [`Coa`] in the registry, its support repaired where the Gram's
/// rounding hides part of W ([`Completed`], unless
/// [`crate::registry::Params::support_repair`] is `Some(false)`);
/// weakened: gap tolerance 0.05, 2 Newton steps per stage and 2 dual
/// iterations.
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "coa",
    labels: &["COA"],
    description: "COA: convex optimization of the (ε,δ)-DP strategy Gram, certified duality gap",
    privacy: &[PrivacyModel::Approx],
    params: &[Param::SupportRepair],
    builder: |p| {
        if p.support_repair == Some(false) {
            Box::new(Coa::default())
        } else {
            Box::new(Completed(Box::new(Coa::default())))
        }
    },
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
