//! Workloads built from others without building rows: Kronecker products
//! (multi-dimensional domains), weighted unions (stacked query sets) and
//! k-way marginals (HDMM's implicit representations).

use std::sync::Arc;

use dp_core::{DpError, Result};
use dp_linalg::Mat;

use crate::workload::{Workload, check_x, fits};

/// `W₁ ⊗ W₂ ⊗ … ⊗ W_d` on a domain of shape `(n₁, …, n_d)` flattened in C
/// order (the first factor's index varies slowest). A query picks one
/// query of each factor; `(⊗Wᵢ)ᵀ(⊗Wᵢ) = ⊗(WᵢᵀWᵢ)`, column norms multiply.
#[derive(Debug, Clone)]
pub struct Kronecker {
    factors: Vec<Arc<dyn Workload>>,
}

impl Kronecker {
    /// The product of `factors` (at least one).
    pub fn new(factors: Vec<Arc<dyn Workload>>) -> Result<Self> {
        if factors.is_empty() {
            return Err(DpError::InvalidParameter {
                name: "Kronecker factors",
                reason: "need at least one factor".into(),
            });
        }
        let n: Option<usize> = factors
            .iter()
            .try_fold(1usize, |acc, f| acc.checked_mul(f.domain_size()));
        if n.is_none() {
            return Err(DpError::InvalidParameter {
                name: "Kronecker factors",
                reason: "domain size overflows".into(),
            });
        }
        Ok(Self { factors })
    }

    /// The factors.
    pub fn factors(&self) -> &[Arc<dyn Workload>] {
        &self.factors
    }
}

/// Kronecker product of two dense matrices.
pub fn kron(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    let (br, bc) = (b.nrows(), b.ncols());
    Mat::from_fn(a.nrows() * br, a.ncols() * bc, |i, j| {
        a[(i / br, j / bc)] * b[(i % br, j % bc)]
    })
}

fn kron_vec(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .flat_map(|&x| b.iter().map(move |&y| x * y))
        .collect()
}

impl Workload for Kronecker {
    fn name(&self) -> String {
        self.factors
            .iter()
            .map(|f| f.name())
            .collect::<Vec<_>>()
            .join(" ⊗ ")
    }
    fn domain_size(&self) -> usize {
        self.factors.iter().map(|f| f.domain_size()).product()
    }
    fn num_queries(&self) -> usize {
        self.factors.iter().map(|f| f.num_queries()).product()
    }
    fn gram(&self) -> Mat<f64> {
        let mut g = self.factors[0].gram();
        for f in &self.factors[1..] {
            g = kron(&g, &f.gram());
        }
        g
    }
    fn column_l1_norms(&self) -> Vec<f64> {
        let mut v = self.factors[0].column_l1_norms();
        for f in &self.factors[1..] {
            v = kron_vec(&v, &f.column_l1_norms());
        }
        v
    }
    fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
        check_x(self, x)?;
        // Apply each factor along its axis of the C-ordered tensor.
        let mut dims: Vec<usize> = self.factors.iter().map(|f| f.domain_size()).collect();
        let mut t = x.to_vec();
        for (k, f) in self.factors.iter().enumerate() {
            let outer: usize = dims[..k].iter().product();
            let inner: usize = dims[k + 1..].iter().product();
            let (dk, mk) = (dims[k], f.num_queries());
            let mut out = vec![0.0; outer * mk * inner];
            let mut fiber = vec![0.0; dk];
            for o in 0..outer {
                for i in 0..inner {
                    for (j, v) in fiber.iter_mut().enumerate() {
                        *v = t[(o * dk + j) * inner + i];
                    }
                    let ans = f.answer(&fiber)?;
                    for (q, a) in ans.into_iter().enumerate() {
                        out[(o * mk + q) * inner + i] = a;
                    }
                }
            }
            t = out;
            dims[k] = mk;
        }
        Ok(t)
    }
    fn explicit(&self) -> Option<Mat<f64>> {
        if !fits(self.num_queries(), self.domain_size()) {
            return None;
        }
        let mut w = self.factors[0].explicit()?;
        for f in &self.factors[1..] {
            w = kron(&w, &f.explicit()?);
        }
        Some(w)
    }
}

/// The weighted union `[c₁W₁; c₂W₂; …]` of workloads on the same domain:
/// `WᵀW = Σ cᵢ² WᵢᵀWᵢ`.
#[derive(Debug, Clone)]
pub struct Union {
    parts: Vec<(f64, Arc<dyn Workload>)>,
}

impl Union {
    /// Stacks weighted parts (at least one; same domain; finite non-zero
    /// weights).
    pub fn new(parts: Vec<(f64, Arc<dyn Workload>)>) -> Result<Self> {
        let Some((_, first)) = parts.first() else {
            return Err(DpError::InvalidParameter {
                name: "union parts",
                reason: "need at least one workload".into(),
            });
        };
        let n = first.domain_size();
        for (c, w) in &parts {
            if w.domain_size() != n {
                return Err(DpError::DimensionMismatch {
                    what: format!("union of workloads on {n} and {} cells", w.domain_size()),
                });
            }
            if !(c.is_finite() && *c != 0.0) {
                return Err(DpError::InvalidParameter {
                    name: "union weight",
                    reason: format!("must be finite and non-zero, got {c}"),
                });
            }
        }
        Ok(Self { parts })
    }
}

impl Workload for Union {
    fn name(&self) -> String {
        let names: Vec<String> = self.parts.iter().map(|(_, w)| w.name()).collect();
        format!("Union[{}]", names.join(", "))
    }
    fn domain_size(&self) -> usize {
        self.parts[0].1.domain_size()
    }
    fn num_queries(&self) -> usize {
        self.parts.iter().map(|(_, w)| w.num_queries()).sum()
    }
    fn gram(&self) -> Mat<f64> {
        let n = self.domain_size();
        let mut g = Mat::zeros(n, n);
        for (c, w) in &self.parts {
            g += w.gram() * (c * c);
        }
        g
    }
    fn column_l1_norms(&self) -> Vec<f64> {
        let mut v = vec![0.0; self.domain_size()];
        for (c, w) in &self.parts {
            for (acc, x) in v.iter_mut().zip(w.column_l1_norms()) {
                *acc += c.abs() * x;
            }
        }
        v
    }
    fn answer(&self, x: &[f64]) -> Result<Vec<f64>> {
        check_x(self, x)?;
        let mut out = Vec::with_capacity(self.num_queries());
        for (c, w) in &self.parts {
            out.extend(w.answer(x)?.into_iter().map(|a| c * a));
        }
        Ok(out)
    }
    fn explicit(&self) -> Option<Mat<f64>> {
        if !fits(self.num_queries(), self.domain_size()) {
            return None;
        }
        let mut w = Mat::zeros(self.num_queries(), self.domain_size());
        let mut row = 0;
        for (c, part) in &self.parts {
            let p = part.explicit()?;
            for i in 0..p.nrows() {
                for j in 0..p.ncols() {
                    w[(row + i, j)] = c * p[(i, j)];
                }
            }
            row += p.nrows();
        }
        Some(w)
    }
}
