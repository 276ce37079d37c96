//! The Go programs of the tests (the test API server, the template oracle, the scheduling
//! oracle), each fetched and built once and cached under `target/NAME/`: tests/debian-fetch.sh
//! downloads and unpacks the Debian packages of `tests/NAME/packages.txt` (nothing installed),
//! `tests/NAME/build.sh` compiles in GOPATH mode against them (no module proxy, no network).
//! Each step runs again when a file it depends on changes, under a file lock so that parallel
//! test binaries build once. The stamps' names are not those of the per-program scripts this
//! replaced, so that a checkout of either kind sharing a cache does not undo the other's.
#![allow(dead_code)]

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One Go program of the tests.
pub struct GoProgram {
    /// `tests/NAME/` holds its sources, `target/NAME/` its cache.
    pub name: &'static str,
    /// What it is, for the messages: "the test API server".
    pub what: &'static str,
    /// The files of `tests/NAME/` its build depends on (build.sh and its Go sources).
    pub build_inputs: &'static [&'static str],
    /// The program, relative to its cache.
    pub binary: &'static str,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

impl GoProgram {
    pub fn sources(&self) -> PathBuf {
        repo().join("tests").join(self.name)
    }

    /// Where the fetched packages, the Go cache and the program are kept between runs.
    pub fn cache_dir(&self) -> PathBuf {
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join(self.name)
    }

    /// A stamp of the files a step depends on (relative to the repository): the step is done
    /// again when one of them changes.
    fn stamp(&self, files: &[PathBuf]) -> String {
        let mut h = 0xcbf29ce484222325u64;
        for f in files {
            let text = fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let name = f.strip_prefix(repo()).unwrap_or(f).display().to_string();
            for b in name.bytes().chain([0]).chain(text).chain([0]) {
                h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
            }
        }
        format!("{h:016x}")
    }

    fn run_step(&self, script: &Path, log: &Path) {
        let dir = self.cache_dir();
        let out = File::create(log).unwrap();
        let status = Command::new("sh")
            .arg(script)
            .env("DEST", &dir)
            .env("PACKAGES", self.sources().join("packages.txt"))
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        if !status.success() {
            let text = fs::read_to_string(log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "{} failed ({status}); {} cannot be built:\n{}",
                script.strip_prefix(repo()).unwrap_or(script).display(),
                self.what,
                tail.join("\n")
            );
        }
    }

    /// The program, fetched and built on first use and when its sources change.
    pub fn build(&self) -> PathBuf {
        let dir = self.cache_dir();
        fs::create_dir_all(&dir).unwrap();
        // Other test binaries may be building it at the same time: one at a time.
        let lock = File::create(dir.join("lock")).unwrap();
        lock.lock().unwrap();
        let fetch = repo().join("tests/debian-fetch.sh");
        let fetched = self.stamp(&[fetch.clone(), self.sources().join("packages.txt")]);
        if fs::read_to_string(dir.join("debian-fetch.stamp"))
            .ok()
            .as_deref()
            != Some(fetched.as_str())
        {
            let t = Instant::now();
            self.run_step(&fetch, &dir.join("fetch.log"));
            fs::write(dir.join("debian-fetch.stamp"), &fetched).unwrap();
            eprintln!("{}: fetched in {:.0?}", self.what, t.elapsed());
        }
        let binary = dir.join(self.binary);
        // The environment every build.sh sources is an input of each.
        let inputs: Vec<PathBuf> = self
            .build_inputs
            .iter()
            .map(|f| self.sources().join(f))
            .chain([repo().join("tests/go-env.sh")])
            .collect();
        let want = format!("{fetched}+{}", self.stamp(&inputs));
        if !binary.exists()
            || fs::read_to_string(dir.join("go-build.stamp"))
                .ok()
                .as_deref()
                != Some(want.as_str())
        {
            let t = Instant::now();
            self.run_step(&self.sources().join("build.sh"), &dir.join("build.log"));
            fs::write(dir.join("go-build.stamp"), &want).unwrap();
            eprintln!("{}: built in {:.0?}", self.what, t.elapsed());
        }
        lock.unlock().unwrap();
        binary
    }
}

/// What `program` answers, a JSON value a line, to `lines` written to its stdin (from another
/// thread, so that a large input cannot block on a full pipe). Panics with its stderr when it
/// fails or answers a line that is not `T`.
pub fn answers<T: serde::de::DeserializeOwned>(program: &Path, lines: Vec<String>) -> Vec<T> {
    let mut child = Command::new(program)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        lines.iter().try_for_each(|line| writeln!(stdin, "{line}"))
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {l:?}: {e}", program.display()))
        })
        .collect()
}
