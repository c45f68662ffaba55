//! A release's records counted where they live: each partition of a
//! cluster's data (a Spark DataFrame's) read by the same reading as a
//! local release — the schema's encoding, its policies, the privacy unit
//! and weights — and counted by the kernel's own counting on the worker
//! that holds it; only the partitions' sealed count tables travel to the
//! driver, whose kernel merges them ([`dp_core::kernel::records::Merge`]).
//!
//! A [`PartitionSpec`] is made on the driver, before any job runs: the
//! schema, the layout of the tables the strategy reads, the contributions
//! and the counting's [`DistributedKey`] (secret: it goes to the workers
//! with the code, nowhere else). Then:
//!
//! * **No privacy unit** (each record its own unit): one pass —
//!   [`count_partition`] reads a partition's rows into its tables.
//! * **A privacy unit**: the records of one unit must be bounded
//!   together, wherever they are. [`encode_partition`] reads each
//!   partition's rows into encoded records ([`PartitionSpec::encoded_schema`]:
//!   the unit's keyed 128-bit hash as two 64-bit words, each attribute's
//!   cell, the weight), dropping the records the schema drops; the engine
//!   brings the records of each unit hash together (a shuffle by the two
//!   words); [`bound_partition`] keeps at most `K` records of each unit,
//!   chosen uniformly at random by the kernel, and counts them.
//!
//! Either way a partition's tables depend on its own records only, one
//! record is in one partition, and the records of one unit share one; so
//! one added record (or unit) moves the merged tables as it moves one
//! local counting. Rows are encoded by the value alone (docs/formats.md),
//! as locally, so the same records give the same tables.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema as ArrowSchema, SchemaRef};
use dp_core::kernel::records::{Counting, DistributedKey, Merge, Partial, Records};
use serde::{Deserialize, Serialize};

use crate::aggregate::{People, Reading, Rows, Sink, Source, count, kernel, read};
use crate::counts::{Layout, MAX_CELL_LIMIT, PrivateCounts};
use crate::encode::{Compiled, Encoded, Extra, resolve};
use crate::error::RecordsError;
use crate::lines::Malformed;
use crate::schema::Schema;

/// Prefix of the columns dpmm adds (encoded records, partial tables).
const PREFIX: &str = "_dpmm_";

/// What every worker needs to count its partition (see the [module
/// documentation](self)). Its bytes hold the counting's key: send them to
/// the workers only.
pub struct PartitionSpec {
    schema_text: String,
    schema: Schema,
    layout: Layout,
    people: People,
    key: DistributedKey,
    /// The source columns read, in first-read order.
    columns: Vec<String>,
}

impl std::fmt::Debug for PartitionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionSpec")
            .field("layout", &self.layout)
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

/// The spec's bytes.
#[derive(Serialize, Deserialize)]
struct Wire {
    schema: String,
    tables: Vec<Vec<usize>>,
    full: bool,
    unit: Option<(String, u32)>,
    weight: Option<(String, f64)>,
    key: String,
    columns: Vec<String>,
}

impl PartitionSpec {
    /// A spec for counting the records of a source with `columns` through
    /// `schema` (its JSON text) into `layout` under `people`, with a fresh
    /// key: the columns are resolved now, so that a missing one is
    /// refused before any job runs. A stream's steps are refused.
    pub fn new(
        schema_text: &str,
        layout: &Layout,
        people: &People,
        columns: &ArrowSchema,
    ) -> Result<Self, RecordsError> {
        if people.steps.is_some() || layout.steps() != 1 {
            return Err(RecordsError::BadContributions(
                "a stream is not counted in partitions".into(),
            ));
        }
        let schema = Schema::from_json(schema_text)
            .map_err(|e| RecordsError::Internal(format!("the schema: {e}")))?;
        crate::aggregate::check_layout(&schema, layout)?;
        people
            .contributions()
            .check()
            .map_err(|e| RecordsError::BadContributions(e.to_string()))?;
        let names: Vec<&str> = columns.fields().iter().map(|f| f.name().as_str()).collect();
        if names.iter().any(|n| n.starts_with(PREFIX)) {
            return Err(RecordsError::BadHeader(format!(
                "columns named {PREFIX}… are dpmm's own: rename them"
            )));
        }
        let needed = resolve(&schema, &names, &extra(people))?;
        // Compiled now against the types the workers will see, so that a
        // schema their columns cannot be read by is refused here.
        let types: Vec<DataType> = needed
            .iter()
            .map(|n| columns.field(n.position).data_type().clone())
            .collect();
        Compiled::new(&schema, &needed, &types, None)?;
        Ok(Self {
            schema_text: schema_text.to_string(),
            schema,
            layout: layout.clone(),
            people: people.clone(),
            key: DistributedKey::fresh().map_err(kernel)?,
            columns: needed.into_iter().map(|n| n.name).collect(),
        })
    }

    /// The spec as bytes for the workers (secret: it holds the key).
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = Wire {
            schema: self.schema_text.clone(),
            tables: self.layout.tables().to_vec(),
            full: self.layout.is_full(),
            unit: self.people.unit.clone(),
            weight: self.people.weight.clone(),
            key: self.key.to_hex(),
            columns: self.columns.clone(),
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// The spec from [`PartitionSpec::to_bytes`], on a worker.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, RecordsError> {
        let bad = |e: &dyn std::fmt::Display| {
            RecordsError::BadContributions(format!("not a dpmm partition spec: {e}"))
        };
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| bad(&e))?;
        let schema = Schema::from_json(&wire.schema).map_err(|e| bad(&e))?;
        let layout = if wire.full {
            Layout::full(schema.domain(), MAX_CELL_LIMIT)?
        } else {
            Layout::marginals(schema.domain(), &wire.tables, MAX_CELL_LIMIT)?
        };
        if layout.tables() != wire.tables {
            return Err(bad(&"its tables are not its layout's"));
        }
        let people = People {
            unit: wire.unit,
            weight: wire.weight,
            ..People::records()
        };
        people
            .contributions()
            .check()
            .map_err(|e| RecordsError::BadContributions(e.to_string()))?;
        Ok(Self {
            schema_text: wire.schema,
            schema,
            layout,
            people,
            key: DistributedKey::from_hex(&wire.key).map_err(|e| bad(&e))?,
            columns: wire.columns,
        })
    }

    /// The source columns read, in order: select these (and only these)
    /// before the records are handed to the workers.
    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Whether records are bounded per unit (two passes and a shuffle).
    pub fn bounds_units(&self) -> bool {
        self.people.unit.is_some()
    }

    /// The layout counted into.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The memory and spill directory a worker's bounding uses.
    pub fn with_spill(mut self, memory: u64, spill_dir: PathBuf) -> Self {
        self.people.memory = memory;
        self.people.spill_dir = spill_dir;
        self
    }

    /// The columns of encoded records ([`encode_partition`]): the unit's
    /// hash (`_dpmm_unit_hi`, `_dpmm_unit_lo`), each attribute's cell
    /// (`_dpmm_c0`, …), and with weights `_dpmm_weight`.
    pub fn encoded_schema(&self) -> SchemaRef {
        let mut fields = vec![
            Field::new(format!("{PREFIX}unit_hi"), DataType::Int64, false),
            Field::new(format!("{PREFIX}unit_lo"), DataType::Int64, false),
        ];
        for a in 0..self.layout.shape().len() {
            fields.push(Field::new(format!("{PREFIX}c{a}"), DataType::Int32, false));
        }
        if self.people.weight.is_some() {
            fields.push(Field::new(
                format!("{PREFIX}weight"),
                DataType::Float64,
                false,
            ));
        }
        Arc::new(ArrowSchema::new(fields))
    }

    /// The columns of a partition's tables ([`partial_batch`]).
    pub fn partial_schema() -> SchemaRef {
        Arc::new(ArrowSchema::new(vec![
            Field::new(format!("{PREFIX}partition"), DataType::Int32, false),
            Field::new(format!("{PREFIX}table"), DataType::Int32, false),
            Field::new(format!("{PREFIX}cell"), DataType::Int64, false),
            Field::new(format!("{PREFIX}count"), DataType::Int64, false),
        ]))
    }

    /// The driver's side: the partitions' tables (batches of
    /// [`PartitionSpec::partial_schema`], from `partitions` partitions, or
    /// as many as were sealed)
    /// merged into one counting, each partition once, whole and sealed
    /// with this spec's key; then measured as a local release's counts.
    pub fn merge(
        &self,
        partitions: Option<u32>,
        batches: impl IntoIterator<Item = Result<RecordBatch, RecordsError>>,
    ) -> Result<PrivateCounts, RecordsError> {
        let mut merge = Merge::new(
            self.layout.kernel().clone(),
            self.people.contributions(),
            self.key.clone(),
        )
        .map_err(kernel)?;
        let refused =
            |what: &str| RecordsError::BadContributions(format!("partial tables: {what}"));
        for batch in batches {
            if dp_core::interrupt::interrupted() {
                return Err(RecordsError::Interrupted);
            }
            let batch = batch?;
            let columns = int_columns(&batch, &Self::partial_schema())
                .ok_or_else(|| refused("columns other than dpmm's partial tables'"))?;
            let [p, t, c, n] = [&columns[0], &columns[1], &columns[2], &columns[3]];
            for r in 0..batch.num_rows() {
                let partition = u32::try_from(p[r]).map_err(|_| refused("a negative partition"))?;
                let result = if t[r] == -1 {
                    merge.seal(partition, c[r] as u64, n[r] as u64)
                } else {
                    let (Ok(table), Ok(cell), Ok(count)) = (
                        u32::try_from(t[r]),
                        u64::try_from(c[r]),
                        u64::try_from(n[r]),
                    ) else {
                        return Err(refused("a negative table, cell or count"));
                    };
                    merge.cell(partition, table, cell, count)
                };
                result.map_err(|e| refused(&e.to_string()))?;
            }
        }
        let counted = merge
            .finish(partitions)
            .map_err(|e| refused(&e.to_string()))?;
        Ok(PrivateCounts::of(self.layout.clone(), counted))
    }
}

/// The privacy unit's and weight's columns a reading needs.
fn extra(people: &People) -> Extra<'_> {
    Extra {
        count: None,
        time: None,
        unit: people.unit.as_ref().map(|(c, _)| c.as_str()),
        weight: people.weight.as_ref().map(|(c, _)| c.as_str()),
    }
}

/// The columns of `batch` as 64-bit integers, when they are `schema`'s
/// (by position and type: an engine may rename or mark them nullable).
fn int_columns(batch: &RecordBatch, schema: &ArrowSchema) -> Option<Vec<Vec<i64>>> {
    if batch.num_columns() != schema.fields().len() {
        return None;
    }
    schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| {
            if c.data_type() != f.data_type() || c.null_count() > 0 {
                return None;
            }
            Some(match c.data_type() {
                DataType::Int32 => c
                    .as_primitive::<Int32Type>()
                    .values()
                    .iter()
                    .map(|&v| i64::from(v))
                    .collect(),
                DataType::Int64 => c.as_primitive::<Int64Type>().values().to_vec(),
                _ => return None,
            })
        })
        .collect()
}

/// A partition's tables as one batch of [`PartitionSpec::partial_schema`]:
/// a row per non-zero cell, then the seal's row (table −1, the cells in
/// the cell column, the seal's bits in the count column). Exact counts:
/// for the driver's merge only.
pub fn partial_batch(partial: &Partial) -> Result<RecordBatch, RecordsError> {
    let n = partial.cells.len() + 1;
    let p = i32::try_from(partial.partition).unwrap_or(i32::MAX);
    let mut tables = Vec::with_capacity(n);
    let mut cells = Vec::with_capacity(n);
    let mut counts = Vec::with_capacity(n);
    for &(t, c, k) in &partial.cells {
        tables.push(t as i32);
        cells.push(c as i64);
        counts.push(i64::try_from(k).unwrap_or(i64::MAX));
    }
    tables.push(-1);
    cells.push(partial.cells.len() as i64);
    counts.push(partial.seal as i64);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![p; n])),
        Arc::new(Int32Array::from(tables)),
        Arc::new(Int64Array::from(cells)),
        Arc::new(Int64Array::from(counts)),
    ];
    RecordBatch::try_new(PartitionSpec::partial_schema(), columns)
        .map_err(|e| RecordsError::Internal(e.to_string()))
}

/// Partition `partition`'s records (a source of the spec's columns)
/// counted into its sealed tables: the one pass when records are not
/// bounded per unit. With `rows` [`Rows::CountsTable`] each row is a
/// group of identical records (the spec's columns and a
/// [`crate::COUNT_COLUMN`], as an engine's `GROUP BY` of the columns read
/// gives it), read as a local release reads a counts table; records with
/// weights are not grouped.
pub fn count_partition(
    spec: &PartitionSpec,
    source: Source<'_>,
    partition: u32,
    rows: Rows,
) -> Result<Partial, RecordsError> {
    if spec.bounds_units() {
        return Err(RecordsError::BadContributions(
            "records bounded per unit are encoded, brought together by unit, then bounded".into(),
        ));
    }
    if rows == Rows::CountsTable && spec.people.weight.is_some() {
        return Err(RecordsError::BadContributions(
            "weighted records are counted one by one, not grouped".into(),
        ));
    }
    let reading = Reading {
        rows,
        time: None,
        people: &spec.people,
    };
    let counts = count(source, &spec.schema, &spec.layout, reading)?;
    Ok(counts.counted.into_partial(&spec.key, partition))
}

/// A worker's encoded records, for [`encode_partition`].
struct UnitRows<'k> {
    key: &'k DistributedKey,
    encoded: Encoded,
    units: Vec<u128>,
    codes: Vec<Vec<i32>>,
    weights: Vec<f64>,
}

impl Sink for UnitRows<'_> {
    fn batch(
        &mut self,
        compiled: &Compiled,
        batch: &RecordBatch,
        malformed: &[Option<Malformed>],
    ) -> Result<(), RecordsError> {
        let key = self.key;
        let hash = |tag: u8, bytes: &[u8]| key.unit(tag, bytes);
        self.encoded
            .encode(compiled, batch, malformed, Some(&hash))?;
        let e = &self.encoded;
        for r in 0..e.rows {
            if e.multiplicity[r] == 0 {
                continue;
            }
            self.units.push(e.units[r]);
            for (out, codes) in self.codes.iter_mut().zip(&e.codes) {
                // Cells fit: an attribute has fewer than 2^31 of them.
                out.push(codes[r] as i32);
            }
            if compiled.weight.is_some() {
                self.weights.push(e.weights[r]);
            }
        }
        Ok(())
    }
}

/// Partition `partition`'s records (a source of the spec's columns)
/// encoded for bounding: one row of [`PartitionSpec::encoded_schema`] per
/// record the schema keeps, its unit hashed with the counting's key.
pub fn encode_partition(
    spec: &PartitionSpec,
    source: Source<'_>,
) -> Result<RecordBatch, RecordsError> {
    let width = spec.layout.shape().len();
    let reading = Reading {
        rows: Rows::Records,
        time: None,
        people: &spec.people,
    };
    let workers = read(
        source,
        &spec.schema,
        reading,
        |_| {},
        || {
            Ok(UnitRows {
                key: &spec.key,
                encoded: Encoded::default(),
                units: Vec::new(),
                codes: vec![Vec::new(); width],
                weights: Vec::new(),
            })
        },
    )?;
    let mut hi = Vec::new();
    let mut lo = Vec::new();
    let mut codes = vec![Vec::new(); width];
    let mut weights = Vec::new();
    for w in workers {
        hi.extend(w.units.iter().map(|u| (u >> 64) as u64 as i64));
        lo.extend(w.units.iter().map(|&u| u as u64 as i64));
        for (all, part) in codes.iter_mut().zip(w.codes) {
            all.extend(part);
        }
        weights.extend(w.weights);
    }
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(hi)),
        Arc::new(Int64Array::from(lo)),
    ];
    columns.extend(
        codes
            .into_iter()
            .map(|c| Arc::new(Int32Array::from(c)) as ArrayRef),
    );
    if spec.people.weight.is_some() {
        columns.push(Arc::new(Float64Array::from(weights)));
    }
    RecordBatch::try_new(spec.encoded_schema(), columns)
        .map_err(|e| RecordsError::Internal(e.to_string()))
}

/// Partition `partition`'s encoded records (batches of
/// [`PartitionSpec::encoded_schema`], every record of each of its units)
/// bounded and counted by the kernel into its sealed tables.
pub fn bound_partition(
    spec: &PartitionSpec,
    batches: impl IntoIterator<Item = Result<RecordBatch, RecordsError>>,
    partition: u32,
) -> Result<Partial, RecordsError> {
    let shape = spec.layout.shape().to_vec();
    let counting = Counting::new(
        spec.layout.kernel().clone(),
        spec.people.contributions(),
        spec.people.memory,
        spec.people.spill_to(),
        1,
    )
    .map_err(kernel)?;
    let mut tally = counting.tally().map_err(kernel)?;
    let expected = spec.encoded_schema();
    let not_encoded = || {
        RecordsError::BadContributions(
            "records to bound that are not dpmm's encoded records".into(),
        )
    };
    let weighted = spec.people.weight.is_some();
    for batch in batches {
        let batch = batch?;
        let ints = int_columns(
            &batch
                .project(&(0..shape.len() + 2).collect::<Vec<_>>())
                .map_err(|_| not_encoded())?,
            &ArrowSchema::new(expected.fields()[..shape.len() + 2].to_vec()),
        )
        .ok_or_else(not_encoded)?;
        if batch.num_columns() != expected.fields().len() {
            return Err(not_encoded());
        }
        let units: Vec<u128> = ints[0]
            .iter()
            .zip(&ints[1])
            .map(|(&h, &l)| (u128::from(h as u64) << 64) | u128::from(l as u64))
            .collect();
        let codes: Vec<Vec<u32>> = ints[2..]
            .iter()
            .zip(&shape)
            .map(|(c, &n)| {
                c.iter()
                    .map(|&v| u32::try_from(v).ok().filter(|&v| (v as usize) < n))
                    .collect::<Option<Vec<u32>>>()
            })
            .collect::<Option<_>>()
            .ok_or_else(not_encoded)?;
        let weights: Option<Vec<f64>> = if weighted {
            let w = batch.column(shape.len() + 2);
            if w.data_type() != &DataType::Float64 || w.null_count() > 0 {
                return Err(not_encoded());
            }
            let w = w.as_primitive::<Float64Type>().values().to_vec();
            if w.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
                return Err(not_encoded());
            }
            Some(w)
        } else {
            None
        };
        let multiplicity = vec![1u64; batch.num_rows()];
        let records = Records {
            codes: &codes,
            multiplicity: &multiplicity,
            units: Some(&units),
            weights: weights.as_deref(),
            steps: &[],
        };
        tally.add(&records).map_err(kernel)?;
    }
    let counted = counting.finish(vec![tally]).map_err(kernel)?;
    Ok(counted.into_partial(&spec.key, partition))
}

#[cfg(test)]
#[path = "partition_tests.rs"]
mod tests;
