//! `cargo xtask bench peers`: prints issue 21's side-by-side table (the
//! measurement is [`dp_bench::peers`]). Without `HDMM_SRC` (or a Python
//! with numpy and scipy) only dpmm's columns are filled.

use dp_bench::peers::{Hdmm, PEER_WORKLOADS, PeerRow, load_average, measure};
use dp_core::{DpError, Result};
use dp_opt::PrivacyModel;

fn cell(row: &PeerRow) -> String {
    let ours = format!("{:.2} s", row.ours.seconds);
    match (row.peer, row.time_ratio(), row.objective_ratio()) {
        (Some(p), Some(t), Some(o)) => {
            format!(
                "{ours} vs {:.2} s — {t:.2}×, objective ratio {o:.4}",
                p.seconds
            )
        }
        _ => format!("{ours} (no HDMM), objective {:.6e}", row.ours.objective),
    }
}

/// Runs the table for `sizes` and the columns of `models`; one JSON
/// object per row with `json`.
pub fn run(sizes: &[usize], models: &[PrivacyModel], json: bool) -> Result<()> {
    let hdmm = Hdmm::from_env();
    let dir = std::env::temp_dir().join(format!("dpmm-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| DpError::Io(format!("{}: {e}", dir.display())))?;
    let load = load_average();
    if !json {
        println!(
            "time ratio = HDMM's seconds / ours (> 1: dpmm faster); objective ratio = ours / HDMM's (< 1: dpmm lower error); load average at start {}",
            load.map_or("?".into(), |l| format!("{l:.1}"))
        );
        println!(
            "| workload | n | (ε,δ): coa vs HDMM McKennaConvex | ε-DP: epsilon-default vs HDMM PIdentity |"
        );
        println!("|---|---|---|---|");
    }
    for &n in sizes {
        for kind in PEER_WORKLOADS {
            let rows = measure(kind, n, models, hdmm.as_ref(), &dir)?;
            if json {
                for row in &rows {
                    let text =
                        serde_json::to_string(row).map_err(|e| DpError::Io(e.to_string()))?;
                    println!("{text}");
                }
            } else {
                let column = |model: PrivacyModel| {
                    rows.iter()
                        .find(|r| r.privacy == model.name())
                        .map_or("not run".into(), cell)
                };
                println!(
                    "| {kind} | {n} | {} | {} |",
                    column(PrivacyModel::Approx),
                    column(PrivacyModel::Pure)
                );
            }
        }
    }
    if !json {
        println!(
            "load average at end {}",
            load_average().map_or("?".into(), |l| format!("{l:.1}"))
        );
    }
    // Best effort: the directory holds only this run's Gram and strategy files.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
