//! The shape of the crate, checked on its own sources: modules import without cycles (among
//! the children of every module, so among the layers too), the layers keep their order, and
//! no source file grows past the size of one topic.
//!
//! What this proves: a change that makes `engine` import `tool`, `llm` import `config`, or
//! two sibling modules import each other fails here with the paths that close the loop. What
//! it does not: paths written without `crate::`, `super::` or `self::` (a child module named
//! bare from its parent is a parent-to-child edge, which is allowed: a module and its own
//! children are one unit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, bottom first: each may import only those before it.
const LAYERS: &[&str] = &["values", "llm", "config", "engine", "api", "runtime"];

/// Longest source file, in lines before its `#[cfg(test)]` module.
const MAX_LINES: usize = 600;

/// Every `.rs` file under `src`, with its module path (`["engine", "thread"]`).
fn modules() -> Vec<(Vec<String>, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&src, &src, &mut out);
    out.sort();
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(Vec<String>, PathBuf)>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod" || l == "lib") {
                parts.pop();
            }
            out.push((parts, path));
        }
    }
}

/// The code of a file without comments (doc links name paths that are not imports).
fn code(path: &Path) -> String {
    strip_comments(&fs::read_to_string(path).unwrap())
}

fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| {
            let bytes = line.as_bytes();
            let cut = (0..bytes.len().saturating_sub(1)).find(|&i| {
                bytes[i] == b'/' && bytes[i + 1] == b'/' && (i == 0 || bytes[i - 1] != b':')
            });
            match cut {
                Some(i) => &line[..i],
                None => line,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths a file refers to through `crate::`, `super::` and `self::` paths.
fn references(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (anchor, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            // `super` is the parent module, whether the file is `x/mod.rs` or `x.rs`.
            let mut b = module.to_vec();
            b.pop();
            b
        }),
        ("self::", module.to_vec()),
    ] {
        let mut rest = text;
        while let Some(i) = rest.find(anchor) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + anchor.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut path = base.clone();
            let mut tail = rest;
            loop {
                let end = tail
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                let ident = &tail[..end];
                if ident.is_empty() || !ident.starts_with(|c: char| c.is_lowercase()) {
                    break;
                }
                path.push(ident.to_owned());
                if tail[end..].starts_with("::") {
                    tail = &tail[end + 2..];
                } else {
                    break;
                }
            }
            found.push(path);
        }
    }
    found
}

/// The longest known module that is a prefix of `path`.
fn resolve(known: &BTreeSet<Vec<String>>, path: &[String]) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
        .unwrap_or_default()
}

/// Edges `from module -> to module` between files.
fn edges() -> BTreeSet<(Vec<String>, Vec<String>)> {
    let files = modules();
    let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut out = BTreeSet::new();
    for (module, path) in &files {
        for r in references(module, &code(path)) {
            let target = resolve(&known, &r);
            if &target != module {
                out.insert((module.clone(), target));
            }
        }
    }
    out
}

/// Among the children of `parent`: which child imports which (deeper modules count as the
/// child they are in; the parent's own file is not a child).
fn sibling_graph(
    parent: &[String],
    edges: &BTreeSet<(Vec<String>, Vec<String>)>,
) -> BTreeMap<String, BTreeSet<String>> {
    let child = |m: &Vec<String>| -> Option<String> {
        (m.len() > parent.len() && m[..parent.len()] == *parent).then(|| m[parent.len()].clone())
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges {
        if let (Some(a), Some(b)) = (child(from), child(to)) {
            if a != b {
                graph.entry(a).or_default().insert(b);
            }
        }
    }
    graph
}

/// A cycle in `graph`, as the names along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut loop_ = stack[at..].to_vec();
            loop_.push(node.to_owned());
            return Some(loop_);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_module_imports_its_siblings_in_a_cycle() {
    let edges = edges();
    let parents: BTreeSet<Vec<String>> = modules().into_iter().map(|(m, _)| m).collect();
    let mut cycles = Vec::new();
    for parent in &parents {
        if let Some(c) = cycle(&sibling_graph(parent, &edges)) {
            let at = if parent.is_empty() {
                "crate".to_owned()
            } else {
                parent.join("::")
            };
            cycles.push(format!("in {at}: {}", c.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn each_layer_imports_only_the_layers_below_it() {
    let mut wrong = Vec::new();
    for (from, to) in edges() {
        let (Some(a), Some(b)) = (from.first(), to.first()) else {
            continue;
        };
        let rank = |l: &String| LAYERS.iter().position(|x| x == l);
        if let (Some(ra), Some(rb)) = (rank(a), rank(b)) {
            if rb > ra {
                wrong.push(format!("{} imports {}", from.join("::"), to.join("::")));
            }
        }
        // The bottom layer and the hooks import nothing above the values.
        if (a == "values" || a == "hook") && b != "values" && a != b {
            wrong.push(format!("{} imports {}", from.join("::"), to.join("::")));
        }
    }
    assert!(
        wrong.is_empty(),
        "layer order broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_source_file_is_longer_than_one_topic() {
    let mut long = Vec::new();
    for (_, path) in modules() {
        let text = fs::read_to_string(&path).unwrap();
        let lines = text
            .lines()
            .take_while(|l| !l.starts_with("#[cfg(test)]"))
            .count();
        if lines > MAX_LINES {
            long.push(format!("{} has {lines} lines", path.display()));
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them by topic):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_checker_sees_a_cycle_and_a_layer_violation() {
    // The checks above must be able to fail: a two-module loop is found.
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    graph.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(cycle(&graph).unwrap(), ["a", "b", "a"]);
    let text = "use crate::tool::Registry; // crate::api::x\nuse super::store::Store;";
    let refs = references(&["engine".into(), "thread".into()], &strip_comments(text));
    let expected: Vec<Vec<String>> =
        vec![vec!["tool".into()], vec!["engine".into(), "store".into()]];
    assert_eq!(refs, expected);
}
