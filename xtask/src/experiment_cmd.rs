//! `cargo xtask experiment list | all | NAME`.

use std::path::PathBuf;

use clap::Args;
use dp_bench::progress::TerminalProgress;
use dp_bench::{RunConfig, Scale, registry, run_experiment};
use dp_core::Result;

#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// `list`, `all`, or an experiment name.
    name: String,
    /// Run at the paper's full scale (default: reduced, minutes on 2 cores).
    #[arg(long)]
    full: bool,
    /// Output root; each experiment writes into OUT/NAME/.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Directory with the datasets (searched before $DP_DATASETS, datasets/, ../shared/datasets).
    #[arg(long)]
    datasets: Option<PathBuf>,
    /// Repetitions per point (default: the experiment's own).
    #[arg(long)]
    repetitions: Option<usize>,
    /// A reduced grid that only checks the experiment runs end to end
    /// (what the integration test uses); not a reproduction.
    #[arg(long, conflicts_with = "full")]
    smoke: bool,
}

pub fn run(args: &ExperimentArgs) -> Result<()> {
    let experiments = registry();
    if args.name == "list" {
        for e in &experiments {
            match e.pending() {
                None => println!("{:<24} {}", e.name(), e.reproduces()),
                Some(why) => println!("{:<24} {} [PENDING: {why}]", e.name(), e.reproduces()),
            }
        }
        return Ok(());
    }
    let cfg = RunConfig {
        scale: if args.smoke {
            Scale::Smoke
        } else if args.full {
            Scale::Full
        } else {
            Scale::Reduced
        },
        out: args.out.clone(),
        seed: args.seed,
        datasets: args.datasets.clone(),
        repetitions: args.repetitions,
    };
    let chosen = dp_bench::select(experiments, &args.name)?;
    for e in chosen {
        eprintln!(
            "running {} (seed {}): {}",
            e.name(),
            cfg.seed,
            e.reproduces()
        );
        let mut progress = TerminalProgress::new(e.name());
        let written = run_experiment(e.as_ref(), &cfg, &mut progress)?;
        progress.finish();
        println!("{}: outputs in {}", e.name(), written.dir.display());
        for f in &written.files {
            println!("  {}", f.display());
        }
    }
    Ok(())
}
