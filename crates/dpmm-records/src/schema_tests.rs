use super::*;

fn one(attribute: &str) -> Result<Schema, SchemaError> {
    Schema::from_json(&format!("{{\"domain\": [{attribute}]}}"))
}

fn err(attribute: &str) -> SchemaError {
    match one(attribute) {
        Ok(_) => panic!("accepted: {attribute}"),
        Err(e) => e,
    }
}

#[test]
fn a_valid_schema_has_the_stated_domain_and_defaults() {
    let schema = Schema::from_json(
        r#"{"note": "from the codebook", "domain": [
            {"name": "age", "column": "AGEP", "bins": [21, 24, 27, 30, 33, 36], "outside": "drop"},
            {"name": "race", "values": ["white", "black", "asian", "other"], "missing": "error"},
            {"name": "work", "column": "work", "bins": {"start": 0, "stop": 53, "width": 1}, "size": 53}
        ]}"#,
    )
    .expect("valid");
    let domain = schema.domain();
    assert_eq!(domain.shape(), vec![5, 4, 53]);
    assert_eq!(domain.cells_f64(), 5.0 * 4.0 * 53.0);
    let names: Vec<&str> = domain
        .attributes()
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["age", "race", "work"]);
    let [age, race, work] = schema.attributes() else {
        panic!("three attributes")
    };
    assert_eq!(age.column, "AGEP");
    assert_eq!((age.outside, age.missing), (Policy::Drop, Policy::Drop));
    assert_eq!(age.unparsable, Policy::Drop);
    // column defaults to the name; policies default to drop (the stable
    // choice), error only where asked for.
    assert_eq!(race.column, "race");
    assert_eq!((race.outside, race.missing), (Policy::Drop, Policy::Error));
    assert_eq!(schema.malformed(), Policy::Drop);
    let Encoding::Bins { edges } = &work.encoding else {
        panic!("bins")
    };
    let expected: Vec<f64> = (0..=53).map(f64::from).collect();
    assert_eq!(edges, &expected);
    assert_eq!(schema.missing_markers(), ["", "NA"]);
    assert_eq!(schema.position("work"), Ok(2));
    assert_eq!(
        schema.position("wage"),
        Err(SchemaError::UnknownAttribute("wage".into()))
    );
}

#[test]
fn fractional_widths_give_exact_edges_at_start_and_stop() {
    let schema = one(r#"{"name": "x", "bins": {"start": -1, "stop": 0.5, "width": 0.1}}"#)
        .expect("15 bins of 0.1");
    let Encoding::Bins { edges } = &schema.attributes()[0].encoding else {
        panic!("bins")
    };
    assert_eq!(edges.len(), 16);
    assert_eq!((edges[0], edges[15]), (-1.0, 0.5));
}

#[test]
fn malformed_documents_have_their_own_error() {
    assert!(matches!(Schema::from_json("{"), Err(SchemaError::Json(_))));
    assert!(matches!(
        Schema::from_json(r#"{"domain": [], "typo": 1}"#),
        Err(SchemaError::Json(_))
    ));
    assert_eq!(
        Schema::from_json(r#"{"domain": []}"#),
        Err(SchemaError::EmptyDomain)
    );
    assert_eq!(
        Schema::from_json(
            r#"{"domain": [{"name": "a", "values": ["x"]}, {"name": "a", "values": ["y"]}]}"#
        ),
        Err(SchemaError::DuplicateName("a".into()))
    );
}

/// The unknown-policy error for `field` = `found` on attribute "a".
fn on_a(field: &'static str, found: &str) -> SchemaError {
    SchemaError::UnknownPolicy {
        attribute: "a".into(),
        field,
        found: found.into(),
    }
}

/// Malformed categorical attributes (and the fields every attribute has),
/// each with the one error it must give.
fn malformed_categorical() -> Vec<(&'static str, SchemaError)> {
    let a = || "a".to_string();
    vec![
        (
            r#"{"name": "", "values": ["a"]}"#,
            SchemaError::EmptyName {
                position: 0,
                field: "name",
            },
        ),
        (
            r#"{"name": "a", "column": "", "values": ["a"]}"#,
            SchemaError::EmptyName {
                position: 0,
                field: "column",
            },
        ),
        (r#"{"name": "a"}"#, SchemaError::NoValuesOrBins(a())),
        (
            r#"{"name": "a", "values": ["x"], "bins": [0, 1]}"#,
            SchemaError::BothValuesAndBins(a()),
        ),
        (
            r#"{"name": "a", "values": []}"#,
            SchemaError::EmptyValues(a()),
        ),
        (
            r#"{"name": "a", "values": ["x", "y", "x"]}"#,
            SchemaError::DuplicateValue {
                attribute: a(),
                value: "x".into(),
            },
        ),
        (
            r#"{"name": "a", "values": ["x", 2]}"#,
            SchemaError::NonStringValue {
                attribute: a(),
                index: 1,
            },
        ),
        (
            r#"{"name": "a", "values": ["x", "NA"]}"#,
            SchemaError::ValueIsMissingMarker {
                attribute: a(),
                value: "NA".into(),
                marker: "NA".into(),
            },
        ),
        (
            r#"{"name": "a", "values": ["27", "x", "27.0"]}"#,
            SchemaError::SameValue {
                attribute: a(),
                first: "27".into(),
                second: "27.0".into(),
            },
        ),
        (
            r#"{"name": "a", "values": ["True", "true"]}"#,
            SchemaError::SameValue {
                attribute: a(),
                first: "True".into(),
                second: "true".into(),
            },
        ),
        (
            r#"{"name": "a", "values": ["x", "nan"]}"#,
            SchemaError::NanValue {
                attribute: a(),
                value: "nan".into(),
            },
        ),
        (
            r#"{"name": "a", "values": ["x"], "outside": "ignore"}"#,
            on_a("outside", "ignore"),
        ),
        (
            r#"{"name": "a", "values": ["x"], "missing": "Drop"}"#,
            on_a("missing", "Drop"),
        ),
        (
            r#"{"name": "a", "values": ["x"], "unparsable": "drop"}"#,
            SchemaError::UnparsableOnCategorical(a()),
        ),
        (
            r#"{"name": "a", "values": ["x", "y"], "size": 3}"#,
            SchemaError::SizeMismatch {
                attribute: a(),
                declared: 3,
                actual: 2,
            },
        ),
        (
            r#"{"name": "a", "values": "TODO: fill in"}"#,
            SchemaError::Placeholder(a()),
        ),
    ]
}

/// Malformed binned attributes, each with the one error it must give.
fn malformed_bins() -> Vec<(&'static str, SchemaError)> {
    let a = || "a".to_string();
    let unsorted_at_2 = || SchemaError::UnsortedEdges {
        attribute: a(),
        index: 2,
    };
    vec![
        (
            r#"{"name": "a", "bins": [0, 1], "unparsable": "skip"}"#,
            on_a("unparsable", "skip"),
        ),
        (
            r#"{"name": "a", "bins": [3]}"#,
            SchemaError::TooFewEdges(a()),
        ),
        (r#"{"name": "a", "bins": [0, 5, 5, 9]}"#, unsorted_at_2()),
        (r#"{"name": "a", "bins": [0, 5, 4]}"#, unsorted_at_2()),
        (
            r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 0}}"#,
            SchemaError::BadWidth(a()),
        ),
        (
            r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": -1}}"#,
            SchemaError::BadWidth(a()),
        ),
        (
            r#"{"name": "a", "bins": {"start": 5, "stop": 5, "width": 1}}"#,
            SchemaError::EmptyRange(a()),
        ),
        (
            r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 2}}"#,
            SchemaError::FractionalBinCount(a()),
        ),
    ]
}

#[test]
fn every_malformed_attribute_has_its_own_error() {
    for (attribute, expected) in malformed_categorical().into_iter().chain(malformed_bins()) {
        assert_eq!(err(attribute), expected, "{attribute}");
    }
}

/// Errors whose payload is the parser's message: only the variant is
/// checked.
#[test]
fn malformed_bins_and_unknown_fields_are_refused_with_their_variant() {
    for attribute in [
        r#"{"name": "a", "bins": [0, "5"]}"#,
        r#"{"name": "a", "bins": {"start": 0, "stop": 5}}"#,
        r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 1, "step": 2}}"#,
        r#"{"name": "a", "bins": 7}"#,
    ] {
        assert!(
            matches!(err(attribute), SchemaError::MalformedBins { .. }),
            "{attribute}"
        );
    }
    assert!(matches!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 1e12, "width": 1}}"#),
        SchemaError::TooManyBins { .. }
    ));
    assert!(matches!(
        err(r#"{"name": "a", "values": ["x"], "colum": "b"}"#),
        SchemaError::Json(_)
    ));
}

#[test]
fn schemas_built_in_code_are_validated_too() {
    let attribute = |edges: Vec<f64>| AttributeSchema {
        name: "a".into(),
        column: "a".into(),
        encoding: Encoding::Bins { edges },
        outside: Policy::Error,
        unparsable: Policy::Error,
        missing: Policy::Error,
    };
    assert_eq!(
        Schema::new(vec![attribute(vec![0.0, f64::NAN])], vec![]),
        Err(SchemaError::NonFiniteEdge {
            attribute: "a".into(),
            index: 1
        })
    );
    assert_eq!(
        Schema::new(vec![attribute(vec![0.0, f64::INFINITY])], vec![]),
        Err(SchemaError::NonFiniteEdge {
            attribute: "a".into(),
            index: 1
        })
    );
    assert!(Schema::new(vec![attribute(vec![0.0, 1.0])], vec![]).is_ok());
}

#[test]
fn custom_missing_markers_replace_the_defaults() {
    let schema = Schema::from_json(
        r#"{"missing_markers": ["?"], "domain": [{"name": "a", "values": ["NA", "x"]}]}"#,
    )
    .expect("NA is a value when it is not a marker");
    assert_eq!(schema.missing_markers(), ["?"]);
    assert_eq!(schema.domain().shape(), vec![2]);
}

#[test]
fn the_malformed_policy_is_schema_wide_and_drop_by_default() {
    let with = |policy: &str| {
        Schema::from_json(&format!(
            r#"{{"malformed": {policy}, "domain": [{{"name": "a", "values": ["x"]}}]}}"#
        ))
    };
    assert_eq!(with("\"drop\"").map(|s| s.malformed()), Ok(Policy::Drop));
    assert_eq!(with("\"error\"").map(|s| s.malformed()), Ok(Policy::Error));
    assert_eq!(
        with("\"skip\""),
        Err(SchemaError::UnknownMalformedPolicy("skip".into()))
    );
    assert!(matches!(with("1"), Err(SchemaError::Json(_))));
    assert_eq!(
        one(r#"{"name": "a", "values": ["x"]}"#).map(|s| s.malformed()),
        Ok(Policy::Drop)
    );
}
