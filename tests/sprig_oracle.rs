//! The recorded template cases against Go itself: every row of `tests/fixtures/sprig/cases.tsv`
//! and `tests/fixtures/sprig/classes.tsv` (whose expected outputs the engine's unit tests hold
//! gpu-labeler to) is run through Go's text/template with Sprig's function map, as NFD runs a
//! rule's template, and its recorded answer must be what Go writes. The oracle
//! (tests/sprig-oracle: main.go and NFD's template data types) is built from Debian's Go toolchain
//! and Sprig packages, fetched and built once under `target/sprig-oracle/` as the test API server
//! is (nothing installed, no module proxy).

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sprig-oracle")
}

/// Where the fetched packages, the Go cache and the oracle are kept between runs.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("sprig-oracle")
}

/// A stamp of the files a step depends on: the step is done again when one of them changes.
fn stamp(files: &[&str]) -> String {
    let mut h = 0xcbf29ce484222325u64;
    for f in files {
        let text = fs::read(sources().join(f)).expect("tests/sprig-oracle file");
        for b in f.bytes().chain([0]).chain(text).chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
        }
    }
    format!("{h:016x}")
}

fn run_step(script: &str, dir: &Path) {
    let log = dir.join(format!("{script}.log"));
    let out = File::create(&log).unwrap();
    let status = Command::new("sh")
        .arg(sources().join(script))
        .env("ORACLE", dir)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run tests/sprig-oracle/{script}: {e}"));
    if !status.success() {
        let text = fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "tests/sprig-oracle/{script} failed ({status}); the Go template oracle cannot be built:\n{}",
            tail.join("\n")
        );
    }
}

/// The oracle, fetched and built on first use and when its sources change.
fn oracle() -> PathBuf {
    let dir = cache_dir();
    fs::create_dir_all(&dir).unwrap();
    // Another test binary may be building it at the same time: one at a time.
    let lock = File::create(dir.join("lock")).unwrap();
    lock.lock().unwrap();
    let fetched = stamp(&["fetch.sh", "packages.txt"]);
    if fs::read_to_string(dir.join("fetched.stamp"))
        .ok()
        .as_deref()
        != Some(fetched.as_str())
    {
        let t = Instant::now();
        run_step("fetch.sh", &dir);
        fs::write(dir.join("fetched.stamp"), &fetched).unwrap();
        eprintln!("template oracle: fetched in {:.0?}", t.elapsed());
    }
    let binary = dir.join("bin/oracle");
    let want = format!(
        "{fetched}+{}",
        stamp(&["build.sh", "main.go", "nodefeaturerule.go"])
    );
    if !binary.exists()
        || fs::read_to_string(dir.join("built.stamp")).ok().as_deref() != Some(want.as_str())
    {
        let t = Instant::now();
        run_step("build.sh", &dir);
        fs::write(dir.join("built.stamp"), &want).unwrap();
        eprintln!("template oracle: built in {:.0?}", t.elapsed());
    }
    lock.unlock().unwrap();
    binary
}

/// The tables' escapes: `\n` newline, `\t` tab, `\` before any other character keeps it.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// One recorded case: where, the data, the template, and what the table says Go writes
/// (`None`: Go fails, message not recorded).
struct Case {
    at: String,
    data: &'static str,
    source: String,
    go: Option<String>,
}

/// cases.tsv: function, template as written, expected (escaped; `ERROR`: Go fails).
fn cases_tsv() -> Vec<Case> {
    let table = include_str!("fixtures/sprig/cases.tsv");
    let mut out = Vec::new();
    for (n, line) in table.lines().enumerate() {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 3, "cases.tsv:{}", n + 1);
        out.push(Case {
            at: format!("cases.tsv:{}", n + 1),
            data: "nil",
            source: cols[1].to_string(),
            go: (cols[2] != "ERROR").then(|| unescape(cols[2])),
        });
    }
    out
}

/// classes.tsv: class, data, template (escaped), expected (escaped): the output, `ERROR: m`,
/// `ERROR (Go: m)`, or `DEVIATION: here` with Go's answer in the `# Go: ... (docs/...)` line
/// above it.
fn classes_tsv() -> Vec<Case> {
    let table = include_str!("fixtures/sprig/classes.tsv");
    let mut out = Vec::new();
    let mut go_comment: Option<String> = None;
    for (n, line) in table.lines().enumerate() {
        if let Some(c) = line.strip_prefix("# Go: ") {
            let (answer, _) = c.rsplit_once(" (docs/").expect("# Go: answer (docs/...)");
            go_comment = Some(unescape(answer));
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 4, "classes.tsv:{}", n + 1);
        let want = unescape(cols[3]);
        let go = if want.starts_with("DEVIATION: ") {
            go_comment
                .take()
                .unwrap_or_else(|| panic!("classes.tsv:{}: no # Go: line above", n + 1))
        } else if let Some(m) = want.strip_prefix("ERROR (Go: ") {
            format!("ERROR: {}", m.strip_suffix(')').expect("ERROR (Go: ...)"))
        } else {
            want
        };
        out.push(Case {
            at: format!("classes.tsv:{}", n + 1),
            data: if cols[1] == "nfd" { "nfd" } else { "nil" },
            source: unescape(cols[2]),
            go: Some(go),
        });
    }
    out
}

/// Where Debian's packages are not NFD v0.19's pins, Go built from them answers otherwise than
/// NFD; the tables hold NFD's answer: the template, and why.
const NOT_NFD_S_VERSIONS: &[(&str, &str)] = &[
    (
        r#"{{ sha512sum "" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ sha512sum "abc" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ sha512sum "héllo" }}"#,
        "Sprig 3.3.0 added sha512sum; Debian has 3.2.3",
    ),
    (
        r#"{{ int64 "3.5" }}"#,
        "spf13/cast 1.7.1 (NFD's) gives 0 for a string with a fraction; Debian's 1.10.0 gives 3",
    ),
    (
        r#"{{ int "4.9" }}"#,
        "spf13/cast 1.7.1 (NFD's) gives 0 for a string with a fraction; Debian's 1.10.0 gives 4",
    ),
];

#[test]
fn every_recorded_template_case_is_what_go_writes() {
    let binary = oracle();
    let cases: Vec<Case> = cases_tsv().into_iter().chain(classes_tsv()).collect();
    assert!(cases.len() > 1400, "{} cases", cases.len());
    let mut input = String::new();
    for c in &cases {
        input.push_str(&serde_json::to_string(&[c.data, c.source.as_str()]).unwrap());
        input.push('\n');
    }
    let mut child = Command::new(&binary)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), cases.len());
    let mut differ = Vec::new();
    let mut versions = 0;
    for (c, go) in cases.iter().zip(&answers) {
        let agrees = match &c.go {
            Some(want) => want == go,
            None => go.starts_with("ERROR: "),
        };
        if agrees {
            continue;
        }
        if NOT_NFD_S_VERSIONS.iter().any(|(t, _)| *t == c.source) {
            versions += 1;
            continue;
        }
        differ.push(format!(
            "{}: {}\n  recorded: {:?}\n        Go: {go:?}",
            c.at, c.source, c.go
        ));
    }
    assert!(
        differ.is_empty(),
        "{} recorded answers are not Go's:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // Each version difference is still one: when Debian catches up, its entry goes.
    assert_eq!(versions, NOT_NFD_S_VERSIONS.len());
}
