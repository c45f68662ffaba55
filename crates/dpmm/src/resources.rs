//! What `dpmm plan` and `dpmm release` may hold in memory (`--max-memory`),
//! the release's sizing against it, and the progress shown while planning.
//!
//! Every step whose cost the inputs decide is sized before it runs:
//! planning ([`dp_plan::resources::planning_need`], inside
//! `plan_strategy`), a plan file read (its length) or written (its
//! entries), and for a release the count tables, the measurement, the
//! reconstruction and the answers ([`release_need`]) — all before the
//! ledger is charged, so a refusal spends nothing.

use std::io::IsTerminal;
use std::time::Duration;

use dp_core::KronTerm;
use dp_plan::resources::{MemoryNeed, TermShape, format_bytes, reconstruction_need};
use dp_workloads::domain::Domain;
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::{DEFAULT_CELL_LIMIT, Layout};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::Document;
use crate::Result;
use crate::release_plan::Strategy;

/// Bytes per strategy row during a measurement: the exact answer (i128),
/// the noisy value, and the dry run's probe value, with room for the
/// measurement's copy.
const BYTES_PER_ROW: f64 = 40.0;

/// Bytes per answered query while the answers CSV is formatted: its
/// description and its CSV line (a batch of them at a time, the file is
/// streamed).
const BYTES_PER_QUERY: f64 = 256.0;

/// Bytes per answered query held whole until written: the non-negative
/// estimate and its CSV line, when asked for.
const BYTES_PER_QUERY_HELD: f64 = 96.0;

/// Copies of the strategy's factor entries held at once: the plan's (which
/// the kernel reads in place), the kernel's quantized integers and their
/// rounding buffer, and the measured strategy (which the measurement
/// shares).
const STRATEGY_COPIES: f64 = 4.0;

/// A plan file read holds its text, the JSON tree (several words per
/// number) and the factors parsed from it: this many times its length.
const PLAN_FILE_READ_FACTOR: f64 = 8.0;

/// A positive size in bytes, with an optional decimal or binary unit:
/// 8G or 8GB (10⁹ bytes each), 8GiB (2³⁰), also k, M, T and their binary
/// forms (`--max-memory`).
pub fn parse_memory(text: &str) -> std::result::Result<u64, String> {
    let size: bytesize::ByteSize = text.trim().parse().map_err(|_| {
        format!("'{text}' is not a size: give bytes, or a number with a unit (8G, 512MiB)")
    })?;
    match size.as_u64() {
        0 => Err("the memory limit must be positive".into()),
        bytes => Ok(bytes),
    }
}

/// Refuses a plan file whose reading would not fit `limit` (its text,
/// JSON tree and parsed factors, sized from its length).
pub fn check_plan_file(plan: &Document, limit: u64) -> Result<()> {
    let len = plan.len()?;
    let mut need = MemoryNeed::new("reading the plan file");
    need.add(
        format!("{} of JSON", format_bytes(len as f64)),
        len as f64 * PLAN_FILE_READ_FACTOR,
    );
    Ok(need.check(limit)?)
}

/// The count tables the release keeps: the full histogram when the
/// domain has at most [`DEFAULT_CELL_LIMIT`] cells, else one table per
/// attribute set `tables`, as many cells as `limit` holds (8 bytes each,
/// half of the limit: the kernel copies each term's table once more).
pub fn layout(domain: &Domain, tables: &[Vec<usize>], limit: u64) -> Result<Layout> {
    if domain.cells_f64() <= DEFAULT_CELL_LIMIT as f64 {
        return Ok(Layout::full(domain, DEFAULT_CELL_LIMIT)?);
    }
    Ok(Layout::marginals(domain, tables, limit / 16)?)
}

/// Each strategy term's support and factor rows.
fn term_shapes(strategy: &Strategy) -> Vec<TermShape> {
    strategy
        .terms
        .iter()
        .map(|t| {
            (
                t.factors.iter().map(|(p, _)| *p).collect(),
                t.factors.iter().map(|(_, m)| m.nrows()).collect(),
            )
        })
        .collect()
}

/// Cells of the table on `support`.
fn cells(shape: &[usize], support: &[usize]) -> f64 {
    support.iter().map(|&i| shape[i] as f64).product()
}

/// What a release of `workload` with `strategy` on the tables of `layout`
/// holds: the tables and the kernel's per-term copies, the measurement
/// (every strategy row and the largest mode product in flight), the
/// strategy's factors, the reconstruction ([`reconstruction_need`]) and
/// the answers written out.
pub fn release_need(
    workload: &StructuredWorkload,
    strategy: &Strategy,
    layout: &Layout,
    buffered: u64,
) -> MemoryNeed {
    let shape = workload.domain().shape();
    let shapes = term_shapes(strategy);
    let mut need = MemoryNeed::new("the release");
    need.extend(reconstruction_need(workload, &shapes));
    let kept: f64 = layout.tables().iter().map(|t| cells(&shape, t)).sum();
    let per_term: f64 = shapes.iter().map(|(s, _)| cells(&shape, s)).sum();
    need.add("the count tables", (kept + per_term) * 8.0);
    if buffered > 0 {
        need.add(
            "the records buffered to bound each privacy unit's",
            buffered as f64,
        );
    }
    let rows: f64 = shapes
        .iter()
        .map(|(_, r)| r.iter().map(|&k| k as f64).product::<f64>())
        .sum();
    need.add(
        format!("the measurement of {rows:.3e} strategy rows"),
        rows * BYTES_PER_ROW,
    );
    // A term is applied mode by mode in i128: before mode k the tensor has
    // the rows of the factors before k and the columns of those after.
    let in_flight = shapes
        .iter()
        .map(|(support, r)| {
            (0..=support.len())
                .map(|k| {
                    let done: f64 = r[..k].iter().map(|&x| x as f64).product();
                    done * cells(&shape, &support[k..])
                })
                .fold(0.0, f64::max)
        })
        .fold(0.0, f64::max);
    need.add(
        "the largest term's exact answers in flight",
        in_flight * 32.0,
    );
    let entries: f64 = strategy.terms.iter().map(KronTerm::entries).sum();
    need.add("the strategy's factors", entries * 8.0 * STRATEGY_COPIES);
    let queries = workload.num_queries();
    let in_flight = queries.min(crate::answers::csv_rows_in_flight() as f64);
    need.add(
        format!("the answers file of {queries:.3e} queries"),
        in_flight * BYTES_PER_QUERY + queries * BYTES_PER_QUERY_HELD,
    );
    need
}

/// A spinner with the elapsed time on stderr, only when stderr is a
/// terminal, and inside [`Spinner::show`] how far the work has come
/// ([`dp_core::progress`]: the planner's passes and the optimizer's
/// iterations against their budgets, the share of the records read, the
/// query products reconstructed; a percentage is the innermost stage's and,
/// in planning, starts again for each candidate, factor and pass, so it
/// says that work goes on and how far the current run is, not the time
/// left). Its note says what Ctrl-C does at that point: before a charge it
/// ends the command with nothing spent; after it, the release runs on.
#[derive(Clone)]
pub struct Spinner(Option<(ProgressBar, &'static str)>);

impl Spinner {
    /// Starts the spinner with `message`, for work before any charge.
    pub fn start(message: &'static str) -> Self {
        Self::with_note(message, "Ctrl-C stops, nothing is spent")
    }

    /// Starts the spinner with `message`, for work after the ledger was
    /// charged.
    pub fn charged(message: &'static str) -> Self {
        Self::with_note(message, "charged: runs to its end")
    }

    /// Starts the spinner with `message`, for work that may charge on
    /// its way (a stream: the signal's effect is said when it comes).
    pub fn plain(message: &'static str) -> Self {
        Self::with_note(message, "")
    }

    fn with_note(message: &'static str, note: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        let note = if note.is_empty() {
            String::new()
        } else {
            format!(" ({note})")
        };
        if let Ok(style) =
            ProgressStyle::with_template(&format!("{{spinner}} {{msg}} [{{elapsed}}]{note}"))
        {
            bar.set_style(style);
        }
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(200));
        Self(Some((bar, message)))
    }

    /// Runs `f` (on this thread), the line showing the stages it opens.
    pub fn show<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            None => f(),
            Some((bar, message)) => {
                let (bar, message) = (bar.clone(), *message);
                let sink = std::sync::Arc::new(move |stages: &[dp_core::progress::Stage]| {
                    bar.set_message(format!("{message}: {}", dp_core::progress::line(stages)));
                });
                dp_core::progress::show(sink, f)
            }
        }
    }

    /// No spinner (a library call that was not asked for progress).
    pub fn hidden() -> Self {
        Self(None)
    }

    /// Clears the spinner.
    pub fn finish(self) {
        if let Some((bar, _)) = self.0 {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_memory;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_memory("8G"), Ok(8_000_000_000));
        assert_eq!(parse_memory("8GB"), Ok(8_000_000_000));
        assert_eq!(parse_memory("8GiB"), Ok(8 << 30));
        assert_eq!(parse_memory("512 MiB"), Ok(512 << 20));
        assert_eq!(parse_memory("1.5k"), Ok(1500));
        assert_eq!(parse_memory("4096"), Ok(4096));
        for bad in ["0", "0G", "", "-1G", "8X", "G", "1e3", "nan", "8 G B"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }
}
