//! The experiment registry.

mod common;
mod mm_range_error;
mod projection_small_db;

use crate::Experiment;

/// Every experiment, in listing order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![
        Box::new(mm_range_error::RangeErrorGrowth),
        Box::new(projection_small_db::ProjectionSmallDb),
    ]
}
