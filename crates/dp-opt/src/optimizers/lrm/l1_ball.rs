//! The feasible set of LRM's program: every column of L in the unit L1
//! ball (ε-DP) or L2 ball ((ε,δ)-DP), its Euclidean projection, and SPG
//! over the product of those balls.

use dp_linalg::{Mat, MatMut, MatRef};

use crate::solvers::engine::{Executor, Run};
use crate::solvers::spg::{self, SpgOptions};
use crate::{Observer, PrivacyModel};

/// Euclidean projection of `v` onto the L1 ball of radius `radius`
/// (Duchi, Shalev-Shwartz, Singer, Chandra 2008, Figure 1): sort `|v|`
/// decreasingly, find `ρ = max{j : uⱼ − (Σᵢ≤ⱼ uᵢ − z)/j > 0}`, threshold
/// `θ = (Σᵢ≤ρ uᵢ − z)/ρ`, and shrink `vᵢ ← sign(vᵢ) max(|vᵢ| − θ, 0)`.
/// O(r log r). Points inside the ball are returned unchanged.
///
/// Only the entries that can be in the support are sorted: for any set S
/// holding the support, `θ ≥ (Σ_S |vᵢ| − z)/|S|` (the shrunk entries of S
/// sum to at least z at that level), so entries at or below that bound
/// are dropped, repeatedly (Michelot's filter, 1986), before the sort.
/// The result is the same.
pub fn project_l1_ball(v: &mut [f64], radius: f64) {
    let norm: f64 = v.iter().map(|x| x.abs()).sum();
    if norm <= radius {
        return;
    }
    if radius <= 0.0 {
        v.fill(0.0);
        return;
    }
    let mut u: Vec<f64> = v.iter().map(|x| x.abs()).collect();
    let mut sum = norm;
    loop {
        let bound = (sum - radius) / u.len() as f64;
        let before = u.len();
        u.retain(|&x| x > bound);
        sum = u.iter().sum();
        if u.len() == before {
            break;
        }
    }
    u.sort_unstable_by(|a, b| b.total_cmp(a));
    let mut cumulative = 0.0;
    let mut theta = 0.0;
    for (j, &uj) in u.iter().enumerate() {
        cumulative += uj;
        let t = (cumulative - radius) / (j + 1) as f64;
        if uj - t > 0.0 {
            theta = t;
        }
    }
    for x in v.iter_mut() {
        *x = x.signum() * (x.abs() - theta).max(0.0);
    }
}

/// The column constraint `‖L‖_{p,∞} ≤ 1` of LRM's program: p = 1 for
/// ε-DP (formulation (7) of the LRM paper, `Δ₁(L) ≤ 1`), p = 2 for
/// (ε,δ)-DP (program (4) of the COA paper, `Δ₂(L) ≤ 1`, whose Gaussian
/// noise is calibrated to the L2 sensitivity).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnNorm {
    /// Every column in the unit L1 ball.
    L1,
    /// Every column in the unit L2 ball.
    L2,
}

impl ColumnNorm {
    /// The norm whose sensitivity calibrates `model`'s noise.
    pub fn for_privacy(model: PrivacyModel) -> Self {
        match model {
            PrivacyModel::Pure => Self::L1,
            PrivacyModel::Approx => Self::L2,
        }
    }

    /// `‖v‖_p`.
    pub fn norm(self, v: impl IntoIterator<Item = f64>) -> f64 {
        match self {
            Self::L1 => v.into_iter().map(f64::abs).sum(),
            Self::L2 => v.into_iter().map(|x| x * x).sum::<f64>().sqrt(),
        }
    }

    /// Euclidean projection onto the unit ball: (11) for L1
    /// ([`project_l1_ball`]), radial scaling for L2.
    pub fn project(self, v: &mut [f64]) {
        match self {
            Self::L1 => project_l1_ball(v, 1.0),
            Self::L2 => {
                let norm = Self::L2.norm(v.iter().copied());
                if norm > 1.0 {
                    v.iter_mut().for_each(|x| *x /= norm);
                }
            }
        }
    }

    /// The largest column norm of `l` (its sensitivity).
    pub(super) fn max_column(self, l: MatRef<'_, f64>) -> f64 {
        (0..l.ncols())
            .map(|j| self.norm(l.col(j).iter().copied()))
            .fold(0.0, f64::max)
    }
}

pub(super) fn project_columns(l: &mut Mat<f64>, norm: ColumnNorm) {
    for j in 0..l.ncols() {
        norm.project(l.col_as_slice_mut(j));
    }
}

/// SPG ([`crate::solvers::spg`]) over L (r × n) with every column in the unit ball
/// of `norm` (projection (11) for L1), from `l`. `eval(L, ∇)` sees L and writes the
/// gradient through column-major views of SPG's vectors (column j at
/// j·r), so nothing is copied. Runs through the [`Executor`], which
/// reports each iteration's objective times `scale` to `observer`.
/// Returns the solution as a matrix.
pub(super) fn spg_over_columns(
    l: &Mat<f64>,
    norm: ColumnNorm,
    mut eval: impl FnMut(MatRef<'_, f64>, MatMut<'_, f64>) -> f64,
    options: &SpgOptions,
    observer: &mut dyn Observer,
    scale: f64,
) -> (Mat<f64>, Run<spg::SpgResult>) {
    let (r, n) = (l.nrows(), l.ncols());
    let x0: Vec<f64> = (0..n).flat_map(|j| l.col(j).iter().copied()).collect();
    let spg = spg::Spg::new(
        |x: &[f64], g: &mut [f64]| {
            eval(
                MatRef::from_column_major_slice(x, r, n),
                MatMut::from_column_major_slice_mut(g, r, n),
            )
        },
        |x: &mut [f64]| {
            for col in x.chunks_mut(r) {
                norm.project(col);
            }
        },
        x0,
        options,
    );
    let solved = Executor::new(options.budget, observer)
        .scale(scale)
        .run(spg);
    let out = Mat::from_fn(r, n, |i, j| solved.output.x[j * r + i]);
    (out, solved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::{Rng, SeedableRng};

    /// r entries uniform on `[−scale, scale)`.
    fn uniform(rng: &mut impl Rng, r: usize, scale: f64) -> Vec<f64> {
        (0..r)
            .map(|_| scale * (rng.random::<f64>() * 2.0 - 1.0))
            .collect()
    }

    /// Reference projection: bisection on the threshold θ of
    /// `Σ max(|vᵢ| − θ, 0) = z` (independent of the sort-based formula).
    fn reference(v: &[f64], z: f64) -> Vec<f64> {
        if v.iter().map(|x| x.abs()).sum::<f64>() <= z {
            return v.to_vec();
        }
        let (mut lo, mut hi) = (0.0, v.iter().map(|x| x.abs()).fold(0.0, f64::max));
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            let s: f64 = v.iter().map(|x| (x.abs() - mid).max(0.0)).sum();
            if s > z { lo = mid } else { hi = mid }
        }
        let t = 0.5 * (lo + hi);
        v.iter()
            .map(|x| x.signum() * (x.abs() - t).max(0.0))
            .collect()
    }

    #[test]
    fn l1_projection_is_exact_and_optimal() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for trial in 0..500 {
            let r = 1 + trial % 17;
            let scale = [0.1, 1.0, 10.0][trial % 3];
            let v = uniform(&mut rng, r, scale);
            let mut p = v.clone();
            project_l1_ball(&mut p, 1.0);
            let q = reference(&v, 1.0);
            for (a, b) in p.iter().zip(&q) {
                assert!((a - b).abs() < 1e-12, "{v:?}");
            }
            assert!(p.iter().map(|x| x.abs()).sum::<f64>() <= 1.0 + 1e-12);
            // Optimality: no feasible random point is closer to v.
            let d = |x: &[f64]| x.iter().zip(&v).map(|(a, b)| (a - b).powi(2)).sum::<f64>();
            for _ in 0..20 {
                let mut w = uniform(&mut rng, r, 1.0);
                let s: f64 = w.iter().map(|x| x.abs()).sum();
                if s > 1.0 {
                    w.iter_mut().for_each(|x| *x /= s);
                }
                assert!(d(&p) <= d(&w) + 1e-12);
            }
        }
        // Inside the ball: unchanged; ties and zeros are fine.
        let mut inside = vec![0.2, -0.3, 0.0];
        project_l1_ball(&mut inside, 1.0);
        assert_eq!(inside, vec![0.2, -0.3, 0.0]);
        let mut ties = vec![1.0, -1.0, 1.0, -1.0];
        project_l1_ball(&mut ties, 1.0);
        assert!(ties.iter().all(|x| (x.abs() - 0.25).abs() < 1e-15));
    }

    /// Both column norms: the projection lands in the unit ball, leaves
    /// points inside unchanged, and is the nearest point of the ball (the
    /// obtuse-angle condition ⟨v − P(v), w − P(v)⟩ ≤ 0 for random w in the
    /// ball); `max_column` and `norm` agree with the plain sums; an L1
    /// ball of radius 0 is the origin.
    #[test]
    fn column_norm_projections_are_nearest_points() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for norm in [ColumnNorm::L1, ColumnNorm::L2] {
            for trial in 0..300 {
                let r = 1 + trial % 9;
                let scale = [0.2, 1.0, 5.0][trial % 3];
                let v = uniform(&mut rng, r, scale);
                let mut p = v.clone();
                norm.project(&mut p);
                let length = norm.norm(p.iter().copied());
                assert!(length <= 1.0 + 1e-12, "{norm:?} {length}");
                if norm.norm(v.iter().copied()) <= 1.0 {
                    assert_eq!(p, v);
                }
                for _ in 0..20 {
                    let mut w = uniform(&mut rng, r, 1.0);
                    let wl = norm.norm(w.iter().copied());
                    if wl > 1.0 {
                        w.iter_mut().for_each(|x| *x /= wl);
                    }
                    let angle: f64 = (0..r).map(|i| (v[i] - p[i]) * (w[i] - p[i])).sum();
                    assert!(angle <= 1e-12, "{norm:?} {v:?}");
                }
            }
        }
        let m = Mat::from_fn(2, 3, |i, j| (i as f64 + 1.0) * (j as f64 - 1.0));
        assert_eq!(ColumnNorm::L1.max_column(m.as_ref()), 3.0);
        assert!((ColumnNorm::L2.max_column(m.as_ref()) - 5f64.sqrt()).abs() < 1e-15);
        assert_eq!(
            ColumnNorm::for_privacy(PrivacyModel::Approx),
            ColumnNorm::L2
        );
        let mut zero = vec![0.5, -2.0];
        project_l1_ball(&mut zero, 0.0);
        assert_eq!(zero, vec![0.0, 0.0]);
    }
}
