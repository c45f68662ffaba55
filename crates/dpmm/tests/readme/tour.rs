use std::path::Path;

use dpmm::{Data, PrivacyBudget, Release, ledger};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A fresh folder for this run's ledger and answers.
    let dir = std::env::temp_dir().join(format!("dpmm-tour-{}", std::process::id()));
    // The privacy ledger of the dataset: ε = 1 in total, ever.
    let book = dir.join("ledger.jsonl");
    ledger::create(&book, PrivacyBudget::pure(1.0)?)?;
    // Every 2-way marginal of the embedded 1980 census extract at ε = 1:
    // planned, charged to the ledger before any noise is drawn, measured
    // with exact discrete Laplace noise, reconstructed by least squares.
    let mut release = Release::new(
        Path::new("examples/fertility1980/schema.json"),
        Path::new("examples/fertility1980/spec.json"),
        PrivacyBudget::pure(1.0)?,
        &book,
    );
    release.out = Some(dir.join("answers.csv")); // and its sidecar, answers.csv.json
    let answers = release.run(Data::Records("datasets/fertility1980.csv.gz".into()))?;
    for a in answers.iter().take(5) {
        println!("{:<36} {:>9.1} in [{:.1}, {:.1}]", a.query, a.answer, a.ci_low, a.ci_high);
    }
    println!("{} answers written to {}", answers.len(), dir.display());
    Ok(())
}
