//! `cargo xtask`: the dpmm command line (docs/commands.md).
//!
//! Every command prints its result as one JSON object on stdout; on bad
//! input it prints one line `error: …` on stderr and exits with status 2.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit_cmd;
mod bench_cmd;
mod error_cmd;
mod experiment_cmd;
mod factorize_cmd;
mod optimize_cmd;
mod output;
mod peers_cmd;
mod plan_cmd;
mod regress_cmd;
mod report;
mod stream_noise_cmd;

#[derive(Parser)]
#[command(
    name = "xtask",
    about = "dpmm: optimized batch linear queries under differential privacy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Factor a streaming workload (continual release) and print its
    /// figures: total and largest variance, sensitivity, lower bound.
    Factorize(factorize_cmd::FactorizeArgs),
    /// Generate DP-FTRL noise with the kernel's streaming mechanism and
    /// report its throughput and peak memory.
    StreamNoise(stream_noise_cmd::StreamNoiseArgs),
    /// Evaluate a strategy for a workload: l1_obj or l2_obj, expected total
    /// squared error, and whether the strategy supports the workload.
    Error(error_cmd::ErrorArgs),
    /// Optimize a strategy for a workload and report its objective.
    Optimize(optimize_cmd::OptimizeArgs),
    /// Reproduce a paper's figure or table: `list`, `all` or a name.
    Experiment(experiment_cmd::ExperimentArgs),
    /// Benchmark an optimizer: time, objective, certificate and peak
    /// memory against n (`cargo xtask bench coa --sizes 256,512,1024`).
    Bench(bench_cmd::BenchArgs),
    /// Regression gate: objectives and time ratios of every optimizer on
    /// fixed workloads against the committed baseline.
    Regress(regress_cmd::RegressArgs),
    /// Plan a workload spec: structured strategy, certificate, errors.
    Plan(plan_cmd::PlanArgs),
    /// Empirical privacy audit: ε lower bounds (Clopper–Pearson) for every
    /// mechanism; exit status 1 on a violation (`--broken` must give one).
    Audit(audit_cmd::AuditArgs),
}

fn main() -> ExitCode {
    // A panic is a bug; still, the user gets one line and a distinct code
    // instead of a backtrace and 101.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error (please report): {info}");
        std::process::exit(70);
    }));
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print in full and succeed.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        // A usage error: its first line only (no usage block), status 2.
        Err(e) => {
            let rendered = e.render().to_string();
            let line = rendered.lines().find(|l| !l.trim().is_empty());
            eprintln!("{}", line.unwrap_or("error: invalid command line").trim());
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Error(args) => error_cmd::run(&args),
        Command::Factorize(args) => factorize_cmd::run(&args),
        Command::StreamNoise(args) => stream_noise_cmd::run(&args),
        Command::Optimize(args) => optimize_cmd::run(&args),
        Command::Experiment(args) => experiment_cmd::run(&args),
        Command::Bench(args) => bench_cmd::run(&args),
        Command::Regress(args) => regress_cmd::run(&args),
        Command::Plan(args) => plan_cmd::run(&args),
        Command::Audit(args) => audit_cmd::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
