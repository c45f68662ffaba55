//! HTML reports: one self-contained page for a release (what was spent
//! and what is left, the plan's figures, every table of answers as a chart
//! with its 95% intervals) or for a plan (the expected error per query
//! group before anything is spent).
//!
//! The page has inline CSS and inline SVG only: no script, no font, no
//! request of any kind, so it opens offline, in a mail client or from an
//! archive, and shows exactly what the files say. Each product of the
//! workload is one table: a number for a total, bars with interval
//! whiskers for one attribute (points with intervals past
//! [`MAX_BARS`] rows), a heat map for two (every cell's value and interval
//! in its tooltip) with a bar chart per row to drill down when it is
//! small, and a list for more attributes. Nothing in a report is exact
//! about the data: it shows the released answers and public figures only.

use std::fmt::Write as _;

use dp_workloads::structured::{Factor, StructuredWorkload};
use dpmm_records::Schema;

use crate::answers::Answers;
use crate::ledger::Status;
use crate::plan::PlanSummary;
use crate::release_figures::{GroupRmse, group_rmse};
use crate::release_plan::factor_row;

/// One-attribute tables up to this many rows are drawn as labelled bars.
pub const MAX_BARS: usize = 60;

/// Two-attribute tables up to this many cells are drawn as one bar chart
/// per row of the first attribute (small multiples), intervals in view.
const MAX_SMALL_MULTIPLES: usize = 120;

/// Larger two-attribute tables, up to this many cells, get the same bar
/// charts folded under their heat map (the drill-down).
const MAX_DRILL_DOWN: usize = 2_000;

/// Rows of a list (three or more attributes) shown before the rest is
/// folded.
const LIST_SHOWN: usize = 200;

/// One released answer as a chart draws it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    answer: f64,
    low: f64,
    high: f64,
    /// The non-negative consistent estimate, when the release made them.
    nonneg: Option<f64>,
}

/// An attribute a table is broken down by: its name and the label of each
/// of its rows (`F`, `[18, 25)`).
#[derive(Debug, Clone, PartialEq)]
struct Axis {
    name: String,
    labels: Vec<String>,
}

/// One product of the workload: the queries `start..start + len`, row-major
/// over its axes (the last fastest).
#[derive(Debug, Clone, PartialEq)]
struct Table {
    axes: Vec<Axis>,
    start: usize,
    len: usize,
}

impl Table {
    fn title(&self) -> String {
        if self.axes.is_empty() {
            "Total".into()
        } else {
            let names: Vec<&str> = self.axes.iter().map(|a| a.name.as_str()).collect();
            names.join(" × ")
        }
    }
}

/// The tables of `workload`, named by `schema`: one per product, its
/// summed-out attributes dropped.
fn tables(workload: &StructuredWorkload, schema: &Schema) -> Vec<Table> {
    let mut out = Vec::new();
    let mut start = 0;
    for (_, factors) in workload.products() {
        let mut axes = Vec::new();
        let mut len = 1;
        for (a, f) in factors.iter().enumerate() {
            let rows = f.num_queries();
            len *= rows;
            if matches!(f, Factor::Total(_)) {
                continue;
            }
            let name = schema.attributes()[a].name.clone();
            let labels = (0..rows)
                .map(|r| {
                    let full = factor_row(schema, a, f, r).unwrap_or_default();
                    short_label(&full, &name)
                })
                .collect();
            axes.push(Axis { name, labels });
        }
        out.push(Table { axes, start, len });
        start += len;
    }
    out
}

/// `sex = F` → `F`, `age in [18, 25)` → `[18, 25)`: the row label without
/// its attribute's name.
fn short_label(full: &str, name: &str) -> String {
    full.strip_prefix(name)
        .and_then(|rest| {
            rest.strip_prefix(" = ")
                .or_else(|| rest.strip_prefix(" in "))
        })
        .unwrap_or(full)
        .to_string()
}

/// `s` with HTML's special characters escaped (text and attribute values).
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A count for people to read: one decimal, two below 10, and an exponent
/// for the very large.
fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 1e9 {
        format!("{v:.3e}")
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A figure in scientific notation when it is large or small.
fn figure(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() && (v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-3)) => {
            format!("{v:.4e}")
        }
        Some(v) if v.is_finite() => format!("{v:.4}"),
        _ => "–".into(),
    }
}

/// The text of a point's tooltip: `label: answer [low, high]`.
fn tip(label: &str, p: Point) -> String {
    let nonneg = p
        .nonneg
        .map(|v| format!("; non-negative estimate {}", num(v)))
        .unwrap_or_default();
    esc(&format!(
        "{label}: {} (95% interval {} to {}){nonneg}",
        num(p.answer),
        num(p.low),
        num(p.high)
    ))
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:2em auto;max-width:1100px;\
color:#222;padding:0 1em}h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;\
border-bottom:1px solid #ccc}h3{font-size:1.05em;margin:1.6em 0 .3em}\
table.kv td,table.kv th{padding:2px 12px 2px 0;text-align:left;vertical-align:top}\
table.list{border-collapse:collapse}table.list td,table.list th{padding:2px 10px;\
border-bottom:1px solid #eee;text-align:right}table.list td:first-child,\
table.list th:first-child{text-align:left}.note{color:#555;font-size:.9em}\
h4{font-size:.95em;font-weight:normal;margin:.6em 0 .1em}\
svg text{font:11px system-ui,sans-serif;fill:#333}.bar{fill:#7aa6d6}.neg{fill:#d69a7a}\
.ci{stroke:#222;stroke-width:1.2}.nn{stroke:#c0392b;stroke-width:2}.axis{stroke:#999;stroke-width:1}.dot{fill:#1f4e8c}\
details{margin:.4em 0}summary{cursor:pointer;color:#1f4e8c}";

/// A whole page around `body`.
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n{body}</body></html>\n",
        esc(title)
    )
}

/// Rows of `(key, value)` as a two-column table (values already escaped).
fn key_values(rows: &[(&str, String)]) -> String {
    let mut out = String::from("<table class=\"kv\">");
    for (k, v) in rows {
        let _ = write!(out, "<tr><th>{}</th><td>{v}</td></tr>", esc(k));
    }
    out.push_str("</table>\n");
    out
}

/// The expected (or realized) error per query group, as a table.
fn groups_table(groups: &[GroupRmse]) -> String {
    let mut out = String::from(
        "<table class=\"list\"><tr><th>query group</th><th>queries</th><th>RMSE</th></tr>",
    );
    for g in groups {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.label),
            g.queries,
            num(g.rmse)
        );
    }
    out.push_str("</table>\n");
    out
}

/// The value range a chart must show: every interval and zero.
fn extent(points: &[Point]) -> (f64, f64) {
    let lo = points.iter().map(|p| p.low).fold(0.0, f64::min);
    let hi = points.iter().map(|p| p.high).fold(0.0, f64::max);
    if hi > lo { (lo, hi) } else { (lo, lo + 1.0) }
}

/// Labelled horizontal bars, one per row, each with its interval when
/// `intervals` (else the value alone), on the value range `(lo, hi)`.
fn bars(labels: &[String], points: &[Point], (lo, hi): (f64, f64), intervals: bool) -> String {
    const ROW: f64 = 18.0;
    const LABEL: f64 = 170.0;
    const PLOT: f64 = 520.0;
    const VALUE: f64 = 190.0;
    let x = |v: f64| LABEL + (v - lo) / (hi - lo) * PLOT;
    let height = ROW * points.len() as f64 + 6.0;
    let mut out = format!(
        "<svg width=\"{}\" height=\"{height}\" role=\"img\">",
        LABEL + PLOT + VALUE
    );
    let zero = x(0.0);
    for (i, (label, &p)) in labels.iter().zip(points).enumerate() {
        let y = i as f64 * ROW + 3.0;
        let (a, b) = if p.answer >= 0.0 {
            (zero, x(p.answer))
        } else {
            (x(p.answer), zero)
        };
        let class = if p.answer >= 0.0 { "bar" } else { "neg" };
        let short: String = label.chars().take(26).collect();
        let (title, value) = if intervals {
            (
                tip(label, p),
                format!("{} ± {}", num(p.answer), num((p.high - p.low) / 2.0)),
            )
        } else {
            (esc(&format!("{label}: {}", num(p.answer))), num(p.answer))
        };
        let _ = write!(
            out,
            "<g><title>{title}</title><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <rect class=\"{class}\" x=\"{a:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"/>",
            LABEL - 6.0,
            y + 12.0,
            esc(&short),
            y + 2.0,
            (b - a).max(0.5),
            ROW - 6.0,
        );
        if intervals {
            let _ = write!(
                out,
                "<line class=\"ci\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
                x(p.low),
                x(p.high),
                y + ROW / 2.0 - 1.0,
                y + ROW / 2.0 - 1.0,
            );
        }
        if let Some(v) = p.nonneg {
            let _ = write!(
                out,
                "<line class=\"nn\" x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\"/>",
                x(v),
                y,
                y + ROW - 2.0,
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\">{value}</text></g>",
            LABEL + PLOT + 8.0,
            y + 12.0,
        );
    }
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{zero:.1}\" x2=\"{zero:.1}\" y1=\"0\" y2=\"{height}\"/></svg>"
    );
    out
}

/// Points with interval whiskers along one axis, for rows too many to
/// label, on the value range `(lo, hi)`: every value's label and interval
/// in its tooltip.
fn dots(labels: &[String], points: &[Point], (lo, hi): (f64, f64)) -> String {
    const HEIGHT: f64 = 220.0;
    const LEFT: f64 = 60.0;
    let n = points.len() as f64;
    let step = (1000.0 / n).clamp(1.0, 12.0);
    let width = LEFT + step * n + 10.0;
    let y = |v: f64| 10.0 + (hi - v) / (hi - lo) * (HEIGHT - 20.0);
    let mut out = format!("<svg width=\"{width:.0}\" height=\"{HEIGHT}\" role=\"img\">");
    for (v, anchor) in [(hi, "hi"), (0.0, "zero"), (lo, "lo")] {
        if anchor == "lo" && lo == 0.0 {
            continue;
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <line class=\"axis\" x1=\"{LEFT}\" x2=\"{width:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/>",
            LEFT - 4.0,
            y(v) + 4.0,
            num(v),
            y(v),
            y(v)
        );
    }
    for (i, (label, &p)) in labels.iter().zip(points).enumerate() {
        let cx = LEFT + step * (i as f64 + 0.5);
        let _ = write!(
            out,
            "<g><title>{}</title><line class=\"ci\" x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{:.1}\" \
             y2=\"{:.1}\"/><circle class=\"dot\" cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"{:.1}\"/></g>",
            tip(label, p),
            y(p.low),
            y(p.high),
            y(p.answer),
            (step / 2.5).clamp(0.8, 3.0)
        );
        if let Some(v) = p.nonneg {
            let half = (step / 2.0).max(1.0);
            let _ = write!(
                out,
                "<line class=\"nn\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{2:.1}\" y2=\"{2:.1}\"/>",
                cx - half,
                cx + half,
                y(v)
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// A one-attribute chart on the value range `range`: bars when they can
/// be labelled, points beyond.
fn one_axis(labels: &[String], points: &[Point], range: (f64, f64)) -> String {
    if points.len() <= MAX_BARS {
        bars(labels, points, range, true)
    } else {
        dots(labels, points, range)
    }
}

/// A sequential colour from white (0 and below) to dark blue (`max`).
fn shade(v: f64, max: f64) -> String {
    let t = if max > 0.0 {
        (v / max).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mix = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(247.0, 8.0),
        mix(251.0, 48.0),
        mix(255.0, 107.0)
    )
}

/// A two-attribute table (rows: the first attribute): one bar chart per
/// row when it is small; else a heat map with every cell's value and
/// interval in its tooltip, and the per-row bar charts folded under it
/// while they stay few.
fn two_axes(table: &Table, points: &[Point]) -> String {
    let (rows, cols) = (&table.axes[0], &table.axes[1]);
    let (r, c) = (rows.labels.len(), cols.labels.len());
    // One scale for all rows, so that the charts compare.
    let range = extent(points);
    let per_row = |i: usize| one_axis(&cols.labels, &points[i * c..(i + 1) * c], range);
    let small = r * c <= MAX_SMALL_MULTIPLES;
    let mut out = String::new();
    if !small {
        out.push_str(&heat_map(rows, cols, points));
        if r * c > MAX_DRILL_DOWN {
            return out;
        }
    }
    for (i, row) in rows.labels.iter().enumerate() {
        let head = format!("{} = {}", esc(&rows.name), esc(row));
        let chart = per_row(i);
        let _ = if small {
            write!(out, "<h4>{head}</h4>{chart}")
        } else {
            write!(out, "<details><summary>{head}</summary>{chart}</details>")
        };
    }
    out
}

/// The heat map of a rows × cols table of answers, with its colour key.
fn heat_map(rows: &Axis, cols: &Axis, points: &[Point]) -> String {
    let (r, c) = (rows.labels.len(), cols.labels.len());
    let cell = (640.0 / c as f64)
        .clamp(3.0, 28.0)
        .min((640.0 / r as f64).clamp(3.0, 28.0));
    let longest = |axis: &Axis, cap: usize| {
        axis.labels
            .iter()
            .map(|l| l.chars().count().min(cap))
            .max()
            .unwrap_or(0) as f64
    };
    let labelled = cell >= 10.0;
    let left = if labelled {
        12.0 + 6.0 * longest(rows, 22)
    } else {
        10.0
    };
    let top = if labelled {
        12.0 + 5.5 * longest(cols, 14)
    } else {
        10.0
    };
    let max = points.iter().map(|p| p.answer).fold(0.0, f64::max);
    let (width, height) = (left + cell * c as f64 + 10.0, top + cell * r as f64 + 10.0);
    let mut out = format!("<svg width=\"{width:.0}\" height=\"{height:.0}\" role=\"img\">");
    if labelled {
        for (i, label) in rows.labels.iter().enumerate() {
            let short: String = label.chars().take(22).collect();
            let _ = write!(
                out,
                "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\">{}</text>",
                left - 4.0,
                top + cell * (i as f64 + 0.5) + 4.0,
                esc(&short)
            );
        }
        for (j, label) in cols.labels.iter().enumerate() {
            let short: String = label.chars().take(14).collect();
            let (x, y) = (left + cell * (j as f64 + 0.5) + 4.0, top - 4.0);
            let _ = write!(
                out,
                "<text transform=\"translate({x:.0},{y:.0}) rotate(-60)\">{}</text>",
                esc(&short)
            );
        }
    }
    for (i, row) in rows.labels.iter().enumerate() {
        for (j, col) in cols.labels.iter().enumerate() {
            let p = points[i * c + j];
            let label = format!("{} = {row}, {} = {col}", rows.name, cols.name);
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{cell:.1}\" height=\"{cell:.1}\" \
                 fill=\"{}\"><title>{}</title></rect>",
                left + cell * j as f64,
                top + cell * i as f64,
                shade(p.answer, max),
                tip(&label, p)
            );
        }
    }
    out.push_str("</svg>");
    let _ = write!(
        out,
        "<p class=\"note\">Colour: the answer, from 0 (white) to {} (dark); \
         each cell's tooltip gives its answer and 95% interval.</p>",
        num(max)
    );
    out
}

/// A table of three or more attributes (or of rows a chart cannot show)
/// as a list: each row's cells, answer and interval.
fn list(table: &Table, points: &[Point]) -> String {
    let sizes: Vec<usize> = table.axes.iter().map(|a| a.labels.len()).collect();
    let mut out = String::from(
        "<table class=\"list\"><tr><th>cell</th><th>answer</th><th>95% interval</th></tr>",
    );
    let row = |q: usize| -> String {
        let mut rest = q;
        let mut parts = vec![String::new(); sizes.len()];
        for (k, &size) in sizes.iter().enumerate().rev() {
            let axis = &table.axes[k];
            parts[k] = format!("{} = {}", axis.name, axis.labels[rest % size]);
            rest /= size;
        }
        let p = points[q];
        format!(
            "<tr><td>{}</td><td>{}</td><td>{} to {}</td></tr>",
            esc(&parts.join(", ")),
            num(p.answer),
            num(p.low),
            num(p.high)
        )
    };
    for q in 0..points.len().min(LIST_SHOWN) {
        out.push_str(&row(q));
    }
    out.push_str("</table>");
    if points.len() > LIST_SHOWN {
        let _ = write!(
            out,
            "<details><summary>the other {} cells</summary><table class=\"list\">",
            points.len() - LIST_SHOWN
        );
        for q in LIST_SHOWN..points.len() {
            out.push_str(&row(q));
        }
        out.push_str("</table></details>");
    }
    out
}

/// One table's section: its title and its chart.
fn table_section(table: &Table, points: &[Point]) -> String {
    let chart = match table.axes.len() {
        0 => points.first().map_or_else(String::new, |&p| {
            format!(
                "<p><strong>{}</strong> (95% interval {} to {})</p>",
                num(p.answer),
                num(p.low),
                num(p.high)
            )
        }),
        1 => one_axis(&table.axes[0].labels, points, extent(points)),
        2 => two_axes(table, points),
        _ => list(table, points),
    };
    format!(
        "<section><h3>{} <span class=\"note\">({} answers)</span></h3>{chart}</section>\n",
        esc(&table.title()),
        points.len()
    )
}

/// The privacy lines of a release: the budget, what was charged and the
/// ledger after the charge.
fn spent(sidecar: &serde_json::Value, ledger: Option<&Status>) -> Vec<(&'static str, String)> {
    let text = |key: &str| {
        sidecar
            .get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("–")
    };
    let value = |key: &str| sidecar.get(key).and_then(serde_json::Value::as_f64);
    let mut rows = vec![
        ("ε", figure(value("epsilon"))),
        (
            "δ",
            value("delta").map_or_else(|| "– (pure ε-DP)".into(), |d| format!("{d:e}")),
        ),
        (
            "charged",
            format!("{} {}", figure(value("charged")), esc(text("charged_unit"))),
        ),
    ];
    match ledger {
        Some(s) => rows.push((
            "ledger after this release",
            format!(
                "{} of {} {} spent by {} release(s); {} left",
                figure(Some(s.spent)),
                figure(Some(s.total)),
                s.unit,
                s.releases,
                figure(Some(s.remaining))
            ),
        )),
        None => rows.push(("ledger", "not read".into())),
    }
    if let Some(m) = sidecar.get("measurements") {
        rows.push((
            "answered from",
            format!(
                "the measurement file {} of a release that charged {} {} (ledger entry {}); \
                 these answers are post-processing of it and spent nothing",
                esc(m
                    .get("path")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("–")),
                figure(m.get("release_charged").and_then(serde_json::Value::as_f64)),
                esc(text("charged_unit")),
                m.get("release_ledger_entry")
                    .and_then(serde_json::Value::as_u64)
                    .map_or_else(|| "–".into(), |e| e.to_string()),
            ),
        ));
    }
    rows.push(("privacy unit", privacy_unit(sidecar)));
    rows.push(("mechanism", esc(text("mechanism"))));
    rows.push(("intervals", esc(text("intervals"))));
    if sidecar.get("variances").is_some() {
        rows.push(("variances", esc(text("variances"))));
    }
    rows
}

/// Whom the release protects, from the sidecar's `privacy_unit` and
/// `weights`.
fn privacy_unit(sidecar: &serde_json::Value) -> String {
    let unit = match sidecar.get("privacy_unit") {
        Some(serde_json::Value::Object(u)) if u.contains_key("max_steps_per_unit") => {
            let whole = |key: &str| {
                u.get(key)
                    .and_then(serde_json::Value::as_u64)
                    .map_or_else(|| "–".into(), |k| k.to_string())
            };
            format!(
                "the column {}, at most {} steps of each kept, at least {} apart, and at most {} \
                 records in each (chosen at random)",
                esc(u.get("column").and_then(|c| c.as_str()).unwrap_or("–")),
                whole("max_steps_per_unit"),
                whole("min_separation"),
                whole("max_records_per_unit")
            )
        }
        Some(serde_json::Value::Object(u)) => format!(
            "the column {}, at most {} records of each kept (chosen at random)",
            esc(u.get("column").and_then(|c| c.as_str()).unwrap_or("–")),
            figure(u.get("max_records_per_unit").and_then(|k| k.as_f64()))
        ),
        _ => "one record: a person with several records is protected less".into(),
    };
    match sidecar.get("weights") {
        Some(serde_json::Value::Object(w)) => format!(
            "{unit}; each record weighted by the column {} clipped to [0, {}]",
            esc(w.get("column").and_then(|c| c.as_str()).unwrap_or("–")),
            figure(w.get("max_weight").and_then(|k| k.as_f64()))
        ),
        _ => unit,
    }
}

/// The plan lines of a release's sidecar.
fn plan_rows(sidecar: &serde_json::Value) -> Vec<(&'static str, String)> {
    let plan = sidecar.get("plan");
    let get = |key: &str| plan.and_then(|p| p.get(key));
    let text = |key: &str| get(key).and_then(serde_json::Value::as_str).unwrap_or("–");
    let value = |key: &str| get(key).and_then(serde_json::Value::as_f64);
    vec![
        ("strategy", esc(text("method"))),
        ("privacy", esc(text("privacy"))),
        (
            "objective",
            format!(
                "{} = {}",
                esc(text("objective_name")),
                figure(value("objective"))
            ),
        ),
        (
            "lower bound",
            match get("lower_bound_note").and_then(serde_json::Value::as_str) {
                Some(note) => format!("{} ({})", figure(value("lower_bound")), esc(note)),
                None => figure(value("lower_bound")),
            },
        ),
        ("relative gap", figure(value("duality_gap"))),
    ]
}

impl Answers {
    /// The release's HTML report ([`crate::report`]): what was spent and
    /// what `ledger` (its status after the charge, when read) has left,
    /// the plan's figures, the RMSE per query group, and every table of
    /// answers with its 95% intervals.
    pub fn report_html(&self, ledger: Option<&Status>) -> String {
        let points: Vec<Point> = self
            .iter()
            .enumerate()
            .map(|(q, a)| Point {
                answer: a.answer,
                low: a.ci_low,
                high: a.ci_high,
                nonneg: self.nonneg().and_then(|v| v.get(q).copied()),
            })
            .collect();
        let sidecar = self.sidecar();
        let title = if sidecar.get("measurements").is_some() {
            "<h1>dpmm query</h1>\n"
        } else {
            "<h1>dpmm release</h1>\n"
        };
        let mut body = String::from(title);
        let _ = write!(
            body,
            "<p class=\"note\">{} answers. Every figure on this page is a released \
             answer or a public property of the mechanism; nothing here is exact \
             about the data. Hover over a bar, point or cell for its value and \
             interval{}.</p>\n<h2>Privacy</h2>\n{}<h2>Plan</h2>\n{}<h3>RMSE per query \
             group</h3>\n{}<h2>Answers</h2>\n",
            points.len(),
            if self.nonneg().is_some() {
                "; a red tick marks the non-negative, consistent estimate \
                 (post-processing of the same answers: biased; once converged, never \
                 further from the true tables in total squared error)"
            } else {
                ""
            },
            key_values(&spent(sidecar, ledger)),
            key_values(&plan_rows(sidecar)),
            groups_table(&group_rmse(&self.workload, &self.reconstruction)),
        );
        for table in tables(&self.workload, &self.schema) {
            let end = (table.start + table.len).min(points.len());
            if table.start < end {
                body.push_str(&table_section(&table, &points[table.start..end]));
            }
        }
        page("dpmm release", &body)
    }
}

/// A stream's running counts as a report draws them: every step's value
/// of every query (step-major), each step's 95% half-width (shared by the
/// step's queries), and the non-negative running counts when made.
pub struct RunningCounts<'a> {
    /// The workload the queries are the cells of.
    pub workload: &'a StructuredWorkload,
    /// Its schema (the labels).
    pub schema: &'a Schema,
    /// Each step's start, as the output writes it.
    pub times: &'a [String],
    /// `steps × queries` running counts.
    pub values: &'a [f64],
    /// Each step's 95% half-width.
    pub half_widths: &'a [f64],
    /// `steps × queries` non-negative running counts, when made.
    pub nonneg: Option<&'a [f64]>,
}

/// The most lines one chart of a stream's report draws: a table's cells of
/// the largest last running count.
pub const STREAM_LINES: usize = 8;

/// Colours of a chart's lines.
const PALETTE: [&str; STREAM_LINES] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// One chart of running counts over the steps: for each of `lines`
/// (query index, label), its running count as a line in a shaded band of
/// its 95% intervals, and its non-negative running count dashed.
fn running_chart(counts: &RunningCounts<'_>, queries: usize, lines: &[(usize, String)]) -> String {
    const WIDTH: f64 = 760.0;
    const HEIGHT: f64 = 240.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 170.0;
    const TOP: f64 = 10.0;
    const BOTTOM: f64 = 30.0;
    let steps = counts.times.len();
    let at = |t: usize, q: usize| counts.values[t * queries + q];
    let mut lo = 0f64;
    let mut hi = 0f64;
    for &(q, _) in lines {
        for t in 0..steps {
            lo = lo.min(at(t, q) - counts.half_widths[t]);
            hi = hi.max(at(t, q) + counts.half_widths[t]);
        }
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |t: usize| LEFT + plot_w * t as f64 / (steps.max(2) - 1) as f64;
    let y = |v: f64| TOP + plot_h * (hi - v) / (hi - lo);
    let mut out = format!("<svg width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\">");
    // Axes: zero, the range, the first and last steps.
    let _ = write!(
        out,
        "<line class=\"axis\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{2:.1}\" y2=\"{2:.1}\"/>\
         <text x=\"{3:.1}\" y=\"{4:.1}\" text-anchor=\"end\">{5}</text>\
         <text x=\"{3:.1}\" y=\"{6:.1}\" text-anchor=\"end\">{7}</text>\
         <text x=\"{LEFT}\" y=\"{8:.1}\">{9}</text>\
         <text x=\"{1:.1}\" y=\"{8:.1}\" text-anchor=\"end\">{10}</text>",
        LEFT + plot_w,
        LEFT + plot_w,
        y(0.0),
        LEFT - 6.0,
        TOP + 10.0,
        num(hi),
        TOP + plot_h,
        num(lo),
        HEIGHT - 8.0,
        esc(&counts.times[0]),
        esc(&counts.times[steps - 1]),
    );
    for (i, (q, label)) in lines.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let mut band = String::new();
        for t in 0..steps {
            let _ = write!(
                band,
                "{:.1},{:.1} ",
                x(t),
                y(at(t, *q) + counts.half_widths[t])
            );
        }
        for t in (0..steps).rev() {
            let _ = write!(
                band,
                "{:.1},{:.1} ",
                x(t),
                y(at(t, *q) - counts.half_widths[t])
            );
        }
        let line: String = (0..steps)
            .map(|t| format!("{:.1},{:.1} ", x(t), y(at(t, *q))))
            .collect();
        let last = at(steps - 1, *q);
        let _ = write!(
            out,
            "<g><title>{}</title><polygon points=\"{band}\" fill=\"{colour}\" \
             fill-opacity=\"0.1\"/><polyline points=\"{line}\" fill=\"none\" \
             stroke=\"{colour}\" stroke-width=\"1.5\"/>",
            esc(&format!(
                "{label}: {} at {} (95% interval {} to {})",
                num(last),
                counts.times[steps - 1],
                num(last - counts.half_widths[steps - 1]),
                num(last + counts.half_widths[steps - 1])
            )),
        );
        if let Some(nonneg) = counts.nonneg {
            let dashed: String = (0..steps)
                .map(|t| format!("{:.1},{:.1} ", x(t), y(nonneg[t * queries + q])))
                .collect();
            let _ = write!(
                out,
                "<polyline points=\"{dashed}\" fill=\"none\" stroke=\"{colour}\" \
                 stroke-dasharray=\"4 3\"/>"
            );
        }
        let short: String = label.chars().take(24).collect();
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" style=\"fill:{colour}\">{}</text></g>",
            LEFT + plot_w + 8.0,
            TOP + 12.0 + 14.0 * i as f64,
            esc(&short)
        );
    }
    out.push_str("</svg>");
    out
}

/// A stream's HTML report ([`crate::report`]): what was spent and what
/// `ledger` has left, the mechanism, and for every table of the workload
/// its running counts over the steps with their 95% bands (the
/// [`STREAM_LINES`] cells of the largest last running count, the others in
/// the CSV).
pub fn stream_html(
    sidecar: &serde_json::Value,
    ledger: Option<&Status>,
    counts: &RunningCounts<'_>,
) -> String {
    let steps = counts.times.len();
    let queries = counts.values.len().checked_div(steps).unwrap_or(0);
    let mut body = String::from("<h1>dpmm stream</h1>\n");
    let _ = write!(
        body,
        "<p class=\"note\">{steps} steps × {queries} running counts. Every figure on this \
         page is a released running count or a public property of the mechanism; nothing \
         here is exact about the data. Each line is a running count, its shade the 95% \
         intervals{}; hover over a line for its last value.</p>\n<h2>Privacy</h2>\n{}\
         <h2>Running counts</h2>\n",
        if counts.nonneg.is_some() {
            ", the dashed line the non-negative, non-decreasing running count (post-processing \
             of the same counts: biased)"
        } else {
            ""
        },
        key_values(&spent(sidecar, ledger)),
    );
    if steps == 0 || queries == 0 {
        return page("dpmm stream", &body);
    }
    let labels = crate::release_plan::QueryLabels::new(counts.workload, counts.schema);
    for table in tables(counts.workload, counts.schema) {
        let end = (table.start + table.len).min(queries);
        let mut cells: Vec<usize> = (table.start..end).collect();
        let last = |q: usize| counts.values[(steps - 1) * queries + q];
        cells.sort_by(|a, b| last(*b).total_cmp(&last(*a)).then(a.cmp(b)));
        let shown = cells.len().min(STREAM_LINES);
        let lines: Vec<(usize, String)> = cells[..shown]
            .iter()
            .map(|&q| {
                let mut s = String::new();
                labels.write(q, &mut s);
                (q, s)
            })
            .collect();
        let _ = writeln!(body, "<h3>{}</h3>", esc(&table.title()));
        if cells.len() > shown {
            let _ = writeln!(
                body,
                "<p class=\"note\">The {shown} of its {} cells with the largest last \
                 running count; every cell's running counts are in the CSV.</p>",
                cells.len()
            );
        }
        body.push_str(&running_chart(counts, queries, &lines));
    }
    page("dpmm stream", &body)
}

impl PlanSummary {
    /// The plan's HTML report: its privacy, objective and lower bound, and
    /// the expected RMSE per query group, before anything is spent.
    pub fn report_html(&self) -> String {
        let budget = &self.budget;
        let rows = vec![
            ("privacy", esc(&self.privacy)),
            (
                "ε (the errors are stated at)",
                figure(Some(budget.epsilon().get())),
            ),
            (
                "δ",
                budget
                    .delta()
                    .map_or_else(|| "– (pure ε-DP)".into(), |d| format!("{:e}", d.get())),
            ),
            (
                "objective",
                format!("{} = {}", esc(&self.objective_name), figure(self.objective)),
            ),
            (
                "lower bound",
                match crate::plan::lower_bound_note(&self.privacy) {
                    Some(note) if self.lower_bound.is_some() => {
                        format!("{} ({})", figure(self.lower_bound), esc(note))
                    }
                    _ => figure(self.lower_bound),
                },
            ),
            ("relative gap", figure(self.duality_gap)),
            (
                "privacy unit",
                "one record (a release that keeps K records per unit, or weights up to W, \
                 multiplies the noise and these errors by K·W, W rounded up to a grid finer than W/2¹⁵)"
                    .into(),
            ),
        ];
        let labels: Vec<String> = self.groups.iter().map(|g| g.label.clone()).collect();
        let points: Vec<Point> = self
            .groups
            .iter()
            .map(|g| Point {
                answer: g.rmse,
                low: g.rmse,
                high: g.rmse,
                nonneg: None,
            })
            .collect();
        let body = format!(
            "<h1>dpmm plan</h1>\n<p class=\"note\">The expected error of each query group's \
             answers at this budget, before anything is spent (a release at another budget \
             scales them).</p>\n{}<h2>Expected RMSE per query group</h2>\n{}{}",
            key_values(&rows),
            bars(&labels, &points, extent(&points), false),
            groups_table(&self.groups)
        );
        page("dpmm plan", &body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
mod tests {
    use super::*;

    #[test]
    fn labels_lose_their_attribute_name_and_text_is_escaped() {
        assert_eq!(short_label("sex = F", "sex"), "F");
        assert_eq!(short_label("age in [18, 25)", "age"), "[18, 25)");
        assert_eq!(
            short_label("row 3 of the matrix on x", "x"),
            "row 3 of the matrix on x"
        );
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn a_chart_keeps_every_interval_and_zero_in_view() {
        let points = [
            Point {
                answer: -2.0,
                low: -5.0,
                high: 1.0,
                nonneg: Some(0.0),
            },
            Point {
                answer: 10.0,
                low: 8.0,
                high: 12.0,
                nonneg: None,
            },
        ];
        assert_eq!(extent(&points), (-5.0, 12.0));
        assert_eq!(extent(&[]), (0.0, 1.0));
        let svg = bars(&["a".into(), "b".into()], &points, extent(&points), true);
        assert_eq!(svg.matches("<rect").count(), 2);
        assert_eq!(svg.matches("class=\"ci\"").count(), 2);
        assert!(svg.contains("class=\"neg\""));
        assert_eq!(svg.matches("class=\"nn\"").count(), 1);
        assert!(svg.contains("(95% interval -5.00 to 1.00); non-negative estimate 0.0"));
        let svg = dots(&vec!["x".to_string(); 100], &[points[1]; 100], (0.0, 12.0));
        assert_eq!(svg.matches("<circle").count(), 100);
    }
}
