//! Noise samplers and the random source they draw from.
//!
//! The source is always an explicit parameter. [`NoiseSource::default`]
//! seeds ChaCha20 from operating-system entropy and is the only constructor
//! to use when releasing answers about real people; [`NoiseSource::seeded`]
//! is for reproducible experiments, and reports its seed.
//!
//! Known limitation: the samplers use IEEE floating point (Laplace as a
//! difference of two exponentials, Gaussian by the ziggurat of
//! `rand_distr`). Floating-point noise leaks through its least significant
//! bits (Mironov, CCS 2012); a deployment facing that adversary should
//! snap or discretize the outputs.

use dp_linalg::{Cholesky, Mat, MatRef, SymmetricEigen};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, Exp1, StandardNormal};

use crate::validate::check_symmetric;
use crate::{DpError, Result};

/// A ChaCha20 generator, seeded either from the operating system (the
/// default, for real releases) or from a printed seed (experiments).
#[derive(Debug, Clone)]
pub struct NoiseSource {
    rng: ChaCha20Rng,
    seed: Option<u64>,
}

impl Default for NoiseSource {
    /// Seeds from operating-system entropy. Use this for any release of
    /// answers about real data.
    fn default() -> Self {
        Self::from_os_entropy()
    }
}

impl NoiseSource {
    /// Seeds from operating-system entropy (same as `default()`).
    pub fn from_os_entropy() -> Self {
        Self {
            rng: ChaCha20Rng::from_os_rng(),
            seed: None,
        }
    }

    /// A reproducible generator for experiments. Never use it to release
    /// answers about real people: anyone who knows the seed can subtract
    /// the noise.
    pub fn seeded(seed: u64) -> Self {
        Self {
            rng: ChaCha20Rng::seed_from_u64(seed),
            seed: Some(seed),
        }
    }

    /// The seed, when the generator is a reproducible one.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }
}

impl RngCore for NoiseSource {
    fn next_u32(&mut self) -> u32 {
        self.rng.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.rng.fill_bytes(dst)
    }
}

/// One draw of Laplace(0, `scale`): density `exp(−|z|/b) / (2b)`, variance
/// `2b²`, drawn as `b (E₁ − E₂)` with independent standard exponentials.
pub fn laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    let e1: f64 = Exp1.sample(rng);
    let e2: f64 = Exp1.sample(rng);
    scale * (e1 - e2)
}

/// One draw of N(0, `sigma`²).
pub fn gaussian<R: Rng + ?Sized>(rng: &mut R, sigma: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    sigma * z
}

/// The multivariate normal `N(0, Σ)` for a symmetric positive
/// semidefinite `Σ`, sampled as `F z` with `F Fᵀ = Σ` and `z` standard
/// normal. `F` is the Cholesky factor when `Σ ≻ 0`, otherwise
/// `U diag(√λ)` from the eigendecomposition (for singular `Σ`).
#[derive(Debug, Clone)]
pub struct MultivariateGaussian {
    factor: Mat<f64>,
}

impl MultivariateGaussian {
    /// Validates `Σ` (square, finite, symmetric, positive semidefinite up
    /// to rounding) and factors it.
    pub fn new(covariance: MatRef<'_, f64>) -> Result<Self> {
        check_symmetric("covariance", covariance)?;
        let n = covariance.nrows();
        if let Ok(chol) = Cholesky::factor(covariance) {
            return Ok(Self {
                factor: chol.lower().to_owned(),
            });
        }
        let eig = SymmetricEigen::new(covariance)?;
        let lmax = eig.values.iter().copied().fold(0.0, f64::max);
        let tol = (n as f64) * f64::EPSILON * lmax.max(f64::MIN_POSITIVE) * 16.0;
        if let Some(&bad) = eig.values.iter().find(|&&l| l < -tol) {
            return Err(DpError::InvalidParameter {
                name: "covariance",
                reason: format!("not positive semidefinite (eigenvalue {bad:.3e})"),
            });
        }
        let factor = Mat::from_fn(n, n, |i, j| {
            eig.vectors[(i, j)] * eig.values[j].max(0.0).sqrt()
        });
        Ok(Self { factor })
    }

    /// Dimension of the distribution.
    pub fn dim(&self) -> usize {
        self.factor.nrows()
    }

    /// One draw.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        let n = self.dim();
        let z: Vec<f64> = (0..n).map(|_| StandardNormal.sample(rng)).collect();
        (0..n)
            .map(|i| (0..n).map(|k| self.factor[(i, k)] * z[k]).sum())
            .collect()
    }
}
