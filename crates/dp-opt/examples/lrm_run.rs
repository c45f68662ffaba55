//! Runs LRM on a workload file and prints its outer steps:
//! `cargo run --release -p dp-opt --example lrm_run -- PATH.npy [RANK]`.

use dp_core::Result;
use dp_opt::optimizers::lrm::{Lrm, LrmOptions};
use dp_opt::{Event, Observer, PrivacyModel, Problem, StrategyOptimizer};

struct Print(std::time::Instant);
impl Observer for Print {
    fn observe(&mut self, event: &Event<'_>) {
        let seconds = self.0.elapsed().as_secs_f64();
        eprintln!("{seconds:.1}s {:?}", event.detached());
    }
}

fn main() -> Result<()> {
    let path = std::env::args().nth(1).unwrap_or_default();
    let w = dp_workloads::npy::read_matrix(std::path::Path::new(&path))?;
    let problem = Problem::from_workload(w.as_ref(), PrivacyModel::Pure)?;
    let rank = match std::env::args().nth(2) {
        Some(text) => Some(
            text.parse()
                .map_err(|_| dp_core::DpError::InvalidParameter {
                    name: "RANK",
                    reason: format!("not a number: {text}"),
                })?,
        ),
        None => None,
    };
    let options = LrmOptions {
        rank,
        ..LrmOptions::default()
    };
    let r = Lrm { options }.optimize(&problem, &mut Print(std::time::Instant::now()))?;
    let id = problem.objective(dp_linalg::Mat::<f64>::identity(w.ncols(), w.ncols()).as_ref())?;
    println!(
        "objective {:.6e} identity {:.6e} converged {} seconds {:.2} {:?} {:?}",
        r.report.objective,
        id,
        r.report.converged(),
        r.report.seconds,
        r.report.termination,
        r.report.diagnostics
    );
    Ok(())
}
