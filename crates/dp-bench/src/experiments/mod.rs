//! The experiment registry.

mod common;
mod mm_range_error;

use crate::Experiment;

/// Every experiment, in listing order.
pub fn all() -> Vec<Box<dyn Experiment>> {
    vec![Box::new(mm_range_error::RangeErrorGrowth)]
}
