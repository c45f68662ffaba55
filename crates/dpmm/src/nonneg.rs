//! Non-negative, consistent marginal tables from a release's unbiased
//! answers, by post-processing alone (no further budget).
//!
//! The answers `a` to a workload of marginals are consistent: they lie in
//! `C = range(W)`, the tables of some (signed) data vector, so every shared
//! sub-marginal agrees. Some are negative. The estimate here is the
//! Euclidean projection of `a` onto `C ∩ K`, `K` the non-negative orthant:
//! the closest set of tables that are both consistent and non-negative
//! ("local non-negativity": each table is non-negative, as in Mullins et
//! al., NeurIPS 2024, rather than a non-negative data vector over the full
//! domain, which would cost the domain's size). Because the true tables
//! lie in `C ∩ K` and projection onto a closed convex set is non-expansive,
//! the exact projection is never further from the truth than the unbiased
//! answers: its total squared error is at most theirs, on every release.
//! Dykstra's iterates reach it in the limit; the iteration cap stops them
//! earlier on rare cases, and then the warning and the sidecar's `clipped`
//! say how far the last iterate is from consistent.
//! What is lost is unbiasedness (small cells are pulled up on average).
//!
//! The projection is computed by Dykstra's alternating projections between
//! `C` (a subspace: no correction term needed) and `K` (clipping). The
//! projection onto `C` has a closed form in the residual basis of the
//! domain, `WᵀW = Σ_T λ_T P_T` with `λ_T = Σ_{S ⊇ T} Π_{j∉S} n_j` over the
//! workload's marginals `S`: each table `t̂_S = Σ_{T⊆S} (Π_{j∉S} n_j / λ_T)
//! z_T`, where `z_T = Σ_{S'⊇T} C_T mean_{S'∖T}(t_{S'})` (`C_T` centres
//! every axis of `T`). It costs `Σ_S 2^{|S|} n_S` operations: linear in the
//! answers, never in the full domain.

use std::collections::HashMap;

use dp_workloads::structured::{AttrSet, Factor, StructuredWorkload};

use crate::{Error, Result};

/// One marginal table of the workload: its attributes (ascending, as the
/// answers list them, the last fastest), their sizes, and where its
/// answers start.
#[derive(Debug, Clone)]
struct Table {
    attributes: Vec<usize>,
    sizes: Vec<usize>,
    start: usize,
    len: usize,
}

/// A workload of marginals, as the projection needs it.
#[derive(Debug, Clone)]
pub struct Marginals {
    tables: Vec<Table>,
    /// `ln Π_{j∉S} n_j` of each table.
    ln_outside: Vec<f64>,
    /// `ln λ_T` of every residual set `T` a table contains.
    ln_lambda: HashMap<AttrSet, f64>,
    answers: usize,
    /// `Σ_S 2^|S| n_S`: the cost of one projection onto the consistent
    /// tables.
    work: f64,
}

/// The most a workload's projection may cost per iteration.
const MAX_WORK: f64 = 2e9;

/// The most all iterations of a projection may cost together: the
/// iteration cap is this over the cost of one (at least 100).
const TOTAL_WORK: f64 = 2e10;

/// How a projection ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Projection {
    /// Dykstra iterations taken.
    pub iterations: usize,
    /// The most the final projection onto the constraints moved one
    /// entry of the last consistent iterate: for a release, its most
    /// negative entry (clipped to 0); for running counts, the largest
    /// change of the monotone fit. The size of the inconsistency left.
    pub clipped: f64,
}

/// `ln Σ exp(xᵢ)`, stable.
fn log_sum_exp(xs: &[f64]) -> f64 {
    let top = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    top + xs.iter().map(|x| (x - top).exp()).sum::<f64>().ln()
}

impl Marginals {
    /// The workload's tables, when every product is a marginal (identity
    /// or total on each attribute); `Workload` otherwise.
    pub fn of(workload: &StructuredWorkload) -> Result<Self> {
        let shape = workload.domain().shape();
        let ln_n: Vec<f64> = shape.iter().map(|&n| (n as f64).ln()).collect();
        let mut tables = Vec::new();
        let mut start = 0;
        for (_, factors) in workload.products() {
            let mut attributes = Vec::new();
            for (a, f) in factors.iter().enumerate() {
                match f {
                    Factor::Identity(_) => attributes.push(a),
                    Factor::Total(_) => {}
                    _ => {
                        return Err(Error::Workload(
                            "non-negative tables need a workload of marginals only (a product \
                             has a prefix, range or matrix factor)"
                                .into(),
                        ));
                    }
                }
            }
            let sizes: Vec<usize> = attributes.iter().map(|&a| shape[a]).collect();
            let len = sizes.iter().product();
            tables.push(Table {
                attributes,
                sizes,
                start,
                len,
            });
            start += len;
        }
        // The projection's cost per iteration, Σ_S 2^|S| n_S, is refused
        // past a bound (a marginal on many attributes has exponentially
        // many residual sets) before anything is spent.
        let work: f64 = tables
            .iter()
            .map(|t| 2f64.powi(t.attributes.len() as i32) * t.len as f64)
            .sum();
        if work > MAX_WORK {
            return Err(Error::BadInput(format!(
                "non-negative tables: the projection would cost {work:.3e} operations per \
                 iteration (Σ over the marginals of 2^attributes × cells), more than {MAX_WORK:e}"
            )));
        }
        let total_ln: f64 = ln_n.iter().sum();
        let ln_outside: Vec<f64> = tables
            .iter()
            .map(|t| total_ln - t.attributes.iter().map(|&a| ln_n[a]).sum::<f64>())
            .collect();
        let mut terms: HashMap<AttrSet, Vec<f64>> = HashMap::new();
        for (t, &ln) in tables.iter().zip(&ln_outside) {
            for sub in AttrSet::from_members(t.attributes.iter().copied()).subsets() {
                terms.entry(sub).or_default().push(ln);
            }
        }
        let ln_lambda = terms
            .into_iter()
            .map(|(set, lns)| (set, log_sum_exp(&lns)))
            .collect();
        Ok(Self {
            tables,
            ln_outside,
            ln_lambda,
            answers: start,
            work,
        })
    }

    /// The iterations [`Self::project_nonneg`] may take on these tables
    /// within the work bound: `max_iterations`, fewer for large ones.
    pub fn iteration_cap(&self, max_iterations: usize) -> usize {
        let within = (TOTAL_WORK / self.work.max(1.0)).max(100.0);
        max_iterations.min(within as usize)
    }

    /// The number of answers the tables hold.
    pub fn len(&self) -> usize {
        self.answers
    }

    /// Whether they hold none.
    pub fn is_empty(&self) -> bool {
        self.answers == 0
    }

    /// The Euclidean projection of the answers `a` onto the consistent
    /// tables, `W (WᵀW)⁺ Wᵀ a` (the module doc's closed form).
    pub fn project_consistent(&self, a: &[f64]) -> Vec<f64> {
        let mut z: HashMap<AttrSet, Vec<f64>> = HashMap::new();
        for t in &self.tables {
            let table = &a[t.start..t.start + t.len];
            for (sub, positions) in Self::subsets_of(t) {
                let residual = z
                    .entry(sub)
                    .or_insert_with(|| vec![0.0; positions.iter().map(|&k| t.sizes[k]).product()]);
                let mean = marginal_mean(table, &t.sizes, &positions);
                let centred = centre(
                    mean,
                    &positions.iter().map(|&k| t.sizes[k]).collect::<Vec<_>>(),
                );
                for (r, c) in residual.iter_mut().zip(centred) {
                    *r += c;
                }
            }
        }
        let mut out = vec![0.0; self.answers];
        for (t, &ln_out) in self.tables.iter().zip(&self.ln_outside) {
            let table = &mut out[t.start..t.start + t.len];
            for (sub, positions) in Self::subsets_of(t) {
                let coefficient = (ln_out - self.ln_lambda[&sub]).exp();
                broadcast_add(table, &t.sizes, &positions, &z[&sub], coefficient);
            }
        }
        out
    }

    /// Every residual set of table `t`: the set and the positions of its
    /// attributes within the table.
    fn subsets_of(t: &Table) -> Vec<(AttrSet, Vec<usize>)> {
        AttrSet::from_members(0..t.attributes.len())
            .subsets()
            .map(|local| {
                let positions: Vec<usize> = local.members().collect();
                let set = positions.iter().map(|&k| t.attributes[k]).collect();
                (set, positions)
            })
            .collect()
    }

    /// The non-negative consistent tables closest to `a` (Euclidean),
    /// by Dykstra's algorithm: stops once the consistent iterate's most
    /// negative entry is within `tolerance` of 0 and clips it, or after
    /// `max_iterations`.
    pub fn project_nonneg(
        &self,
        a: &[f64],
        tolerance: f64,
        max_iterations: usize,
    ) -> (Vec<f64>, Projection) {
        let mut y = self.project_consistent(a);
        let mut q = vec![0.0; y.len()];
        let mut iterations = 0;
        loop {
            let low = y.iter().copied().fold(0.0, f64::min);
            if low >= -tolerance || iterations >= max_iterations {
                for v in &mut y {
                    *v = v.max(0.0);
                }
                return (
                    y,
                    Projection {
                        iterations,
                        clipped: -low,
                    },
                );
            }
            // x = P_K(y + q); q = y + q − x; y = P_C(x).
            let x: Vec<f64> = y.iter().zip(&q).map(|(v, c)| (v + c).max(0.0)).collect();
            for ((c, v), xv) in q.iter_mut().zip(&y).zip(&x) {
                *c += v - xv;
            }
            y = self.project_consistent(&x);
            iterations += 1;
        }
    }
}

impl Marginals {
    /// The iterations [`Self::project_running`] may take on `steps` steps
    /// of these tables within the work bound (at least 10).
    pub fn running_iteration_cap(&self, steps: usize, max_iterations: usize) -> usize {
        let within = (TOTAL_WORK / (self.work.max(1.0) * steps.max(1) as f64)).max(10.0);
        max_iterations.min(within as usize)
    }

    /// Whether ten iterations of [`Self::project_running`] on `steps`
    /// steps stay within the work bound (checked before a stream's
    /// charge, so that the projection after it is bounded).
    pub fn running_fits(&self, steps: usize) -> bool {
        self.work * steps as f64 * 10.0 <= TOTAL_WORK
    }

    /// Running counts (`steps` rows of these tables' answers, step-major)
    /// projected onto the set where every step's tables are consistent and
    /// every count is non-negative and non-decreasing in time, by
    /// Dykstra's algorithm between the consistent tables (a subspace,
    /// step by step) and the non-negative non-decreasing series (a convex
    /// cone, query by query: the pool-adjacent-violators fit, clipped at
    /// 0). Stops once the consistent iterate is within `tolerance` of
    /// non-negative and non-decreasing, or after `max_iterations`, and
    /// returns that iterate's projection onto the cone: every series is
    /// then exactly non-negative and non-decreasing, and its tables agree
    /// to within about [`Projection::clipped`] per cell summed.
    pub fn project_running(
        &self,
        running: &[f64],
        steps: usize,
        tolerance: f64,
        max_iterations: usize,
    ) -> (Vec<f64>, Projection) {
        let m = self.answers;
        let consistent = |x: &[f64]| -> Vec<f64> {
            x.chunks_exact(m.max(1))
                .flat_map(|row| self.project_consistent(row))
                .collect()
        };
        let mut y = consistent(running);
        let mut q = vec![0.0; y.len()];
        let mut iterations = 0;
        loop {
            let cone = monotone_nonneg(&y, steps, m);
            let gap = y
                .iter()
                .zip(&cone)
                .fold(0.0f64, |g, (a, b)| g.max((a - b).abs()));
            if gap <= tolerance || iterations >= max_iterations {
                return (
                    cone,
                    Projection {
                        iterations,
                        clipped: gap,
                    },
                );
            }
            // x = P_K(y + q); q = y + q − x; y = P_C(x).
            let shifted: Vec<f64> = y.iter().zip(&q).map(|(v, c)| v + c).collect();
            let x = monotone_nonneg(&shifted, steps, m);
            for ((c, v), xv) in q.iter_mut().zip(&shifted).zip(&x) {
                *c = v - xv;
            }
            y = consistent(&x);
            iterations += 1;
        }
    }
}

/// Each of the `m` series of `x` (`steps` rows of `m`, step-major)
/// projected onto the non-negative non-decreasing sequences: the
/// pool-adjacent-violators fit (the least-squares non-decreasing
/// sequence), then clipped at 0, which is the projection onto both.
fn monotone_nonneg(x: &[f64], steps: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    // Blocks of (mean, length).
    let mut blocks: Vec<(f64, usize)> = Vec::with_capacity(steps);
    for q in 0..m {
        blocks.clear();
        for t in 0..steps {
            let mut block = (x[t * m + q], 1usize);
            while let Some(&(mean, len)) = blocks.last() {
                if mean <= block.0 {
                    break;
                }
                blocks.pop();
                let n = len + block.1;
                block = ((mean * len as f64 + block.0 * block.1 as f64) / n as f64, n);
            }
            blocks.push(block);
        }
        let mut t = 0;
        for &(mean, len) in &blocks {
            for _ in 0..len {
                out[t * m + q] = mean.max(0.0);
                t += 1;
            }
        }
    }
    out
}

/// The strides of a row-major table of `sizes` (the last fastest).
fn strides(sizes: &[usize]) -> Vec<usize> {
    let mut out = vec![1; sizes.len()];
    for k in (0..sizes.len().saturating_sub(1)).rev() {
        out[k] = out[k + 1] * sizes[k + 1];
    }
    out
}

/// The mean of `table` (row-major over `sizes`) over every axis not in
/// `keep`: a table over the kept axes, row-major.
fn marginal_mean(table: &[f64], sizes: &[usize], keep: &[usize]) -> Vec<f64> {
    let kept: Vec<usize> = keep.iter().map(|&k| sizes[k]).collect();
    let out_strides = strides(&kept);
    let mut out = vec![0.0; kept.iter().product()];
    let mut index = vec![0usize; sizes.len()];
    for &v in table {
        let o: usize = keep
            .iter()
            .zip(&out_strides)
            .map(|(&k, s)| index[k] * s)
            .sum();
        out[o] += v;
        for k in (0..sizes.len()).rev() {
            index[k] += 1;
            if index[k] < sizes[k] {
                break;
            }
            index[k] = 0;
        }
    }
    let summed = table.len() / out.len().max(1);
    for v in &mut out {
        *v /= summed as f64;
    }
    out
}

/// `table` (row-major over `sizes`) with every axis centred: `⊗(I − J/n)`.
fn centre(mut table: Vec<f64>, sizes: &[usize]) -> Vec<f64> {
    let st = strides(sizes);
    for (axis, &n) in sizes.iter().enumerate() {
        let stride = st[axis];
        let block = stride * n;
        for base in (0..table.len()).step_by(block) {
            for offset in 0..stride {
                let cells = (0..n).map(|i| base + offset + i * stride);
                let mean = cells.clone().map(|c| table[c]).sum::<f64>() / n as f64;
                for c in cells {
                    table[c] -= mean;
                }
            }
        }
    }
    table
}

/// Adds `coefficient · z` (a table over the axes `positions` of the table)
/// to every cell of `table`, broadcast over its other axes.
fn broadcast_add(
    table: &mut [f64],
    sizes: &[usize],
    positions: &[usize],
    z: &[f64],
    coefficient: f64,
) {
    let kept: Vec<usize> = positions.iter().map(|&k| sizes[k]).collect();
    let z_strides = strides(&kept);
    let mut index = vec![0usize; sizes.len()];
    for cell in table.iter_mut() {
        let o: usize = positions
            .iter()
            .zip(&z_strides)
            .map(|(&k, s)| index[k] * s)
            .sum();
        *cell += coefficient * z[o];
        for k in (0..sizes.len()).rev() {
            index[k] += 1;
            if index[k] < sizes[k] {
                break;
            }
            index[k] = 0;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;
    use dp_linalg::Mat;
    use dp_workloads::spec::parse_spec;
    use std::path::Path;

    const SPEC: &str = r#"{"domain": [{"name": "a", "size": 2}, {"name": "b", "size": 3}, {"name": "c", "size": 4}],
      "queries": [{"marginal": []}, {"marginal": ["a"]}, {"marginal": ["a", "b"]}, {"marginal": ["b", "c"]}]}"#;

    fn workload() -> StructuredWorkload {
        parse_spec(SPEC, Path::new(".")).unwrap()
    }

    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 20.0 - 10.0
            })
            .collect()
    }

    /// The projection agrees with the dense `W (WᵀW)⁺ Wᵀ` on noisy tables,
    /// is the identity on consistent ones, and is idempotent.
    #[test]
    fn the_closed_form_is_the_dense_projection() {
        let w = workload();
        let dense: Mat<f64> = w.dense_matrix().unwrap();
        let m = Marginals::of(&w).unwrap();
        assert_eq!(m.len(), dense.nrows());
        let gram = dp_linalg::gram(dense.as_ref(), dp_linalg::Par::Seq);
        let pinv = dp_linalg::pseudo_inverse_symmetric(gram.as_ref(), None).unwrap();
        let a = noise(m.len(), 3);
        let mut wta = vec![0.0; dense.ncols()];
        for i in 0..dense.nrows() {
            for j in 0..dense.ncols() {
                wta[j] += dense[(i, j)] * a[i];
            }
        }
        let x: Vec<f64> = (0..dense.ncols())
            .map(|i| (0..dense.ncols()).map(|j| pinv[(i, j)] * wta[j]).sum())
            .collect();
        let expected: Vec<f64> = (0..dense.nrows())
            .map(|i| (0..dense.ncols()).map(|j| dense[(i, j)] * x[j]).sum())
            .collect();
        let got = m.project_consistent(&a);
        for (g, e) in got.iter().zip(&expected) {
            assert!((g - e).abs() <= 1e-9 * (1.0 + e.abs()), "{g} vs {e}");
        }
        let again = m.project_consistent(&got);
        for (g, e) in again.iter().zip(&got) {
            assert!((g - e).abs() <= 1e-9 * (1.0 + e.abs()));
        }
    }

    /// On tables with negative cells the result is non-negative,
    /// consistent (it is its own projection, up to the clipping) and no
    /// further from any non-negative consistent point than the input.
    #[test]
    fn the_result_is_non_negative_consistent_and_no_further_from_the_truth() {
        let w = workload();
        let dense: Mat<f64> = w.dense_matrix().unwrap();
        let m = Marginals::of(&w).unwrap();
        // True tables of a data vector with small and empty cells.
        let data: Vec<f64> = (0..dense.ncols())
            .map(|j| [0.0, 1.0, 3.0, 12.0][j % 4])
            .collect();
        let truth: Vec<f64> = (0..dense.nrows())
            .map(|i| (0..dense.ncols()).map(|j| dense[(i, j)] * data[j]).sum())
            .collect();
        for seed in 0..20 {
            let noisy = m.project_consistent(
                &truth
                    .iter()
                    .zip(noise(m.len(), seed))
                    .map(|(t, e)| t + e)
                    .collect::<Vec<_>>(),
            );
            assert!(
                noisy.iter().any(|&v| v < 0.0),
                "seed {seed}: nothing to fix"
            );
            let (fixed, how) = m.project_nonneg(&noisy, 1e-10, 100_000);
            assert!(fixed.iter().all(|&v| v >= 0.0));
            assert!(how.clipped <= 1e-10, "{how:?}");
            let back = m.project_consistent(&fixed);
            for (b, f) in back.iter().zip(&fixed) {
                assert!((b - f).abs() <= 1e-8, "seed {seed}: {b} vs {f}");
            }
            let dist = |x: &[f64]| {
                x.iter()
                    .zip(&truth)
                    .map(|(a, b)| (a - b).powi(2))
                    .sum::<f64>()
            };
            assert!(dist(&fixed) <= dist(&noisy) + 1e-9, "seed {seed}");
        }
    }

    /// A marginal on many attributes has exponentially many residual
    /// sets: refused at once rather than projected for ever; small
    /// workloads get the full iteration budget.
    #[test]
    fn a_projection_past_the_work_bound_is_refused() {
        let domain: Vec<String> = (0..24)
            .map(|i| format!(r#"{{"name": "a{i}", "size": 2}}"#))
            .collect();
        let names: Vec<String> = (0..24).map(|i| format!(r#""a{i}""#)).collect();
        let spec = format!(
            r#"{{"domain": [{}], "queries": [{{"marginal": [{}]}}]}}"#,
            domain.join(", "),
            names.join(", ")
        );
        let w = parse_spec(&spec, Path::new(".")).unwrap();
        assert!(matches!(Marginals::of(&w), Err(Error::BadInput(m)) if m.contains("operations")));
        let small = Marginals::of(&workload()).unwrap();
        // 1 + 2·2 + 4·6 + 4·12 = 77 operations: the cap is the one asked for.
        assert_eq!(small.work, 77.0);
        assert_eq!(small.iteration_cap(100_000), 100_000);
    }

    #[test]
    fn a_workload_with_a_range_is_refused() {
        let spec =
            r#"{"domain": [{"name": "a", "size": 4}], "queries": [{"kron": {"a": "prefix"}}]}"#;
        let w = parse_spec(spec, Path::new(".")).unwrap();
        assert!(matches!(Marginals::of(&w), Err(Error::Workload(_))));
    }
}
