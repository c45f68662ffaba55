//! Kronecker products `(⊗ᵢ Mᵢ) x` in place, for reconstruction on very
//! large domains: with `Mᵢ = Wᵢ Fᵢ⁺` one product gives a term's workload
//! answers `W x̂ = (⊗ᵢ Wᵢ Fᵢ⁺) y` (HDMM §6.3, "least squares by factors"),
//! every factor square so that each mode-wise product keeps the vector's
//! length and overwrites it. Besides the vector, memory per task is one block of
//! at most [`BLOCK_CELLS`] values and two gathered strips of about
//! `GATHER_CELLS` values (more only when one attribute alone has more than
//! `GATHER_CELLS / STRIP` values).
//!
//! The mode products are grouped into passes over memory that each keep
//! their working set in cache: the trailing attributes whose cells fit in
//! [`BLOCK_CELLS`] are applied to each contiguous block, then the leading
//! attributes, innermost group first, to gathered column strips
//! `(group cells) × STRIP` of at most `GATHER_CELLS` values. A product
//! `(⊗ᵢ Mᵢ) x` costs `2 · cells · Σᵢ nᵢ` flops.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatMut, MatRef, Par, gemm_into_view};
use rayon::prelude::*;

/// Cells of the trailing block applied in cache (256 KiB of f64).
pub const BLOCK_CELLS: usize = 1 << 15;

/// Contiguous cells of one gathered strip of a leading pass.
const STRIP: usize = 64;

/// Values of one gathered strip (with its scratch copy, 1 MiB of f64).
const GATHER_CELLS: usize = 1 << 16;

fn invalid(reason: String) -> DpError {
    DpError::InvalidParameter {
        name: "kronecker reconstruction",
        reason,
    }
}

/// `x ← (⊗ᵢ mats[i]) x` for square factors, row-major cells (last
/// attribute fastest), in place. With `par` of degree `k > 1` both passes
/// run on `k` tasks of rayon's global pool: the trailing pass over disjoint
/// blocks, the leading pass over `k` disjoint ranges of strips; every cell
/// sees the same products in the same order as with [`Par::Seq`].
pub fn kron_apply_in_place(mats: &[&Mat<f64>], x: &mut [f64], par: Par) -> Result<()> {
    let dims: Vec<usize> = mats.iter().map(|m| m.ncols()).collect();
    if mats
        .iter()
        .any(|m| m.nrows() != m.ncols() || m.nrows() == 0)
    {
        return Err(invalid("every factor must be square and non-empty".into()));
    }
    let cells = dims
        .iter()
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .ok_or_else(|| invalid("the cell count overflows".into()))?;
    if x.len() != cells {
        return Err(DpError::DimensionMismatch {
            what: format!("a vector of {} for {cells} cells", x.len()),
        });
    }
    if mats
        .iter()
        .any(|m| (0..m.ncols()).any(|j| (0..m.nrows()).any(|i| !m[(i, j)].is_finite())))
    {
        return Err(invalid("a factor has a non-finite entry".into()));
    }
    // Split: attributes split.. have at most BLOCK_CELLS cells together.
    let mut split = dims.len();
    let mut block = 1usize;
    while split > 0 && block * dims[split - 1] <= BLOCK_CELLS {
        split -= 1;
        block *= dims[split];
    }
    let tasks = par.degree().max(1);
    let trail = &mats[split..];
    if !trail.is_empty() {
        let apply = |scratch: &mut Vec<f64>, chunk: &mut [f64]| {
            apply_modes(trail, &dims[split..], 1, chunk, scratch)
        };
        if tasks > 1 {
            x.par_chunks_exact_mut(block)
                .for_each_init(|| vec![0.0; block], apply);
        } else {
            let mut scratch = vec![0.0; block];
            x.chunks_exact_mut(block)
                .for_each(|chunk| apply(&mut scratch, chunk));
        }
    }
    // The leading attributes, innermost group first: each group is applied
    // to gathered strips whose (group cells) × STRIP values stay in cache.
    let mut end = split;
    let mut inner = block;
    while end > 0 {
        let strip = STRIP.min(inner);
        let mut start = end - 1;
        let mut group = dims[start];
        while start > 0 && group * dims[start - 1] * strip <= GATHER_CELLS {
            start -= 1;
            group *= dims[start];
        }
        strip_pass(&mats[start..end], &dims[start..end], inner, strip, x, tasks);
        inner *= group;
        end = start;
    }
    Ok(())
}

/// Applies `mats` (attributes of `dims`) to every chunk of `x` viewed as a
/// `(Π dims) × inner` row-major matrix, `strip` columns at a time. With
/// several tasks the chunks are shared out, or, with fewer chunks than
/// tasks, strip-aligned column ranges of each chunk (each row split into
/// disjoint pieces, one per range).
fn strip_pass(
    mats: &[&Mat<f64>],
    dims: &[usize],
    inner: usize,
    strip: usize,
    x: &mut [f64],
    tasks: usize,
) {
    let chunk = dims.iter().product::<usize>() * inner;
    let run = |rows: &mut [&mut [f64]]| lead_pass(mats, dims, strip, rows);
    if tasks > 1 && x.len() / chunk >= tasks {
        x.par_chunks_exact_mut(chunk).for_each(|c| {
            let mut rows: Vec<&mut [f64]> = c.chunks_exact_mut(inner).collect();
            run(&mut rows);
        });
        return;
    }
    let strips = inner.div_ceil(strip);
    let per_task = strips.div_ceil(tasks.min(strips)) * strip;
    for c in x.chunks_exact_mut(chunk) {
        let mut pieces: Vec<Vec<&mut [f64]>> =
            (0..inner.div_ceil(per_task)).map(|_| Vec::new()).collect();
        for row in c.chunks_exact_mut(inner) {
            for (r, piece) in row.chunks_mut(per_task).enumerate() {
                pieces[r].push(piece);
            }
        }
        if tasks > 1 {
            pieces.into_par_iter().for_each(|mut rows| run(&mut rows));
        } else {
            pieces.into_iter().for_each(|mut rows| run(&mut rows));
        }
    }
}

/// The leading pass on one range of columns: `rows` are the pieces of the
/// `(cells / block)` rows in that range (all of one width), gathered
/// `strip` columns at a time into a `(leading cells) × strip` tensor.
fn lead_pass(lead: &[&Mat<f64>], dims: &[usize], strip: usize, rows: &mut [&mut [f64]]) {
    let outer = rows.len();
    let width = rows.first().map_or(0, |r| r.len());
    let mut buf = vec![0.0; outer * strip];
    let mut scratch = vec![0.0; outer * strip];
    let mut c0 = 0;
    while c0 < width {
        let w = strip.min(width - c0);
        let used = &mut buf[..outer * w];
        for (dst, row) in used.chunks_exact_mut(w).zip(rows.iter()) {
            dst.copy_from_slice(&row[c0..c0 + w]);
        }
        apply_modes(lead, dims, w, used, &mut scratch);
        for (src, row) in used.chunks_exact(w).zip(rows.iter_mut()) {
            row[c0..c0 + w].copy_from_slice(src);
        }
        c0 += w;
    }
}

/// Applies `mats` mode by mode to `t`, a row-major tensor of `dims` with
/// `extra` contiguous values per cell, through `scratch` (≥ `t.len()`).
/// Products go through faer's matrix product (SIMD chosen at run time),
/// except for short fibres (1 < inner < [`GEMM_INNER`]), where the call
/// overhead would dominate.
fn apply_modes(
    mats: &[&Mat<f64>],
    dims: &[usize],
    extra: usize,
    t: &mut [f64],
    scratch: &mut [f64],
) {
    for (k, m) in mats.iter().enumerate() {
        let n = dims[k];
        let inner = dims[k + 1..].iter().product::<usize>() * extra;
        let out = &mut scratch[..t.len()];
        if inner == 1 {
            // The last mode: rows of n values, out = X Mᵀ in one product.
            let rows = t.len() / n;
            let x = MatRef::from_row_major_slice(t, rows, n);
            let dst = MatMut::from_row_major_slice_mut(out, rows, n);
            gemm_into_view(dst, x, m.transpose(), Par::Seq);
        } else if inner >= GEMM_INNER {
            for (slab, o) in t
                .chunks_exact(n * inner)
                .zip(out.chunks_exact_mut(n * inner))
            {
                let x = MatRef::from_row_major_slice(slab, n, inner);
                let dst = MatMut::from_row_major_slice_mut(o, n, inner);
                gemm_into_view(dst, m.as_ref(), x, Par::Seq);
            }
        } else {
            // M row-major, read in the innermost loops.
            let rows: Vec<f64> = (0..n * n).map(|e| m[(e / n, e % n)]).collect();
            for (slab, o) in t
                .chunks_exact(n * inner)
                .zip(out.chunks_exact_mut(n * inner))
            {
                mode_product(&rows, n, inner, slab, o);
            }
        }
        t.copy_from_slice(out);
    }
}

/// Shortest fibre multiplied through faer's matrix product.
const GEMM_INNER: usize = 16;

/// Columns per register tile of [`mode_product`].
const TILE: usize = 8;

/// `out = M · slab` for `slab` an `n × inner` row-major block and `M`
/// given row-major in `rows`: each tile of [`TILE`] columns accumulates in
/// registers, reading every entry of the slab once per output row.
fn mode_product(rows: &[f64], n: usize, inner: usize, slab: &[f64], out: &mut [f64]) {
    let tiled = inner - inner % TILE;
    for c in (0..tiled).step_by(TILE) {
        for (q, m_row) in rows.chunks_exact(n).enumerate() {
            let mut acc = [0.0f64; TILE];
            for (j, &a) in m_row.iter().enumerate() {
                let at = j * inner + c;
                for (s, &x) in acc.iter_mut().zip(&slab[at..at + TILE]) {
                    *s += a * x;
                }
            }
            out[q * inner + c..q * inner + c + TILE].copy_from_slice(&acc);
        }
    }
    for c in tiled..inner {
        for (q, m_row) in rows.chunks_exact(n).enumerate() {
            out[q * inner + c] = m_row
                .iter()
                .enumerate()
                .map(|(j, &a)| a * slab[j * inner + c])
                .sum();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

    use super::*;
    use dp_workloads::structured::kron_matvec;

    fn mat(n: usize, seed: usize) -> Mat<f64> {
        Mat::from_fn(n, n, |i, j| {
            let v = ((i * 31 + j * 17 + seed * 7) % 23) as f64 - 11.0;
            if i == j { v + 40.0 } else { v }
        })
    }

    #[test]
    fn in_place_products_match_the_out_of_place_kronecker_product() {
        // [5, 40] lead (gathered strips), [41, 23] trail (943-cell blocks,
        // the last strip partial); [3, 30, 40] lead in two groups, [40]
        // over 90 chunks shared out, then [3, 30] over one chunk split into
        // column ranges; a single attribute; one small block.
        for dims in [
            vec![5, 40, 41, 23],
            vec![3, 30, 40, 41, 23],
            vec![7],
            vec![3, 2, 4],
        ] {
            let mats: Vec<Mat<f64>> = dims.iter().enumerate().map(|(s, &n)| mat(n, s)).collect();
            let refs: Vec<&Mat<f64>> = mats.iter().collect();
            let cells: usize = dims.iter().product();
            let x: Vec<f64> = (0..cells).map(|i| ((i * 13) % 29) as f64 - 14.0).collect();
            let want = kron_matvec(&refs, &x).unwrap();
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            // Two and three tasks split the 15 strips of [5, 40, 41, 23]
            // into two and three column ranges.
            for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
                let mut got = x.clone();
                kron_apply_in_place(&refs, &mut got, par).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-12 * scale,
                        "{dims:?} {par:?}: {g} vs {w}"
                    );
                }
            }
        }
        let a = mat(3, 0);
        assert!(kron_apply_in_place(&[&a], &mut [0.0; 4], Par::Seq).is_err());
        let rect = Mat::<f64>::zeros(2, 3);
        assert!(kron_apply_in_place(&[&rect], &mut [0.0; 3], Par::Seq).is_err());
    }
}
