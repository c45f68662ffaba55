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
use crate::kernel::{Session, SessionBudget, check_epsilon, check_rho};
use crate::sampling::NoiseSource;

/// Constructors of seeded sessions (experiments only).
#[derive(Debug)]
pub struct SeededSession;

impl SeededSession {
    /// A seeded session with no budget limit: every measurement is still
    /// validated and counted, none is refused for its cost. For measuring
    /// error over repeated releases.
    pub fn unlimited(seed: u64) -> Session {
        Session::with_source(SessionBudget::Unlimited, NoiseSource::seeded(seed))
    }

    /// A seeded pure ε-DP session (tests of the accountant).
    pub fn pure(epsilon: f64, seed: u64) -> Result<Session> {
        let epsilon = check_epsilon(epsilon)?;
        Ok(Session::with_source(
            SessionBudget::PureDp { epsilon },
            NoiseSource::seeded(seed),
        ))
    }

    /// A seeded ρ-zCDP session.
    pub fn zcdp(rho: f64, seed: u64) -> Result<Session> {
        let rho = check_rho(rho)?;
        Ok(Session::with_source(
            SessionBudget::Zcdp { rho },
            NoiseSource::seeded(seed),
        ))
    }
}

/// Deliberately broken sessions, for the privacy audit only (`cargo
/// xtask audit --broken …`), which must catch them. Compiled only with the
/// `broken-mechanisms` feature; every session here is seeded and unlimited
/// ([`crate::Session::is_reproducible`]), so no release path takes one.
#[cfg(feature = "broken-mechanisms")]
pub mod broken {
    use crate::kernel::{Fault, Session};

    /// An unlimited seeded session whose kernel calibrates every
    /// measurement's noise to half the true sensitivity (so an ε-charged
    /// Laplace measurement is 2ε-DP, a ρ-charged Gaussian one 4ρ-zCDP).
    pub fn halved_sensitivity(seed: u64) -> Session {
        super::SeededSession::unlimited(seed).with_fault(Fault::HalvedSensitivity)
    }

    /// An unlimited seeded session whose source is rewound to `seed` before
    /// every measurement: two measurements of the same shape draw the same
    /// noise, as with a cloned source, and their difference is exact.
    pub fn reused_noise(seed: u64) -> Session {
        super::SeededSession::unlimited(seed).with_fault(Fault::ReusedNoise(seed))
    }
}
