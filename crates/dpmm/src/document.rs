//! Where a JSON document comes from — a records schema, a workload spec or
//! a plan file (`docs/formats.md`): a file, or text a program holds in
//! memory (the Python package passes the dictionaries it was given, a
//! service the bodies it received). Both are read by the same parsers
//! and refused with the same messages, named by the path or by the name
//! the caller chose.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A schema, workload spec or plan file: on disk or in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// A file.
    File(PathBuf),
    /// JSON text held in memory.
    Text {
        /// The JSON.
        text: String,
        /// What messages call it (a file has its path).
        name: String,
        /// The directory relative paths inside it resolve against (the
        /// `.npy` factors of a workload spec).
        base: PathBuf,
    },
}

impl Document {
    /// JSON text named `name` in messages, whose relative paths resolve
    /// against the current directory.
    pub fn text(text: impl Into<String>, name: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            name: name.into(),
            base: PathBuf::from("."),
        }
    }

    /// The file's path; `None` for text in memory.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::File(p) => Some(p),
            Self::Text { .. } => None,
        }
    }

    /// What messages call it: the path, or the name given with the text.
    pub fn name(&self) -> Cow<'_, str> {
        match self {
            Self::File(p) => p.to_string_lossy(),
            Self::Text { name, .. } => Cow::Borrowed(name),
        }
    }

    /// The directory relative paths inside it resolve against: the file's
    /// own directory, or the base given with the text.
    pub fn base(&self) -> &Path {
        match self {
            Self::File(p) => p.parent().unwrap_or(Path::new(".")),
            Self::Text { base, .. } => base,
        }
    }

    /// Its size in bytes (of the file, without reading it).
    pub(crate) fn len(&self) -> Result<u64> {
        match self {
            Self::File(p) => Ok(std::fs::metadata(p).map_err(|e| Error::file(p, e))?.len()),
            Self::Text { text, .. } => Ok(text.len() as u64),
        }
    }

    /// The text (a file is read now).
    pub(crate) fn read(&self) -> Result<Cow<'_, str>> {
        match self {
            Self::File(p) => Ok(Cow::Owned(
                std::fs::read_to_string(p).map_err(|e| Error::file(p, e))?,
            )),
            Self::Text { text, .. } => Ok(Cow::Borrowed(text)),
        }
    }
}

impl From<PathBuf> for Document {
    fn from(path: PathBuf) -> Self {
        Self::File(path)
    }
}

impl From<&Path> for Document {
    fn from(path: &Path) -> Self {
        Self::File(path.to_path_buf())
    }
}

impl From<&PathBuf> for Document {
    fn from(path: &PathBuf) -> Self {
        Self::File(path.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_file_and_text_name_read_and_resolve() {
        let dir = std::env::temp_dir().join(format!("dpmm-document-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("spec.json");
        std::fs::write(&path, "{\"a\": 1}").unwrap();
        let file = Document::from(path.as_path());
        assert_eq!(file.read().unwrap(), "{\"a\": 1}");
        assert_eq!(file.len().unwrap(), 8);
        assert_eq!(file.base(), dir.as_path());
        assert_eq!(file.path(), Some(path.as_path()));
        assert_eq!(file.name(), path.to_string_lossy());
        let text = Document::text("{\"b\": 22}", "the spec");
        assert_eq!(text.read().unwrap(), "{\"b\": 22}");
        assert_eq!(text.len().unwrap(), 9);
        assert_eq!(text.base(), Path::new("."));
        assert_eq!(text.path(), None);
        assert_eq!(text.name(), "the spec");
        // A missing file is the caller's error, named by its path.
        let missing = Document::from(dir.join("absent.json"));
        let e = missing.read().unwrap_err();
        assert!(
            matches!(&e, Error::BadInput(m) if m.contains("absent.json")),
            "{e}"
        );
        assert!(missing.len().is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
