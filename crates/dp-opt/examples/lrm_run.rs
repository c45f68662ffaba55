//! Runs LRM on a workload file and prints its outer steps:
//! `cargo run --release -p dp-opt --example lrm_run -- PATH.npy`.

use dp_core::Result;
use dp_opt::{Observer, PrivacyModel, Problem, StrategyOptimizer, lrm::Lrm};

struct Print;
impl Observer for Print {
    fn observe(&mut self, iteration: usize, values: &[(&'static str, f64)]) {
        let line: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v:.4e}")).collect();
        eprintln!("{iteration} {}", line.join(" "));
    }
}

fn main() -> Result<()> {
    let path = std::env::args().nth(1).unwrap_or_default();
    let w = dp_workloads::npy::read_matrix(std::path::Path::new(&path))?;
    let problem = Problem::from_workload(w.as_ref(), PrivacyModel::Pure)?;
    let r = Lrm::default().optimize(&problem, &mut Print)?;
    let id = problem.objective(dp_linalg::Mat::<f64>::identity(w.ncols(), w.ncols()).as_ref())?;
    println!(
        "objective {:.6e} identity {:.6e} converged {} seconds {:.2} {:?} {:?}",
        r.report.objective,
        id,
        r.report.converged,
        r.report.seconds,
        r.report.termination,
        r.report.diagnostics
    );
    Ok(())
}
