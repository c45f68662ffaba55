//! Releases: records in, private answers with error bars out (`dpmm
//! release`, [`Release::run`]).
//!
//! Order of operations, so that a refused or malformed release spends
//! nothing and writes nothing:
//!
//! 1. Validate everything that does not read the data: ε (and δ), the
//!    schema, the workload (its spec, or the one a `--plan` file carries)
//!    against the schema's domain, the plan (optimized now, or read from
//!    `--plan`, planning and the file's reading both sized first against
//!    `--max-memory`), the memory every later step will hold (count
//!    tables, measurement, reconstruction, answers: [`crate::resources`]),
//!    the quantized strategy, the reconstruction prepared from it (the
//!    workload must lie in the strategy's row space; an iterative solve is
//!    dry-run on data-independent values) and from it the figures reported
//!    (a plan file's own are checked against them, never echoed), the
//!    ledger (opened, locked, its hash chain verified, enough budget left).
//! 2. Aggregate the records (or the pre-aggregated table) into only the
//!    count tables the strategy reads; memory is those tables.
//! 3. Charge the ledger: written and fsync'ed under its lock.
//! 4. Measure through the privacy kernel (exact discrete noise, CKS20).
//! 5. Reconstruct by least squares with the strategy actually measured
//!    (the prepared reconstruction refuses any other), and every query's
//!    exact variance (post-processing).
//! 6. With an output path, write the answers and the JSON sidecar to
//!    temporary files, then rename them into place ([`crate::output`]:
//!    nothing is left behind on an error or a signal); the path is checked
//!    writable in step 1.
//!
//! Nothing exact about the data is printed, logged or written: not the
//! number of records, not the number of rows dropped.

use std::io::Read;
use std::path::{Path, PathBuf};

use dp_core::intervals::Interval;
use dp_core::ledger::{Ledger, LedgerBudget};
use dp_core::{
    Cost, MarginalStrategy, Measurement, MeasurementNoise, PrivacyBudget, PrivateMarginals,
};
use dp_opt::PrivacyModel;
use dp_plan::reconstruct::{
    Reconstruction, ReconstructionMethod, Reconstructor, VarianceMethod, reconstruct,
};
use dp_plan::resources::default_memory_limit;
use dp_plan::{PlanObjective, PlanOptions, plan_strategy};
use dp_workloads::domain::Domain;
use dp_workloads::spec::{load_spec, parse_spec};
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::{Layout, People, PrivateCounts, Rows, Schema, Source, aggregate_people};
use serde_json::json;

use crate::answers::{Answers, nonneg_path, sidecar_path};
use crate::nonneg::Marginals;
use crate::release_figures::{
    Figures, check_plan_file as check_plan_figures, group_rmse, recompute,
};
use crate::release_plan::Strategy;
use crate::resources::{Spinner, check_plan_file, release_need};
use crate::{Document, Error, Result};

/// The records a release reads.
pub enum Data {
    /// A records file: CSV with a header row, plain or gzip'ed, or
    /// Parquet (detected by content).
    Records(PathBuf),
    /// A pre-aggregated table (the schema's columns and a `count` column),
    /// CSV (plain or gzip'ed) or Parquet.
    CountsTable(PathBuf),
    /// CSV the caller streams in (records or a counts table, as `rows`
    /// says), named `name` in messages. It has no path, so an output
    /// cannot be checked against it: do not write the answers over it.
    Csv {
        /// The CSV bytes, plain or gzip'ed.
        reader: Box<dyn Read + Send>,
        /// What messages call it.
        name: String,
        /// Records, or a counts table.
        rows: Rows,
    },
    /// Arrow record batches the caller hands over (a DataFrame exported
    /// through the Arrow C stream interface, a Parquet reader, …): records
    /// or a counts table, as `rows` says, named `name` in messages.
    Arrow {
        /// The batches, all of the reader's schema.
        reader: Box<dyn dpmm_records::arrow::RecordBatchReader + Send>,
        /// What messages call it.
        name: String,
        /// Records, or a counts table.
        rows: Rows,
    },
}

impl Data {
    /// The file read, when the data is one.
    pub fn path(&self) -> Option<&PathBuf> {
        match self {
            Self::Records(p) | Self::CountsTable(p) => Some(p),
            Self::Csv { .. } | Self::Arrow { .. } => None,
        }
    }

    /// Whether a row stands for one record or a group of them.
    pub fn rows(&self) -> Rows {
        match self {
            Self::Records(_) => Rows::Records,
            Self::CountsTable(_) => Rows::CountsTable,
            Self::Csv { rows, .. } | Self::Arrow { rows, .. } => *rows,
        }
    }

    /// The records as a source ([`dpmm_records::Source`]); a file is
    /// read through `wrap` (a progress bar), when it is CSV.
    pub fn into_source(
        self,
        wrap: impl FnOnce(std::fs::File) -> Box<dyn Read + Send>,
    ) -> Result<Source<'static>> {
        Ok(match self {
            Self::Records(path) | Self::CountsTable(path) => {
                if dpmm_records::source::is_parquet(&path) {
                    Source::Parquet(path)
                } else {
                    let file = std::fs::File::open(&path)
                        .map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
                    Source::Csv {
                        reader: wrap(file),
                        name: path.display().to_string(),
                    }
                }
            }
            Self::Csv { reader, name, .. } => Source::Csv { reader, name },
            Self::Arrow { reader, name, .. } => Source::Arrow { reader, name },
        })
    }
}

/// A release asking for a report ([`crate::report`]) is refused, before
/// its charge, past this many answers: the page would pass 50 MB and no
/// longer open.
pub const MAX_REPORT_ANSWERS: f64 = 150_000.0;

/// A release: where everything is, and the privacy it spends.
///
/// Either `workload` (a spec: the strategy is planned now) or `plan` (a
/// plan file from [`crate::Plan::save`]) or both (the plan's strategy
/// answers the spec's queries).
#[derive(Debug, Clone)]
pub struct Release {
    /// The records schema (columns and public domains).
    pub schema: Document,
    /// The workload spec: the queries to answer, in this order.
    pub workload: Option<Document>,
    /// A plan file to measure instead of optimizing now.
    pub plan: Option<Document>,
    /// When planning now: the loss to minimize (default: total).
    pub objective: Option<PlanObjective>,
    /// ε, or (ε, δ), of this release.
    pub budget: PrivacyBudget,
    /// The ledger to charge.
    pub ledger: PathBuf,
    /// Where to write the answers, CSV or (named `*.parquet`) Parquet ([`crate::answers::AnswersFormat`]), and
    /// `<out>.json`, the sidecar; checked writable, and its format
    /// available, before anything is charged. `None`: the
    /// answers are only returned.
    pub out: Option<PathBuf>,
    /// The memory limit in bytes (`None`: half the physical memory).
    pub max_memory: Option<u64>,
    /// Show progress bars on stderr (only when it is a terminal).
    pub progress: bool,
    /// Also write the release's HTML report here ([`crate::report`]):
    /// checked writable before the charge, written after the answers.
    pub report: Option<PathBuf>,
    /// Also estimate non-negative, consistent tables from the same
    /// answers ([`crate::nonneg`]; post-processing, no further budget):
    /// [`Answers::nonneg`], and with `out` the file
    /// [`crate::answers::nonneg_path`]. Refused before the charge unless
    /// every product of the workload is a marginal.
    pub nonneg: bool,
    /// The privacy unit: its column, and the most records of one unit the
    /// kernel keeps (chosen at random). `None`: the unit is one record.
    pub privacy_unit: Option<(String, u32)>,
    /// Weights: their column, and the bound each is clipped to. `None`:
    /// each record counts one.
    pub weight: Option<(String, f64)>,
    /// Also write the measurement file here ([`crate::measurements`]: the
    /// noisy measurements and how they were made, publishable, from which
    /// `dpmm query` answers new queries at no cost): checked writable
    /// before the charge, written after the answers (a failure to write
    /// it then is a warning: the answers are kept).
    pub measurements: Option<PathBuf>,
}

/// Everything validated before the data is read.
pub(crate) struct Prepared {
    pub(crate) schema: Schema,
    pub(crate) workload: StructuredWorkload,
    pub(crate) strategy: Strategy,
    kernel_strategy: MarginalStrategy,
    /// The reconstruction prepared (and dry-run) before the charge.
    reconstructor: Reconstructor,
    /// The figures reported, recomputed from `kernel_strategy`.
    pub(crate) figures: Figures,
    layout: Layout,
    pub(crate) ledger: Ledger,
    pub(crate) cost: Cost,
    /// What the ledger is charged, in its unit.
    pub(crate) charge: f64,
    /// The measurement file to write, prepared before the charge.
    pub(crate) measurements: Option<crate::measurements::Draft>,
}

impl Prepared {
    /// The layout of the tables the strategy reads.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }
}

impl Release {
    /// A release of `budget` answering the workload spec at `workload`
    /// (planned now) from records read through `schema`, charged to
    /// `ledger`; the answers are returned, not written (set `out`).
    pub fn new(
        schema: impl Into<Document>,
        workload: impl Into<Document>,
        budget: PrivacyBudget,
        ledger: &Path,
    ) -> Self {
        Self {
            schema: schema.into(),
            workload: Some(workload.into()),
            plan: None,
            objective: None,
            budget,
            ledger: ledger.to_path_buf(),
            out: None,
            max_memory: None,
            progress: false,
            report: None,
            nonneg: false,
            privacy_unit: None,
            weight: None,
            measurements: None,
        }
    }

    /// Who the records are about: the privacy unit and weights, with the
    /// memory their bounding may hold (a quarter of the limit; beyond it,
    /// records spill to a private temporary directory).
    pub(crate) fn people(&self) -> People {
        let limit = self.max_memory.unwrap_or_else(default_memory_limit);
        People {
            unit: self.privacy_unit.clone(),
            weight: self.weight.clone(),
            memory: limit / 4,
            spill_dir: std::env::temp_dir(),
            steps: None,
        }
    }

    /// Runs the release on `data`: everything that can be refused is
    /// refused before the ledger is charged (a refusal spends nothing).
    /// With `out`, the answers and sidecar are written too.
    pub fn run(&self, data: Data) -> Result<Answers> {
        // Asked before the ledger is opened (which writes a head): a
        // missing head is reported once, so it goes back on every outcome.
        let warning = crate::ledger::head_warning(&self.ledger);
        match self.run_once(data) {
            Ok(mut answers) => {
                answers.warnings.extend(warning);
                Ok(answers)
            }
            Err(e) => Err(match warning {
                None => e,
                Some(w) => e.with_warning(&w),
            }),
        }
    }

    fn run_once(&self, data: Data) -> Result<Answers> {
        let inputs = self.inputs(data.path());
        let (p, nonneg) = self.checked(&inputs)?;
        let counts = self.aggregate(data, &p)?;
        self.measure(p, counts, inputs, nonneg)
    }

    /// Everything checked before the records are read: the plan, the
    /// budget, and the outputs, which must be writable before anything is
    /// charged (a release whose answers cannot be written would spend
    /// budget for nothing).
    pub(crate) fn checked(&self, inputs: &[PathBuf]) -> Result<(Prepared, Option<Marginals>)> {
        let mut p = self.prepare()?;
        let nonneg = self
            .nonneg
            .then(|| Marginals::of(&p.workload))
            .transpose()?;
        let queries = p.workload.num_queries();
        if self.report.is_some() && queries > MAX_REPORT_ANSWERS {
            return Err(Error::BadInput(format!(
                "--report: {queries} answers are more than one page can show (at most {})",
                MAX_REPORT_ANSWERS
            )));
        }
        if let Some(out) = &self.out {
            crate::answers::AnswersFormat::of(out)?;
        }
        let outputs = self.out.iter().flat_map(|out| {
            let mut paths = vec![out.clone(), sidecar_path(out)];
            paths.extend(self.nonneg.then(|| nonneg_path(out)));
            paths
        });
        let outputs: Vec<PathBuf> = outputs.chain(self.report.clone()).collect();
        for path in outputs.iter().chain(&self.measurements) {
            crate::output::check_output(path, inputs)?;
            crate::output::check_writable(path)?;
        }
        if let (Some(report), Some(out)) = (&self.report, &self.out)
            && (report == out || *report == sidecar_path(out))
        {
            return Err(Error::file(
                report,
                "is also the answers' or the sidecar's path",
            ));
        }
        if let Some(path) = &self.measurements {
            if outputs.contains(path) {
                return Err(Error::file(
                    path,
                    "is also the path of the answers, their sidecar, --nonneg's file or the report",
                ));
            }
            p.measurements = Some(crate::measurements::Draft::new(
                path,
                &self.schema,
                p.schema.domain(),
                &p.strategy.method,
                p.kernel_strategy.measured_strategy(),
            )?);
        }
        Ok((p, nonneg))
    }

    /// Measures the counts: charges, measures, reconstructs and writes.
    pub(crate) fn measure(
        &self,
        p: Prepared,
        counts: PrivateCounts,
        inputs: Vec<PathBuf>,
        nonneg: Option<Marginals>,
    ) -> Result<Answers> {
        let marginals = counts.into_kernel()?;
        let label = format!(
            "release {}(epsilon {}{})",
            self.out
                .as_ref()
                .map(|o| format!("{} ", o.display()))
                .unwrap_or_default(),
            self.budget.epsilon().get(),
            self.budget
                .delta()
                .map(|d| format!(", delta {}", d.get()))
                .unwrap_or_default()
        );
        // The last point at which an interrupt is honoured: from the
        // charge on, the release runs to its end so that a budget spent
        // always yields its answers.
        dp_core::interrupt::commit(|| {
            self.charge_and_measure(p, marginals, &label, inputs, nonneg.as_ref())
        })?
    }

    /// Charges the ledger, measures, reconstructs and writes the answers.
    fn charge_and_measure(
        &self,
        mut p: Prepared,
        marginals: PrivateMarginals,
        label: &str,
        inputs: Vec<PathBuf>,
        nonneg: Option<&Marginals>,
    ) -> Result<Answers> {
        // The durable charge precedes every draw (Ledger::open_session).
        let mut session = p.ledger.open_session(p.charge, label)?;
        let entry = p.ledger.entries().len() - 1;
        let m = session.measure_marginals(&p.kernel_strategy, &marginals, p.cost)?;
        drop(marginals);
        let spinner = self.spinner("reconstructing", true);
        let rec = spinner.show(|| {
            p.reconstructor
                .run(&p.workload, &m.strategy, &m.values, m.variance)
        });
        spinner.finish();
        let rec = rec?;
        let sidecar = sidecar(self, &p, &m, &rec, entry);
        let draft = p.measurements.take();
        let mut answers = Answers {
            workload: p.workload,
            schema: p.schema,
            reconstruction: rec,
            sidecar,
            entry,
            inputs,
            warnings: Vec::new(),
            nonneg: None,
            interval: Interval::new(m.noise, m.granularity),
            draw_variance: m.variance,
        };
        if let Some(tables) = nonneg {
            answers.estimate_nonneg(tables);
        }
        if let Some(out) = &self.out {
            answers.write(out)?;
        }
        if let Some(report) = &self.report {
            let html = answers.report_html(Some(&crate::ledger::Status::of_open(&p.ledger)));
            crate::output::write_atomically(report, html.as_bytes())?;
        }
        // Last, so that a file that cannot be written (a full disk) costs
        // the answers nothing: it is a warning, the values are gone with it.
        if let Some(draft) = draft {
            let unit = answers.sidecar["charged_unit"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let path = draft.path().display().to_string();
            if let Err(e) = draft.write(&m, self.budget, (p.charge, &unit), entry, &answers.sidecar)
            {
                answers.warnings.push(format!(
                    "the measurement file {path} could not be written ({e}); the answers were"
                ));
            }
        }
        Ok(answers)
    }

    fn prepare(&self) -> Result<Prepared> {
        let args = self;
        let cost = crate::privacy::cost(self.budget)?;
        let model = PrivacyModel::of(self.budget);
        let schema = match &args.schema {
            Document::File(path) => Schema::from_path(path)?,
            doc => Schema::from_json(&doc.read()?)
                .map_err(|e| Error::Schema(format!("{}: {e}", doc.name())))?,
        };
        let limit = args.max_memory.unwrap_or_else(default_memory_limit);
        // The workload a plan file carries, when another one is released.
        let mut planned_for = None;
        let (workload, strategy) = match &args.plan {
            Some(plan) => {
                check_plan_file(plan, limit)?;
                let (strategy, embedded) = Strategy::from_document(plan, Some(schema.domain()))?;
                let embedded = embedded.workload.map(|(w, _)| w);
                let workload = match (&args.workload, embedded) {
                    (Some(spec), embedded) => {
                        planned_for = embedded;
                        load_workload(spec, &schema)?
                    }
                    (None, Some(w)) => w,
                    (None, None) => {
                        return Err(Error::BadInput(format!(
                            "{}: the plan file carries no workload (plans from `cargo xtask plan` \
                         do not): give the workload spec with --workload",
                            plan.name()
                        )));
                    }
                };
                (workload, strategy)
            }
            None => {
                let spec = args.workload.as_ref().ok_or("give --workload or --plan")?;
                let workload = load_workload(spec, &schema)?;
                let options = PlanOptions {
                    objective: args.objective.unwrap_or_default(),
                    max_memory: Some(limit),
                    ..PlanOptions::default()
                };
                let spinner = if args.progress {
                    Spinner::start("planning")
                } else {
                    Spinner::hidden()
                };
                let plan = spinner.show(|| plan_strategy(&workload, model, &options));
                spinner.finish();
                (workload, Strategy::from_plan(&plan?))
            }
        };
        let buffered = match self.privacy_unit {
            Some(_) => self.people().memory,
            None => 0,
        };
        let ready = Ready::new(
            schema.domain(),
            &workload,
            &strategy,
            model,
            limit,
            buffered,
        )?;
        if let Some(plan) = &args.plan {
            let own = match &planned_for {
                None if args.workload.is_none() => Some(ready.figures.clone()),
                None => None,
                Some(w) => Some(ready.figures_on(w, &strategy, model)?),
            };
            check_plan_figures(
                &plan.name(),
                &strategy.figures,
                &ready.figures,
                own.as_ref(),
            )?;
        }
        let Ready {
            kernel_strategy,
            reconstructor,
            figures,
            layout,
            ..
        } = ready;
        let (ledger, charge) = crate::ledger::open_for(&args.ledger, cost, "this release")?;
        Ok(Prepared {
            schema,
            workload,
            strategy,
            kernel_strategy,
            reconstructor,
            figures,
            layout,
            ledger,
            cost,
            charge,
            measurements: None,
        })
    }
}

/// A strategy made ready to measure, before anything is spent: every
/// later step sized, the kernel's quantization of it built, its
/// reconstruction prepared and dry-run, its figures recomputed.
pub(crate) struct Ready {
    pub(crate) kernel_strategy: MarginalStrategy,
    pub(crate) reconstructor: Reconstructor,
    /// The dry run: the workload's variances at unit noise.
    pub(crate) dry: Reconstruction,
    pub(crate) figures: Figures,
    pub(crate) layout: Layout,
    /// The dry run's values (for [`Ready::figures_on`]).
    probe: Vec<f64>,
}

impl Ready {
    /// `strategy` made ready to answer `workload` on `domain` under
    /// `model`, within `limit` bytes, of which `buffered` go to the
    /// records bounded per privacy unit.
    pub(crate) fn new(
        domain: &Domain,
        workload: &StructuredWorkload,
        strategy: &Strategy,
        model: PrivacyModel,
        limit: u64,
        buffered: u64,
    ) -> Result<Self> {
        let layout = crate::resources::layout(domain, &strategy.tables(), limit)?;
        release_need(workload, strategy, &layout, buffered).check(limit)?;
        let kernel_strategy = MarginalStrategy::new(domain.shape(), &strategy.terms)?;
        // Dry run before anything is spent, with the same checks as the real
        // reconstruction (row space, sizes, and, on the conjugate-gradient
        // path, convergence): on values that depend on nothing private (a
        // fixed pseudo-random sequence in [-1, 1]), so that an iterative solve
        // has a nonzero right-hand side to converge on; all zeros would stop
        // at iteration 0 and leave a failing solve to after the charge.
        let rows = kernel_strategy.nrows();
        let mut probe: Vec<f64> = Vec::new();
        probe
            .try_reserve_exact(rows)
            .map_err(|_| format!("the dry run's {rows} values cannot be allocated"))?;
        probe.extend((0..rows).map(dp_plan::reconstruct::probe_value));
        let measured = kernel_strategy.measured_strategy();
        let reconstructor = Reconstructor::new(workload, measured)?;
        let dry = match reconstructor.unit_variances() {
            // Closed form: the variances need no values and nothing iterates.
            Some(variances) => Reconstruction {
                answers: Vec::new(),
                variances: variances.to_vec(),
                method: ReconstructionMethod::OrthogonalTerms,
                variance_method: VarianceMethod::Exact,
                fourth_powers: reconstructor.unit_fourth_powers().map(<[f64]>::to_vec),
                solver: None,
            },
            None => reconstructor.run(workload, measured, &probe, 1.0)?,
        };
        let figures = recompute(workload, &kernel_strategy, model, &strategy.figures, &dry)?;
        Ok(Self {
            kernel_strategy,
            reconstructor,
            dry,
            figures,
            layout,
            probe,
        })
    }

    /// The figures of the same measured strategy on another workload (the
    /// one a plan file was planned for).
    pub(crate) fn figures_on(
        &self,
        workload: &StructuredWorkload,
        strategy: &Strategy,
        model: PrivacyModel,
    ) -> Result<Figures> {
        let measured = self.kernel_strategy.measured_strategy();
        let dry = reconstruct(workload, measured, &self.probe, 1.0)?;
        recompute(
            workload,
            &self.kernel_strategy,
            model,
            &strategy.figures,
            &dry,
        )
    }
}

/// The workload spec `spec`, which must be on the schema's domain.
pub(crate) fn load_workload(spec: &Document, schema: &Schema) -> Result<StructuredWorkload> {
    let workload = match spec {
        Document::File(path) => load_spec(path),
        doc => parse_spec(&doc.read()?, doc.base()),
    }
    .map_err(|e| Error::Workload(e.to_string()))?;
    if workload.domain() != schema.domain() {
        return Err(Error::Workload(format!(
            "{}: its domain (names and sizes, in order) is not the schema's",
            spec.name()
        )));
    }
    Ok(workload)
}

/// A reader that moves the calling thread's innermost progress stage (a
/// [`dp_core::progress::share`]) to the bytes it has read.
struct Progress<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        dp_core::progress::advance(self.read);
        Ok(n)
    }
}

impl Release {
    /// A spinner on stderr when this release shows progress.
    fn spinner(&self, message: &'static str, charged: bool) -> Spinner {
        match (self.progress, charged) {
            (false, _) => Spinner::hidden(),
            (true, false) => Spinner::start(message),
            (true, true) => Spinner::charged(message),
        }
    }

    fn aggregate(&self, data: Data, p: &Prepared) -> Result<PrivateCounts> {
        let rows = data.rows();
        // The share of a CSV file read (a percentage: no count of records
        // or bytes is shown); a Parquet file's row groups are counted
        // where they are read; a stream's length is not known.
        let csv = data
            .path()
            .filter(|path| !dpmm_records::source::is_parquet(path))
            .and_then(|path| std::fs::metadata(path).ok());
        let spinner = self.spinner("reading the records", false);
        let counts = spinner.show(|| {
            let _read = csv.map(|m| dp_core::progress::share("read", m.len()));
            let source = data.into_source(|file| {
                Box::new(Progress {
                    inner: std::io::BufReader::with_capacity(1 << 20, file),
                    read: 0,
                })
            })?;
            Ok::<_, Error>(aggregate_people(
                source,
                &p.schema,
                &p.layout,
                rows,
                &self.people(),
            )?)
        });
        spinner.finish();
        counts
    }

    /// Every file this release reads or guards: the ledger and its head
    /// above all (renaming answers over them would erase the record of what
    /// was spent), the schema, spec, plan and records.
    pub(crate) fn inputs(&self, data: Option<&PathBuf>) -> Vec<PathBuf> {
        let mut inputs = vec![
            self.ledger.clone(),
            dp_core::ledger::head_path(&self.ledger),
        ];
        inputs.extend(data.cloned());
        let documents = [
            Some(&self.schema),
            self.workload.as_ref(),
            self.plan.as_ref(),
        ];
        inputs.extend(
            documents
                .into_iter()
                .flatten()
                .filter_map(|d| d.path().map(Path::to_path_buf)),
        );
        inputs
    }
}

/// The sidecar's `variances`: how the standard errors were computed.
pub(crate) fn variances_text(method: VarianceMethod) -> &'static str {
    match method {
        VarianceMethod::Exact => "exact",
        VarianceMethod::SingleTermBound => {
            "upper bounds (the best single strategy term's Gauss-Markov variance): \
             std_error and the intervals are conservative"
        }
    }
}

/// The sidecar: how the answers were made (nothing exact about the data).
fn sidecar(
    release: &Release,
    p: &Prepared,
    m: &Measurement,
    rec: &Reconstruction,
    entry: usize,
) -> serde_json::Value {
    let (noise, scale) = match m.noise {
        MeasurementNoise::DiscreteLaplace { scale } => ("discrete Laplace (CKS20, exact)", scale),
        MeasurementNoise::DiscreteGaussian { sigma } => ("discrete Gaussian (CKS20, exact)", sigma),
    };
    let rho = match p.cost {
        Cost::Rho(r) => Some(r),
        Cost::Epsilon(_) => None,
    };
    let unit = match p.ledger.budget() {
        LedgerBudget::PureDp { .. } => "epsilon",
        LedgerBudget::Zcdp { .. } => "rho (zCDP)",
    };
    let figures = &p.figures;
    json!({
        "mechanism": format!("matrix mechanism: {noise} noise on a structured strategy, least-squares reconstruction"),
        "noise": noise,
        "noise_scale": scale,
        "noise_variance_per_row": m.variance,
        "granularity": m.granularity,
        "sensitivity": m.sensitivity,
        "strategy_rows": m.values.len(),
        "epsilon": release.budget.epsilon().get(),
        "delta": release.budget.delta().map(|d| d.get()),
        "rho": rho,
        "charged": p.charge,
        "charged_unit": unit,
        "plan": {
            "method": p.strategy.method,
            "privacy": figures.privacy,
            "objective_name": figures.objective_name,
            "objective": figures.objective,
            "lower_bound": figures.lower_bound,
            "lower_bound_note": figures
                .lower_bound
                .and_then(|_| crate::plan::lower_bound_note(figures.privacy)),
            "duality_gap": figures.duality_gap,
            "figures": "recomputed from the strategy measured, on the queries answered; \
                        lower_bound only where it has a closed form (marginal workloads)",
        },
        "groups": group_rmse(&p.workload, rec),
        "reconstruction": rec.method,
        "variances": variances_text(rec.variance_method),
        "queries": rec.answers.len(),
        "intervals": Interval::new(m.noise, m.granularity).method(rec.fourth_powers.is_some()),
        "ledger": {"path": release.ledger.display().to_string(), "entry": entry},
        "privacy_unit": match &release.privacy_unit {
            None => json!("one record: each record (one line after a CSV header, one row of a table) is protected; a person with several records is protected less"),
            Some((column, k)) => json!({
                "column": column,
                "max_records_per_unit": k,
                "bounding": "at most this many records of each unit kept, chosen at random by the kernel; the sensitivity is multiplied by it",
            }),
        },
        "weights": release.weight.as_ref().map(|(column, w)| json!({
            "column": column,
            "max_weight": w,
            "grid": dp_core::kernel::records::Contributions { max_records_per_unit: None, max_weight: Some(*w), steps: None }.count_unit(),
            "rounding": "each weight clipped to [0, max_weight] and put on the grid by stochastic rounding (unbiased); the sensitivity is max_weight (rounded up to the grid) times the records per unit",
        })),
    })
}
