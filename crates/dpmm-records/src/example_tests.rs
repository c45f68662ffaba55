//! The shipped examples: the embedded fertility extract aggregates under its
//! hand-written schema, and each spec's domain is its schema's domain.
//! (Tests may know the data; commands never print it.)

use std::path::{Path, PathBuf};

use crate::aggregate::{DEFAULT_CELL_LIMIT, Layout, aggregate_records_file};
use crate::schema::Schema;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_schema(name: &str) -> Schema {
    Schema::from_path(&root().join("examples").join(name).join("schema.json"))
        .expect("the example schema is valid")
}

/// `(name, size)` of each `domain` entry of an example's spec.json.
fn spec_domain(name: &str) -> Vec<(String, usize)> {
    let path = root().join("examples").join(name).join("spec.json");
    let text = std::fs::read_to_string(&path).expect("spec.json");
    let spec: serde_json::Value = serde_json::from_str(&text).expect("spec is JSON");
    spec["domain"]
        .as_array()
        .expect("a domain list")
        .iter()
        .map(|a| {
            let name = a["name"].as_str().expect("name").to_string();
            let size = a["size"].as_u64().expect("size") as usize;
            (name, size)
        })
        .collect()
}

fn schema_domain(schema: &Schema) -> Vec<(String, usize)> {
    schema
        .domain()
        .attributes()
        .iter()
        .map(|a| (a.name.clone(), a.size))
        .collect()
}

#[test]
fn each_spec_declares_its_schema_domain() {
    for name in ["fertility1980", "cps1988"] {
        assert_eq!(
            spec_domain(name),
            schema_domain(&example_schema(name)),
            "{name}"
        );
    }
}

#[test]
fn the_embedded_fertility_extract_aggregates_under_the_example_schema() {
    let schema = example_schema("fertility1980");
    // 2·2·2·15·2·2·2·53 = 50,880 cells: the full histogram is kept.
    let domain = schema.domain();
    assert_eq!(domain.cells_f64(), 50_880.0);
    let data = root().join("datasets/fertility1980.csv.gz");
    let full = Layout::full(&domain, DEFAULT_CELL_LIMIT).expect("fits");
    let counts = aggregate_records_file(&data, &schema, &full).expect("every row is in the domain");
    let x = &counts.tables()[0].counts;
    // Every row is kept: the total is the row count in ../shared/datasets/README.md.
    assert_eq!(x.iter().sum::<u64>(), 254_654);

    // The 28 two-way marginals, streamed directly, equal the full
    // histogram summed (brute force over the 50,880 cells).
    let d = domain.attributes().len();
    let pairs: Vec<Vec<usize>> = (0..d)
        .flat_map(|i| (i + 1..d).map(move |j| vec![i, j]))
        .collect();
    assert_eq!(pairs.len(), 28);
    let layout = Layout::marginals(&domain, &pairs, DEFAULT_CELL_LIMIT).expect("fits");
    let marginals = aggregate_records_file(&data, &schema, &layout).expect("marginals");
    let shape = domain.shape();
    for (pair, table) in pairs.iter().zip(marginals.tables()) {
        let (i, j) = (pair[0], pair[1]);
        let mut want = vec![0u64; shape[i] * shape[j]];
        let mut index = vec![0usize; d];
        for &count in x {
            want[index[i] * shape[j] + index[j]] += count;
            // Next cell index, last attribute fastest.
            for k in (0..d).rev() {
                index[k] += 1;
                if index[k] < shape[k] {
                    break;
                }
                index[k] = 0;
            }
        }
        assert_eq!(table.counts, want, "marginal {pair:?}");
    }
}

#[test]
fn the_cps_extract_aggregates_under_its_binned_schema() {
    // Not committed (../shared/datasets/README.md): checked where it is.
    let data = root().join("../shared/datasets/records/cps1988.csv");
    if !data.exists() {
        return;
    }
    let schema = example_schema("cps1988");
    let layout = Layout::full(&schema.domain(), DEFAULT_CELL_LIMIT).expect("fits");
    let counts = aggregate_records_file(&data, &schema, &layout).expect("no row is an error");
    let kept: u64 = counts.tables()[0].counts.iter().sum();
    // Rows outside the wage or experience bins are dropped, none added.
    assert!(kept > 0 && kept <= 28_155);
}
