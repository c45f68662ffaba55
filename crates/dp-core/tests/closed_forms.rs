//! The matrix mechanism's error formulas against the papers' closed forms.

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::*;
use dp_linalg::{Mat, MatRef};

fn mat(rows: &[&[f64]]) -> Mat<f64> {
    Mat::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

/// H_4 of the matrix mechanism paper, Figure 1 (binary hierarchy).
fn h4() -> Mat<f64> {
    mat(&[
        &[1., 1., 1., 1.],
        &[1., 1., 0., 0.],
        &[0., 0., 1., 1.],
        &[1., 0., 0., 0.],
        &[0., 1., 0., 0.],
        &[0., 0., 1., 0.],
        &[0., 0., 0., 1.],
    ])
}

/// Y_4, the Haar wavelet strategy of Figure 1.
fn y4() -> Mat<f64> {
    mat(&[
        &[1., 1., 1., 1.],
        &[1., 1., -1., -1.],
        &[1., -1., 0., 0.],
        &[0., 0., 1., -1.],
    ])
}

fn unit(n: usize, i: usize) -> Mat<f64> {
    Mat::from_fn(1, n, |_, j| if i == j { 1.0 } else { 0.0 })
}

/// `(AᵀA)⁻¹` read off the error formula: entry (i, j) of the profile is
/// `(tr((eᵢ+eⱼ)ᵀ(eᵢ+eⱼ) M) − Mᵢᵢ − Mⱼⱼ)/2`, using only `trace_objective`.
fn profile_via_trace(a: MatRef<'_, f64>) -> Mat<f64> {
    let n = a.ncols();
    let diag: Vec<f64> = (0..n)
        .map(|i| trace_objective(unit(n, i).as_ref(), a).unwrap())
        .collect();
    Mat::from_fn(n, n, |i, j| {
        if i == j {
            diag[i]
        } else {
            let w = Mat::from_fn(1, n, |_, k| if k == i || k == j { 1.0 } else { 0.0 });
            (trace_objective(w.as_ref(), a).unwrap() - diag[i] - diag[j]) / 2.0
        }
    })
}

#[test]
fn error_profile_of_h4_matches_figure_3b() {
    let expected = [
        [13., -8., -1., -1.],
        [-8., 13., -1., -1.],
        [-1., -1., 13., -8.],
        [-1., -1., -8., 13.],
    ];
    let got = profile_via_trace(h4().as_ref());
    for i in 0..4 {
        for j in 0..4 {
            assert!(
                (got[(i, j)] - expected[i][j] / 21.0).abs() < 1e-12,
                "({i},{j}): {} vs {}/21",
                got[(i, j)],
                expected[i][j]
            );
        }
    }
}

#[test]
fn error_profile_of_y4_matches_figure_3c() {
    let expected = [
        [3., -1., 0., 0.],
        [-1., 3., 0., 0.],
        [0., 0., 3., -1.],
        [0., 0., -1., 3.],
    ];
    let got = profile_via_trace(y4().as_ref());
    for i in 0..4 {
        for j in 0..4 {
            assert!((got[(i, j)] - expected[i][j] / 8.0).abs() < 1e-12);
        }
    }
}

#[test]
fn sensitivities_of_h4_and_y4_are_three() {
    assert_eq!(sensitivity_l1(h4().as_ref()).unwrap(), 3.0);
    assert_eq!(sensitivity_l1(y4().as_ref()).unwrap(), 3.0);
    assert!((sensitivity_l2(h4().as_ref()).unwrap() - 3f64.sqrt()).abs() < 1e-15);
    // Y_4 column 0 is (1, 1, 1, 0): L2 norm √3.
    assert!((sensitivity_l2(y4().as_ref()).unwrap() - 3f64.sqrt()).abs() < 1e-15);
    assert_eq!(
        sensitivity_l1(Mat::<f64>::identity(5, 5).as_ref()).unwrap(),
        1.0
    );
}

/// The LRM paper's running example (§1): q1 = 2x₂+x₃+x₄, q2 = x₂+2x₄,
/// q3 = x₁+2x₃+2x₄. Noise on the data (identity strategy) has total
/// squared error 2 Σⱼ‖wⱼ‖²/ε² = 40/ε²; noise on the queries (NOQ, Δ₁(W) = 5)
/// has 3·2·25/ε² = 150/ε².
#[test]
fn lrm_three_query_example_noise_on_data_is_40_over_eps_squared() {
    let w = mat(&[&[0., 2., 1., 1.], &[0., 1., 0., 2.], &[1., 0., 2., 2.]]);
    let identity = Mat::<f64>::identity(4, 4);
    for eps in [0.1, 1.0, 2.5] {
        let laplace = |strategy: &Mat<f64>| {
            NoiseCalibration::for_strategy(
                strategy.as_ref(),
                PrivacyBudget::pure(eps).unwrap(),
                GaussianCalibration::Analytic,
            )
            .unwrap()
        };
        let noise = laplace(&identity);
        let total = expected_total_squared_error(w.as_ref(), identity.as_ref(), &noise).unwrap();
        assert!((total - 40.0 / (eps * eps)).abs() < 1e-10 / (eps * eps));
        let per_query =
            expected_per_query_squared_error(w.as_ref(), identity.as_ref(), &noise).unwrap();
        // Each query's error is 2‖wᵢ‖²/ε²: 12, 10, 18.
        for (got, norm2) in per_query.iter().zip([6.0, 5.0, 9.0]) {
            assert!((got - 2.0 * norm2 / (eps * eps)).abs() < 1e-10 / (eps * eps));
        }
        let noq = laplace(&w);
        let total_noq = expected_total_squared_error(w.as_ref(), w.as_ref(), &noq).unwrap();
        assert!((total_noq - 150.0 / (eps * eps)).abs() < 1e-9 / (eps * eps));
    }
    assert!((l1_obj(w.as_ref(), identity.as_ref()).unwrap() - 20.0).abs() < 1e-12);
}

#[test]
fn l2_objective_and_svd_bound() {
    // For the identity workload every strategy has l2_obj >= n (SVD bound
    // (Σσ)²/n = n²/n), and I_n attains it.
    let n = 6;
    let id = Mat::<f64>::identity(n, n);
    assert!((svd_lower_bound(id.as_ref()).unwrap() - n as f64).abs() < 1e-12);
    assert!((l2_obj(id.as_ref(), id.as_ref()).unwrap() - n as f64).abs() < 1e-12);
    // Prefix workload over 4 cells, strategy H_4: bound <= l2_obj.
    let prefix = Mat::from_fn(4, 4, |i, j| if j <= i { 1.0 } else { 0.0 });
    let bound = svd_lower_bound(prefix.as_ref()).unwrap();
    let gram = dp_linalg::gram(prefix.as_ref(), dp_linalg::Par::Seq);
    assert!((svd_lower_bound_from_gram(gram.as_ref()).unwrap() - bound).abs() < 1e-10);
    // A rank-2 workload on 13 cells: the Gram's eleven zero eigenvalues
    // are rounding noise and must not enter as √ε-sized singular values.
    let low_rank = Mat::from_fn(6, 13, |i, j| {
        ((i % 2 + 1) * (j % 3)) as f64 + (i / 2) as f64
    });
    let exact = svd_lower_bound(low_rank.as_ref()).unwrap();
    let low_gram = dp_linalg::gram(low_rank.as_ref(), dp_linalg::Par::Seq);
    let from_gram = svd_lower_bound_from_gram(low_gram.as_ref()).unwrap();
    assert!(
        (from_gram - exact).abs() <= 1e-12 * exact,
        "{from_gram} vs {exact}"
    );
    let l2 = l2_obj(prefix.as_ref(), h4().as_ref()).unwrap();
    assert!(bound <= l2 + 1e-12, "{bound} > {l2}");
    // l2_obj of H_4 on prefix: Δ₂² = 3, times the trace with the Figure 3 profile.
    let mut tr = 0.0;
    let p = [
        [13., -8., -1., -1.],
        [-8., 13., -1., -1.],
        [-1., -1., 13., -8.],
        [-1., -1., -8., 13.],
    ];
    for row in 0..4 {
        for i in 0..=row {
            for j in 0..=row {
                tr += p[i][j] / 21.0;
            }
        }
    }
    assert!((l2 - 3.0 * tr).abs() < 1e-12);
}

#[test]
fn rank_deficient_strategies_support_or_refuse() {
    // A rank-2 strategy on 4 cells: rows (1,1,0,0) and (0,0,1,1), duplicated.
    let a = mat(&[&[1., 1., 0., 0.], &[0., 0., 1., 1.], &[2., 2., 0., 0.]]);
    // The total query and pair sums are supported.
    let supported = mat(&[&[1., 1., 1., 1.], &[3., 3., -1., -1.]]);
    let check = check_support(supported.as_ref(), a.as_ref(), 1e-8).unwrap();
    assert!(check.supported && check.strategy_rank == 2);
    // tr(WᵀW (AᵀA)⁺): AᵀA = 5·(e₁+e₂)(e₁+e₂)ᵀ + (e₃+e₄)(e₃+e₄)ᵀ, whose
    // pseudo-inverse is (1/20)(e₁+e₂)(e₁+e₂)ᵀ + (1/4)(e₃+e₄)(e₃+e₄)ᵀ.
    // Row (1,1,1,1): 4/20 + 4/4 = 1.2; row (3,3,-1,-1): 36/20 + 4/4 = 2.8.
    let tr = trace_objective(supported.as_ref(), a.as_ref()).unwrap();
    assert!((tr - 4.0).abs() < 1e-12, "{tr}");
    // A single cell is not in the row space.
    let cell = mat(&[&[1., 0., 0., 0.]]);
    let check = check_support(cell.as_ref(), a.as_ref(), 1e-8).unwrap();
    assert!(!check.supported);
    // Residual of e₁ outside span{(1,1,0,0),(0,0,1,1)}/‖·‖ is 1/√2.
    assert!((check.relative_residual - 0.5f64.sqrt()).abs() < 1e-12);
    assert!(matches!(
        l1_obj(cell.as_ref(), a.as_ref()),
        Err(DpError::UnsupportedWorkload { .. })
    ));
    let eval = evaluate_strategy(cell.as_ref(), a.as_ref()).unwrap();
    assert!(!eval.support.supported);
}

#[test]
fn structural_error_of_an_inexact_decomposition() {
    let w = mat(&[&[1., 1.], &[1., -1.]]);
    let b = mat(&[&[1.], &[0.]]);
    let l = mat(&[&[1., 1.]]);
    // (W − BL) x = (0, x₁ − x₂): with x = (3, 1) the error is 4.
    let e = structural_squared_error(w.as_ref(), b.as_ref(), l.as_ref(), &[3.0, 1.0]).unwrap();
    assert!((e - 4.0).abs() < 1e-15);
    assert!(structural_squared_error(w.as_ref(), l.as_ref(), b.as_ref(), &[1.0, 1.0]).is_err());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let good = Mat::<f64>::identity(3, 3);
    let mut nan = good.clone();
    nan[(1, 2)] = f64::NAN;
    assert!(matches!(
        l1_obj(nan.as_ref(), good.as_ref()),
        Err(DpError::NonFinite { row: 1, col: 2, .. })
    ));
    let mut inf = good.clone();
    inf[(0, 0)] = f64::NEG_INFINITY;
    let empty = Mat::<f64>::zeros(0, 3);
    let zero = Mat::<f64>::zeros(2, 3);
    let wrong = Mat::<f64>::identity(4, 4);
    type IsExpected = fn(&DpError) -> bool;
    let cases: [(&str, Result<f64>, IsExpected); 5] = [
        ("∞ in A", l2_obj(good.as_ref(), inf.as_ref()), |e| {
            matches!(e, DpError::NonFinite { .. })
        }),
        ("empty W", l1_obj(empty.as_ref(), good.as_ref()), |e| {
            matches!(e, DpError::Empty { .. })
        }),
        ("zero W", l1_obj(zero.as_ref(), good.as_ref()), |e| {
            matches!(e, DpError::ZeroMatrix { .. })
        }),
        ("zero A", l1_obj(good.as_ref(), zero.as_ref()), |e| {
            matches!(e, DpError::ZeroMatrix { .. })
        }),
        (
            "4×4 A for 3 cells",
            l1_obj(good.as_ref(), wrong.as_ref()),
            |e| matches!(e, DpError::DimensionMismatch { .. }),
        ),
    ];
    for (what, got, expected) in cases {
        assert!(got.as_ref().is_err_and(expected), "{what}: {got:?}");
    }
    for eps in [0.0, -1.0, 1e-310, 1e3, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            PrivacyBudget::pure(eps),
            Err(DpError::InvalidEpsilon(_))
        ));
    }
    for delta in [0.0, 1.0, 0.9, 1e-310, -0.1, 1.5, f64::NAN] {
        assert!(matches!(
            PrivacyBudget::approx(1.0, delta),
            Err(DpError::InvalidDelta(_))
        ));
    }
    let mech = MatrixMechanism::new(good.as_ref(), PrivacyBudget::pure(1.0).unwrap()).unwrap();
    let mut session = experiments::SeededSession::unlimited(1);
    let short = PrivateHistogram::from_counts(vec![1, 2]).unwrap();
    assert!(mech.measure(&short, &mut session).is_err());
    let unsupported = mat(&[&[1., 0., 0.]]);
    let rank1 = mat(&[&[1., 1., 1.]]);
    let mech = MatrixMechanism::new(rank1.as_ref(), PrivacyBudget::pure(1.0).unwrap()).unwrap();
    let data = PrivateHistogram::from_counts(vec![1, 2, 3]).unwrap();
    assert!(matches!(
        mech.release(unsupported.as_ref(), &data, &mut session),
        Err(DpError::UnsupportedWorkload { .. })
    ));
    assert!(matches!(
        mech.release_many(unsupported.as_ref(), &data, 4, &mut session),
        Err(DpError::UnsupportedWorkload { .. })
    ));
    // release_many draws exactly what as many release calls draw.
    let w = mat(&[&[2., 2., 2.], &[-1., -1., -1.]]);
    let many = mech
        .release_many(
            w.as_ref(),
            &data,
            3,
            &mut experiments::SeededSession::unlimited(9),
        )
        .unwrap();
    let mut session = experiments::SeededSession::unlimited(9);
    let one_by_one: Vec<Vec<f64>> = (0..3)
        .map(|_| mech.release(w.as_ref(), &data, &mut session).unwrap())
        .collect();
    assert_eq!(many, one_by_one);
    assert!(many[0] != many[1]);
}

/// The identity's fast path agrees with the general evaluation of the
/// same strategy (the identity with one entry perturbed by 1e-300 takes
/// the general path) and with the closed form tr(WᵀW), Δ₁ = Δ₂ = 1.
#[test]
fn identity_strategy_takes_the_closed_form() {
    let w = y4();
    let g = dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq);
    let i4 = Mat::<f64>::identity(4, 4);
    let fast = evaluate_strategy_gram(g.as_ref(), i4.as_ref()).unwrap();
    let mut near = i4.clone();
    near[(3, 0)] = 1e-300;
    let general = evaluate_strategy_gram(g.as_ref(), near.as_ref()).unwrap();
    let trace: f64 = (0..4).map(|i| g[(i, i)]).sum();
    assert_eq!(fast.trace, trace);
    assert!((general.trace - trace).abs() < 1e-12 * trace);
    assert_eq!((fast.sensitivity_l1, fast.sensitivity_l2), (1.0, 1.0));
    assert!(fast.support.supported && general.support.supported);
    assert_eq!(fast.l1_obj(), trace);
}

/// The row-whitening evaluation equals the SVD one: the same trace,
/// sensitivities and support verdict on full-rank strategies (H4, Y4,
/// a tall random one) and, through its fallback, on a rank-deficient
/// strategy that supports W and one that does not.
#[test]
fn row_whitening_evaluation_equals_the_svd_one() {
    let w = Mat::from_fn(9, 4, |i, j| (((i * 5 + j * 3) % 7) as f64 - 2.0) / 3.0);
    let tall = Mat::from_fn(6, 4, |i, j| {
        ((i * 11 + j * 13) % 5) as f64 + f64::from(u8::from(i == j))
    });
    let sum_pairs = mat(&[&[1.0, 1.0, 0.0, 0.0], &[0.0, 0.0, 1.0, 1.0]]);
    let first_two = mat(&[
        &[1.0, 0.0, 0.0, 0.0],
        &[0.0, 1.0, 0.0, 0.0],
        &[0.0, 0.0, 1.0, 1.0],
    ]);
    let pairs_w = mat(&[&[2.0, 2.0, 0.0, 0.0], &[1.0, 1.0, -1.0, -1.0]]);
    for (a, w) in [
        (h4(), &w),
        (y4(), &w),
        (tall, &w),
        (sum_pairs.clone(), &pairs_w),
        (first_two, &w),
    ] {
        let svd = evaluate_strategy(w.as_ref(), a.as_ref()).unwrap();
        let rows = evaluate_strategy_rows(w.as_ref(), a.as_ref()).unwrap();
        assert_eq!(rows.support.supported, svd.support.supported);
        assert_eq!(rows.support.strategy_rank, svd.support.strategy_rank);
        assert_eq!(rows.sensitivity_l1, svd.sensitivity_l1);
        assert_eq!(rows.sensitivity_l2, svd.sensitivity_l2);
        assert!(
            (rows.trace - svd.trace).abs() <= 1e-12 * svd.trace,
            "{} vs {}",
            rows.trace,
            svd.trace
        );
    }
    // H4 on the identity workload: tr((H4ᵀH4)⁻¹) = 4 · 13/21, the trace
    // of figure 3b's profile.
    let identity = Mat::<f64>::identity(4, 4);
    let eval = evaluate_strategy_rows(identity.as_ref(), h4().as_ref()).unwrap();
    assert!((eval.trace - 52.0 / 21.0).abs() <= 1e-13, "{}", eval.trace);
}
