//! The CE profile's manifest file, `.claude-plugin/plugin.json`, checked
//! exactly as the reference checks it: `json.loads(path.read_text())`
//! ([`crate::pyjson::loads_text_file`]), then its `name` and `version`.

use crate::pyjson::{LoadError, Value};

/// Why [`check_plugin_manifest`] refused a manifest, with the reference's messages.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ManifestProblem {
    /// The file is not loadable JSON.
    #[error("Compound Engineering plugin manifest is invalid: {0}")]
    Invalid(LoadError),
    /// The top level is not an object or its `name` is not "compound-engineering".
    #[error("CE comparator requires the compound-engineering plugin manifest")]
    NotCompoundEngineering,
    /// The manifest's `version` differs from the pinned one.
    #[error("Compound Engineering plugin version mismatch: expected {expected}, got {got}")]
    VersionMismatch {
        /// The version the caller pinned.
        expected: String,
        /// Python `repr()` of the manifest's `version` value, or "None" when absent.
        got: String,
    },
}

/// Validates a `plugin.json` exactly like the reference's manifest check.
///
/// The reference reads the file with `Path.read_text()`, which also
/// translates `\r\n` and lone `\r` to `\n`; that never changes what is
/// accepted but does change the character positions in error messages, so it
/// is reproduced here.
///
/// # Errors
///
/// The [`ManifestProblem`] the reference would raise, with its message.
pub fn check_plugin_manifest(bytes: &[u8], version: &str) -> Result<(), ManifestProblem> {
    let manifest = crate::pyjson::loads_text_file(bytes).map_err(ManifestProblem::Invalid)?;
    let is_ce = |name: &Value| matches!(name, Value::Str(s) if s.eq_str("compound-engineering"));
    if !matches!(manifest, Value::Object(_)) || !manifest.get("name").is_some_and(is_ce) {
        return Err(ManifestProblem::NotCompoundEngineering);
    }
    match manifest.get("version") {
        Some(Value::Str(found)) if found.eq_str(version) => Ok(()),
        other => Err(ManifestProblem::VersionMismatch {
            expected: version.to_owned(),
            got: other.map_or_else(|| "None".to_owned(), Value::py_repr),
        }),
    }
}

impl ManifestProblem {
    /// Name of the exception class the reference oracle reports for this problem.
    ///
    /// The reference only wraps `OSError`, `UnicodeError` and
    /// `JSONDecodeError` in its `SandboxError`; an over-long integer escapes
    /// as a bare `ValueError` and deep nesting as a `RecursionError`.
    pub fn reference_kind(&self) -> &'static str {
        match self {
            Self::Invalid(LoadError::IntTooLong { .. }) => "ValueError",
            Self::Invalid(LoadError::TooDeep { .. }) => "RecursionError",
            _ => "SandboxError",
        }
    }

    /// The exact message the reference oracle reports for this problem.
    pub fn reference_message(&self) -> String {
        match self {
            Self::Invalid(inner @ (LoadError::IntTooLong { .. } | LoadError::TooDeep { .. })) => {
                inner.to_string()
            }
            _ => self.to_string(),
        }
    }
}
