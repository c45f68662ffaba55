//! Debug helper: run COA on a .npy workload with progress lines.
#![allow(clippy::unwrap_used)]
use dp_opt::{Observer, PrivacyModel, Problem, StrategyOptimizer, coa::Coa};
struct Print;
impl Observer for Print {
    fn observe(&mut self, it: usize, v: &[(&'static str, f64)]) {
        eprintln!("{it}: {v:?}");
    }
}
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let w = dp_workloads::npy::read_matrix(std::path::Path::new(&path)).unwrap();
    let p = Problem::from_workload(w.as_ref(), PrivacyModel::Approx).unwrap();
    let r = Coa::default().optimize(&p, &mut Print).unwrap();
    eprintln!("{:?}", r.report.certificate);
    eprintln!(
        "obj {} conv {} it {} secs {}",
        r.report.objective, r.report.converged, r.report.iterations, r.report.seconds
    );
}
