//! Continual release of running counts (`dpmm stream`): time-stamped
//! records in, the running counts of a workload of marginals at every
//! step out, each step's rows flushed as it is released.
//!
//! # What is released
//!
//! Step `t` publishes, for every cell of every marginal of the workload,
//! the count of records with step `≤ t` in that cell, with its standard
//! error and a 95% interval. The records of step `t` form a count vector
//! `x_t` (all marginal tables, in workload order). Under (ε, δ) the
//! kernel's streaming mechanism ([`dp_core::StreamMechanism`]) measures
//! `C x + z` for a banded lower-triangular Toeplitz `C` (optimized by
//! [`dp_stream::Factorization::banded`] for the largest per-step
//! variance of the running counts; with as many bands as steps, the
//! square root) with exact discrete Gaussian `z`, and the running counts
//! are the running sums of `C⁻¹(C x + z)`. Under pure ε the kernel's
//! `k`-ary tree ([`dp_core::TreeStream`]) measures each node of a tree
//! over the steps with exact discrete Laplace noise, and a running count
//! is the sum of the nodes of its step's base-`k` digits.
//!
//! # Privacy
//!
//! Without a privacy unit the unit is one line of input, as in
//! `release`: one record adds one to one cell of each of the `m`
//! marginal tables of its step, so the contribution's squared norm is
//! `m`, and it contributes to one step (single participation). With one
//! ([`StreamRelease::people`]) the kernel keeps, of each unit, at most
//! `k` steps at least `b` apart and `K` records in each, and the stream
//! is specified with the participation the counts carry. The whole
//! horizon is charged to the ledger once, after the input is read and
//! before the first draw: `ρ`-zCDP for (ε, δ) (converted exactly, as in
//! `release`), ε for pure ε (`ε²/2` on a zCDP ledger).
//!
//! # Time values and steps
//!
//! The time column holds whole numbers (`27`, `27.0`; any column type,
//! [`dpmm_records::timed`]); a record's step is `time − start`
//! (`--start`, default 0), steps `0..T` (`--steps`). Both are public: no
//! step boundary is derived from the data, and all `T` steps are released
//! (steps without records too). A time value that is not a whole number,
//! or outside `start..start + T`, is a bad line, handled like any other by
//! the schema's `malformed` policy (dropped by default, refused under
//! `error` — before the charge, as in `release`); `dpmm check
//! --time-column` shows the curator how many and which.
//!
//! # The whole input is read before the charge
//!
//! Every record is counted at its own step, in any order, and the steps
//! are released after the input ends, each step's rows flushed as it is
//! computed. Closing a step when a record of a later step arrives (a live
//! stream driven by the data) would not be a per-line transformation: one
//! added line with a late time value would close every earlier step and
//! push every later line out of it, and stopping on a line out of order
//! (or on an `error` policy mid-stream) would end the output at a point
//! that depends on the data, after the charge. A live stream needs steps
//! that close on a public clock; that is not built. Standard input
//! (`--data -`) is read to its end like a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use dp_core::intervals::Z95;
use dp_core::{
    Contribution, Cost, PrivacyBudget, StreamFigures, StreamMechanism, StreamSpec, TreeFigures,
    TreeSpec, TreeStream,
};
use dp_stream::{Factorization, Objective, Participation, Stream};
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::{Layout, Schema, Source, Timing, aggregate_steps};

use crate::release_plan::QueryLabels;

/// The non-negative projection's iterations at most (fewer for large
/// streams: [`crate::nonneg::Marginals::running_iteration_cap`]).
const NONNEG_ITERATIONS: usize = 10_000;

/// The most running counts `--nonneg` holds (each several times, and its
/// file's text, in memory): about a gigabyte.
const NONNEG_MAX_COUNTS: usize = 1 << 23;

/// The projection stops once the consistent iterate is within this
/// fraction of the largest running count of the cone.
const NONNEG_TOLERANCE: f64 = 1e-9;
use crate::{Document, Error, Result};

/// The longest horizon `dpmm stream` plans for (the banded optimization
/// is `O(T · bands)` per step of L-BFGS).
pub const MAX_STEPS: usize = 1 << 20;
/// The largest number of released cells per step.
pub const MAX_CELLS: usize = 1 << 22;
/// The most counts a stream holds (steps × cells, 512 MB).
pub const MAX_STEP_CELLS: usize = 1 << 26;
/// The default number of bands of `C` for DP-FTRL (`dpmatrix.DpFtrl`),
/// whose vectors are long: memory and work per step grow with the bands.
pub const DEFAULT_BANDS: usize = 16;
/// The most bands the kernel takes.
pub const MAX_BANDS: usize = dp_core::kernel::stream::MAX_BANDS;
/// `dpmm stream`'s default state, bands × cells: at most 2²⁴ values
/// (256 MB of history).
const DEFAULT_STATE: usize = 1 << 24;

/// `dpmm stream`'s default bands for `cells` cells a step: as many as
/// [`MAX_BANDS`] and a state of 2²⁴ values allow. A banded `C` with as
/// many bands as steps is the square root, the best Toeplitz
/// factorization for the largest variance; fewer bands cost accuracy
/// (docs/streams.md).
pub fn default_bands(cells: usize) -> usize {
    (DEFAULT_STATE / cells.max(1)).clamp(1, MAX_BANDS)
}

/// A continual release: what `dpmm stream` runs.
#[derive(Debug, Clone)]
pub struct StreamRelease {
    /// The records schema.
    pub schema: Document,
    /// The workload spec: marginals only (`marginal`, `marginals`, or
    /// Kronecker products of `identity` and `total`).
    pub workload: Document,
    /// The whole horizon's privacy: (ε, δ) measures with the banded
    /// factorization and discrete Gaussian noise, pure ε with the `k`-ary
    /// tree and discrete Laplace noise.
    pub budget: PrivacyBudget,
    /// The ledger to charge.
    pub ledger: PathBuf,
    /// The time column's name.
    pub time_column: String,
    /// The time value of step 0 (whole-number times).
    pub start: i64,
    /// Dates and times on this public calendar instead of whole numbers.
    pub calendar: Option<dpmm_records::Calendar>,
    /// The horizon `T`.
    pub steps: usize,
    /// Bands of `C` (default [`default_bands`], at most `T`; (ε, δ)
    /// only).
    pub bands: Option<usize>,
    /// Also write running counts that are non-negative, non-decreasing
    /// and consistent across tables ([`nonneg_path`]; post-processing).
    pub nonneg: bool,
    /// The privacy unit: its column, the most records of one unit kept in
    /// a step, and the steps of one unit kept ([`dpmm_records::People`]'s
    /// `unit` and `steps`; weights are refused). `People::records()`: the
    /// unit is one record.
    pub people: dpmm_records::People,
    /// Also write an HTML report here ([`crate::report::stream_html`]):
    /// what was spent and is left, and every table's running counts over
    /// the steps with their 95% bands.
    pub report: Option<PathBuf>,
}

/// The most running counts `--report` draws from (held in memory): 32 MB.
pub const REPORT_MAX_COUNTS: usize = 1 << 22;

/// A stream's public clock from how people write it: without `step`,
/// `start` is a whole number (default 0) and times are whole numbers;
/// with `step` (`day`, `hour`, `week`, `month`, `<N>s`), `start` is a
/// date or date-time and `timezone` an IANA zone (default UTC). Returns
/// the whole-number start and the calendar, if any.
pub fn clock(
    start: Option<&str>,
    step: Option<&str>,
    timezone: Option<&str>,
) -> Result<(i64, Option<dpmm_records::Calendar>)> {
    let Some(step) = step else {
        if timezone.is_some() {
            return Err(Error::Parameter(
                "a time zone places a calendar's steps: give the step too".into(),
            ));
        }
        let start = match start {
            None => 0,
            Some(s) => s.trim().parse().map_err(|_| {
                Error::Parameter(format!(
                    "start: '{s}' is not a whole number (give a step to read dates and times)"
                ))
            })?,
        };
        return Ok((start, None));
    };
    let step: dpmm_records::Step = step.parse()?;
    let calendar =
        dpmm_records::Calendar::new(step, start.unwrap_or_default(), timezone.unwrap_or("UTC"))?;
    Ok((0, Some(calendar)))
}

/// Where `dpmm stream --nonneg` writes its non-negative running counts:
/// `running.nonneg.csv` beside `running.csv`, else `<out>.nonneg.csv`.
pub fn nonneg_path(out: &Path) -> PathBuf {
    let path = crate::answers::nonneg_path(out);
    if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
    {
        path
    } else {
        PathBuf::from(format!("{}.nonneg.csv", out.display()))
    }
}

/// How a stream's running counts were measured, public.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StreamNoise {
    /// (ε, δ): a banded Toeplitz factorization, discrete Gaussian noise.
    Gaussian {
        /// The kernel's figures (ρ, sensitivity, σ).
        figures: StreamFigures,
        /// Bands of `C`.
        bands: usize,
    },
    /// Pure ε: the `k`-ary tree, discrete Laplace noise.
    Laplace {
        /// The kernel's figures (ε, L1 sensitivity, scale, arity).
        figures: TreeFigures,
    },
}

impl StreamNoise {
    /// The noise in a few words, for a summary line.
    pub fn describe(&self) -> String {
        match self {
            Self::Gaussian { figures, bands } => {
                format!("{bands} bands, σ = {:.4} per step", figures.sigma)
            }
            Self::Laplace { figures } => format!(
                "{}-ary tree of {} levels, Laplace scale {:.4} per node",
                figures.arity, figures.levels, figures.scale
            ),
        }
    }
}

/// What a stream measured with, public: for the caller's summary line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamSummary {
    /// The mechanism and its figures.
    pub noise: StreamNoise,
    /// Released cells per step.
    pub queries: usize,
    /// The ledger entry charged.
    pub ledger_entry: usize,
    /// What the ledger was charged.
    pub charged: Charged,
}

/// A stream's mechanism, specified before the charge.
enum Planned {
    Gaussian { spec: StreamSpec, bands: usize },
    Laplace { spec: TreeSpec },
}

/// A stream's mechanism under way, and the running counts it released
/// last.
struct Running {
    mechanism: Mechanism,
    counts: Vec<f64>,
}

enum Mechanism {
    /// Released step by step (`x̂_t`): the running counts are their sums.
    Gaussian(StreamMechanism),
    /// Releases the running counts themselves.
    Laplace(TreeStream),
}

impl Running {
    /// The running counts after the next step, their standard error and
    /// the half-width of their 95% interval.
    fn next(
        &mut self,
        counts: &dp_core::kernel::records::StepCounts,
    ) -> Result<(&[f64], f64, f64)> {
        match &mut self.mechanism {
            Mechanism::Gaussian(mechanism) => {
                let released = mechanism.next_counts(counts)?;
                for (s, v) in self.counts.iter_mut().zip(&released) {
                    *s += v;
                }
                let se = mechanism.variances().1.sqrt();
                Ok((&self.counts, se, Z95 * se))
            }
            Mechanism::Laplace(stream) => {
                self.counts = stream.next_counts(counts)?;
                // The running count's noise: D(n) independent draws.
                let (_, variance) = stream.variance();
                Ok((&self.counts, variance.sqrt(), stream.half_width()))
            }
        }
    }
}

/// Charges `ledger` once for a kernel stream of `spec` under `budget`
/// (which must state δ: the stream is Gaussian) and returns the stream
/// and the ledger entry. `spec` is validated, the ledger opened and its
/// remaining budget checked, then `before_charge` runs (opening outputs:
/// a failure there spends nothing), then the charge is made durable, then
/// the stream is created (drawing nothing yet).
pub fn open_stream(
    ledger: &std::path::Path,
    budget: PrivacyBudget,
    spec: &StreamSpec,
    label: &str,
    before_charge: impl FnOnce() -> Result<()>,
) -> Result<(dp_core::StreamMechanism, usize)> {
    let rho = stream_rho(budget)?;
    spec.figures(rho)?;
    let (mut session, entry, charge) =
        charged_session(ledger, Cost::Rho(rho), label, before_charge)?;
    Ok((session.stream(spec, Cost::Rho(charge.amount))?, entry))
}

/// What a ledger was charged, in its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Charged {
    /// The amount.
    pub amount: f64,
    /// `"epsilon"` for a pure ε ledger, `"rho (zCDP)"` otherwise.
    pub unit: &'static str,
}

/// Opens `ledger`, checks that it holds `cost`, runs `before_charge`,
/// makes the charge durable and returns the session holding it, the
/// ledger entry and the charge.
fn charged_session(
    ledger: &Path,
    cost: Cost,
    label: &str,
    before_charge: impl FnOnce() -> Result<()>,
) -> Result<(dp_core::Session, usize, Charged)> {
    let (mut opened, amount) = crate::ledger::open_for(ledger, cost, "this stream")?;
    let unit = match opened.budget() {
        dp_core::TotalBudget::PureDp { .. } => "epsilon",
        dp_core::TotalBudget::Zcdp { .. } => "rho (zCDP)",
    };
    before_charge()?;
    // The durable charge precedes every draw.
    let session = opened.open_session(amount, label)?;
    let entry = opened.entries().len() - 1;
    Ok((session, entry, Charged { amount, unit }))
}

/// The ρ a stream under `budget` is charged: (ε, δ) converted exactly;
/// pure ε is refused (a stream is measured with Gaussian noise).
pub fn stream_rho(budget: PrivacyBudget) -> Result<f64> {
    match crate::privacy::cost(budget)? {
        Cost::Rho(rho) => Ok(rho),
        Cost::Epsilon(_) => Err(Error::BadInput(
            "a stream is measured with Gaussian noise: give δ as well as ε".into(),
        )),
    }
}

/// The first column of the banded `C` dp-stream optimizes for running
/// sums over `steps` with `bands` bands under `participation`.
pub fn banded_coefficients(
    steps: usize,
    bands: usize,
    participation: Participation,
    objective: Objective,
) -> Result<Vec<f64>> {
    let stream = Stream::prefix(steps)?;
    let factorization = Factorization::banded(&stream, bands, participation, objective)?;
    Ok(factorization
        .toeplitz_c()
        .ok_or_else(|| Error::Internal("a banded factorization without its coefficients".into()))?
        .to_vec())
}

/// `dpmm stream`'s `C` for running counts over `steps` with `bands`
/// bands, for the largest variance under single participation: the square
/// root when `bands = steps` (the Toeplitz optimum), the banded optimum
/// when dp-stream's optimizer takes `steps × bands`, and otherwise the
/// square root truncated to `bands` (that optimizer's starting point).
pub fn running_count_coefficients(steps: usize, bands: usize) -> Result<Vec<f64>> {
    // The running sums' square root is (1 − x)^{−1/2}.
    if bands >= steps {
        return Ok(dp_stream::toeplitz::inverse_sqrt_series(steps));
    }
    if steps as f64 * bands as f64 <= dp_stream::toeplitz::MAX_WORK / 1000.0 {
        return banded_coefficients(steps, bands, Participation::Single, Objective::Max);
    }
    Ok(dp_stream::toeplitz::inverse_sqrt_series(bands))
}

/// One marginal table of the workload: the attributes it keeps.
struct Table {
    support: Vec<usize>,
}

impl StreamRelease {
    /// Runs the stream on the records of `input` (any source: CSV, plain
    /// or gzip'ed, Parquet, Arrow), writing
    /// `step,time,query,answer,std_error,ci_low,ci_high` rows to `out` and the
    /// sidecar to `<out>.json`, both through temporaries renamed into
    /// place at the end (the caller checks `out` against the inputs and
    /// the ledger first: [`crate::output::check_output`]). The input is
    /// read whole and everything that can be checked is checked before
    /// the charge; a refusal spends nothing. From the charge on, the
    /// stream runs to its end ([`dp_core::interrupt::commit`]).
    pub fn run(&self, input: Source<'_>, out: &Path) -> Result<StreamSummary> {
        let cost = crate::privacy::cost(self.budget)?;
        if matches!(cost, Cost::Epsilon(_)) && self.bands.is_some() {
            return Err(Error::Parameter(
                "--bands sets the Gaussian factorization of an (ε, δ) stream; a pure ε stream \
                 is measured by a tree"
                    .into(),
            ));
        }
        if self.steps == 0 || self.steps > MAX_STEPS {
            return Err(Error::Parameter(format!(
                "--steps must be in 1..={MAX_STEPS}, got {}",
                self.steps
            )));
        }
        if let Some(b) = self.bands
            && (b == 0 || b > MAX_BANDS)
        {
            return Err(Error::Parameter(format!(
                "--bands must be in 1..={MAX_BANDS}"
            )));
        }
        if self.people.weight.is_some() {
            return Err(Error::Parameter(
                "a stream's records carry no weights: --weight is for release".into(),
            ));
        }
        match (&self.people.unit, self.people.steps) {
            (Some(_), None) => {
                return Err(Error::Parameter(
                    "a stream's privacy unit needs --max-steps-per-unit (and --min-separation)"
                        .into(),
                ));
            }
            (None, Some(_)) => {
                return Err(Error::Parameter(
                    "--max-steps-per-unit bounds a privacy unit: give --privacy-unit".into(),
                ));
            }
            _ => {}
        }
        if self.start.checked_add(self.steps as i64).is_none() {
            return Err(Error::Parameter(
                "--start + --steps is beyond 64-bit integers".into(),
            ));
        }
        let schema = match &self.schema {
            Document::File(path) => Schema::from_path(path)?,
            doc => Schema::from_json(&doc.read()?)?,
        };
        let workload = crate::release::load_workload(&self.workload, &schema)?;
        let (tables, queries) = tables(&workload)?;
        // The mechanism, before anything is read: the banded factorization
        // for (ε, δ), the tree of the best arity for pure ε.
        let gaussian = match cost {
            Cost::Rho(_) => {
                let bands = self
                    .bands
                    .unwrap_or_else(|| default_bands(queries))
                    .min(self.steps);
                Some((running_count_coefficients(self.steps, bands)?, bands))
            }
            Cost::Epsilon(_) => None,
        };
        let labels = QueryLabels::new(&workload, &schema);
        if labels.len() != queries {
            return Err(Error::Internal("query labels and cells disagree".into()));
        }
        let total = self
            .steps
            .checked_mul(queries)
            .filter(|&n| n <= MAX_STEP_CELLS)
            .ok_or_else(|| {
                Error::BadInput(format!(
                    "{} steps × {queries} cells are more than the {MAX_STEP_CELLS} counts a \
                     stream holds",
                    self.steps
                ))
            })?;
        // The tables the non-negative projection needs, and its bounds,
        // before the charge.
        let marginals = match self.nonneg {
            true => {
                let m = crate::nonneg::Marginals::of(&workload)?;
                if m.len() != queries {
                    return Err(Error::Internal(
                        "the projection's tables and cells disagree".into(),
                    ));
                }
                if !m.running_fits(self.steps) || total > NONNEG_MAX_COUNTS {
                    return Err(Error::BadInput(format!(
                        "--nonneg: {} steps × {queries} cells are more than the projection \
                         holds (at most {NONNEG_MAX_COUNTS} running counts, and 2·10¹⁰ \
                         operations for ten iterations)",
                        self.steps
                    )));
                }
                Some(m)
            }
            false => None,
        };
        if self.report.is_some() && total > REPORT_MAX_COUNTS {
            return Err(Error::BadInput(format!(
                "--report: {} steps × {queries} cells are more than the {REPORT_MAX_COUNTS} \
                 running counts a report draws",
                self.steps
            )));
        }
        // Every record is counted at its own step before anything is
        // charged: the whole input is read first (see the module's
        // documentation), and every refusal (an `error` policy, I/O)
        // happens here, spending nothing.
        let mut supports: Vec<Vec<usize>> = Vec::new();
        for t in &tables {
            if !supports.contains(&t.support) {
                supports.push(t.support.clone());
            }
        }
        let layout = Layout::marginals_over_steps(
            schema.domain(),
            &supports,
            self.steps,
            MAX_STEP_CELLS as u64,
        )?;
        let timing = Timing {
            column: &self.time_column,
            start: self.start,
            steps: self.steps as u64,
            calendar: self.calendar,
        };
        let products: Vec<Vec<usize>> = tables.iter().map(|t| t.support.clone()).collect();
        let counts = aggregate_steps(input, &schema, timing, &layout, &self.people)?
            .into_step_counts(&products)?;
        if counts.per_step() * counts.steps() != total {
            return Err(Error::Internal("step counts and cells disagree".into()));
        }
        // The kernel counted the records and says how far one moves a
        // step: the stream is specified with that, not with a norm of ours.
        // A unit's steps, as the kernel bounded them.
        let Contribution::Counts(bound) = counts.contribution() else {
            return Err(Error::Internal(
                "a stream of counts without their bound".into(),
            ));
        };
        let (participations, separation) = (bound.participations(), bound.separation());
        let planned = match gaussian {
            Some((coefficients, bands)) => Planned::Gaussian {
                spec: StreamSpec {
                    coefficients,
                    horizon: self.steps,
                    dimension: queries,
                    participations,
                    separation,
                    contribution: counts.contribution(),
                },
                bands,
            },
            None => Planned::Laplace {
                spec: TreeSpec {
                    arity: dp_core::kernel::tree::best_arity(self.steps),
                    horizon: self.steps,
                    dimension: queries,
                    participations,
                    separation,
                    contribution: counts.contribution(),
                },
            },
        };
        // Validated and calibrated before the charge.
        let noise = match (&planned, cost) {
            (Planned::Gaussian { spec, bands }, Cost::Rho(rho)) => StreamNoise::Gaussian {
                figures: spec.figures(rho)?,
                bands: *bands,
            },
            (Planned::Laplace { spec }, Cost::Epsilon(epsilon)) => StreamNoise::Laplace {
                figures: spec.figures(epsilon)?,
            },
            _ => return Err(Error::Internal("a stream's noise and cost disagree".into())),
        };
        let label = format!(
            "stream of {} steps (epsilon {}{})",
            self.steps,
            self.budget.epsilon().get(),
            self.budget
                .delta()
                .map_or(String::new(), |d| format!(", delta {}", d.get()))
        );
        let io = |e: std::io::Error| Error::BadInput(format!("writing the running counts: {e}"));
        // The running counts go to a temporary beside `out` (created before
        // the charge: a failure here spends nothing) and are renamed into
        // place with their sidecar at the end, never written through a
        // link at `out`.
        let mut staged = crate::output::Staged::create(out)?;
        staged
            .write_all(b"step,time,query,answer,std_error,ci_low,ci_high\n")
            .map_err(io)?;
        let names: Vec<String> = (0..queries)
            .map(|q| {
                let mut s = String::new();
                labels.write(q, &mut s);
                s
            })
            .collect();
        // Each step's start as people write it: the calendar's date or
        // date-time, or the whole-number time.
        let times: Vec<String> = (0..self.steps)
            .map(|k| match &self.calendar {
                Some(c) => c.label(k as u64),
                None => (self.start + k as i64).to_string(),
            })
            .collect();
        // From the charge on the stream runs to its end, so that a budget
        // spent yields its running counts (a first signal says so, a
        // second abandons them).
        dp_core::interrupt::commit(|| -> Result<StreamSummary> {
            let (mut session, ledger_entry, charged) =
                charged_session(&self.ledger, cost, &label, || Ok(()))?;
            let mechanism = match (&planned, cost) {
                (Planned::Gaussian { spec, .. }, _) => {
                    Mechanism::Gaussian(session.stream(spec, Cost::Rho(charged.amount))?)
                }
                (Planned::Laplace { spec }, _) => {
                    Mechanism::Laplace(session.stream_tree(spec, cost)?)
                }
            };
            let mut running = Running {
                mechanism,
                counts: vec![0f64; queries],
            };
            // Every step's running counts, for the projection and the
            // report, and each step's half-width.
            let keep = marginals.is_some() || self.report.is_some();
            let mut history: Vec<f64> = Vec::new();
            let mut half_widths: Vec<f64> = Vec::new();
            let mut text = String::new();
            let mut number = ryu::Buffer::new();
            let steps = dp_core::progress::stage("steps", counts.steps() as u64);
            for (step, time) in times.iter().enumerate().take(counts.steps()) {
                steps.set(step as u64);
                let (values, se, half) = running.next(&counts)?;
                text.clear();
                for (q, r) in values.iter().enumerate() {
                    text.push_str(&step.to_string());
                    text.push(',');
                    text.push_str(time);
                    text.push(',');
                    crate::answers::push_csv_field(&mut text, &names[q]);
                    for value in [*r, se, *r - half, *r + half] {
                        text.push(',');
                        text.push_str(number.format(value));
                    }
                    text.push('\n');
                }
                staged.write_all(text.as_bytes()).map_err(io)?;
                if keep {
                    history.extend_from_slice(values);
                    half_widths.push(half);
                }
            }
            let summary = StreamSummary {
                noise,
                queries,
                ledger_entry,
                charged,
            };
            let mut sidecar = self.sidecar(&summary);
            let mut companions: Vec<(PathBuf, Vec<u8>)> = Vec::new();
            let mut projected: Option<Vec<f64>> = None;
            if let Some(tables) = &marginals {
                let scale = history.iter().fold(1.0, |m: f64, v| m.max(v.abs()));
                let cap = tables.running_iteration_cap(self.steps, NONNEG_ITERATIONS);
                let (estimate, how) =
                    tables.project_running(&history, self.steps, NONNEG_TOLERANCE * scale, cap);
                let mut text = String::from("step,time,query,answer\n");
                for (step, row) in estimate.chunks_exact(queries).enumerate() {
                    for (q, v) in row.iter().enumerate() {
                        text.push_str(&step.to_string());
                        text.push(',');
                        text.push_str(&times[step]);
                        text.push(',');
                        crate::answers::push_csv_field(&mut text, &names[q]);
                        text.push(',');
                        text.push_str(number.format(*v));
                        text.push('\n');
                    }
                }
                sidecar["nonneg"] = serde_json::json!({
                    "method": "Euclidean projection of the running counts onto those that are \
                               non-negative, non-decreasing in time and consistent across tables \
                               at every step (Dykstra's algorithm between the consistent tables \
                               and the pool-adjacent-violators fit): post-processing, no further \
                               budget; biased, so without standard errors",
                    "iterations": how.iterations,
                    "largest_adjustment": how.clipped,
                });
                companions.push((nonneg_path(out), text.into_bytes()));
                projected = Some(estimate);
            }
            if let Some(report) = &self.report {
                let status = crate::ledger::status(&self.ledger).ok();
                let html = crate::report::stream_html(
                    &sidecar,
                    status.as_ref(),
                    &crate::report::RunningCounts {
                        workload: &workload,
                        schema: &schema,
                        times: &times,
                        values: &history,
                        half_widths: &half_widths,
                        nonneg: projected.as_deref(),
                    },
                );
                companions.push((report.clone(), html.into_bytes()));
            }
            let sidecar = serde_json::to_string_pretty(&sidecar)
                .map_err(|e| Error::Internal(format!("the sidecar: {e}")))?;
            companions.push((crate::answers::sidecar_path(out), sidecar.into_bytes()));
            let companions: Vec<(&Path, &[u8])> = companions
                .iter()
                .map(|(p, b)| (p.as_path(), b.as_slice()))
                .collect();
            staged.commit_with(&companions)?;
            Ok(summary)
        })?
    }

    /// What the running counts are, how they were made and what was
    /// charged (nothing exact about the records).
    fn sidecar(&self, summary: &StreamSummary) -> serde_json::Value {
        let mut sidecar = serde_json::json!({
            "steps": self.steps,
            "start": self.start,
            "time": match &self.calendar {
                Some(c) => c.describe(),
                None => format!("whole numbers: step t is the time {} + t", self.start),
            },
            "time_column": self.time_column,
            "queries_per_step": summary.queries,
            "epsilon": self.budget.epsilon().get(),
            "delta": self.budget.delta().map(|d| d.get()),
            "charged": summary.charged.amount,
            "charged_unit": summary.charged.unit,
            "ledger": {"path": self.ledger.display().to_string(), "entry": summary.ledger_entry},
            "privacy_unit": match (&self.people.unit, self.people.steps) {
                (Some((column, k)), Some(b)) => serde_json::json!({
                    "column": column,
                    "max_records_per_unit": k,
                    "max_steps_per_unit": b.max_steps,
                    "min_separation": b.min_separation,
                    "bounding": "of each unit, at most max_steps_per_unit steps kept, pairwise \
                                 at least min_separation apart, and at most \
                                 max_records_per_unit records in each, chosen at random by the \
                                 kernel; the sensitivity is that of those participations",
                }),
                _ => serde_json::json!("one record: each record (one line after a CSV header, \
                                        one row of a table) is protected; a person with several \
                                        records is protected less"),
            },
        });
        let fields = match summary.noise {
            StreamNoise::Gaussian { figures: f, bands } => serde_json::json!({
                "mechanism": "running counts by a banded matrix factorization (DP-FTRL), \
                              discrete Gaussian noise on the kernel's grid",
                "bands": bands,
                "noise_sigma": f.sigma,
                "sensitivity": f.sensitivity,
                "sensitivity_norm": "L2",
                "sensitivity_exact": f.sensitivity_exact,
                "coefficient_bits": f.coefficient_bits,
                "rho": f.rho,
                "intervals": "answer ± 1.96·std_error: each running count's noise is a sum of \
                              discrete Gaussian draws, std_error its exact standard deviation",
            }),
            StreamNoise::Laplace { figures: f } => serde_json::json!({
                "mechanism": "running counts by the k-ary tree mechanism: each node of the \
                              tree over the steps measured once with discrete Laplace noise \
                              (pure ε), a running count the sum of the nodes of its step's \
                              base-k digits",
                "arity": f.arity,
                "levels": f.levels,
                "laplace_scale": f.scale,
                "sensitivity": f.sensitivity,
                "sensitivity_norm": "L1",
                "sensitivity_exact": f.sensitivity_exact,
                "intervals": "95% from each running count's noise law, a sum of D(n) discrete \
                              Laplace draws on the integers (D(n) the base-k digit sum of the \
                              steps n so far): one draw, its exact quantile; several, the \
                              95% point of the variance-gamma law with the sum's exact \
                              variance and fourth cumulant, rounded up to a whole number \
                              (the noise is an integer)",
            }),
        };
        if let (Some(all), serde_json::Value::Object(more)) = (sidecar.as_object_mut(), fields) {
            all.extend(more);
        }
        sidecar
    }
}

/// The workload's marginal tables and the total number of cells; a
/// product with a factor other than `identity` or `total` is refused.
fn tables(workload: &StructuredWorkload) -> Result<(Vec<Table>, usize)> {
    let mut tables = Vec::new();
    let mut cells = 0usize;
    for (_, factors) in workload.products() {
        let mut support = Vec::new();
        let mut size = 1usize;
        for (a, f) in factors.iter().enumerate() {
            if f.is_identity() {
                support.push(a);
                size = size.saturating_mul(f.num_queries());
            } else if !f.is_total() {
                return Err(Error::Workload(
                    "dpmm stream releases running counts of marginals: the workload may hold \
                     marginals and Kronecker products of identity and total only"
                        .into(),
                ));
            }
        }
        tables.push(Table { support });
        cells = cells.saturating_add(size);
        if cells > MAX_CELLS {
            return Err(Error::BadInput(format!(
                "the workload has more than {MAX_CELLS} cells per step"
            )));
        }
    }
    Ok((tables, cells))
}
