//! Times COA on implicit workloads: `coa_gram allrange|prefix|wrange N [M]`.
#![allow(clippy::unwrap_used)]
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, coa::Coa};
use dp_workloads::Workload;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[2].parse().unwrap();
    let gram = match args[1].as_str() {
        "allrange" => dp_workloads::workload::AllRange::new(n).unwrap().gram(),
        "prefix" => dp_workloads::workload::Prefix::new(n).unwrap().gram(),
        _ => {
            let m: usize = args.get(3).map(|s| s.parse().unwrap()).unwrap_or(n);
            dp_workloads::generators::wrange(m, n, 7).unwrap().gram()
        }
    };
    let p = Problem::from_gram(gram, PrivacyModel::Approx).unwrap();
    let mut rec = dp_opt::Recorder::default();
    let mut coa = Coa::default();
    if let Ok(t) = std::env::var("COA_THETA_MIN") {
        coa.options.theta_min = t.parse().unwrap();
    }
    if let Ok(t) = std::env::var("COA_CG") {
        coa.options.cg_iterations = t.parse().unwrap();
    }
    if let Ok(t) = std::env::var("COA_STAGE_TOL") {
        coa.options.stage_tolerance = t.parse().unwrap();
    }
    let r = coa.optimize(&p, &mut rec).unwrap();
    let mut stages: Vec<(f64, usize, f64)> = Vec::new();
    let mut theta;
    for (_, k, v) in &rec.records {
        match *k {
            "theta" => {
                theta = *v;
                if stages.last().is_none_or(|s| s.0 != theta) {
                    stages.push((theta, 0, 0.0));
                }
                if let Some(s) = stages.last_mut() {
                    s.1 += 1;
                }
            }
            "cg_iterations" => {
                if let Some(s) = stages.last_mut() {
                    s.2 += v;
                }
            }
            _ => {}
        }
    }
    for s in &stages {
        println!("theta {:.0e}: newton {} cg {}", s.0, s.1, s.2);
    }
    println!(
        "{} n={n}: objective {:.10e} gap {:.2e} converged {} iterations {} seconds {:.2} svd_bound {:.6e}",
        args[1],
        r.report.objective,
        r.report.certificate.unwrap().relative_gap,
        r.report.converged,
        r.report.iterations,
        r.report.seconds,
        p.svd_bound().unwrap()
    );
}
