//! `cargo xtask bench peers`: prints issue 21's side-by-side table (the
//! measurement is [`dp_bench::peers`]). Without `HDMM_SRC` (or a Python
//! with numpy and scipy) only dpmm's columns are filled. `cargo xtask
//! bench rp-peers` does the same beside ResidualPlanner
//! ([`dp_bench::rp_peers`]; without `RP_SRC`, dpmm alone).

use dp_bench::peers::{Hdmm, PEER_WORKLOADS, measure, table_line, table_preamble};
use dp_bench::procfs::load_average;
use dp_core::{DpError, Result};
use dp_opt::PrivacyModel;

/// Runs the table for `sizes` and the columns of `models`; one JSON
/// object per row with `json`.
pub fn run(sizes: &[usize], models: &[PrivacyModel], json: bool) -> Result<()> {
    let hdmm = Hdmm::from_env();
    let dir = std::env::temp_dir().join(format!("dpmm-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| DpError::Io(format!("{}: {e}", dir.display())))?;
    if !json {
        for line in table_preamble(load_average()) {
            println!("{line}");
        }
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
                println!("{}", table_line(kind, n, &rows));
            }
        }
    }
    if !json {
        let load = load_average().map_or("?".into(), |l| format!("{l:.1}"));
        println!("load average at end {load}");
    }
    // Best effort: the directory holds only this run's Gram and strategy files.
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The ResidualPlanner table for attribute counts `dims` (10 values each,
/// every 0..=3-way marginal), both objectives; one JSON object per row
/// with `json`.
pub fn run_rp(dims: &[usize], json: bool) -> Result<()> {
    use dp_bench::rp_peers::{
        BEYOND_DIMENSION, ResidualPlanner, measure, table_line, table_preamble,
    };
    let rp = ResidualPlanner::from_env();
    if !json {
        for line in table_preamble(load_average(), rp.is_some()) {
            println!("{line}");
        }
    }
    let print = |row: &dp_bench::rp_peers::RpRow| -> Result<()> {
        if json {
            let text = serde_json::to_string(row).map_err(|e| DpError::Io(e.to_string()))?;
            println!("{text}");
        } else {
            println!("{}", table_line(row));
        }
        Ok(())
    };
    for objective in ["sumvar", "maxvar"] {
        for &d in dims {
            print(&measure(10, d, 3, objective, rp.as_ref())?)?;
        }
    }
    if !json {
        println!();
        println!(
            "past the peer (its paper: d = {BEYOND_DIMENSION} max variance killed after more than an hour), dpmm alone:"
        );
        for line in &table_preamble(None, false)[1..] {
            println!("{line}");
        }
    }
    print(&measure(10, BEYOND_DIMENSION, 3, "maxvar", None)?)?;
    use dp_bench::rp_peers::{reconstruct_all, reconstruction_line, reconstruction_preamble};
    if !json {
        println!();
        for line in reconstruction_preamble() {
            println!("{line}");
        }
    }
    for &d in dims {
        let row = reconstruct_all(10, d, 3)?;
        if json {
            let text = serde_json::to_string(&row).map_err(|e| DpError::Io(e.to_string()))?;
            println!("{text}");
        } else {
            println!("{}", reconstruction_line(&row));
        }
    }
    if !json {
        let load = load_average().map_or("?".into(), |l| format!("{l:.1}"));
        println!("load average at end {load}");
    }
    Ok(())
}
