//! Auditing a results file: every manifest digest its rows name, checked
//! against the store, and every row checked against the reference's arm rule.
//!
//! A results file is JSON Lines, one run per line, as the benchmark harness
//! writes it: each row carries an arm, and the rows of the `ce_*` arms the
//! plugin's version and manifest digest. [`scan`] reads the files once, as a
//! stream: a line is parsed in place, only the three fields asked for (and
//! the harness's tree digest fields, [`TREE_FIELDS`]) are taken out of it,
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

/// A digest field of the harness's task assets: a results row's field
/// whose value names a tree-kind snapshot, and the profile it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeField {
    /// The row's top-level key.
    pub name: &'static str,
    /// The profile of the snapshot it names (`tree`, `dependencies` or `task`).
    pub profile: &'static str,
    /// Whether the value is a dependency list's content digest (found
    /// through the catalogue's content-digest index, as `show` finds it)
    /// rather than a manifest digest.
    pub content: bool,
}

/// The harness's tree digest fields, each looked up in the store when a
/// row carries it (null or absent: not audited).
pub const TREE_FIELDS: [TreeField; 4] = [
    TreeField {
        name: "task_asset_snapshot_digest",
        profile: "task",
        content: false,
    },
    TreeField {
        name: "task_asset_manifest_digest",
        profile: "tree",
        content: false,
    },
    TreeField {
        name: "sandbox_dependency_manifest_digest",
        profile: "dependencies",
        content: false,
    },
    TreeField {
        name: "sandbox_dependency_content_digest",
        profile: "dependencies",
        content: true,
    },
];

/// The harness's digest field.
pub const DEFAULT_DIGEST_FIELD: &str = "ce_plugin_manifest_digest";

/// The harness's version field.
pub const DEFAULT_VERSION_FIELD: &str = "ce_plugin_version";

/// The harness's arm field.
pub const DEFAULT_ARM_FIELD: &str = "arm";
