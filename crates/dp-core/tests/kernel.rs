//! The privacy kernel end to end: measurements are multiples of their
//! granularity, the accountant refuses an overspend before drawing, the
//! ledger refuses overspends and edits, and the matrix mechanism's
//! Monte-Carlo error matches its closed form (fixed seeds, tolerances of
//! 5 standard errors).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use dp_core::ledger::{Ledger, LedgerBudget};
use dp_core::*;
use dp_linalg::Mat;

fn mean_and_var(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

fn is_multiple(v: f64, g: f64) -> bool {
    (v / g).fract() == 0.0
}

#[test]
fn measurements_are_exact_multiples_of_their_granularity() {
    let data = PrivateHistogram::from_counts(vec![3, 0, 17, 1_000_000, 5, 9]).unwrap();
    let dense = Mat::from_fn(4, 6, |i, j| ((i * 6 + j) as f64 * 0.37).sin());
    let a = Mat::from_fn(2, 2, |i, j| [[1.0, 0.5], [0.0, 1.0]][i][j]);
    let b = Mat::from_fn(3, 3, |i, j| if j <= i { 1.0 / 3.0 } else { 0.0 });
    let strategies = [
        LinearStrategy::dense(dense.as_ref()).unwrap(),
        LinearStrategy::kronecker(&[a.as_ref(), b.as_ref()]).unwrap(),
        LinearStrategy::union(vec![
            (0.7, vec![a.clone(), b.clone()]),
            (1.3, vec![dense.transpose().to_owned() * dense.clone()]),
        ])
        .unwrap(),
    ];
    // The union's stated bound, from its terms' densified factors:
    // L1 Σ|w|·Π Δ₁(factor), L2 (Σ w²·Π Δ₂(factor)²)^½.
    let dtd = dense.transpose().to_owned() * dense.clone();
    let l1 = |m: &Mat<f64>| sensitivity_l1(m.as_ref()).unwrap();
    let l2 = |m: &Mat<f64>| sensitivity_l2(m.as_ref()).unwrap();
    let union_l1 = 0.7 * l1(&a) * l1(&b) + 1.3 * l1(&dtd);
    let union_l2 = (0.49 * (l2(&a) * l2(&b)).powi(2) + 1.69 * l2(&dtd).powi(2)).sqrt();
    let mut session = experiments::SeededSession::unlimited(3);
    for (index, s) in strategies.iter().enumerate() {
        for cost in [Cost::Epsilon(0.3), Cost::Rho(0.05)] {
            let m = session.measure_linear(s, &data, cost).unwrap();
            assert_eq!(m.values.len(), s.nrows());
            assert!(m.granularity > 0.0 && m.granularity.log2().fract() == 0.0);
            assert!(
                m.values.iter().all(|&v| is_multiple(v, m.granularity)),
                "{cost:?}"
            );
            assert_eq!(m.cost, cost);
            // The kernel's own sensitivity matches the densified strategy (one
            // term) or bounds it (a union).
            let d = s.to_dense();
            let truth = match cost {
                Cost::Epsilon(_) => sensitivity_l1(d.as_ref()).unwrap(),
                Cost::Rho(_) => sensitivity_l2(d.as_ref()).unwrap(),
            };
            assert!(
                m.sensitivity >= truth * (1.0 - 1e-6),
                "{} < {truth}",
                m.sensitivity
            );
            // … and is not inflated: equal to it up to the grid rounding of
            // the entries for one term, within the stated bound for a union.
            let upper = match (index, cost) {
                (2, Cost::Epsilon(_)) => union_l1,
                (2, Cost::Rho(_)) => union_l2,
                _ => truth,
            };
            assert!(
                m.sensitivity <= upper * (1.0 + 1e-6),
                "{} > {upper}",
                m.sensitivity
            );
            match m.noise {
                MeasurementNoise::DiscreteLaplace { scale } => {
                    assert!((scale - m.sensitivity / 0.3).abs() <= 1e-9 * scale)
                }
                MeasurementNoise::DiscreteGaussian { sigma } => {
                    assert!((sigma - m.sensitivity / 0.1f64.sqrt()).abs() <= 1e-9 * sigma)
                }
            }
        }
    }
}

#[test]
fn the_accountant_refuses_an_overspend_before_drawing() {
    let data = PrivateHistogram::from_counts(vec![1, 2, 3]).unwrap();
    let s = LinearStrategy::dense(Mat::<f64>::identity(3, 3).as_ref()).unwrap();
    let mut a = experiments::SeededSession::pure(1.0, 5).unwrap();
    let mut b = experiments::SeededSession::pure(1.0, 5).unwrap();
    let first = a.measure_linear(&s, &data, Cost::Epsilon(0.6)).unwrap();
    assert!(matches!(
        a.measure_linear(&s, &data, Cost::Epsilon(0.6)),
        Err(DpError::BudgetExceeded { .. })
    ));
    assert_eq!(a.measurements(), 1);
    assert!((a.spent() - 0.6).abs() < 1e-15);
    // Nothing was drawn by the refusal: the next admissible measurement
    // draws what the second measurement of an identical session draws.
    let _ = b.measure_linear(&s, &data, Cost::Epsilon(0.6)).unwrap();
    let next_a = a.measure_linear(&s, &data, Cost::Epsilon(0.4)).unwrap();
    let next_b = b.measure_linear(&s, &data, Cost::Epsilon(0.4)).unwrap();
    assert_eq!(next_a, next_b);
    assert_ne!(first.values, next_a.values);
    // A pure session cannot pay for a Gaussian measurement; the kinds of
    // cost are validated.
    let mut c = experiments::SeededSession::pure(1.0, 1).unwrap();
    assert!(c.measure_linear(&s, &data, Cost::Rho(0.1)).is_err());
    assert!(
        c.measure_linear(&s, &data, Cost::Epsilon(f64::NAN))
            .is_err()
    );
    assert!(c.measure_linear(&s, &data, Cost::Epsilon(1e-310)).is_err());
    assert_eq!(c.measurements(), 0);
    // A zCDP session charges ε²/2 for a Laplace measurement.
    let mut z = experiments::SeededSession::zcdp(0.5, 1).unwrap();
    z.measure_linear(&s, &data, Cost::Epsilon(0.5)).unwrap();
    assert!((z.spent() - 0.125).abs() < 1e-15);
    // Session::approx holds the CKS20 ρ of (ε, δ); real sessions are not reproducible.
    let real = Session::approx(1.0, 1e-6).unwrap();
    assert!(!real.is_reproducible());
    match real.budget() {
        Some(TotalBudget::Zcdp { rho }) => {
            assert_eq!(rho, kernel::zcdp_rho_for(1.0, 1e-6).unwrap())
        }
        other => panic!("{other:?}"),
    }
    // Dimension mismatch is refused before charging.
    let mut d = experiments::SeededSession::pure(1.0, 1).unwrap();
    let small = PrivateHistogram::from_counts(vec![1, 2]).unwrap();
    assert!(d.measure_linear(&s, &small, Cost::Epsilon(0.5)).is_err());
    assert_eq!(d.spent(), 0.0);
}

#[test]
fn private_histograms_validate_and_hide_their_counts() {
    assert!(PrivateHistogram::from_counts(vec![]).is_err());
    assert!(PrivateHistogram::from_counts(vec![kernel::MAX_COUNT + 1]).is_err());
    assert!(PrivateHistogram::from_f64_counts(&[1.5]).is_err());
    assert!(PrivateHistogram::from_f64_counts(&[-1.0]).is_err());
    assert!(PrivateHistogram::from_f64_counts(&[f64::NAN]).is_err());
    let h = PrivateHistogram::from_counts(vec![123_456_789, 42]).unwrap();
    let shown = format!("{h:?}");
    assert!(
        !shown.contains("123456789") && !shown.contains("42"),
        "{shown}"
    );
}

fn temp_ledger(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dp-core-ledger-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("ledger.jsonl")
}

#[test]
fn the_ledger_refuses_a_second_release_and_keeps_the_file_unchanged() {
    let path = temp_ledger("overspend");
    Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).unwrap();
    assert!(Ledger::init(&path, LedgerBudget::PureDp { epsilon: 1.0 }).is_err());
    {
        let mut ledger = Ledger::open(&path).unwrap();
        // A second opener is locked out while this one holds the ledger.
        assert!(matches!(Ledger::open(&path), Err(DpError::Ledger(_))));
        ledger.charge(0.6, "first").unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let mut ledger = Ledger::open(&path).unwrap();
    assert!((ledger.spent() - 0.6).abs() < 1e-15);
    assert!(matches!(
        ledger.open_session(0.6, "second"),
        Err(DpError::BudgetExceeded { .. })
    ));
    drop(ledger);
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.entries().len(), 2);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

/// Every charge survives the file's round trip bit for bit, so the hash
/// recomputed on reopening matches: the ρ of an (ε, δ) release (here the
/// one `dpmm release --epsilon 0.6 --delta 1e-6` charges, whose decimal
/// serde_json's default fast float parser reads one unit in the last
/// place off, so a zCDP ledger was refused after its first release) and
/// amounts of every magnitude.
#[test]
fn a_ledger_with_any_charges_reopens() {
    let path = temp_ledger("roundtrip");
    Ledger::init(&path, LedgerBudget::Zcdp { rho: 1.0 }).unwrap();
    let mut amounts = vec![dp_core::kernel::zcdp_rho_for(0.6, 1e-6).unwrap()];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..200 {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        amounts.push(unit * 10f64.powi(-((x % 12) as i32)) * 1e-3);
    }
    for (k, &a) in amounts.iter().enumerate() {
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.charge(a, &format!("charge {k}")).unwrap();
    }
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(ledger.entries().len(), amounts.len() + 1);
    for (record, &a) in ledger.entries()[1..].iter().zip(&amounts) {
        match record {
            dp_core::ledger::Record::Charge { amount, .. } => {
                assert_eq!(amount.to_bits(), a.to_bits(), "{amount} vs {a}");
            }
            other => panic!("not a charge: {other:?}"),
        }
    }
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn the_ledger_refuses_an_edited_or_truncated_file() {
    let path = temp_ledger("edited");
    Ledger::init(&path, LedgerBudget::Zcdp { rho: 1.0 }).unwrap();
    {
        let mut ledger = Ledger::open(&path).unwrap();
        ledger.charge(0.5, "a").unwrap();
        ledger.charge(0.25, "b").unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    // Lowering a charge by hand.
    std::fs::write(&path, text.replace("0.5", "0.1")).unwrap();
    assert!(matches!(Ledger::open(&path), Err(DpError::Ledger(_))));
    // Deleting the last charge (a consistent prefix is still a valid
    // ledger, so delete a middle one instead).
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(&path, format!("{}\n{}\n", lines[0], lines[2])).unwrap();
    assert!(matches!(Ledger::open(&path), Err(DpError::Ledger(_))));
    // Garbage and an empty file.
    std::fs::write(&path, "not json\n").unwrap();
    assert!(Ledger::open(&path).is_err());
    std::fs::write(&path, "").unwrap();
    assert!(Ledger::open(&path).is_err());
    // The intact file opens.
    std::fs::write(&path, &text).unwrap();
    assert!((Ledger::open(&path).unwrap().spent() - 0.75).abs() < 1e-15);
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn matrix_mechanism_monte_carlo_matches_closed_form() {
    let n = 4;
    let prefix = Mat::from_fn(n, n, |i, j| if j <= i { 1.0 } else { 0.0 });
    // H_4, the binary tree over 4 cells: the total, the two halves, the cells.
    let h4 = Mat::from_fn(7, 4, |i, j| match i {
        0 => 1.0,
        1 | 2 => f64::from(u8::from(j / 2 == i - 1)),
        _ => f64::from(u8::from(j == i - 3)),
    });
    // Rank 2, supports the workload of pair sums and the total.
    let rank2 = Mat::from_fn(3, 4, |i, j| {
        [[1., 1., 0., 0.], [0., 0., 1., 1.], [1., 1., 1., 1.]][i][j]
    });
    let pairs = Mat::from_fn(2, 4, |i, j| [[1., 1., 0., 0.], [1., 1., 1., 1.]][i][j]);
    let x = [120.0, 7.0, 0.0, 55.0];
    let cases = [
        (
            prefix.clone(),
            h4.clone(),
            PrivacyBudget::pure(0.5).unwrap(),
            1u64,
        ),
        (
            prefix.clone(),
            h4.clone(),
            PrivacyBudget::approx(0.5, 1e-5).unwrap(),
            2,
        ),
        (
            pairs.clone(),
            rank2.clone(),
            PrivacyBudget::pure(1.0).unwrap(),
            3,
        ),
        (pairs, rank2, PrivacyBudget::approx(2.0, 1e-3).unwrap(), 4),
    ];
    let draws = 20_000;
    for (w, a, budget, seed) in cases {
        let mech = MatrixMechanism::new(a.as_ref(), budget).unwrap();
        let expected = expected_total_squared_error(w.as_ref(), a.as_ref(), &mech.noise()).unwrap();
        let truth: Vec<f64> = (0..w.nrows())
            .map(|i| (0..n).map(|j| w[(i, j)] * x[j]).sum())
            .collect();
        let mut session = experiments::SeededSession::unlimited(seed);
        let data = PrivateHistogram::from_f64_counts(&x).unwrap();
        let mut bias = vec![0.0; truth.len()];
        let errors: Vec<f64> = (0..draws)
            .map(|_| {
                let ans = mech.release(w.as_ref(), &data, &mut session).unwrap();
                for (b, (a, t)) in bias.iter_mut().zip(ans.iter().zip(&truth)) {
                    *b += (a - t) / draws as f64;
                }
                ans.iter().zip(&truth).map(|(a, t)| (a - t).powi(2)).sum()
            })
            .collect();
        let (mean, var) = mean_and_var(&errors);
        let se = (var / draws as f64).sqrt();
        assert!(
            (mean - expected).abs() < 5.0 * se,
            "{budget:?}: empirical {mean} vs closed form {expected} (se {se})"
        );
        // Unbiasedness: each query's mean error is zero within 5 standard
        // errors (its variance is at most the total expected error).
        for b in bias {
            assert!(b.abs() < 5.0 * (expected / draws as f64).sqrt(), "bias {b}");
        }
    }
}

#[test]
fn default_matrix_mechanism_releases_through_an_approx_session() {
    // The default calibration under (ε, δ) is the session's own zCDP: one
    // release spends exactly the session, a second is refused.
    let (eps, delta) = (1.0, 1e-6);
    let a = Mat::from_fn(3, 3, |i, j| if j <= i { 1.0 } else { 0.0 });
    let w = Mat::from_fn(2, 3, |i, j| if j == i + 1 { 1.0 } else { 0.0 });
    let data = PrivateHistogram::from_counts(vec![4, 0, 9]).unwrap();
    let budget = PrivacyBudget::approx(eps, delta).unwrap();
    let mech = MatrixMechanism::new(a.as_ref(), budget).unwrap();
    let rho = kernel::zcdp_rho_for(eps, delta).unwrap();
    assert_eq!(mech.cost(), Cost::Rho(rho));
    // σ = Δ₂/√(2ρ), Δ₂(A) = √3 (the first column).
    let sigma = 3f64.sqrt() / (2.0 * rho).sqrt();
    assert!((mech.noise().scale - sigma).abs() <= 1e-12 * sigma);
    let mut session = Session::approx(eps, delta).unwrap();
    let answers = mech.release(w.as_ref(), &data, &mut session).unwrap();
    assert_eq!(answers.len(), 2);
    assert!(answers.iter().all(|v| v.is_finite()));
    assert_eq!(session.measurements(), 1);
    assert!(matches!(
        mech.release(w.as_ref(), &data, &mut session),
        Err(DpError::BudgetExceeded { .. })
    ));
    // The analytic calibration needs more ρ than the session holds.
    let analytic =
        MatrixMechanism::with_calibration(a.as_ref(), budget, GaussianCalibration::Analytic)
            .unwrap();
    let mut fresh = Session::approx(eps, delta).unwrap();
    assert!(matches!(
        analytic.release(w.as_ref(), &data, &mut fresh),
        Err(DpError::BudgetExceeded { .. })
    ));
    assert_eq!(fresh.measurements(), 0);
}
