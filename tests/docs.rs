//! The README and the book in `docs/` cannot drift from the code:
//!
//! - every relative link of every tracked Markdown file resolves to a file of the repository,
//!   and its `#anchor` to a heading (GitHub's slugs) or an `<a id>` of the target;
//! - every block of command output is marked `<!-- output -->` (`<!-- output exit=N -->`), its
//!   first line the command (`$ gpu-labeler ...`, run here from the repository root) and the
//!   rest its whole output (stdout, then stderr); a command that needs a cluster is marked
//!   `<!-- output file=PATH -->`, PATH a golden file another test holds to the real output
//!   ([`GOLDEN`]). `UPDATE_DOCS=1` rewrites the blocks from the commands;
//! - a figure a bench measured is a link into BENCHMARKS.md, and the figure is in the section
//!   it links to; figures the code sets are computed from the code here;
//! - the README's two commands are the ones CI runs and the README's first rule is the
//!   example-rules component's.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::repo;

// ---------------------------------------------------------------------------------------------
// The Markdown files.

/// Tracked Markdown files, relative to the root: `git ls-files` where this is a checkout, else
/// every `*.md` below the root less `target/` and `.git/`. Third-party copies (the captures'
/// own documents, vendored crates) keep their own links and are left out.
fn markdown_files() -> Vec<String> {
    let mut files: Vec<String> = common::tracked_files()
        .into_iter()
        .filter(|f| f.ends_with(".md"))
        .collect();
    files.retain(|f| {
        !f.starts_with("vendor/")
            && !f.starts_with("tests/fixtures/captures/")
            && !f.starts_with("target/")
    });
    // Files written but not yet committed count too (a new page of the book).
    for extra in ["README.md", "BENCHMARKS.md"] {
        if !files.iter().any(|f| f == extra) && repo().join(extra).exists() {
            files.push(extra.to_string());
        }
    }
    if let Ok(dir) = std::fs::read_dir(repo().join("docs")) {
        for e in dir.flatten() {
            let name = format!("docs/{}", e.file_name().to_string_lossy());
            if name.ends_with(".md") && !files.contains(&name) {
                files.push(name);
            }
        }
    }
    files.sort();
    files
}

/// The README and the book's pages (docs/), of `markdown_files`.
fn book_files() -> Vec<String> {
    markdown_files()
        .into_iter()
        .filter(|f| f == "README.md" || f.starts_with("docs/"))
        .collect()
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The lines of `text` outside fenced code blocks, with their numbers (1-based); inline code
/// spans are blanked, so that a link written as code is no link.
fn prose_lines(text: &str) -> Vec<(usize, String)> {
    // An indented code block (four spaces after a blank line) is left to the fence rule: the
    // book's indented blocks hold no links.
    prose_lines_keep_code(text)
        .into_iter()
        .map(|(n, line)| {
            let mut s = String::new();
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                    s.push(' ');
                } else {
                    s.push(if in_code { ' ' } else { c });
                }
            }
            (n, s)
        })
        .collect()
}

/// The paragraphs of `text` outside fenced code blocks, each as its first line's number and its
/// lines joined by spaces (a link's text may be broken over lines).
fn prose_paragraphs(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut last = 0;
    for (n, line) in prose_lines(text) {
        if line.trim().is_empty() {
            last = 0;
            continue;
        }
        match out.last_mut() {
            Some((_, p)) if last + 1 == n => {
                p.push(' ');
                p.push_str(line.trim());
            }
            _ => out.push((n, line.trim().to_string())),
        }
        last = n;
    }
    out
}

/// The inline links `[text](target)` of a prose line: (text, target).
fn links(line: &str) -> Vec<(String, String)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b']' && b.get(i + 1) == Some(&b'(') {
            // The text: back to the matching `[`.
            let mut depth = 0;
            let mut start = None;
            for j in (0..i).rev() {
                match b[j] {
                    b']' => depth += 1,
                    b'[' if depth == 0 => {
                        start = Some(j);
                        break;
                    }
                    b'[' => depth -= 1,
                    _ => {}
                }
            }
            if let (Some(start), Some(end)) = (start, line[i + 2..].find(')')) {
                let target = line[i + 2..i + 2 + end].trim();
                let target = target.split_whitespace().next().unwrap_or("");
                out.push((line[start + 1..i].to_string(), target.to_string()));
                i += 2 + end;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    // A link in a heading counts by its text.
    let heading = strip_link_targets(heading);
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn strip_link_targets(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("](") {
        out.push_str(&rest[..i]);
        match rest[i..].find(')') {
            Some(j) => rest = &rest[i + j + 1..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchors a Markdown file offers: its headings' slugs (a repeated one gets `-1`, `-2`, ...
/// as on GitHub) and the `id`/`name` of its `<a>` elements.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for (_, line) in prose_lines_keep_code(text) {
        let t = line.trim_start();
        if t.starts_with('#') {
            let level = t.chars().take_while(|c| *c == '#').count();
            if level <= 6 && t[level..].starts_with(' ') {
                let s = slug(t[level..].trim().trim_end_matches('#'));
                let n = seen.entry(s.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    s.clone()
                } else {
                    format!("{s}-{n}")
                });
                *n += 1;
            }
        }
        for key in ["id=\"", "name=\""] {
            let mut rest = line.as_str();
            while let Some(i) = rest.find("<a ") {
                rest = &rest[i + 3..];
                if let Some(k) = rest.find(key) {
                    let v = &rest[k + key.len()..];
                    if let Some(e) = v.find('"') {
                        out.insert(v[..e].to_string());
                    }
                }
            }
        }
    }
    out
}

/// Like [`prose_lines`], but inline code is kept (a heading's code counts for its slug).
fn prose_lines_keep_code(text: &str) -> Vec<(usize, String)> {
    let mut fence: Option<String> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(f) = &fence {
            if t.starts_with(f.as_str()) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(t[..3].to_string());
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

/// The broken links of the file `rel` (its text `text`), as `file:line: [text](target): why`;
/// `exists` and `read_target` stand for the file system.
fn broken_links(
    rel: &str,
    text: &str,
    exists: &dyn Fn(&Path) -> bool,
    read_target: &dyn Fn(&Path) -> Option<String>,
) -> Vec<String> {
    let dir = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut out = Vec::new();
    for (n, line) in prose_paragraphs(text) {
        for (label, target) in links(&line) {
            if target.is_empty()
                || target.contains("://")
                || target.starts_with("mailto:")
                || target.starts_with('<')
            {
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                PathBuf::from(rel)
            } else {
                normalize(&dir.join(path))
            };
            let at = format!("{rel}:{n}: [{label}]({target})");
            if file.starts_with("..") {
                out.push(format!("{at}: outside the repository"));
                continue;
            }
            if !path.is_empty() && !exists(&file) {
                out.push(format!("{at}: no such file {}", file.display()));
                continue;
            }
            if let Some(fragment) = fragment {
                if !file.to_string_lossy().ends_with(".md") {
                    out.push(format!("{at}: an anchor into a file that is not Markdown"));
                    continue;
                }
                let target_text = if path.is_empty() {
                    Some(text.to_string())
                } else {
                    read_target(&file)
                };
                let found = target_text.map(|t| anchors(&t)).unwrap_or_default();
                if !found.contains(fragment) {
                    out.push(format!(
                        "{at}: no heading or anchor #{fragment} in {}",
                        file.display()
                    ));
                }
            }
        }
    }
    out
}

/// `a/b/../c` is `a/c`; a path that climbs above the root keeps its leading `..`.
fn normalize(p: &Path) -> PathBuf {
    let mut parts: Vec<String> = Vec::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                if parts.last().is_some_and(|l| l != "..") {
                    parts.pop();
                } else {
                    parts.push("..".into());
                }
            }
            std::path::Component::CurDir => {}
            c => parts.push(c.as_os_str().to_string_lossy().into_owned()),
        }
    }
    parts.iter().collect()
}

#[test]
fn every_relative_link_resolves() {
    let files = markdown_files();
    assert!(
        files.iter().any(|f| f == "docs/README.md"),
        "the book's index docs/README.md: {files:?}"
    );
    let mut broken = Vec::new();
    for rel in &files {
        broken.extend(broken_links(
            rel,
            &read(rel),
            &|p| repo().join(p).exists(),
            &|p| std::fs::read_to_string(repo().join(p)).ok(),
        ));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The check is not vacuous: a missing file, a missing anchor, a link out of the repository
/// and a link into a fenced block or code span (not a link) are told apart.
#[test]
fn the_link_check_sees_broken_links() {
    let target =
        "# Title\n\n## Publishing (`run`)\n\n## Same\n\n## Same\n\n<a id=\"features\"></a>\n";
    let exists = |p: &Path| p == Path::new("docs/x.md") || p == Path::new("README.md");
    let read_target = |p: &Path| (p == Path::new("docs/x.md")).then(|| target.to_string());
    let text = "\
[ok](x.md) [ok](x.md#publishing-run) [ok](x.md#same-1) [ok](x.md#features) [ok](../README.md)
[web](https://example.com/a.md) [self](#here)

## Here

[gone](y.md) [anchor](x.md#publishing) [out](../../etc/passwd) [third](x.md#same-2)
`[code](nowhere.md)` [a link broken
over lines](z.md)

```
[fenced](nowhere.md)
```
";
    assert_eq!(
        broken_links("docs/p.md", text, &exists, &read_target),
        [
            "docs/p.md:6: [gone](y.md): no such file docs/y.md",
            "docs/p.md:6: [anchor](x.md#publishing): no heading or anchor #publishing in docs/x.md",
            "docs/p.md:6: [out](../../etc/passwd): outside the repository",
            "docs/p.md:6: [third](x.md#same-2): no heading or anchor #same-2 in docs/x.md",
            "docs/p.md:6: [a link broken over lines](z.md): no such file docs/z.md",
        ]
    );
    assert_eq!(slug("Publishing (`run`)"), "publishing-run");
    assert_eq!(slug("Why is my pod Pending?"), "why-is-my-pod-pending");
    assert_eq!(slug("Features (the snapshot)"), "features-the-snapshot");
    assert_eq!(slug("From [GFD](x.md) to here"), "from-gfd-to-here");
}

// ---------------------------------------------------------------------------------------------
// Command output.

/// Golden files a doc may show in place of running a command that needs a cluster, each with
/// the test that holds it to the command's real output.
const GOLDEN: &[(&str, &str)] = &[
    (
        "tests/fixtures/migrate/gpu-operator.diff.txt",
        "tests/migrate.rs from_the_gpu_operators_nfd_and_gfd",
    ),
    (
        "tests/fixtures/migrate/amd.diff.txt",
        "tests/migrate.rs from_amds_node_labeller",
    ),
    (
        "tests/fixtures/diff/gpu-node-1.diff.txt",
        "tests/diff.rs (BEFORE)",
    ),
    (
        "tests/fixtures/prune/all-nodes.dry-run.txt",
        "tests/prune.rs prune_removes_what_gpu_labeler_alone_owns_and_nothing_else (PLAN)",
    ),
];

/// A marked block: where it is, its marker's options, the command line and the output shown.
struct Block {
    file: String,
    /// Line of the block's first content line (the `$ ...` line), 1-based.
    line: usize,
    exit: i32,
    golden: Option<String>,
    command: String,
    output: String,
    /// Byte range of the block's content (after the opening fence line, before the closing).
    range: std::ops::Range<usize>,
}

/// The marked output blocks of a file, and the problems with the markers.
fn output_blocks(rel: &str, text: &str) -> (Vec<Block>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let starts: Vec<usize> = lines
        .iter()
        .scan(0, |at, l| {
            let s = *at;
            *at += l.len();
            Some(s)
        })
        .collect();
    let mut i = 0;
    let mut fence = false;
    while i < lines.len() {
        let line = lines[i].trim_end_matches('\n');
        let t = line.trim_start();
        if t.starts_with("```") {
            if !fence {
                // An unmarked block that shows a command of ours with its output.
                let marked = i > 0 && lines[i - 1].trim_start().starts_with("<!-- output");
                if !marked {
                    let body = lines[i + 1..]
                        .iter()
                        .take_while(|l| !l.trim_start().starts_with("```"));
                    for (k, l) in body.enumerate() {
                        if l.trim_start().starts_with("$ gpu-labeler") {
                            problems.push(format!(
                                "{rel}:{}: `$ gpu-labeler` in a block not marked <!-- output -->",
                                i + 2 + k
                            ));
                        }
                    }
                }
            }
            fence = !fence;
            i += 1;
            continue;
        }
        if !fence && t.starts_with("<!-- output") {
            let opts = t
                .trim_start_matches("<!-- output")
                .trim_end_matches("-->")
                .trim();
            let mut exit = 0;
            let mut golden = None;
            for o in opts.split_whitespace() {
                match o.split_once('=') {
                    Some(("exit", n)) => exit = n.parse().unwrap(),
                    Some(("file", f)) => golden = Some(f.to_string()),
                    _ => problems.push(format!("{rel}:{}: unknown option {o:?}", i + 1)),
                }
            }
            let open = lines.get(i + 1).map(|l| l.trim_start()).unwrap_or("");
            if !open.starts_with("```") {
                problems.push(format!("{rel}:{}: a marker not before a fence", i + 1));
                i += 1;
                continue;
            }
            let indent = lines[i + 1].len() - lines[i + 1].trim_start().len();
            let content_start = starts[i + 1] + lines[i + 1].len();
            let mut j = i + 2;
            while j < lines.len() && !lines[j].trim_start().starts_with("```") {
                j += 1;
            }
            let content_end = starts.get(j).copied().unwrap_or(text.len());
            let content: String = lines[i + 2..j]
                .iter()
                .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
                .collect();
            let (first, output) = content.split_once('\n').unwrap_or((&content, ""));
            match first.strip_prefix("$ ") {
                Some(command) => blocks.push(Block {
                    file: rel.to_string(),
                    line: i + 3,
                    exit,
                    golden,
                    command: command.to_string(),
                    output: output.to_string(),
                    range: content_start..content_end,
                }),
                None => problems.push(format!(
                    "{rel}:{}: a marked block's first line is not `$ command`",
                    i + 3
                )),
            }
            i = j + 1;
            continue;
        }
        i += 1;
    }
    (blocks, problems)
}

/// A command line split as a shell splits it: spaces, `"..."` and `'...'`.
fn shell_split(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, ' ') => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// What the block's command prints (stdout, then stderr) and its exit code. Commands run from
/// the repository root, without the machine's `/proc/modules` (`GPU_LABELER_PROC_ROOT` names
/// a folder that does not exist, unless the command gives `--proc-root`), so that a fixture's
/// output does not depend on the kernel modules of the machine the test runs on.
fn run_block(b: &Block) -> (i32, String) {
    let args = shell_split(&b.command);
    assert_eq!(
        args.first().map(String::as_str),
        Some("gpu-labeler"),
        "{}:{}: only gpu-labeler's commands are run",
        b.file,
        b.line
    );
    let out = Command::new(common::binary())
        .args(&args[1..])
        .current_dir(repo())
        .env_remove("NODE_NAME")
        .env(
            "GPU_LABELER_PROC_ROOT",
            repo().join("tests/fixtures/proc/none"),
        )
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// Every marked block of the README and the book is the real output of its command (or, for a
/// command that needs a cluster, the golden file another test holds to it), whole.
#[test]
fn every_output_in_the_docs_is_the_real_output() {
    let update = std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1");
    let mut problems = Vec::new();
    let mut count = 0;
    for rel in book_files() {
        let text = read(&rel);
        let (blocks, marker_problems) = output_blocks(&rel, &text);
        problems.extend(marker_problems);
        let mut rewritten = text.clone();
        for b in blocks.iter().rev() {
            count += 1;
            let (code, got) = match &b.golden {
                Some(g) => {
                    if !GOLDEN.iter().any(|(f, _)| f == g) {
                        problems.push(format!(
                            "{}:{}: {g} is not a golden file a test holds to the real output",
                            b.file, b.line
                        ));
                        continue;
                    }
                    (b.exit, read(g))
                }
                None => run_block(b),
            };
            if (code, got.as_str()) != (b.exit, b.output.as_str()) {
                if update && code == b.exit {
                    let indent = {
                        let before = &text[..b.range.start];
                        let open = before.trim_end_matches('\n');
                        let line = &open[open.rfind('\n').map_or(0, |i| i + 1)..];
                        line.len() - line.trim_start().len()
                    };
                    let pad = " ".repeat(indent);
                    let body: String = format!("$ {}\n{got}", b.command)
                        .lines()
                        .map(|l| {
                            if l.is_empty() {
                                "\n".to_string()
                            } else {
                                format!("{pad}{l}\n")
                            }
                        })
                        .collect();
                    rewritten.replace_range(b.range.clone(), &body);
                } else {
                    problems.push(format!(
                        "{}:{}: `{}`: exit {code} (shown: {}), output:\n{got}--- shown:\n{}---",
                        b.file, b.line, b.command, b.exit, b.output
                    ));
                }
            }
        }
        if update && rewritten != text {
            std::fs::write(repo().join(&rel), rewritten).unwrap();
        }
    }
    assert!(
        problems.is_empty(),
        "{} (UPDATE_DOCS=1 rewrites the blocks of commands run here, after review)",
        problems.join("\n")
    );
    // Not vacuous: the README's first rule, scheduling, troubleshooting, migrating.
    assert!(count >= 10, "{count} marked blocks");
}

/// The marker rules themselves: an unmarked `$ gpu-labeler` block and a marker on no block are
/// found; a marked block gives its command, exit code and output.
#[test]
fn the_output_check_reads_its_markers() {
    let text = "\
<!-- output exit=1 -->
```text
$ gpu-labeler rules check \"a b.yaml\"
error: x
```

```
$ gpu-labeler labels
```
<!-- output -->
no fence
";
    let (blocks, problems) = output_blocks("d.md", text);
    assert_eq!(
        problems,
        [
            "d.md:8: `$ gpu-labeler` in a block not marked <!-- output -->",
            "d.md:10: a marker not before a fence"
        ]
    );
    assert_eq!(blocks.len(), 1);
    let b = &blocks[0];
    assert_eq!(
        (b.exit, b.command.as_str(), b.output.as_str(), b.line),
        (1, "gpu-labeler rules check \"a b.yaml\"", "error: x\n", 3)
    );
    assert_eq!(
        shell_split(&b.command),
        ["gpu-labeler", "rules", "check", "a b.yaml"]
    );
    assert_eq!(
        &text[b.range.clone()],
        "$ gpu-labeler rules check \"a b.yaml\"\nerror: x\n"
    );
}

// ---------------------------------------------------------------------------------------------
// Figures.

/// The lines of BENCHMARKS.md's section `anchor` (its heading to the next heading of the same
/// or a higher level).
fn bench_section(benchmarks: &str, anchor: &str) -> Option<String> {
    let lines = prose_lines_keep_code(benchmarks);
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let mut start: Option<(usize, usize)> = None;
    let all: Vec<&str> = benchmarks.lines().collect();
    for (n, line) in &lines {
        let t = line.trim_start();
        let level = t.chars().take_while(|c| *c == '#').count();
        if level == 0 || !t[level..].starts_with(' ') {
            continue;
        }
        if let Some((from, l)) = start
            && level <= l
        {
            return Some(all[from - 1..n - 1].join("\n"));
        }
        let s = slug(t[level..].trim());
        let k = seen.entry(s.clone()).or_insert(0);
        let id = if *k == 0 { s } else { format!("{s}-{k}") };
        *k += 1;
        if start.is_none() && id == anchor {
            start = Some((*n, level));
        }
    }
    start.map(|(from, _)| all[from - 1..].join("\n"))
}

/// The figures of a text: runs of digits with `,` and `.` inside (`1,000`, `0.44`, `+4.03`).
fn figures(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        let inner = matches!(c, ',' | '.')
            && !cur.is_empty()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() || inner {
            cur.push(*c);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A figure a bench measured is shown as a link into BENCHMARKS.md (`[p95 244 ms](...#events-...)`),
/// and each figure of the link's text is in the section it links to: copy it from there, or
/// measure again and write both.
#[test]
fn bench_figures_in_the_docs_are_the_recorded_ones() {
    let benchmarks = read("BENCHMARKS.md");
    let mut problems = Vec::new();
    let mut count = 0;
    for rel in book_files() {
        let text = read(&rel);
        for (n, line) in prose_paragraphs(&text) {
            for (label, target) in links(&line) {
                let Some((path, anchor)) = target.split_once('#') else {
                    continue;
                };
                if !path.ends_with("BENCHMARKS.md") || !label.chars().any(|c| c.is_ascii_digit()) {
                    continue;
                }
                count += 1;
                let Some(section) = bench_section(&benchmarks, anchor) else {
                    problems.push(format!("{rel}:{n}: no section #{anchor} in BENCHMARKS.md"));
                    continue;
                };
                let have = figures(&section);
                for f in figures(&label) {
                    if !have.contains(&f) {
                        problems.push(format!(
                            "{rel}:{n}: [{label}]: {f} is not in BENCHMARKS.md#{anchor}"
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(count >= 5, "{count} figures linked to BENCHMARKS.md");
}

#[test]
fn the_figure_check_reads_sections_and_figures() {
    let b = "# B\n\n## Events: relabel\n\np95 244 ms, 1,000 agents, +4.03 ms.\n\n## Fleet\n\n513\n";
    let s = bench_section(b, "events-relabel").unwrap();
    assert_eq!(figures(&s), ["95", "244", "1,000", "4.03"]);
    assert!(!figures(&s).contains(&"513".to_string()));
    assert_eq!(
        bench_section(b, "fleet").as_deref(),
        Some("## Fleet\n\n513")
    );
    assert_eq!(
        figures("2.5–2.9 / 28–37 ms (v1.33)"),
        ["2.5", "2.9", "28", "37", "1.33"]
    );
}

/// The memory a node's PCI functions need (docs/troubleshooting.md) is the agent's own estimate
/// (`src/daemon/memory.rs`) and the shipped limit (`deploy/base/agent/daemonset.yaml`).
#[test]
fn the_memory_estimate_in_the_docs_is_the_agents() {
    use gpu_labeler::daemon::{MEMORY_BASE, MEMORY_NVML_CHILD, MEMORY_PER_FUNCTION, memory_need};
    let daemonset = read("deploy/base/agent/daemonset.yaml");
    let limits = daemonset.split_once("limits:").unwrap().1;
    let limit = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory: "))
        .unwrap()
        .trim();
    let mib: u64 = limit.strip_suffix("Mi").unwrap().parse().unwrap();
    // NVML's child shares the container's limit: what the limit covers counts it.
    let covered = ((mib << 20) - MEMORY_BASE - MEMORY_NVML_CHILD) / MEMORY_PER_FUNCTION;
    assert!(memory_need(covered as usize, true) <= mib << 20);
    assert!(memory_need(covered as usize + 1, true) > mib << 20);
    let thousands = |n: u64| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let sentence = format!(
        "the agent needs {} MiB + {} B per function, and {} MiB more for NVML's child process in the same container (the {limit} default covers about {},000 with it)",
        MEMORY_BASE >> 20,
        thousands(MEMORY_PER_FUNCTION),
        MEMORY_NVML_CHILD >> 20,
        covered / 1000
    );
    let doc = read("docs/troubleshooting.md");
    assert!(
        doc.replace('\n', " ").contains(&sentence),
        "docs/troubleshooting.md should say: {sentence}"
    );
}

// ---------------------------------------------------------------------------------------------
// The README's commands and rule.

/// The `sh` blocks of a section of the README (its `## ` heading to the next).
fn sh_blocks(readme: &str, heading: &str) -> Vec<String> {
    let start = readme
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("README: ## {heading}"));
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split_once("```").unwrap().0.to_string())
        .collect()
}

/// The README's two commands: the one that runs the main job on this machine is `labels`, and
/// the test command is the one `.ci/run` runs last, as written.
#[test]
fn the_readmes_two_commands_are_what_ci_runs() {
    let readme = read("README.md");
    let blocks = sh_blocks(&readme, "The two commands");
    assert_eq!(
        blocks,
        [
            "cargo run --release -- labels\n",
            "cargo test --workspace --all-targets\n"
        ]
    );
    let ci = read(".ci/run");
    let last = ci
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .unwrap();
    assert_eq!(format!("{last}\n"), blocks[1], ".ci/run's last command");
    let before = ci.lines().rev().skip_while(|l| *l != last).nth(1).unwrap();
    assert_eq!(before, "# The README's test command:");
}

/// The README's first rule is the example-rules component's rule, as the ConfigMap holds it.
#[test]
fn the_readmes_first_rule_is_the_example_rules_component() {
    let readme = read("README.md");
    let shown = readme
        .split_once("<!-- example-rule -->\n```yaml\n")
        .expect("README: <!-- example-rule --> before a yaml block")
        .1
        .split_once("```")
        .unwrap()
        .0;
    let configmap = read("deploy/components/example-rules/rules.yaml");
    let entry = configmap
        .split_once("example-gpu-classes.yaml: |\n")
        .unwrap()
        .1;
    let rule: String = entry
        .lines()
        .take_while(|l| l.starts_with("    ") || l.is_empty())
        .map(|l| format!("{}\n", l.get(4..).unwrap_or("")))
        .collect();
    assert_eq!(shown, rule.trim_end().to_string() + "\n");
}

/// The number of parts docs/labels.md says the NVIDIA name table holds is the catalogue's.
#[test]
fn the_name_table_count_in_the_docs_is_the_catalogues() {
    let names: usize = gpu_labeler::catalogue::catalogue()
        .vendors
        .iter()
        .filter(|v| v.name == "nvidia")
        .flat_map(|v| &v.devices)
        .map(|d| d.names.len())
        .sum();
    let doc = read("docs/labels.md").replace('\n', " ");
    let said = format!("each line with its capture: {names} parts from the P100");
    assert!(doc.contains(&said), "docs/labels.md should say: {said}");
}

/// The long flags (`--x`) in a piece of text, in order.
fn long_flags(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i + 2 < b.len() {
        let starts = b[i] == b'-'
            && b[i + 1] == b'-'
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'-');
        if starts && b[i + 2].is_ascii_lowercase() {
            let end = (i + 2..b.len())
                .find(|&j| !(b[j].is_ascii_lowercase() || b[j] == b'-'))
                .unwrap_or(b.len());
            out.push(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// docs/cli.md's synopsis and option table name the binary's commands, flags and environment
/// variables: every command the binary has is in the synopsis, every flag a line gives is one
/// of its command's, and every flag `run` takes is in the table with the environment variable
/// clap reads for it.
#[test]
fn the_cli_page_names_the_binarys_commands_flags_and_env_vars() {
    use clap::CommandFactory;
    let cli = gpu_labeler::cli::Cli::command();
    let page = read("docs/cli.md");
    let usage = page
        .split_once("## Usage\n\n```\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    let find = |path: &[&str]| -> Option<clap::Command> {
        let mut c = cli.clone();
        for p in path {
            c = c.find_subcommand(p)?.clone();
        }
        Some(c)
    };
    let flags_of = |c: &clap::Command| -> BTreeSet<String> {
        c.get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    };
    let mut problems = Vec::new();
    let mut listed = BTreeSet::new();
    for line in usage.lines() {
        let synopsis = line.split_once('#').map_or(line, |(s, _)| s);
        let words: Vec<&str> = synopsis.split_whitespace().skip(1).collect();
        let path: Vec<&str> = words
            .iter()
            .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
            .copied()
            .collect();
        let Some(cmd) = find(&path) else {
            problems.push(format!("{line}: no command {path:?}"));
            continue;
        };
        listed.insert(path.join(" "));
        let known = flags_of(&cmd);
        for f in long_flags(synopsis) {
            if !known.contains(&f) {
                problems.push(format!("`gpu-labeler {}` has no {f}", path.join(" ")));
            }
        }
    }
    let mut commands = BTreeSet::new();
    for c in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
        if c.has_subcommands() {
            for s in c.get_subcommands() {
                commands.insert(format!("{} {}", c.get_name(), s.get_name()));
            }
        } else if c.get_name() != "help" {
            commands.insert(c.get_name().to_string());
        }
    }
    assert_eq!(listed, commands, "the synopsis lists every command");

    // The option table: each row's flags and environment variables are `run`'s.
    let run = find(&["run"]).unwrap();
    let table = page
        .split_once("| option | env | meaning |\n|---|---|---|\n")
        .unwrap()
        .1
        .split("\n\n")
        .next()
        .unwrap();
    let mut in_table = BTreeSet::new();
    for row in table.lines() {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        let flags = long_flags(cells[0]);
        let envs: Vec<&str> = cells[1]
            .split(['`', ',', '/', ' '])
            .filter(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
            .collect();
        for (k, f) in flags.iter().enumerate() {
            in_table.insert(f.clone());
            let Some(arg) = run
                .get_arguments()
                .find(|a| a.get_long().map(|l| format!("--{l}")).as_deref() == Some(f))
            else {
                problems.push(format!("option table: `run` has no {f}"));
                continue;
            };
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            // Rows of one flag (or "a / b") name its variable; the summary row names them
            // as `GPU_LABELER_*`.
            if flags.len() == envs.len() {
                if env.as_deref() != Some(envs[k]) {
                    problems.push(format!(
                        "option table: {f} reads {env:?}, the row says {}",
                        envs[k]
                    ));
                }
            } else if let Some(env) = env
                && !(env == "NODE_NAME" || cells[1].contains("GPU_LABELER_*"))
            {
                problems.push(format!(
                    "option table: {f} reads {env}, the row does not say"
                ));
            }
        }
    }
    let mut run_flags = flags_of(&run);
    run_flags.remove("--help");
    assert_eq!(problems, Vec::<String>::new());
    assert_eq!(
        in_table, run_flags,
        "the option table lists every flag of `run`"
    );
}

/// The features-file sink's default path, as docs/cli.md and docs/catalog.md give it, is the
/// one the binary writes (#49: it was undocumented).
#[test]
fn the_features_file_default_is_the_documented_one() {
    let default = gpu_labeler::publish::features_file::DEFAULT_PATH;
    let mut said = Vec::new();
    for doc in ["docs/cli.md", "docs/catalog.md"] {
        let text = std::fs::read_to_string(common::repo().join(doc)).unwrap();
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let at = flat
            .find("`features-file`")
            .and_then(|i| flat[i..].find("features.d/gpu-labeler`").map(|j| i + j))
            .map(|end| {
                let start = flat[..end].rfind('`').unwrap() + 1;
                flat[start..end + "features.d/gpu-labeler".len()].to_string()
            });
        said.push((doc, at));
    }
    assert_eq!(
        said,
        [
            ("docs/cli.md", Some(default.to_string())),
            ("docs/catalog.md", Some(default.to_string()))
        ]
    );
}
