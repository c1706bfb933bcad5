//! A task's `sandbox_copy` and `sandbox_dependencies` read as the harness reads them.
//!
//! The harness's `TaskAssetCache.prepare` first checks a task's
//! declarations (`_sandbox_copy_declarations`, then
//! `_sandbox_dependency_declarations`), and only then walks anything. The
//! functions here do the same on the task's JSON, as pure functions: they
//! keep each declaration as written (the snapshot digest holds the
//! `sandbox_copy` strings and the dependencies' `source` and `target`
//! unchanged), give the path the walk takes (`PurePosixPath`'s reading:
//! `./a`, `a/` and `a//b` are `a` and `a/b`), and refuse in the harness's
//! words ([`DeclarationError`]). [`check_dependency_binding`] is the
//! comparison of the captured dependency digests with a task's binding.

use serde_json::{Map, Value};

use super::digests::DependencyDigests;
use crate::pyjson::PyString;

/// Where review cases live: a `sandbox_copy` path at or below it is read from
/// the harness's root, not the task's repository.
pub const HARNESS_PREFIX: &str = "eval/workflow_bench/review_cases";

/// The binding field holding the dependency content digest.
pub const DEPENDENCY_CONTENT_BINDING_FIELD: &str = "sandbox_dependency_content_digest";

/// The binding field holding the dependency manifest digest.
pub const DEPENDENCY_MANIFEST_BINDING_FIELD: &str = "sandbox_dependency_manifest_digest";

/// Why the harness refuses a task's declarations; the text is its `SandboxError`'s, word for word.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeclarationError {
    /// `sandbox_copy` is not a list of nonblank strings.
    #[error("sandbox_copy must be a list of nonblank repository-relative paths")]
    CopyNotAList,
    /// A `sandbox_copy` path is absolute, holds `..` or names nothing; the
    /// field is the declaration as Python's `repr` writes it.
    #[error("sandbox_copy must be a repository-relative path: {0}")]
    CopyNotRelative(String),
    /// A declared path is longer than the path byte limit.
    #[error("sandbox_copy exceeds the path byte limit")]
    PathBytes,
    /// Two `sandbox_copy` paths are equal or one holds the other (paths
    /// as read, not as written).
    #[error("sandbox_copy declarations overlap: {0} and {1}")]
    CopyOverlap(String, String),
    /// `sandbox_dependencies` is not a list.
    #[error("sandbox_dependencies must be a list")]
    DependenciesNotAList,
    /// A dependency is not an object of exactly a nonblank string `source`
    /// and a nonblank string `target`.
    #[error("sandbox_dependencies entries require only nonblank source and target")]
    DependencyShape,
    /// A dependency's source is absolute, holds `..` or names nothing (the
    /// path as read).
    #[error("dependency source must stay inside the repository: {0}")]
    SourceOutside(String),
    /// A dependency's target is absolute, holds `..` or names nothing (the
    /// path as read).
    #[error("dependency target must stay inside the clone: {0}")]
    TargetOutside(String),
    /// Two dependency targets are equal or one holds the other (targets as
    /// written).
    #[error("sandbox dependency targets overlap: {0} and {1}")]
    TargetsOverlap(String, String),
    /// The captured dependency digests are not the task binding's.
    #[error("sandbox dependency content changed after task binding")]
    BindingChanged,
}

impl DeclarationError {
    /// The rule the rejection breaks, one id per variant.
    pub fn rule(&self) -> &'static str {
        use DeclarationError::*;
        match self {
            CopyNotAList => "task-copy-not-a-list",
            CopyNotRelative(_) => "task-copy-not-relative",
            PathBytes => "task-asset-path-bytes",
            CopyOverlap(..) => "task-copy-overlap",
            DependenciesNotAList => "task-dependencies-not-a-list",
            DependencyShape => "task-dependency-shape",
            SourceOutside(_) => "task-dependency-source-outside",
            TargetOutside(_) => "task-dependency-target-outside",
            TargetsOverlap(..) => "task-dependency-targets-overlap",
            BindingChanged => "task-dependency-binding-changed",
        }
    }
}

/// A path as `PurePosixPath` reads it: its root (`""`, `"/"` or `"//"`) and
/// its parts, without empty parts or `.`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixPath {
    root: &'static str,
    parts: Vec<String>,
}

impl PosixPath {
    /// Reads `text` as `PurePosixPath(text)` does: two leading slashes are
    /// kept as a root, one or three and more are `/`; empty parts and `.`
    /// are dropped; `..` is kept.
    pub fn parse(text: &str) -> PosixPath {
        let root = if text.starts_with("//") && !text.starts_with("///") {
            "//"
        } else if text.starts_with('/') {
            "/"
        } else {
            ""
        };
        let parts = text
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .map(str::to_owned)
            .collect();
        PosixPath { root, parts }
    }

    /// Whether the path has a root.
    pub fn is_absolute(&self) -> bool {
        !self.root.is_empty()
    }

    /// Whether the path may name something inside a tree: relative, with
    /// parts, none `..`.
    fn stays_inside(&self) -> bool {
        !self.is_absolute() && !self.parts.is_empty() && !self.parts.iter().any(|p| p == "..")
    }

    /// Whether `self` is `other` or one of its parents.
    fn holds(&self, other: &PosixPath) -> bool {
        self.root == other.root
            && self.parts.len() <= other.parts.len()
            && other.parts[..self.parts.len()] == self.parts[..]
    }

    /// Whether one of the two paths is the other or holds it.
    fn overlaps(&self, other: &PosixPath) -> bool {
        self.holds(other) || other.holds(self)
    }
}

impl std::fmt::Display for PosixPath {
    /// `str(PurePosixPath)`: the root, the parts joined by `/`, or `.`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.root.is_empty() && self.parts.is_empty() {
            return f.write_str(".");
        }
        write!(f, "{}{}", self.root, self.parts.join("/"))
    }
}

/// A task's `sandbox_copy`: the declarations as written, and the paths read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyDeclarations {
    /// The strings as written, in order: what the snapshot digest holds.
    pub declarations: Vec<String>,
    /// Each declaration's path as read (`a//b/` is `a/b`), in order: what
    /// the walk takes and the entries are named by.
    pub paths: Vec<String>,
}

impl CopyDeclarations {
    /// Whether any path is read from the harness's root
    /// (`_harness_sandbox_copy_identity` is not empty).
    pub fn reads_harness(&self) -> bool {
        self.paths.iter().any(|p| is_harness_copy(p))
    }
}

/// One entry of a task's `sandbox_dependencies`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DependencyDeclaration {
    /// The source as written: what the digests hold.
    pub source: String,
    /// The target as written: what the digests hold.
    pub target: String,
    /// The source as read, relative to the repository: what the walk takes.
    pub source_path: String,
    /// The target as read, relative to the clone.
    pub target_path: String,
}

/// Whether a path as read lies at or below [`HARNESS_PREFIX`]
/// (`_is_harness_sandbox_copy`).
pub fn is_harness_copy(path: &str) -> bool {
    let path = PosixPath::parse(path);
    path.stays_inside() && PosixPath::parse(HARNESS_PREFIX).holds(&path)
}

/// `_validate_manifest_path`: the path as read, in UTF-8, within the limit.
fn check_path_bytes(path: &PosixPath, max_path_bytes: u64) -> Result<(), DeclarationError> {
    let bytes = path.to_string().len() as u64;
    if bytes > max_path_bytes {
        return Err(DeclarationError::PathBytes);
    }
    Ok(())
}

/// Reads `task["sandbox_copy"]` as `_sandbox_copy_declarations` does.
///
/// Absent is an empty list. Every item must be a nonblank string, then each
/// in order relative, holding no `..` and naming something, within
/// `max_path_bytes`; then no two may overlap (the first pair in order is
/// named).
pub fn copy_declarations(
    task: &Map<String, Value>,
    max_path_bytes: u64,
) -> Result<CopyDeclarations, DeclarationError> {
    let declarations: Vec<String> = match task.get("sandbox_copy") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) if !s.is_empty() => Ok(s.clone()),
                _ => Err(DeclarationError::CopyNotAList),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(DeclarationError::CopyNotAList),
    };
    let mut read = Vec::with_capacity(declarations.len());
    for raw in &declarations {
        let path = PosixPath::parse(raw);
        if !path.stays_inside() {
            return Err(DeclarationError::CopyNotRelative(
                PyString::from(raw.as_str()).py_repr(),
            ));
        }
        check_path_bytes(&path, max_path_bytes)?;
        read.push(path);
    }
    for (index, path) in read.iter().enumerate() {
        if let Some(other) = read[index + 1..].iter().find(|o| path.overlaps(o)) {
            return Err(DeclarationError::CopyOverlap(
                path.to_string(),
                other.to_string(),
            ));
        }
    }
    Ok(CopyDeclarations {
        declarations,
        paths: read.iter().map(PosixPath::to_string).collect(),
    })
}

/// Reads `task["sandbox_dependencies"]` as `_sandbox_dependency_declarations` does.
///
/// Absent is an empty list. Each item in order must be an object of exactly
/// `source` and `target`, both nonblank strings; its source must stay in
/// the repository and its target in the clone; both within
/// `max_path_bytes`. Then no two targets may overlap.
pub fn dependency_declarations(
    task: &Map<String, Value>,
    max_path_bytes: u64,
) -> Result<Vec<DependencyDeclaration>, DeclarationError> {
    let items = match task.get("sandbox_dependencies") {
        None => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(DeclarationError::DependenciesNotAList),
    };
    let mut declarations = Vec::with_capacity(items.len());
    let mut targets = Vec::with_capacity(items.len());
    for item in items {
        let (source, target) = dependency_shape(item).ok_or(DeclarationError::DependencyShape)?;
        let source_path = PosixPath::parse(source);
        let target_path = PosixPath::parse(target);
        if !source_path.stays_inside() {
            return Err(DeclarationError::SourceOutside(source_path.to_string()));
        }
        if !target_path.stays_inside() {
            return Err(DeclarationError::TargetOutside(target_path.to_string()));
        }
        check_path_bytes(&source_path, max_path_bytes)?;
        check_path_bytes(&target_path, max_path_bytes)?;
        declarations.push(DependencyDeclaration {
            source: source.to_owned(),
            target: target.to_owned(),
            source_path: source_path.to_string(),
            target_path: target_path.to_string(),
        });
        targets.push(target_path);
    }
    for (index, target) in targets.iter().enumerate() {
        if let Some(offset) = targets[index + 1..].iter().position(|o| target.overlaps(o)) {
            return Err(DeclarationError::TargetsOverlap(
                declarations[index].target.clone(),
                declarations[index + 1 + offset].target.clone(),
            ));
        }
    }
    Ok(declarations)
}

/// The source and target of an object holding exactly those two keys, both nonblank strings.
fn dependency_shape(item: &Value) -> Option<(&str, &str)> {
    let object = item.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let field = |name: &str| {
        object
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    Some((field("source")?, field("target")?))
}

/// `_validate_dependency_binding_values`: the binding's two fields must be
/// exactly the captured digests (a field absent, or not a string, differs).
pub fn check_dependency_binding(
    binding: &Map<String, Value>,
    digests: &DependencyDigests,
) -> Result<(), DeclarationError> {
    let same =
        |field: &str, digest: String| binding.get(field).and_then(Value::as_str) == Some(&digest);
    if same(
        DEPENDENCY_CONTENT_BINDING_FIELD,
        digests.content.to_string(),
    ) && same(
        DEPENDENCY_MANIFEST_BINDING_FIELD,
        digests.manifest.to_string(),
    ) {
        Ok(())
    } else {
        Err(DeclarationError::BindingChanged)
    }
}
