//! Auditing a results file: every manifest digest its rows name, checked
//! against the store, and every row checked against the reference's arm rule.
//!
//! A results file is JSON Lines, one run per line, as the benchmark harness
//! writes it: each row carries an arm, and the rows of the `ce_*` arms the
//! plugin's version and manifest digest. [`scan`] reads the files once, as a
//! stream: a line is parsed in place, only the three fields asked for (and
//! the digest fields of the field table, [`FieldTable`]) are taken out of it,
//! and only one tally per distinct digest is kept, so that memory grows
//! with the digests, not the rows. [`judge`] then looks each
//! digest up in the store (and with `--verify` re-hashes its objects).
//!
//! Every list that grows with the rows (row problems, malformed lines, the
//! versions and arms of one digest) keeps at most [`LISTED`] or
//! [`KEPT_VALUES`] entries and counts the rest; every string taken from a
//! row is [`cut`] to 80 characters as it is read; a distinct digest costs a
//! fixed 128-byte tally, and the report is made from the tallies one digest
//! at a time.
//!
//! The three steps are three modules: `read` (the inputs opened, cut into
//! lines and parsed for the fields), `scan` (the rows tallied by digest) and
//! `judge` (the tallies set against the store); what they share stays
//! private to this module. `run` is the whole audit ([`audit`]): the scan,
//! the pull of the digests the store lacks from a registry when one is
//! named, and the judgement.

mod judge;
mod read;
mod run;
mod scan;
#[cfg(test)]
mod tests;

use crate::error::Result;

pub use judge::*;
pub use read::*;
pub use run::*;
pub use scan::*;

/// The most row problems, and malformed lines per input, listed by line
/// number; more are counted, not listed.
pub const LISTED: usize = 1000;

/// The most distinct versions and arms listed for one digest; rows beyond
/// them are counted.
pub const KEPT_VALUES: usize = 16;

/// The longest line parsed; a longer one is a malformed line, skipped
/// without being held in memory.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The deepest nesting of arrays and objects in a row (the row itself
/// counted): what `json.loads` reads where Python's recursion limit leaves
/// it the most room.
///
/// CPython 3.11 charges each nested `[` or `{` to its recursion budget
/// (1000, less the Python frames already on the stack), so how deep a line
/// the harness reads depends on where it calls `json.loads` from. Called
/// at a script's top level (`python3 -c 'import json, sys` and a loop of
/// `json.loads(line)` over `sys.stdin`), it reads 995 levels and refuses 996
/// (arrays and objects alike, measured by bisection); from inside functions
/// a few fewer. Audit reads every line any caller could, so that no digest
/// Python can read goes unaudited; the differential test
/// `audit::tests::rows_are_what_python_reads` checks 995 and 996 against
/// `python3`. (The reference's check of the CE profile's manifest file sits deeper:
/// [`crate::pyjson::MAX_DEPTH`].)
pub const ROW_MAX_DEPTH: usize = 995;

/// The largest zstd window accepted (16 MiB), so that a frame cannot make
/// audit hold more; a frame that asks for more is an error.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// How much of the input is read at once.
const CHUNK: usize = 4 << 20;

/// The most characters of a bad value quoted in a problem.
pub const QUOTED: usize = 80;

/// What a digest field of a row names: the kind of snapshot the store
/// must hold for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DigestKind {
    /// A CE plugin snapshot's manifest digest (profile `ce`).
    Ce,
    /// A tree-profile snapshot's manifest digest.
    Tree,
    /// A dependency list's manifest digest (profile `dependencies`).
    Dependencies,
    /// A task snapshot's manifest digest.
    Task,
    /// A dependency list's content digest, found through the catalogue's
    /// content-digest index as `show` finds it.
    DependenciesContent,
    /// An environment's digest (profile `environment`): it passes only
    /// when every member passes too.
    Environment,
}

impl DigestKind {
    /// Every kind, in the order `--field` lists them.
    pub const ALL: [DigestKind; 6] = [
        DigestKind::Ce,
        DigestKind::Tree,
        DigestKind::Dependencies,
        DigestKind::Task,
        DigestKind::DependenciesContent,
        DigestKind::Environment,
    ];

    /// The name `--field NAME=KIND` gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            DigestKind::Ce => "ce",
            DigestKind::Tree => "tree",
            DigestKind::Dependencies => "dependencies",
            DigestKind::Task => "task",
            DigestKind::DependenciesContent => "dependencies-content",
            DigestKind::Environment => "environment",
        }
    }

    /// The kind a name gives, if any.
    pub fn parse(name: &str) -> Option<DigestKind> {
        DigestKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The profile of the snapshot it names.
    pub fn profile(self) -> &'static str {
        match self {
            DigestKind::Ce => "ce",
            DigestKind::Tree => "tree",
            DigestKind::Dependencies | DigestKind::DependenciesContent => "dependencies",
            DigestKind::Task => "task",
            DigestKind::Environment => "environment",
        }
    }

    /// Whether the value is a dependency list's content digest rather
    /// than a manifest digest.
    pub fn content(self) -> bool {
        self == DigestKind::DependenciesContent
    }
}

/// A digest field of the field table: a row's key (or dotted path of
/// keys) whose value names a snapshot, and the kind it names.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TableField {
    /// The row's key, or a dotted path of keys.
    pub name: String,
    /// What it names.
    pub kind: DigestKind,
}

/// The harness's digest fields besides the CE digest's (`--digest-field`),
/// upstream's row schema: each looked up in the store when a row carries
/// it (null or absent: not audited).
pub const DEFAULT_FIELDS: [(&str, DigestKind); 6] = [
    ("task_asset_snapshot_digest", DigestKind::Task),
    ("task_asset_manifest_digest", DigestKind::Tree),
    (
        "sandbox_dependency_manifest_digest",
        DigestKind::Dependencies,
    ),
    (
        "sandbox_dependency_content_digest",
        DigestKind::DependenciesContent,
    ),
    ("gitnexus_runtime_manifest_digest", DigestKind::Tree),
    ("environment_digest", DigestKind::Environment),
];

/// The most digest fields a table holds, its defaults included: each is a
/// slot of every row parsed, held in place without allocating.
pub const MAX_TABLE_FIELDS: usize = 16;

/// The digest fields audited besides the CE digest's: [`DEFAULT_FIELDS`],
/// then each `--field NAME=KIND` (re-mapping a default of the same name in
/// its place, or added after).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct FieldTable {
    /// The fields, in slot order.
    pub fields: Vec<TableField>,
    /// How many of them were given (`--field`) rather than defaults.
    #[serde(skip)]
    pub(super) given: Vec<bool>,
}

impl Default for FieldTable {
    fn default() -> Self {
        FieldTable {
            fields: DEFAULT_FIELDS
                .iter()
                .map(|&(name, kind)| TableField {
                    name: name.to_string(),
                    kind,
                })
                .collect(),
            given: vec![false; DEFAULT_FIELDS.len()],
        }
    }
}

pub use crate::error::misuse::FIELD_SPEC_RULE;

impl FieldTable {
    /// The default table with each spec (`NAME=KIND`) added, or re-mapping
    /// the default field of its name; a spec that breaks the rule is a
    /// misuse naming it.
    pub fn with_specs(specs: &[String]) -> Result<FieldTable> {
        let mut table = FieldTable::default();
        for spec in specs {
            let field = parse_spec(spec)?;
            match table.fields.iter().position(|f| f.name == field.name) {
                Some(i) if table.given[i] && table.fields[i].kind != field.kind => {
                    return Err(spec_misuse(
                        spec,
                        format!(
                            "'{}' is given twice, as {} and as {}",
                            field.name,
                            table.fields[i].kind.as_str(),
                            field.kind.as_str()
                        ),
                    ));
                }
                Some(i) => {
                    table.fields[i] = field;
                    table.given[i] = true;
                }
                None if table.fields.len() >= MAX_TABLE_FIELDS => {
                    return Err(spec_misuse(
                        spec,
                        format!(
                            "at most {MAX_TABLE_FIELDS} digest fields are read, the {} defaults included",
                            DEFAULT_FIELDS.len()
                        ),
                    ));
                }
                None => {
                    table.fields.push(field);
                    table.given.push(true);
                }
            }
        }
        Ok(table)
    }

    /// How many fields there are.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// One `NAME=KIND`, checked.
fn parse_spec(spec: &str) -> Result<TableField> {
    let Some((name, kind)) = spec.rsplit_once('=') else {
        return Err(spec_misuse(spec, "it has no '='".into()));
    };
    if name.is_empty() || name.split('.').any(str::is_empty) {
        return Err(spec_misuse(
            spec,
            "its NAME is empty or has an empty key".into(),
        ));
    }
    let Some(kind) = DigestKind::parse(kind) else {
        return Err(spec_misuse(spec, format!("'{kind}' is no KIND")));
    };
    Ok(TableField {
        name: name.to_string(),
        kind,
    })
}

fn spec_misuse(spec: &str, why: String) -> crate::error::Error {
    crate::error::Misuse::FieldSpec {
        spec: spec.to_string(),
        why,
    }
    .into()
}

/// The harness's digest field.
pub const DEFAULT_DIGEST_FIELD: &str = "ce_plugin_manifest_digest";

/// The harness's version field.
pub const DEFAULT_VERSION_FIELD: &str = "ce_plugin_version";

/// The harness's arm field.
pub const DEFAULT_ARM_FIELD: &str = "arm";
