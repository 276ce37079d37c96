//! The modules stand in floors, in the order the data flows (docs/architecture.md): each
//! module imports only the modules before it in `FLOORS`, so the graph has no cycle and no arrow
//! points up. This test reads every `crate::` path in `src/` and fails on any other import; it
//! also checks that docs/architecture.md's table and `src/lib.rs` list the same modules. Inside
//! every folder the files stand in an order too (no import cycle between them), and no source
//! file is longer than `MAX_FILE_LINES`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Ground floor first; on each floor, a module may import the ones listed before it.
const FLOORS: &[(u8, &[&str])] = &[
    (
        0,
        &[
            "names",
            "said",
            "sysfs",
            "pciids",
            "yaml",
            "gotmpl",
            "catalogue",
            "config",
            "features",
            "output",
            "validate",
            "kobject",
            "dra",
            "error",
        ],
    ),
    (1, &["discover"]),
    (2, &["rules", "default_rules"]),
    (3, &["labels", "pipeline"]),
    (
        4,
        &["publish", "metrics", "scheduling", "nodetemplate", "watch"],
    ),
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
        out.extend(floor_violation(file, module, &target, own, order));
    }
    out
}

/// `file` (in module `module`, at `own` in the order table) importing `crate::{target}`, as a
/// message when that breaks the order.
fn floor_violation(
    file: &str,
    module: &str,
    target: &str,
    own: usize,
    order: &[&str],
) -> Option<String> {
    match order.iter().position(|m| *m == target) {
        Some(t) if t <= own => None,
        Some(_) => Some(format!(
            "{file}: `{module}` imports `crate::{target}`, which stands above it"
        )),
        None => Some(format!(
            "{file}: `crate::{target}` is not a module of the order table (import from its module)"
        )),
    }
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

/// The code with the crate under another name (`use crate as root;`, `extern crate self as
/// root;`) written `crate` again, so that `root::cli::run()` is read as what it is.
fn with_crate_aliases(code: &str) -> String {
    let mut aliases = Vec::new();
    for pattern in ["crate as ", "self as "] {
        for (i, _) in code.match_indices(pattern) {
            let before = code[..i].trim_end();
            let starts = pattern == "crate as " || before.ends_with("extern crate");
            if !starts || code[..i].bytes().next_back().is_some_and(is_ident) {
                continue;
            }
            let name: String = code[i + pattern.len()..]
                .bytes()
                .take_while(|&c| is_ident(c))
                .map(char::from)
                .collect();
            if !name.is_empty() && name != "_" {
                aliases.push(name);
            }
        }
    }
    let mut out = code.to_string();
    for a in aliases {
        let needle = format!("{a}::");
        let mut next = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&needle) {
            let word_before = rest[..i].bytes().next_back().is_some_and(is_ident);
            next.push_str(&rest[..i]);
            next.push_str(if word_before { &needle } else { "crate::" });
            rest = &rest[i + needle.len()..];
        }
        next.push_str(rest);
        out = next;
    }
    out
}

/// The floor check through the cycle check's resolver: every module a file names (through
/// `crate`, `super`, `self` or a bare child, the crate under an alias included), by the
/// top-level module it is in, must stand at or below the file's own.
fn resolved_violations(
    own: &[String],
    file: &str,
    code: &str,
    modules: &BTreeSet<ModPath>,
    order: &[&str],
) -> Vec<String> {
    let Some(top) = own.first() else {
        return Vec::new();
    };
    let Some(at) = order.iter().position(|m| m == top) else {
        return vec![format!("{file}: module `{top}` is not in the order table")];
    };
    let mut out = Vec::new();
    for target in file_imports(own, &with_crate_aliases(code), modules) {
        // The crate root itself: the textual check names it.
        let Some(t) = target.first() else { continue };
        out.extend(floor_violation(file, top, t, at, order));
    }
    out
}

#[test]
fn every_module_imports_only_the_floors_below() {
    let order = order();
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let modules: BTreeSet<ModPath> = files
        .iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| module_of(p.strip_prefix(src()).unwrap()))
        .collect();
    let mut found = BTreeSet::new();
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
        let file = format!("src/{}", rel.display());
        let code = code_of(&text);
        found.extend(violations(
            module,
            &file,
            &with_crate_aliases(&code),
            &order,
        ));
        found.extend(resolved_violations(
            &module_of(rel),
            &file,
            &code,
            &modules,
            &order,
        ));
        checked += 1;
    }
    assert_eq!(found, BTreeSet::<String>::new());
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

/// docs/architecture.md's block: `floor N  module  what it owns`, then `         module ...`
/// for the further modules of that floor, ground floor first; a line indented further goes on
/// with the text of the line before.
#[test]
fn the_documented_architecture_matches_the_table() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let section = doc
        .split("# Architecture\n")
        .nth(1)
        .expect("docs/architecture.md has its heading");
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
        } else if line.starts_with("         ")
            && !line.starts_with("          ")
            && current.is_some()
        {
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

/// The two climbs the textual check let through (#49): `super::super::publish` from
/// `rules/eval.rs`, and the crate under an alias (`use crate as root; root::cli::run()`).
#[test]
fn the_floor_check_sees_climbs_through_super_and_an_alias() {
    let order = ["rules", "publish", "cli"];
    let modules: BTreeSet<ModPath> = [
        "rules/mod.rs",
        "rules/eval.rs",
        "publish/mod.rs",
        "publish/node.rs",
        "cli.rs",
    ]
    .iter()
    .map(|p| module_of(Path::new(p)))
    .collect();
    let own = module_of(Path::new("rules/eval.rs"));
    let climb = code_of("fn f() { super::super::publish::node::apply(); }\n");
    assert_eq!(
        violations("rules", "src/rules/eval.rs", &climb, &order),
        Vec::<String>::new()
    );
    assert_eq!(
        resolved_violations(&own, "src/rules/eval.rs", &climb, &modules, &order),
        ["src/rules/eval.rs: `rules` imports `crate::publish`, which stands above it"]
    );
    let alias = code_of("use crate as root;\nfn f() { root::cli::run(); }\n");
    assert_eq!(
        violations(
            "rules",
            "src/rules/eval.rs",
            &with_crate_aliases(&alias),
            &order
        ),
        ["src/rules/eval.rs: `rules` imports `crate::cli`, which stands above it"]
    );
    assert_eq!(
        resolved_violations(&own, "src/rules/eval.rs", &alias, &modules, &order),
        ["src/rules/eval.rs: `rules` imports `crate::cli`, which stands above it"]
    );
    // A name that merely ends like the alias is left alone.
    assert_eq!(
        with_crate_aliases("use crate as root;\nfn f() { myroot::x(); }"),
        "use crate as root;\nfn f() { myroot::x(); }"
    );
}

/// The most lines a source file may have: past it, a file is split by what its parts do.
const MAX_FILE_LINES: usize = 1_500;

#[test]
fn no_source_file_is_longer_than_the_limit() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let long: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).unwrap().lines().count();
            (lines > MAX_FILE_LINES).then(|| {
                format!(
                    "src/{}: {lines} lines (at most {MAX_FILE_LINES})",
                    path.strip_prefix(src()).unwrap().display()
                )
            })
        })
        .collect();
    assert_eq!(long, Vec::<String>::new());
    assert!(files.len() >= 40, "only {} files read", files.len());
}

/// A file's text with its comments, string literals and character literals blanked (newlines
/// kept), so that only code names modules.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        let word_before = i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_');
        if b[i..].starts_with(b"//") {
            let end = text[i..].find('\n').map_or(b.len(), |e| i + e);
            blank(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (0, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if !word_before
            && (b[i..].starts_with(b"r\"")
                || b[i..].starts_with(b"r#")
                || b[i..].starts_with(b"br"))
        {
            let start = i;
            let mut j = i + if b[i] == b'b' { 2 } else { 1 };
            let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
            j += hashes;
            if b.get(j) != Some(&b'"') {
                i += 1;
                continue;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = b[j + 1..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |p| j + 1 + p + close.len());
            blank(&mut out, start, end);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('x', '\n', '\u{2028}', 'é'); a lifetime ('a) is left alone.
            let end = if b.get(i + 1) == Some(&b'\\') {
                text[i + 3..].find('\'').map(|e| i + 3 + e + 1)
            } else {
                let c = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + c) == Some(&b'\'')).then_some(i + 2 + c)
            };
            match end {
                Some(end) => {
                    blank(&mut out, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A module path: `["rules", "eval"]` for `src/rules/eval.rs`, `[]` for the crate root.
type ModPath = Vec<String>;

/// The module of a file under `src/`: `rules/mod.rs` is `rules`, `rules/eval.rs` is
/// `rules::eval`, `lib.rs` and `main.rs` are the root.
fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_str().unwrap().to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || parts == ["lib"] || parts == ["main"] {
        parts.pop();
    }
    parts
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The file modules that `code` (the code of the file of module `own`) names: every path that
/// starts at `crate`, `super` or `self`, or at a child module of `own`, including each member
/// of a `{...}` group, resolved to the deepest module of `modules` it names. Inside an inline
/// `mod name { ... }`, `super` and `self` count from it.
fn file_imports(own: &[String], code: &str, modules: &BTreeSet<ModPath>) -> BTreeSet<ModPath> {
    let b = code.as_bytes();
    let mut found = BTreeSet::new();
    // The module of the code at the cursor: the file's, then the inline modules around it.
    let mut current: ModPath = own.to_vec();
    // One entry per open brace: whether it opened an inline module.
    let mut braces: Vec<bool> = Vec::new();
    let mut module_brace_next = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                braces.push(module_brace_next);
                module_brace_next = false;
                i += 1;
                continue;
            }
            b'}' => {
                if braces.pop() == Some(true) {
                    current.pop();
                }
                i += 1;
                continue;
            }
            b';' => module_brace_next = false,
            _ => {}
        }
        let starts_word = is_ident(b[i]) && (i == 0 || !(is_ident(b[i - 1]) || b[i - 1] == b'.'));
        let after_path = i >= 2 && &b[i - 2..i] == b"::";
        if !starts_word || after_path || b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let end = i + b[i..].iter().take_while(|&&c| is_ident(c)).count();
        let word = &code[i..end];
        if word == "mod" {
            let rest = code[end..].trim_start();
            let name: String = rest
                .bytes()
                .take_while(|&c| is_ident(c))
                .map(char::from)
                .collect();
            if !name.is_empty() && rest[name.len()..].trim_start().starts_with('{') {
                current.push(name);
                module_brace_next = true;
            }
            i = end;
            continue;
        }
        let (paths, next) = read_path(code, i);
        for path in paths {
            if let Some(target) = resolve(own, &current, &path, modules) {
                found.insert(target);
            }
        }
        i = next.max(end);
    }
    found.remove(own);
    found
}

/// The path that starts at `i` (`a::b::{c, d::e}`, `a::*`) as its full paths (`a::b::c`,
/// `a::b::d::e`, `a`), and where it ends; none for a word without `::`.
fn read_path(code: &str, i: usize) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    let mut segments = Vec::new();
    let mut j = i;
    loop {
        let end = j + b[j..].iter().take_while(|&&c| is_ident(c)).count();
        segments.push(code[j..end].to_string());
        let rest = &code[end..];
        let trimmed = rest.trim_start();
        let Some(after) = trimmed.strip_prefix("::") else {
            // A word alone (`self.x`, `pub(crate)`, `mod name;`) names no module.
            let paths = if segments.len() > 1 {
                vec![segments]
            } else {
                Vec::new()
            };
            return (paths, end);
        };
        let after_trim = after.trim_start();
        let k = code.len() - after_trim.len();
        if after_trim.starts_with('{') {
            let close = matching_brace(code, k);
            let mut paths = Vec::new();
            for item in split_top_level(&code[k + 1..close]) {
                let item = item.trim();
                let offset = item.as_ptr() as usize - code.as_ptr() as usize;
                if item.is_empty() {
                    continue;
                }
                if !is_ident(item.as_bytes()[0]) {
                    // `*`: the module itself.
                    paths.push(segments.clone());
                    continue;
                }
                let mut subs = read_path(code, offset).0;
                if subs.is_empty() {
                    // A member named alone: `self`, a module, an item.
                    let word = item.bytes().take_while(|&c| is_ident(c)).count();
                    subs.push(vec![item[..word].to_string()]);
                }
                for sub in subs {
                    let mut p = segments.clone();
                    if sub != ["self"] {
                        p.extend(sub);
                    }
                    paths.push(p);
                }
            }
            return (paths, close + 1);
        }
        if !after_trim.bytes().next().is_some_and(is_ident) {
            return (vec![segments], k);
        }
        j = k;
    }
}

fn matching_brace(code: &str, open: usize) -> usize {
    let mut depth = 0;
    for (j, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// The items of a `{...}` group, split at its top-level commas.
fn split_top_level(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (j, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// The file module that `path`, written in module `current` of the file of module `own`, names.
fn resolve(
    own: &[String],
    current: &[String],
    path: &[String],
    modules: &BTreeSet<ModPath>,
) -> Option<ModPath> {
    let mut base: ModPath;
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" => {
            base = Vec::new();
            rest = &path[1..];
        }
        "self" => {
            base = current.to_vec();
            rest = &path[1..];
        }
        "super" => {
            base = current.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        first => {
            // A child module named without `self::` (Rust 2018), only where the file's own
            // code stands (an inline module's scope does not see the file's children).
            let mut child = current.to_vec();
            child.push(first.to_string());
            if current != own || !modules.contains(&child) {
                return None;
            }
            base = current.to_vec();
        }
    }
    // Inside an inline module, the file module around it.
    while !base.is_empty() && !modules.contains(&base) {
        base.pop();
    }
    for segment in rest {
        let mut next = base.clone();
        next.push(segment.clone());
        if !modules.contains(&next) {
            break;
        }
        base = next;
    }
    Some(base)
}

/// A cycle of `graph`, as its nodes in order (the first repeated at the end), if it has one.
fn find_cycle(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &ModPath,
        graph: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            match marks.get(next) {
                Some(Mark::Open) => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(c) = visit(next, graph, marks, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if !marks.contains_key(node)
            && let Some(c) = visit(node, graph, &mut marks, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

/// Every import cycle between the files of one folder: for each folder (the crate root
/// included), its `mod.rs`, its files and its subfolders (each as one node, all its files
/// together) are the nodes, and a file's imports of another node are the edges. Each cycle is
/// named by its files, `a.rs -> b.rs -> a.rs`.
fn folder_cycles(files: &BTreeMap<ModPath, (String, BTreeSet<ModPath>)>) -> Vec<String> {
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    let folders: BTreeSet<ModPath> = modules
        .iter()
        .filter(|m| files[*m].0.ends_with("mod.rs") || m.is_empty())
        .cloned()
        .collect();
    let mut cycles = Vec::new();
    for folder in &folders {
        let node = |m: &ModPath| -> Option<ModPath> {
            m.starts_with(folder)
                .then(|| m[..(folder.len() + 1).min(m.len())].to_vec())
        };
        let mut graph: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
        for (from, (_, imports)) in files {
            let Some(a) = node(from) else { continue };
            for to in imports {
                if let Some(b) = node(to)
                    && a != b
                {
                    graph.entry(a.clone()).or_default().insert(b);
                }
            }
        }
        if let Some(cycle) = find_cycle(&graph) {
            let names: Vec<String> = cycle
                .iter()
                .map(|m| {
                    if folders.contains(m) && m != folder {
                        format!("src/{}/", m.join("/"))
                    } else {
                        files[m].0.clone()
                    }
                })
                .collect();
            cycles.push(names.join(" -> "));
        }
    }
    cycles
}

/// Every file of `src/` by module: its path, and the file modules it imports.
fn import_graph() -> BTreeMap<ModPath, (String, BTreeSet<ModPath>)> {
    let mut paths = Vec::new();
    rust_files(&src(), &mut paths);
    let by_module: BTreeMap<ModPath, PathBuf> = paths
        .into_iter()
        .filter(|p| !p.ends_with("main.rs"))
        .map(|p| (module_of(p.strip_prefix(src()).unwrap()), p))
        .collect();
    let modules: BTreeSet<ModPath> = by_module.keys().cloned().collect();
    by_module
        .iter()
        .map(|(m, p)| {
            let code = code_of(&std::fs::read_to_string(p).unwrap());
            let name = format!("src/{}", p.strip_prefix(src()).unwrap().display());
            (m.clone(), (name, file_imports(m, &code, &modules)))
        })
        .collect()
}

/// No file imports, through others of its folder, itself: inside every folder the files stand
/// in an order too (`a.rs` importing `super::b` while `b.rs` imports `super::a` is a cycle,
/// and so is a file that imports its folder's `mod.rs` while `mod.rs` imports it).
#[test]
fn no_import_cycle_inside_any_folder() {
    let graph = import_graph();
    assert!(graph.len() >= 40, "only {} files read", graph.len());
    assert_eq!(folder_cycles(&graph), Vec::<String>::new());
}

/// The cycle checker itself, on files as the old `yaml/` had them (`document.rs` and `fast.rs`
/// importing each other) and on the old `rules/` (expression -> model -> template -> sprig ->
/// expression), through a group, a child named bare, an inline test module and a comment.
#[test]
fn the_cycle_checker_names_the_cycle() {
    let texts: &[(&str, &str)] = &[
        ("yaml/mod.rs", "pub mod document;\nmod fast;\n"),
        (
            "yaml/document.rs",
            "// use super::nothing;\nfn f() { super::fast::parse(\"crate::rules\"); }\n",
        ),
        (
            "yaml/fast.rs",
            "use super::document::{Node, Pos};\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::document::split;\n}\n",
        ),
        (
            "rules/mod.rs",
            "mod expression;\nmod model;\nuse expression::Expr;\n",
        ),
        (
            "rules/expression.rs",
            "use super::{\n    model::ExprSpec,\n    sprig,\n};\npub(crate) fn f(&self) { self.g(); }\n",
        ),
        (
            "rules/model.rs",
            "pub origin: Option<super::template::Origin>,\n",
        ),
        ("rules/template.rs", "use super::sprig;\n"),
        (
            "rules/sprig.rs",
            "fn re() { super::expression::compile(); }\n",
        ),
        ("lib.rs", "pub mod rules;\npub mod yaml;\n"),
    ];
    let modules: BTreeSet<ModPath> = texts.iter().map(|(p, _)| module_of(Path::new(p))).collect();
    let files: BTreeMap<ModPath, (String, BTreeSet<ModPath>)> = texts
        .iter()
        .map(|(p, t)| {
            let m = module_of(Path::new(p));
            let imports = file_imports(&m, &code_of(t), &modules);
            (m, (format!("src/{p}"), imports))
        })
        .collect();
    let m = |s: &str| -> ModPath { s.split("::").map(str::to_string).collect() };
    assert_eq!(
        files[&m("yaml::fast")].1,
        BTreeSet::from([m("yaml::document")])
    );
    assert_eq!(
        files[&m("yaml::document")].1,
        BTreeSet::from([m("yaml::fast")])
    );
    assert_eq!(
        files[&m("rules")].1,
        BTreeSet::from([m("rules::expression")])
    );
    assert_eq!(
        files[&m("rules::expression")].1,
        BTreeSet::from([m("rules::model"), m("rules::sprig")])
    );
    assert_eq!(
        folder_cycles(&files),
        [
            "src/rules/expression.rs -> src/rules/model.rs -> src/rules/template.rs -> src/rules/sprig.rs -> src/rules/expression.rs",
            "src/yaml/document.rs -> src/yaml/fast.rs -> src/yaml/document.rs",
        ]
    );
}
