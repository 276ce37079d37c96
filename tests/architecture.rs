//! The modules stand in floors, in the order the data flows (README "Architecture"): each
//! module imports only the modules before it in `ORDER`, so the graph has no cycle and no arrow
//! points up. This test reads every `crate::` path in `src/` and fails on any other import; it
//! also checks that the README's table and `src/lib.rs` list the same modules.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Ground floor first; on each floor, a module may import the ones listed before it.
const FLOORS: &[(u8, &[&str])] = &[
    (
        0,
        &[
            "names",
            "sysfs",
            "pciids",
            "yaml",
            "catalogue",
            "config",
            "features",
            "output",
            "validate",
            "error",
        ],
    ),
    (1, &["discover"]),
    (2, &["rules", "default_rules"]),
    (3, &["labels", "pipeline"]),
    (4, &["publish", "metrics", "scheduling", "watch"]),
    (5, &["daemon"]),
    (6, &["fuzzing", "cli"]),
];

fn order() -> Vec<&'static str> {
    FLOORS.iter().flat_map(|(_, m)| m.iter().copied()).collect()
}

/// The top-level modules a source text names through `crate::`, in order of appearance. Comments
/// are left out; `use crate::{a, b::c}` names `a` and `b`.
fn crate_imports(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let trimmed = rest.trim_start();
        if let Some(group) = trimmed.strip_prefix('{') {
            let mut depth = 1;
            let mut end = group.len();
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let mut depth = 0;
            let mut item = String::new();
            for c in group[..end].chars().chain([',']) {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(leading_ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            out.push(leading_ident(trimmed));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn leading_ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Every import of `file` (in module `module`) that breaks the order, as a message.
fn violations(module: &str, file: &str, text: &str, order: &[&str]) -> Vec<String> {
    let Some(own) = order.iter().position(|m| *m == module) else {
        return vec![format!(
            "{file}: module `{module}` is not in the order table"
        )];
    };
    let mut out = Vec::new();
    for target in crate_imports(text) {
        match order.iter().position(|m| *m == target) {
            Some(t) if t <= own => {}
            Some(_) => out.push(format!(
                "{file}: `{module}` imports `crate::{target}`, which stands above it"
            )),
            None => out.push(format!(
                "{file}: `crate::{target}` is not a module of the order table (import from its module)"
            )),
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_imports_only_the_floors_below() {
    let order = order();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut checked = 0;
    for path in &files {
        let rel = path.strip_prefix(src()).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let module = first.strip_suffix(".rs").unwrap_or(first);
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        found.extend(violations(
            module,
            &format!("src/{}", rel.display()),
            &text,
            &order,
        ));
        checked += 1;
    }
    assert_eq!(found, Vec::<String>::new());
    assert!(checked >= 40, "only {checked} files read");
}

#[test]
fn the_binary_calls_only_the_command_line() {
    let text = std::fs::read_to_string(src().join("main.rs")).unwrap();
    let mut used: Vec<String> = text
        .match_indices("gpu_labeler::")
        .map(|(i, m)| leading_ident(&text[i + m.len()..]))
        .collect();
    used.sort();
    used.dedup();
    assert_eq!(used, ["cli"]);
}

#[test]
fn lib_declares_exactly_the_modules_of_the_table() {
    let text = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut declared: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    declared.sort();
    let mut table: Vec<String> = order().into_iter().map(str::to_string).collect();
    table.sort();
    assert_eq!(declared, table);
}

/// The README's architecture block: `floor N  module  what it owns`, then `         module ...`
/// for the further modules of that floor, ground floor first.
#[test]
fn readme_architecture_matches_the_table() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("\n### Architecture\n")
        .nth(1)
        .expect("README has an Architecture section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the section has a text block");
    let mut floors: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in block.lines() {
        let rest = if let Some(r) = line.strip_prefix("floor ") {
            let (n, r) = r.split_once(' ').unwrap();
            current = Some(n.parse::<u8>().unwrap());
            r
        } else if line.starts_with("         ") && current.is_some() {
            line
        } else {
            continue;
        };
        let name = rest.split_whitespace().next().unwrap();
        floors
            .entry(current.unwrap())
            .or_default()
            .push(name.trim_end_matches('/').to_string());
    }
    let table: BTreeMap<u8, Vec<String>> = FLOORS
        .iter()
        .map(|(n, m)| (*n, m.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(floors, table);
}

/// The checker itself: an upward import, a grouped one and a root re-export are each caught.
#[test]
fn the_checker_finds_upward_and_grouped_imports() {
    let order = ["a", "b", "c"];
    let text = "\
use crate::a::Thing;
use crate::{a::X, c::{Y, Z}};
// use crate::c::InAComment;
fn f() { crate::b::g(); my_crate::c::h(); }
use crate::Error;
";
    assert_eq!(crate_imports(text), ["a", "a", "c", "b", "Error"]);
    assert_eq!(
        violations("b", "src/b.rs", text, &order),
        [
            "src/b.rs: `b` imports `crate::c`, which stands above it",
            "src/b.rs: `crate::Error` is not a module of the order table (import from its module)",
        ]
    );
    assert_eq!(
        violations("z", "src/z.rs", "", &order),
        ["src/z.rs: module `z` is not in the order table"]
    );
}
