//! The reference's own words for a rejection, where cestore decides them.
//!
//! cestore's message for a broken rule names the path and often adds what it
//! found (a bound, a path). The reference (`runtime_mounts.py`) raises its
//! own words, sometimes shorter; a caller that must raise exactly those (the
//! Python drop-in) reads them from the JSON error's `reference_message`, so
//! that it never re-derives which rule fired or what the manifest held.
//! Where the reference's words are Python's own (the text of an `OSError`,
//! a `UnicodeEncodeError`, a `RecursionError`), or the rule is cestore's
//! alone, there are none.

use super::rules::Rejection;

/// The message the reference raises for this rejection, when cestore knows
/// it exactly.
pub fn reference_message(r: &Rejection) -> Option<String> {
    let prefix = "Compound Engineering plugin";
    Some(match r {
        Rejection::VersionNotExact { .. } => "--ce-plugin-version must be an exact semantic \
             version (aliases and ranges are forbidden)"
            .into(),
        // Each of these is already the reference's message, with its path.
        Rejection::SourceNotRealDirectory { .. }
        | Rejection::ManifestDirNotReal { .. }
        | Rejection::ManifestMissing { .. }
        | Rejection::SkillsMissing { .. }
        | Rejection::ComponentNotRealDirectory { .. }
        | Rejection::Symlink { .. }
        | Rejection::NotRegularEntry { .. }
        | Rejection::FileNotRegular { .. }
        | Rejection::ChangedDuringValidation { .. }
        | Rejection::ChangedWhileCopying { .. } => r.to_string(),
        Rejection::FileTooLarge { path, .. } => format!(
            "{prefix} file exceeds the per-file limit: {}",
            path.display()
        ),
        Rejection::TooManyFiles { .. } => format!("{prefix} exceeds the file-count limit"),
        Rejection::TooManyBytes { .. } => format!("{prefix} exceeds the total byte limit"),
        Rejection::ManifestInvalid { reason, .. } => {
            format!("{prefix} manifest is invalid: {reason}")
        }
        Rejection::NotCompoundEngineering { .. } => {
            "CE comparator requires the compound-engineering plugin manifest".into()
        }
        Rejection::VersionMismatch { expected, got, .. } => {
            format!("{prefix} version mismatch: expected {expected}, got {got}")
        }
        Rejection::MissingSkill { skill, .. } => {
            format!("{prefix} is missing required skill: {skill}")
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The three manifest rules each give the reference's words, without the
    /// path cestore's own message adds; a rule the reference words with
    /// Python's own exception text gives none.
    #[test]
    fn the_manifest_rules_give_the_references_words() {
        let path = std::path::PathBuf::from("/r/.claude-plugin/plugin.json");
        let words = |r: Rejection| reference_message(&r);
        assert_eq!(
            words(Rejection::ManifestInvalid {
                path: path.clone(),
                reason: "Expecting value: line 1 column 1 (char 0)".into()
            })
            .as_deref(),
            Some(
                "Compound Engineering plugin manifest is invalid: \
                 Expecting value: line 1 column 1 (char 0)"
            )
        );
        assert_eq!(
            words(Rejection::NotCompoundEngineering { path: path.clone() }).as_deref(),
            Some("CE comparator requires the compound-engineering plugin manifest")
        );
        assert_eq!(
            words(Rejection::VersionMismatch {
                path: path.clone(),
                expected: "1.2.3".into(),
                got: "None".into()
            })
            .as_deref(),
            Some("Compound Engineering plugin version mismatch: expected 1.2.3, got None")
        );
        assert_eq!(
            words(Rejection::FileUnreadable {
                path,
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied)
            }),
            None
        );
    }
}
