//! `cargo xtask bench coa|lrm`: an optimizer's time, objective,
//! certificate (COA) or residual and rank (LRM) and peak memory against n
//! (and m, and for LRM the rank r), side by side. Each point is
//! [`dp_bench::scaling::measure_point`] run in a child process of this
//! binary, so that its peak resident memory is its own.
//!
//! `cargo xtask bench peers`: dpmm beside HDMM in one run
//! ([`crate::peers_cmd`]).

use std::process::Command;

use clap::Args;
use dp_bench::scaling::{ScalingRow, ScalingTarget, ScalingWorkload, measure_point};
use dp_core::{DpError, Result};
use dp_opt::PrivacyModel;

/// Arguments of `cargo xtask bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to benchmark: `coa` ((ε,δ), certificate), `lrm` (ε-DP,
    /// residual; time against n and against the rank r) or `peers` (dpmm
    /// beside HDMM when `HDMM_SRC` is set; `--sizes` default 512).
    #[arg(value_enum)]
    target: BenchTarget,
    /// Workload family.
    #[arg(long, value_enum, default_value = "allrange")]
    workload: ScalingWorkload,
    /// Domain sizes, comma separated (default 256,512,1024; peers: 512).
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Number of queries for WRange (default: 1024).
    #[arg(long, value_delimiter = ',', default_value = "1024")]
    m: Vec<usize>,
    /// LRM only: ranks r of the decomposition, comma separated (default:
    /// LRM's own ⌈1.2·rank(W)⌉).
    #[arg(long, value_delimiter = ',')]
    ranks: Vec<usize>,
    /// peers only: one privacy model's column (default: both).
    #[arg(long, value_enum)]
    privacy: Option<crate::output::Privacy>,
    /// Print one JSON object per row instead of the table (for scripts).
    #[arg(long)]
    json: bool,
    /// Internal: run one size in this process and print its JSON.
    #[arg(long, hide = true)]
    child: bool,
}

/// What `cargo xtask bench` measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum BenchTarget {
    /// COA's scaling.
    Coa,
    /// LRM's scaling.
    Lrm,
    /// dpmm beside HDMM.
    Peers,
}

impl BenchTarget {
    fn scaling(self) -> Option<ScalingTarget> {
        match self {
            Self::Coa => Some(ScalingTarget::Coa),
            Self::Lrm => Some(ScalingTarget::Lrm),
            Self::Peers => None,
        }
    }
}

fn child(
    args: &BenchArgs,
    target: ScalingTarget,
    n: usize,
    m: usize,
    rank: Option<usize>,
) -> Result<ScalingRow> {
    let exe = std::env::current_exe().map_err(|e| DpError::Io(e.to_string()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", target.name(), "--child"])
        .args(["--workload", args.workload.name()])
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
    serde_json::from_slice(&out.stdout).map_err(|e| DpError::Io(format!("child output: {e}")))
}

/// One table line; `m` is 0 for families without a query count.
fn print_row(row: &ScalingRow, m: usize, lrm: bool) {
    let opt = |x: Option<f64>| x.unwrap_or(f64::NAN);
    let (o, q, t) = (&row.outcome, &row.quality, &row.times);
    println!(
        "{:>6} {:>6} {:>7} {:>6} {:>9.2} {:>9.2} {:>10.1} {:>20.10e} {:>10.2e} {:>14} {:>8.0} {:>11.1}",
        row.n,
        if m == 0 { "-".into() } else { m.to_string() },
        row.workload_rank,
        q.rank.map_or("-".into(), |r| format!("{r}")),
        t.gram_seconds,
        t.seconds,
        t.seconds / t.gemm_seconds,
        o.objective,
        opt(if lrm { q.residual } else { q.duality_gap }),
        o.termination.kind(),
        opt(row.memory.peak_rss_bytes) / 1e6,
        opt(row.memory.peak_in_nxn_matrices),
    );
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    let default: &[usize] = match args.target {
        BenchTarget::Peers => &[512],
        _ => &[256, 512, 1024],
    };
    let sizes = if args.sizes.is_empty() {
        default
    } else {
        &args.sizes[..]
    };
    if sizes.contains(&0) || args.m.contains(&0) {
        return Err(DpError::InvalidParameter {
            name: "sizes",
            reason: "need positive n and m".into(),
        });
    }
    let Some(target) = args.target.scaling() else {
        let models = match args.privacy {
            Some(p) => vec![p.0],
            None => vec![PrivacyModel::Approx, PrivacyModel::Pure],
        };
        return crate::peers_cmd::run(sizes, &models, args.json);
    };
    if args.child {
        let (n, m) = (sizes[0], args.m[0]);
        let row = measure_point(target, args.workload, n, m, args.ranks.first().copied())?;
        let text = serde_json::to_string(&row).map_err(|e| DpError::Io(e.to_string()))?;
        println!("{text}");
        return Ok(());
    }
    let ms = if args.workload.has_queries() {
        args.m.clone()
    } else {
        vec![0]
    };
    let lrm = target == ScalingTarget::Lrm;
    let ranks: Vec<Option<usize>> = if lrm && !args.ranks.is_empty() {
        args.ranks.iter().map(|&r| Some(r)).collect()
    } else {
        vec![None]
    };
    let table = !args.json;
    if table {
        let gap = if lrm { "residual" } else { "gap" };
        let names = [
            "n",
            "m",
            "rank(W)",
            "r",
            "WᵀW s",
            "seconds",
            "t/gemm",
            "objective",
            gap,
        ];
        let names = names.into_iter().chain(["stop", "peak MB", "peak/(n²·8)"]);
        let widths: [usize; 12] = [6, 6, 7, 6, 9, 9, 10, 20, 10, 14, 8, 11];
        let header: Vec<String> = names.zip(widths).map(|(h, w)| format!("{h:>w$}")).collect();
        println!("{}", header.join(" "));
    }
    let mut rows = Vec::new();
    for &n in sizes {
        for &m in &ms {
            for &rank in &ranks {
                let row = child(args, target, n, m, rank)?;
                if table {
                    print_row(&row, m, lrm);
                } else {
                    let text =
                        serde_json::to_string(&row).map_err(|e| DpError::Io(e.to_string()))?;
                    println!("{text}");
                }
                rows.push(row);
            }
        }
    }
    if ms.len() >= 2 && table {
        println!(
            "the optimizer sees only the n×n Gram WᵀW (its time is `seconds`; forming WᵀW is \
             the column before): at fixed n its work follows rank(W), which is at most n, not m"
        );
    }
    if sizes.len() >= 2 && ms.len() == 1 && ranks.len() == 1 && table {
        let xs: Vec<f64> = rows.iter().map(|r| r.n as f64).collect();
        let ys: Vec<f64> = rows.iter().map(|r| r.times.seconds).collect();
        println!(
            "fitted exponent: time ~ n^{:.2}",
            dp_bench::stats::fitted_exponent(&xs, &ys)
        );
    }
    Ok(())
}
