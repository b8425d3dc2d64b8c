//! The docs show abridged copies of real files (`// agents/tools/x.rs (abridged)` on the first
//! line). Complete examples compile as doctests (src/lib.rs); these cannot, so this checks
//! that every code line they show is in the file they name, so the docs cannot drift from the
//! code. Lines with an ellipsis (`...`, `…`) mark what was left out.

use std::path::{Path, PathBuf};

const DOCS: &[&str] = &[
    "README.md",
    "docs/tools.md",
    "docs/durable-tools.md",
    "docs/hooks.md",
    "docs/agents.md",
    "docs/getting-started.md",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A line without its `//` comment (outside string literals) and without whitespace, so that
/// rustfmt's line breaks and the docs' added comments do not matter.
fn code_of(line: &str) -> String {
    let mut out = String::new();
    let mut in_string = false;
    let mut prev = ' ';
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' && prev != '\\' {
            in_string = !in_string;
        }
        if !in_string && c == '/' && chars.peek() == Some(&'/') {
            break;
        }
        if !c.is_whitespace() {
            out.push(c);
        }
        prev = c;
    }
    out
}

/// Every fenced Rust block: (the doc, the block's first line number, its lines).
fn rust_blocks(doc: &str) -> Vec<(usize, Vec<String>)> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for (n, line) in text.lines().enumerate() {
        let fence = line.trim_start();
        match (&mut current, fence.starts_with("```")) {
            (None, true) if fence.starts_with("```rust") => current = Some((n + 1, Vec::new())),
            (None, true) => current = Some((0, Vec::new())), // another language: skipped
            (Some(_), true) => {
                let (start, lines) = current.take().unwrap();
                if start > 0 {
                    blocks.push((start, lines));
                }
            }
            (Some((_, lines)), false) => lines.push(line.to_owned()),
            (None, false) => {}
        }
    }
    blocks
}

/// The file a block copies, from a first line `// path.rs …` or `//! path.rs …`.
fn named_file(first: &str) -> Option<&str> {
    let rest = first
        .trim()
        .trim_start_matches("//!")
        .trim_start_matches("//");
    let path = rest.split_whitespace().next()?;
    path.ends_with(".rs").then_some(path)
}

#[test]
fn abridged_examples_match_the_files_they_name() {
    let mut checked = 0;
    let mut drift = Vec::new();
    for doc in DOCS {
        for (start, lines) in rust_blocks(doc) {
            let Some(path) = lines.first().and_then(|l| named_file(l)) else {
                continue;
            };
            let file = root().join(path);
            if !Path::new(&file).exists() {
                // A file the reader is asked to create (a walkthrough) compiles as a doctest;
                // an abridged copy must name a file that exists.
                assert!(
                    !lines[0].contains("abridged"),
                    "{doc}:{start} names {path}, which does not exist"
                );
                continue;
            }
            let real: String = std::fs::read_to_string(&file)
                .unwrap()
                .lines()
                .map(code_of)
                .collect();
            for line in &lines[1..] {
                let code = code_of(line);
                let elided = line.contains("...") || line.contains('…');
                if !code.is_empty() && !elided && !real.contains(&code) {
                    drift.push(format!("{doc}:{start} ({path}): {}", line.trim()));
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} abridged examples found");
    assert!(
        drift.is_empty(),
        "docs no longer match the code:\n{}",
        drift.join("\n")
    );
}

#[test]
fn the_check_notices_a_changed_line() {
    // The normalisation must not make every line match.
    let real = code_of("    Ok(Json(Converted { value, scale: a.to })) // done");
    assert!(real.contains(&code_of("Ok(Json(Converted { value, scale: a.to }))")));
    assert!(!real.contains(&code_of("Ok(Json(Converted { value, scale: a.from }))")));
    assert_eq!(code_of(r#"let s = "a // b"; // c"#), r#"lets="a//b";"#);
}
