//! The module map in docs/design.md is the crate's architecture, checked.
//!
//! Every `.rs` file under `src/` is read; its crate-internal paths
//! (`crate::x::…`, `super::…` and `self::…` resolved against the file's
//! module, a child module named bare, `use crate::{a, b::c}` groups, and
//! `cestore::…` in `main.rs`) are edges from the file's unit to the unit the
//! path names. A unit is a top-level module (`cli/`, `policy.rs`, …), and
//! under `store/` each room (`store/core/`, `store/ingest/`, …) and the
//! `Store` handle (`store/mod.rs`). The map's fenced block lists the units
//! top to bottom, one layer a line (units of one layer joined by `, `): a
//! unit may use its own layer and those drawn below it, never one above,
//! and no two units may use each other, directly or round a longer circle.
//!
//! Test code is left out: an item under `#[cfg(test)]` (a `mod tests { … }`
//! body, a `mod tests;` file, `store/testutil.rs`) draws no edge. Comments,
//! doc comments and string literals draw none either. `lib.rs`, the crate's
//! root, only declares the modules, and is no unit.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The rooms of `store/`, each its own unit.
const STORE_ROOMS: &[&str] = &["core", "ingest", "views", "upkeep", "trust"];

/// One use of another module: where it is written, and the module path it
/// names (absolute, from the crate's root).
#[derive(Debug, PartialEq, Eq)]
struct Edge {
    line: usize,
    path: Vec<String>,
}

/// The source with comments, strings and chars blanked, newlines kept.
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= c.len() {
                    break;
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for ch in &c[i..j.min(c.len())] {
                blank(&mut out, *ch);
            }
            i = j;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), or a lifetime ('a).
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'')
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for ch in &c[i..=e] {
                        blank(&mut out, *ch);
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The stripped source with every item under `#[cfg(test)]` blanked.
fn without_tests(stripped: &str) -> String {
    let mut c: Vec<char> = stripped.chars().collect();
    let attr: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + attr.len() <= c.len() {
        if c[i..i + attr.len()] != attr[..] {
            i += 1;
            continue;
        }
        // The item runs to its first `;` outside braces, or to the brace
        // that closes its first block.
        let mut j = i;
        let mut depth = 0usize;
        while j < c.len() {
            match c[j] {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        let end = (j + 1).min(c.len());
        for ch in c.iter_mut().take(end).skip(i) {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
        i = j + 1;
    }
    c.into_iter().collect()
}

/// The names `mod NAME;` declares under `#[cfg(test)]` in a file.
fn test_modules(src: &str) -> Vec<String> {
    let s = strip(src);
    let mut names = Vec::new();
    let mut rest = s.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        rest = &rest[at + "#[cfg(test)]".len()..];
        let item: String = rest
            .chars()
            .take_while(|c| *c != ';' && *c != '{')
            .collect();
        let words: Vec<&str> = item.split_whitespace().collect();
        if let Some(p) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(p + 1) {
                if rest[item.len()..].starts_with(';') {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every module path a file names, resolved from the crate's root.
///
/// `module` is the file's own module path (`["store", "views", "spares"]`),
/// `children` the modules it declares (a bare path starting with one of them
/// is the child's), and `root` the name the crate is reached by besides
/// `crate` (`cestore` in `main.rs`).
fn edges(src: &str, module: &[String], children: &[String], root: Option<&str>) -> Vec<Edge> {
    let code = without_tests(&strip(src));
    let c: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !(is_ident(c[i - 1]) || c[i - 1] == ':');
        if !starts_word || !is_ident(c[i]) {
            i += 1;
            continue;
        }
        let word: String = c[i..].iter().take_while(|ch| is_ident(**ch)).collect();
        if word == "use" {
            // A use tree, to its `;`.
            let end = (i..c.len()).find(|&j| c[j] == ';').unwrap_or(c.len());
            let tree: String = c[i + 3..end].iter().collect();
            for path in expand(&tree) {
                if let Some(p) = resolve(&path, module, children, root) {
                    found.push(Edge { line, path: p });
                }
            }
            line += tree.matches('\n').count();
            i = end;
            continue;
        }
        let mut j = i;
        let mut segments = Vec::new();
        loop {
            let seg: String = c[j..].iter().take_while(|ch| is_ident(**ch)).collect();
            if seg.is_empty() {
                break;
            }
            j += seg.chars().count();
            segments.push(seg);
            if c.get(j) == Some(&':') && c.get(j + 1) == Some(&':') {
                j += 2;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            if let Some(p) = resolve(&segments, module, children, root) {
                found.push(Edge { line, path: p });
            }
        }
        i = j.max(i + 1);
    }
    found
}

/// The paths of a use tree (`crate::{a, b::{c, d}}` → `crate::a`, `crate::b::c`, `crate::b::d`).
fn expand(tree: &str) -> Vec<Vec<String>> {
    // Tokens: identifiers, and each of `{`, `}`, `,`, `*`, `::`.
    let mut tokens = Vec::new();
    let c: Vec<char> = tree.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if is_ident(c[i]) {
            let w: String = c[i..].iter().take_while(|ch| is_ident(**ch)).collect();
            i += w.chars().count();
            tokens.push(w);
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            tokens.push("::".to_string());
            i += 2;
        } else if matches!(c[i], '{' | '}' | ',' | '*') {
            tokens.push(c[i].to_string());
            i += 1;
        } else {
            i += 1;
        }
    }
    fn tree_at(t: &[String], at: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        while let Some(tok) = t.get(*at) {
            *at += 1;
            match tok.as_str() {
                "{" => {
                    while t.get(*at).is_some_and(|x| x != "}") {
                        tree_at(t, at, &path, out);
                        if t.get(*at).is_some_and(|x| x == ",") {
                            *at += 1;
                        }
                    }
                    *at += 1;
                    return;
                }
                "*" => break,
                "::" => {}
                "as" => {
                    *at += 1;
                    break;
                }
                "," | "}" => {
                    *at -= 1;
                    break;
                }
                "self" if !path.is_empty() => {}
                w => {
                    path.push(w.to_string());
                    if t.get(*at).is_none_or(|x| x != "::") {
                        if t.get(*at).is_some_and(|x| x == "as") {
                            *at += 2;
                        }
                        break;
                    }
                }
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < tokens.len() {
        tree_at(&tokens, &mut at, &[], &mut out);
        at += 1;
    }
    out
}

/// A path's module path from the crate's root, or `None` when it leaves
/// the crate.
fn resolve(
    path: &[String],
    module: &[String],
    children: &[String],
    root: Option<&str>,
) -> Option<Vec<String>> {
    let first = path.first()?;
    let mut base: Vec<String>;
    let mut rest = &path[1..];
    if first == "crate" || Some(first.as_str()) == root {
        base = Vec::new();
    } else if first == "self" {
        base = module.to_vec();
    } else if first == "super" {
        base = module.to_vec();
        base.pop();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
    } else if children.contains(first) {
        base = module.to_vec();
        rest = path;
    } else {
        return None;
    }
    base.extend(rest.iter().cloned());
    (!base.is_empty()).then_some(base)
}

/// The unit a module path belongs to, given the crate's top-level units.
fn unit_of(path: &[String], units: &BTreeMap<String, String>) -> Option<String> {
    let top = path.first()?;
    if top == "store" {
        return Some(match path.get(1) {
            Some(room) if STORE_ROOMS.contains(&room.as_str()) => format!("store/{room}/"),
            _ => "store/mod.rs".to_string(),
        });
    }
    units.get(top).cloned()
}

/// A source file under `src/`: its path, module path and the modules it declares.
struct SourceFile {
    rel: String,
    module: Vec<String>,
    text: String,
}

fn src_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src/")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            src_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts
        .last()
        .is_some_and(|l| l == "mod" || l == "lib" || l == "main")
    {
        parts.pop();
    }
    parts
}

/// The map's layers, top to bottom, from docs/design.md's "Module map".
fn map_layers(design: &str) -> Vec<Vec<String>> {
    let section = design
        .split("\n## Module map")
        .nth(1)
        .expect("docs/design.md has a \"## Module map\" section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the module map has a ```text block");
    block
        .lines()
        .filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()))
        .map(|l| {
            // The line's head: unit names (`x/`, `x.rs`, `store/core/`)
            // joined by `, `; what follows says what they hold.
            let mut units = Vec::new();
            let mut rest = l;
            loop {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '/' | '.'))
                    .collect();
                if !(name.ends_with('/') || name.ends_with(".rs")) {
                    break;
                }
                rest = &rest[name.len()..];
                units.push(name);
                match rest.strip_prefix(", ") {
                    Some(r) => rest = r,
                    None => break,
                }
            }
            units
        })
        .collect()
}

/// What is wrong with the crate against its map: each problem one line.
fn check(src: &Path, design: &str) -> Vec<String> {
    let layers = map_layers(design);
    let mut layer_of = BTreeMap::new();
    for (n, layer) in layers.iter().enumerate() {
        for u in layer {
            layer_of.insert(u.clone(), n);
        }
    }
    let mut paths = Vec::new();
    src_files(src, &mut paths);
    let mut files = Vec::new();
    let mut test_only = BTreeSet::new();
    for p in &paths {
        let rel = p
            .strip_prefix(src)
            .expect("under src/")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(p).expect("read a source file");
        let module = module_of(&rel);
        for name in test_modules(&text) {
            let mut m = module.clone();
            m.push(name);
            test_only.insert(m);
        }
        files.push(SourceFile { rel, module, text });
    }
    // A module declared under #[cfg(test)], and everything under it, is test code.
    files.retain(|f| !test_only.iter().any(|t| f.module.starts_with(t)));
    // The top-level units: `x/` for src/x/mod.rs, else `x.rs`.
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    for f in &files {
        if let Some(top) = f.module.first() {
            let unit = if paths.iter().any(|p| p.ends_with(format!("{top}/mod.rs"))) {
                format!("{top}/")
            } else {
                format!("{top}.rs")
            };
            units.insert(top.clone(), unit);
        }
    }
    let mut problems = Vec::new();
    let mut present = BTreeSet::new();
    let mut graph: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for f in &files {
        if f.rel == "lib.rs" {
            continue;
        }
        let (from, root) = if f.rel == "main.rs" {
            ("main.rs".to_string(), Some("cestore"))
        } else {
            (unit_of(&f.module, &units).expect("a unit"), None)
        };
        present.insert(from.clone());
        let dir_prefix = f
            .rel
            .trim_end_matches(".rs")
            .trim_end_matches("mod")
            .trim_end_matches('/');
        let children: Vec<String> = paths
            .iter()
            .filter_map(|p| {
                let r = p.strip_prefix(src).ok()?.to_string_lossy().into_owned();
                let r = r.strip_prefix(&format!("{dir_prefix}/"))?;
                let first = r.split('/').next()?;
                Some(first.trim_end_matches(".rs").to_string())
            })
            .filter(|c| c != "mod")
            .collect();
        let module = if f.rel == "main.rs" {
            Vec::new()
        } else {
            f.module.clone()
        };
        for e in edges(&f.text, &module, &children, root) {
            let Some(to) = unit_of(&e.path, &units) else {
                continue;
            };
            if to == from {
                continue;
            }
            if let (Some(a), Some(b)) = (layer_of.get(&from), layer_of.get(&to)) {
                if b < a {
                    problems.push(format!(
                        "src/{}:{}: {from} uses {to}, which the map draws above it ({})",
                        f.rel,
                        e.line,
                        e.path.join("::")
                    ));
                }
            }
            graph
                .entry((from.clone(), to))
                .or_insert_with(|| (f.rel.clone(), e.line));
        }
    }
    for u in &present {
        if !layer_of.contains_key(u) {
            problems.push(format!(
                "{u} is in src/ but not in docs/design.md's module map"
            ));
        }
    }
    for u in layer_of.keys() {
        if !present.contains(u) {
            problems.push(format!(
                "{u} is in docs/design.md's module map but not in src/"
            ));
        }
    }
    problems.extend(cycles(&graph));
    problems
}

/// Every circle of units, each named once with the edges that close it.
fn cycles(graph: &BTreeMap<(String, String), (String, usize)>) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in graph.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for start in next.keys() {
        // The shortest way back from `start` to itself, breadth first.
        let mut from: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([*start]);
        let mut closed = None;
        while let Some(u) = queue.pop_front() {
            for v in next.get(u).into_iter().flatten() {
                if v == start {
                    closed = Some(u);
                    break;
                }
                if !from.contains_key(v) {
                    from.insert(v, u);
                    queue.push_back(v);
                }
            }
            if closed.is_some() {
                break;
            }
        }
        let Some(mut u) = closed else { continue };
        let mut circle = vec![*start, u];
        while u != *start {
            u = from[u];
            circle.push(u);
        }
        circle.reverse();
        let mut key: Vec<&str> = circle[1..].to_vec();
        key.sort_unstable();
        if !seen.insert(key) {
            continue;
        }
        let steps: Vec<String> = circle
            .windows(2)
            .map(|w| {
                let (file, line) = &graph[&(w[0].to_string(), w[1].to_string())];
                format!("{} -> {} (src/{file}:{line})", w[0], w[1])
            })
            .collect();
        problems.push(format!("a circle of units: {}", steps.join(", ")));
    }
    problems
}

#[test]
fn every_import_goes_down_the_module_map_and_none_is_circular() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).expect("read docs/design.md");
    let problems = check(&root.join("src"), &design);
    assert!(
        problems.is_empty(),
        "the crate disagrees with docs/design.md's module map:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_map_names_its_layers_top_to_bottom() {
    let design = "x\n## Module map\n\ntext\n```text\nmain.rs ── parse\n   │     more\ncli/ ───── args\nstore/views/   hard links\ndigest.rs, clock.rs   types\n```\n";
    assert_eq!(
        map_layers(design),
        vec![
            vec!["main.rs".to_string()],
            vec!["cli/".to_string()],
            vec!["store/views/".to_string()],
            vec!["digest.rs".to_string(), "clock.rs".to_string()],
        ]
    );
}

fn strings(paths: &[&str]) -> Vec<Vec<String>> {
    paths
        .iter()
        .map(|p| p.split("::").map(String::from).collect())
        .collect()
}

fn m(path: &str) -> Vec<String> {
    path.split("::").map(String::from).collect()
}

#[test]
fn a_use_group_is_one_path_per_leaf() {
    assert_eq!(
        expand(" crate::{a, b::{c, d as e}, f::g::*}"),
        strings(&["crate::a", "crate::b::c", "crate::b::d", "crate::f::g"])
    );
    assert_eq!(expand(" super::x::Y"), strings(&["super::x::Y"]));
    assert_eq!(
        expand(" std::io::{self, Read}"),
        strings(&["std::io", "std::io::Read"])
    );
}

#[test]
fn paths_resolve_from_the_files_module() {
    let module = m("store::views::spares");
    let edges = edges(
        "use super::build::Built;\nuse crate::{catalogue, store::core::objects};\nfn f() { super::super::Store::open(); self::g(); h::i(); }\n",
        &module,
        &[],
        None,
    );
    let got: Vec<(usize, String)> = edges.iter().map(|e| (e.line, e.path.join("::"))).collect();
    assert_eq!(
        got,
        vec![
            (1, "store::views::build::Built".to_string()),
            (2, "catalogue".to_string()),
            (2, "store::core::objects".to_string()),
            (3, "store::Store::open".to_string()),
            (3, "store::views::spares::g".to_string()),
        ]
    );
}

#[test]
fn comments_strings_and_tests_draw_no_edge() {
    let src = "//! see [`crate::cli`]\nconst S: &str = \"crate::cmd::x\";\nconst R: &str = r#\"crate::audit\"#;\nconst C: char = '\"';\nfn f<'a>(x: &'a str) { crate::digest::parse(x); }\n#[cfg(test)]\nmod tests {\n    use crate::remote::x;\n}\n#[cfg(test)]\nuse crate::bundle;\n/* crate::store */ fn g() { kid::h(); }\n";
    let got: Vec<(usize, String)> = edges(src, &m("policy"), &["kid".to_string()], None)
        .iter()
        .map(|e| (e.line, e.path.join("::")))
        .collect();
    assert_eq!(
        got,
        vec![
            (5, "digest::parse".to_string()),
            (12, "policy::kid::h".to_string())
        ]
    );
}

#[test]
fn an_upward_use_and_a_circle_are_both_found() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let src = tmp.path();
    std::fs::create_dir_all(src.join("store/core")).expect("mkdir");
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod store;\n"),
        ("a.rs", "use crate::b::x;\n"),
        ("b.rs", "pub fn x() { crate::a::y(); }\n"),
        ("store/mod.rs", "pub mod core;\npub struct Store;\n"),
        (
            "store/core/mod.rs",
            "use crate::a;\nuse crate::store::Store;\n",
        ),
    ];
    for (p, t) in files {
        std::fs::write(src.join(p), t).expect("write");
    }
    let design = "\n## Module map\n```text\na.rs\nb.rs\nstore/core/\nstore/mod.rs\ngone/\n```\n";
    let problems = check(src, design);
    assert!(
        problems.contains(
            &"src/b.rs:1: b.rs uses a.rs, which the map draws above it (a::y)".to_string()
        ),
        "{problems:#?}"
    );
    assert!(
        problems.contains(
            &"src/store/core/mod.rs:1: store/core/ uses a.rs, which the map draws above it (a)"
                .to_string()
        ),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with(
            "a circle of units: a.rs -> b.rs (src/a.rs:1), b.rs -> a.rs (src/b.rs:1)"
        )),
        "{problems:#?}"
    );
    assert!(
        problems.contains(&"gone/ is in docs/design.md's module map but not in src/".to_string()),
        "{problems:#?}"
    );
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn units_of_one_layer_may_use_each_other_but_not_round_a_circle() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let src = tmp.path();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\n").expect("write");
    std::fs::write(src.join("a.rs"), "use crate::b::x;\n").expect("write");
    std::fs::write(src.join("b.rs"), "pub fn x() {}\n").expect("write");
    let design = "\n## Module map\n```text\na.rs, b.rs   one layer\n```\n";
    assert_eq!(check(src, design), Vec::<String>::new());
    std::fs::write(src.join("b.rs"), "pub fn x() { crate::a::y(); }\n").expect("write");
    assert_eq!(
        check(src, design),
        vec!["a circle of units: a.rs -> b.rs (src/a.rs:1), b.rs -> a.rs (src/b.rs:1)".to_string()]
    );
}
