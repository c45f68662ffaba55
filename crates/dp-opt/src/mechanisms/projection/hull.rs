//! Least-squares projection onto a symmetric convex hull `conv{±v_e}`
//! (Algorithm 1, step 3: the scaled sensitivity polytope `N (I − Π) K_W`
//! when `v_e = N (I − Π) w_e`).
//!
//! The method is pairwise Frank–Wolfe (linear convergence on polytopes,
//! Lacoste-Julien & Jaggi 2015), whose linear oracle is one column search
//! `max_e |⟨∇, v_e⟩|`. Iterates are kept as signed weights `α` on the
//! columns (`z = V α`) together with `q = Vᵀz = Gα`, `G = VᵀV` formed once
//! per hull: the oracle reads `⟨z − t, v_e⟩ = q_e − b_e` (`b = Vᵀt`) and a
//! step moves `q` by two columns of G, so an iteration costs O(n) instead
//! of O(mn), and one hull serves every release of a mechanism. (`q` is
//! recomputed from `α` every 256 steps so rounding cannot accumulate.)
//!
//! The run stops when the Frank–Wolfe gap `g = ⟨z − t, z − s⟩` is at most
//! the tolerance; the objective `½‖z − t‖²` is 1-strongly convex in z, so
//! `‖z − z*‖² ≤ 2g` is the stated accuracy of the returned point.

use dp_core::{DpError, Result};
use dp_linalg::{Mat, MatRef};

/// `conv{±v_e}` with its Gram matrix, ready to project many targets.
#[derive(Debug, Clone)]
pub struct SymmetricHull {
    vertices: Mat<f64>,
    gram: Mat<f64>,
}

/// Result of [`SymmetricHull::project`].
#[derive(Debug, Clone)]
pub struct HullProjection {
    /// The projection z.
    pub point: Vec<f64>,
    /// `‖z − t‖`.
    pub distance: f64,
    /// Final Frank–Wolfe gap g (`‖z − z*‖² ≤ 2g`).
    pub gap: f64,
    /// Iterations.
    pub iterations: usize,
    /// Whether the gap met the tolerance.
    pub converged: bool,
}

impl SymmetricHull {
    /// The hull of the columns of `vertices` (m×n, finite, n ≥ 1) and
    /// their negatives.
    pub fn new(vertices: MatRef<'_, f64>) -> Result<Self> {
        if vertices.ncols() == 0 || vertices.nrows() == 0 {
            return Err(DpError::DimensionMismatch {
                what: "the hull needs at least one vertex of positive dimension".into(),
            });
        }
        if !dp_linalg::all_finite(vertices) {
            return Err(DpError::InvalidParameter {
                name: "vertices",
                reason: "must be finite".into(),
            });
        }
        Ok(Self {
            vertices: vertices.to_owned(),
            gram: dp_linalg::gram(vertices, dp_linalg::Par::rayon(0)),
        })
    }

    /// Dimension m of the space.
    pub fn dim(&self) -> usize {
        self.vertices.nrows()
    }

    /// A target of the space's dimension, finite, and a positive tolerance.
    fn check_target(&self, target: &[f64], tolerance: f64) -> Result<()> {
        let m = self.vertices.nrows();
        if target.len() != m {
            return Err(DpError::DimensionMismatch {
                what: format!(
                    "target has {} entries for {m}-dimensional vertices",
                    target.len()
                ),
            });
        }
        if target.iter().any(|v| !v.is_finite()) {
            return Err(DpError::InvalidParameter {
                name: "target",
                reason: "must be finite".into(),
            });
        }
        if tolerance.is_nan() || tolerance <= 0.0 {
            return Err(DpError::InvalidParameter {
                name: "tolerance",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }

    /// `argmin ‖z − target‖` over the hull, to a Frank–Wolfe gap of
    /// `tolerance` (absolute, > 0) within `max_iterations` steps.
    pub fn project(
        &self,
        target: &[f64],
        tolerance: f64,
        max_iterations: usize,
    ) -> Result<HullProjection> {
        self.check_target(target, tolerance)?;
        let (m, n) = (self.vertices.nrows(), self.vertices.ncols());
        let g = &self.gram;
        let b: Vec<f64> = (0..n)
            .map(|e| {
                let col = self.vertices.col(e);
                (0..m).map(|i| col[i] * target[i]).sum()
            })
            .collect();
        // Vertex k: column k / 2 with sign + (k even) or − (k odd).
        let sign = |k: usize| if k.is_multiple_of(2) { 1.0 } else { -1.0 };
        // ⟨z − t, s_k⟩ from q.
        let slope = |q: &[f64], k: usize| sign(k) * (q[k / 2] - b[k / 2]);
        // The oracle: argmin_k ⟨z − t, s_k⟩ = −max_e |q_e − b_e|.
        let oracle = |q: &[f64]| -> usize {
            let mut best = (0usize, f64::INFINITY);
            for e in 0..n {
                let p = q[e] - b[e];
                let (k, v) = if p > 0.0 { (2 * e + 1, -p) } else { (2 * e, p) };
                if v < best.1 {
                    best = (k, v);
                }
            }
            best.0
        };
        let refresh = |weights: &[(usize, f64)]| -> Vec<f64> {
            let mut q = vec![0.0; n];
            for &(k, w) in weights {
                let col = g.col(k / 2);
                for (qi, gi) in q.iter_mut().zip(col.iter()) {
                    *qi += sign(k) * w * gi;
                }
            }
            q
        };
        let first = oracle(&vec![0.0; n]);
        let mut weights: Vec<(usize, f64)> = vec![(first, 1.0)];
        let mut q = refresh(&weights);
        let mut iterations = 0;
        let gap = loop {
            // ⟨z − t, z⟩ = Σ_k w_k ⟨z − t, s_k⟩.
            let zz_minus_tz: f64 = weights.iter().map(|&(k, w)| w * slope(&q, k)).sum();
            let s_idx = oracle(&q);
            let gap = zz_minus_tz - slope(&q, s_idx);
            if gap <= tolerance || iterations >= max_iterations {
                break gap;
            }
            iterations += 1;
            // Away vertex: the active one with the largest ⟨z − t, s_k⟩.
            let (away_pos, _) = weights
                .iter()
                .enumerate()
                .map(|(pos, &(k, _))| (pos, slope(&q, k)))
                .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b });
            let (away_idx, away_weight) = weights[away_pos];
            let (es, ea) = (s_idx / 2, away_idx / 2);
            let (ss, sa) = (sign(s_idx), sign(away_idx));
            // d = s − a: ‖d‖² and ⟨z − t, d⟩ from G and q.
            let dd = g[(es, es)] + g[(ea, ea)] - 2.0 * ss * sa * g[(es, ea)];
            if dd.is_nan() || dd <= 0.0 {
                break gap;
            }
            let slope_d = slope(&q, s_idx) - slope(&q, away_idx);
            let gamma = (-slope_d / dd).clamp(0.0, away_weight);
            if gamma == 0.0 {
                break gap;
            }
            let (cs, ca) = (g.col(es), g.col(ea));
            for (e, qe) in q.iter_mut().enumerate() {
                *qe += gamma * (ss * cs[e] - sa * ca[e]);
            }
            weights[away_pos].1 -= gamma;
            match weights.iter_mut().find(|(k, _)| *k == s_idx) {
                Some(w) => w.1 += gamma,
                None => weights.push((s_idx, gamma)),
            }
            weights.retain(|&(_, w)| w > 0.0);
            if iterations.is_multiple_of(256) {
                q = refresh(&weights);
            }
        };
        let mut point = vec![0.0; m];
        for &(k, w) in &weights {
            let col = self.vertices.col(k / 2);
            for (pi, vi) in point.iter_mut().zip(col.iter()) {
                *pi += sign(k) * w * vi;
            }
        }
        let distance = point
            .iter()
            .zip(target)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt();
        Ok(HullProjection {
            point,
            distance,
            gap,
            iterations,
            converged: gap <= tolerance,
        })
    }
}

/// Projects `target` onto `conv{±v_e}` (columns `v_e` of `vertices`, m×n)
/// by pairwise Frank–Wolfe to a Frank–Wolfe gap of `tolerance` (see the
/// module notes); a one-off [`SymmetricHull`].
pub fn project_symmetric_hull(
    vertices: MatRef<'_, f64>,
    target: &[f64],
    tolerance: f64,
    max_iterations: usize,
) -> Result<HullProjection> {
    SymmetricHull::new(vertices)?.project(target, tolerance, max_iterations)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Exact projection onto conv{±v_e} by enumerating vertex subsets of
    /// size ≤ m + 1 (Carathéodory): the affine least-squares point of each
    /// subset, kept when its weights are non-negative.
    fn brute_force(v: &Mat<f64>, t: &[f64]) -> f64 {
        let (m, n) = (v.nrows(), v.ncols());
        let verts: Vec<Vec<f64>> = (0..2 * n)
            .map(|k| {
                let s = if k.is_multiple_of(2) { 1.0 } else { -1.0 };
                (0..m).map(|i| s * v[(i, k / 2)]).collect()
            })
            .collect();
        let mut best = f64::INFINITY;
        let total = 1usize << (2 * n);
        for mask in 1..total {
            let idx: Vec<usize> = (0..2 * n).filter(|k| mask >> k & 1 == 1).collect();
            if idx.len() > m + 1 {
                continue;
            }
            let k = idx.len();
            // KKT of min ‖Σ αᵢ vᵢ − t‖² s.t. Σ αᵢ = 1.
            let mut a = Mat::<f64>::zeros(k + 1, k + 1);
            let mut b = Mat::<f64>::zeros(k + 1, 1);
            for (p, &i) in idx.iter().enumerate() {
                for (q, &j) in idx.iter().enumerate() {
                    a[(p, q)] = verts[i].iter().zip(&verts[j]).map(|(x, y)| x * y).sum();
                }
                a[(p, k)] = 1.0;
                a[(k, p)] = 1.0;
                b[(p, 0)] = verts[i].iter().zip(t).map(|(x, y)| x * y).sum();
            }
            b[(k, 0)] = 1.0;
            let Ok(sol) = dp_linalg::Lu::factor(a.as_ref()).and_then(|lu| lu.solve(b.as_ref()))
            else {
                continue;
            };
            if !sol.as_ref().is_all_finite() || (0..k).any(|p| sol[(p, 0)] < -1e-12) {
                continue;
            }
            let point: Vec<f64> = (0..m)
                .map(|r| (0..k).map(|p| sol[(p, 0)] * verts[idx[p]][r]).sum())
                .collect();
            let d: f64 = point
                .iter()
                .zip(t)
                .map(|(x, y)| (x - y).powi(2))
                .sum::<f64>();
            best = best.min(d.sqrt());
        }
        best
    }

    /// Frank–Wolfe against brute force on small random instances.
    #[test]
    fn frank_wolfe_matches_brute_force() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for trial in 0..40 {
            let (m, n) = (2 + trial % 2, 2 + trial % 3);
            let v = Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 2.0 - 1.0);
            let scale = [0.3, 1.0, 3.0][trial % 3];
            let t: Vec<f64> = (0..m)
                .map(|_| scale * (rng.random::<f64>() * 2.0 - 1.0))
                .collect();
            let fw = project_symmetric_hull(v.as_ref(), &t, 1e-14, 100_000).unwrap();
            assert!(fw.converged, "trial {trial}");
            let exact = brute_force(&v, &t);
            assert!(
                (fw.distance - exact).abs() < 1e-6,
                "trial {trial}: {} vs {exact}",
                fw.distance
            );
        }
    }

    /// A larger instance: the returned point satisfies the optimality
    /// condition of the projection, `⟨t − z, v − z⟩ ≤ g` for every vertex
    /// v (checked directly on all ±columns), and lies in the hull (its
    /// weights are a convex combination, so `max_u ⟨u, z⟩ ≤ max_e |⟨u, v_e⟩|`
    /// for random directions u).
    #[test]
    fn projection_is_optimal_on_a_larger_hull() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let (m, n) = (30, 80);
        let v = Mat::from_fn(m, n, |_, _| rng.random::<f64>() * 2.0 - 1.0);
        let t: Vec<f64> = (0..m).map(|_| 10.0 * (rng.random::<f64>() - 0.5)).collect();
        let hull = SymmetricHull::new(v.as_ref()).unwrap();
        let p = hull.project(&t, 1e-10, 1_000_000).unwrap();
        assert!(p.converged, "gap {}", p.gap);
        let z = &p.point;
        let r: Vec<f64> = t.iter().zip(z).map(|(a, b)| a - b).collect();
        let rz: f64 = r.iter().zip(z).map(|(a, b)| a * b).sum();
        for e in 0..n {
            let rv: f64 = (0..m).map(|i| r[i] * v[(i, e)]).sum();
            assert!(rv.abs() - rz <= 1e-9, "column {e}: {} > {rz}", rv.abs());
        }
        for _ in 0..50 {
            let u: Vec<f64> = (0..m).map(|_| rng.random::<f64>() - 0.5).collect();
            let uz: f64 = u.iter().zip(z).map(|(a, b)| a * b).sum();
            let support = (0..n)
                .map(|e| (0..m).map(|i| u[i] * v[(i, e)]).sum::<f64>().abs())
                .fold(0.0, f64::max);
            assert!(uz <= support + 1e-9);
        }
        assert!(hull.project(&t[1..], 1e-9, 10).is_err());
        assert!(hull.project(&t, 0.0, 10).is_err());
        assert!(SymmetricHull::new(Mat::<f64>::zeros(3, 0).as_ref()).is_err());
    }
}
