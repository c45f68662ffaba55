//! Multi-dimensional domains (docs/formats.md): an ordered list of named
//! attributes with sizes; the histogram's cells are their product in
//! row-major order (last attribute fastest).
//!
//! The cell count of a realistic domain overflows `usize` quickly (40
//! yes/no questions are 2⁴⁰ cells, 100 attributes of size 10 are 10¹⁰⁰), so
//! it is kept as `f64` and checked before anything needs a cell index or a
//! dense matrix: [`Domain::cells`] refuses with
//! [`StructuredError::TooLarge`] instead of overflowing or allocating.

use dp_core::DpError;

/// Everything that can be wrong with a domain, a structured workload or a
/// workload spec. Each variant renders as one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StructuredError {
    /// A domain without attributes.
    #[error("the domain has no attributes")]
    EmptyDomain,
    /// Two attributes with the same name.
    #[error("duplicate attribute name '{0}'")]
    DuplicateAttribute(String),
    /// An attribute whose size is zero.
    #[error("attribute '{0}' has size 0 (must be >= 1)")]
    ZeroSize(String),
    /// A name that is not an attribute of the domain.
    #[error("unknown attribute '{0}'")]
    UnknownAttribute(String),
    /// A factor whose number of columns is not its attribute's size.
    #[error("attribute '{attribute}' has size {expected} but its factor has {found} columns")]
    SizeMismatch {
        /// The attribute.
        attribute: String,
        /// The attribute's size.
        expected: usize,
        /// The factor's width.
        found: usize,
    },
    /// A range `[lo, hi]` that is empty or leaves the attribute.
    #[error("attribute '{attribute}': bad range [{lo}, {hi}] (need 0 <= lo <= hi < {size})")]
    BadRange {
        /// The attribute.
        attribute: String,
        /// Lower end (inclusive).
        lo: i128,
        /// Upper end (inclusive).
        hi: i128,
        /// The attribute's size.
        size: usize,
    },
    /// A weight that is negative, zero, NaN or infinite.
    #[error("bad weight {0}: weights must be finite and > 0")]
    BadWeight(f64),
    /// `marginals: {k}` with k larger than the number of attributes.
    #[error("k = {k} exceeds the {d} attributes of the domain")]
    BadK {
        /// Requested k.
        k: usize,
        /// Attributes in the domain.
        d: usize,
    },
    /// Something needs more cells (or entries) than can be represented.
    #[error("{cells:.1e} {what}: too large to {action}")]
    TooLarge {
        /// What is counted ("cells", "matrix entries").
        what: &'static str,
        /// How many there are.
        cells: f64,
        /// What was refused ("densify", "index cells").
        action: &'static str,
    },
    /// A malformed workload spec (the message names the JSON location).
    #[error("workload spec: {0}")]
    Spec(String),
    /// A file that cannot be read or parsed.
    #[error("{path}: {reason}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
    /// A computation whose result is not finite (e.g. an eigenvalue that
    /// overflows f64 on an astronomically large domain).
    #[error("numerical overflow: {0}")]
    Overflow(String),
    /// A linear-algebra routine refused its operands.
    #[error(transparent)]
    Linalg(#[from] dp_linalg::LinalgError),
}

impl From<StructuredError> for DpError {
    fn from(e: StructuredError) -> Self {
        DpError::InvalidParameter {
            name: "structured workload",
            reason: e.to_string(),
        }
    }
}

/// Result alias for this module family.
pub type SResult<T> = std::result::Result<T, StructuredError>;

/// One attribute: a name and its number of values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribute {
    /// The name (unique within a domain).
    pub name: String,
    /// Number of values (≥ 1).
    pub size: usize,
}

/// An ordered list of attributes (validated: non-empty, unique names,
/// sizes ≥ 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    attributes: Vec<Attribute>,
}

/// Largest number of cells anything here densifies or indexes: 2²⁷ cells
/// (a 2²⁷ vector is 1 GiB of f64; dense Grams are refused far earlier by
/// [`crate::structured::DENSE_GRAM_CELL_LIMIT`]).
pub const CELL_INDEX_LIMIT: f64 = (1u64 << 27) as f64;

impl Domain {
    /// Validates and wraps `attributes`.
    pub fn new(attributes: Vec<Attribute>) -> SResult<Self> {
        if attributes.is_empty() {
            return Err(StructuredError::EmptyDomain);
        }
        for (i, a) in attributes.iter().enumerate() {
            if a.size == 0 {
                return Err(StructuredError::ZeroSize(a.name.clone()));
            }
            if attributes[..i].iter().any(|b| b.name == a.name) {
                return Err(StructuredError::DuplicateAttribute(a.name.clone()));
            }
        }
        Ok(Self { attributes })
    }

    /// A domain from `(name, size)` pairs.
    pub fn from_pairs(pairs: &[(&str, usize)]) -> SResult<Self> {
        Self::new(
            pairs
                .iter()
                .map(|&(name, size)| Attribute {
                    name: name.to_string(),
                    size,
                })
                .collect(),
        )
    }

    /// The attributes, in order.
    pub fn attributes(&self) -> &[Attribute] {
        &self.attributes
    }

    /// Number of attributes d.
    pub fn len(&self) -> usize {
        self.attributes.len()
    }

    /// Always false (a domain has at least one attribute).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The sizes `(n₁, …, n_d)`.
    pub fn shape(&self) -> Vec<usize> {
        self.attributes.iter().map(|a| a.size).collect()
    }

    /// The position of attribute `name`.
    pub fn position(&self, name: &str) -> SResult<usize> {
        self.attributes
            .iter()
            .position(|a| a.name == name)
            .ok_or_else(|| StructuredError::UnknownAttribute(name.to_string()))
    }

    /// The number of cells `Π nᵢ` as f64 (exact up to 2⁵³, never
    /// overflowing for fewer than ~300 attributes of size ≤ 10; `inf` past
    /// f64's range).
    pub fn cells_f64(&self) -> f64 {
        self.attributes.iter().map(|a| a.size as f64).product()
    }

    /// The exact number of cells if it fits in u128.
    pub fn cells_u128(&self) -> Option<u128> {
        self.attributes
            .iter()
            .try_fold(1u128, |acc, a| acc.checked_mul(a.size as u128))
    }

    /// The number of cells as an index type, refused past
    /// [`CELL_INDEX_LIMIT`] with an error naming the count.
    pub fn cells(&self, action: &'static str) -> SResult<usize> {
        match self.cells_u128() {
            Some(c) if c as f64 <= CELL_INDEX_LIMIT => Ok(c as usize),
            _ => Err(StructuredError::TooLarge {
                what: "cells",
                cells: self.cells_f64(),
                action,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn validation() {
        assert_eq!(Domain::new(vec![]), Err(StructuredError::EmptyDomain));
        assert_eq!(
            Domain::from_pairs(&[("a", 2), ("a", 3)]),
            Err(StructuredError::DuplicateAttribute("a".into()))
        );
        assert_eq!(
            Domain::from_pairs(&[("a", 2), ("b", 0)]),
            Err(StructuredError::ZeroSize("b".into()))
        );
        let d = Domain::from_pairs(&[("a", 2), ("b", 3)]).unwrap();
        assert_eq!(d.position("b"), Ok(1));
        assert_eq!(
            d.position("c"),
            Err(StructuredError::UnknownAttribute("c".into()))
        );
        assert_eq!(d.cells("index cells"), Ok(6));
    }

    #[test]
    fn huge_domains_are_counted_not_indexed() {
        // 100 attributes of size 10: 1e100 cells, overflowing u128.
        let attrs: Vec<(String, usize)> = (0..100).map(|i| (format!("a{i}"), 10)).collect();
        let pairs: Vec<(&str, usize)> = attrs.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let d = Domain::from_pairs(&pairs).unwrap();
        assert_eq!(d.cells_u128(), None);
        assert!((d.cells_f64() / 1e100 - 1.0).abs() < 1e-12);
        let e = d.cells("densify").unwrap_err();
        assert_eq!(e.to_string(), "1.0e100 cells: too large to densify");
        // 2^40 fits u128 and u64 but is refused as an index.
        let b: Vec<(String, usize)> = (0..40).map(|i| (format!("q{i}"), 2)).collect();
        let pairs: Vec<(&str, usize)> = b.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let d = Domain::from_pairs(&pairs).unwrap();
        assert_eq!(d.cells_u128(), Some(1u128 << 40));
        assert_eq!(
            d.cells("densify").unwrap_err().to_string(),
            "1.1e12 cells: too large to densify"
        );
    }
}
