//! Which tree entries git's checkout writes, as pure functions.
//!
//! [`verify_path`] is git's own `verify_path()` (`read-cache.c`, with
//! `is_ntfs_dotgit()` of `path.c` and `is_hfs_dotgit()` of `utf8.c`), which
//! `git checkout` applies to the path of every file, symlink and submodule
//! it would write, refusing the whole checkout with "invalid path" when one
//! fails. [`check_entries`] is what `git fsck` calls a broken tree and that
//! leaves a checkout ill-defined: an empty name (which git's checkout itself
//! refuses), a name with `/`, and a name listed twice. [`check_lengths`] is
//! what the filesystem refuses a checkout: a name longer than `NAME_MAX`, a
//! path of `PATH_MAX` bytes or more.

/// The longest file name Linux filesystems hold (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Linux's `PATH_MAX`: a path of this many bytes or more cannot be created.
pub const PATH_MAX: usize = 4096;

/// Which aliases of `.git` a checkout refuses besides `.git` itself in any
/// case: git's `core.protectNTFS` (on by default everywhere) and
/// `core.protectHFS` (on by default on macOS only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protect {
    /// Refuse the names NTFS takes for `.git` (`git~1`, `.git.`, `.git::$INDEX_ALLOCATION`).
    pub ntfs: bool,
    /// Refuse the names HFS+ takes for `.git` (ignorable code points inside it).
    pub hfs: bool,
}

impl Protect {
    /// Git's defaults on this platform.
    pub const DEFAULT: Protect = Protect {
        ntfs: true,
        hfs: cfg!(target_os = "macos"),
    };
}

/// Why git's checkout refuses a path ("invalid path").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathProblem {
    /// An empty component: a leading, doubled or trailing `/`.
    EmptyComponent,
    /// A `.` or `..` component.
    DotComponent,
    /// A `.git` component, in any case.
    DotGit,
    /// A component NTFS takes for `.git`.
    NtfsDotGit,
    /// A component HFS+ takes for `.git`.
    HfsDotGit,
    /// A symlink named `.gitmodules` (in any case, or an NTFS or HFS+ alias of it).
    SymlinkGitmodules,
}

impl PathProblem {
    /// What is wrong, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            PathProblem::EmptyComponent => "it has an empty component",
            PathProblem::DotComponent => "it has a '.' or '..' component",
            PathProblem::DotGit => "it has a '.git' component (in some case)",
            PathProblem::NtfsDotGit => "it has a component NTFS reads as '.git' (core.protectNTFS)",
            PathProblem::HfsDotGit => "it has a component HFS+ reads as '.git' (core.protectHFS)",
            PathProblem::SymlinkGitmodules => "it is a symlink named '.gitmodules'",
        }
    }
}

/// Why `git fsck` calls a tree broken, in a way that leaves what a checkout
/// writes ill-defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeProblem {
    /// An entry with an empty name (`git checkout`: "empty filename in tree entry").
    EmptyName,
    /// A name holding `/` (`fsck`: `fullPathname`).
    Slash,
    /// A name holding a NUL byte, which no file name can.
    Nul,
    /// A name listed twice (`fsck`: `duplicateEntries`).
    Duplicate,
    /// A name listed as a directory and as something else (`fsck`: `duplicateEntries`).
    FileAndDirectory,
}

impl TreeProblem {
    /// What is wrong, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            TreeProblem::EmptyName => "the tree holds an entry with an empty name",
            TreeProblem::Slash => "the name holds '/'",
            TreeProblem::Nul => "the name holds a NUL byte",
            TreeProblem::Duplicate => "the tree lists the name twice",
            TreeProblem::FileAndDirectory => {
                "the tree lists the name both as a directory and as a file"
            }
        }
    }
}

/// Why the filesystem refuses to hold a path a checkout would write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LengthProblem {
    /// A component longer than [`NAME_MAX`] bytes.
    NameTooLong,
    /// A path of [`PATH_MAX`] bytes or more.
    PathTooLong,
}

impl LengthProblem {
    /// What is wrong, for a message.
    pub fn describe(self) -> &'static str {
        match self {
            LengthProblem::NameTooLong => "a component is longer than 255 bytes",
            LengthProblem::PathTooLong => "the path is 4096 bytes or longer",
        }
    }
}

/// The first problem among the entries of one tree, in the tree's order:
/// its index and what it is. `entries` gives each entry's name and whether
/// it is a tree.
pub fn check_entries<'a>(
    entries: impl IntoIterator<Item = (&'a [u8], bool)>,
) -> Result<(), (usize, TreeProblem)> {
    let mut seen: std::collections::HashMap<&[u8], bool> = std::collections::HashMap::new();
    for (i, (name, is_tree)) in entries.into_iter().enumerate() {
        if name.is_empty() {
            return Err((i, TreeProblem::EmptyName));
        }
        if name.contains(&0) {
            return Err((i, TreeProblem::Nul));
        }
        if name.contains(&b'/') {
            return Err((i, TreeProblem::Slash));
        }
        if let Some(was_tree) = seen.insert(name, is_tree) {
            let problem = if was_tree == is_tree {
                TreeProblem::Duplicate
            } else {
                TreeProblem::FileAndDirectory
            };
            return Err((i, problem));
        }
    }
    Ok(())
}

/// Whether the filesystem holds `path` (relative to a checkout's root).
pub fn check_lengths(path: &[u8]) -> Result<(), LengthProblem> {
    if path.len() >= PATH_MAX {
        return Err(LengthProblem::PathTooLong);
    }
    if path.split(|b| *b == b'/').any(|c| c.len() > NAME_MAX) {
        return Err(LengthProblem::NameTooLong);
    }
    Ok(())
}

/// Git's `verify_path()`: whether a checkout writes the file, symlink
/// (`symlink`) or submodule at `path`, relative to its root and
/// `/`-separated. As in C, a NUL byte ends the path.
pub fn verify_path(path: &[u8], symlink: bool, protect: Protect) -> Result<(), PathProblem> {
    let at = |i: usize| path.get(i).copied().unwrap_or(0);
    // The start of the component being checked.
    let mut start = 0;
    loop {
        let rest = &path[start.min(path.len())..];
        // Git checks the aliases first; the order decides only which
        // problem is named.
        if at(start) == b'.' {
            dotfile(&rest[1..], symlink)?;
        }
        if protect.hfs {
            if is_hfs_dot(rest, b"git") {
                return Err(PathProblem::HfsDotGit);
            }
            if symlink && is_hfs_dot(rest, b"gitmodules") {
                return Err(PathProblem::SymlinkGitmodules);
            }
        }
        if protect.ntfs {
            ntfs_checks(rest, symlink)?;
        }
        let c = at(start);
        let mut i = start + 1;
        if c == b'/' || c == 0 {
            return Err(PathProblem::EmptyComponent);
        }
        loop {
            let c = at(i);
            i += 1;
            if c == 0 {
                return Ok(());
            }
            if c == b'/' {
                start = i;
                break;
            }
            if c == b'\\' && protect.ntfs {
                ntfs_checks(&path[i.min(path.len())..], symlink)?;
            }
        }
    }
}

/// The NTFS checks of `verify_path()` on the path from a component's start.
fn ntfs_checks(rest: &[u8], symlink: bool) -> Result<(), PathProblem> {
    if is_ntfs_dotgit(rest) {
        return Err(PathProblem::NtfsDotGit);
    }
    if symlink && is_ntfs_dot(rest, b"gitmodules", b"gi7eba") {
        return Err(PathProblem::SymlinkGitmodules);
    }
    Ok(())
}

/// Git's `verify_dotfile()`: the rest of a component that starts with `.`.
fn dotfile(rest: &[u8], symlink: bool) -> Result<(), PathProblem> {
    let at = |i: usize| rest.get(i).copied().unwrap_or(0);
    let ends = |c: u8| c == 0 || c == b'/';
    if ends(at(0)) {
        return Err(PathProblem::DotComponent);
    }
    match at(0) {
        b'g' | b'G' => {
            if !at(1).eq_ignore_ascii_case(&b'i') || !at(2).eq_ignore_ascii_case(&b't') {
                return Ok(());
            }
            if ends(at(3)) {
                return Err(PathProblem::DotGit);
            }
            let after = rest.get(3..).unwrap_or_default();
            if symlink
                && after.len() >= 7
                && after[..7].eq_ignore_ascii_case(b"modules")
                && ends(after.get(7).copied().unwrap_or(0))
            {
                return Err(PathProblem::SymlinkGitmodules);
            }
            Ok(())
        }
        b'.' if ends(at(1)) => Err(PathProblem::DotComponent),
        _ => Ok(()),
    }
}

/// Git's `is_ntfs_dotgit()`: `.git` or `git~1`, then only dots and spaces,
/// up to the end, a `/` or `\`, or a `:` (an alternate data stream).
fn is_ntfs_dotgit(name: &[u8]) -> bool {
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let mut i = match at(0) {
        b'.' if name.len() >= 4 && name[1..4].eq_ignore_ascii_case(b"git") => 4,
        b'g' | b'G'
            if name.len() >= 5
                && name[1..3].eq_ignore_ascii_case(b"it")
                && &name[3..5] == b"~1" =>
        {
            5
        }
        _ => return false,
    };
    loop {
        let c = at(i);
        i += 1;
        if matches!(c, 0 | b'/' | b'\\' | b':') {
            return true;
        }
        if c != b'.' && c != b' ' {
            return false;
        }
    }
}

/// Git's `is_ntfs_dot_generic()`: `.NAME`, its short name `NAME6~1` to
/// `~4`, or the fallback short name `PREFIX~N`, then only dots and spaces up
/// to the end or a `:`.
fn is_ntfs_dot(name: &[u8], dotgit_name: &[u8], short_prefix: &[u8]) -> bool {
    let at = |i: usize| name.get(i).copied().unwrap_or(0);
    let only_spaces_and_periods = |mut i: usize| loop {
        let c = at(i);
        i += 1;
        if c == 0 || c == b':' {
            return true;
        }
        if c != b' ' && c != b'.' {
            return false;
        }
    };
    let len = dotgit_name.len();
    if at(0) == b'.' && name.len() > len && name[1..=len].eq_ignore_ascii_case(dotgit_name) {
        return only_spaces_and_periods(len + 1);
    }
    if name.len() >= 6
        && name[..6].eq_ignore_ascii_case(&dotgit_name[..6])
        && at(6) == b'~'
        && (b'1'..=b'4').contains(&at(7))
    {
        return only_spaces_and_periods(8);
    }
    let mut saw_tilde = false;
    let mut i = 0;
    while i < 8 {
        let c = at(i);
        if c == 0 {
            return false;
        } else if saw_tilde {
            if !c.is_ascii_digit() {
                return false;
            }
        } else if c == b'~' {
            i += 1;
            if !(b'1'..=b'9').contains(&at(i)) {
                return false;
            }
            saw_tilde = true;
        } else if i >= 6 || c & 0x80 != 0 || c.to_ascii_lowercase() != short_prefix[i] {
            return false;
        }
        i += 1;
    }
    only_spaces_and_periods(i)
}

/// The code points HFS+ ignores in a name.
const HFS_IGNORED: [u32; 16] = [
    0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c,
    0x206d, 0x206e, 0x206f, 0xfeff,
];

/// Git's `is_hfs_dot_generic()`: `.` and the needle, case-insensitively,
/// then the end or a `/`, the code points HFS+ ignores skipped anywhere.
/// As in git, a name whose first character after the needle is not valid
/// UTF-8 matches.
fn is_hfs_dot(path: &[u8], needle: &[u8]) -> bool {
    let mut chars = HfsChars { rest: path };
    if chars.next_char() != u32::from(b'.') {
        return false;
    }
    for n in needle {
        let c = chars.next_char();
        if c > 127 || (c as u8).to_ascii_lowercase() != *n {
            return false;
        }
    }
    let c = chars.next_char();
    c == 0 || c == u32::from(b'/')
}

/// The characters of a path as git's `next_hfs_char()` reads them.
struct HfsChars<'a> {
    rest: &'a [u8],
}

impl HfsChars<'_> {
    /// The next code point not ignored by HFS+; 0 at the end, at a NUL or at
    /// bytes that are not valid UTF-8 (as git's `pick_one_utf8_char()` judges).
    fn next_char(&mut self) -> u32 {
        loop {
            let Some((c, len)) = pick_one_utf8_char(self.rest) else {
                self.rest = &[];
                return 0;
            };
            self.rest = self.rest.get(len..).unwrap_or_default();
            if !HFS_IGNORED.contains(&c) {
                return c;
            }
        }
    }
}

/// Git's `pick_one_utf8_char()`: the first code point of `s` and its length
/// in bytes (a NUL or the end read as U+0000); `None` when `s` does not start
/// with valid UTF-8 (overlong forms, surrogates, U+FFFE and U+FFFF, and code
/// points above U+10FFFF are invalid).
fn pick_one_utf8_char(s: &[u8]) -> Option<(u32, usize)> {
    let at = |i: usize| u32::from(s.get(i).copied().unwrap_or(0));
    let cont = |i: usize| at(i) & 0xc0 == 0x80;
    let s0 = at(0);
    if s0 < 0x80 {
        Some((s0, 1))
    } else if s0 & 0xe0 == 0xc0 {
        if !cont(1) || s0 & 0xfe == 0xc0 {
            return None;
        }
        Some((((s0 & 0x1f) << 6) | (at(1) & 0x3f), 2))
    } else if s0 & 0xf0 == 0xe0 {
        if !cont(1)
            || !cont(2)
            || (s0 == 0xe0 && at(1) & 0xe0 == 0x80)
            || (s0 == 0xed && at(1) & 0xe0 == 0xa0)
            || (s0 == 0xef && at(1) == 0xbf && at(2) & 0xfe == 0xbe)
        {
            return None;
        }
        Some((
            ((s0 & 0x0f) << 12) | ((at(1) & 0x3f) << 6) | (at(2) & 0x3f),
            3,
        ))
    } else if s0 & 0xf8 == 0xf0 {
        if !cont(1)
            || !cont(2)
            || !cont(3)
            || (s0 == 0xf0 && at(1) & 0xf0 == 0x80)
            || (s0 == 0xf4 && at(1) > 0x8f)
            || s0 > 0xf4
        {
            return None;
        }
        Some((
            ((s0 & 0x07) << 18) | ((at(1) & 0x3f) << 12) | ((at(2) & 0x3f) << 6) | (at(3) & 0x3f),
            4,
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINUX: Protect = Protect {
        ntfs: true,
        hfs: false,
    };
    const ALL: Protect = Protect {
        ntfs: true,
        hfs: true,
    };
    const NONE: Protect = Protect {
        ntfs: false,
        hfs: false,
    };

    fn check(path: &str, protect: Protect) -> Result<(), PathProblem> {
        verify_path(path.as_bytes(), false, protect)
    }

    #[test]
    fn plain_paths_pass() {
        for ok in [
            "a",
            "skills/ce-plan/SKILL.md",
            ".gitignore",
            ".gitattributes",
            ".github/workflows/x.yml",
            "a/.gitmodules",
            "...",
            ".x",
            "git~2",
            "gitx",
            ".gitx/y",
            "a\\b",
            "\\.git",
            ".g\u{200c}it",
            "x.git",
        ] {
            assert_eq!(check(ok, LINUX), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn dot_dotdot_and_empty_components_fail() {
        use PathProblem::*;
        for (bad, why) in [
            ("", EmptyComponent),
            ("/a", EmptyComponent),
            ("a//b", EmptyComponent),
            ("a/", EmptyComponent),
            (".", DotComponent),
            ("a/./b", DotComponent),
            ("..", DotComponent),
            ("a/../b", DotComponent),
            ("a/..", DotComponent),
        ] {
            assert_eq!(check(bad, NONE), Err(why), "{bad:?}");
        }
    }

    #[test]
    fn dot_git_in_any_case_fails_whatever_the_protection() {
        for bad in [".git", ".GIT", ".Git/config", "a/.gIt", "a/.git/b"] {
            assert_eq!(check(bad, NONE), Err(PathProblem::DotGit), "{bad:?}");
            assert_eq!(check(bad, ALL), Err(PathProblem::DotGit), "{bad:?}");
        }
    }

    #[test]
    fn ntfs_aliases_fail_under_protect_ntfs_only() {
        for bad in [
            "git~1",
            "GIT~1/x",
            ".git.",
            ".git ",
            ".git. . .",
            ".git::$INDEX_ALLOCATION",
            ".git:stream",
            "a\\.git",
            "a\\git~1\\b",
            "x/.GIT./y",
        ] {
            assert_eq!(check(bad, LINUX), Err(PathProblem::NtfsDotGit), "{bad:?}");
            assert_eq!(check(bad, NONE), Ok(()), "{bad:?}");
        }
        for ok in [".git.x", ".git x", "git~10", "git~1x"] {
            assert_eq!(check(ok, LINUX), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn hfs_aliases_fail_under_protect_hfs_only() {
        for bad in [
            ".g\u{200c}it",
            "\u{200d}.git/x",
            ".GI\u{feff}T",
            ".git\u{206f}",
            "a/.g\u{202e}it",
        ] {
            assert_eq!(check(bad, ALL), Err(PathProblem::HfsDotGit), "{bad:?}");
            assert_eq!(check(bad, LINUX), Ok(()), "{bad:?}");
        }
        // Bytes that are not UTF-8 right after ".git" match, as in git.
        assert_eq!(
            verify_path(b".git\xff", false, ALL),
            Err(PathProblem::HfsDotGit)
        );
        assert_eq!(verify_path(b".git\xff", false, LINUX), Ok(()));
        // Bytes that are not UTF-8 inside do not.
        assert_eq!(verify_path(b".g\xffit", false, ALL), Ok(()));
        // Not ignorable: a zero-width space.
        assert_eq!(check(".g\u{200b}it", ALL), Ok(()));
    }

    #[test]
    fn gitmodules_is_refused_as_a_symlink_only() {
        let link = |p: &str, protect| verify_path(p.as_bytes(), true, protect);
        for bad in [
            ".gitmodules",
            ".GITMODULES",
            "a/.gitmodules",
            ".gitmodules/x",
        ] {
            assert_eq!(
                link(bad, NONE),
                Err(PathProblem::SymlinkGitmodules),
                "{bad:?}"
            );
            assert_eq!(check(bad, ALL), Ok(()), "{bad:?}");
        }
        for bad in [
            ".gitmodules.",
            ".gitmodules ::$DATA",
            "gitmod~1",
            "GITMOD~4",
            "gi7eba~1",
            "gi7eba~9",
        ] {
            assert_eq!(
                link(bad, LINUX),
                Err(PathProblem::SymlinkGitmodules),
                "{bad:?}"
            );
            assert_eq!(link(bad, NONE), Ok(()), "{bad:?}");
        }
        assert_eq!(
            link(".gitmodules\u{200c}", ALL),
            Err(PathProblem::SymlinkGitmodules)
        );
        for ok in [".gitmodulesx", "gitmod~5", "gi7eba~0", "gi7eb~1"] {
            assert_eq!(link(ok, ALL), Ok(()), "{ok:?}");
        }
    }

    #[test]
    fn tree_entries_fail_on_empty_slash_nul_and_duplicates() {
        let names = |list: &[(&'static str, bool)]| {
            list.iter()
                .map(|(n, t)| (n.as_bytes(), *t))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            check_entries(names(&[("a", false), ("b", true), ("c", false)])),
            Ok(())
        );
        assert_eq!(
            check_entries(names(&[("a", false), ("", false)])),
            Err((1, TreeProblem::EmptyName))
        );
        assert_eq!(
            check_entries(names(&[("a/b", false)])),
            Err((0, TreeProblem::Slash))
        );
        assert_eq!(
            check_entries(vec![(&b"a\0b"[..], false)]),
            Err((0, TreeProblem::Nul))
        );
        assert_eq!(
            check_entries(names(&[
                ("x", false),
                ("SKILL.md", false),
                ("SKILL.md", false)
            ])),
            Err((2, TreeProblem::Duplicate))
        );
        // Apart, and out of order, as a raw tree may list them.
        assert_eq!(
            check_entries(names(&[
                ("ce-plan", false),
                ("ce-plan.md", false),
                ("ce-plan", true)
            ])),
            Err((2, TreeProblem::FileAndDirectory))
        );
    }

    #[test]
    fn lengths_the_filesystem_refuses() {
        let name = |n: usize| "a".repeat(n);
        assert_eq!(check_lengths(name(255).as_bytes()), Ok(()));
        assert_eq!(
            check_lengths(format!("d/{}", name(256)).as_bytes()),
            Err(LengthProblem::NameTooLong)
        );
        let deep = vec![name(200); 20].join("/");
        assert_eq!(deep.len(), 4019);
        assert_eq!(check_lengths(deep.as_bytes()), Ok(()));
        let deeper = format!("{deep}/{}", name(76));
        assert_eq!(deeper.len(), 4096);
        assert_eq!(
            check_lengths(deeper.as_bytes()),
            Err(LengthProblem::PathTooLong)
        );
    }

    #[test]
    fn utf8_as_git_reads_it() {
        assert_eq!(pick_one_utf8_char(b""), Some((0, 1)));
        assert_eq!(pick_one_utf8_char("é".as_bytes()), Some((0xe9, 2)));
        assert_eq!(
            pick_one_utf8_char("\u{10ffff}".as_bytes()),
            Some((0x10ffff, 4))
        );
        for bad in [
            &b"\xc0\x80"[..],
            b"\xe0\x80\x80",
            b"\xed\xa0\x80",
            b"\xef\xbf\xbe",
            b"\xef\xbf\xbf",
            b"\xf4\x90\x80\x80",
            b"\xf5\x80\x80\x80",
            b"\x80",
            b"\xc3",
        ] {
            assert_eq!(pick_one_utf8_char(bad), None, "{bad:?}");
        }
    }
}
