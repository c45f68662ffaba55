//! The HTML reports: a release's page holds every answer with its 95%
//! interval (read back from the page's tooltips, in workload order), what
//! was charged and what the ledger has left, the plan's figures, and
//! nothing that reaches the network; a plan's page holds its groups'
//! expected RMSE; a report path that is also an output is refused before
//! anything is spent.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{SEX_AGE_MIXED_SPEC, arg, dpmm, sex_age_case};
use dpmm::{Data, Plan, PlanObjective, PrivacyBudget, Release, Workload, ledger};

/// Every `(answer, low, high)` the page's tooltips state, in page order.
fn tooltips(html: &str) -> Vec<(f64, f64, f64)> {
    let mut out = Vec::new();
    for title in html.split("<title>").skip(1) {
        let text = &title[..title.find("</title>").unwrap()];
        let Some(open) = text.rfind(" (95% interval ") else {
            continue;
        };
        let answer: f64 = text[..open].rsplit(": ").next().unwrap().parse().unwrap();
        let interval = text[open + " (95% interval ".len()..].trim_end_matches(')');
        let (low, high) = interval.split_once(" to ").unwrap();
        out.push((answer, low.parse().unwrap(), high.parse().unwrap()));
    }
    out
}

/// Whether `shown` is `v` as the page rounds it (one decimal, two below 10).
fn shows(shown: f64, v: f64) -> bool {
    let half_step = if v.abs() >= 10.0 { 0.05 } else { 0.005 };
    (shown - v).abs() <= half_step * (1.0 + 1e-9)
}

/// Nothing in the page can make a request: no script, stylesheet, image,
/// frame or font from anywhere, and no address.
fn assert_self_contained(html: &str) {
    for needle in [
        "<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "http:", "https:",
        "@import",
    ] {
        assert!(!html.contains(needle), "the page contains {needle}");
    }
}

#[test]
fn a_release_report_shows_every_answer_with_its_interval_and_the_ledger() {
    let dir = sex_age_case("report-release", SEX_AGE_MIXED_SPEC);
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(3.0).unwrap()).unwrap();
    let page = dir.join("report.html");
    let release = Release {
        out: Some(dir.join("answers.csv")),
        report: Some(page.clone()),
        ..Release::new(
            dir.join("schema.json"),
            dir.join("spec.json"),
            PrivacyBudget::pure(1.0).unwrap(),
            &book,
        )
    };
    let answers = release.run(Data::Records(dir.join("records.csv"))).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    // The sex and age marginals, the sex × age table, the age prefixes.
    assert_eq!(html.matches("<section>").count(), 4);
    for title in ["sex ", "age ", "sex × age", "morekids"] {
        assert_eq!(
            html.contains(&format!("<h3>{title}")),
            title != "morekids",
            "{title}"
        );
    }
    let shown = tooltips(&html);
    assert_eq!(shown.len(), answers.len());
    for (a, (answer, low, high)) in answers.iter().zip(shown) {
        assert!(
            shows(answer, a.answer),
            "{}: {answer} vs {}",
            a.query,
            a.answer
        );
        assert!(
            shows(low, a.ci_low) && shows(high, a.ci_high),
            "{}",
            a.query
        );
    }
    // What was charged and what is left, as the ledger says.
    let status = ledger::status(&book).unwrap();
    assert_eq!((status.spent, status.remaining), (1.0, 2.0));
    assert!(html.contains("1.0000 of 3.0000 epsilon spent by 1 release(s); 2.0000 left"));
    assert!(html.contains("discrete Laplace"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_plan_report_shows_each_groups_expected_rmse() {
    let dir = sex_age_case("report-plan", SEX_AGE_MIXED_SPEC);
    let workload = Workload::load(dir.join("spec.json")).unwrap();
    let plan = Plan::optimize(
        &workload,
        PrivacyBudget::approx(1.0, 1e-6).unwrap(),
        PlanObjective::TotalVariance,
        None,
    )
    .unwrap();
    let summary = plan.summary();
    let html = summary.report_html();
    assert_self_contained(&html);
    assert_eq!(summary.groups.len(), 3);
    for g in &summary.groups {
        let row = format!("<tr><td>{}</td><td>{}</td><td>", g.label, g.queries);
        let at = html
            .find(&row)
            .unwrap_or_else(|| panic!("no row for {}", g.label));
        let cell = &html[at + row.len()..];
        let shown: f64 = cell[..cell.find("</td>").unwrap()].parse().unwrap();
        assert!(shows(shown, g.rmse), "{}: {shown} vs {}", g.label, g.rmse);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `--report` on the command line: the page is written beside the answers;
/// a report path that is the answers' is refused before the charge.
#[test]
fn the_command_writes_the_report_and_refuses_it_over_an_output() {
    let (dir, book, before) =
        common::sex_age_case_with_ledger("report-cli", SEX_AGE_MIXED_SPEC, 2.0);
    let answers = dir.join("answers.csv");
    let release = |report: &std::path::Path| {
        dpmm(&[
            "release",
            "--data",
            arg(&dir.join("records.csv")),
            "--schema",
            arg(&dir.join("schema.json")),
            "--workload",
            arg(&dir.join("spec.json")),
            "--epsilon",
            "1",
            "--ledger",
            arg(&book),
            "--out",
            arg(&answers),
            "--report",
            arg(report),
        ])
    };
    let refused = release(&answers);
    assert!(refused.is_refusal(), "{refused:?}");
    assert_eq!(std::fs::read(&book).unwrap(), before);
    let page = dir.join("report.html");
    assert_eq!(release(&page).code, 0);
    assert!(
        std::fs::read_to_string(&page)
            .unwrap()
            .starts_with("<!DOCTYPE html>")
    );
    let plan = dpmm(&[
        "plan",
        "--workload",
        arg(&dir.join("spec.json")),
        "--epsilon",
        "1",
        "--out",
        arg(&dir.join("plan.json")),
        "--report",
        arg(&dir.join("plan.html")),
    ]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(
        std::fs::read_to_string(dir.join("plan.html"))
            .unwrap()
            .contains("Expected RMSE")
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Past 128 attributes (once the width of an attribute-set mask): a
/// release of marginals on 140 binary attributes, with `nonneg` (whose
/// residual sets are attribute sets too), answers every cell and returns
/// consistent non-negative tables. Under ε-DP the Kronecker plan measures
/// the 16 cells of the four attributes asked about: its factors on the
/// other 136 are total rows, left out of its support (they once made the
/// release refuse a table of 2¹⁴⁰ cells).
#[test]
fn a_release_past_128_attributes_answers_and_projects() {
    let dir = common::scratch_dir("wide-release");
    let d = 140;
    let names: Vec<String> = (0..d).map(|i| format!("a{i}")).collect();
    let attrs: Vec<String> = names
        .iter()
        .map(|n| format!(r#"{{"name": "{n}", "column": "{n}", "values": ["0", "1"]}}"#))
        .collect();
    std::fs::write(
        dir.join("schema.json"),
        format!(r#"{{"domain": [{}]}}"#, attrs.join(", ")),
    )
    .unwrap();
    let sizes: Vec<String> = names
        .iter()
        .map(|n| format!(r#"{{"name": "{n}", "size": 2}}"#))
        .collect();
    std::fs::write(
        dir.join("spec.json"),
        format!(
            r#"{{"domain": [{}], "queries": [{{"marginal": ["a0"]}}, {{"marginal": ["a139"]}},
              {{"marginal": ["a0", "a139"]}}, {{"marginal": ["a5", "a130", "a139"]}}]}}"#,
            sizes.join(", ")
        ),
    )
    .unwrap();
    let mut records = names.join(",");
    for r in 0..300usize {
        records.push('\n');
        let row: Vec<&str> = (0..d)
            .map(|i| if (r * 7 + i * 13) % 5 < 2 { "1" } else { "0" })
            .collect();
        records.push_str(&row.join(","));
    }
    records.push('\n');
    std::fs::write(dir.join("records.csv"), records).unwrap();
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(1.0).unwrap()).unwrap();
    let release = Release {
        out: Some(dir.join("answers.csv")),
        nonneg: true,
        ..Release::new(
            dir.join("schema.json"),
            dir.join("spec.json"),
            PrivacyBudget::pure(0.5).unwrap(),
            &book,
        )
    };
    let answers = release.run(Data::Records(dir.join("records.csv"))).unwrap();
    assert_eq!(answers.len(), 2 + 2 + 4 + 8);
    // Measured on the four attributes asked about, not over all 140.
    let rows = answers.sidecar()["strategy_rows"].as_f64().unwrap();
    assert!(rows <= f64::from(1u32 << 20), "{rows} strategy rows");
    let queries: Vec<String> = answers.iter().map(|a| a.query).collect();
    assert_eq!(queries[2], "a139 = 0");
    assert_eq!(queries[8], "a5 = 0 & a130 = 0 & a139 = 0");
    let tables =
        dpmm::nonneg::Marginals::of(Workload::load(dir.join("spec.json")).unwrap().structured())
            .unwrap();
    let nonneg = answers.nonneg().unwrap();
    assert!(nonneg.iter().all(|&v| v >= 0.0));
    let scale = nonneg.iter().fold(1.0, |m: f64, v| m.max(v.abs()));
    for (a, b) in tables.project_consistent(nonneg).iter().zip(nonneg) {
        assert!((a - b).abs() <= 1e-6 * scale, "{a} vs {b}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// `nonneg`: the non-negative tables are written beside the answers, every
/// cell ≥ 0, consistent (their own projection onto the consistent tables),
/// their method in the sidecar; a workload with a non-marginal product is
/// refused before the charge.
#[test]
fn a_release_with_nonneg_writes_consistent_non_negative_tables() {
    let spec = r#"{"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 4}],
      "queries": [{"marginals": {"k": 1}}, {"marginal": ["sex", "age"]}]}"#;
    let dir = sex_age_case("report-nonneg", spec);
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(30.0).unwrap()).unwrap();
    let out = dir.join("answers.csv");
    let release = Release {
        out: Some(out.clone()),
        nonneg: true,
        ..Release::new(
            dir.join("schema.json"),
            dir.join("spec.json"),
            // Little budget: many cells come out negative.
            PrivacyBudget::pure(0.01).unwrap(),
            &book,
        )
    };
    let tables =
        dpmm::nonneg::Marginals::of(Workload::load(dir.join("spec.json")).unwrap().structured())
            .unwrap();
    let mut fixed_any = false;
    for _ in 0..5 {
        let answers = release.run(Data::Records(dir.join("records.csv"))).unwrap();
        let nonneg = answers.nonneg().unwrap();
        assert!(nonneg.iter().all(|&v| v >= 0.0));
        let scale = nonneg.iter().fold(1.0, |m: f64, v| m.max(v.abs()));
        for (a, b) in tables.project_consistent(nonneg).iter().zip(nonneg) {
            assert!((a - b).abs() <= 1e-6 * scale, "{a} vs {b}");
        }
        fixed_any |= answers.iter().any(|a| a.answer < 0.0);
        let file = std::fs::read_to_string(dir.join("answers.nonneg.csv")).unwrap();
        let rows: Vec<&str> = file.lines().collect();
        assert_eq!(rows[0], "query,answer");
        assert_eq!(rows.len(), answers.len() + 1);
        // The same query fields as the answers file, each with its estimate.
        let unbiased = std::fs::read_to_string(&out).unwrap();
        for ((row, line), v) in rows[1..].iter().zip(unbiased.lines().skip(1)).zip(nonneg) {
            let (query, value) = row.rsplit_once(',').unwrap();
            assert_eq!(query, line.rsplitn(5, ',').last().unwrap());
            assert_eq!(value.parse::<f64>().unwrap(), *v);
        }
        assert!(
            answers.sidecar()["nonneg"]["method"]
                .as_str()
                .unwrap()
                .contains("projection")
        );
    }
    assert!(fixed_any, "no negative answer to fix in five releases");
    // A prefix query is not a marginal: refused, nothing spent.
    std::fs::write(dir.join("prefix.json"), SEX_AGE_MIXED_SPEC).unwrap();
    let before = std::fs::read(&book).unwrap();
    let refused = Release {
        workload: Some(dir.join("prefix.json").into()),
        ..release
    }
    .run(Data::Records(dir.join("records.csv")));
    assert!(matches!(refused, Err(dpmm::Error::Workload(_))));
    assert_eq!(std::fs::read(&book).unwrap(), before);
    std::fs::remove_dir_all(dir).unwrap();
}

/// A report of more answers than a page can show is refused before the
/// charge (400 × 400 = 160,000 answers).
#[test]
fn a_report_past_its_size_is_refused_before_the_charge() {
    let dir = common::scratch_dir("report-too-large");
    let values: Vec<String> = (0..400).map(|i| format!("\"v{i}\"")).collect();
    let values = values.join(", ");
    std::fs::write(
        dir.join("schema.json"),
        format!(
            r#"{{"domain": [{{"name": "x", "column": "x", "values": [{values}]}},
                {{"name": "y", "column": "y", "values": [{values}]}}]}}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("spec.json"),
        r#"{"domain": [{"name": "x", "size": 400}, {"name": "y", "size": 400}],
            "queries": [{"marginal": ["x", "y"]}]}"#,
    )
    .unwrap();
    std::fs::write(dir.join("records.csv"), "x,y\nv1,v2\n").unwrap();
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(1.0).unwrap()).unwrap();
    let before = std::fs::read(&book).unwrap();
    let release = Release {
        report: Some(dir.join("report.html")),
        ..Release::new(
            dir.join("schema.json"),
            dir.join("spec.json"),
            PrivacyBudget::pure(1.0).unwrap(),
            &book,
        )
    };
    let refused = release.run(Data::Records(dir.join("records.csv")));
    assert!(
        matches!(&refused, Err(dpmm::Error::BadInput(m)) if m.contains("160000 answers")),
        "{:?}",
        refused.err()
    );
    assert_eq!(std::fs::read(&book).unwrap(), before);
    std::fs::remove_dir_all(dir).unwrap();
}
