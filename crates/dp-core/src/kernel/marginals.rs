//! Measurements of a multi-dimensional strategy on marginal tables.
//!
//! A term of a structured strategy (HDMM's union of Kronecker products;
//! ResidualPlanner's residual terms) usually has non-trivial factors only
//! on a few attributes `T`, every other attribute having the factor
//! `1ᵀ = [1, …, 1]`. Then `(⊗_{i∈T} A_i ⊗ ⊗_{i∉T} 1ᵀ) x = (⊗_{i∈T} A_i) x_T`
//! with `x_T` the marginal table of `x` on `T` (`x` summed over the other
//! attributes), so the term is measured on a table of `Π_{i∈T} nᵢ` cells,
//! never on the full domain (which may have 10¹² cells or more).
//!
//! # Privacy
//!
//! The tables of a [`PrivateMarginals`] are marginals of ONE dataset: one
//! record adds one to one cell of every table (the caller's contract:
//! dpmm-records builds them in a single pass over the records). Each term
//! is computed exactly from a table whose attributes contain its support,
//! so the noiseless answers are exactly `Ã x` for the full histogram `x`
//! and the measurement is the one of the stacked strategy `Ã` on `x`.
//! Its sensitivity is computed as for [`super::LinearStrategy`] unions:
//! the ones rows have column norm 1 (L1 and L2), so column `j` of term `t`
//! has norm `Π_{i∈T} ‖col_{jᵢ}(A_{t,i})‖`, and the stated sensitivity is
//! `Σ_t Π_{i∈T} Δ₁(A_{t,i})` (L1) or `(Σ_t Π_{i∈T} Δ₂(A_{t,i})²)^½` (L2),
//! at least the largest column norm of the densified `Ã` (equal for one
//! term, and for residual strategies whose columns all have one norm).
//!
//! Quantization counts only the listed factors: a 2-way term of an
//! 8-attribute domain keeps the precision of a 2-factor product.

use dp_linalg::Mat;

use std::sync::Arc;

use super::MeasuredStrategy;
use super::strategy::{QuantizedStrategy, quantize_terms};
use super::{Cost, MAX_COUNT, Measurement, NoisePlan, Session};
use crate::validate::check_matrix;
use crate::{DpError, Result};

fn invalid(name: &'static str, reason: String) -> DpError {
    DpError::InvalidParameter { name, reason }
}

/// Refuses an empty domain or an attribute of size 0.
fn check_shape(what: &'static str, shape: &[usize]) -> Result<()> {
    if shape.is_empty() || shape.contains(&0) {
        return Err(invalid(
            what,
            "the domain needs attributes of size >= 1".into(),
        ));
    }
    Ok(())
}

/// Checks that `attrs` are strictly increasing positions of `shape` and
/// returns the number of cells of their table.
fn table_cells(shape: &[usize], attrs: &[usize], what: &'static str) -> Result<usize> {
    if attrs.windows(2).any(|w| w[1] <= w[0]) || attrs.iter().any(|&a| a >= shape.len()) {
        return Err(invalid(
            what,
            format!(
                "attribute positions {attrs:?} must increase strictly within {} attributes",
                shape.len()
            ),
        ));
    }
    attrs.iter().try_fold(1usize, |acc, &a| {
        acc.checked_mul(shape[a])
            .ok_or_else(|| invalid(what, "table size overflows".into()))
    })
}

/// Marginal tables of one private dataset over a domain of attribute
/// sizes `shape`, opaque outside the kernel (no getter, no `Clone`;
/// `Debug` shows the shape and the tables' attributes only).
pub struct PrivateMarginals {
    shape: Vec<usize>,
    /// `(attribute positions, counts row-major over them)`.
    tables: Vec<(Vec<usize>, Vec<u64>)>,
    /// The most one privacy unit moves a table in L1, in counts
    /// ([`super::records::Contributions::scale`]; 1 for one record).
    scale: u64,
    /// What one count is worth in the records' units (1, or a weight's
    /// grid step: a power of two).
    unit: f64,
}

impl std::fmt::Debug for PrivateMarginals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let attrs: Vec<&Vec<usize>> = self.tables.iter().map(|(a, _)| a).collect();
        f.debug_struct("PrivateMarginals")
            .field("shape", &self.shape)
            .field("tables", &attrs)
            .field("scale", &self.scale)
            .field("unit", &self.unit)
            .finish_non_exhaustive()
    }
}

impl PrivateMarginals {
    /// Tables `(attribute positions, counts)` whose neighbours differ by
    /// one count in one cell of every table: positions strictly
    /// increasing (`[]` is the grand total), counts row-major over them
    /// (last attribute fastest), each at most [`MAX_COUNT`], no attribute
    /// set twice. For the kernel's own tests, which build such neighbours
    /// by hand: outside the kernel, tables come only from records the
    /// kernel counted ([`super::records::Counting`]), which bounds each
    /// privacy unit's contribution and states the scale.
    #[cfg(test)]
    pub(crate) fn new(shape: Vec<usize>, tables: Vec<(Vec<usize>, Vec<u64>)>) -> Result<Self> {
        Self::counted(shape, tables, 1, 1.0)
    }

    /// Tables the kernel counted, with one unit's scale and the value of
    /// one count.
    pub(crate) fn counted(
        shape: Vec<usize>,
        tables: Vec<(Vec<usize>, Vec<u64>)>,
        scale: u64,
        unit: f64,
    ) -> Result<Self> {
        if scale == 0 || !(unit.is_finite() && unit > 0.0) {
            return Err(invalid(
                "marginals",
                "a scale of 0 or a unit that is not positive".into(),
            ));
        }
        check_shape("marginals", &shape)?;
        if tables.is_empty() {
            return Err(invalid("marginals", "no tables".into()));
        }
        for (k, (attrs, counts)) in tables.iter().enumerate() {
            let cells = table_cells(&shape, attrs, "marginal table")?;
            if counts.len() != cells {
                return Err(DpError::DimensionMismatch {
                    what: format!(
                        "table on {attrs:?} has {} counts for {cells} cells",
                        counts.len()
                    ),
                });
            }
            if tables[..k].iter().any(|(a, _)| a == attrs) {
                return Err(invalid("marginals", format!("two tables on {attrs:?}")));
            }
            if counts.iter().any(|&c| c > MAX_COUNT) {
                // Neither the position nor the value: they are private.
                return Err(invalid(
                    "marginals",
                    format!("a count exceeds the supported maximum {MAX_COUNT}"),
                ));
            }
        }
        Ok(Self {
            shape,
            tables,
            scale,
            unit,
        })
    }

    /// The attribute sizes of the domain (public).
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The smallest table whose attributes contain `support`.
    fn table_for(&self, support: &[usize]) -> Option<&(Vec<usize>, Vec<u64>)> {
        self.tables
            .iter()
            .filter(|(a, _)| support.iter().all(|s| a.contains(s)))
            .min_by_key(|(_, c)| c.len())
    }

    /// The table on `support`, summed from the smallest table containing
    /// it; every cell is visited whatever its count. A sum past
    /// [`MAX_COUNT`] saturates there rather than fail: this runs after the
    /// charge, where a refusal that depends on the data would reveal it,
    /// and saturating is a contraction (each cell moves no more than its
    /// sum does), so the measurement's sensitivity still holds.
    fn marginal(&self, support: &[usize]) -> Result<Vec<u64>> {
        let (attrs, counts) = self.table_for(support).ok_or_else(|| {
            invalid(
                "marginals",
                format!("no table contains the attributes {support:?}"),
            )
        })?;
        if attrs.as_slice() == support {
            return Ok(counts.clone());
        }
        table_cells(&self.shape, support, "marginal")?;
        let mut out = sum_table(counts, attrs, &self.shape, support, u64::saturating_add);
        for c in &mut out {
            *c = (*c).min(MAX_COUNT);
        }
        Ok(out)
    }
}

/// For each cell of a table on the attributes `attrs` of a domain of
/// sizes `shape` (row-major, last attribute fastest), in order, the index
/// of its cell in the table on the attributes of `attrs` that are in
/// `keep`: summing a table along it marginalizes, reading along it
/// broadcasts a marginal back.
pub fn table_indices<'a>(
    attrs: &'a [usize],
    shape: &'a [usize],
    keep: &[usize],
) -> impl Iterator<Item = usize> + 'a {
    let sizes: Vec<usize> = attrs.iter().map(|&a| shape[a]).collect();
    // Stride in the output of each attribute of the source table (0 for
    // the attributes summed out).
    let mut stride = vec![0usize; attrs.len()];
    let mut s = 1usize;
    for (k, a) in attrs.iter().enumerate().rev() {
        if keep.contains(a) {
            stride[k] = s;
            s *= sizes[k];
        }
    }
    let cells: usize = sizes.iter().product();
    let mut index = vec![0usize; attrs.len()];
    let mut cell = 0usize;
    (0..cells).map(move |_| {
        let out = cell;
        // Advance the mixed-radix index (last attribute fastest).
        for k in (0..sizes.len()).rev() {
            index[k] += 1;
            cell += stride[k];
            if index[k] < sizes[k] {
                break;
            }
            cell -= stride[k] * sizes[k];
            index[k] = 0;
        }
        out
    })
}

/// Sums a table on the attributes `attrs` of a domain of sizes `shape`
/// down to its attributes in `keep`, with `add` as the sum.
pub fn sum_table<T: Copy + Default>(
    table: &[T],
    attrs: &[usize],
    shape: &[usize],
    keep: &[usize],
    add: impl Fn(T, T) -> T,
) -> Vec<T> {
    let cells: usize = attrs
        .iter()
        .filter(|a| keep.contains(a))
        .map(|&a| shape[a])
        .product();
    let mut out = vec![T::default(); cells];
    for (&c, k) in table.iter().zip(table_indices(attrs, shape, keep)) {
        out[k] = add(out[k], c);
    }
    out
}

/// One term `weight · ⊗ᵢ Fᵢ` of a [`MarginalStrategy`] (and of the
/// planner's strategies): factors listed only on the term's support, in
/// increasing attribute position; the attributes not listed have the
/// factor `[1, …, 1]`, as in docs/formats.md's plan file. The factors are
/// shared, so that the planner, a plan file's reader and the kernel hold
/// one copy of each matrix.
#[derive(Debug, Clone)]
pub struct KronTerm {
    /// Multiplies every row of the term.
    pub weight: f64,
    /// `(attribute position, factor rows)` in increasing position.
    pub factors: Vec<(usize, Arc<Mat<f64>>)>,
}

impl KronTerm {
    /// `weight · ⊗ᵢ Fᵢ` from owned factors `(attribute position, Fᵢ)`.
    pub fn new(weight: f64, factors: Vec<(usize, Mat<f64>)>) -> Self {
        Self {
            weight,
            factors: factors.into_iter().map(|(p, f)| (p, Arc::new(f))).collect(),
        }
    }

    /// How many factor entries it holds (as `f64`, for sizing: never
    /// overflows).
    pub fn entries(&self) -> f64 {
        self.factors
            .iter()
            .map(|(_, m)| m.nrows() as f64 * m.ncols() as f64)
            .sum()
    }
}

/// A stacked union of weighted Kronecker terms over a multi-dimensional
/// domain, each listing factors only on its support; the other attributes
/// have the factor `[1, …, 1]` (docs/formats.md's plan file). Measured on
/// marginal tables by [`Session::measure_marginals`].
#[derive(Debug, Clone)]
pub struct MarginalStrategy {
    shape: Vec<usize>,
    supports: Vec<Vec<usize>>,
    rows: usize,
    quantized: QuantizedStrategy,
    /// `quantized` as the reconstruction reads it, built once: the dry run,
    /// the figures and every measurement share it.
    measured: Arc<MeasuredStrategy>,
}

impl MarginalStrategy {
    /// Validates and quantizes `terms` (read, not copied): positions
    /// strictly increasing, each factor with `shape[position]` columns,
    /// finite and not all zero; weights finite and nonzero.
    pub fn new(shape: Vec<usize>, terms: &[KronTerm]) -> Result<Self> {
        check_shape("strategy", &shape)?;
        if terms.is_empty() {
            return Err(invalid("strategy", "has no terms".into()));
        }
        let mut supports = Vec::with_capacity(terms.len());
        let mut flat = Vec::with_capacity(terms.len());
        let mut rows = 0usize;
        let one = Mat::from_fn(1, 1, |_, _| 1.0);
        for KronTerm { weight, factors } in terms {
            let weight = *weight;
            if !(weight.is_finite() && weight != 0.0) {
                return Err(invalid(
                    "strategy weight",
                    format!("must be finite and nonzero, got {weight}"),
                ));
            }
            let support: Vec<usize> = factors.iter().map(|(p, _)| *p).collect();
            table_cells(&shape, &support, "strategy term")?;
            let mut term_rows = 1usize;
            for (p, f) in factors {
                check_matrix("strategy factor", f.as_ref().as_ref())?;
                if f.ncols() != shape[*p] {
                    return Err(DpError::DimensionMismatch {
                        what: format!(
                            "factor on attribute {p} has {} columns, the attribute {}",
                            f.ncols(),
                            shape[*p]
                        ),
                    });
                }
                if f.norm_max() == 0.0 {
                    return Err(DpError::ZeroMatrix {
                        what: "strategy factor".into(),
                    });
                }
                term_rows = term_rows
                    .checked_mul(f.nrows())
                    .ok_or_else(|| invalid("strategy", "dimensions overflow".into()))?;
            }
            rows = rows
                .checked_add(term_rows)
                .ok_or_else(|| invalid("strategy", "dimensions overflow".into()))?;
            let mats: Vec<&Mat<f64>> = if factors.is_empty() {
                vec![&one]
            } else {
                factors.iter().map(|(_, f)| f.as_ref()).collect()
            };
            supports.push(support);
            flat.push((weight, mats));
        }
        let quantized = quantize_terms(&flat)?;
        let measured = Arc::new(quantized.measured(Some(&supports)));
        Ok(Self {
            shape,
            supports,
            rows,
            quantized,
            measured,
        })
    }

    /// Number of rows (measurements).
    pub fn nrows(&self) -> usize {
        self.rows
    }

    /// The attribute sizes.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Each term's support (attribute positions).
    pub fn supports(&self) -> &[Vec<usize>] {
        &self.supports
    }

    /// The quantized strategy the kernel measures (public,
    /// data-independent).
    pub fn measured_strategy(&self) -> &MeasuredStrategy {
        &self.measured
    }
}

impl Session {
    /// Measures `strategy` on the marginal tables `data` at `cost`: each
    /// term on the table of its support, summed exactly from the smallest
    /// table that contains it (the full histogram when that is the one
    /// table). Validates and builds every table first, computes the
    /// sensitivity of the whole quantized union (see the [module
    /// documentation](self)), charges, then adds exact discrete noise; on
    /// any error before the charge nothing is spent. The measurement's
    /// `strategy` lists each term's support.
    pub fn measure_marginals(
        &mut self,
        strategy: &MarginalStrategy,
        data: &PrivateMarginals,
        cost: Cost,
    ) -> Result<Measurement> {
        if strategy.shape != data.shape {
            return Err(DpError::DimensionMismatch {
                what: format!(
                    "strategy on a domain of shape {:?}, tables on {:?}",
                    strategy.shape, data.shape
                ),
            });
        }
        let inputs = strategy
            .supports
            .iter()
            .map(|s| data.marginal(s))
            .collect::<Result<Vec<_>>>()?;
        let q = &strategy.quantized;
        // One unit moves each table by at most `scale` counts in L1: the
        // strategy's sensitivity times the scale bounds its effect.
        let plan = NoisePlan::new(q, cost, data.scale)?;
        self.charge(cost)?;
        let mut answers = Vec::with_capacity(strategy.rows);
        for (t, x) in inputs.iter().enumerate() {
            answers.extend(q.apply_term(t, x));
        }
        let m = self.add_noise(answers, q, &plan, cost, Arc::clone(&strategy.measured))?;
        Ok(m.in_units(data.unit))
    }
}

#[cfg(test)]
#[path = "marginals_tests.rs"]
mod tests;
