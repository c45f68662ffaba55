//! The workload spec v1 (docs/formats.md): a JSON file with a `domain` and
//! `queries`, loaded into a [`StructuredWorkload`] with one typed,
//! one-line error for every malformed case.
//!
//! ```json
//! {"domain": [{"name": "sex", "size": 2}, {"name": "age", "size": 115}],
//!  "queries": [{"kron": {"sex": "identity", "age": "prefix"}},
//!              {"marginal": ["sex"]}, {"marginals": {"k": 2}, "weight": 0.5}]}
//! ```
//!
//! Query order: entries in spec order; within an entry, Kronecker rows in
//! row-major order (last attribute fastest); `marginals: {k}` lists the
//! k-subsets in lexicographic order of domain positions. Matrix factors
//! are a file (`{"matrix": "file.npy"}`, relative to the spec file) or
//! their rows inline (`{"matrix": [[1, 0, 1], …]}`, as a plan file embeds
//! its workload). Domain entries may carry the records schema's column
//! keys, which are ignored here.

use std::path::Path;

use serde_json::{Map, Value};

use crate::domain::{Attribute, Domain, SResult, StructuredError};
use crate::structured::{AttrSet, Factor, Queries, QueryGroup, StructuredWorkload};

/// Most marginals one `marginals: {k}` entry may expand to.
pub const MAX_MARGINALS_PER_ENTRY: f64 = 1e7;

/// Keys a domain entry may have (the records schema's are ignored here).
const DOMAIN_KEYS: &[&str] = &[
    "name", "size", "column", "values", "bins", "outside", "missing",
];

fn spec_err(at: &str, what: impl std::fmt::Display) -> StructuredError {
    StructuredError::Spec(format!("{at}: {what}"))
}

/// Reads and validates the spec at `path`.
pub fn load_spec(path: &Path) -> SResult<StructuredWorkload> {
    let base = path.parent().unwrap_or(Path::new("."));
    parse_spec_value(&read_spec_json(path)?, base)
}

/// The spec at `path` and its JSON with every `{"matrix": "file.npy"}`
/// factor replaced by its rows inline, taken from the matrices just loaded
/// (each file is read once): the spec a plan file embeds so that it
/// stands alone. Everything else, labels' sources included, is the
/// user's text unchanged.
pub fn load_spec_inlined(path: &Path) -> SResult<(StructuredWorkload, Value)> {
    inline_matrices(
        read_spec_json(path)?,
        path.parent().unwrap_or(Path::new(".")),
    )
}

/// [`load_spec_inlined`] for a spec held as text, whose matrix files are
/// relative to `base`.
pub fn parse_spec_inlined(text: &str, base: &Path) -> SResult<(StructuredWorkload, Value)> {
    inline_matrices(parse_json(text)?, base)
}

fn inline_matrices(mut root: Value, base: &Path) -> SResult<(StructuredWorkload, Value)> {
    let workload = parse_spec_value(&root, base)?;
    let queries = root.get_mut("queries").and_then(Value::as_array_mut);
    for (query, group) in queries.into_iter().flatten().zip(workload.groups()) {
        let (Some(kron), Queries::Kron(factors)) = (
            query.get_mut("kron").and_then(Value::as_object_mut),
            &group.queries,
        ) else {
            continue;
        };
        for (name, factor) in kron.iter_mut() {
            let from_file = factor.get("matrix").is_some_and(Value::is_string);
            let i = workload.domain().position(name)?;
            if let (true, Factor::Matrix(m)) = (from_file, &factors[i]) {
                let rows: Vec<Vec<f64>> = (0..m.nrows())
                    .map(|r| (0..m.ncols()).map(|c| m[(r, c)]).collect())
                    .collect();
                factor["matrix"] = Value::from(rows);
            }
        }
    }
    Ok((workload, root))
}

fn read_spec_json(path: &Path) -> SResult<Value> {
    let text = std::fs::read_to_string(path).map_err(|e| StructuredError::File {
        path: path.display().to_string(),
        reason: format!("cannot read: {e}"),
    })?;
    parse_json(&text)
}

fn parse_json(text: &str) -> SResult<Value> {
    serde_json::from_str(text).map_err(|e| StructuredError::Spec(format!("not valid JSON: {e}")))
}

/// Parses a spec from its text; matrix files are relative to `base`.
pub fn parse_spec(text: &str, base: &Path) -> SResult<StructuredWorkload> {
    parse_spec_value(&parse_json(text)?, base)
}

fn parse_spec_value(root: &Value, base: &Path) -> SResult<StructuredWorkload> {
    let obj = root.as_object().ok_or_else(|| {
        spec_err(
            "top level",
            "expected an object with 'domain' and 'queries'",
        )
    })?;
    if let Some(k) = obj.keys().find(|k| *k != "domain" && *k != "queries") {
        return Err(spec_err("top level", format!("unknown key '{k}'")));
    }
    let domain = parse_domain(
        obj.get("domain")
            .ok_or_else(|| spec_err("top level", "missing 'domain'"))?,
    )?;
    let queries = obj
        .get("queries")
        .ok_or_else(|| spec_err("top level", "missing 'queries'"))?
        .as_array()
        .ok_or_else(|| spec_err("queries", "expected an array"))?;
    if queries.is_empty() {
        return Err(spec_err("queries", "is empty"));
    }
    let groups = queries
        .iter()
        .enumerate()
        .map(|(i, q)| parse_query(&domain, q, &format!("queries[{i}]"), base))
        .collect::<SResult<Vec<_>>>()?;
    StructuredWorkload::new(domain, groups)
}

fn parse_domain(v: &Value) -> SResult<Domain> {
    let arr = v
        .as_array()
        .ok_or_else(|| spec_err("domain", "expected an array"))?;
    let mut attrs = Vec::with_capacity(arr.len());
    for (i, a) in arr.iter().enumerate() {
        let at = format!("domain[{i}]");
        let o = a
            .as_object()
            .ok_or_else(|| spec_err(&at, "expected {\"name\", \"size\"}"))?;
        if let Some(k) = o.keys().find(|k| !DOMAIN_KEYS.contains(&k.as_str())) {
            return Err(spec_err(&at, format!("unknown key '{k}'")));
        }
        let name = o
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| spec_err(&at, "'name' must be a string"))?;
        if name.is_empty() {
            return Err(spec_err(&at, "'name' is empty"));
        }
        let size = o
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| spec_err(&at, "'size' must be a non-negative integer"))?;
        attrs.push(Attribute {
            name: name.to_string(),
            size: usize::try_from(size).map_err(|_| spec_err(&at, "'size' too large"))?,
        });
    }
    Domain::new(attrs)
}

fn parse_query(domain: &Domain, q: &Value, at: &str, base: &Path) -> SResult<QueryGroup> {
    let o = q
        .as_object()
        .ok_or_else(|| spec_err(at, "expected an object"))?;
    let kinds: Vec<&String> = o.keys().filter(|k| *k != "weight").collect();
    let weight = match o.get("weight") {
        None => 1.0,
        Some(w) => {
            let w = w
                .as_f64()
                .ok_or_else(|| spec_err(at, "'weight' must be a number"))?;
            if !(w.is_finite() && w > 0.0) {
                return Err(StructuredError::BadWeight(w));
            }
            w
        }
    };
    let [kind] = kinds.as_slice() else {
        return Err(spec_err(
            at,
            "expected exactly one of 'kron', 'marginal', 'marginals' (plus optional 'weight')",
        ));
    };
    let v = &o[kind.as_str()];
    let (label, queries) = match kind.as_str() {
        "kron" => parse_kron(domain, v, &format!("{at}.kron"), base)?,
        "marginal" => {
            let set = parse_marginal(domain, v, &format!("{at}.marginal"))?;
            (
                crate::structured::marginal_label(domain, &set),
                Queries::Marginals(vec![set]),
            )
        }
        "marginals" => {
            let k = parse_k(domain, v, &format!("{at}.marginals"))?;
            (
                format!("marginals[k={k}]"),
                Queries::Marginals(k_subsets(domain.len(), k)?),
            )
        }
        other => return Err(spec_err(at, format!("unknown query kind '{other}'"))),
    };
    Ok(QueryGroup {
        label: format!("#{} {label}", &at["queries[".len()..at.len() - 1]),
        weight,
        queries,
    })
}

fn parse_kron(domain: &Domain, v: &Value, at: &str, base: &Path) -> SResult<(String, Queries)> {
    let o: &Map<String, Value> = v
        .as_object()
        .ok_or_else(|| spec_err(at, "expected an object from attribute to factor"))?;
    let mut factors: Vec<Factor> = domain
        .attributes()
        .iter()
        .map(|a| Factor::Total(a.size))
        .collect();
    let mut parts = Vec::new();
    for (name, f) in o {
        let i = domain.position(name)?;
        let size = domain.attributes()[i].size;
        let fat = format!("{at}.{name}");
        factors[i] = parse_factor(name, size, f, &fat, base)?;
        parts.push(format!("{name}={}", factors[i].name()));
    }
    Ok((format!("kron[{}]", parts.join(",")), Queries::Kron(factors)))
}

fn parse_factor(name: &str, size: usize, f: &Value, at: &str, base: &Path) -> SResult<Factor> {
    if let Some(s) = f.as_str() {
        return match s {
            "identity" => Ok(Factor::Identity(size)),
            "total" => Ok(Factor::Total(size)),
            "prefix" => Ok(Factor::Prefix(size)),
            "allrange" => Ok(Factor::AllRange(size)),
            other => Err(spec_err(
                at,
                format!(
                    "unknown factor '{other}' (identity, total, prefix, allrange, {{ranges}}, {{matrix}})"
                ),
            )),
        };
    }
    let o = f.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
        spec_err(
            at,
            "expected a factor name, {\"ranges\": …} or {\"matrix\": …}",
        )
    })?;
    if let Some(r) = o.get("ranges") {
        let arr = r
            .as_array()
            .ok_or_else(|| spec_err(at, "'ranges' must be an array of [lo, hi]"))?;
        let ranges = arr
            .iter()
            .map(|p| match p.as_array().map(Vec::as_slice) {
                Some([lo, hi]) => match (lo.as_i64(), hi.as_i64()) {
                    (Some(lo), Some(hi)) => Ok((lo as i128, hi as i128)),
                    _ => Err(spec_err(at, format!("range {p} must hold two integers"))),
                },
                _ => Err(spec_err(at, format!("range {p} must be [lo, hi]"))),
            })
            .collect::<SResult<Vec<_>>>()?;
        return Factor::ranges(name, size, ranges);
    }
    if let Some(m) = o.get("matrix") {
        if let Some(rows) = m.as_array() {
            return Factor::matrix(name, size, inline_matrix(rows, at)?);
        }
        let file = m
            .as_str()
            .ok_or_else(|| spec_err(at, "'matrix' must be a file name or an array of rows"))?;
        let path = base.join(file);
        let mat = crate::npy::read_matrix(&path).map_err(|e| {
            // The reader's message starts with the path already.
            let shown = path.display().to_string();
            let message = e.to_string();
            let reason = message
                .strip_prefix(&format!("{shown}: "))
                .unwrap_or(&message);
            StructuredError::File {
                path: shown.clone(),
                reason: format!("{reason} (at {at})"),
            }
        })?;
        return Factor::matrix(name, size, mat);
    }
    Err(spec_err(at, "expected {\"ranges\": …} or {\"matrix\": …}"))
}

/// A matrix written as rows of numbers, all of one length (the factor's
/// own checks, sizes and finiteness, follow in [`Factor::matrix`]).
fn inline_matrix(rows: &[Value], at: &str) -> SResult<dp_linalg::Mat<f64>> {
    let bad = || {
        spec_err(
            at,
            "an inline 'matrix' must be rows of numbers, all of one length",
        )
    };
    let cols = rows.first().and_then(Value::as_array).map_or(0, Vec::len);
    let mut data = Vec::with_capacity(rows.len() * cols);
    for row in rows {
        let row = row.as_array().filter(|r| r.len() == cols).ok_or_else(bad)?;
        for v in row {
            data.push(v.as_f64().ok_or_else(bad)?);
        }
    }
    Ok(dp_linalg::Mat::from_fn(rows.len(), cols, |i, j| {
        data[i * cols + j]
    }))
}

fn parse_marginal(domain: &Domain, v: &Value, at: &str) -> SResult<AttrSet> {
    let arr = v
        .as_array()
        .ok_or_else(|| spec_err(at, "expected an array of attribute names"))?;
    let mut set = AttrSet::EMPTY;
    for a in arr {
        let name = a
            .as_str()
            .ok_or_else(|| spec_err(at, format!("{a} is not an attribute name")))?;
        let i = domain.position(name)?;
        if set.contains(i) {
            return Err(spec_err(at, format!("attribute '{name}' listed twice")));
        }
        set = set.with(i);
    }
    Ok(set)
}

fn parse_k(domain: &Domain, v: &Value, at: &str) -> SResult<usize> {
    let o = v
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| spec_err(at, "expected {\"k\": integer}"))?;
    let k = o
        .get("k")
        .and_then(Value::as_u64)
        .ok_or_else(|| spec_err(at, "'k' must be a non-negative integer"))?;
    let d = domain.len();
    if k > d as u64 {
        return Err(StructuredError::BadK { k: k as usize, d });
    }
    Ok(k as usize)
}

/// Every k-subset of `0..d` as a mask, in lexicographic order of the
/// sorted positions (refused past [`MAX_MARGINALS_PER_ENTRY`]).
pub fn k_subsets(d: usize, k: usize) -> SResult<Vec<AttrSet>> {
    if k > d {
        return Err(StructuredError::BadK { k, d });
    }
    let count = (0..k).fold(1.0, |acc: f64, i| acc * (d - i) as f64 / (i + 1) as f64);
    if count > MAX_MARGINALS_PER_ENTRY {
        return Err(StructuredError::TooLarge {
            what: "marginals",
            cells: count,
            action: "enumerate",
        });
    }
    let mut out = Vec::with_capacity(count.round() as usize);
    let mut idx: Vec<usize> = (0..k).collect();
    loop {
        out.push(idx.iter().copied().collect());
        // Advance to the next combination in lexicographic order.
        let Some(p) = (0..k).rev().find(|&p| idx[p] < d - k + p) else {
            return Ok(out);
        };
        idx[p] += 1;
        for q in p + 1..k {
            idx[q] = idx[q - 1] + 1;
        }
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
