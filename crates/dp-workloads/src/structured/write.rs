//! A structured workload written as a workload spec v1 (docs/formats.md), the
//! inverse of [`crate::spec::load_spec`]: what a peer (HDMM) or a person
//! needs to plan exactly the workload dpmm planned (e.g. the built-in
//! SF1 Persons workload).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{Factor, Queries, StructuredWorkload};
use crate::domain::{SResult, StructuredError};

fn file_error(path: &Path, e: impl std::fmt::Display) -> StructuredError {
    StructuredError::File {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// Writes `w` to `dir/stem.json`, its explicit matrix factors to
/// `dir/stem.gG.ATTR.npy` (referenced relative to the JSON), and returns
/// the JSON's path. Marginal groups become one `marginal` entry per set
/// (the same rows in the same order); `total` factors are left out.
pub fn write_spec(w: &StructuredWorkload, dir: &Path, stem: &str) -> SResult<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let attrs = w.domain().attributes();
    let mut queries = Vec::new();
    for (g, group) in w.groups().iter().enumerate() {
        match &group.queries {
            Queries::Kron(factors) => {
                let mut kron = Map::new();
                for (f, a) in factors.iter().zip(attrs) {
                    let v = match f {
                        Factor::Total(_) => continue,
                        Factor::Identity(_) => json!("identity"),
                        Factor::Prefix(_) => json!("prefix"),
                        Factor::AllRange(_) => json!("allrange"),
                        Factor::Ranges { ranges, .. } => json!({ "ranges": ranges }),
                        Factor::Matrix(m) => {
                            let file = format!("{stem}.g{g}.{}.npy", a.name);
                            let path = dir.join(&file);
                            crate::npy::write_matrix(&path, m.as_ref().as_ref())
                                .map_err(|e| file_error(&path, e))?;
                            json!({ "matrix": file })
                        }
                    };
                    kron.insert(a.name.clone(), v);
                }
                queries.push(json!({ "kron": kron, "weight": group.weight }));
            }
            Queries::Marginals(sets) => {
                for s in sets {
                    let names: Vec<&str> = s.members().map(|i| attrs[i].name.as_str()).collect();
                    queries.push(json!({ "marginal": names, "weight": group.weight }));
                }
            }
        }
    }
    let domain: Vec<Value> = attrs
        .iter()
        .map(|a| json!({ "name": a.name, "size": a.size }))
        .collect();
    let spec = json!({ "domain": domain, "queries": queries });
    let path = dir.join(format!("{stem}.json"));
    let text = serde_json::to_string_pretty(&spec).map_err(|e| file_error(&path, e))?;
    std::fs::write(&path, text).map_err(|e| file_error(&path, e))?;
    Ok(path)
}
