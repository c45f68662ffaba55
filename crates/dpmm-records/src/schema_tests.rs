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
            {"name": "race", "values": ["white", "black", "asian", "other"], "missing": "drop"},
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
    assert_eq!((age.outside, age.missing), (Policy::Drop, Policy::Error));
    // column defaults to the name; policies default to error.
    assert_eq!(race.column, "race");
    assert_eq!((race.outside, race.missing), (Policy::Error, Policy::Drop));
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
fn every_malformed_schema_has_its_own_error() {
    let s = |x: &str| x.to_string();
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
        err(r#"{"name": "", "values": ["a"]}"#),
        SchemaError::EmptyName {
            position: 0,
            field: "name"
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "column": "", "values": ["a"]}"#),
        SchemaError::EmptyName {
            position: 0,
            field: "column"
        }
    );
    assert_eq!(
        Schema::from_json(
            r#"{"domain": [{"name": "a", "values": ["x"]}, {"name": "a", "values": ["y"]}]}"#
        ),
        Err(SchemaError::DuplicateName(s("a")))
    );
    assert_eq!(err(r#"{"name": "a"}"#), SchemaError::NoValuesOrBins(s("a")));
    assert_eq!(
        err(r#"{"name": "a", "values": ["x"], "bins": [0, 1]}"#),
        SchemaError::BothValuesAndBins(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "values": []}"#),
        SchemaError::EmptyValues(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "values": ["x", "y", "x"]}"#),
        SchemaError::DuplicateValue {
            attribute: s("a"),
            value: s("x")
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "values": ["x", 2]}"#),
        SchemaError::NonStringValue {
            attribute: s("a"),
            index: 1
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "values": ["x", "NA"]}"#),
        SchemaError::ValueIsMissingMarker {
            attribute: s("a"),
            value: s("NA")
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "values": ["x"], "outside": "ignore"}"#),
        SchemaError::UnknownPolicy {
            attribute: s("a"),
            field: "outside",
            found: s("ignore")
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "values": ["x"], "missing": "Drop"}"#),
        SchemaError::UnknownPolicy {
            attribute: s("a"),
            field: "missing",
            found: s("Drop")
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": [3]}"#),
        SchemaError::TooFewEdges(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": [0, 5, 5, 9]}"#),
        SchemaError::UnsortedEdges {
            attribute: s("a"),
            index: 2
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": [0, 5, 4]}"#),
        SchemaError::UnsortedEdges {
            attribute: s("a"),
            index: 2
        }
    );
    assert!(matches!(
        err(r#"{"name": "a", "bins": [0, "5"]}"#),
        SchemaError::MalformedBins { .. }
    ));
    assert!(matches!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 5}}"#),
        SchemaError::MalformedBins { .. }
    ));
    assert!(matches!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 1, "step": 2}}"#),
        SchemaError::MalformedBins { .. }
    ));
    assert!(matches!(
        err(r#"{"name": "a", "bins": 7}"#),
        SchemaError::MalformedBins { .. }
    ));
    assert_eq!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 0}}"#),
        SchemaError::BadWidth(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": -1}}"#),
        SchemaError::BadWidth(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": {"start": 5, "stop": 5, "width": 1}}"#),
        SchemaError::EmptyRange(s("a"))
    );
    assert_eq!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 5, "width": 2}}"#),
        SchemaError::FractionalBinCount(s("a"))
    );
    assert!(matches!(
        err(r#"{"name": "a", "bins": {"start": 0, "stop": 1e12, "width": 1}}"#),
        SchemaError::TooManyBins { .. }
    ));
    assert_eq!(
        err(r#"{"name": "a", "values": ["x", "y"], "size": 3}"#),
        SchemaError::SizeMismatch {
            attribute: s("a"),
            declared: 3,
            actual: 2
        }
    );
    assert_eq!(
        err(r#"{"name": "a", "values": "TODO: fill in"}"#),
        SchemaError::Placeholder(s("a"))
    );
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
