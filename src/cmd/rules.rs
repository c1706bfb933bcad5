//! `cestore rules`: the decisions bindings read, as [`crate::contract`]
//! gathers them from the modules that make them.

pub use crate::contract::RulesReport;

/// The decisions, as this binary makes them.
pub fn rules() -> RulesReport {
    crate::contract::rules()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every long flag of every command and subcommand.
    fn long_flags(cmd: &clap::Command, into: &mut std::collections::BTreeSet<String>) {
        into.extend(
            cmd.get_arguments()
                .filter_map(|a| a.get_long().map(|l| format!("--{l}"))),
        );
        for sub in cmd.get_subcommands() {
            long_flags(sub, into);
        }
    }

    /// Each flag the table gives a keyword is one the command line takes,
    /// named once; so is each bound's.
    #[test]
    fn each_flag_of_the_table_is_the_command_lines() {
        let mut flags = std::collections::BTreeSet::new();
        long_flags(&crate::cli::args::Cli::command(), &mut flags);
        let report = rules();
        let mut seen = std::collections::BTreeSet::new();
        for f in &report.flags {
            assert!(flags.contains(f.flag), "{} is no flag of cestore", f.flag);
            assert!(seen.insert(f.flag), "{} listed twice", f.flag);
        }
        for b in &report.bounds {
            assert!(flags.contains(b.flag), "{}", b.flag);
            assert!(seen.contains(b.flag), "{} has no keyword", b.flag);
        }
        assert_eq!(report.gitnexus.revisions, ["seed", "upstream"]);
    }

    /// Every rule is listed once, with its message's varying parts named.
    #[test]
    fn each_rule_is_listed_once_with_its_message() {
        let report = rules();
        let mut seen = std::collections::BTreeSet::new();
        for r in &report.rules {
            assert!(seen.insert(r.rule), "{} listed twice", r.rule);
            assert!(!r.message.contains("9000000"), "{}: {}", r.rule, r.message);
        }
        assert_eq!(report.rules.len(), 34 + 18);
        let symlink = report.rules.iter().find(|r| r.rule == "symlink");
        assert_eq!(
            symlink.map(|r| (r.kind, r.code, r.message.as_str())),
            Some((
                "rejected",
                3,
                "Compound Engineering plugin entries must not be symlinks: {path}"
            ))
        );
        let too_long = report.rules.iter().find(|r| r.rule == "path-too-long");
        assert_eq!(
            too_long.map(|r| r.message.as_str()),
            Some(
                "Compound Engineering plugin path exceeds the byte limit \
                 ({limit} bytes, this one has {bytes}): {path}"
            )
        );
    }
}
