//! A release's answers: one row per workload query, in workload order,
//! with its standard error and 95% interval, and the JSON sidecar that
//! says how they were made (mechanism, noise, what was charged, the
//! strategy's recomputed figures). Nothing in either is exact about the
//! data: not even the number of records.

use std::path::{Path, PathBuf};

use dp_core::intervals::Interval;
use dp_plan::reconstruct::Reconstruction;
use dp_workloads::structured::StructuredWorkload;
use dpmm_records::Schema;

use crate::Result;
use crate::nonneg::Marginals;
use crate::release_plan::QueryLabels;

/// Queries per chunk of the answers CSV formatted on one thread.
const CSV_CHUNK: usize = 1 << 16;

/// Chunks formatted at once before they are written (at least one per
/// thread): about 64 MiB of text in memory.
const CSV_BATCH_CHUNKS: usize = 16;

/// The answers CSV's rows formatted and held at once.
pub(crate) fn csv_rows_in_flight() -> usize {
    CSV_CHUNK * CSV_BATCH_CHUNKS.max(rayon::current_num_threads())
}

/// One answered query.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The query, named by the schema (`sex = F & age in [18, 24]`).
    pub query: String,
    /// The private answer (unbiased; may be negative).
    pub answer: f64,
    /// Its exact standard deviation (or an upper bound, as the sidecar's
    /// `variances` says).
    pub std_error: f64,
    /// Lower end of the 95% interval, from the answer's own noise law
    /// ([`dp_core::intervals`]; the sidecar's `intervals` says how).
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
}

/// The answers of one release, in workload order, and its sidecar.
pub struct Answers {
    pub(crate) workload: StructuredWorkload,
    pub(crate) schema: Schema,
    pub(crate) reconstruction: Reconstruction,
    pub(crate) sidecar: serde_json::Value,
    pub(crate) entry: usize,
    /// The release's inputs, which [`Answers::write`] never overwrites.
    pub(crate) inputs: Vec<PathBuf>,
    pub(crate) warnings: Vec<String>,
    /// The non-negative consistent estimate of every answer, when asked
    /// for ([`crate::nonneg`]).
    pub(crate) nonneg: Option<Vec<f64>>,
    /// The noise law of the strategy rows' draws, for the intervals.
    pub(crate) interval: Interval,
    /// The variance of one draw.
    pub(crate) draw_variance: f64,
}

impl Answers {
    /// The number of answers (the workload's queries).
    pub fn len(&self) -> usize {
        self.reconstruction
            .answers
            .len()
            .min(self.reconstruction.variances.len())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answers in workload order.
    pub fn iter(&self) -> impl Iterator<Item = Answer> + '_ {
        let labels = QueryLabels::new(&self.workload, &self.schema);
        (0..self.len().min(labels.len())).map(move |q| {
            let mut query = String::new();
            let w = labels.write(q, &mut query);
            let (answer, std_error, half) = self.unweighted(q, w);
            Answer {
                query,
                answer,
                std_error,
                ci_low: answer - half,
                ci_high: answer + half,
            }
        })
    }

    /// What the release warns its caller of, one line each: the ledger had
    /// charges but no head anchor, so a rollback before this release could
    /// not be detected (one is written from now on).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The ledger entry that charged this release.
    pub fn ledger_entry(&self) -> usize {
        self.entry
    }

    /// The non-negative, consistent estimates of the answers, in workload
    /// order, when the release asked for them ([`crate::nonneg`]): biased,
    /// so they carry no standard error.
    pub fn nonneg(&self) -> Option<&[f64]> {
        self.nonneg.as_deref()
    }

    /// Projects the answers onto the non-negative consistent tables of
    /// `tables` and records how in the sidecar (`nonneg`).
    pub(crate) fn estimate_nonneg(&mut self, tables: &Marginals) {
        let unbiased: Vec<f64> = self.iter().map(|a| a.answer).collect();
        let scale = unbiased.iter().fold(1.0, |m: f64, v| m.max(v.abs()));
        let tolerance = NONNEG_TOLERANCE * scale;
        let cap = tables.iteration_cap(NONNEG_ITERATIONS);
        let (estimate, how) = tables.project_nonneg(&unbiased, tolerance, cap);
        if how.clipped > tolerance {
            self.warnings.push(format!(
                "the non-negative projection stopped after {} iterations: its tables agree \
                 only to {:.3e} (the clipping of the last consistent iterate)",
                how.iterations, how.clipped
            ));
        }
        self.sidecar["nonneg"] = serde_json::json!({
            "method": "Euclidean projection of the answers onto the non-negative consistent \
                       tables (Dykstra's algorithm; local non-negativity as in Mullins et al., \
                       NeurIPS 2024): post-processing, no further budget; once converged \
                       (clipped 0) never further from the true tables than the unbiased \
                       answers in total squared error, but biased",
            "iterations": how.iterations,
            "clipped": how.clipped,
        });
        self.nonneg = Some(estimate);
    }

    /// The non-negative estimates as CSV, `query,answer` (no error
    /// columns: they are biased), when there are any.
    pub fn nonneg_csv(&self) -> Option<String> {
        let values = self.nonneg.as_ref()?;
        let mut out = String::from("query,answer\n");
        let mut number = ryu::Buffer::new();
        for (a, v) in self.iter().zip(values) {
            push_csv_field(&mut out, &a.query);
            out.push(',');
            out.push_str(number.format(*v));
            out.push('\n');
        }
        Some(out)
    }

    /// The JSON sidecar: how the answers were made.
    pub fn sidecar(&self) -> &serde_json::Value {
        &self.sidecar
    }

    /// Query `q`'s answer, standard error and 95% half-width, of the query
    /// itself: a spec weight `w` steers the plan, not the answer.
    fn unweighted(&self, q: usize, w: f64) -> (f64, f64, f64) {
        let r = &self.reconstruction;
        let variance = r.variances[q].max(0.0);
        let half = self.interval.half_width(
            variance / self.draw_variance,
            r.fourth_powers.as_ref().map(|f| f[q]),
            self.draw_variance,
        );
        (r.answers[q] / w, variance.sqrt() / w, half / w.abs())
    }

    /// The answers CSV: `query,answer,std_error,ci_low,ci_high`, one row
    /// per query ([`Answers::write_csv`] into memory).
    pub fn to_csv(&self) -> String {
        let mut out = Vec::new();
        // Writing into a vector cannot fail.
        let _ = self.write_csv(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// Streams the answers CSV into `out`: numbers written by `ryu`
    /// (shortest round-trip form, exponent for very small or large
    /// values), rows formatted in chunks on rayon's pool, a batch of
    /// chunks at a time, so that memory holds one batch and not the file.
    pub fn write_csv(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        use rayon::prelude::*;
        let labels = QueryLabels::new(&self.workload, &self.schema);
        let n = labels.len().min(self.len());
        out.write_all(b"query,answer,std_error,ci_low,ci_high\n")?;
        let chunks = n.div_ceil(CSV_CHUNK);
        let batch = csv_rows_in_flight() / CSV_CHUNK;
        for first in (0..chunks).step_by(batch) {
            let texts: Vec<String> = (first..(first + batch).min(chunks))
                .into_par_iter()
                .map(|c| {
                    let mut text = String::new();
                    let mut label = String::new();
                    let mut number = ryu::Buffer::new();
                    for q in c * CSV_CHUNK..((c + 1) * CSV_CHUNK).min(n) {
                        label.clear();
                        let w = labels.write(q, &mut label);
                        push_csv_field(&mut text, &label);
                        let (a, se, half) = self.unweighted(q, w);
                        for v in [a, se, a - half, a + half] {
                            text.push(',');
                            text.push_str(number.format(v));
                        }
                        text.push('\n');
                    }
                    text
                })
                .collect();
            for text in texts {
                out.write_all(text.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Streams the answers into `out` as a Parquet table: columns `query` (text), `answer`, `std_error`, `ci_low`,
    /// `ci_high` (doubles, the same numbers as the CSV's), the sidecar in
    /// the file's metadata ([`crate::parquet_output`]).
    pub fn write_parquet(&self, out: &mut (dyn std::io::Write + Send)) -> std::io::Result<()> {
        let labels = QueryLabels::new(&self.workload, &self.schema);
        let row = |q: usize, label: &mut String, values: &mut [f64]| {
            let w = labels.write(q, label);
            let (a, se, half) = self.unweighted(q, w);
            values.copy_from_slice(&[a, se, a - half, a + half]);
        };
        crate::parquet_output::write_table(
            out,
            &crate::parquet_output::Table {
                columns: &["query", "answer", "std_error", "ci_low", "ci_high"],
                rows: labels.len().min(self.len()),
                row: &row,
                group_rows: csv_rows_in_flight(),
                sidecar: self.sidecar.to_string(),
            },
        )
    }

    /// Writes the answers to `out` (CSV, or Parquet when `out` ends in
    /// `.parquet`: [`AnswersFormat`]) and the sidecar to `<out>.json`, each
    /// whole or absent ([`crate::output`]); the sidecar first, so that
    /// answers never appear without theirs. Refused when either path is a
    /// directory or one of the release's input files (its ledger and the
    /// ledger's head above all); CSV a caller streamed in has no path to
    /// protect.
    pub fn write(&self, out: &Path) -> Result<()> {
        let format = AnswersFormat::of(out)?;
        for path in [out.to_path_buf(), sidecar_path(out)] {
            crate::output::check_output(&path, &self.inputs)?;
        }
        use crate::output::Content;
        let mut side = serde_json::to_string_pretty(&self.sidecar).unwrap_or_default();
        side.push('\n');
        let stream = |w: &mut (dyn std::io::Write + Send)| -> Result<()> {
            match format {
                AnswersFormat::Csv => self.write_csv(w),
                AnswersFormat::Parquet => self.write_parquet(w),
            }
            .map_err(|e| crate::Error::file(out, e))
        };
        let nonneg_file = nonneg_path(out);
        let nonneg = self.nonneg.as_ref().map(|_| match format {
            AnswersFormat::Csv => self.nonneg_csv().unwrap_or_default().into_bytes(),
            AnswersFormat::Parquet => self.nonneg_parquet(),
        });
        let side_file = sidecar_path(out);
        let mut files = vec![
            (side_file.as_path(), Content::Bytes(side.as_bytes())),
            (out, Content::Stream(&stream)),
        ];
        if let Some(bytes) = &nonneg {
            crate::output::check_output(&nonneg_file, &self.inputs)?;
            files.push((nonneg_file.as_path(), Content::Bytes(bytes)));
        }
        crate::output::write_contents_atomically(&files)
    }

    /// The non-negative estimates as a Parquet table, `query` and
    /// `answer` (empty without them).
    fn nonneg_parquet(&self) -> Vec<u8> {
        let Some(values) = &self.nonneg else {
            return Vec::new();
        };
        let labels = QueryLabels::new(&self.workload, &self.schema);
        let row = |q: usize, label: &mut String, out: &mut [f64]| {
            labels.write(q, label);
            out[0] = values[q];
        };
        let mut bytes = Vec::new();
        // Writing into a vector cannot fail.
        let _ = crate::parquet_output::write_table(
            &mut bytes,
            &crate::parquet_output::Table {
                columns: &["query", "answer"],
                rows: labels.len().min(values.len()),
                row: &row,
                group_rows: csv_rows_in_flight(),
                sidecar: self.sidecar.to_string(),
            },
        );
        bytes
    }
}

/// How an answers file is written, by its name: Parquet when it ends in
/// `.parquet` (any case), CSV otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswersFormat {
    /// `query,answer,std_error,ci_low,ci_high` ([`Answers::write_csv`]).
    Csv,
    /// The same columns as a Parquet table ([`Answers::write_parquet`]).
    Parquet,
}

impl AnswersFormat {
    /// The format of answers written to `out`.
    pub fn of(out: &Path) -> Result<Self> {
        let parquet = out
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
        Ok(if parquet { Self::Parquet } else { Self::Csv })
    }
}

/// `answers.nonneg.csv` beside `answers.csv` (`<out>.nonneg.csv` when `out`
/// does not end in `.csv`; `answers.nonneg.parquet` beside
/// `answers.parquet`): the non-negative consistent estimates.
pub fn nonneg_path(out: &Path) -> PathBuf {
    let text = out.display().to_string();
    for suffix in [".csv", ".parquet"] {
        let cut = text.len().saturating_sub(suffix.len());
        if text.is_char_boundary(cut) && text[cut..].eq_ignore_ascii_case(suffix) {
            return PathBuf::from(format!("{}.nonneg{}", &text[..cut], &text[cut..]));
        }
    }
    PathBuf::from(format!("{text}.nonneg.csv"))
}

/// The non-negative projection stops once no consistent cell is below
/// `−NONNEG_TOLERANCE ·` the largest answer (then clipped to 0).
const NONNEG_TOLERANCE: f64 = 1e-9;

/// ... or after this many iterations.
const NONNEG_ITERATIONS: usize = 100_000;

/// `<out>.json`, the JSON sidecar beside the answers.
pub fn sidecar_path(out: &Path) -> PathBuf {
    PathBuf::from(format!("{}.json", out.display()))
}

/// `s` as one CSV field: quoted when it holds a separator, quote or line
/// break.
pub(crate) fn push_csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}
