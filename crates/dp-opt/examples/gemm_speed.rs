//! Measures dense products at n = 1024, 2048 (the unit COA's time is made of).
#![allow(clippy::unwrap_used)]
use dp_linalg::{Mat, Par};
fn main() {
    for n in [512usize, 1024, 2048] {
        let a = Mat::from_fn(n, n, |i, j| ((i * 7 + j * 3) % 11) as f64);
        let b = Mat::from_fn(n, n, |i, j| ((i * 5 + j) % 13) as f64);
        let mut c = Mat::zeros(n, n);
        for par in [Par::Seq, Par::rayon(0)] {
            let t = std::time::Instant::now();
            let reps = 3;
            for _ in 0..reps {
                faer::linalg::matmul::matmul(
                    c.as_mut(),
                    faer::Accum::Replace,
                    a.as_ref(),
                    b.as_ref(),
                    1.0,
                    par,
                );
            }
            let s = t.elapsed().as_secs_f64() / reps as f64;
            println!(
                "n={n} {par:?}: {:.3} s, {:.1} GFlop/s",
                s,
                2.0 * (n as f64).powi(3) / s / 1e9
            );
        }
        let t = std::time::Instant::now();
        let _ = dp_linalg::Cholesky::factor(
            (&a * a.transpose() + Mat::<f64>::identity(n, n) * (n as f64)).as_ref(),
        )
        .unwrap()
        .inverse();
        println!("n={n} gram+chol+inverse {:.3}s", t.elapsed().as_secs_f64());
        let s = &a * a.transpose();
        let t = std::time::Instant::now();
        let _ = dp_linalg::SymmetricEigen::new(s.as_ref()).unwrap();
        println!("n={n} evd {:.3}s", t.elapsed().as_secs_f64());
    }
}
