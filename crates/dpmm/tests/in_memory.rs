//! The library without files: schemas, workload specs and plans held in
//! memory (as the Python package holds them) give the same answers and
//! figures as the files they came from; a plan file read back states the
//! figures of the plan that wrote it, recomputed; an overspend is its
//! own error kind.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::path::{Path, PathBuf};

use common::{SEX_AGE_MIXED_SPEC, sex_age_case};
use dpmm::{
    Data, Document, Error, Plan, PlanObjective, PrivacyBudget, Release, SavedPlan, Workload, ledger,
};

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fertility1980")
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs()
}

/// A plan saved and read back states the same privacy model, objective,
/// lower bound and per-group RMSE as the plan that wrote it, under both
/// models: the figures read back are recomputed from the kernel's
/// quantization of the strategy, so they agree to the plan file's
/// tolerance, not bit for bit.
#[test]
fn a_saved_plan_states_the_figures_of_the_plan_that_wrote_it() {
    let dir = common::scratch_dir("in-memory-saved-plan");
    // The census extract's 2-way marginals, and the same with its 1-way
    // marginals at weight 3 (whose answers are released unweighted: the
    // plan's RMSE is per answer as released, as the sidecar's is).
    let mut weighted: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(examples().join("spec.json")).unwrap())
            .unwrap();
    weighted["queries"] = serde_json::json!([
        {"marginals": {"k": 1}, "weight": 3.0},
        {"marginals": {"k": 2}}
    ]);
    let workloads = [
        Workload::load(examples().join("spec.json")).unwrap(),
        Workload::load(Document::text(weighted.to_string(), "weighted")).unwrap(),
    ];
    let pure = PrivacyBudget::pure(0.7).unwrap();
    let approx = PrivacyBudget::approx(1.3, 1e-7).unwrap();
    let cases = [
        (&workloads[0], pure),
        (&workloads[0], approx),
        (&workloads[1], pure),
        (&workloads[1], approx),
    ];
    for (workload, budget) in cases {
        let plan = Plan::optimize(workload, budget, PlanObjective::TotalVariance, None).unwrap();
        let path = dir.join("plan.json");
        plan.save(&path).unwrap();
        let planned = plan.summary();
        for doc in [
            Document::from(path.as_path()),
            Document::text(plan.to_json().unwrap(), "the plan"),
        ] {
            let saved = SavedPlan::load(doc, None).unwrap();
            let back = saved.summary();
            assert_eq!(back.privacy, planned.privacy);
            assert_eq!(back.objective_name, planned.objective_name);
            assert_eq!(back.budget, budget);
            let (f, g) = (back.objective.unwrap(), planned.objective.unwrap());
            assert!(close(f, g, 1e-3), "{f} vs {g}");
            // Marginals: the SVD bound is in closed form both ways.
            let (b, c) = (back.lower_bound.unwrap(), planned.lower_bound.unwrap());
            assert!(close(b, c, 1e-9), "{b} vs {c}");
            assert_eq!(back.groups.len(), planned.groups.len());
            for (x, y) in back.groups.iter().zip(&planned.groups) {
                assert_eq!((&x.label, x.queries), (&y.label, y.queries));
                assert!(
                    close(x.rmse, y.rmse, 1e-3),
                    "{}: {} vs {}",
                    x.label,
                    x.rmse,
                    y.rmse
                );
            }
            assert_eq!(saved.workload().spec(), workload.spec());
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A plan file whose figures were edited is refused when read back, and
/// one without the workload or the budget `dpmm plan` writes says so.
#[test]
fn an_edited_or_incomplete_plan_file_is_refused() {
    let workload = Workload::load(examples().join("spec.json")).unwrap();
    let budget = PrivacyBudget::pure(1.0).unwrap();
    let plan = Plan::optimize(&workload, budget, PlanObjective::TotalVariance, None).unwrap();
    let mut file: serde_json::Value = serde_json::from_str(&plan.to_json().unwrap()).unwrap();
    let objective = file["objective"].as_f64().unwrap();
    let load = |v: &serde_json::Value| SavedPlan::load(Document::text(v.to_string(), "p"), None);
    let mut edited = file.clone();
    edited["objective"] = (objective * 0.5).into();
    let e = load(&edited).err().unwrap();
    assert!(
        matches!(&e, Error::BadInput(m) if m.contains("is not its strategy's")),
        "{e}"
    );
    let mut no_budget = file.clone();
    no_budget.as_object_mut().unwrap().remove("planned_at");
    let e = load(&no_budget).err().unwrap();
    assert!(e.to_string().contains("budget it was planned at"), "{e}");
    file.as_object_mut().unwrap().remove("workload");
    let e = load(&file).err().unwrap();
    assert!(e.to_string().contains("carries no workload"), "{e}");
}

/// The same release from files and from text in memory (schema, spec and
/// plan as strings, records streamed in): the same queries, and, at a
/// large ε, answers within the noise of each other.
#[test]
fn documents_in_memory_release_like_their_files() {
    let dir = sex_age_case("in-memory-release", SEX_AGE_MIXED_SPEC);
    let text = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(100.0).unwrap()).unwrap();
    let budget = PrivacyBudget::pure(20.0).unwrap();
    let from_files = Release::new(
        dir.join("schema.json"),
        dir.join("spec.json"),
        budget,
        &book,
    )
    .run(Data::Records(dir.join("records.csv")))
    .unwrap();
    let workload = Workload::load(Document::text(text("spec.json"), "spec")).unwrap();
    let plan = Plan::optimize(&workload, budget, PlanObjective::TotalVariance, None).unwrap();
    let records = text("records.csv");
    let mut in_memory = Release::new(
        Document::text(text("schema.json"), "schema"),
        workload.document("spec"),
        budget,
        &book,
    );
    // Planned now from the spec, and measured from the plan's text.
    for plan_text in [None, Some(plan.to_json().unwrap())] {
        in_memory.plan = plan_text.map(|t| Document::text(t, "plan"));
        let answers = in_memory
            .run(Data::Csv {
                reader: Box::new(std::io::Cursor::new(records.clone().into_bytes())),
                name: "records".into(),
                rows: dpmm::Rows::Records,
            })
            .unwrap();
        assert_eq!(answers.len(), from_files.len());
        for (a, b) in answers.iter().zip(from_files.iter()) {
            assert_eq!(a.query, b.query);
            // Two independent draws: within 10 standard errors of each other.
            let sd = (a.std_error.powi(2) + b.std_error.powi(2)).sqrt();
            assert!((a.answer - b.answer).abs() < 10.0 * sd, "{}", a.query);
        }
    }
    // A bad document in memory is named by the name it was given.
    let bad = Release::new(
        Document::text("{", "my schema"),
        workload.document("spec"),
        budget,
        &book,
    );
    let e = bad
        .run(Data::Records(dir.join("records.csv")))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::Schema(m) if m.contains("my schema")),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// An overspend is `Error::BudgetExceeded`, and spends nothing.
#[test]
fn an_overspend_is_its_own_kind_and_spends_nothing() {
    let (dir, book, before) =
        common::sex_age_case_with_ledger("in-memory-overspend", SEX_AGE_MIXED_SPEC, 1.0);
    let greedy = Release::new(
        dir.join("schema.json"),
        dir.join("spec.json"),
        PrivacyBudget::pure(1.5).unwrap(),
        &book,
    );
    let e = greedy
        .run(Data::Records(dir.join("records.csv")))
        .err()
        .unwrap();
    assert!(matches!(e, Error::BudgetExceeded(_)), "{e}");
    assert_eq!(std::fs::read(&book).unwrap(), before);
    std::fs::remove_dir_all(dir).unwrap();
}
