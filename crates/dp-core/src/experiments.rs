//! Reproducible sessions for seeded experiments.
//!
//! A release about real people uses [`crate::Session::pure`],
//! [`crate::Session::zcdp`] or [`crate::Session::approx`], which draw from
//! operating-system entropy. The sessions here replay their noise from a
//! seed: anyone who knows it can subtract the noise, so they exist only to
//! reproduce the experiments of the papers (error distributions over many
//! hypothetical releases). [`crate::Session::is_reproducible`] tells them
//! apart, and a command-line release path refuses them.

use crate::Result;
use crate::kernel::{Session, TotalBudget, check_epsilon, check_rho};
use crate::sampling::NoiseSource;

/// Constructors of seeded sessions (experiments only).
#[derive(Debug)]
pub struct SeededSession;

impl SeededSession {
    /// A seeded session with no budget limit: every measurement is still
    /// validated and counted, none is refused for its cost. For measuring
    /// error over repeated releases.
    pub fn unlimited(seed: u64) -> Session {
        Session::with_source(None, NoiseSource::seeded(seed))
    }

    /// A seeded pure ε-DP session (tests of the accountant).
    pub fn pure(epsilon: f64, seed: u64) -> Result<Session> {
        let epsilon = check_epsilon(epsilon)?;
        Ok(Session::with_source(
            Some(TotalBudget::PureDp { epsilon }),
            NoiseSource::seeded(seed),
        ))
    }

    /// A seeded ρ-zCDP session.
    pub fn zcdp(rho: f64, seed: u64) -> Result<Session> {
        let rho = check_rho(rho)?;
        Ok(Session::with_source(
            Some(TotalBudget::Zcdp { rho }),
            NoiseSource::seeded(seed),
        ))
    }
}
