//! Times the dense kernels COA is built from at one size:
//! `cargo run --release -p dp-opt --example kernels -- N`.
#![allow(clippy::unwrap_used, missing_docs)]
use dp_linalg::{Cholesky, Mat, Par, SymmetricEigen};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1024);
    let a = Mat::from_fn(n, n, |i, j| {
        ((i * 7 + j * 13) % 17) as f64 / 17.0 + if i == j { n as f64 } else { 0.0 }
    });
    let mut a = a;
    dp_linalg::symmetrize(&mut a);
    for par in [Par::Seq, Par::rayon(0)] {
        let t = Instant::now();
        let mut c = Mat::zeros(n, n);
        for _ in 0..5 {
            faer::linalg::matmul::matmul(
                c.as_mut(),
                faer::Accum::Replace,
                a.as_ref(),
                a.as_ref(),
                1.0,
                par,
            );
        }
        println!("{par:?} gemm {:.1} ms", t.elapsed().as_secs_f64() * 200.0);
    }
    let t = Instant::now();
    let ch = Cholesky::factor(a.as_ref()).unwrap();
    println!("cholesky {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let _ = ch.inverse();
    println!("inverse {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let _ = SymmetricEigen::new(a.as_ref()).unwrap();
    println!("eigh {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let _ = SymmetricEigen::values_only(a.as_ref()).unwrap();
    println!("eigvalsh {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
}
