//! `cargo xtask factorize`: a factorization of a streaming workload and
//! its figures as one JSON object ([`dp_stream`]).

use clap::{Args, ValueEnum};
use dp_core::{DpError, Result};
use dp_stream::{Family, Objective, Participation, Stream, StreamQuery, factorize};
use serde_json::json;

use crate::output::print_json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FamilyArg {
    /// COA's certified optimum for the total squared error (T ≤ 4096).
    Dense,
    /// The square-root factorization B = C = W^{1/2}.
    Sqrt,
    /// The binary tree (running sums and windows).
    Tree,
    /// Banded Toeplitz C, optimized (`--bands`).
    Banded,
    /// Buffered linear Toeplitz, optimized (`--buffers`; running and
    /// decayed sums).
    Blt,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ObjectiveArg {
    /// The sum of every step's variance.
    Total,
    /// The largest step's variance.
    Max,
}

#[derive(Debug, Args)]
pub struct FactorizeArgs {
    /// The horizon T (steps).
    #[arg(long)]
    steps: usize,
    /// The factorization family.
    #[arg(long, value_enum)]
    family: FamilyArg,
    /// The query at every step: `prefix` (running sums), `window:H` (the
    /// last H steps) or `decayed:R` (older steps weighted by R^age).
    #[arg(long, default_value = "prefix")]
    workload: String,
    /// Bands of the banded factorization (default: the separation with
    /// several participations, else min(T, 64)).
    #[arg(long)]
    bands: Option<usize>,
    /// Buffers of the BLT (at most; default 4).
    #[arg(long)]
    buffers: Option<usize>,
    /// Participations per person (default 1).
    #[arg(long, requires = "separation")]
    participations: Option<usize>,
    /// The fewest steps between two participations.
    #[arg(long, requires = "participations")]
    separation: Option<usize>,
    /// What banded and BLT optimize (the dense optimum is for the total).
    #[arg(long, value_enum, default_value = "total")]
    objective: ObjectiveArg,
    /// Print JSON (the default and only format; kept for scripts).
    #[arg(long)]
    json: bool,
}

pub fn run(args: &FactorizeArgs) -> Result<()> {
    let stream = Stream::new(args.workload.parse::<StreamQuery>()?, args.steps)?;
    let participation = match (args.participations, args.separation) {
        (Some(k), Some(b)) => Participation::Multi {
            participations: k,
            separation: b,
        },
        _ => Participation::Single,
    };
    participation.validate()?;
    let family = match args.family {
        FamilyArg::Dense => Family::Dense,
        FamilyArg::Sqrt => Family::Sqrt,
        FamilyArg::Tree => Family::Tree,
        FamilyArg::Banded => Family::Banded,
        FamilyArg::Blt => Family::Blt,
    };
    let misplaced = |flag: &str, family: &str| DpError::InvalidParameter {
        name: "factorize",
        reason: format!("{flag} applies to --family {family} only"),
    };
    if args.bands.is_some() && family != Family::Banded {
        return Err(misplaced("--bands", "banded"));
    }
    if args.buffers.is_some() && family != Family::Blt {
        return Err(misplaced("--buffers", "blt"));
    }
    let objective = match args.objective {
        ObjectiveArg::Total => Objective::Total,
        ObjectiveArg::Max => Objective::Max,
    };
    let started = std::time::Instant::now();
    // How far the optimizer has come, on a terminal.
    let spinner = dpmm::resources::Spinner::start("factorizing");
    let factorized = spinner.show(|| {
        factorize(
            &stream,
            family,
            args.bands,
            args.buffers,
            participation,
            objective,
        )
    });
    spinner.finish();
    let (f, _) = factorized?;
    let figures = f.figures(participation)?;
    // The factorization and its figures (a sensitivity can cost more
    // than the factors).
    let seconds = started.elapsed().as_secs_f64();
    let (k, b) = participation.schema();
    print_json(&json!({
        "family": family.name(),
        "workload": args.workload,
        "steps": args.steps,
        "bands": f.toeplitz_c().filter(|_| family == Family::Banded).map(<[f64]>::len),
        "buffers": f.blt.as_ref().map(dp_stream::Blt::buffers),
        "blt": f.blt.as_ref().map(|b| json!({"theta": b.theta(), "omega": b.omega()})),
        "participations": k,
        "separation": (k > 1).then_some(b),
        // What the family was optimized for (the dense optimum is for the
        // total; sqrt and the tree are not optimized).
        "objective": match family {
            Family::Banded | Family::Blt => Some(objective.name()),
            Family::Dense => Some("total"),
            Family::Sqrt | Family::Tree => None,
        },
        "total_squared_error": figures.total_squared_error,
        "max_variance": figures.max_variance,
        "sensitivity": figures.sensitivity.value,
        "sensitivity_lower": figures.sensitivity.lower,
        "sensitivity_exact": figures.sensitivity.is_exact(),
        "lower_bound": figures.lower_bound.map(|(total, max)| json!({
            "total_squared_error": total,
            "max_variance": max,
        })),
        "duality_gap": f.certificate.as_ref().map(|c| c.relative_gap),
        "certified_lower_bound": f.certificate.as_ref().map(|c| c.lower_bound),
        "termination": f.termination.as_ref().map(|t| format!("{t}")),
        "seconds": seconds,
    }))
}
