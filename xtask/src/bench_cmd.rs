//! `cargo xtask bench coa|lrm`: an optimizer's time, objective,
//! certificate (COA) or residual and rank (LRM) and peak memory against n
//! (and m, and for LRM the rank r), side by side.
//!
//! Each (workload, n, m) runs in a child process of this binary so that
//! its peak resident memory (`VmHWM` of `/proc/self/status`, Linux) is its
//! own; the table reports it also in units of one n×n `f64` matrix. A
//! dense n×n product is timed in the same child, so times can be compared
//! across machines as ratios.

use std::process::Command;
use std::time::Instant;

use clap::{Args, ValueEnum};
use dp_core::{DpError, Result};
use dp_linalg::Mat;
use dp_opt::{PrivacyModel, Problem, StrategyOptimizer, coa::Coa};
use dp_workloads::Workload;
use serde_json::{Value, json};

/// Workloads the benchmark knows.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BenchWorkload {
    /// All ranges (implicit Gram).
    Allrange,
    /// WRange: m random ranges (explicit, seeded).
    Wrange,
    /// Prefix sums (implicit Gram).
    Prefix,
}

/// Arguments of `cargo xtask bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to benchmark: `coa` ((ε,δ), certificate) or `lrm` (ε-DP,
    /// residual; time against n and against the rank r).
    #[arg(value_parser = ["coa", "lrm"])]
    target: String,
    /// Workload family.
    #[arg(long, value_enum, default_value = "allrange")]
    workload: BenchWorkload,
    /// Domain sizes, comma separated.
    #[arg(long, value_delimiter = ',', default_value = "256,512,1024")]
    sizes: Vec<usize>,
    /// Number of queries for WRange (default: 1024).
    #[arg(long, value_delimiter = ',', default_value = "1024")]
    m: Vec<usize>,
    /// LRM only: ranks r of the decomposition, comma separated (default:
    /// LRM's own ⌈1.2·rank(W)⌉).
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<usize>,
    /// Print one JSON object per row instead of the table (for scripts).
    #[arg(long)]
    json: bool,
    /// Internal: run one size in this process and print its JSON.
    #[arg(long, hide = true)]
    child: bool,
}

fn gram(workload: BenchWorkload, n: usize, m: usize) -> Result<Mat<f64>> {
    Ok(match workload {
        BenchWorkload::Allrange => dp_workloads::workload::AllRange::new(n)?.gram(),
        BenchWorkload::Prefix => dp_workloads::workload::Prefix::new(n)?.gram(),
        BenchWorkload::Wrange => dp_workloads::generators::wrange(m, n, 2016)?.gram(),
    })
}

fn peak_rss_bytes() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0)
}

fn run_child(args: &BenchArgs) -> Result<()> {
    let (n, m) = (args.sizes[0], args.m[0]);
    // Forming WᵀW is the only step whose cost grows with m: every
    // optimizer sees the n×n Gram. Its rank (the dimension COA's dual and
    // barrier work in) is reported beside the time.
    let t = Instant::now();
    let g = gram(args.workload, n, m)?;
    let gram_seconds = t.elapsed().as_secs_f64();
    let problem = Problem::from_gram(g, PrivacyModel::Approx)?;
    let svd_bound = problem.svd_bound()?;
    let workload_rank = dp_linalg::gram_root(problem.gram())?.nrows();
    // Reference product, timed in the same process.
    let mut reference = crate::output::ReferenceProduct::new(n);
    let t = Instant::now();
    reference.run();
    let gemm_seconds = t.elapsed().as_secs_f64();
    drop(reference);
    let r = if args.target == "lrm" {
        let problem = Problem::from_gram(problem.gram().to_owned(), PrivacyModel::Pure)?;
        let options = dp_opt::lrm::LrmOptions {
            rank: args.ranks.first().copied(),
            ..Default::default()
        };
        dp_opt::lrm::Lrm { options }.optimize(&problem, &mut ())?
    } else {
        Coa::default().optimize(&problem, &mut ())?
    };
    let gap = r.report.certificate.map(|c| c.relative_gap);
    let diag = |k: &str| {
        r.report
            .diagnostics
            .iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| *v)
    };
    let peak = peak_rss_bytes();
    let out = json!({
        "n": n,
        "m": m,
        "seconds": r.report.seconds,
        "objective": r.report.objective,
        "svd_bound": svd_bound,
        "duality_gap": gap,
        "rank": diag("rank"),
        "residual": diag("residual"),
        "termination": r.report.termination,
        "iterations": r.report.iterations,
        "gemm_seconds": gemm_seconds,
        "gram_seconds": gram_seconds,
        "workload_rank": workload_rank,
        "peak_rss_bytes": peak,
        "peak_in_nxn_matrices": peak.map(|p| p / (8.0 * (n * n) as f64)),
    });
    println!("{out}");
    Ok(())
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.sizes.is_empty() || args.sizes.contains(&0) || args.m.contains(&0) {
        return Err(DpError::InvalidParameter {
            name: "sizes",
            reason: "need positive n and m".into(),
        });
    }
    if args.child {
        return run_child(args);
    }
    let exe = std::env::current_exe().map_err(|e| DpError::Io(e.to_string()))?;
    let ms: Vec<usize> = match args.workload {
        BenchWorkload::Wrange => args.m.clone(),
        _ => vec![0],
    };
    let lrm = args.target == "lrm";
    let ranks: Vec<Option<usize>> = if lrm && !args.ranks.is_empty() {
        args.ranks.iter().map(|&r| Some(r)).collect()
    } else {
        vec![None]
    };
    let table = !args.json;
    if table {
        println!(
            "{:>6} {:>6} {:>7} {:>6} {:>9} {:>9} {:>10} {:>20} {:>10} {:>5} {:>8} {:>11}",
            "n",
            "m",
            "rank(W)",
            "r",
            "WᵀW s",
            "seconds",
            "t/gemm",
            "objective",
            if lrm { "residual" } else { "gap" },
            "stop",
            "peak MB",
            "peak/(n²·8)"
        );
    }
    let mut rows: Vec<Value> = Vec::new();
    for &n in &args.sizes {
        for &m in &ms {
            for rank in &ranks {
                let workload = format!("{:?}", args.workload).to_lowercase();
                let mut cmd = Command::new(&exe);
                cmd.args(["bench", &args.target, "--child", "--workload", &workload])
                    .args(["--sizes", &n.to_string(), "--m", &m.max(1).to_string()]);
                if let Some(r) = rank {
                    cmd.args(["--ranks", &r.to_string()]);
                }
                let out = cmd.output().map_err(|e| DpError::Io(e.to_string()))?;
                if !out.status.success() {
                    return Err(DpError::Io(format!(
                        "child for n = {n} failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
                let v: Value = serde_json::from_slice(&out.stdout)
                    .map_err(|e| DpError::Io(format!("child output: {e}")))?;
                let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
                if !table {
                    println!("{v}");
                    rows.push(v);
                    continue;
                }
                println!(
                    "{:>6} {:>6} {:>7} {:>6} {:>9.2} {:>9.2} {:>10.1} {:>20.10e} {:>10.2e} {:>5} {:>8.0} {:>11.1}",
                    n,
                    if m == 0 { "-".into() } else { m.to_string() },
                    f("workload_rank"),
                    v["rank"].as_f64().map_or("-".into(), |r| format!("{r}")),
                    f("gram_seconds"),
                    f("seconds"),
                    f("seconds") / f("gemm_seconds"),
                    f("objective"),
                    if lrm { f("residual") } else { f("duality_gap") },
                    v["termination"]["kind"].as_str().unwrap_or("-"),
                    f("peak_rss_bytes") / 1e6,
                    f("peak_in_nxn_matrices"),
                );
                rows.push(v);
            }
        }
    }
    if ms.len() >= 2 && table {
        println!(
            "the optimizer sees only the n×n Gram WᵀW (its time is `seconds`; forming WᵀW is \
             the column before): at fixed n its work follows rank(W), which is at most n, not m"
        );
    }
    if args.sizes.len() >= 2 && ms.len() == 1 && ranks.len() == 1 && table {
        let xs: Vec<f64> = rows
            .iter()
            .map(|v| v["n"].as_f64().unwrap_or(0.0))
            .collect();
        let ys: Vec<f64> = rows
            .iter()
            .map(|v| v["seconds"].as_f64().unwrap_or(f64::NAN))
            .collect();
        println!(
            "fitted exponent: time ~ n^{:.2}",
            dp_bench::stats::fitted_exponent(&xs, &ys)
        );
    }
    Ok(())
}
