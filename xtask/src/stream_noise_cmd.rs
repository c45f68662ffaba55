//! `cargo xtask stream-noise`: the throughput and memory of the kernel's
//! streaming mechanism ([`dp_core::StreamMechanism`]) generating DP-FTRL
//! noise: steps with no contribution, so each released vector is the
//! step's correlated noise `(C̃⁻¹ z)_t`, drawn exactly, from a real
//! (operating-system seeded, charged) session.

use std::time::Instant;

use clap::Args;
use dp_core::{Contribution, Cost, DpError, Result, Session, StreamSpec};
use serde_json::json;

use crate::output::print_json;

#[derive(Debug, Args)]
pub struct StreamNoiseArgs {
    /// The declared horizon T (what is charged for).
    #[arg(long, default_value_t = 1_000_000)]
    steps: usize,
    /// Steps actually generated (default: all of the horizon).
    #[arg(long)]
    run: Option<usize>,
    /// Coordinates per step.
    #[arg(long, default_value_t = 10_000)]
    dimension: usize,
    /// Bands of C: the first coefficients of the running sums' square
    /// root, `(1 − x)^{−1/2}`.
    #[arg(long, default_value_t = 8)]
    bands: usize,
    /// ρ charged for the horizon.
    #[arg(long, default_value_t = 0.5)]
    rho: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &StreamNoiseArgs) -> Result<()> {
    let run = args.run.unwrap_or(args.steps);
    if run > args.steps {
        return Err(DpError::InvalidParameter {
            name: "run",
            reason: format!("{run} steps exceed the horizon {}", args.steps),
        });
    }
    if args.bands == 0 || args.bands > dp_core::kernel::stream::MAX_BANDS {
        return Err(DpError::InvalidParameter {
            name: "bands",
            reason: format!("must be in 1..={}", dp_core::kernel::stream::MAX_BANDS),
        });
    }
    let spec = StreamSpec {
        coefficients: dp_stream::toeplitz::inverse_sqrt_series(args.bands),
        horizon: args.steps,
        dimension: args.dimension,
        participations: 1,
        separation: 1,
        contribution: Contribution::Clipped { norm: 1.0 },
    };
    let rss_before = dp_bench::procfs::peak_rss_bytes(dp_bench::procfs::Pid::Current);
    let mut session = Session::zcdp(args.rho)?;
    let start = Instant::now();
    let mut stream = session.stream(&spec, Cost::Rho(args.rho))?;
    let setup = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut checksum = 0.0f64;
    for _ in 0..run {
        let noise = stream.next_clipped(&[])?;
        checksum += noise[0];
    }
    let seconds = start.elapsed().as_secs_f64();
    let values = run as f64 * args.dimension as f64;
    let figures = stream.figures();
    let (step_var, _) = stream.variances();
    let peak = dp_bench::procfs::peak_rss_bytes(dp_bench::procfs::Pid::Current);
    let out = json!({
        "horizon": args.steps,
        "steps_generated": run,
        "dimension": args.dimension,
        "bands": args.bands,
        "rho": args.rho,
        "sigma": figures.sigma,
        "sensitivity": figures.sensitivity,
        "coefficient_bits": figures.coefficient_bits,
        "step_std": step_var.sqrt(),
        "setup_seconds": setup,
        "seconds": seconds,
        "values_per_second": values / seconds,
        "peak_rss_bytes": peak,
        "peak_rss_bytes_before": rss_before,
        "checksum_is_finite": checksum.is_finite(),
    });
    if args.json {
        print_json(&out)
    } else {
        println!(
            "{run} steps × {} coordinates in {seconds:.2} s: {:.3e} values/s, peak RSS {:.1} MB, σ = {:.4}",
            args.dimension,
            values / seconds,
            peak.unwrap_or(f64::NAN) / 1e6,
            figures.sigma
        );
        Ok(())
    }
}
