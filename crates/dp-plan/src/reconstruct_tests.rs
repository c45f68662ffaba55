#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test

use super::*;
use crate::reconstruct::Problem;
use crate::{PlanOptions, StructuredPlan, plan_strategy};
use dp_core::{KronTerm, MarginalStrategy};
use dp_opt::{PrivacyModel, Termination};
use dp_workloads::spec::parse_spec;
use std::path::Path;

fn spec(domain: &str, queries: &str) -> StructuredWorkload {
    parse_spec(
        &format!(r#"{{"domain": {domain}, "queries": {queries}}}"#),
        Path::new("."),
    )
    .unwrap()
}

/// `(attribute position, factor)` pairs.
type Factors = Vec<(usize, Mat<f64>)>;

/// Terms from `(weight, factors)` pairs.
fn terms(v: Vec<(f64, Factors)>) -> Vec<KronTerm> {
    v.into_iter().map(|(w, f)| KronTerm::new(w, f)).collect()
}

/// The kernel's quantization of a plan (no data involved).
fn measured(plan: &StructuredPlan) -> MeasuredStrategy {
    MarginalStrategy::new(plan.strategy.shape.clone(), &plan.strategy.terms)
        .unwrap()
        .measured_strategy()
        .clone()
}

/// The number of rows of the stacked measured strategy.
fn strategy_rows(m: &MeasuredStrategy) -> usize {
    m.terms
        .iter()
        .map(|t| t.factors.iter().map(|f| f.nrows()).product::<usize>())
        .sum()
}

fn kron(a: &Mat<f64>, b: &Mat<f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows() * b.nrows(), a.ncols() * b.ncols(), |i, j| {
        a[(i / b.nrows(), j / b.ncols())] * b[(i % b.nrows(), j % b.ncols())]
    })
}

/// The densified measured strategy, written independently of the module.
fn densify(m: &MeasuredStrategy, shape: &[usize]) -> Mat<f64> {
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for t in &m.terms {
        let mut out = if t.support.is_empty() {
            t.factors[0].clone()
        } else {
            Mat::from_fn(1, 1, |_, _| 1.0)
        };
        for (i, &n) in shape.iter().enumerate() {
            let f = match t.support.iter().position(|&p| p == i) {
                Some(k) => t.factors[k].clone(),
                None => Mat::from_fn(1, n, |_, _| 1.0),
            };
            out = kron(&out, &f);
        }
        for r in 0..out.nrows() {
            rows.push((0..out.ncols()).map(|j| out[(r, j)]).collect());
        }
    }
    Mat::from_fn(rows.len(), rows[0].len(), |i, j| rows[i][j])
}

/// Truth: x̂ = Ã⁺ y by the dense pseudo-inverse of Ã itself, answers
/// W x̂, variances v ‖wᵀÃ⁺‖² and the noise coefficients' fourth powers
/// ‖wᵀÃ⁺‖₄⁴.
fn dense_truth(
    w: &StructuredWorkload,
    a: &Mat<f64>,
    y: &[f64],
    v: f64,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let pinv = pseudo_inverse(a.as_ref(), None).unwrap();
    let wm = w.dense_matrix().unwrap();
    let wp = dp_linalg::gemm(wm.as_ref(), pinv.as_ref(), Par::Seq);
    let answers = (0..wp.nrows())
        .map(|r| (0..y.len()).map(|i| wp[(r, i)] * y[i]).sum())
        .collect();
    let vars = (0..wp.nrows())
        .map(|r| v * (0..y.len()).map(|i| wp[(r, i)].powi(2)).sum::<f64>())
        .collect();
    let fourth = (0..wp.nrows())
        .map(|r| (0..y.len()).map(|i| wp[(r, i)].powi(4)).sum::<f64>())
        .collect();
    (answers, vars, fourth)
}

fn noise(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| (((i as u64 * 2654435761 + seed) % 1000) as f64 - 500.0) / 37.0)
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-10 * scale.max(1e-300),
            "{what}[{i}]: {g} vs {w}"
        );
    }
}

/// Reconstructs `w` from values of `m` made from `seed` and checks the
/// method, the answers and the variances against [`dense_truth`].
fn check_against_dense(
    w: &StructuredWorkload,
    m: &MeasuredStrategy,
    seed: u64,
    v: f64,
    method: ReconstructionMethod,
) {
    let a = densify(m, &w.domain().shape());
    let y = noise(a.nrows(), seed);
    let r = reconstruct(w, m, &y, v).unwrap();
    assert_eq!(r.method, method);
    let (ans, var, fourth) = dense_truth(w, &a, &y, v);
    assert_close(&r.answers, &ans, "answers");
    assert_close(&r.variances, &var, "variances");
    assert_close(
        r.fourth_powers.as_ref().unwrap(),
        &fourth,
        "fourth powers of the noise coefficients",
    );
}

const DOMAIN: &str = r#"[{"name":"a","size":2},{"name":"b","size":3},{"name":"c","size":4}]"#;

#[test]
fn residual_plans_match_the_dense_least_squares_and_are_unbiased() {
    let planned = spec(DOMAIN, r#"[{"marginals":{"k":2}}, {"marginal":[]}]"#);
    let plan = plan_strategy(&planned, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    assert_eq!(plan.method, "residual");
    let m = measured(&plan);
    let a = densify(&m, &[2, 3, 4]);
    // Answered: the planned marginals, and Kronecker queries inside the
    // same row space (prefix and ranges on one attribute, one-way marginals).
    let asked = spec(
        DOMAIN,
        r#"[{"marginals":{"k":2}}, {"kron":{"c":"prefix","a":"identity"}},
            {"kron":{"b":{"ranges":[[0,1],[1,2]]}}}, {"marginal":["c"]}, {"marginal":[]}]"#,
    );
    for w in [&planned, &asked] {
        check_against_dense(w, &m, 3, 2.5, ReconstructionMethod::OrthogonalTerms);
        // Noiseless measurements of the measured strategy give the exact
        // answers: the estimate is unbiased with the quantized strategy.
        let x: Vec<f64> = (0..24).map(|i| ((i * 7) % 5) as f64 + 1.0).collect();
        let y0: Vec<f64> = (0..a.nrows())
            .map(|r| (0..24).map(|j| a[(r, j)] * x[j]).sum())
            .collect();
        let r0 = reconstruct(w, &m, &y0, 1.0).unwrap();
        assert_close(&r0.answers, &w.answer(&x).unwrap(), "noiseless answers");
    }
}

#[test]
fn a_kronecker_plan_and_a_general_union_match_the_dense_least_squares() {
    let w = spec(
        DOMAIN,
        r#"[{"kron":{"a":"identity","b":"prefix","c":"allrange"}}, {"marginal":["b"]}]"#,
    );
    let plan = plan_strategy(&w, PrivacyModel::Pure, &PlanOptions::default()).unwrap();
    assert_eq!(plan.strategy.terms.len(), 1);
    check_against_dense(
        &w,
        &measured(&plan),
        11,
        0.7,
        ReconstructionMethod::OrthogonalTerms,
    );
    // Two overlapping terms (not orthogonal): the dense path.
    let f = |p: usize, n: usize, s: usize| {
        Mat::from_fn(p, n, |i, j| ((i * 5 + j * 3 + s) % 7) as f64 + 1.0)
    };
    let union = MarginalStrategy::new(
        vec![2, 3, 4],
        &terms(vec![
            (1.0, vec![(0, f(2, 2, 1)), (1, f(3, 3, 2)), (2, f(4, 4, 3))]),
            (0.5, vec![(1, f(2, 3, 4))]),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    check_against_dense(&w, &union, 5, 1.3, ReconstructionMethod::Dense);
}

#[test]
fn queries_outside_the_row_space_are_refused() {
    let one_way = spec(DOMAIN, r#"[{"marginals":{"k":1}}]"#);
    let plan = plan_strategy(&one_way, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let m = measured(&plan);
    let rows = strategy_rows(&m);
    let two_way = spec(DOMAIN, r#"[{"marginal":["a","c"]}]"#);
    let e = reconstruct(&two_way, &m, &noise(rows, 1), 1.0).unwrap_err();
    assert!(e.to_string().contains("row space"), "{e}");
    assert!(reconstruct(&one_way, &m, &noise(rows + 1, 1), 1.0).is_err());
    assert!(reconstruct(&one_way, &m, &noise(rows, 1), f64::NAN).is_err());
}

#[test]
fn marginals_on_a_trillion_cells_never_densify() {
    // 40 binary attributes (1.1e12 cells), all 1-way marginals and 3 of
    // the 2-way ones: answers and variances by the closed form, checked
    // against the residual formula x̂_S = Σ_{T⊆S} z_T / N_{S∖T} through
    // its variance: Var = v Σ_{T⊆S} Πᵢ∈T dᵢ / N_{S∖T}² (dᵢ = diag of
    // (FᵢᵀFᵢ)⁺), here verified by symmetry: every cell of a 2-way
    // marginal has the same variance, and 1-way variances sum correctly.
    let domain: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"name":"q{i}","size":2}}"#))
        .collect();
    let domain = format!("[{}]", domain.join(","));
    let w = spec(
        &domain,
        r#"[{"marginals":{"k":1}}, {"marginal":["q0","q1"]}, {"marginal":["q5","q39"]}]"#,
    );
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let m = measured(&plan);
    let rows = strategy_rows(&m);
    let start = std::time::Instant::now();
    let r = reconstruct(&w, &m, &noise(rows, 2), 1.0).unwrap();
    assert!(start.elapsed().as_secs_f64() < 5.0);
    assert_eq!(r.answers.len(), 80 + 8);
    // A 1-way marginal's two cells sum to the grand-total estimate (both
    // read the same ∅ term; the q-term's contrast cancels).
    for i in 0..40 {
        let s = r.answers[2 * i] + r.answers[2 * i + 1];
        let s0 = r.answers[0] + r.answers[1];
        assert!((s - s0).abs() <= 1e-9 * s0.abs().max(1.0), "{i}");
    }
    for q in 80..88 {
        assert!((r.variances[q] - r.variances[80]).abs() <= 1e-12 * r.variances[80]);
    }
}

#[test]
fn marginal_template_strategies_use_the_residual_basis_and_match_the_dense_least_squares() {
    // A weighted stack of marginals (HDMM's OPT_M shape): identity factors
    // on ∅, {a}, {b,c}, {a,c}; not mutually orthogonal.
    let eye = |n: usize| Mat::<f64>::identity(n, n);
    let strategy = MarginalStrategy::new(
        vec![2, 3, 4],
        &terms(vec![
            (0.5, vec![]),
            (1.3, vec![(0, eye(2))]),
            (0.7, vec![(1, eye(3)), (2, eye(4))]),
            (1.1, vec![(0, eye(2)), (2, eye(4))]),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    let w = spec(
        DOMAIN,
        r#"[{"marginal":["a","c"]}, {"marginal":["b","c"]}, {"marginal":["a"]},
            {"kron":{"c":"prefix","b":{"ranges":[[0,1]]}}}, {"marginal":[]}]"#,
    );
    check_against_dense(&w, &strategy, 7, 0.9, ReconstructionMethod::ResidualBasis);
    // Factors with Gram aI + b11ᵀ other than scaled identities: an
    // identity stacked on a ones row (I + 11ᵀ) and scaled copies (dyadic,
    // so that the kernel's quantization keeps the Gram's form exactly).
    let stacked = |n: usize, s: f64| {
        Mat::<f64>::from_fn(n + 1, n, |i, j| s * f64::from(u8::from(i == j || i == n)))
    };
    let other = MarginalStrategy::new(
        vec![2, 3, 4],
        &terms(vec![
            (0.5, vec![]),
            (1.0, vec![(0, stacked(2, 1.5))]),
            (0.75, vec![(1, stacked(3, 1.0)), (2, eye(4))]),
            (1.25, vec![(0, eye(2)), (2, stacked(4, 0.5))]),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    check_against_dense(&w, &other, 5, 1.3, ReconstructionMethod::ResidualBasis);
    // {a,b} needs the residual {a,b}, which no term covers.
    let ab = spec(DOMAIN, r#"[{"marginal":["a","b"]}]"#);
    let y = noise(densify(&strategy, &[2, 3, 4]).nrows(), 7);
    let e = reconstruct(&ab, &strategy, &y, 0.9).unwrap_err();
    assert!(e.to_string().contains("row space"), "{e}");
}

/// Entries in [-1, 1) from a xorshift stream (seeded, reproducible).
fn random_mat(rows: usize, cols: usize, seed: &mut u64) -> Mat<f64> {
    Mat::from_fn(rows, cols, |_, _| {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    })
}

/// Random unions on a 3×4×5 domain: full column rank (a term on every
/// attribute, one on `b`, a grand total), and rank-deficient (terms on
/// {a,b} and {b,c} only, whose row space is the marginals ab and bc).
fn random_unions() -> (MeasuredStrategy, MeasuredStrategy) {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let full = MarginalStrategy::new(
        vec![3, 4, 5],
        &terms(vec![
            (
                1.0,
                vec![
                    (0, random_mat(4, 3, &mut s)),
                    (1, random_mat(5, 4, &mut s)),
                    (2, random_mat(6, 5, &mut s)),
                ],
            ),
            (0.6, vec![(1, random_mat(2, 4, &mut s))]),
            (0.7, vec![]),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    let deficient = MarginalStrategy::new(
        vec![3, 4, 5],
        &terms(vec![
            (
                1.0,
                vec![(0, random_mat(3, 3, &mut s)), (1, random_mat(4, 4, &mut s))],
            ),
            (
                0.8,
                vec![(1, random_mat(4, 4, &mut s)), (2, random_mat(5, 5, &mut s))],
            ),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    (full, deficient)
}

const SMALL: &str = r#"[{"name":"a","size":3},{"name":"b","size":4},{"name":"c","size":5}]"#;

fn problem<'a>(w: &'a StructuredWorkload, m: &'a MeasuredStrategy, y: &'a [f64]) -> Problem<'a> {
    Problem {
        workload: w,
        measured: m,
        values: y,
        noise_variance: 1.7,
    }
}

#[test]
fn conjugate_gradients_match_the_dense_least_squares_on_random_unions() {
    use super::super::reconstruct_iterative::iterative;
    let (full, deficient) = random_unions();
    let on_full = spec(
        SMALL,
        r#"[{"kron":{"a":"identity","b":"prefix","c":"allrange"}}, {"marginal":["b"]}]"#,
    );
    let on_deficient = spec(
        SMALL,
        r#"[{"marginal":["a","b"]}, {"marginal":["b","c"]}, {"marginal":[]},
            {"kron":{"b":"prefix","c":"allrange"}}]"#,
    );
    for (w, m) in [(&on_full, &full), (&on_deficient, &deficient)] {
        let a = densify(m, &[3, 4, 5]);
        let y = noise(a.nrows(), 13);
        let r = iterative(&problem(w, m, &y), &CgOptions::default()).unwrap();
        assert_eq!(r.method, ReconstructionMethod::ConjugateGradient);
        assert_eq!(r.variance_method, VarianceMethod::Exact);
        assert!(r.solver.unwrap().termination.converged());
        let (ans, var, _) = dense_truth(w, &a, &y, 1.7);
        assert_close(&r.answers, &ans, "cg answers");
        assert_close(&r.variances, &var, "cg variances");
        // Past the exact-variance budget: the single-term bound, never
        // below the exact variance.
        let bound_only = CgOptions {
            exact_variance_budget: 0.0,
            ..CgOptions::default()
        };
        let b = iterative(&problem(w, m, &y), &bound_only).unwrap();
        assert_eq!(b.variance_method, VarianceMethod::SingleTermBound);
        assert_close(&b.answers, &ans, "cg answers");
        for (bq, vq) in b.variances.iter().zip(&var) {
            assert!(
                *bq >= vq * (1.0 - 1e-10),
                "bound {bq} below the variance {vq}"
            );
        }
    }
    // The marginal ac is outside the rank-deficient union's row space.
    let ac = spec(SMALL, r#"[{"marginal":["a","c"]}]"#);
    let y = noise(densify(&deficient, &[3, 4, 5]).nrows(), 2);
    let e = iterative(&problem(&ac, &deficient, &y), &CgOptions::default()).unwrap_err();
    assert!(e.to_string().contains("row space"), "{e}");
}

#[test]
fn the_single_term_bound_is_exact_for_one_term_and_the_iteration_cap_is_reported() {
    use super::super::reconstruct_iterative::{NormalOperator, iterative, single_term_bounds};
    let mut s = 7u64;
    let one = MarginalStrategy::new(
        vec![3, 4, 5],
        &terms(vec![(
            1.0,
            vec![(0, random_mat(3, 3, &mut s)), (2, random_mat(6, 5, &mut s))],
        )]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    let w = spec(
        SMALL,
        r#"[{"kron":{"a":"prefix","c":"allrange"}}, {"marginal":["c"]}]"#,
    );
    let a = densify(&one, &[3, 4, 5]);
    let (_, var, _) = dense_truth(&w, &a, &noise(a.nrows(), 1), 0.4);
    let op = NormalOperator::new(&one, &[3, 4, 5]).unwrap();
    assert_close(&single_term_bounds(&op, &w, 0.4).unwrap(), &var, "bound");
    // One iteration cannot solve the full union: a typed stop, refused.
    let (full, _) = random_unions();
    let y = noise(densify(&full, &[3, 4, 5]).nrows(), 4);
    let capped = CgOptions {
        max_iterations: 1,
        ..CgOptions::default()
    };
    let op = NormalOperator::new(&full, &[3, 4, 5]).unwrap();
    let (_, report) = op.solve(&op.adjoint(&y).unwrap(), &capped).unwrap();
    assert_eq!(
        (report.termination, report.iterations),
        (Termination::MaxIterations { iterations: 1 }, 1)
    );
    assert!(report.relative_residual > capped.tolerance);
    let e = iterative(&problem(&w, &full, &y), &capped).unwrap_err();
    assert!(e.to_string().contains("did not converge"), "{e}");
}

#[test]
fn unions_past_the_dense_limit_are_solved_iteratively_and_unbiased() {
    // 16×16×17 = 4352 cells (> 4096): overlapping random terms on {a,b}
    // and {b,c}. Noiseless measurements must give the exact answers.
    // Factors 2I + uniform[-1,1)/2: well conditioned, so that the
    // preconditioned iteration converges within the default cap.
    let mut s = 11u64;
    let mut f = |n: usize| {
        let r = random_mat(n, n, &mut s);
        Mat::from_fn(n, n, |i, j| {
            r[(i, j)] / 2.0 + if i == j { 2.0 } else { 0.0 }
        })
    };
    let m = MarginalStrategy::new(
        vec![16, 16, 17],
        &terms(vec![
            (1.0, vec![(0, f(16)), (1, f(16))]),
            (0.5, vec![(1, f(16)), (2, f(17))]),
        ]),
    )
    .unwrap()
    .measured_strategy()
    .clone();
    let domain = r#"[{"name":"a","size":16},{"name":"b","size":16},{"name":"c","size":17}]"#;
    let w = spec(
        domain,
        r#"[{"marginal":["b"]}, {"kron":{"b":{"ranges":[[0,3],[2,9]]},"c":{"ranges":[[1,5]]}}}]"#,
    );
    let a = densify(&m, &[16, 16, 17]);
    let x: Vec<f64> = (0..a.ncols()).map(|i| ((i * 7) % 5) as f64).collect();
    let y0: Vec<f64> = (0..a.nrows())
        .map(|r| (0..a.ncols()).map(|j| a[(r, j)] * x[j]).sum())
        .collect();
    let r = reconstruct(&w, &m, &y0, 1.0).unwrap();
    assert_eq!(r.method, ReconstructionMethod::ConjugateGradient);
    assert_close(&r.answers, &w.answer(&x).unwrap(), "noiseless answers");
    assert!(r.variances.iter().all(|v| *v > 0.0 && v.is_finite()));
}

/// One prepared reconstruction run on two value vectors gives what two
/// separate reconstructions give; its unit variances are the variances at
/// noise variance 1; a different strategy or workload is refused.
#[test]
fn a_prepared_reconstruction_is_reused_and_refuses_another_strategy() {
    let w = spec(DOMAIN, r#"[{"marginals":{"k":2}}, {"marginal":[]}]"#);
    let plan = plan_strategy(&w, PrivacyModel::Approx, &PlanOptions::default()).unwrap();
    let m = measured(&plan);
    let rows = strategy_rows(&m);
    let prepared = Reconstructor::new(&w, &m).unwrap();
    for seed in [1, 2] {
        let y = noise(rows, seed);
        let once = reconstruct(&w, &m, &y, 2.5).unwrap();
        let again = prepared.run(&w, &m, &y, 2.5).unwrap();
        assert_eq!(once.answers, again.answers);
        assert_eq!(once.variances, again.variances);
    }
    let unit = reconstruct(&w, &m, &noise(rows, 3), 1.0).unwrap();
    assert_eq!(prepared.unit_variances().unwrap(), &unit.variances[..]);
    let mut other = m.clone();
    other.terms[1].factors[0][(0, 0)] *= 1.0 + 1e-12;
    assert!(prepared.run(&w, &other, &noise(rows, 1), 1.0).is_err());
    let fewer = spec(DOMAIN, r#"[{"marginals":{"k":2}}]"#);
    assert!(prepared.run(&fewer, &m, &noise(rows, 1), 1.0).is_err());
}

/// `Estimable::marginal` against the dense truth, on every attribute set
/// of a 2 × 3 × 4 domain and strategies of four kinds: contrast terms on a
/// down-set of supports and on supports missing a subset (orthogonal: the
/// check by factors), identity terms on two overlapping supports and an
/// identity-by-prefix term beside a 1-way marginal (not orthogonal: the
/// reconstruction's own check). Truth: the marginal `M_S` lies in the row
/// space of the densified `Ã` iff `‖M_S − M_S Ã⁺Ã‖_F ≤ 1e-9 ‖M_S‖_F`.
#[test]
fn estimable_marginals_are_the_dense_row_space_s() {
    use dp_core::MeasuredTerm;
    use dp_workloads::structured::AttrSet;
    let shape = [2usize, 3, 4];
    let domain = spec(
        r#"[{"name": "a", "size": 2}, {"name": "b", "size": 3}, {"name": "c", "size": 4}]"#,
        r#"[{"marginal": []}]"#,
    )
    .domain()
    .clone();
    // Helmert-like contrasts: (n−1)×n, each row summing exactly to zero.
    let contrast = |n: usize| {
        Mat::from_fn(n - 1, n, |i, j| match j.cmp(&(i + 1)) {
            std::cmp::Ordering::Less => 1.0,
            std::cmp::Ordering::Equal => -((i + 1) as f64),
            std::cmp::Ordering::Greater => 0.0,
        })
    };
    let identity = |n: usize| Mat::from_fn(n, n, |i, j| f64::from(u8::from(i == j)));
    let prefix = |n: usize| Mat::from_fn(n, n, |i, j| f64::from(u8::from(j <= i)));
    let term = |support: &[usize], make: &dyn Fn(usize, usize) -> Mat<f64>| MeasuredTerm {
        support: support.to_vec(),
        factors: if support.is_empty() {
            vec![Mat::from_fn(1, 1, |_, _| 2.0)]
        } else {
            support.iter().map(|&p| make(p, shape[p])).collect()
        },
    };
    let contrasts = |_: usize, n: usize| contrast(n);
    let families: Vec<Vec<MeasuredTerm>> = vec![
        [&[][..], &[0], &[1], &[0, 1], &[2]]
            .iter()
            .map(|s| term(s, &contrasts))
            .collect(),
        // {b} is missing: {a, b} cannot be estimated, {a} and {c} can.
        [&[][..], &[0], &[0, 1], &[2]]
            .iter()
            .map(|s| term(s, &contrasts))
            .collect(),
        vec![
            term(&[0, 1], &|_, n| identity(n)),
            term(&[1, 2], &|_, n| identity(n)),
        ],
        vec![
            term(&[0, 2], &|p, n| {
                if p == 0 { identity(n) } else { prefix(n) }
            }),
            term(&[1], &|_, n| identity(n)),
        ],
    ];
    let mut seen = [0usize; 2];
    for (f, terms) in families.into_iter().enumerate() {
        let measured = MeasuredStrategy {
            terms,
            granularity: 1.0,
        };
        let check = Estimable::new(&measured, &domain).unwrap();
        let a = densify(&measured, &shape);
        let projector = dp_linalg::gemm(
            dp_linalg::pseudo_inverse(a.as_ref(), None)
                .unwrap()
                .as_ref(),
            a.as_ref(),
            Par::Seq,
        );
        for mask in 0u32..8 {
            let set = AttrSet::from_members((0..3).filter(|b| mask & (1 << b) != 0));
            let w = StructuredWorkload::weighted_marginals(domain.clone(), &[(set.clone(), 1.0)])
                .unwrap()
                .dense_matrix()
                .unwrap();
            let wp = dp_linalg::gemm(w.as_ref(), projector.as_ref(), Par::Seq);
            let gap = dp_linalg::frobenius_norm((&w - &wp).as_ref());
            let truth = gap <= 1e-9 * dp_linalg::frobenius_norm(w.as_ref());
            assert_eq!(
                check.marginal(&set).unwrap(),
                truth,
                "family {f}, set {mask:03b}"
            );
            seen[usize::from(truth)] += 1;
        }
    }
    // Both answers occur: the test can fail either way.
    assert!(seen[0] >= 8 && seen[1] >= 8, "{seen:?}");
}
