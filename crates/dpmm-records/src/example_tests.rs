//! The shipped examples: the embedded fertility extract aggregates under its
//! hand-written schema, and each spec's domain is its schema's domain.
//! (Tests may know the data; commands never print it.)

use std::path::{Path, PathBuf};

use dp_workloads::spec::{k_subsets, load_spec};

use crate::schema::Schema;
use crate::{DEFAULT_CELL_LIMIT, Layout, Rows, aggregate_file};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example_schema(name: &str) -> Schema {
    Schema::from_path(&root().join("examples").join(name).join("schema.json"))
        .expect("the example schema is valid")
}

#[test]
fn each_spec_loads_and_declares_its_schema_domain() {
    for name in ["fertility1980", "cps1988"] {
        let spec = load_spec(&root().join("examples").join(name).join("spec.json"))
            .expect("the example spec is valid");
        assert_eq!(spec.domain(), example_schema(name).domain(), "{name}");
    }
}

#[test]
fn the_embedded_fertility_extract_aggregates_under_the_example_schema() {
    let schema = example_schema("fertility1980");
    // 2·2·2·15·2·2·2·53 = 50,880 cells: the full histogram is kept.
    let domain = schema.domain();
    assert_eq!(domain.cells_f64(), 50_880.0);
    let data = root().join("datasets/fertility1980.csv.gz");
    let full = Layout::full(domain, DEFAULT_CELL_LIMIT).expect("fits");
    let counts =
        aggregate_file(&data, &schema, &full, Rows::Records).expect("every row is in the domain");
    let x = &counts.tables()[0].counts;
    // Every row is kept: the total is the row count in ../shared/datasets/README.md.
    assert_eq!(x.iter().sum::<u64>(), 254_654);

    // The 28 two-way marginals, streamed directly, equal the full
    // histogram summed (brute force over the 50,880 cells).
    // The spec's `marginals: {k: 2}`, in the spec's order.
    let d = domain.attributes().len();
    let masks = k_subsets(d, 2).expect("28 pairs");
    let layout = Layout::marginal_masks(domain, &masks, DEFAULT_CELL_LIMIT).expect("fits");
    let pairs: Vec<Vec<usize>> = (0..d)
        .flat_map(|i| (i + 1..d).map(move |j| vec![i, j]))
        .collect();
    assert_eq!(layout.tables(), pairs.as_slice());
    let marginals = aggregate_file(&data, &schema, &layout, Rows::Records).expect("marginals");
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
    // Not committed (../shared/datasets/README.md): checked where it is,
    // and required where CI says the datasets are beside the project.
    let data = root().join("../shared/datasets/records/cps1988.csv");
    if !data.exists() {
        assert_ne!(
            std::env::var("DPMM_REQUIRE_DATASETS").as_deref(),
            Ok("1"),
            "{} is missing",
            data.display()
        );
        return;
    }
    let schema = example_schema("cps1988");
    let layout = Layout::full(schema.domain(), DEFAULT_CELL_LIMIT).expect("fits");
    let counts =
        aggregate_file(&data, &schema, &layout, Rows::Records).expect("no row is an error");
    let kept: u64 = counts.tables()[0].counts.iter().sum();
    // Brute force: a row is kept when its wage lies in [50, 2500) and its
    // experience in [-5, 70), the two `outside: drop` attributes (education
    // is `error`, and the aggregation above raised none).
    let mut reader = csv::Reader::from_path(&data).expect("readable");
    let mut want = 0u64;
    for row in reader.records() {
        let row = row.expect("well-formed");
        let wage: f64 = row[0].parse().expect("numeric wage");
        let experience: f64 = row[2].parse().expect("numeric experience");
        if (50.0..2500.0).contains(&wage) && (-5.0..70.0).contains(&experience) {
            want += 1;
        }
    }
    assert_eq!(kept, want);
    assert!(want > 20_000, "the bins keep most of the 28,155 rows");
}
