//! `cargo xtask bench coa|lrm`: an optimizer's time, objective,
//! certificate (COA) or residual and rank (LRM) and peak memory against n
//! (and m, and for LRM the rank r), side by side. Each point is
//! [`dp_bench::scaling::measure_point`] run in a child process of this
//! binary, so that its peak resident memory is its own.
//!
//! `cargo xtask bench peers`: dpmm beside HDMM in one run
//! ([`crate::peers_cmd`]); `cargo xtask bench rp-peers`: beside
//! ResidualPlanner ([`dp_bench::rp_peers`]).
//!
//! `cargo xtask bench release`: `dpmm release` on generated records
//! ([`dp_bench::release_bench`]).
//!
//! `cargo xtask bench guards`: huge domains through `dpmm plan` and
//! `dpmm release`, a result or a refusal in 30 s ([`dp_bench::guards_bench`]).

use clap::Args;
use dp_bench::scaling::{
    ScalingTarget, ScalingWorkload, measure_in_child, measure_point, table_header,
};
use dp_core::{DpError, Result};
use dp_opt::PrivacyModel;

/// Arguments of `cargo xtask bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// What to benchmark: `coa` ((ε,δ), certificate), `lrm` (ε-DP,
    /// residual; time against n and against the rank r) or `peers` (dpmm
    /// beside HDMM when `HDMM_SRC` is set; `--sizes` default 512) or
    /// `release` (`dpmm release` on generated records; `--sizes` are
    /// record counts, default 1000000,10000000) or `guards` (huge domains
    /// through `dpmm plan` and `dpmm release`) or `rp-peers` (dpmm beside
    /// ResidualPlanner when `RP_SRC` is set; `--sizes` are attribute
    /// counts, default 10,20,50,100).
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
    privacy: Option<dpmm::cli::PrivacyFlag>,
    /// release and guards only: the `dpmm` binary to run.
    #[arg(long, default_value = "target/release/dpmm")]
    dpmm: std::path::PathBuf,
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
    /// dpmm beside ResidualPlanner.
    RpPeers,
    /// `dpmm release` on generated records.
    Release,
    /// Huge domains through `dpmm plan` and `dpmm release`.
    Guards,
}

impl BenchTarget {
    fn scaling(self) -> Option<ScalingTarget> {
        match self {
            Self::Coa => Some(ScalingTarget::Coa),
            Self::Lrm => Some(ScalingTarget::Lrm),
            Self::Peers | Self::RpPeers | Self::Release | Self::Guards => None,
        }
    }
}

/// Runs the benchmark.
pub fn run(args: &BenchArgs) -> Result<()> {
    let default: &[usize] = match args.target {
        BenchTarget::Peers => &[512],
        BenchTarget::RpPeers => &dp_bench::rp_peers::RP_DIMENSIONS,
        BenchTarget::Release => &[1_000_000, 10_000_000],
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
    if args.target == BenchTarget::Guards {
        return dp_bench::guards_bench::print_bench(&args.dpmm);
    }
    if args.target == BenchTarget::RpPeers {
        return crate::peers_cmd::run_rp(sizes, args.json);
    }
    if args.target == BenchTarget::Release {
        return dp_bench::release_bench::print_bench(&args.dpmm, sizes);
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
        println!("{}", table_header(lrm));
    }
    let exe = std::env::current_exe().map_err(|e| DpError::Io(e.to_string()))?;
    let mut rows = Vec::new();
    for &n in sizes {
        for &m in &ms {
            for &rank in &ranks {
                let row = measure_in_child(&exe, target, args.workload, (n, m), rank)?;
                if table {
                    println!("{}", row.table_line(m));
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
