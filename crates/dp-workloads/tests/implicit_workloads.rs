//! Closed-form Gram matrices, answers and column norms of every implicit
//! workload against the explicit rows, exactly (integer arithmetic in f64).

#![allow(clippy::unwrap_used, clippy::needless_range_loop)] // tests: a failed unwrap is a failed test; index loops mirror the formulas

use std::sync::Arc;

use dp_linalg::{Mat, Par, gram};
use dp_workloads::composite::{Kronecker, Union};
use dp_workloads::marginals::k_way_marginals;
use dp_workloads::workload::*;

fn assert_exact(w: &dyn Workload) {
    let explicit = w.explicit().expect("small enough to build");
    assert_eq!(explicit.nrows(), w.num_queries(), "{}", w.name());
    assert_eq!(explicit.ncols(), w.domain_size(), "{}", w.name());
    let g = w.gram();
    let g_explicit = gram(explicit.as_ref(), Par::Seq);
    for j in 0..g.ncols() {
        for i in 0..g.nrows() {
            assert_eq!(g[(i, j)], g_explicit[(i, j)], "{} gram ({i},{j})", w.name());
        }
    }
    let l1 = w.column_l1_norms();
    for j in 0..explicit.ncols() {
        let direct: f64 = explicit.col(j).iter().map(|v| v.abs()).sum();
        assert_eq!(l1[j], direct, "{} column {j}", w.name());
    }
    // Answers on an integer vector must match W x exactly.
    let x: Vec<f64> = (0..w.domain_size())
        .map(|i| ((i * 7 + 3) % 11) as f64)
        .collect();
    let ans = w.answer(&x).unwrap();
    for (i, a) in ans.iter().enumerate() {
        let direct: f64 = (0..x.len()).map(|j| explicit[(i, j)] * x[j]).sum();
        assert_eq!(*a, direct, "{} answer {i}", w.name());
    }
    assert!(w.answer(&x[1..]).is_err());
}

#[test]
fn one_dimensional_closed_forms_are_exact() {
    for n in [1, 2, 3, 7, 8, 16, 33, 100] {
        assert_exact(&Identity::new(n).unwrap());
        assert_exact(&Total::new(n).unwrap());
        assert_exact(&Prefix::new(n).unwrap());
        assert_exact(&AllRange::new(n).unwrap());
    }
    assert!(Identity::new(0).is_err() && AllRange::new(0).is_err());
    let r = AllRange::new(1024).unwrap();
    assert_eq!(r.num_queries(), 524_800);
    // The order of queries: index_of agrees with the enumeration.
    let small = AllRange::new(9).unwrap();
    let w = small.explicit().unwrap();
    for a in 0..9 {
        for b in a..9 {
            let row = small.index_of(a, b).unwrap();
            for j in 0..9 {
                assert_eq!(w[(row, j)], if (a..=b).contains(&j) { 1.0 } else { 0.0 });
            }
        }
    }
    // Not ranges of AllRange(9): a typed error, not an underflow panic.
    for (a, b) in [(5, 4), (0, 9), (9, 9), (usize::MAX, 0), (0, usize::MAX)] {
        assert!(small.index_of(a, b).is_err(), "[{a}, {b}]");
    }
}

#[test]
fn kronecker_unions_and_marginals_are_exact() {
    let a: Arc<dyn Workload> = Arc::new(AllRange::new(5).unwrap());
    let p: Arc<dyn Workload> = Arc::new(Prefix::new(3).unwrap());
    let t: Arc<dyn Workload> = Arc::new(Total::new(4).unwrap());
    let i: Arc<dyn Workload> = Arc::new(Identity::new(6).unwrap());
    let k2 = Kronecker::new(vec![a.clone(), p.clone()]).unwrap();
    assert_eq!(k2.num_queries(), 15 * 3);
    assert_exact(&k2);
    let k3 = Kronecker::new(vec![p.clone(), t.clone(), a.clone()]).unwrap();
    assert_exact(&k3);
    let ranges_2d = Kronecker::new(vec![
        Arc::new(AllRange::new(6).unwrap()),
        Arc::new(AllRange::new(7).unwrap()),
    ])
    .unwrap();
    assert_exact(&ranges_2d);
    let u = Union::new(vec![
        (2.0, i.clone()),
        (0.5, Arc::new(Prefix::new(6).unwrap())),
    ])
    .unwrap();
    assert_exact(&u);
    assert!(Union::new(vec![(1.0, i.clone()), (1.0, t.clone())]).is_err());
    assert!(Union::new(vec![(f64::NAN, i.clone())]).is_err());
    for (shape, k) in [
        (vec![2, 3, 4], 2),
        (vec![3, 3], 1),
        (vec![2, 2, 2, 2], 3),
        (vec![5], 0),
    ] {
        let m = k_way_marginals(&shape, k).unwrap();
        assert_exact(&m);
    }
    // 2-way marginals of a 2x3x4 domain: 2·3 + 2·4 + 3·4 = 26 queries.
    assert_eq!(k_way_marginals(&[2, 3, 4], 2).unwrap().num_queries(), 26);
    assert!(k_way_marginals(&[2, 3], 3).is_err());
    // Many attributes: sets are enumerated directly, not as 2^d masks (no
    // shift overflow at d >= 64, no hang at d = 40), and refused past the
    // documented limits with a typed error.
    assert_eq!(k_way_marginals(&[1; 70], 1).unwrap().num_queries(), 70);
    assert_eq!(k_way_marginals(&[1; 200], 1).unwrap().num_queries(), 200);
    assert!(k_way_marginals(&[1; 40], 20).is_err());
    assert!(dp_workloads::spec::k_subsets(3, 5).is_err());
    let wide = dp_workloads::spec::k_subsets(300, 2).unwrap();
    assert_eq!(wide.len(), 300 * 299 / 2);
    assert_eq!(
        wide.last().unwrap().members().collect::<Vec<_>>(),
        [298, 299]
    );
}

#[test]
fn sensitivities_of_implicit_workloads() {
    let n = 10;
    let r = AllRange::new(n).unwrap();
    // Cell j lies in (j+1)(n−j) ranges: max at the middle, 5·6 = 30.
    assert_eq!(workload_sensitivity_l1(&r), 30.0);
    assert!((workload_sensitivity_l2(&r) - 30f64.sqrt()).abs() < 1e-12);
    let p = Prefix::new(n).unwrap();
    assert_eq!(workload_sensitivity_l1(&p), n as f64);
    let x = Mat::from_fn(2, 2, |i, j| [[1.0, -2.0], [3.0, 0.5]][i][j]);
    let e = ExplicitWorkload::new("x", x).unwrap();
    assert_eq!(workload_sensitivity_l1(&e), 4.0);
    assert!(ExplicitWorkload::new("zero", Mat::zeros(2, 2)).is_err());
}
