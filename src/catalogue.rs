//! The accelerator catalogue (`data/accelerators.yaml`, embedded): which PCI functions are GPUs
//! and which are other accelerators (NPUs, HPUs, TPUs, ...), the short vendor name their label
//! keys use, and where sysfs tells a device's memory and driver version without privileges.
//!
//! Data, not code paths: a new part is a new entry, with the source of each fact beside it. A
//! function is classified by the first entry of its vendor whose device ids and class prefixes
//! it matches. A function no entry matches is still an accelerator, of kind `unknown`, when its
//! base class is `12` (processing accelerator) or its driver registered it in the kernel's
//! `accel` class: a new part is visible before the catalogue knows it. Its vendor is the
//! catalogue's name for the vendor id, or the id itself (`1fc9`) when the vendor is unknown too.

use std::borrow::Cow;
use std::sync::LazyLock;

use serde::Deserialize;

/// The kind of a GPU; every other kind is an accelerator's.
pub const GPU: &str = "gpu";
/// The kind of a processing accelerator no entry describes.
pub const UNKNOWN: &str = "unknown";

/// Where a value is read: a file under the PCI function's directory, or a kernel module's
/// `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    File { path: String, unit: Unit },
    Module(String),
}

/// The unit of a memory file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Bytes,
    Kib,
    Mib,
}

impl Unit {
    /// `value` of this unit in MiB (rounded down).
    pub fn to_mib(self, value: u64) -> u64 {
        match self {
            Unit::Bytes => value >> 20,
            Unit::Kib => value >> 10,
            Unit::Mib => value,
        }
    }
}

/// A `names` key: a device id, and the subsystem `(vendor, device)` it is for, if only one.
pub type NameKey = (u16, Option<(u16, u16)>);

/// One kind of device of a vendor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// `gpu` or the accelerator's kind (`npu`, `hpu`, `tpu`, ...).
    pub kind: String,
    /// Device ids this entry is for; empty: all of the vendor's.
    pub ids: Vec<u16>,
    /// Class-code prefixes (`(value, hex digits)`, `12` or `0b40`); empty: any class.
    pub classes: Vec<(u32, u8)>,
    /// Product names for device ids the PCI ID database lacks.
    pub products: Vec<(u16, String)>,
    /// The vendor's own names (NVML's), taken before the PCI ID database's: by device id, or by
    /// device id and subsystem (`(vendor, device)`) where one device id has several names.
    pub names: Vec<(NameKey, String)>,
    pub memory: Option<Source>,
    pub version: Option<Source>,
    /// The kernel driver (as `/sys/bus/pci/devices/*/driver` names it), where the entry says.
    pub driver: Option<String>,
}

impl DeviceEntry {
    /// The `gpu.driver` / `accel.driver` element a version read by `version` is filed under:
    /// the module, or the entry's driver for a version file.
    pub fn version_key(&self) -> Option<&str> {
        match self.version.as_ref()? {
            Source::Module(m) => Some(m),
            Source::File { .. } => self.driver.as_deref(),
        }
    }

    fn matches(&self, device_id: u16, class_code: u32) -> bool {
        (self.ids.is_empty() || self.ids.contains(&device_id))
            && (self.classes.is_empty()
                || self
                    .classes
                    .iter()
                    .any(|&(value, digits)| class_code >> (4 * (6 - u32::from(digits))) == value))
    }

    /// The catalogue's name for `device_id`, when it has one.
    pub fn product(&self, device_id: u16) -> Option<&str> {
        self.products
            .iter()
            .find(|(id, _)| *id == device_id)
            .map(|(_, n)| n.as_str())
    }

    /// The vendor's own name for `device_id` on the board `subsystem` (NVML's), when the
    /// catalogue has it: the one for that subsystem first, else the one for the device id alone.
    pub fn name(&self, device_id: u16, subsystem: (u16, u16)) -> Option<&str> {
        let find = |key: NameKey| {
            self.names
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, n)| n.as_str())
        };
        find((device_id, Some(subsystem))).or_else(|| find((device_id, None)))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorEntry {
    pub id: u16,
    /// Lower-case letters and digits: `gpu-<name>.count`, `accel-<name>.count`.
    pub name: String,
    pub devices: Vec<DeviceEntry>,
}

/// What a PCI function is, by the catalogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class<'a> {
    /// The vendor's name in label keys (`habana`), or its id (`1fc9`) when unknown.
    pub vendor: Cow<'a, str>,
    /// `gpu`, an accelerator's kind, or `unknown`.
    pub kind: &'a str,
    /// The entry that matched (`None` for `unknown`).
    pub entry: Option<&'a DeviceEntry>,
}

impl Class<'_> {
    pub fn is_gpu(&self) -> bool {
        self.kind == GPU
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalogue {
    pub vendors: Vec<VendorEntry>,
}

/// The catalogue shipped in the binary (checked by this module's tests: it always parses).
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE: LazyLock<Catalogue> = LazyLock::new(|| {
        Catalogue::parse(include_str!("../data/accelerators.yaml"))
            .unwrap_or_else(|e| panic!("data/accelerators.yaml: {e}"))
    });
    &CATALOGUE
}

impl Catalogue {
    pub fn vendor(&self, id: u16) -> Option<&VendorEntry> {
        self.vendors.iter().find(|v| v.id == id)
    }

    /// What the function `vendor_id:device_id` of class `class_code` (24 bits) is: a GPU, an
    /// accelerator, or (`None`) neither. `in_accel_class`: its driver registered it under
    /// `/sys/class/accel`.
    pub fn classify(
        &self,
        vendor_id: u16,
        device_id: u16,
        class_code: u32,
        in_accel_class: bool,
    ) -> Option<Class<'_>> {
        let vendor = self.vendor(vendor_id);
        if let Some(v) = vendor
            && let Some(e) = v.devices.iter().find(|e| e.matches(device_id, class_code))
        {
            return Some(Class {
                vendor: Cow::Borrowed(&v.name),
                kind: &e.kind,
                entry: Some(e),
            });
        }
        if class_code >> 16 != 0x12 && !in_accel_class {
            return None;
        }
        let vendor = match vendor {
            Some(v) => Cow::Borrowed(v.name.as_str()),
            None => Cow::Owned(format!("{vendor_id:04x}")),
        };
        Some(Class {
            vendor,
            kind: UNKNOWN,
            entry: None,
        })
    }

    /// The element names of `gpu.driver` and `accel.driver` the catalogue can give.
    pub fn version_keys(&self) -> impl Iterator<Item = &str> {
        self.vendors
            .iter()
            .flat_map(|v| &v.devices)
            .filter_map(DeviceEntry::version_key)
    }

    pub fn parse(text: &str) -> Result<Catalogue, String> {
        let docs: Vec<VendorDoc> =
            serde_saphyr::from_str(text).map_err(|e| crate::yaml::error_message(&e))?;
        let mut vendors = Vec::new();
        for (i, v) in docs.into_iter().enumerate() {
            let at = |what: &str| format!("entry {} ({}): {what}", i + 1, v.name);
            let id = hex16(&v.vendor).ok_or_else(|| at("vendor: not 4 hex digits"))?;
            if v.name.is_empty()
                || !v
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            {
                return Err(at("name: lower-case letters and digits only"));
            }
            if v.source.trim().is_empty() {
                return Err(at("source: say where the vendor id comes from"));
            }
            let mut devices = Vec::new();
            for d in v.devices {
                if d.source.trim().is_empty() {
                    return Err(at("a device without a source"));
                }
                if d.kind.is_empty() || !d.kind.bytes().all(|b| b.is_ascii_lowercase()) {
                    return Err(at("kind: lower-case letters only"));
                }
                if d.kind == UNKNOWN {
                    return Err(at("kind: unknown is what no entry matches"));
                }
                let ids = d
                    .ids
                    .iter()
                    .map(|s| hex16(s).ok_or_else(|| at(&format!("ids: {s:?} is not 4 hex digits"))))
                    .collect::<Result<Vec<_>, _>>()?;
                let classes = d
                    .classes
                    .iter()
                    .map(|s| {
                        let ok = matches!(s.len(), 2 | 4 | 6)
                            && s.bytes().all(|b| b.is_ascii_hexdigit());
                        ok.then(|| u32::from_str_radix(s, 16).ok().map(|c| (c, s.len() as u8)))
                            .flatten()
                            .ok_or_else(|| {
                                at(&format!("classes: {s:?} is not 2, 4 or 6 hex digits"))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let products = d
                    .products
                    .iter()
                    .map(|(k, n)| {
                        hex16(k)
                            .map(|id| (id, n.clone()))
                            .ok_or_else(|| at(&format!("products: {k:?} is not 4 hex digits")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let names = d
                    .names
                    .iter()
                    .map(|(k, n)| {
                        name_key(k).map(|key| (key, n.clone())).ok_or_else(|| {
                            at(&format!(
                                "names: {k:?} is not a device id (4 hex digits), optionally \
                                 followed by a subsystem (\"1db8 10de:131d\")"
                            ))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                let version = d
                    .version
                    .map(|s| s.into_source(false))
                    .transpose()
                    .map_err(|e| at(&e))?;
                if matches!(version, Some(Source::File { .. })) && d.driver.is_none() {
                    return Err(at("a version file needs the entry's driver"));
                }
                devices.push(DeviceEntry {
                    kind: d.kind,
                    driver: d.driver,
                    ids,
                    classes,
                    products,
                    names,
                    memory: d
                        .memory
                        .map(|s| s.into_source(true))
                        .transpose()
                        .map_err(|e| at(&e))?,
                    version,
                });
            }
            vendors.push(VendorEntry {
                id,
                name: v.name,
                devices,
            });
        }
        Ok(Catalogue { vendors })
    }
}

/// A `names` key: `1db8`, or `1db8 10de:131d` (device id, subsystem vendor:device, as pci.ids
/// lays out a subsystem's name).
fn name_key(s: &str) -> Option<NameKey> {
    match s.split_once(' ') {
        None => Some((hex16(s)?, None)),
        Some((device, subsystem)) => {
            let (vendor, sub_device) = subsystem.split_once(':')?;
            Some((hex16(device)?, Some((hex16(vendor)?, hex16(sub_device)?))))
        }
    }
}

fn hex16(s: &str) -> Option<u16> {
    (s.len() == 4)
        .then(|| u16::from_str_radix(s, 16).ok())
        .flatten()
        .filter(|_| {
            s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VendorDoc {
    vendor: String,
    name: String,
    source: String,
    #[serde(default)]
    devices: Vec<DeviceDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceDoc {
    kind: String,
    #[serde(default)]
    ids: Vec<String>,
    #[serde(default)]
    classes: Vec<String>,
    #[serde(default)]
    products: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    names: std::collections::BTreeMap<String, String>,
    memory: Option<SourceDoc>,
    version: Option<SourceDoc>,
    driver: Option<String>,
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceDoc {
    file: Option<String>,
    module: Option<String>,
    unit: Option<Unit>,
}

impl SourceDoc {
    fn into_source(self, memory: bool) -> Result<Source, String> {
        let safe = |p: &str| {
            !p.is_empty()
                && !p.starts_with('/')
                && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        };
        match (self.file, self.module, self.unit) {
            (Some(path), None, unit) if safe(&path) => {
                if memory && unit.is_none() {
                    return Err(format!("memory file {path:?}: say its unit"));
                }
                Ok(Source::File {
                    path,
                    unit: unit.unwrap_or(Unit::Bytes),
                })
            }
            (Some(path), None, _) => Err(format!("file {path:?}: a relative path inside sysfs")),
            (None, Some(m), None) if !memory && !m.is_empty() => Ok(Source::Module(m)),
            _ => Err(if memory {
                "memory: {file, unit}".to_string()
            } else {
                "version: {module} or {file}".to_string()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_parses_and_every_name_fits_a_label_key() {
        let c = catalogue();
        assert!(c.vendors.len() > 10);
        let mut ids: Vec<u16> = c.vendors.iter().map(|v| v.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), c.vendors.len(), "one entry per vendor id");
        for v in &c.vendors {
            // A label name: at most 63 characters, alphanumeric at both ends.
            for key in [
                format!("gpu-{}.count", v.name),
                format!("accel-{}.count", v.name),
            ] {
                assert!(key.len() <= 63, "{key}");
            }
        }
    }

    #[test]
    fn classes_split_gpus_from_accelerators() {
        let c = catalogue();
        let kind = |v, d, class, accel| {
            c.classify(v, d, class, accel)
                .map(|k| (k.vendor.into_owned(), k.kind))
        };
        let k = |v: &str, kind: &'static str| Some((v.to_string(), kind));
        // AMD Instinct MI300X (class 1200) stays a GPU; an NVIDIA 3D controller is one.
        assert_eq!(kind(0x1002, 0x74a1, 0x120000, false), k("amd", GPU));
        assert_eq!(kind(0x10de, 0x2330, 0x030200, false), k("nvidia", GPU));
        // Gaudi 2 is an HPU, Meteor Lake's NPU an NPU: neither is a GPU.
        assert_eq!(kind(0x1da3, 0x1020, 0x120000, false), k("habana", "hpu"));
        assert_eq!(kind(0x8086, 0x7d1d, 0x120000, false), k("intel", "npu"));
        // Intel's QuickAssist (0b40) and an ASPEED BMC (0300) are neither.
        assert_eq!(kind(0x8086, 0x37c8, 0x0b4000, false), None);
        assert_eq!(kind(0x1a03, 0x2000, 0x030000, false), None);
        // An Intel class-12 part the catalogue does not list, and a vendor it does not know.
        assert_eq!(kind(0x8086, 0xffff, 0x120000, false), k("intel", UNKNOWN));
        assert_eq!(kind(0x1fc9, 0x0001, 0x120000, false), k("1fc9", UNKNOWN));
        // In the accel class, whatever its class code.
        assert_eq!(kind(0x1fc9, 0x0001, 0x118000, true), k("1fc9", UNKNOWN));
        assert_eq!(kind(0x1fc9, 0x0001, 0x118000, false), None);
    }

    /// A name for a device id and subsystem comes before the device id's own name; another
    /// subsystem gets the device id's.
    #[test]
    fn names_by_subsystem_then_by_device_id() {
        let c = Catalogue::parse(
            "- {vendor: \"10de\", name: nvidia, source: x, devices: [{kind: gpu, source: y, \
             names: {\"1db8\": A, \"1db8 10de:131d\": B, \"1db9 10de:0001\": C}}]}\n",
        )
        .unwrap();
        let e = &c.vendors[0].devices[0];
        assert_eq!(e.name(0x1db8, (0x10de, 0x131d)), Some("B"));
        assert_eq!(e.name(0x1db8, (0x10de, 0x12ab)), Some("A"));
        assert_eq!(e.name(0x1db9, (0x10de, 0x0001)), Some("C"));
        assert_eq!(e.name(0x1db9, (0x10de, 0x0002)), None);
    }

    #[test]
    fn bad_entries_are_refused_with_their_place() {
        let bad = [
            (
                "- {vendor: 1DA3, name: habana, source: x}\n",
                "entry 1 (habana): vendor: not 4 hex digits",
            ),
            (
                "- {vendor: \"1da3\", name: Habana, source: x}\n",
                "entry 1 (Habana): name: lower-case letters and digits only",
            ),
            (
                "- {vendor: \"1da3\", name: habana, source: x, devices: [{kind: hpu, source: y, memory: {file: a}}]}\n",
                "entry 1 (habana): memory file \"a\": say its unit",
            ),
            (
                "- {vendor: \"1da3\", name: habana, source: x, devices: [{kind: hpu, source: y, version: {file: ../a}, driver: h}]}\n",
                "entry 1 (habana): file \"../a\": a relative path inside sysfs",
            ),
            (
                "- {vendor: \"1da3\", name: habana, source: x, devices: [{kind: hpu, source: y, version: {file: a}}]}\n",
                "entry 1 (habana): a version file needs the entry's driver",
            ),
            (
                "- {vendor: \"1da3\", name: habana, source: x, devices: [{kind: hpu, source: y, classes: [\"1\"]}]}\n",
                "entry 1 (habana): classes: \"1\" is not 2, 4 or 6 hex digits",
            ),
            (
                "- {vendor: \"10de\", name: nvidia, source: x, devices: [{kind: gpu, source: y, names: {\"1db8 10de-131d\": V}}]}\n",
                "entry 1 (nvidia): names: \"1db8 10de-131d\" is not a device id (4 hex digits), optionally followed by a subsystem (\"1db8 10de:131d\")",
            ),
        ];
        for (text, want) in bad {
            assert_eq!(Catalogue::parse(text).unwrap_err(), want, "{text}");
        }
    }
}
