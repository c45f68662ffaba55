//! Cooperative cancellation through the library ([`dp_core::interrupt`]):
//! an optimization stops at the iteration after its token is triggered, a
//! plan and a release return [`Error::Interrupted`], and a release
//! interrupted before its charge spends nothing.

#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::io::Read;

use common::{SEX_AGE_MIXED_SPEC, sex_age_case};
use dpmm::dp_core::DpError;
use dpmm::dp_core::interrupt::Interrupt;
use dpmm::dp_opt::{Event, FnObserver};
use dpmm::dp_opt::{Params, PrivacyModel};
use dpmm::{Data, Error, Plan, PlanObjective, PrivacyBudget, Release, Rows, Workload, ledger};

/// ESM on AllRange(64) under `token`, `on_iteration` called at every
/// iteration's event.
fn esm_run(token: &Interrupt, mut on_iteration: impl FnMut()) -> dpmm::dp_core::Result<()> {
    let w = dpmm::matrix::workload("all_range", 64).unwrap();
    token
        .run(|| {
            dpmm::matrix::optimize(
                w.as_ref(),
                "esm",
                PrivacyModel::Approx,
                &Params::default(),
                &mut FnObserver(|e: &Event<'_>| {
                    if matches!(e, Event::Iteration { .. }) {
                        on_iteration();
                    }
                }),
            )
        })
        .map(drop)
}

/// ESM on AllRange(64) takes hundreds of gradient steps; triggered from
/// its first iteration's event, it takes no second one, and the caller
/// gets the interrupt rather than a strategy.
#[test]
fn an_optimization_stops_at_the_iteration_after_the_trigger() {
    let token = Interrupt::new();
    // Untriggered, the same run goes on well past one iteration.
    let mut full = 0usize;
    assert!(esm_run(&token, || full += 1).is_ok());
    assert!(full > 100, "{full} iterations: too few to show a cut");

    let mut iterations = 0usize;
    let cut = esm_run(&token, || {
        iterations += 1;
        token.trigger();
    });
    assert_eq!(cut.err(), Some(DpError::Interrupted));
    assert_eq!(iterations, 1);
}

/// A plan under a triggered token is refused as interrupted, under both
/// privacy models (the ε-DP search runs rivals whose cut would otherwise
/// go unseen).
#[test]
fn a_plan_under_a_triggered_token_is_interrupted() {
    let dir = sex_age_case("cancel-plan", SEX_AGE_MIXED_SPEC);
    let workload = Workload::load(dir.join("spec.json")).unwrap();
    let token = Interrupt::new();
    token.trigger();
    for budget in [
        PrivacyBudget::pure(1.0).unwrap(),
        PrivacyBudget::approx(1.0, 1e-6).unwrap(),
    ] {
        let planned =
            token.run(|| Plan::optimize(&workload, budget, PlanObjective::TotalVariance, None));
        assert_eq!(planned.err(), Some(Error::Interrupted), "{budget:?}");
        // The same call without the token plans.
        assert!(Plan::optimize(&workload, budget, PlanObjective::TotalVariance, None).is_ok());
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Records that trigger the token as they are read.
struct TriggerOnRead {
    bytes: std::io::Cursor<Vec<u8>>,
    token: Interrupt,
}

impl Read for TriggerOnRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.token.trigger();
        self.bytes.read(buf)
    }
}

/// A release interrupted while it reads its records (before its charge)
/// returns the interrupt and leaves the ledger as it was, byte for byte;
/// the same release uninterrupted is charged.
#[test]
fn a_release_interrupted_before_its_charge_spends_nothing() {
    let dir = sex_age_case("cancel-release", SEX_AGE_MIXED_SPEC);
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(2.0).unwrap()).unwrap();
    let records = std::fs::read(dir.join("records.csv")).unwrap();
    let release = Release::new(
        dir.join("schema.json"),
        dir.join("spec.json"),
        PrivacyBudget::pure(1.0).unwrap(),
        &book,
    );
    let before = std::fs::read(&book).unwrap();
    let token = Interrupt::new();
    let data = Data::Csv {
        reader: Box::new(TriggerOnRead {
            bytes: std::io::Cursor::new(records.clone()),
            token: token.clone(),
        }),
        name: "records".into(),
        rows: Rows::Records,
    };
    let e = token.run(|| release.run(data)).err().unwrap();
    assert_eq!(e, Error::Interrupted);
    assert_eq!(e.to_string(), "interrupted: nothing was spent");
    assert_eq!(std::fs::read(&book).unwrap(), before);

    let data = Data::Csv {
        reader: Box::new(std::io::Cursor::new(records)),
        name: "records".into(),
        rows: Rows::Records,
    };
    assert!(Interrupt::new().run(|| release.run(data)).is_ok());
    assert_eq!(ledger::status(&book).unwrap().releases, 1);
    std::fs::remove_dir_all(dir).unwrap();
}
