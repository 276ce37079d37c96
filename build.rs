//! Indexes the embedded PCI ID database (`data/pci.ids`) by vendor.
//!
//! The binary embeds the file as bytes and this index as plain integers: neither needs a
//! load-time relocation, and a lookup reads only the index and the sections of the vendors
//! present. (The `pci-ids` crate's tables of `&str` needed 66,919 relocations: 3.3 MiB of every
//! process's memory before `main`, see BENCHMARKS.md.)

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let src = Path::new("data/pci.ids");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=build.rs");
    let db = std::fs::read(src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));

    // (vendor id, start of its line, end of its section). A section ends where the next line
    // that is not a device, subsystem or comment line starts: the next vendor or the classes.
    let mut index: Vec<(u16, usize, usize)> = Vec::new();
    let mut open: Option<(u16, usize)> = None;
    let mut at = 0;
    for line in db.split_inclusive(|&b| b == b'\n') {
        let start = at;
        at += line.len();
        match line.first() {
            None | Some(b'#') | Some(b'\t') | Some(b'\n') => continue,
            _ => {}
        }
        if let Some((id, s)) = open.take() {
            index.push((id, s, start));
        }
        if line.starts_with(b"C ") {
            break; // the class section follows every vendor
        }
        let id = std::str::from_utf8(&line[..4.min(line.len())])
            .ok()
            .and_then(|h| u16::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| panic!("{}: bad vendor line at byte {start}", src.display()));
        open = Some((id, start));
    }
    if let Some((id, s)) = open {
        index.push((id, s, at));
    }
    index.sort_by_key(|&(id, ..)| id);
    index.dedup_by_key(|&mut (id, ..)| id);

    let mut out = String::new();
    writeln!(
        out,
        "/// Vendor id, and the byte range of its section in `data/pci.ids`; sorted by id.\n\
         pub(crate) static VENDOR_INDEX: [(u16, u32, u32); {}] = [",
        index.len()
    )
    .unwrap();
    for (id, s, e) in &index {
        writeln!(out, "    (0x{id:04x}, {s}, {e}),").unwrap();
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("pci_ids_index.rs");
    std::fs::write(&dest, out).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
}
