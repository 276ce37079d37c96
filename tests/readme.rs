//! The README's label table, and the accelerator and vendor tables of docs/labels.md, are the
//! real output: each example column is compared, whole, with `gpu-labeler labels` on the
//! fixture the column names. A label the program gives and the table lacks, or a value that
//! drifted, fails here.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;

use common::*;

const PREFIX: &str = "feature.node.kubernetes.io/";

/// A row of the table: the label key and its example cells (`None` for "—").
type Row = (String, Vec<Option<String>>);

/// The rows of the table between `<!-- NAME -->` markers of the file `file`: label key and the
/// cells of the example columns (`None` for "—").
fn table_named(file: &str, name: &str) -> (Vec<String>, Vec<Row>) {
    let readme = std::fs::read_to_string(repo().join(file)).unwrap();
    let start = readme
        .find(&format!("<!-- {name} -->"))
        .expect("table start marker");
    let end = readme
        .find(&format!("<!-- /{name} -->"))
        .expect("table end marker");
    let mut lines = readme[start..end].lines().skip(1);
    let cells = table_cells;
    let header = cells(lines.next().expect("header"));
    lines.next().expect("separator");
    let columns = header[2..].to_vec();
    let rows = lines
        .map(|line| {
            let c = cells(line);
            assert_eq!(c.len(), header.len(), "row {line:?}");
            let key = c[0].trim_matches('`').to_string();
            let examples = c[2..]
                .iter()
                .map(|v| match v.as_str() {
                    "—" => None,
                    v => Some(
                        v.strip_prefix('`')
                            .and_then(|v| v.strip_suffix('`'))
                            .unwrap_or_else(|| panic!("example {v:?} of {key} not in backticks"))
                            .to_string(),
                    ),
                })
                .collect();
            (key, examples)
        })
        .collect();
    (columns, rows)
}

fn table() -> (Vec<String>, Vec<Row>) {
    table_named("README.md", "labels-table")
}

fn column(rows: &[Row], i: usize) -> BTreeMap<String, String> {
    rows.iter()
        .filter_map(|(key, ex)| ex[i].clone().map(|v| (format!("{PREFIX}{key}"), v)))
        .collect()
}

#[test]
fn the_readme_label_table_is_the_real_output() {
    let (columns, rows) = table();
    assert_eq!(columns, ["8x H100", "8x MI210"]);

    // 8x H100: the Dell XE9680 tree with NVML through the fake library (the real capture's values).
    let lib = fake_nvml_lib("nvidia_ml");
    let fixture = nvml_fixture("h100-8x");
    let mut args = fixture_args(&["labels", "-o", "json"], "dell-xe9680-8xh100", &[]);
    args.retain(|a| a != "--no-nvml");
    args.extend(["--nvml-lib".into(), lib.into_os_string()]);
    let h100 = run_env(args, &[("FAKE_NVML_FIXTURE", fixture.as_os_str())]);
    assert_eq!(labels_of(h100.ok()), column(&rows, 0), "8x H100 column");

    // 8x MI210: KFD and amdgpu sysfs, no NVML.
    let mi210 = run_env(
        fixture_args(&["labels", "-o", "json"], "amd-mi210-8x", &[]),
        &[] as &[(&str, &OsStr)],
    );
    assert_eq!(labels_of(mi210.ok()), column(&rows, 1), "8x MI210 column");

    // Rows without an example on either node are label patterns or labels that need MIG, a
    // sharing configuration or a multi-node NVLink fabric; each is one of
    // docs/catalog.md#labels-gpu's.
    let documented_only: Vec<&str> = rows
        .iter()
        .filter(|(_, ex)| ex.iter().all(Option::is_none))
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        documented_only,
        [
            "gpu.models",
            "gpu-model-<product>.count",
            "gpu-family-<family>.count",
            "gpu.mig-<profile>.count",
            "gpu.sharing-strategy",
            "gpu.replicas",
            "gpu.clique"
        ]
    );
}

/// The accelerator table of docs/labels.md: each example column is `labels` on its fixture,
/// whole.
#[test]
fn the_accelerator_table_is_the_real_output() {
    let (columns, rows) = table_named("docs/labels.md", "accel-table");
    assert_eq!(columns, ["8x Gaudi 2", "mixed"]);
    for (i, machine) in ["habana-gaudi2-8x", "mixed-gaudi2-npu-wormhole"]
        .iter()
        .enumerate()
    {
        let r = run_env(
            fixture_args(&["labels", "-o", "json"], machine, &[]),
            &[] as &[(&str, &OsStr)],
        );
        assert_eq!(labels_of(r.ok()), column(&rows, i), "{machine} column");
    }
}

/// The vendor table of docs/labels.md names exactly the catalogue's vendors, with their PCI
/// vendor ids.
#[test]
fn the_vendor_table_is_the_catalogue() {
    let readme = std::fs::read_to_string(repo().join("docs/labels.md")).unwrap();
    let start = readme.find("<!-- vendor-table -->").expect("start marker");
    let end = readme.find("<!-- /vendor-table -->").expect("end marker");
    let mut from_readme: Vec<(String, String)> = Vec::new();
    for line in readme[start..end].lines().skip(3) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        for id in cells[1].split(", ") {
            from_readme.push((
                cells[0].trim_matches('`').to_string(),
                id.trim_matches('`').to_string(),
            ));
        }
    }
    from_readme.sort();
    let mut catalogue: Vec<(String, String)> = gpu_labeler::catalogue::catalogue()
        .vendors
        .iter()
        .map(|v| (v.name.clone(), format!("{:04x}", v.id)))
        .collect();
    catalogue.sort();
    assert_eq!(from_readme, catalogue);
}
