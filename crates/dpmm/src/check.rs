//! The curator's check (`dpmm check`, `dm.check`): what a schema makes of
//! the records, before any release spends budget on them — exact figures,
//! **not private**, for the curator's eyes only
//! ([`dpmm_records::check()`]).
//!
//! A release never says how many records it dropped (that figure is
//! private); the check says it, and which values, so that a schema
//! mistake (a code written `27.0`, an empty category, ISO dates in a time
//! column, a header that moved) is found before the budget is spent on
//! noise. It reads the records exactly as a release does, spends nothing
//! and writes nothing.

use std::fmt::Write as _;

use dpmm_records::check::{CheckReport, Problem};
use dpmm_records::{People, Policy, Schema, Timing};

use crate::{Data, Document, Result};

/// A stream's time column, horizon and start, as `dpmm stream` takes them.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTime {
    /// The time column.
    pub column: String,
    /// The horizon `T`.
    pub steps: u64,
    /// The time value of step 0 (whole-number times).
    pub start: i64,
    /// Dates and times on a public calendar instead of whole numbers.
    pub calendar: Option<dpmm_records::Calendar>,
}

/// Reads `data` through the schema `schema` as a release (or, with
/// `time`, a stream) would, and tallies what it keeps and drops. With
/// `workload`, the workload spec is also checked against the schema's
/// domain; with `people`'s privacy unit or weights, records without their
/// unit or with a bad weight are malformed rows. Refuses only what a
/// release refuses before reading any row.
pub fn check(
    schema: &Document,
    data: Data,
    workload: Option<&Document>,
    time: Option<&StreamTime>,
    people: &People,
) -> Result<CheckReport> {
    let schema = load_schema(schema)?;
    if let Some(spec) = workload {
        crate::release::load_workload(spec, &schema)?;
    }
    let rows = data.rows();
    let source =
        data.into_source(|file| Box::new(std::io::BufReader::with_capacity(1 << 20, file)))?;
    let timing = time.map(|t| Timing {
        column: &t.column,
        start: t.start,
        steps: t.steps,
        calendar: t.calendar,
    });
    Ok(dpmm_records::check_people(
        source, &schema, rows, timing, people,
    )?)
}

/// The schema at `doc`.
pub(crate) fn load_schema(doc: &Document) -> Result<Schema> {
    Ok(match doc {
        Document::File(path) => Schema::from_path(path)?,
        doc => Schema::from_json(&doc.read()?)?,
    })
}

/// The line a release or stream prints, from the schema alone (never
/// the data), when `schema` can drop records — where to see which — or
/// pins no header.
pub fn drop_note(schema: &Schema) -> Option<String> {
    let drops = schema.malformed() == Policy::Drop
        || schema
            .attributes()
            .iter()
            .any(|a| [a.outside, a.missing, a.unparsable].contains(&Policy::Drop));
    let mut notes = Vec::new();
    if drops {
        notes.push(
            "records the schema cannot place (outside a domain, missing, not a number, \
             malformed) are left out without a word; `dpmm check --data … --schema …` shows the \
             curator how many and which (exact, not private: for the curator only)",
        );
    }
    if schema.columns().is_none() {
        notes.push(
            "the schema pins no header (\"columns\", which `dpmm schema draft` writes), so a \
             line inserted before a CSV file's header would be read as the header",
        );
    }
    (!notes.is_empty()).then(|| format!("note: {}", notes.join("; ")))
}

/// `n` with thousands separators.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn values(p: &Problem) -> String {
    let mut listed: Vec<String> = p
        .values
        .iter()
        .map(|v| format!("{} ×{}", v.value, count(v.rows)))
        .collect();
    let shown: u64 = p.values.iter().map(|v| v.rows).sum();
    let rest = p.rows - shown;
    if rest > 0 {
        listed.push(format!("{} more rows", count(rest)));
    }
    listed.join(", ")
}

/// One kind of problem: how many rows, under which policy, which values.
fn problem_line(out: &mut String, what: &str, p: &Problem) {
    let _ = if p.rows == 0 {
        writeln!(out, "  {what}: none (policy {})", p.policy)
    } else {
        writeln!(
            out,
            "  {what}: {} rows (policy {}): {}",
            count(p.rows),
            p.policy,
            values(p)
        )
    };
}

/// The report as text for a terminal: the notice first, then the totals,
/// the malformed rows, one block per attribute and the stream's times.
pub fn render(report: &CheckReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "dpmm check — {}", report.notice);
    let _ = writeln!(
        out,
        "\n{} ({}): {} rows read, standing for {} records",
        report.source,
        report.format,
        count(report.rows),
        count(report.records)
    );
    let _ = writeln!(
        out,
        "a release keeps {} records and drops {} ({:.2}%)",
        count(report.kept_records),
        count(report.dropped_records),
        100.0 * report.dropped_share
    );
    if let Some(refused) = &report.refused {
        let _ = writeln!(
            out,
            "a release would be REFUSED (an `error` policy): {refused}"
        );
    }
    if !report.malformed.is_empty() {
        let listed: Vec<String> = report
            .malformed
            .iter()
            .map(|m| format!("{}: {}", m.reason, count(m.rows)))
            .collect();
        let _ = writeln!(
            out,
            "malformed rows (policy {}): {}",
            report.malformed_policy,
            listed.join("; ")
        );
    }
    for a in &report.attributes {
        let _ = writeln!(
            out,
            "\nattribute '{}' (column '{}', holds {}):",
            a.attribute, a.column, a.holds
        );
        if let Some(mismatch) = &a.mismatch {
            let _ = writeln!(out, "  NOTE: {mismatch}");
        }
        let mut problems = vec![("outside the domain", &a.outside), ("missing", &a.missing)];
        if let Some(p) = &a.not_a_number {
            problems.push(("not a number", p));
        }
        for (what, p) in problems {
            problem_line(&mut out, what, p);
        }
    }
    if let Some(t) = &report.times {
        let (steps, bad) = match &t.calendar {
            Some(calendar) => (calendar.clone(), "not a date or time"),
            None => (
                format!(
                    "times {}..{}",
                    t.start,
                    t.start
                        .saturating_add(i64::try_from(t.steps).unwrap_or(i64::MAX))
                ),
                "not a whole number",
            ),
        };
        let _ = writeln!(
            out,
            "\ntime column '{}' (steps 0..{} are {steps}):",
            t.column, t.steps,
        );
        for (what, p) in [(bad, &t.not_whole), ("outside the steps", &t.outside_steps)] {
            problem_line(&mut out, what, p);
        }
    }
    if let Some(u) = &report.units {
        let each = if u.per_step { " in one step" } else { "" };
        let _ = writeln!(
            out,
            "\nprivacy unit '{}': {} units; the most records of one unit{each}: {}",
            u.column,
            count(u.units),
            count(u.most_records)
        );
        let _ = writeln!(
            out,
            "  over --max-records-per-unit {}{}: {} units; a {} leaves out {} of their \
             records (chosen at random)",
            u.max_records_per_unit,
            if u.per_step { " a step" } else { "" },
            count(u.units_over_bound),
            if u.per_step { "stream" } else { "release" },
            count(u.records_over_bound)
        );
        if let Some(most) = u.most_steps {
            let _ = writeln!(out, "  the most steps of one unit: {}", count(most));
        }
        if let (Some((k, b)), Some(n)) = (u.steps_bound, u.units_over_steps) {
            let _ = writeln!(
                out,
                "  over --max-steps-per-unit {k} at --min-separation {b}: {} units, of which a \
                 stream leaves out steps (chosen at random)",
                count(n)
            );
        }
    }
    if let Some(w) = &report.weights {
        let _ = writeln!(
            out,
            "\nweight '{}': largest {}, total {}; clipped at --max-weight {}: {} records, \
             total {}",
            w.column,
            w.largest,
            w.total,
            w.max_weight,
            count(w.clipped_records),
            w.total_clipped
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }
}
