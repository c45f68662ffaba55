use super::*;

fn case(name: &str, objective: f64, time_ratio: f64) -> CaseResult {
    CaseResult {
        name: name.into(),
        objective,
        time_ratio,
        seconds: 1.0,
    }
}

fn baseline() -> Baseline {
    let objective = |name: &str, objective| ObjectiveRecord {
        name: name.into(),
        objective,
    };
    Baseline {
        reference: String::new(),
        objectives: vec![
            objective("a", 100.0),
            objective("b", 50.0),
            objective("c", 1.0),
        ],
        machines: Vec::new(),
    }
}

fn times() -> MachineRatios {
    let ratio = |name: &str, time_ratio| RatioRecord {
        name: name.into(),
        time_ratio,
    };
    MachineRatios {
        processor: "p".into(),
        note: String::new(),
        cases: vec![ratio("a", 10.0), ratio("b", 2.0), ratio("c", 1.0)],
    }
}

#[test]
fn compare_flags_worse_objectives_slower_runs_and_missing_cases() {
    let baseline = baseline();
    let times = times();
    let current = vec![
        case("a", 100.0 * (1.0 + 2e-6), 10.0),
        case("b", 50.0 * (1.0 + 5e-7), 3.1),
    ];
    let f = compare(&baseline, Some(&times), &current);
    assert_eq!(f.len(), 3, "{f:?}");
    assert!(matches!(&f[0], Regression::Objective { case, .. } if case == "a"));
    assert!(matches!(&f[1], Regression::Time { case, .. } if case == "b"));
    assert_eq!(f[2], Regression::Missing { case: "c".into() });
    assert!(f[0].to_string().starts_with("a: objective"));
    assert!(f[1].to_string().starts_with("b: time 3.1× the reference"));
    assert_eq!(f[2].to_string(), "c: not measured");
    // Without this processor's ratios, times are not compared.
    assert_eq!(compare(&baseline, None, &current).len(), 2);
    let fine = vec![
        case("a", 99.0, 14.9),
        case("b", 50.0, 3.0),
        case("c", 1.0, 1.0),
    ];
    assert!(compare(&baseline, Some(&times), &fine).is_empty());
    // NaN never passes.
    let nan = vec![
        case("a", f64::NAN, 1.0),
        case("b", 50.0, 1.0),
        case("c", 1.0, 1.0),
    ];
    assert_eq!(compare(&baseline, Some(&times), &nan).len(), 1);
}

#[test]
fn cases_too_short_to_time_are_not_time_gated() {
    let short = |seconds| CaseResult {
        seconds,
        ..case("b", 50.0, 30.0)
    };
    let others = [case("a", 100.0, 10.0), case("c", 1.0, 1.0)];
    let with = |b: CaseResult| {
        let mut all = others.to_vec();
        all.push(b);
        compare(&baseline(), Some(&times()), &all)
    };
    assert!(with(short(MIN_TIMED_SECONDS / 2.0)).is_empty());
    assert_eq!(with(short(MIN_TIMED_SECONDS)).len(), 1);
}

#[test]
fn improvements_are_beyond_the_tolerance_only() {
    let current = vec![
        case("a", 100.0 * (1.0 - 2e-6), 10.0),
        case("b", 50.0 * (1.0 - 5e-7), 2.0),
        case("z", 0.0, 0.0),
    ];
    let better = improvements(&baseline(), &current);
    assert_eq!(better.len(), 1, "{better:?}");
    assert!(better[0].starts_with("a: objective improved"));
}

#[test]
fn blessed_ratios_are_medians_of_the_runs() {
    let runs = [
        vec![case("a", 1.0, 5.0), case("b", 2.0, 1.0)],
        vec![case("a", 9.0, 1.0), case("b", 9.0, 3.0)],
        vec![case("a", 9.0, 3.0)],
    ];
    let blessed = median_ratios(&runs);
    // a: median of {5, 1, 3}; b: of {1, 3} the upper middle; the
    // objectives are the first run's.
    assert_eq!(blessed, vec![case("a", 1.0, 3.0), case("b", 2.0, 3.0)]);
}

#[test]
fn every_case_names_its_optimizer_and_model_and_unknown_weakenings_are_refused() {
    for c in cases() {
        let prefix = format!("{}/{}/", c.optimizer, c.privacy.name());
        assert!(c.name.starts_with(&prefix), "{}", c.name);
    }
    for name in ["coa", "pidentity", "esm", "am", "lrm"] {
        assert!(weakened(name).is_ok(), "{name}");
    }
    assert!(matches!(
        weakened("wavelet"),
        Err(DpError::InvalidParameter { name: "worsen", .. })
    ));
    assert!(measure(Some("nonesuch"), false, Some(&[])).is_err());
}
