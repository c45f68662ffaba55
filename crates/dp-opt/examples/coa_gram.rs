//! Times COA on an implicit workload and prints its homotopy stages:
//! `cargo run --release -p dp-opt --example coa_gram -- allrange|prefix|wrange N [M]`.

use dp_core::{DpError, Result};
use dp_opt::{Event, PrivacyModel, Problem, Recorder, Stage, StrategyOptimizer, coa::Coa};
use dp_workloads::Workload;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &'static str) -> Result<Option<T>> {
    args.get(i)
        .map(|s| {
            s.parse().map_err(|_| DpError::InvalidParameter {
                name,
                reason: format!("cannot parse '{s}'"),
            })
        })
        .transpose()
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let kind = args.get(1).map(String::as_str).unwrap_or("allrange");
    let n: usize = if kind == "npy" {
        0
    } else {
        arg(&args, 2, "n")?.unwrap_or(256)
    };
    let gram = match kind {
        "allrange" => dp_workloads::workload::AllRange::new(n)?.gram(),
        "prefix" => dp_workloads::workload::Prefix::new(n)?.gram(),
        "wrange" => {
            let m: usize = arg(&args, 3, "m")?.unwrap_or(n);
            let seed = std::env::var("SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(7);
            dp_workloads::generators::wrange(m, n, seed)?.gram()
        }
        "npy" => {
            let path = args.get(2).cloned().unwrap_or_default();
            let w = dp_workloads::npy::read_matrix(std::path::Path::new(&path))?;
            dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq)
        }
        other => {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: format!("'{other}' (expected allrange, prefix or wrange)"),
            });
        }
    };
    let problem = Problem::from_gram(gram, PrivacyModel::Approx)?;
    let mut rec = Recorder::default();
    let mut coa = Coa::default();
    if std::env::var("COA_PAPER").is_ok() {
        coa.options = dp_opt::coa::CoaOptions::paper();
    }
    if let Some(d) = std::env::var("COA_DECAY").ok().and_then(|s| s.parse().ok()) {
        coa.options.theta_decay = d;
    }
    if let Some(d) = std::env::var("COA_THETA0")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        coa.options.theta_initial = d;
    }
    let r = coa.optimize(&problem, &mut rec)?;
    // (theta, Newton steps, CG iterations) per homotopy stage.
    let mut stages: Vec<(f64, usize, usize)> = Vec::new();
    for event in &rec.events {
        match *event {
            Event::Stage {
                stage: Stage::Homotopy(theta),
                ..
            } => match stages.last_mut() {
                Some(s) if s.0 == theta => s.1 += 1,
                _ => stages.push((theta, 1, 0)),
            },
            Event::Newton { cg_iterations, .. } => {
                if let Some(s) = stages.last_mut() {
                    s.2 += cg_iterations;
                }
            }
            _ => {}
        }
    }
    if std::env::var("COA_TRACE").is_ok() {
        for event in &rec.events {
            println!("{event:?}");
        }
    }
    for (theta, newton, cg) in &stages {
        println!("theta {theta:.0e}: newton {newton} cg {cg}");
    }
    let gap = r.report.certificate.map_or(f64::NAN, |c| c.relative_gap);
    println!(
        "{kind} n={n}: objective {:.10e} gap {gap:.2e} converged {} iterations {} seconds {:.2} svd_bound {:.6e}",
        r.report.objective,
        r.report.converged(),
        r.report.iterations,
        r.report.seconds,
        problem.svd_bound()?
    );
    Ok(())
}
