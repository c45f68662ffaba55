//! Every wrapper checked against an independent computation: reconstruction
//! error, orthogonality, hand-computed inverses and determinants, and
//! rank-deficient / ill-conditioned inputs.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_linalg::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

fn random(m: usize, n: usize, seed: u64) -> Mat<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Mat::from_fn(m, n, |_, _| StandardNormal.sample(&mut rng))
}

fn random_spd(n: usize, seed: u64) -> Mat<f64> {
    let a = random(n + 3, n, seed);
    let mut g = gram(a.as_ref(), Par::Seq);
    for i in 0..n {
        g[(i, i)] += 0.1;
    }
    g
}

fn max_abs_diff(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let mut d = 0.0_f64;
    for j in 0..a.ncols() {
        for i in 0..a.nrows() {
            d = d.max((a[(i, j)] - b[(i, j)]).abs());
        }
    }
    d
}

/// Naive triple loop, independent of faer's kernels.
fn naive_matmul(a: MatRef<'_, f64>, b: MatRef<'_, f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), b.ncols(), |i, j| {
        (0..a.ncols()).map(|k| a[(i, k)] * b[(k, j)]).sum()
    })
}

#[test]
fn cholesky_reconstructs_solves_and_inverts_random_spd() {
    for (n, seed) in [(1, 1), (2, 2), (7, 3), (40, 4), (129, 5)] {
        let a = random_spd(n, seed);
        let chol = Cholesky::factor(a.as_ref()).unwrap();
        let l = chol.lower();
        for j in 0..n {
            assert!(l[(j, j)] > 0.0);
            for i in 0..j {
                assert_eq!(l[(i, j)], 0.0, "L must be lower triangular");
            }
        }
        let llt = naive_matmul(l, l.transpose());
        assert!(max_abs_diff(llt.as_ref(), a.as_ref()) < 1e-10 * n as f64);

        let b = random(n, 3, seed + 100);
        let x = chol.solve(b.as_ref()).unwrap();
        let ax = naive_matmul(a.as_ref(), x.as_ref());
        assert!(max_abs_diff(ax.as_ref(), b.as_ref()) < 1e-8);

        let inv = chol.inverse();
        let ainv = naive_matmul(a.as_ref(), inv.as_ref());
        assert!(max_abs_diff(ainv.as_ref(), Mat::<f64>::identity(n, n).as_ref()) < 1e-8);

        // log det against the product of eigenvalues.
        let eig = SymmetricEigen::values_only(a.as_ref()).unwrap();
        let logdet: f64 = eig.iter().map(|v| v.ln()).sum();
        assert!((chol.log_det() - logdet).abs() < 1e-8 * (1.0 + logdet.abs()));

        // Triangular solves: L (L⁻¹ b) = b and Lᵀ (L⁻ᵀ b) = b.
        let mut y = b.clone();
        chol.solve_lower_in_place(y.as_mut(), Par::Seq).unwrap();
        assert!(max_abs_diff(naive_matmul(l, y.as_ref()).as_ref(), b.as_ref()) < 1e-9);
        let mut z = b.clone();
        chol.solve_lower_transpose_in_place(z.as_mut(), Par::rayon(2))
            .unwrap();
        assert!(max_abs_diff(naive_matmul(l.transpose(), z.as_ref()).as_ref(), b.as_ref()) < 1e-9);

        let c = random_spd(n, seed + 7);
        let direct = trace_of_product(inv.as_ref(), c.as_ref()).unwrap();
        let solved = chol.trace_inverse_times(c.as_ref()).unwrap();
        assert!((direct - solved).abs() < 1e-8 * direct.abs().max(1.0));
    }
}

#[test]
fn cholesky_known_two_by_two() {
    // [[4, 2], [2, 3]] = L Lᵀ with L = [[2, 0], [1, √2]], det = 8.
    let a = Mat::from_fn(2, 2, |i, j| [[4.0, 2.0], [2.0, 3.0]][i][j]);
    let chol = Cholesky::factor(a.as_ref()).unwrap();
    assert!((chol.lower()[(0, 0)] - 2.0).abs() < 1e-15);
    assert!((chol.lower()[(1, 0)] - 1.0).abs() < 1e-15);
    assert!((chol.lower()[(1, 1)] - 2f64.sqrt()).abs() < 1e-15);
    assert!((chol.log_det() - 8f64.ln()).abs() < 1e-14);
}

#[test]
fn cholesky_reports_not_positive_definite() {
    let refused = |a: &Mat<f64>| Cholesky::factor(a.as_ref()).unwrap_err();
    // Indefinite: eigenvalues 3 and -1.
    let a = Mat::from_fn(2, 2, |i, j| [[1.0, 2.0], [2.0, 1.0]][i][j]);
    assert_eq!(refused(&a), LinalgError::NotPositiveDefinite { pivot: 1 });
    // Singular PSD (rank 1), pushed just below semidefinite.
    let v = random(5, 1, 9);
    let mut s = naive_matmul(v.as_ref(), v.transpose());
    s[(4, 4)] -= 1e-3;
    assert!(matches!(
        refused(&s),
        LinalgError::NotPositiveDefinite { .. }
    ));
    assert_eq!(
        refused(&Mat::<f64>::zeros(3, 3)),
        LinalgError::NotPositiveDefinite { pivot: 0 }
    );
    let mut nan = Mat::<f64>::identity(3, 3);
    nan[(1, 1)] = f64::NAN;
    assert!(matches!(refused(&nan), LinalgError::NonFinite { .. }));
    assert!(matches!(
        refused(&Mat::<f64>::zeros(2, 3)),
        LinalgError::NotSquare { .. }
    ));
    let chol = Cholesky::factor(Mat::<f64>::identity(3, 3).as_ref()).unwrap();
    assert!(matches!(
        chol.solve(Mat::<f64>::zeros(2, 1).as_ref()),
        Err(LinalgError::DimensionMismatch { .. })
    ));
}

#[test]
fn symmetric_eigen_reconstructs_and_is_orthonormal() {
    for (n, seed) in [(1, 11), (5, 12), (64, 13)] {
        let a = random(n, n, seed);
        let s = Mat::from_fn(n, n, |i, j| a[(i, j)] + a[(j, i)]);
        let e = SymmetricEigen::new(s.as_ref()).unwrap();
        assert!(e.values.windows(2).all(|w| w[0] <= w[1]));
        let utu = naive_matmul(e.vectors.transpose(), e.vectors.as_ref());
        assert!(max_abs_diff(utu.as_ref(), Mat::<f64>::identity(n, n).as_ref()) < 1e-12 * n as f64);
        let rec = e.map(|l| l);
        assert!(max_abs_diff(rec.as_ref(), s.as_ref()) < 1e-11 * n as f64);
        // Sum of eigenvalues = trace.
        let tr: f64 = (0..n).map(|i| s[(i, i)]).sum();
        assert!((e.values.iter().sum::<f64>() - tr).abs() < 1e-10 * n as f64);
    }
    // Known spectrum: [[2, 1], [1, 2]] has eigenvalues 1 and 3.
    let a = Mat::from_fn(2, 2, |i, j| if i == j { 2.0 } else { 1.0 });
    let v = SymmetricEigen::values_only(a.as_ref()).unwrap();
    assert!((v[0] - 1.0).abs() < 1e-14 && (v[1] - 3.0).abs() < 1e-14);
}

#[test]
fn thin_svd_reconstructs_tall_and_wide() {
    for (m, n, seed) in [(9, 4, 21), (4, 9, 22), (30, 30, 23), (1, 5, 24)] {
        let a = random(m, n, seed);
        let svd = ThinSvd::new(a.as_ref()).unwrap();
        let k = m.min(n);
        assert_eq!(svd.singular_values.len(), k);
        assert_eq!((svd.u.nrows(), svd.u.ncols()), (m, k));
        assert_eq!((svd.v.nrows(), svd.v.ncols()), (n, k));
        assert!(svd.singular_values.windows(2).all(|w| w[0] >= w[1]));
        let us = Mat::from_fn(m, k, |i, j| svd.u[(i, j)] * svd.singular_values[j]);
        let rec = naive_matmul(us.as_ref(), svd.v.transpose());
        assert!(max_abs_diff(rec.as_ref(), a.as_ref()) < 1e-12 * (m * n) as f64);
        let vtv = naive_matmul(svd.v.transpose(), svd.v.as_ref());
        assert!(max_abs_diff(vtv.as_ref(), Mat::<f64>::identity(k, k).as_ref()) < 1e-12 * k as f64);
        assert_eq!(svd.rank(), k);
        // Frobenius norm² = Σ σ².
        let f2: f64 = svd.singular_values.iter().map(|s| s * s).sum();
        assert!((f2 - frobenius_norm(a.as_ref()).powi(2)).abs() < 1e-10 * f2);
    }
}

#[test]
fn rank_and_pseudo_inverse_of_rank_deficient_matrix() {
    // 8×6 matrix of rank 3 = B (8×3) C (3×6).
    let b = random(8, 3, 31);
    let c = random(3, 6, 32);
    let a = naive_matmul(b.as_ref(), c.as_ref());
    let svd = ThinSvd::new(a.as_ref()).unwrap();
    assert_eq!(svd.rank(), 3);
    let tol = default_rank_tolerance(8, 6, &svd.singular_values);
    assert_eq!(numerical_rank(&svd.singular_values, tol), 3);
    // An explicit tolerance above the third singular value gives rank 2.
    assert_eq!(
        numerical_rank(&svd.singular_values, svd.singular_values[2] * 1.0001),
        2
    );

    // Moore–Penrose conditions: A A⁺ A = A, A⁺ A A⁺ = A⁺, (A A⁺)ᵀ = A A⁺, (A⁺ A)ᵀ = A⁺ A.
    let p = pseudo_inverse(a.as_ref(), None).unwrap();
    let apa = naive_matmul(naive_matmul(a.as_ref(), p.as_ref()).as_ref(), a.as_ref());
    assert!(max_abs_diff(apa.as_ref(), a.as_ref()) < 1e-10);
    let pap = naive_matmul(naive_matmul(p.as_ref(), a.as_ref()).as_ref(), p.as_ref());
    assert!(max_abs_diff(pap.as_ref(), p.as_ref()) < 1e-10);
    let ap = naive_matmul(a.as_ref(), p.as_ref());
    assert!(max_abs_diff(ap.as_ref(), ap.transpose()) < 1e-10);
    let pa = naive_matmul(p.as_ref(), a.as_ref());
    assert!(max_abs_diff(pa.as_ref(), pa.transpose()) < 1e-10);

    // Symmetric PSD pseudo-inverse agrees with the general one.
    let g = gram(a.as_ref(), Par::Seq);
    let gp = pseudo_inverse_symmetric(g.as_ref(), None).unwrap();
    let gp2 = pseudo_inverse(g.as_ref(), None).unwrap();
    let scale = gp.norm_max();
    assert!(max_abs_diff(gp.as_ref(), gp2.as_ref()) < 1e-8 * scale);
}

#[test]
fn pseudo_inverse_of_full_rank_is_inverse_even_when_ill_conditioned() {
    // Hilbert matrix of order 8: condition number ~1.5e10, still full rank
    // at the default tolerance. Its inverse has integer entries; check
    // A A⁺ ≈ I to the accuracy the conditioning allows.
    let n = 8;
    let h = Mat::from_fn(n, n, |i, j| 1.0 / (i + j + 1) as f64);
    let svd = ThinSvd::new(h.as_ref()).unwrap();
    assert_eq!(svd.rank(), n);
    let cond = svd.singular_values[0] / svd.singular_values[n - 1];
    assert!(cond > 1e9 && cond < 1e11, "cond = {cond}");
    let p = pseudo_inverse(h.as_ref(), None).unwrap();
    let hp = naive_matmul(h.as_ref(), p.as_ref());
    assert!(max_abs_diff(hp.as_ref(), Mat::<f64>::identity(n, n).as_ref()) < 1e-5);
    // Known entry of the inverse Hilbert matrix: (H⁻¹)₀₀ = n².
    assert!((p[(0, 0)] - 64.0).abs() < 1e-4 * 64.0);
    // Cholesky succeeds on it and agrees.
    let chol = Cholesky::factor(h.as_ref()).unwrap();
    assert!((chol.inverse()[(0, 0)] - 64.0).abs() < 1e-4 * 64.0);
}

#[test]
fn products_match_naive_loops() {
    let a = random(7, 5, 41);
    let b = random(5, 7, 42);
    let g = gram(a.as_ref(), Par::Seq);
    let g_naive = naive_matmul(a.transpose(), a.as_ref());
    assert!(max_abs_diff(g.as_ref(), g_naive.as_ref()) < 1e-12);
    for j in 0..5 {
        for i in 0..5 {
            assert_eq!(g[(i, j)], g[(j, i)], "gram must be exactly symmetric");
        }
    }
    let og = outer_gram(a.as_ref(), Par::Seq);
    assert!(
        max_abs_diff(
            og.as_ref(),
            naive_matmul(a.as_ref(), a.transpose()).as_ref()
        ) < 1e-12
    );
    let ab = matmul(a.as_ref(), b.as_ref(), Par::Seq).unwrap();
    assert!(max_abs_diff(ab.as_ref(), naive_matmul(a.as_ref(), b.as_ref()).as_ref()) < 1e-12);
    let atb = matmul_tn(b.as_ref(), a.transpose(), Par::Seq).unwrap();
    assert!(
        max_abs_diff(
            atb.as_ref(),
            naive_matmul(b.transpose(), a.transpose()).as_ref()
        ) < 1e-12
    );
    let t = trace_of_product(a.as_ref(), b.as_ref()).unwrap();
    assert!((t - trace(ab.as_ref()).unwrap()).abs() < 1e-12);
    assert!(matmul(a.as_ref(), a.as_ref(), Par::Seq).is_err());
    assert!(trace_of_product(a.as_ref(), a.as_ref()).is_err());
    assert!(trace(a.as_ref()).is_err());
    let mut nan = a.clone();
    nan[(0, 0)] = f64::INFINITY;
    assert!(!all_finite(nan.as_ref()));
    assert!(matches!(
        ThinSvd::new(nan.as_ref()),
        Err(LinalgError::NonFinite { .. })
    ));
}

#[test]
fn explicit_parallelism_products_match_naive_loops_for_every_par() {
    // Shapes large enough for faer to split the work across threads.
    let a = random(67, 45, 51);
    let b = random(45, 38, 52);
    let naive = naive_matmul(a.as_ref(), b.as_ref());
    for par in [Par::Seq, Par::rayon(2)] {
        let ab = gemm(a.as_ref(), b.as_ref(), par);
        assert!(max_abs_diff(ab.as_ref(), naive.as_ref()) < 1e-12 * 45.0);
        let mut dst = Mat::from_fn(67, 38, |_, _| f64::NAN);
        gemm_into(&mut dst, a.as_ref(), b.as_ref(), par);
        assert!(max_abs_diff(dst.as_ref(), naive.as_ref()) < 1e-12 * 45.0);

        // Lower triangle of A Bᵀ for a square result; the upper triangle
        // of the destination keeps its sentinel.
        let c = random(67, 45, 53);
        let mut lower = Mat::from_fn(67, 67, |_, _| -7.0);
        lower_triangle_of_product_into(&mut lower, a.as_ref(), c.transpose(), par);
        let full = naive_matmul(a.as_ref(), c.transpose());
        for j in 0..67 {
            for i in 0..67 {
                if i >= j {
                    assert!((lower[(i, j)] - full[(i, j)]).abs() < 1e-12 * 45.0);
                } else {
                    assert_eq!(lower[(i, j)], -7.0, "upper triangle was written");
                }
            }
        }
    }
    // Different parallelism, same bits: the optimizers' numbers must not
    // depend on the thread count.
    let seq = gram(a.as_ref(), Par::Seq);
    let par = gram(a.as_ref(), Par::rayon(2));
    assert_eq!(seq, par);
}

#[test]
fn lu_solves_and_inverts_a_nonsymmetric_indefinite_matrix() {
    let n = 9;
    let a = random(n, n, 61);
    let b = random(n, 3, 62);
    let lu = Lu::factor(a.as_ref()).unwrap();
    assert_eq!(lu.dim(), n);
    let x = lu.solve(b.as_ref()).unwrap();
    assert!(max_abs_diff(naive_matmul(a.as_ref(), x.as_ref()).as_ref(), b.as_ref()) < 1e-9);
    let inv = lu.inverse();
    let ainv = naive_matmul(a.as_ref(), inv.as_ref());
    assert!(max_abs_diff(ainv.as_ref(), Mat::<f64>::identity(n, n).as_ref()) < 1e-9);
    // A KKT matrix [[0, 1], [1, 0]] needs pivoting (zero leading entry).
    let kkt = Mat::from_fn(2, 2, |i, j| if i == j { 0.0 } else { 1.0 });
    let rhs = Mat::from_fn(2, 1, |i, _| (i + 2) as f64);
    let sol = Lu::factor(kkt.as_ref())
        .unwrap()
        .solve(rhs.as_ref())
        .unwrap();
    assert_eq!((sol[(0, 0)], sol[(1, 0)]), (3.0, 2.0));
    // Singular: non-finite solution, reported through all_finite.
    let singular = Mat::from_fn(2, 2, |_, _| 1.0);
    let s = Lu::factor(singular.as_ref())
        .unwrap()
        .solve(rhs.as_ref())
        .unwrap();
    assert!(!all_finite(s.as_ref()));
    assert!(matches!(
        Lu::factor(random(2, 3, 1).as_ref()),
        Err(LinalgError::NotSquare { .. })
    ));
    assert!(matches!(
        lu.solve(random(n + 1, 1, 2).as_ref()),
        Err(LinalgError::DimensionMismatch { .. })
    ));
}

#[test]
fn gram_root_reconstructs_the_gram_matrix_at_its_rank() {
    // W (12×8) of rank 5: G = WᵀW has rank 5, so R is 5×8 with RᵀR = G.
    let w = naive_matmul(random(12, 5, 71).as_ref(), random(5, 8, 72).as_ref());
    let g = naive_matmul(w.transpose(), w.as_ref());
    let (r, spectrum) = gram_root_and_spectrum(g.as_ref()).unwrap();
    assert_eq!((r.nrows(), r.ncols()), (5, 8));
    let rtr = naive_matmul(r.transpose(), r.as_ref());
    assert!(max_abs_diff(rtr.as_ref(), g.as_ref()) < 1e-10 * g.norm_max());
    // The spectrum: ascending, nonnegative, equal to σ(W)².
    assert!(spectrum.windows(2).all(|p| p[0] <= p[1]) && spectrum[0] >= 0.0);
    let mut sv2: Vec<f64> = ThinSvd::values_only(w.as_ref())
        .unwrap()
        .iter()
        .map(|s| s * s)
        .collect();
    sv2.sort_by(f64::total_cmp);
    for (l, s) in spectrum.iter().zip(&sv2) {
        assert!((l - s).abs() < 1e-10 * sv2[7]);
    }
    assert_eq!(gram_root(g.as_ref()).unwrap(), r);
    // Indefinite input is refused with its negative eigenvalue.
    let indefinite = Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 2.0 });
    match gram_root(indefinite.as_ref()) {
        Err(LinalgError::NotPositiveSemidefinite { eigenvalue }) => {
            assert!((eigenvalue + 1.0).abs() < 1e-12)
        }
        other => panic!("expected NotPositiveSemidefinite, got {other:?}"),
    }
}

/// Stacking puts row r of block k at row (rows of the blocks before k) + r,
/// entry for entry, and refuses a block of another width.
#[test]
fn stack_rows_places_every_entry_and_checks_widths() {
    let a = Mat::from_fn(2, 3, |i, j| (10 * i + j) as f64);
    let b = Mat::from_fn(1, 3, |_, j| -(j as f64) - 1.0);
    let c = Mat::from_fn(3, 3, |i, j| 100.0 + (i * 3 + j) as f64);
    let s = dp_linalg::stack_rows(&[a.clone(), b.clone(), c.clone()], 3).unwrap();
    assert_eq!((s.nrows(), s.ncols()), (6, 3));
    for j in 0..3 {
        for i in 0..2 {
            assert_eq!(s[(i, j)], a[(i, j)]);
        }
        assert_eq!(s[(2, j)], b[(0, j)]);
        for i in 0..3 {
            assert_eq!(s[(3 + i, j)], c[(i, j)]);
        }
    }
    assert_eq!(dp_linalg::stack_rows(&[], 4).unwrap().shape(), (0, 4));
    assert!(matches!(
        dp_linalg::stack_rows(&[a, Mat::zeros(1, 2)], 3),
        Err(dp_linalg::LinalgError::DimensionMismatch { right_cols: 2, .. })
    ));
}

/// `dot` equals the naive sum on every length (SIMD bodies and remainders,
/// including empty) to rounding, and reads only the common length.
#[test]
fn dot_matches_the_naive_sum() {
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    for len in [0, 1, 3, 7, 8, 9, 31, 64, 1000, 16_411] {
        let a: Vec<f64> = (0..len).map(|_| StandardNormal.sample(&mut rng)).collect();
        let b: Vec<f64> = (0..len).map(|_| StandardNormal.sample(&mut rng)).collect();
        let naive: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let scale: f64 = a.iter().zip(&b).map(|(x, y)| (x * y).abs()).sum();
        assert!(
            (dot(&a, &b) - naive).abs() <= 1e-14 * scale.max(1.0),
            "{len}"
        );
        if len > 1 {
            assert_eq!(dot(&a[..len - 1], &b), dot(&a[..len - 1], &b[..len - 1]));
        }
    }
}

/// `gram_lower` is the lower triangle of `gram` (zeros above), and the
/// Cholesky factor of either is the same; `tr(A⁻¹B)` through the explicit
/// inverse equals the solve-based trace and the naive `tr(inv(A)·B)` for
/// symmetric B.
#[test]
fn lower_gram_and_symmetric_trace_match_the_full_computations() {
    let a = random(23, 9, 5);
    let full = gram(a.as_ref(), Par::Seq);
    let lower = gram_lower(a.as_ref(), Par::rayon(0));
    for j in 0..9 {
        for i in 0..9 {
            let want = if i >= j { full[(i, j)] } else { 0.0 };
            assert!(
                (lower[(i, j)] - want).abs() < 1e-12 * full[(j, j)],
                "{i} {j}"
            );
        }
    }
    let (cf, cl) = (
        Cholesky::factor(full.as_ref()).unwrap(),
        Cholesky::factor(lower.as_ref()).unwrap(),
    );
    assert!(max_abs_diff(cf.lower(), cl.lower()) < 1e-12);
    let b = random_spd(9, 6);
    let by_solve = cf.trace_inverse_times(b.as_ref()).unwrap();
    let naive: f64 = {
        let p = naive_matmul(cf.inverse().as_ref(), b.as_ref());
        (0..9).map(|i| p[(i, i)]).sum()
    };
    let by_inverse = cf.trace_inverse_times_symmetric(b.as_ref()).unwrap();
    assert!((by_inverse - naive).abs() < 1e-10 * naive.abs());
    assert!((by_solve - naive).abs() < 1e-10 * naive.abs());
    assert!(
        cf.trace_inverse_times_symmetric(random(9, 8, 1).as_ref())
            .is_err()
    );
}
