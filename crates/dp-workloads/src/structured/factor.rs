//! Per-attribute 1-D workload factors of a Kronecker product.

use std::sync::Arc;

use dp_linalg::Mat;

use crate::composite::kron;
use crate::domain::{SResult, StructuredError};
use crate::workload::{AllRange, ExplicitWorkload, Identity, Prefix, Total, Workload};

/// A 1-D workload on one attribute of size `n`: the building block of
/// Kronecker workloads (HDMM §5, "implicit" 1-D workloads).
#[derive(Debug, Clone)]
pub enum Factor {
    /// `I_n`: every value.
    Identity(usize),
    /// `1ᵀ`: the attribute summed out.
    Total(usize),
    /// The n prefix sums.
    Prefix(usize),
    /// All n(n+1)/2 ranges.
    AllRange(usize),
    /// Explicit inclusive ranges `[lo, hi]` (validated by [`Factor::ranges`]).
    Ranges {
        /// The attribute's size.
        size: usize,
        /// The ranges, in query order.
        ranges: Vec<(usize, usize)>,
    },
    /// An explicit m×n matrix (validated by [`Factor::matrix`]).
    Matrix(Arc<Mat<f64>>),
}

impl Factor {
    /// Inclusive ranges on attribute `attribute` of size `size`: each
    /// `0 ≤ lo ≤ hi < size`, at least one.
    pub fn ranges(attribute: &str, size: usize, ranges: Vec<(i128, i128)>) -> SResult<Self> {
        if ranges.is_empty() {
            return Err(StructuredError::Spec(format!(
                "attribute '{attribute}': 'ranges' is empty"
            )));
        }
        let mut out = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            if lo < 0 || hi < lo || hi >= size as i128 {
                return Err(StructuredError::BadRange {
                    attribute: attribute.to_string(),
                    lo,
                    hi,
                    size,
                });
            }
            out.push((lo as usize, hi as usize));
        }
        Ok(Self::Ranges { size, ranges: out })
    }

    /// An explicit matrix on attribute `attribute` of size `size`: `size`
    /// columns, finite entries, not all zero.
    pub fn matrix(attribute: &str, size: usize, m: Mat<f64>) -> SResult<Self> {
        if m.ncols() != size {
            return Err(StructuredError::SizeMismatch {
                attribute: attribute.to_string(),
                expected: size,
                found: m.ncols(),
            });
        }
        if m.nrows() == 0 {
            return Err(StructuredError::Spec(format!(
                "attribute '{attribute}': the factor matrix has no rows"
            )));
        }
        let mut nonzero = false;
        for j in 0..m.ncols() {
            for i in 0..m.nrows() {
                let v = m[(i, j)];
                if !v.is_finite() {
                    return Err(StructuredError::Spec(format!(
                        "attribute '{attribute}': factor entry ({i}, {j}) is {v}"
                    )));
                }
                nonzero |= v != 0.0;
            }
        }
        if !nonzero {
            return Err(StructuredError::Spec(format!(
                "attribute '{attribute}': the factor matrix is all zero"
            )));
        }
        Ok(Self::Matrix(Arc::new(m)))
    }

    /// The attribute's size n (columns).
    pub fn size(&self) -> usize {
        match self {
            Self::Identity(n) | Self::Total(n) | Self::Prefix(n) | Self::AllRange(n) => *n,
            Self::Ranges { size, .. } => *size,
            Self::Matrix(m) => m.ncols(),
        }
    }

    /// Number of queries m (rows).
    pub fn num_queries(&self) -> usize {
        match self {
            Self::Identity(n) | Self::Prefix(n) => *n,
            Self::Total(_) => 1,
            Self::AllRange(n) => n * (n + 1) / 2,
            Self::Ranges { ranges, .. } => ranges.len(),
            Self::Matrix(m) => m.nrows(),
        }
    }

    /// Whether this is `I_n`.
    pub fn is_identity(&self) -> bool {
        matches!(self, Self::Identity(_))
    }

    /// Whether this is `1ᵀ`.
    pub fn is_total(&self) -> bool {
        matches!(self, Self::Total(_))
    }

    /// A short description.
    pub fn name(&self) -> String {
        match self {
            Self::Identity(n) => format!("Identity({n})"),
            Self::Total(n) => format!("Total({n})"),
            Self::Prefix(n) => format!("Prefix({n})"),
            Self::AllRange(n) => format!("AllRange({n})"),
            Self::Ranges { size, ranges } => format!("Ranges({size}, {} ranges)", ranges.len()),
            Self::Matrix(m) => format!("Matrix({}x{})", m.nrows(), m.ncols()),
        }
    }

    /// The factor as a [`Workload`] (closed-form Grams for the implicit
    /// kinds).
    pub fn workload(&self) -> SResult<Arc<dyn Workload>> {
        let w: dp_core::Result<Arc<dyn Workload>> = match self {
            Self::Identity(n) => Identity::new(*n).map(|w| Arc::new(w) as _),
            Self::Total(n) => Total::new(*n).map(|w| Arc::new(w) as _),
            Self::Prefix(n) => Prefix::new(*n).map(|w| Arc::new(w) as _),
            Self::AllRange(n) => AllRange::new(*n).map(|w| Arc::new(w) as _),
            Self::Ranges { size, ranges } => {
                let m = Mat::from_fn(ranges.len(), *size, |i, j| {
                    let (lo, hi) = ranges[i];
                    if lo <= j && j <= hi { 1.0 } else { 0.0 }
                });
                ExplicitWorkload::new("ranges", m).map(|w| Arc::new(w) as _)
            }
            Self::Matrix(m) => {
                ExplicitWorkload::new("matrix", m.as_ref().clone()).map(|w| Arc::new(w) as _)
            }
        };
        w.map_err(|e| StructuredError::Spec(e.to_string()))
    }

    /// The factor's Gram `WᵢᵀWᵢ` (nᵢ×nᵢ).
    pub fn gram(&self) -> SResult<Mat<f64>> {
        Ok(self.workload()?.gram())
    }

    /// The factor's rows, refused past [`crate::workload::EXPLICIT_ENTRY_LIMIT`].
    pub fn explicit(&self) -> SResult<Mat<f64>> {
        self.workload()?
            .explicit()
            .ok_or(StructuredError::TooLarge {
                what: "matrix entries",
                cells: self.num_queries() as f64 * self.size() as f64,
                action: "build explicitly",
            })
    }
}

/// `⊗ mats` as a dense matrix (tests and small domains only; the caller
/// checks the size).
pub fn kron_all(mats: &[Mat<f64>]) -> Mat<f64> {
    let mut out = Mat::from_fn(1, 1, |_, _| 1.0);
    for m in mats {
        out = kron(&out, m);
    }
    out
}

/// `(⊗ᵢ Mᵢ) x` without forming the product: each `Mᵢ` (mᵢ×nᵢ) is applied
/// along axis i of `x` viewed as an n₁×…×n_d tensor in row-major order
/// (the last axis fastest). A sparse factor visits only its nonzero
/// entries, so an identity factor costs one pass over the tensor wherever
/// it stands, never `Π mᵢ · Π nᵢ`; a dense one (a pseudo-inverse, say)
/// goes through faer's matrix product, on rayon's pool when the mode's
/// work is large, since scalar loops over dense factors of a few thousand
/// entries would dominate the reconstruction of large marginal tables.
pub fn kron_matvec(mats: &[&Mat<f64>], x: &[f64]) -> SResult<Vec<f64>> {
    let mut dims: Vec<usize> = mats.iter().map(|m| m.ncols()).collect();
    let n: usize = dims.iter().product();
    if x.len() != n {
        return Err(StructuredError::Spec(format!(
            "vector of length {} for a Kronecker product on {n} cells",
            x.len()
        )));
    }
    let mut t = x.to_vec();
    for (k, m) in mats.iter().enumerate() {
        let outer: usize = dims[..k].iter().product();
        let inner: usize = dims[k + 1..].iter().product();
        let (dk, mk) = (dims[k], m.nrows());
        let len = outer
            .checked_mul(mk)
            .and_then(|l| l.checked_mul(inner))
            .ok_or(StructuredError::TooLarge {
                what: "tensor entries",
                cells: outer as f64 * mk as f64 * inner as f64,
                action: "index",
            })?;
        let mut out = Vec::new();
        out.try_reserve_exact(len)
            .map_err(|_| StructuredError::TooLarge {
                what: "tensor entries",
                cells: len as f64,
                action: "allocate",
            })?;
        out.resize(len, 0.0);
        let nnz = (0..mk)
            .map(|q| (0..dk).filter(|&j| m[(q, j)] != 0.0).count())
            .sum::<usize>();
        let mode = Mode {
            m,
            outer,
            dk,
            inner,
        };
        if dense_mode(nnz, mk, dk, inner) {
            mode.dense(&t, &mut out);
        } else {
            mode.sparse(&t, &mut out);
        }
        t = out;
        dims[k] = mk;
    }
    Ok(t)
}

/// Whether a mode product goes through the dense matrix product: a factor
/// at least a quarter full, of at least 8×8 entries, on fibres that are
/// either the last axis (one product for the whole tensor) or long enough
/// for a product per slab.
fn dense_mode(nnz: usize, mk: usize, dk: usize, inner: usize) -> bool {
    const MIN_FIBRE: usize = 16;
    mk * dk >= 64 && 4 * nnz >= mk * dk && (inner == 1 || inner >= MIN_FIBRE)
}

/// Multiply-adds of one product above which it runs on rayon's pool.
const PARALLEL_WORK: usize = 1 << 22;

/// One mode product: `M` along the middle axis of a row-major tensor of
/// shape outer × dk × inner.
struct Mode<'a> {
    m: &'a Mat<f64>,
    outer: usize,
    dk: usize,
    inner: usize,
}

impl Mode<'_> {
    /// `out ← M t` through faer's product: one `T Mᵀ` when `inner` is 1,
    /// else `M T_o` per slab.
    fn dense(&self, t: &[f64], out: &mut [f64]) {
        use dp_linalg::{MatMut, MatRef, Par, gemm_into_view};
        let (m, outer, dk, inner) = (self.m, self.outer, self.dk, self.inner);
        let mk = m.nrows();
        let par = |work: usize| {
            if work >= PARALLEL_WORK {
                Par::rayon(0)
            } else {
                Par::Seq
            }
        };
        if inner == 1 {
            let x = MatRef::from_row_major_slice(t, outer, dk);
            let dst = MatMut::from_row_major_slice_mut(out, outer, mk);
            gemm_into_view(dst, x, m.transpose(), par(outer * dk * mk));
            return;
        }
        let p = par(mk * dk * inner);
        for (slab, o) in t
            .chunks_exact(dk * inner)
            .zip(out.chunks_exact_mut(mk * inner))
        {
            let x = MatRef::from_row_major_slice(slab, dk, inner);
            let dst = MatMut::from_row_major_slice_mut(o, mk, inner);
            gemm_into_view(dst, m.as_ref(), x, p);
        }
    }

    /// `out ← M t` visiting only M's nonzero entries; `out` starts at zero.
    fn sparse(&self, t: &[f64], out: &mut [f64]) {
        let (m, outer, dk, inner) = (self.m, self.outer, self.dk, self.inner);
        let mk = m.nrows();
        let nonzero: Vec<Vec<(usize, f64)>> = (0..mk)
            .map(|q| {
                (0..dk)
                    .map(|j| (j, m[(q, j)]))
                    .filter(|&(_, a)| a != 0.0)
                    .collect()
            })
            .collect();
        for o in 0..outer {
            let src = &t[o * dk * inner..(o + 1) * dk * inner];
            let dst = &mut out[o * mk * inner..(o + 1) * mk * inner];
            for (q, entries) in nonzero.iter().enumerate() {
                let row = &mut dst[q * inner..(q + 1) * inner];
                for &(j, a) in entries {
                    let col = &src[j * inner..(j + 1) * inner];
                    for (r, c) in row.iter_mut().zip(col) {
                        *r += a * c;
                    }
                }
            }
        }
    }
}
