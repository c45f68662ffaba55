//! `cargo xtask audit`: the empirical privacy audit; the mechanisms, the
//! events and the bounds are [`dp_bench::audit`].

use clap::Args;
use dp_bench::audit::{AuditConfig, Broken, run_audit};
use dp_core::Result;
use serde_json::json;

use crate::output::print_json;

/// Arguments of `cargo xtask audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// 10⁷ samples per neighbour instead of 10⁶.
    #[arg(long)]
    full: bool,
    /// Audit a deliberately broken variant (the audit must flag it).
    #[arg(long, value_enum)]
    broken: Option<Broken>,
    /// Seed of every session of the audit.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
}

/// Prints one line per mechanism on stderr and the report as JSON on
/// stdout; exits with status 1 when a violation is found.
pub fn run(args: &AuditArgs) -> Result<()> {
    let cfg = AuditConfig {
        seed: args.seed,
        broken: args.broken,
        ..AuditConfig::new(args.full)
    };
    let audits = run_audit(&cfg, &mut |line| eprintln!("{line}"))?;
    let violations = audits.iter().filter(|a| a.violation).count();
    print_json(&json!({
        "samples_per_neighbour": cfg.samples,
        "seed": cfg.seed,
        "confidence": cfg.confidence,
        "broken": args.broken.map(|b| format!("{b:?}")),
        "mechanisms": audits,
        "violations": violations,
    }))?;
    if violations > 0 {
        eprintln!("error: {violations} privacy violation(s) found");
        std::process::exit(1);
    }
    Ok(())
}
