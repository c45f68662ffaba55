//! The records schema (docs/formats.md): how each CSV column becomes one
//! attribute of the domain.
//!
//! ```json
//! {"domain": [
//!   {"name": "age",  "column": "age",  "bins": [21, 24, 27, 30, 33, 36], "outside": "drop"},
//!   {"name": "race", "column": "race", "values": ["white", "black", "asian", "other"], "missing": "error"},
//!   {"name": "work", "column": "work", "bins": {"start": 0, "stop": 53, "width": 1}}
//! ]}
//! ```
//!
//! * `values`: categorical, in order; the attribute's size is their number.
//! * `bins`: numeric, `[lo, hi)` intervals, as an edge list (strictly
//!   increasing) or `{start, stop, width}` (a whole number of bins).
//! * `outside`: what a value outside the domain does (a category not
//!   listed, a number below the first or at/above the last edge): `"drop"`
//!   the record or `"error"`.
//! * `unparsable` (`bins` only): what a field that is not a finite number
//!   does, `"drop"` or `"error"`; separate from `outside` so that dropping
//!   out-of-range values never silently drops garbage too.
//! * `missing`: what a missing value does (the field equals one of
//!   `missing_markers`, by default `""` and `"NA"`): `"drop"` or `"error"`.
//! * `malformed` (schema-wide, beside `domain`): what a line that is not
//!   one CSV record of the header's width does, `"drop"` or `"error"`.
//! * `missing_markers` (schema-wide): the values that mean "missing", by
//!   default `["", "NA"]`; null and NaN are missing whatever the markers.
//!   To count an empty category, list `""` among its values and give
//!   markers without it (`"missing_markers": ["NA"]`).
//! * `columns` (schema-wide, optional; `dpmm schema draft` writes it): the
//!   exact header of the CSV records files the schema reads, names in
//!   order. A file whose header differs is refused before anything is
//!   read, so a line inserted before the real header (which would become
//!   the header and move every column) is a refusal, not a release.
//!
//! Every policy defaults to `"drop"`, the stable choice: whether a record
//! is kept depends on that record alone, so one person changes each count
//! table by at most one (see [`crate::aggregate`](mod@crate::aggregate)). `"error"` is an
//! explicit opt-in and a check of the curator's own data: whether the
//! release is refused depends on the data (is some record outside the
//! domain?), so a refusal is itself an unprotected answer about the
//! records. Use it to inspect your own file, not in a pipeline whose exit
//! status reaches others.
//! * `column` defaults to `name`; an optional `size` must match; `note`
//!   fields (schema-wide or per attribute) are free text for people.
//!
//! Domains are public knowledge written by a person from a codebook:
//! nothing here, nor anywhere in dpmm, derives a domain from the data (a
//! domain read off the data would itself leak, e.g. the largest age).

use dp_workloads::domain::{Attribute, Domain};
use serde::Deserialize;
use serde_json::Value;

use crate::error::SchemaError;
use crate::value::Clash;

/// Largest number of values or bins one attribute may have (2²⁴).
pub const MAX_ATTRIBUTE_SIZE: usize = 1 << 24;

/// The placeholder that [`crate::draft`] writes in place of `values`/`bins`;
/// the loader refuses it with [`SchemaError::Placeholder`].
pub const PLACEHOLDER_PREFIX: &str = "TODO";

/// Missing-value markers when the schema names none: the empty field and R's `NA`.
pub const DEFAULT_MISSING_MARKERS: [&str; 2] = ["", "NA"];

/// What happens to a record whose value is outside the domain, not a
/// number or missing, or to a malformed row; `Drop` is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Leave the record out of every count (a stable transformation: see
    /// [`crate::aggregate`](mod@crate::aggregate)).
    Drop,
    /// Stop with an error naming the column and the kind of problem (never
    /// the value or the line). Whether it stops depends on the data: an
    /// opt-in check of one's own records, not for outputs others see.
    Error,
}

/// How one column's text becomes a cell index of its attribute.
#[derive(Debug, Clone, PartialEq)]
pub enum Encoding {
    /// Categorical: the field equals `values[i]` exactly (after trimming
    /// surrounding ASCII whitespace) → index `i`.
    Categorical {
        /// The values, in order.
        values: Vec<String>,
    },
    /// Numeric: the field parses as a finite number `x` with
    /// `edges[i] ≤ x < edges[i+1]` → index `i`.
    Bins {
        /// Strictly increasing finite edges, at least two.
        edges: Vec<f64>,
    },
}

impl Encoding {
    /// The number of values or bins.
    pub fn size(&self) -> usize {
        match self {
            Encoding::Categorical { values } => values.len(),
            Encoding::Bins { edges } => edges.len() - 1,
        }
    }
}

/// One attribute of the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct AttributeSchema {
    /// The attribute's name in the domain and the workload spec.
    pub name: String,
    /// The CSV header column it is read from.
    pub column: String,
    /// Values or bins.
    pub encoding: Encoding,
    /// Policy for values outside the domain.
    pub outside: Policy,
    /// Policy for numeric fields that are not finite numbers (`bins` only;
    /// `Error` for categorical attributes, where it never applies).
    pub unparsable: Policy,
    /// Policy for missing values.
    pub missing: Policy,
}

/// A validated records schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema {
    attributes: Vec<AttributeSchema>,
    missing_markers: Vec<String>,
    /// Policy for a malformed row (see [`crate::aggregate`]).
    malformed: Policy,
    /// The pinned header of CSV records files.
    columns: Option<Vec<String>>,
    /// Names and sizes in order: the workload's domain (docs/formats.md).
    domain: Domain,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<Value>,
    #[serde(default)]
    missing_markers: Option<Vec<String>>,
    #[serde(default)]
    malformed: Option<String>,
    #[serde(default)]
    columns: Option<Vec<String>>,
    domain: Vec<RawAttribute>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAttribute {
    name: String,
    #[serde(default)]
    column: Option<String>,
    #[serde(default)]
    size: Option<usize>,
    #[serde(default)]
    values: Option<Value>,
    #[serde(default)]
    bins: Option<Value>,
    #[serde(default)]
    outside: Option<String>,
    #[serde(default)]
    unparsable: Option<String>,
    #[serde(default)]
    missing: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<Value>,
}

impl Schema {
    /// Parses and validates a schema from JSON text.
    pub fn from_json(text: &str) -> Result<Self, SchemaError> {
        let raw: RawSchema =
            serde_json::from_str(text).map_err(|e| SchemaError::Json(e.to_string()))?;
        let missing_markers = raw.missing_markers.unwrap_or_else(|| {
            DEFAULT_MISSING_MARKERS
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
        let attributes = raw
            .domain
            .into_iter()
            .enumerate()
            .map(|(position, a)| parse_attribute(position, a))
            .collect::<Result<Vec<_>, _>>()?;
        let malformed = match raw.malformed.as_deref() {
            None | Some("drop") => Policy::Drop,
            Some("error") => Policy::Error,
            Some(other) => return Err(SchemaError::UnknownMalformedPolicy(other.to_string())),
        };
        let schema = Self::new(attributes, missing_markers)?.with_malformed(malformed);
        match raw.columns {
            None => Ok(schema),
            Some(columns) => schema.with_columns(columns),
        }
    }

    /// Reads, parses and validates a schema file.
    pub fn from_path(path: &std::path::Path) -> Result<Self, SchemaError> {
        let text = std::fs::read_to_string(path).map_err(|e| SchemaError::Io {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::from_json(&text)
    }

    /// Validates attributes built in code (the checks [`Schema::from_json`]
    /// applies after parsing).
    pub fn new(
        attributes: Vec<AttributeSchema>,
        missing_markers: Vec<String>,
    ) -> Result<Self, SchemaError> {
        if attributes.is_empty() {
            return Err(SchemaError::EmptyDomain);
        }
        for (position, a) in attributes.iter().enumerate() {
            validate_attribute(position, a, &missing_markers)?;
            if attributes[..position].iter().any(|b| b.name == a.name) {
                return Err(SchemaError::DuplicateName(a.name.clone()));
            }
        }
        let domain = Domain::new(
            attributes
                .iter()
                .map(|a| Attribute {
                    name: a.name.clone(),
                    size: a.encoding.size(),
                })
                .collect(),
        )
        .map_err(|e| SchemaError::Domain(e.to_string()))?;
        Ok(Self {
            attributes,
            missing_markers,
            malformed: Policy::Drop,
            columns: None,
            domain,
        })
    }

    /// The schema with a pinned header: `columns` (distinct, not empty
    /// names, among them every attribute's column) must be the header of
    /// every CSV records file read, exactly and in order.
    pub fn with_columns(mut self, columns: Vec<String>) -> Result<Self, SchemaError> {
        if columns.is_empty() {
            return Err(SchemaError::BadColumns("is empty".into()));
        }
        if let Some(i) = columns
            .iter()
            .position(|c| c.trim().is_empty() || c.trim() != c)
        {
            return Err(SchemaError::BadColumns(format!(
                "#{} is empty or has blanks around it",
                i + 1
            )));
        }
        for (i, c) in columns.iter().enumerate() {
            if columns[..i].contains(c) {
                return Err(SchemaError::BadColumns(format!("names '{c}' twice")));
            }
        }
        if let Some(a) = self
            .attributes
            .iter()
            .find(|a| !columns.contains(&a.column))
        {
            return Err(SchemaError::BadColumns(format!(
                "has no column '{}' (read by attribute '{}')",
                a.column, a.name
            )));
        }
        self.columns = Some(columns);
        Ok(self)
    }

    /// The pinned header of CSV records files, if the schema pins one.
    pub fn columns(&self) -> Option<&[String]> {
        self.columns.as_deref()
    }

    /// The schema with `policy` for malformed rows (`drop` unless set).
    pub fn with_malformed(mut self, policy: Policy) -> Self {
        self.malformed = policy;
        self
    }

    /// What a malformed row does: a line that is not one CSV record of the
    /// header's width (see [`crate::aggregate`](mod@crate::aggregate)).
    pub fn malformed(&self) -> Policy {
        self.malformed
    }

    /// The attributes, in domain order.
    pub fn attributes(&self) -> &[AttributeSchema] {
        &self.attributes
    }

    /// The strings that mean "missing" (compared after trimming).
    pub fn missing_markers(&self) -> &[String] {
        &self.missing_markers
    }

    /// The domain: names and sizes in order, as the workload spec and
    /// the optimizers see it (cells row-major, last attribute fastest).
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The position of attribute `name` in the domain.
    pub fn position(&self, name: &str) -> Result<usize, SchemaError> {
        self.attributes
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| SchemaError::UnknownAttribute(name.to_string()))
    }
}

fn parse_attribute(position: usize, raw: RawAttribute) -> Result<AttributeSchema, SchemaError> {
    let name = raw.name;
    if name.is_empty() {
        return Err(SchemaError::EmptyName {
            position,
            field: "name",
        });
    }
    let encoding = match (raw.values, raw.bins) {
        (None, None) => return Err(SchemaError::NoValuesOrBins(name)),
        (Some(_), Some(_)) => return Err(SchemaError::BothValuesAndBins(name)),
        (Some(values), None) => parse_values(&name, values)?,
        (None, Some(bins)) => parse_bins(&name, bins)?,
    };
    if let Some(declared) = raw.size
        && declared != encoding.size()
    {
        return Err(SchemaError::SizeMismatch {
            attribute: name,
            declared,
            actual: encoding.size(),
        });
    }
    if raw.unparsable.is_some() && matches!(encoding, Encoding::Categorical { .. }) {
        return Err(SchemaError::UnparsableOnCategorical(name));
    }
    let outside = parse_policy(&name, "outside", raw.outside)?;
    let unparsable = parse_policy(&name, "unparsable", raw.unparsable)?;
    let missing = parse_policy(&name, "missing", raw.missing)?;
    Ok(AttributeSchema {
        column: raw.column.unwrap_or_else(|| name.clone()),
        name,
        encoding,
        outside,
        unparsable,
        missing,
    })
}

fn is_placeholder(value: &Value) -> bool {
    value
        .as_str()
        .is_some_and(|s| s.starts_with(PLACEHOLDER_PREFIX))
}

fn parse_policy(
    attribute: &str,
    field: &'static str,
    raw: Option<String>,
) -> Result<Policy, SchemaError> {
    match raw.as_deref() {
        None | Some("drop") => Ok(Policy::Drop),
        Some("error") => Ok(Policy::Error),
        Some(other) => Err(SchemaError::UnknownPolicy {
            attribute: attribute.to_string(),
            field,
            found: other.to_string(),
        }),
    }
}

fn parse_values(attribute: &str, raw: Value) -> Result<Encoding, SchemaError> {
    if is_placeholder(&raw) {
        return Err(SchemaError::Placeholder(attribute.to_string()));
    }
    let Value::Array(items) = raw else {
        return Err(SchemaError::Json(format!(
            "attribute '{attribute}': \"values\" must be a list of strings"
        )));
    };
    let values = items
        .into_iter()
        .enumerate()
        .map(|(index, v)| match v {
            Value::String(s) => Ok(s),
            _ => Err(SchemaError::NonStringValue {
                attribute: attribute.to_string(),
                index,
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Encoding::Categorical { values })
}

fn malformed(attribute: &str, reason: &str) -> SchemaError {
    SchemaError::MalformedBins {
        attribute: attribute.to_string(),
        reason: reason.to_string(),
    }
}

fn parse_bins(attribute: &str, raw: Value) -> Result<Encoding, SchemaError> {
    if is_placeholder(&raw) {
        return Err(SchemaError::Placeholder(attribute.to_string()));
    }
    match raw {
        Value::Array(items) => {
            let edges = items
                .iter()
                .map(|v| {
                    v.as_f64()
                        .ok_or_else(|| malformed(attribute, "edges must be numbers"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Encoding::Bins { edges })
        }
        Value::Object(map) => {
            let field = |key: &str| {
                map.get(key).and_then(Value::as_f64).ok_or_else(|| {
                    malformed(
                        attribute,
                        &format!("object needs a number \"{key}\" (start, stop, width)"),
                    )
                })
            };
            if let Some(key) = map
                .keys()
                .find(|k| !matches!(k.as_str(), "start" | "stop" | "width"))
            {
                return Err(malformed(
                    attribute,
                    &format!("has unknown field \"{key}\""),
                ));
            }
            range_edges(attribute, field("start")?, field("stop")?, field("width")?)
        }
        _ => Err(malformed(
            attribute,
            "must be an edge list or {start, stop, width}",
        )),
    }
}

/// Edges `start, start + width, …, stop` of a `{start, stop, width}` bins
/// object; `(stop − start)/width` must be a whole number (to 1e-9
/// relative), so the last bin is as wide as the others.
fn range_edges(
    attribute: &str,
    start: f64,
    stop: f64,
    width: f64,
) -> Result<Encoding, SchemaError> {
    if !(width.is_finite() && width > 0.0) {
        return Err(SchemaError::BadWidth(attribute.to_string()));
    }
    if !(start.is_finite() && stop.is_finite() && start < stop) {
        return Err(SchemaError::EmptyRange(attribute.to_string()));
    }
    let bins = (stop - start) / width;
    if !bins.is_finite() || bins > MAX_ATTRIBUTE_SIZE as f64 + 0.5 {
        return Err(SchemaError::TooManyBins {
            attribute: attribute.to_string(),
            size: bins,
            max: MAX_ATTRIBUTE_SIZE,
        });
    }
    let whole = bins.round();
    if whole < 1.0 || (bins - whole).abs() > 1e-9 * whole.max(1.0) {
        return Err(SchemaError::FractionalBinCount(attribute.to_string()));
    }
    // `whole` is in [1, 2^24], so the cast is exact.
    let count = whole as usize;
    let mut edges: Vec<f64> = (0..count).map(|i| start + i as f64 * width).collect();
    edges.push(stop);
    Ok(Encoding::Bins { edges })
}

fn validate_attribute(
    position: usize,
    a: &AttributeSchema,
    missing_markers: &[String],
) -> Result<(), SchemaError> {
    let name = &a.name;
    if name.is_empty() {
        return Err(SchemaError::EmptyName {
            position,
            field: "name",
        });
    }
    if a.column.is_empty() {
        return Err(SchemaError::EmptyName {
            position,
            field: "column",
        });
    }
    match &a.encoding {
        Encoding::Categorical { values } => {
            if values.is_empty() {
                return Err(SchemaError::EmptyValues(name.clone()));
            }
            if values.len() > MAX_ATTRIBUTE_SIZE {
                return Err(SchemaError::TooManyBins {
                    attribute: name.clone(),
                    size: values.len() as f64,
                    max: MAX_ATTRIBUTE_SIZE,
                });
            }
            // Values must each read as their own value, whatever the type
            // of the column they are read from (crate::value).
            crate::value::check_keys(values, missing_markers).map_err(|clash| match clash {
                Clash::NanValue(value) => SchemaError::NanValue {
                    attribute: name.clone(),
                    value,
                },
                Clash::Values(first, second) if first == second => SchemaError::DuplicateValue {
                    attribute: name.clone(),
                    value: first,
                },
                Clash::Values(first, second) => SchemaError::SameValue {
                    attribute: name.clone(),
                    first,
                    second,
                },
                Clash::Marker(value, marker) => SchemaError::ValueIsMissingMarker {
                    attribute: name.clone(),
                    value,
                    marker,
                },
            })?;
        }
        Encoding::Bins { edges } => {
            if edges.len() < 2 {
                return Err(SchemaError::TooFewEdges(name.clone()));
            }
            if edges.len() - 1 > MAX_ATTRIBUTE_SIZE {
                return Err(SchemaError::TooManyBins {
                    attribute: name.clone(),
                    size: (edges.len() - 1) as f64,
                    max: MAX_ATTRIBUTE_SIZE,
                });
            }
            if let Some(index) = edges.iter().position(|e| !e.is_finite()) {
                return Err(SchemaError::NonFiniteEdge {
                    attribute: name.clone(),
                    index,
                });
            }
            if let Some(i) = edges.windows(2).position(|w| w[1] <= w[0]) {
                return Err(SchemaError::UnsortedEdges {
                    attribute: name.clone(),
                    index: i + 1,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
