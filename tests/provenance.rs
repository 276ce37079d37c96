//! What a fixture was built from is in the repository, or named by its public source.
//!
//! The captures the fixtures come from live in `tests/fixtures/captures/` (see the
//! `PROVENANCE.md` there). These tests fail when a tracked file points at a captures folder
//! outside the repository (which a clone does not have), and when a file under
//! `tests/fixtures/captures/` is not named in a provenance note.

mod common;

use common::{repo, tracked_files};

/// The spellings of the captures folder outside the repository, assembled so that this file
/// does not name them itself.
fn outside_spellings() -> Vec<String> {
    let shared = "shared";
    let mirror = "mirror";
    vec![
        format!("../{shared}/"),
        format!("{shared}/hardware"),
        format!("/work/{shared}"),
        // The build machine's mirrors of public repositories: a clone has none of them.
        format!("/work/.{mirror}"),
    ]
}

/// The offending lines of `text`, as "path:line: text".
fn outside_references(path: &str, text: &str, spellings: &[String]) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| spellings.iter().any(|s| line.contains(s.as_str())))
        .map(|(n, line)| format!("{path}:{}: {}", n + 1, line.trim()))
        .collect()
}

#[test]
fn no_tracked_file_points_at_captures_outside_the_repository() {
    let spellings = outside_spellings();
    let mut found = Vec::new();
    for rel in tracked_files() {
        if rel.starts_with("target/") {
            continue;
        }
        let path = repo().join(&rel);
        if path.is_symlink() {
            if let Ok(target) = std::fs::read_link(&path) {
                found.extend(outside_references(
                    &rel,
                    &target.to_string_lossy(),
                    &spellings,
                ));
            }
            continue;
        }
        // Binary files (tarballs) are read lossily: a path in them still shows.
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        found.extend(outside_references(
            &rel,
            &String::from_utf8_lossy(&bytes),
            &spellings,
        ));
    }
    assert!(
        found.is_empty(),
        "tracked files point at a captures folder outside the repository; copy the capture \
         into tests/fixtures/captures/ (with its provenance) or cite its public source:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_sees_each_outside_spelling() {
    let spellings = outside_spellings();
    for line in [
        "built from ../{s}/gpud/lspci-vvv",
        "DEFAULT = Path(\"/work/{s}/hw\")",
        "see {s}/hardware/hwloc",
        "DEFAULT_GIT = Path(\"/work/.{m}/ROCm+k8s-device-plugin/repo\")",
    ] {
        let line = line.replace("{s}", "shared").replace("{m}", "mirror");
        assert_eq!(
            outside_references("x", &line, &spellings).len(),
            1,
            "{line}"
        );
    }
    let fine = "tests/fixtures/captures/gpud/lspci-vvv (leptonai/gpud, shared by Lepton)";
    assert!(outside_references("x", fine, &spellings).is_empty());
}

const CAPTURES: &str = "tests/fixtures/captures/";

/// Whether `rel` (a path below the captures folder) is named by a provenance note: the
/// folder's top `PROVENANCE.md` names the path, or a folder above it at least two levels down
/// (a copied tree such as `amd_kfd/testdata/topo-mi210-xgmi-pcie/`; naming `gpud/` alone does
/// not name what is in it), or a `PROVENANCE.md` in a folder above the file names the file.
fn is_named(rel: &str, notes: &[(String, String)]) -> bool {
    let name = rel.rsplit('/').next().unwrap();
    notes.iter().any(|(dir, text)| {
        if !(dir.is_empty() || rel.starts_with(&format!("{dir}/"))) {
            return false;
        }
        if dir.is_empty() {
            if text.contains(&format!("`{rel}`")) || text.contains(&format!("`{rel}/`")) {
                return true;
            }
            let mut prefix = String::new();
            for part in rel.split('/').take(rel.split('/').count() - 1) {
                prefix.push_str(part);
                prefix.push('/');
                if prefix.matches('/').count() >= 2 && text.contains(&format!("`{prefix}`")) {
                    return true;
                }
            }
            false
        } else {
            text.contains(name)
        }
    })
}

#[test]
fn every_capture_is_named_by_a_provenance_note() {
    let files: Vec<String> = tracked_files()
        .into_iter()
        .filter_map(|f| f.strip_prefix(CAPTURES).map(str::to_owned))
        .collect();
    assert!(
        files.iter().any(|f| f == "PROVENANCE.md"),
        "{CAPTURES}PROVENANCE.md is missing"
    );
    let notes: Vec<(String, String)> = files
        .iter()
        .filter(|f| f.rsplit('/').next() == Some("PROVENANCE.md"))
        .map(|f| {
            let dir = f
                .strip_suffix("PROVENANCE.md")
                .unwrap()
                .trim_end_matches('/');
            let text = std::fs::read_to_string(repo().join(CAPTURES).join(f)).unwrap();
            (dir.to_owned(), text)
        })
        .collect();
    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| f.rsplit('/').next() != Some("PROVENANCE.md"))
        .filter(|f| !is_named(f, &notes))
        .collect();
    assert!(
        unnamed.is_empty(),
        "captures no provenance note names (add them to {CAPTURES}PROVENANCE.md, with their \
         public source): {unnamed:?}"
    );
}

#[test]
fn the_naming_rule_is_what_the_note_says() {
    let notes = vec![
        (
            String::new(),
            "| `gpud/` | `gpud/lspci-vvv`, `amd/testdata/` |\n| `top.ttar` | y |".to_owned(),
        ),
        ("hwloc".to_owned(), "| nvidiaDGX2.xml | z |".to_owned()),
    ];
    assert!(is_named("gpud/lspci-vvv", &notes));
    assert!(!is_named("gpud/lspci.nn", &notes));
    assert!(is_named("amd/testdata/nodes/0/properties", &notes));
    assert!(is_named("top.ttar", &notes));
    assert!(is_named("hwloc/nvidiaDGX2.xml", &notes));
    assert!(!is_named("hwloc/other.xml", &notes));
    assert!(!is_named("other.ttar", &notes));
    assert!(!is_named("nvidia_smi/a.xml", &notes));
}
