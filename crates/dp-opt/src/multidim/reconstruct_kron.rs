//! Least squares and workload answers for one Kronecker strategy on very
//! large domains, in place: `x̂ = (⊗ᵢ Fᵢ)⁺ y = (⊗ᵢ Fᵢ⁺) y` and
//! `W x̂ = (⊗ᵢ Wᵢ) x̂` (HDMM §6.3, "least squares by factors"), with every
//! factor square so that each mode-wise product keeps the vector's length
//! and overwrites it. Memory is the one vector plus two scratch blocks of
//! at most [`BLOCK_CELLS`]·(cells / [`BLOCK_CELLS`])-sized gathers, never
//! a second domain-sized vector.
//!
//! The mode products are grouped in two passes over memory: the trailing
//! attributes whose cells fit in [`BLOCK_CELLS`] are applied to each
//! contiguous block while it is in cache, and the leading attributes to
//! gathered column strips `(leading cells) × STRIP`. A product
//! `(⊗ᵢ Mᵢ) x` costs `2 · cells · Σᵢ nᵢ` flops.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, pseudo_inverse};

/// Cells of the trailing block applied in cache (256 KiB of f64).
pub const BLOCK_CELLS: usize = 1 << 15;

/// Contiguous cells of one gathered strip of the leading pass.
const STRIP: usize = 16;

fn invalid(reason: String) -> DpError {
    DpError::InvalidParameter {
        name: "kronecker reconstruction",
        reason,
    }
}

/// `x ← (⊗ᵢ mats[i]) x` for square factors, row-major cells (last
/// attribute fastest), in place.
pub fn kron_apply_in_place(mats: &[&Mat<f64>], x: &mut [f64]) -> Result<()> {
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
    let (lead, trail) = mats.split_at(split);
    if !trail.is_empty() {
        let mut scratch = vec![0.0; block];
        for chunk in x.chunks_exact_mut(block) {
            apply_modes(trail, &dims[split..], 1, chunk, &mut scratch);
        }
    }
    if !lead.is_empty() {
        let outer = cells / block;
        let strip = STRIP.min(block);
        let mut buf = vec![0.0; outer * strip];
        let mut scratch = vec![0.0; outer * strip];
        let mut c0 = 0;
        while c0 < block {
            let w = strip.min(block - c0);
            let used = &mut buf[..outer * w];
            for (p, row) in used.chunks_exact_mut(w).enumerate() {
                row.copy_from_slice(&x[p * block + c0..p * block + c0 + w]);
            }
            apply_modes(lead, &dims[..split], w, used, &mut scratch);
            for (p, row) in used.chunks_exact(w).enumerate() {
                x[p * block + c0..p * block + c0 + w].copy_from_slice(row);
            }
            c0 += w;
        }
    }
    Ok(())
}

/// Applies `mats` mode by mode to `t`, a row-major tensor of `dims` with
/// `extra` contiguous values per cell, through `scratch` (≥ `t.len()`).
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
        for slab in t.chunks_exact_mut(n * inner) {
            let out = &mut scratch[..n * inner];
            if inner == 1 {
                // out = M x: columns of M scaled by the entries of x.
                out.fill(0.0);
                for (j, &xj) in slab.iter().enumerate() {
                    for (q, o) in out.iter_mut().enumerate() {
                        *o += m[(q, j)] * xj;
                    }
                }
            } else {
                for (q, row) in out.chunks_exact_mut(inner).enumerate() {
                    row.fill(0.0);
                    for (j, col) in slab.chunks_exact(inner).enumerate() {
                        let a = m[(q, j)];
                        if a != 0.0 {
                            for (r, c) in row.iter_mut().zip(col) {
                                *r += a * c;
                            }
                        }
                    }
                }
            }
            slab.copy_from_slice(out);
        }
    }
}

/// `y ← x̂ = (⊗ᵢ Fᵢ)⁺ y = (⊗ᵢ Fᵢ⁺) y` for square factors, in place.
pub fn kron_least_squares_in_place(factors: &[Mat<f64>], y: &mut [f64]) -> Result<()> {
    let pinvs = factors
        .iter()
        .map(|f| pseudo_inverse(f.as_ref(), None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let refs: Vec<&Mat<f64>> = pinvs.iter().collect();
    kron_apply_in_place(&refs, y)
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
        // the last strip partial); a single attribute; one small block.
        for dims in [vec![5, 40, 41, 23], vec![7], vec![3, 2, 4]] {
            let mats: Vec<Mat<f64>> = dims.iter().enumerate().map(|(s, &n)| mat(n, s)).collect();
            let refs: Vec<&Mat<f64>> = mats.iter().collect();
            let cells: usize = dims.iter().product();
            let x: Vec<f64> = (0..cells).map(|i| ((i * 13) % 29) as f64 - 14.0).collect();
            let want = kron_matvec(&refs, &x).unwrap();
            let mut got = x.clone();
            kron_apply_in_place(&refs, &mut got).unwrap();
            let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-12 * scale, "{dims:?}: {g} vs {w}");
            }
        }
        let a = mat(3, 0);
        assert!(kron_apply_in_place(&[&a], &mut [0.0; 4]).is_err());
        let rect = Mat::<f64>::zeros(2, 3);
        assert!(kron_apply_in_place(&[&rect], &mut [0.0; 3]).is_err());
    }

    #[test]
    fn in_place_least_squares_inverts_an_invertible_kronecker_strategy() {
        let factors = vec![mat(6, 1), mat(5, 2), mat(7, 3)];
        let refs: Vec<&Mat<f64>> = factors.iter().collect();
        let x: Vec<f64> = (0..210).map(|i| (i % 11) as f64).collect();
        let mut y = kron_matvec(&refs, &x).unwrap();
        kron_least_squares_in_place(&factors, &mut y).unwrap();
        for (g, w) in y.iter().zip(&x) {
            assert!((g - w).abs() <= 1e-10 * 10.0, "{g} vs {w}");
        }
    }
}
