//! PCI ID database lookups: vendor and device names.
//!
//! `data/pci.ids` is embedded at build time (indexed by vendor by `build.rs`); that is the
//! default, so the same binary names the same device the same way on every node. A `pci.ids`
//! file can be preferred at run time (`--pci-ids`, e.g. the host's `/usr/share/misc/pci.ids`
//! mounted in, when it is newer); only the devices present on the node are kept from it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Vendor id -> the device ids of that vendor present on the node.
pub type Wanted = BTreeMap<u16, BTreeSet<u16>>;

#[derive(Debug, Default, PartialEq, Eq)]
struct VendorEntry {
    name: String,
    devices: HashMap<u16, String>,
}

/// The names of the vendors and devices present on the node, resolved once from the embedded
/// database or a `pci.ids` file; lookups are then hash-map reads.
#[derive(Debug)]
pub struct PciIds {
    source: String,
    vendors: HashMap<u16, VendorEntry>,
}

/// `data/pci.ids`, embedded as bytes; `VENDOR_INDEX` (from build.rs) locates each vendor.
static DB: &[u8] = include_bytes!("../data/pci.ids");
include!(concat!(env!("OUT_DIR"), "/pci_ids_index.rs"));

impl PciIds {
    /// Resolves `wanted` from the database embedded at build time: the index locates each
    /// present vendor's section, and only those sections are read.
    pub fn embedded(wanted: &Wanted) -> PciIds {
        let mut vendors = HashMap::new();
        for &vid in wanted.keys() {
            if let Ok(i) = VENDOR_INDEX.binary_search_by_key(&vid, |&(id, ..)| id) {
                let (_, start, end) = VENDOR_INDEX[i];
                let section = DB.get(start as usize..end as usize).unwrap_or_default();
                parse(section, wanted, &mut vendors);
            }
        }
        PciIds {
            source: "embedded".into(),
            vendors,
        }
    }

    /// Reads the names of the vendors and devices in `wanted` from a `pci.ids` file. Lines of
    /// other vendors are skipped without decoding; the class section is never read.
    pub fn from_file(path: &Path, wanted: &Wanted) -> std::io::Result<PciIds> {
        let bytes = crate::sysfs::read_regular_file(path, crate::sysfs::MAX_INPUT_BYTES)?;
        let mut vendors = HashMap::new();
        parse(&bytes, wanted, &mut vendors);
        Ok(PciIds {
            source: path.display().to_string(),
            vendors,
        })
    }

    /// The database to use: `explicit` if given, else the embedded one. The host's `pci.ids` is
    /// not picked up on its own: inside a container it is the image's, not the node's, and a
    /// package update would change names (and so labels) under a running fleet.
    pub fn select(explicit: Option<&Path>, wanted: &Wanted) -> std::io::Result<PciIds> {
        match explicit {
            Some(path) => PciIds::from_file(path, wanted)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            None => Ok(PciIds::embedded(wanted)),
        }
    }

    /// `embedded` or the file's path.
    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn vendor_name(&self, vendor: u16) -> Option<&str> {
        self.vendors
            .get(&vendor)
            .map(|v| v.name.as_str())
            .filter(|n| !n.is_empty())
    }

    pub fn device_name(&self, vendor: u16, device: u16) -> Option<&str> {
        self.vendors
            .get(&vendor)?
            .devices
            .get(&device)
            .map(String::as_str)
    }
}

/// Adds the vendors and devices of `wanted` found in `bytes` (a whole `pci.ids` file or one
/// vendor's section of it) to `vendors`.
fn parse(bytes: &[u8], wanted: &Wanted, vendors: &mut HashMap<u16, VendorEntry>) {
    let mut current: Option<(u16, &BTreeSet<u16>)> = None;
    for line in bytes.split(|&b| b == b'\n') {
        match line.first() {
            None | Some(b'#') => continue,
            Some(b'\t') => {
                let Some((vid, devices)) = current else {
                    continue;
                };
                if line.get(1) == Some(&b'\t') {
                    continue; // subsystem line
                }
                if let Some((id, name)) = split_entry(&line[1..])
                    && devices.contains(&id)
                {
                    vendors.entry(vid).or_default().devices.insert(id, name);
                }
            }
            Some(b'C') if line.starts_with(b"C ") => break, // the class section follows all vendors
            Some(_) => {
                current = split_entry(line).and_then(|(id, name)| {
                    let devices = wanted.get(&id)?;
                    vendors.entry(id).or_default().name = name;
                    Some((id, devices))
                });
            }
        }
    }
}

/// `10de  NVIDIA Corporation` -> (0x10de, name). pci.ids is mostly ASCII with a few UTF-8 names.
fn split_entry(line: &[u8]) -> Option<(u16, String)> {
    let id = std::str::from_utf8(line.get(..4)?).ok()?;
    let id = u16::from_str_radix(id, 16).ok()?;
    let name = String::from_utf8_lossy(line.get(4..)?);
    let name = name.trim();
    (!name.is_empty()).then(|| (id, name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_wanted_vendors_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pci.ids");
        std::fs::write(
            &path,
            "# comment\n10de  NVIDIA Corporation\n\t2330  GH100 [H100 SXM5 80GB]\n\t\t10de 16c1  H100 SXM5 80GB\n1af4  Red Hat, Inc.\n\t1041  Virtio 1.0 network device\nC 03  Display controller\n\t02  3D controller\n",
        )
        .unwrap();
        let wanted = Wanted::from([(0x10de, BTreeSet::from([0x2330]))]);
        let ids = PciIds::from_file(&path, &wanted).unwrap();
        assert_eq!(ids.vendor_name(0x10de), Some("NVIDIA Corporation"));
        assert_eq!(
            ids.device_name(0x10de, 0x2330),
            Some("GH100 [H100 SXM5 80GB]")
        );
        assert_eq!(ids.vendor_name(0x1af4), None);
        assert_eq!(ids.device_name(0x10de, 0x16c1), None);
    }

    #[test]
    fn embedded_database_resolves_only_what_is_present() {
        let ids = PciIds::embedded(&Wanted::from([(0x10de, BTreeSet::from([0x2330]))]));
        assert_eq!(ids.source(), "embedded");
        assert_eq!(ids.vendor_name(0x10de), Some("NVIDIA Corporation"));
        assert_eq!(
            ids.device_name(0x10de, 0x2330),
            Some("GH100 [H100 SXM5 80GB]")
        );
        assert_eq!(ids.device_name(0x10de, 0x20b2), None);
        assert_eq!(ids.vendor_name(0x1002), None);
    }

    /// The index finds every vendor, with exactly the devices a pass over the whole file finds.
    #[test]
    fn the_index_reads_the_same_as_the_whole_file() {
        let mut all = Wanted::new();
        let mut vendor = None;
        for line in DB.split(|&b| b == b'\n') {
            if line.starts_with(b"C ") {
                break;
            }
            match line {
                [b'#', ..] | [] | [b'\t', b'\t', ..] => {}
                [b'\t', rest @ ..] => {
                    let (id, _) = split_entry(rest).expect("device line");
                    all.entry(vendor.expect("a vendor first"))
                        .or_default()
                        .insert(id);
                }
                _ => {
                    let (id, _) = split_entry(line).expect("vendor line");
                    all.entry(id).or_default();
                    vendor = Some(id);
                }
            }
        }
        assert!(all.len() > 2000, "{} vendors", all.len());
        assert_eq!(VENDOR_INDEX.len(), all.len());
        let mut whole = HashMap::new();
        parse(DB, &all, &mut whole);
        assert_eq!(PciIds::embedded(&all).vendors, whole);
    }
}
