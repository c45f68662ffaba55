//! The measurement file of a release, and new queries answered from it
//! (`dpmm release --measurements`, `dpmm query`).
//!
//! A release measures `y = Ãx + z`: the strategy `Ã` the kernel quantized,
//! exact discrete noise `z`. Everything it publishes is computed from `y`
//! and public inputs, and so is every other linear query in the row space
//! of `Ã`: its least-squares estimate `w Ã⁺ y` is unbiased, with the exact
//! variance `v ‖w Ã⁺‖²` (`v` the noise variance of a row). The measurement
//! file holds `y`, `Ã` exactly as measured, the noise law and its grid,
//! what was charged, the schema and the domain, and nothing else: it is
//! post-processing of the release and may be published with it (docs/privacy.md).
//!
//! The file is Parquet: one row per strategy row, columns `term` (the
//! strategy term, `INT32`), `row` (the row within the term, row-major over
//! its factors' rows, `INT64`) and `value` (the noisy measurement in the
//! answers' units, `DOUBLE`, an exact multiple of the grid), and the rest
//! as JSON in the file's key-value metadata under [`MEASUREMENTS_KEY`]
//! (docs/formats.md). [`Measurements::answer`] reconstructs a workload
//! from it with the release's own code: the release's workload gets the
//! release's answers and standard errors again, and a query whose
//! attribute interaction was not measured is refused, naming it.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dp_core::intervals::Interval;
use dp_core::{
    Cost, DpError, MeasuredStrategy, MeasuredTerm, Measurement, MeasurementNoise, PrivacyBudget,
};
use dp_linalg::Mat;
use dp_plan::reconstruct::{Estimable, Reconstruction, Reconstructor};
use dp_plan::resources::reconstruction_need;
use dp_workloads::domain::Domain;
use dp_workloads::structured::{AttrSet, Factor, StructuredWorkload};
use dpmm_records::Schema;
use parquet::basic::Compression;
use parquet::data_type::{DoubleType, Int32Type, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::answers::Answers;
use crate::nonneg::Marginals;
use crate::release_figures::group_rmse;
use crate::{Document, Error, Result};

/// The key-value metadata key holding the file's JSON header.
pub const MEASUREMENTS_KEY: &str = "dpmm.measurements";

/// What the header's `format` says.
const FORMAT: &str = "dpmm measurements";

/// The header version this dpmm writes and reads.
const VERSION: u32 = 1;

/// The largest header written: Parquet readers cap one metadata string
/// (Arrow C++, and so pyarrow and DuckDB, at 10⁸ bytes by default).
pub const MAX_HEADER_BYTES: usize = 64 << 20;

/// What the header holds besides the strategy and the schema (the noise,
/// the privacy lines, the note), generously.
const HEADER_SLACK: usize = 64 << 10;

/// Rows per row group.
const GROUP_ROWS: usize = 1 << 20;

/// Most attribute sets examined when listing what a file can estimate,
/// or looking for the interaction a refused query missed.
const MAX_SETS_EXAMINED: usize = 4096;

/// The longest such a search runs.
const SEARCH_SECONDS: f64 = 5.0;

/// One attribute of the domain.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DomainAttribute {
    name: String,
    size: usize,
}

/// One strategy term: the attributes it reads and, per attribute, the
/// index of its factor in `matrices` (one 1×1 factor for a term on no
/// attribute).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TermHeader {
    support: Vec<String>,
    factors: Vec<usize>,
}

/// The strategy as measured: every entry an exact multiple of
/// `granularity`, the terms' weights folded into their first factors.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StrategyHeader {
    /// How the plan was made (`residual`, `kron-coa`, `plan file`, …).
    method: String,
    granularity: f64,
    /// Distinct factor matrices, row by row.
    matrices: Vec<Vec<Vec<f64>>>,
    terms: Vec<TermHeader>,
    rows: u64,
}

/// The noise every row received.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoiseHeader {
    /// `discrete Laplace` or `discrete Gaussian`.
    law: String,
    /// The Laplace scale or the Gaussian σ, in the answers' units.
    scale: f64,
    /// Every value is a multiple of it.
    granularity: f64,
    /// Each row's noise variance (exact for the discrete Laplace, an
    /// upper bound for the discrete Gaussian, as in the sidecar).
    variance_per_row: f64,
    /// Of the measured strategy: L1 for Laplace, L2 for Gaussian.
    sensitivity: f64,
}

/// What the release spent.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrivacyHeader {
    epsilon: f64,
    delta: Option<f64>,
    rho: Option<f64>,
    charged: f64,
    charged_unit: String,
    ledger_entry: usize,
    privacy_unit: Value,
    weights: Value,
}

/// The JSON header under [`MEASUREMENTS_KEY`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    written_by: String,
    note: String,
    /// The records schema as the release read it (public input).
    schema: Value,
    domain: Vec<DomainAttribute>,
    strategy: StrategyHeader,
    noise: NoiseHeader,
    privacy: PrivacyHeader,
}

/// What the header says of the file (its `note`).
const NOTE: &str = "The noisy measurements of a dpmm release and how they were made: \
    post-processing of the release, publishable with it. Answer new linear queries \
    with `dpmm query --measurements` or dpmatrix.Measurements.";

/// A measurement file prepared before the charge: its path checked and
/// everything in its header that does not depend on the draw.
pub(crate) struct Draft {
    path: PathBuf,
    schema: Value,
    domain: Vec<DomainAttribute>,
    strategy: StrategyHeader,
}

impl Draft {
    /// The measurement file of a release of `measured` (method `method`)
    /// on `schema`'s domain, to be written at `path`; refused when its
    /// header would pass [`MAX_HEADER_BYTES`].
    pub(crate) fn new(
        path: &Path,
        schema: &Document,
        domain: &Domain,
        method: &str,
        measured: &MeasuredStrategy,
    ) -> Result<Self> {
        let schema: Value = serde_json::from_str(&schema.read()?)
            .map_err(|e| Error::BadInput(format!("{}: {e}", schema.name())))?;
        let names: Vec<&str> = domain
            .attributes()
            .iter()
            .map(|a| a.name.as_str())
            .collect();
        let mut matrices: Vec<Vec<Vec<f64>>> = Vec::new();
        let mut seen: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut terms = Vec::with_capacity(measured.terms.len());
        let mut rows = 0u64;
        for t in &measured.terms {
            let mut factors = Vec::with_capacity(t.factors.len());
            for f in &t.factors {
                let mut key = vec![f.nrows() as u64, f.ncols() as u64];
                key.extend(
                    (0..f.nrows())
                        .flat_map(|i| (0..f.ncols()).map(move |j| (i, j)))
                        .map(|(i, j)| f[(i, j)].to_bits()),
                );
                let next = matrices.len();
                let k = *seen.entry(key).or_insert(next);
                if k == next {
                    matrices.push(
                        (0..f.nrows())
                            .map(|i| (0..f.ncols()).map(|j| f[(i, j)]).collect())
                            .collect(),
                    );
                }
                factors.push(k);
            }
            rows += t.factors.iter().map(|f| f.nrows() as u64).product::<u64>();
            terms.push(TermHeader {
                support: t.support.iter().map(|&p| names[p].to_string()).collect(),
                factors,
            });
        }
        let draft = Self {
            path: path.to_path_buf(),
            schema,
            domain: domain
                .attributes()
                .iter()
                .map(|a| DomainAttribute {
                    name: a.name.clone(),
                    size: a.size,
                })
                .collect(),
            strategy: StrategyHeader {
                method: method.to_string(),
                granularity: measured.granularity,
                matrices,
                terms,
                rows,
            },
        };
        let bytes = serde_json::to_string(&draft.strategy)
            .map_err(|e| Error::Internal(e.to_string()))?
            .len()
            + draft.schema.to_string().len()
            + HEADER_SLACK;
        if bytes > MAX_HEADER_BYTES {
            return Err(Error::BadInput(format!(
                "{}: the measured strategy's factors would take {bytes} bytes of the file's \
                 metadata, more than Parquet readers accept (at most {MAX_HEADER_BYTES})",
                path.display()
            )));
        }
        Ok(draft)
    }

    /// Where the file goes.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the file of measurement `m` (atomically: whole or absent).
    pub(crate) fn write(
        self,
        m: &Measurement,
        budget: PrivacyBudget,
        charged: (f64, &str),
        ledger_entry: usize,
        sidecar: &Value,
    ) -> Result<()> {
        let (law, scale) = match m.noise {
            MeasurementNoise::DiscreteLaplace { scale } => ("discrete Laplace", scale),
            MeasurementNoise::DiscreteGaussian { sigma } => ("discrete Gaussian", sigma),
        };
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            written_by: format!("dpmm {}", env!("CARGO_PKG_VERSION")),
            note: NOTE.into(),
            schema: self.schema,
            domain: self.domain,
            strategy: self.strategy,
            noise: NoiseHeader {
                law: law.into(),
                scale,
                granularity: m.granularity,
                variance_per_row: m.variance,
                sensitivity: m.sensitivity,
            },
            privacy: PrivacyHeader {
                epsilon: budget.epsilon().get(),
                delta: budget.delta().map(|d| d.get()),
                rho: match m.cost {
                    Cost::Rho(r) => Some(r),
                    Cost::Epsilon(_) => None,
                },
                charged: charged.0,
                charged_unit: charged.1.into(),
                ledger_entry,
                privacy_unit: sidecar.get("privacy_unit").cloned().unwrap_or(Value::Null),
                weights: sidecar.get("weights").cloned().unwrap_or(Value::Null),
            },
        };
        let text = serde_json::to_string(&header).map_err(|e| Error::Internal(e.to_string()))?;
        let rows: Vec<usize> = m.strategy.terms.iter().map(term_rows).collect();
        let bytes =
            parquet_bytes(&text, &rows, &m.values).map_err(|e| Error::file(&self.path, e))?;
        crate::output::write_atomically(&self.path, &bytes)
    }
}

fn term_rows(t: &MeasuredTerm) -> usize {
    t.factors.iter().map(Mat::nrows).product()
}

/// The Parquet file: `term`, `row`, `value`, the header in the metadata.
fn parquet_bytes(header: &str, term_rows: &[usize], values: &[f64]) -> std::io::Result<Vec<u8>> {
    let io = |e: parquet::errors::ParquetError| std::io::Error::other(e.to_string());
    let schema = Arc::new(
        parse_message_type(
            "message measurements { REQUIRED INT32 term; REQUIRED INT64 row; REQUIRED DOUBLE value; }",
        )
        .map_err(io)?,
    );
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            MEASUREMENTS_KEY.to_string(),
            header.to_string(),
        )]))
        .build();
    let mut out = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut out, schema, Arc::new(props)).map_err(io)?;
    // (term, row) of every strategy row, in order.
    let mut index = term_rows
        .iter()
        .enumerate()
        .flat_map(|(t, &n)| (0..n).map(move |r| (t as i32, r as i64)));
    for chunk in values.chunks(GROUP_ROWS) {
        let (terms, rows): (Vec<i32>, Vec<i64>) = index.by_ref().take(chunk.len()).unzip();
        let mut group = writer.next_row_group().map_err(io)?;
        if let Some(mut c) = group.next_column().map_err(io)? {
            c.typed::<Int32Type>()
                .write_batch(&terms, None, None)
                .map_err(io)?;
            c.close().map_err(io)?;
        }
        if let Some(mut c) = group.next_column().map_err(io)? {
            c.typed::<Int64Type>()
                .write_batch(&rows, None, None)
                .map_err(io)?;
            c.close().map_err(io)?;
        }
        if let Some(mut c) = group.next_column().map_err(io)? {
            c.typed::<DoubleType>()
                .write_batch(chunk, None, None)
                .map_err(io)?;
            c.close().map_err(io)?;
        }
        group.close().map_err(io)?;
    }
    writer.close().map_err(io)?;
    Ok(out)
}

/// A release's measurement file, read and checked: answers any linear
/// query in the row space of the strategy it measured, spending nothing.
pub struct Measurements {
    path: PathBuf,
    header: Header,
    schema: Schema,
    strategy: MeasuredStrategy,
    values: Vec<f64>,
    noise: MeasurementNoise,
}

/// How [`Measurements::answer_with`] answers.
#[derive(Debug, Clone, Default)]
pub struct AnswerOptions {
    /// Also estimate non-negative consistent tables ([`crate::nonneg`];
    /// every product of the workload must be a marginal).
    pub nonneg: bool,
    /// The memory limit in bytes (`None`: half the physical memory).
    pub max_memory: Option<u64>,
}

impl Measurements {
    /// Reads the measurement file at `path` (written by a release's
    /// `measurements`), checking that it is whole and consistent: the
    /// header's schema, domain and strategy, and one value per strategy
    /// row in order, each finite.
    pub fn load(path: &Path) -> Result<Self> {
        let bad = |why: String| Error::BadInput(format!("{}: {why}", path.display()));
        let file = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
        let reader = SerializedFileReader::new(file)
            .map_err(|e| bad(format!("not a Parquet file ({e})")))?;
        let meta = reader.metadata();
        let text = meta
            .file_metadata()
            .key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == MEASUREMENTS_KEY))
            .and_then(|k| k.value.clone())
            .ok_or_else(|| {
                bad(format!(
                    "has no '{MEASUREMENTS_KEY}' metadata: not a dpmm measurement file"
                ))
            })?;
        let header: Header = serde_json::from_str(&text)
            .map_err(|e| bad(format!("its '{MEASUREMENTS_KEY}' metadata: {e}")))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(bad(format!(
                "format '{}' version {} (this dpmm reads '{FORMAT}' version {VERSION})",
                header.format, header.version
            )));
        }
        let schema = Schema::from_json(&header.schema.to_string())
            .map_err(|e| bad(format!("its schema: {e}")))?;
        let attrs = schema.domain().attributes();
        let same = attrs.len() == header.domain.len()
            && attrs
                .iter()
                .zip(&header.domain)
                .all(|(a, d)| a.name == d.name && a.size == d.size);
        if !same {
            return Err(bad("its domain is not its schema's".into()));
        }
        let strategy = strategy_of(&header.strategy, schema.domain()).map_err(bad)?;
        let noise = noise_of(&header.noise).map_err(bad)?;
        crate::privacy::budget(header.privacy.epsilon, header.privacy.delta)
            .map_err(|e| bad(format!("its privacy: {e}")))?;
        let rows: Vec<usize> = strategy.terms.iter().map(term_rows).collect();
        let total: usize = rows.iter().sum();
        if total as u64 != header.strategy.rows {
            return Err(bad("its strategy's rows are not the header's".into()));
        }
        let values = read_values(&reader, &rows, header.noise.granularity).map_err(bad)?;
        Ok(Self {
            path: path.to_path_buf(),
            header,
            schema,
            strategy,
            values,
            noise,
        })
    }

    /// The records schema of the release (its domain is the file's).
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The budget of the release that measured them.
    pub fn budget(&self) -> Result<PrivacyBudget> {
        crate::privacy::budget(self.header.privacy.epsilon, self.header.privacy.delta)
    }

    /// The noisy measurements, one per strategy row, in the answers' units.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The strategy exactly as measured.
    pub fn strategy(&self) -> &MeasuredStrategy {
        &self.strategy
    }

    /// The variance of each row's noise (exact for the discrete Laplace,
    /// an upper bound for the discrete Gaussian).
    pub fn noise_variance(&self) -> f64 {
        self.header.noise.variance_per_row
    }

    /// The number of noisy measurements (strategy rows).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none (never, for a file that loads).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Answers the workload spec `workload` (on the file's domain).
    pub fn answer(&self, workload: impl Into<Document>) -> Result<Answers> {
        self.answer_with(workload, &AnswerOptions::default())
    }

    /// Answers the workload spec `workload` by least squares from the
    /// measurements, with every query's exact variance and 95% interval
    /// made as the release makes them. Refused, before anything is
    /// computed past the checks, when the workload is not on the file's
    /// domain, needs more memory than the limit, or has a query outside
    /// the row space of the strategy (the message names the attribute
    /// interaction that was not measured).
    pub fn answer_with(
        &self,
        workload: impl Into<Document>,
        options: &AnswerOptions,
    ) -> Result<Answers> {
        let spec: Document = workload.into();
        let workload = crate::release::load_workload(&spec, &self.schema)?;
        let nonneg = options
            .nonneg
            .then(|| Marginals::of(&workload))
            .transpose()?;
        let shapes: Vec<dp_plan::resources::TermShape> = self
            .strategy
            .terms
            .iter()
            .filter(|t| !t.support.is_empty())
            .map(|t| {
                (
                    t.support.clone(),
                    t.factors.iter().map(Mat::nrows).collect(),
                )
            })
            .collect();
        let limit = options
            .max_memory
            .unwrap_or_else(dp_plan::resources::default_memory_limit);
        reconstruction_need(&workload, &shapes).check(limit)?;
        let rec = Reconstructor::new(&workload, &self.strategy).and_then(|r| {
            r.run(
                &workload,
                &self.strategy,
                &self.values,
                self.header.noise.variance_per_row,
            )
        });
        let rec = match rec {
            Ok(rec) => rec,
            Err(DpError::NotEstimable(why)) => {
                return Err(self.not_measured(&workload, &spec).unwrap_or_else(|| {
                    Error::Workload(format!(
                        "{}: {why} (the strategy measured in {})",
                        spec.name(),
                        self.path.display()
                    ))
                }));
            }
            // A file that loads but cannot be solved was not written by a
            // release (whose reconstruction was dry-run before its charge).
            Err(e @ (DpError::Linalg(_) | DpError::NotConverged { .. })) => {
                return Err(Error::BadInput(format!(
                    "{}: its strategy and values cannot be reconstructed ({e})",
                    self.path.display()
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if rec
            .answers
            .iter()
            .chain(&rec.variances)
            .any(|v| !v.is_finite())
        {
            return Err(Error::BadInput(format!(
                "{}: its values give answers that are not finite: it is not a release's file",
                self.path.display()
            )));
        }
        let sidecar = self.sidecar(&workload, &rec);
        let mut answers = Answers {
            workload,
            schema: self.schema.clone(),
            reconstruction: rec,
            sidecar,
            entry: self.header.privacy.ledger_entry,
            inputs: [Some(self.path.clone()), spec.path().map(Path::to_path_buf)]
                .into_iter()
                .flatten()
                .collect(),
            warnings: Vec::new(),
            nonneg: None,
            interval: Interval::new(self.noise, self.header.noise.granularity),
            draw_variance: self.header.noise.variance_per_row,
        };
        if let Some(tables) = &nonneg {
            answers.estimate_nonneg(tables);
        }
        Ok(answers)
    }

    /// Checks, before anything is computed, the files a query would
    /// write: `out` (and its sidecar, and with `nonneg` the non-negative
    /// tables' file) and `report`, each writable, none a directory, this
    /// measurement file or `workload`, and none the same as another.
    pub fn check_outputs(
        &self,
        workload: Option<&Path>,
        out: Option<&Path>,
        nonneg: bool,
        report: Option<&Path>,
    ) -> Result<()> {
        let inputs: Vec<PathBuf> = std::iter::once(self.path.clone())
            .chain(workload.map(Path::to_path_buf))
            .collect();
        let mut outputs: Vec<PathBuf> = Vec::new();
        if let Some(out) = out {
            outputs.extend([out.to_path_buf(), crate::answers::sidecar_path(out)]);
            if nonneg {
                outputs.push(crate::answers::nonneg_path(out));
            }
        }
        if let Some(report) = report {
            if outputs.iter().any(|o| o == report) {
                return Err(Error::file(
                    report,
                    "is also the answers', the sidecar's or the non-negative tables' path",
                ));
            }
            outputs.push(report.to_path_buf());
        }
        for path in &outputs {
            crate::output::check_output(path, &inputs)?;
            crate::output::check_writable(path)?;
        }
        Ok(())
    }

    /// Writes `answers` (from [`Measurements::answer_with`]) to `out` as
    /// a release writes them, and their HTML page to `report`; the page is
    /// refused, before anything is written, past
    /// [`crate::release::MAX_REPORT_ANSWERS`] answers.
    pub fn write(answers: &Answers, out: Option<&Path>, report: Option<&Path>) -> Result<()> {
        let queries = answers.len() as f64;
        if report.is_some() && queries > crate::release::MAX_REPORT_ANSWERS {
            return Err(Error::BadInput(format!(
                "--report: {queries} answers are more than one page can show (at most {})",
                crate::release::MAX_REPORT_ANSWERS
            )));
        }
        // Once begun, the files are all written: an interrupt that came
        // first writes none of them (and a caller that found the work not
        // committed may stop waiting for it).
        dp_core::interrupt::commit(|| {
            if let Some(out) = out {
                answers.write(out)?;
            }
            if let Some(report) = report {
                crate::output::write_atomically(report, answers.report_html(None).as_bytes())?;
            }
            Ok(())
        })?
    }

    /// The most specific marginals the file can answer, each as its
    /// attribute names in domain order (`[]`: the total alone): every
    /// marginal on a subset of one of them is estimable too, and no other
    /// marginal is.
    pub fn estimable(&self) -> Result<Vec<Vec<String>>> {
        let sets = self.estimable_sets()?;
        Ok(sets.iter().map(|s| self.names(s)).collect())
    }

    /// The attributes of one value.
    fn singletons(&self) -> Vec<usize> {
        let attrs = self.schema.domain().attributes();
        (0..attrs.len()).filter(|&i| attrs[i].size == 1).collect()
    }

    fn names(&self, set: &AttrSet) -> Vec<String> {
        let attrs = self.schema.domain().attributes();
        set.members().map(|i| attrs[i].name.clone()).collect()
    }

    /// The maximal estimable attribute sets: from the terms' maximal
    /// supports down, a set kept when its marginal is estimable, else its
    /// subsets one attribute smaller examined (a marginal is estimable
    /// only inside some term's support).
    fn estimable_sets(&self) -> Result<Vec<AttrSet>> {
        let check = Estimable::new(&self.strategy, self.schema.domain())?;
        let started = std::time::Instant::now();
        // An attribute of one value is summed out by its own marginal:
        // every set may hold it.
        let single: Vec<usize> = self.singletons();
        let supports: BTreeSet<Vec<usize>> = self
            .strategy
            .terms
            .iter()
            .map(|t| {
                let mut s: BTreeSet<usize> = t.support.iter().copied().collect();
                s.extend(&single);
                s.into_iter().collect()
            })
            .collect();
        let mut queue: VecDeque<AttrSet> = supports
            .iter()
            .filter(|s| {
                !supports
                    .iter()
                    .any(|o| o.len() > s.len() && s.iter().all(|a| o.contains(a)))
            })
            .map(|s| AttrSet::from_members(s.iter().copied()))
            .collect();
        let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
        let mut found: Vec<AttrSet> = Vec::new();
        while let Some(set) = queue.pop_front() {
            let members: Vec<usize> = set.members().collect();
            if !seen.insert(members.clone()) || found.iter().any(|f| is_subset(&set, f)) {
                continue;
            }
            if seen.len() > MAX_SETS_EXAMINED || started.elapsed().as_secs_f64() > SEARCH_SECONDS {
                return Err(Error::BadInput(format!(
                    "{}: listing what the measurements can estimate would examine more than \
                     {} attribute sets or take more than {SEARCH_SECONDS} s; ask for the \
                     marginals you need with a workload instead",
                    self.path.display(),
                    seen.len() - 1
                )));
            }
            if check.marginal(&set)? {
                found.push(set);
            } else {
                queue.extend(members.iter().map(|&a| set.without(a)));
            }
        }
        // Breadth first from the largest sets: a set found later may lie
        // inside one found earlier, never the reverse; keep the maximal ones.
        let maximal: Vec<AttrSet> = found
            .iter()
            .filter(|s| !found.iter().any(|o| o.len() > s.len() && is_subset(s, o)))
            .cloned()
            .collect();
        Ok(maximal)
    }

    /// The refusal of a workload one of whose products reads an attribute
    /// interaction the strategy did not measure: the smallest such set of
    /// attributes, and what was measured. `None` when every product's
    /// marginal is estimable (the row space is then missed otherwise).
    fn not_measured(&self, workload: &StructuredWorkload, spec: &Document) -> Option<Error> {
        let check = Estimable::new(&self.strategy, self.schema.domain()).ok()?;
        let single = self.singletons();
        let mut missing: Option<AttrSet> = None;
        for (_, factors) in workload.products() {
            let free: Vec<usize> = factors
                .iter()
                .enumerate()
                .filter(|(i, f)| !matches!(f, Factor::Total(_)) && !single.contains(i))
                .map(|(i, _)| i)
                .collect();
            let set = AttrSet::from_members(free.iter().copied());
            if check.marginal(&set).ok()? {
                continue;
            }
            // The smallest subset not estimable (the sets that are form a
            // down-set, so one exists among the subsets of `set`).
            missing = Some(smallest_missing(&check, &free).unwrap_or(set));
            break;
        }
        let missing = missing?;
        let measured = self.estimable_sets().ok()?;
        if measured.is_empty() {
            return Some(Error::Workload(format!(
                "{}: the strategy measured in {} estimates no marginal, not even the total",
                spec.name(),
                self.path.display()
            )));
        }
        let shown: Vec<String> = measured
            .iter()
            .take(12)
            .map(|s| join(&self.names(s)))
            .collect();
        let more = measured.len().saturating_sub(shown.len());
        Some(Error::Workload(format!(
            "{}: {} was not measured, so it cannot be estimated without bias; measured: {}{}",
            spec.name(),
            if missing.is_empty() {
                "the total".to_string()
            } else {
                format!("the interaction of {}", join(&self.names(&missing)))
            },
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more (`dpmm query --list`)")
            } else {
                String::new()
            }
        )))
    }

    /// The sidecar of answers from the file: the release's mechanism and
    /// privacy, nothing charged now.
    fn sidecar(&self, workload: &StructuredWorkload, rec: &Reconstruction) -> Value {
        let h = &self.header;
        let p = &h.privacy;
        json!({
            "mechanism": format!(
                "matrix mechanism: {} noise (CKS20, exact) on a structured strategy, \
                 least-squares reconstruction from a release's measurement file",
                h.noise.law
            ),
            "measurements": {
                "path": self.path.display().to_string(),
                "written_by": h.written_by,
                "release_charged": p.charged,
                "release_ledger_entry": p.ledger_entry,
                "spent_by_this_query": 0.0,
            },
            "noise": format!("{} (CKS20, exact)", h.noise.law),
            "noise_scale": h.noise.scale,
            "noise_variance_per_row": h.noise.variance_per_row,
            "granularity": h.noise.granularity,
            "sensitivity": h.noise.sensitivity,
            "strategy_rows": self.values.len(),
            "epsilon": p.epsilon,
            "delta": p.delta,
            "rho": p.rho,
            "charged": 0.0,
            "charged_unit": p.charged_unit,
            "plan": {
                "method": h.strategy.method,
                "figures": "of the release's plan, in its sidecar; the RMSE per query group \
                            below is of these queries",
            },
            "groups": group_rmse(workload, rec),
            "reconstruction": rec.method,
            "variances": crate::release::variances_text(rec.variance_method),
            "queries": rec.answers.len(),
            "intervals": Interval::new(self.noise, h.noise.granularity)
                .method(rec.fourth_powers.is_some()),
            "ledger": Value::Null,
            "privacy_unit": p.privacy_unit,
            "weights": p.weights,
        })
    }
}

fn is_subset(a: &AttrSet, b: &AttrSet) -> bool {
    a.members().all(|i| b.contains(i))
}

fn join(names: &[String]) -> String {
    if names.is_empty() {
        "the total".into()
    } else {
        names.join(" × ")
    }
}

/// The smallest subset of `free` whose marginal is not estimable, by
/// increasing size, the empty set (the total) first (`None` past 12
/// attributes: then `free` itself).
fn smallest_missing(check: &Estimable<'_>, free: &[usize]) -> Option<AttrSet> {
    if free.len() > 12 {
        return None;
    }
    let mut masks: Vec<u32> = (0u32..(1 << free.len())).collect();
    masks.sort_by_key(|m| m.count_ones());
    masks.into_iter().find_map(|m| {
        let set = AttrSet::from_members(
            (0..free.len())
                .filter(|b| m & (1 << b) != 0)
                .map(|b| free[b]),
        );
        matches!(check.marginal(&set), Ok(false)).then_some(set)
    })
}

/// The measured strategy the header describes, checked against `domain`.
fn strategy_of(
    h: &StrategyHeader,
    domain: &Domain,
) -> std::result::Result<MeasuredStrategy, String> {
    if !(h.granularity.is_finite() && h.granularity > 0.0) {
        return Err(format!("strategy granularity {}", h.granularity));
    }
    let mut matrices = Vec::with_capacity(h.matrices.len());
    for (k, rows) in h.matrices.iter().enumerate() {
        let cols = rows.first().map_or(0, Vec::len);
        if cols == 0
            || rows
                .iter()
                .any(|r| r.len() != cols || r.iter().any(|v| !v.is_finite()))
        {
            return Err(format!(
                "strategy matrix {k} is empty, ragged or not finite"
            ));
        }
        matrices.push(Mat::from_fn(rows.len(), cols, |i, j| rows[i][j]));
    }
    if h.terms.is_empty() {
        return Err("the strategy has no terms".into());
    }
    let mut terms = Vec::with_capacity(h.terms.len());
    for (t, term) in h.terms.iter().enumerate() {
        let support = term
            .support
            .iter()
            .map(|n| {
                domain
                    .position(n)
                    .map_err(|e| format!("strategy term {t}: {e}"))
            })
            .collect::<std::result::Result<Vec<usize>, String>>()?;
        let factors = term
            .factors
            .iter()
            .map(|&k| {
                matrices
                    .get(k)
                    .cloned()
                    .ok_or_else(|| format!("strategy term {t} names matrix {k}"))
            })
            .collect::<std::result::Result<Vec<Mat<f64>>, String>>()?;
        terms.push(MeasuredTerm { support, factors });
    }
    let strategy = MeasuredStrategy {
        terms,
        granularity: h.granularity,
    };
    // The reconstruction's own check: increasing supports, factor shapes.
    Estimable::new(&strategy, domain).map_err(|e| e.to_string())?;
    Ok(strategy)
}

fn noise_of(h: &NoiseHeader) -> std::result::Result<MeasurementNoise, String> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !(positive(h.scale)
        && positive(h.granularity)
        && positive(h.variance_per_row)
        && positive(h.sensitivity))
    {
        return Err(
            "the noise's scale, granularity, variance and sensitivity must be positive and finite"
                .into(),
        );
    }
    if h.granularity != 2f64.powi(h.granularity.log2().round() as i32) {
        return Err(format!(
            "the noise's grid {} is not a power of two",
            h.granularity
        ));
    }
    let (noise, variance) = match h.law.as_str() {
        "discrete Laplace" => {
            // On the grid: the discrete Laplace of scale `scale / G`.
            let t = h.scale / h.granularity;
            let variance = dp_core::kernel::discrete_laplace_variance(t) * h.granularity.powi(2);
            (
                MeasurementNoise::DiscreteLaplace { scale: h.scale },
                variance,
            )
        }
        "discrete Gaussian" => (
            MeasurementNoise::DiscreteGaussian { sigma: h.scale },
            h.scale * h.scale,
        ),
        other => {
            return Err(format!(
                "noise law '{other}' (this dpmm reads 'discrete Laplace' and 'discrete Gaussian')"
            ));
        }
    };
    let off = (h.variance_per_row - variance).abs();
    if off.is_nan() || off > 1e-9 * variance {
        return Err(format!(
            "the noise's variance per row {} is not that of its law and scale ({variance})",
            h.variance_per_row
        ));
    }
    Ok(noise)
}

/// The `value` column, checked: the columns are `term`, `row`, `value`,
/// and the rows are every strategy row once, in order.
fn read_values(
    reader: &SerializedFileReader<std::fs::File>,
    term_rows: &[usize],
    granularity: f64,
) -> std::result::Result<Vec<f64>, String> {
    use parquet::column::reader::get_typed_column_reader;
    let io = |e: parquet::errors::ParquetError| format!("unreadable ({e})");
    let schema = reader.metadata().file_metadata().schema_descr();
    let names: Vec<&str> = schema.columns().iter().map(|c| c.name()).collect();
    if names != ["term", "row", "value"] {
        return Err(format!("its columns are {names:?}, not term, row, value"));
    }
    use parquet::basic::Type;
    for (c, want) in schema
        .columns()
        .iter()
        .zip([Type::INT32, Type::INT64, Type::DOUBLE])
    {
        if c.physical_type() != want || c.max_rep_level() > 0 {
            return Err(format!(
                "its column {} is {} where the format has {want}",
                c.name(),
                c.physical_type()
            ));
        }
    }
    // Optional columns (a rewrite by pyarrow or DuckDB makes them so) are
    // read with their definition levels; a null is refused.
    let nullable: Vec<bool> = schema
        .columns()
        .iter()
        .map(|c| c.max_def_level() > 0)
        .collect();
    let total: usize = term_rows.iter().sum();
    let mut values: Vec<f64> = Vec::new();
    values
        .try_reserve_exact(total)
        .map_err(|_| format!("{total} values cannot be allocated"))?;
    let mut expected = term_rows
        .iter()
        .enumerate()
        .flat_map(|(t, &n)| (0..n).map(move |r| (t as i32, r as i64)));
    for g in 0..reader.num_row_groups() {
        let group = reader.get_row_group(g).map_err(io)?;
        let n = usize::try_from(group.metadata().num_rows()).map_err(|_| "a negative row count")?;
        if values.len() + n > total {
            return Err(format!("more than the strategy's {total} rows"));
        }
        let (mut terms, mut rows, mut vals) = (Vec::new(), Vec::new(), Vec::new());
        let read = |i: usize| group.get_column_reader(i).map_err(io);
        let (mut l0, mut l1, mut l2) = (Vec::new(), Vec::new(), Vec::new());
        get_typed_column_reader::<Int32Type>(read(0)?)
            .read_records(n, nullable[0].then_some(&mut l0), None, &mut terms)
            .map_err(|e| format!("column term: {}", io(e)))?;
        get_typed_column_reader::<Int64Type>(read(1)?)
            .read_records(n, nullable[1].then_some(&mut l1), None, &mut rows)
            .map_err(|e| format!("column row: {}", io(e)))?;
        get_typed_column_reader::<DoubleType>(read(2)?)
            .read_records(n, nullable[2].then_some(&mut l2), None, &mut vals)
            .map_err(|e| format!("column value: {}", io(e)))?;
        if terms.len() != n || rows.len() != n || vals.len() != n {
            return Err("a row group's columns are not whole (or hold a null)".into());
        }
        for ((t, r), v) in terms.iter().zip(&rows).zip(&vals) {
            if expected.next() != Some((*t, *r)) {
                return Err(format!(
                    "row {} is (term {t}, row {r}): the rows must be every strategy row once, \
                     in order",
                    values.len()
                ));
            }
            if !v.is_finite() {
                return Err(format!("the value of term {t}, row {r} is not finite"));
            }
            // `granularity` is a power of two: the division is exact.
            if (v / granularity).fract() != 0.0 {
                return Err(format!(
                    "the value of term {t}, row {r} is not a multiple of the noise's grid"
                ));
            }
            values.push(*v);
        }
    }
    if values.len() != total {
        return Err(format!(
            "{} values for a strategy of {total} rows",
            values.len()
        ));
    }
    Ok(values)
}
