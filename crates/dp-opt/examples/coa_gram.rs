//! Times COA on an implicit workload and prints its homotopy stages:
//! `cargo run --release -p dp-opt --example coa_gram -- allrange|prefix|wrange|wdiscrete|wrelated N [M]`.

use dp_core::{DpError, Result};
use dp_opt::{Event, PrivacyModel, Problem, Stage, StrategyOptimizer, optimizers::coa::Coa};
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

/// Records every event with its time since the run started.
#[derive(Default)]
struct Timed {
    start: Option<std::time::Instant>,
    events: Vec<Event<'static>>,
    times: Vec<f64>,
    cpu: Vec<f64>,
}

/// CPU seconds of this process so far (user + system, from /proc; NaN
/// where unavailable): robust to other load on a shared machine.
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let rest = s.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
            Some(ticks / 100.0)
        })
        .unwrap_or(f64::NAN)
}

impl dp_opt::Observer for Timed {
    fn observe(&mut self, event: &Event<'_>) {
        let start = *self.start.get_or_insert_with(std::time::Instant::now);
        if let Some(e) = event.detached() {
            self.events.push(e);
            self.times.push(start.elapsed().as_secs_f64());
            self.cpu.push(cpu_seconds());
        }
    }
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
        "wdiscrete" | "wrelated" => {
            let m: usize = arg(&args, 3, "m")?.unwrap_or(1024);
            let seed = std::env::var("SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(20121);
            if kind == "wdiscrete" {
                use dp_workloads::generators::{DiscreteEntries, wdiscrete};
                wdiscrete(m, n, DiscreteEntries::LRM, seed)?.gram()
            } else {
                dp_workloads::generators::wrelated(m, n, (n / 5).max(1), seed)?.gram()
            }
        }
        "npy" => {
            let path = args.get(2).cloned().unwrap_or_default();
            let w = dp_workloads::npy::read_matrix(std::path::Path::new(&path))?;
            dp_linalg::gram(w.as_ref(), dp_linalg::Par::Seq)
        }
        other => {
            return Err(DpError::InvalidParameter {
                name: "workload",
                reason: format!(
                    "'{other}' (expected allrange, prefix, wrange, wdiscrete or wrelated)"
                ),
            });
        }
    };
    let problem = Problem::from_gram(gram, PrivacyModel::Approx)?;
    let mut rec = Timed::default();
    let mut coa = Coa::default();
    if std::env::var("COA_PAPER").is_ok() {
        coa.options = dp_opt::optimizers::coa::CoaOptions::paper();
    }
    if let Some(t) = std::env::var("COA_REUSE_BELOW")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        coa.options.reuse_preconditioner_below = t;
    }
    if let Some(t) = std::env::var("COA_TARGET")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        coa.options.certificate_target = t;
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
    let cpu0 = cpu_seconds();
    let r = coa.optimize(&problem, &mut rec)?;
    println!("cpu seconds in optimize: {:.2}", cpu_seconds() - cpu0);
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
        for ((event, t), c) in rec.events.iter().zip(&rec.times).zip(&rec.cpu) {
            println!("{t:8.3} cpu {c:7.2} {event:?}");
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
