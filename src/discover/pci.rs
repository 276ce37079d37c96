//! PCI functions from `<sysfs-root>/bus/pci/devices`: NFD's `pci.device` attributes with NFD's
//! normalisation, plus this project's extensions (docs/catalog.md#feature-pci-device).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::features::{Attributes, Instance, Text};
use crate::pciids::{PciIds, Wanted};
use crate::sysfs::{DirHandle, Sysfs, SysfsError, open_dir_at, short};

use super::warnings::Warnings;

/// NFD's mandatory attributes: a function lacking one is skipped (as NFD does).
pub const MANDATORY: [&str; 5] = [
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
];

/// NFD's optional attributes, kept verbatim (trimmed, `0x` stripped) as NFD does.
const NFD_OPTIONAL: [&str; 3] = [
    "sriov_totalvfs",
    "iommu_group/type",
    "iommu/intel-iommu/version",
];

/// The entries of a device directory that the scan reads (first path components).
const DEVICE_ENTRIES: &[&str] = &[
    "class",
    "vendor",
    "device",
    "subsystem_vendor",
    "subsystem_device",
    "sriov_totalvfs",
    "iommu_group",
    "iommu",
    "revision",
    "numa_node",
    "driver",
    "sriov_numvfs",
    "physfn",
    "current_link_speed",
    "max_link_speed",
    "current_link_width",
    "max_link_width",
];

/// `0000:3b:00.0` split into numbers, for ordering; any domain width.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl PciAddress {
    pub fn parse(s: &str) -> Option<PciAddress> {
        let (domain, rest) = s.split_once(':')?;
        let (bus, rest) = rest.split_once(':')?;
        let (device, function) = rest.split_once('.')?;
        let hex = |t: &str, max: usize| {
            (!t.is_empty() && t.len() <= max && t.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(t, 16).ok())
                .flatten()
        };
        let function = hex(function, 1)?;
        let device = hex(device, 2)?;
        if function > 7 || device > 0x1f {
            return None;
        }
        Some(PciAddress {
            domain: hex(domain, 8)?,
            bus: hex(bus, 2)? as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

/// One PCI function as read from sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// The directory name, e.g. `0000:3b:00.0` (kept as the kernel wrote it).
    pub address: String,
    pub sort_key: PciAddress,
    /// `<root>/bus/pci/devices/<address>`.
    pub path: PathBuf,
    pub vendor_id: u16,
    pub device_id: u16,
    /// `(subsystem_vendor, subsystem_device)`: the board the chip sits on.
    pub subsystem: (u16, u16),
    /// The full 24-bit class code (`0x030200`); NFD's `class` attribute is its first 4 hex digits.
    pub class_code: u32,
    /// The `pci.device` attributes, without the names from the ID database.
    pub attributes: Attributes,
}

impl PciDevice {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(Text::as_str)
    }

    pub fn base_class(&self) -> u8 {
        (self.class_code >> 16) as u8
    }

    pub fn driver(&self) -> Option<&str> {
        self.attr("driver")
    }

    /// The `pci.device` instance, with names from `ids` (consumes the device: big machines have
    /// thousands of functions, and their attributes are not copied).
    pub fn into_instance(self, ids: &PciIds) -> Instance {
        let mut attributes = self.attributes;
        if let Some(n) = ids.vendor_name(self.vendor_id) {
            attributes.insert(Text::const_new("vendor_name"), n.into());
        }
        if let Some(n) = ids.device_name(self.vendor_id, self.device_id) {
            attributes.insert(Text::const_new("device_name"), n.into());
        }
        attributes.shrink_to_len_plus(0);
        Instance { attributes }
    }
}

/// Scans every PCI function. Problems are reported in `warnings`; a broken function never stops
/// the others, and an unreadable `bus/pci/devices` yields no devices and one warning.
pub fn scan(sysfs: &Sysfs, warnings: &mut Warnings) -> Vec<PciDevice> {
    scan_counted(sysfs, warnings).0
}

/// As [`scan`], with how many listed functions could not be read (skipped): any of them may be
/// a GPU, which the `missing` check must not count as gone.
pub fn scan_counted(sysfs: &Sysfs, warnings: &mut Warnings) -> (Vec<PciDevice>, usize) {
    let dir = sysfs.path("bus/pci/devices");
    let listed = match sysfs.open_dir(&dir, &[]) {
        Ok(parent) => parent.names().map(|names| (parent, names)),
        Err(e) => Err(e),
    };
    let (parent, mut names) = match listed {
        Ok(l) => l,
        Err(SysfsError::Invalid { reason, .. }) if reason == "does not exist" => {
            warnings.push(format!(
                "{}: does not exist; no PCI devices discovered",
                dir.display()
            ));
            return (Vec::new(), 0);
        }
        Err(e) => {
            warnings.push(format!("cannot list PCI devices: {e}"));
            return (Vec::new(), 0);
        }
    };
    // The kernel never names a device with a dot: such an entry is a recorded tree's
    // placeholder (git keeps no empty directory), not a device.
    names.retain(|n| !n.starts_with('.'));
    // Directory order is the filesystem's: sort, so that warnings come in the same order on
    // every run.
    names.sort_unstable();
    // Consumed in place: on a big machine the devices are most of the scan's memory, and a
    // second vector of them would be its peak.
    let mut skipped = 0;
    let mut devices: Vec<PciDevice> = read_all(&parent, &names)
        .into_iter()
        .filter_map(|result| match result {
            Ok((d, problems)) => {
                for e in problems {
                    warnings.push(format!("{e}; attribute left out"));
                }
                Some(d)
            }
            Err(e) => {
                warnings.push(format!("{e}; PCI device skipped"));
                skipped += 1;
                None
            }
        })
        .collect();
    // Unstable: the keys are unique (one directory per address), and it needs no buffer.
    devices.sort_unstable_by_key(|d| d.sort_key);
    (devices, skipped)
}

type DeviceResult = Result<(PciDevice, Vec<SysfsError>), SysfsError>;

/// Reads every device, in the order of `names`. Big machines are read on a few threads: the
/// scan is syscall-bound, and a 500-function HGX box is the common case, not the exception.
fn read_all(parent: &DirHandle, names: &[String]) -> Vec<DeviceResult> {
    const PER_THREAD_MIN: usize = 128;
    let threads = std::env::var("GPU_LABELER_SCAN_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(8)
        .min(names.len().div_ceil(PER_THREAD_MIN))
        .max(1);
    if threads == 1 {
        return names.iter().map(|name| read_device(parent, name)).collect();
    }
    // Devices are handed out one at a time (some have many more attributes than others), and
    // the calling thread works too. Each result goes straight to its slot: no per-thread
    // vectors growing by doubling, no merge.
    let slots: Vec<OnceLock<DeviceResult>> = names.iter().map(|_| OnceLock::new()).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let (Some(name), Some(slot)) = (names.get(i), slots.get(i)) else {
                break;
            };
            let _ = slot.set(read_device(parent, name));
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        work();
        for h in helpers {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
    });
    // Every index below `names.len()` was taken by exactly one thread, which filled its slot.
    slots.into_iter().filter_map(OnceLock::into_inner).collect()
}

/// The vendor and device ids present, for reading only what is needed of a `pci.ids` file.
pub fn vendors(devices: &[PciDevice]) -> Wanted {
    let mut wanted = Wanted::new();
    for d in devices {
        wanted.entry(d.vendor_id).or_default().insert(d.device_id);
    }
    wanted
}

/// A device, or why it was skipped; with the optional attributes that could not be read.
fn read_device(parent: &DirHandle, name: &str) -> Result<(PciDevice, Vec<SysfsError>), SysfsError> {
    let path = &parent.path().join(name);
    let sort_key = PciAddress::parse(name)
        .ok_or_else(|| SysfsError::invalid(path, "not a PCI address (dddd:bb:dd.f)"))?;
    let dir = open_dir_at(parent.fd(), Path::new(name), path, DEVICE_ENTRIES)?;

    // Every attribute below fits without the vector growing; it gives back the rest at the end.
    let mut attributes = Attributes::with_capacity(MANDATORY.len() + NFD_OPTIONAL.len() + 10);
    let mut ids = [0u32; 5];
    let mut class_digits = 0;
    for (i, attr) in MANDATORY.iter().enumerate() {
        let file = path.join(attr);
        let raw = dir.read(attr)?.ok_or_else(|| {
            SysfsError::invalid(
                path,
                format!("no `{attr}` attribute (NFD needs class, vendor, device, subsystem_vendor, subsystem_device)"),
            )
        })?;
        let id = parse_id(attr, &raw).map_err(|reason| SysfsError::invalid(&file, reason))?;
        ids[i] = id.id;
        if i == 0 {
            class_digits = id.digits;
        }
        attributes.insert(Text::const_new(attr), id.value.into());
    }
    // A 4-digit class file lacks the programming interface byte.
    let class_code = if class_digits == 4 {
        ids[0] << 8
    } else {
        ids[0]
    };

    let mut problems = Vec::new();
    let mut optional = |key: &'static str, value: Result<Option<String>, SysfsError>| match value {
        Ok(Some(v)) => {
            attributes.insert(Text::const_new(key), v.into());
        }
        Ok(None) => {}
        Err(e) => problems.push(e),
    };
    for attr in NFD_OPTIONAL {
        optional(
            attr,
            dir.read(attr).map(|v| v.map(|v| nfd_normalise(attr, &v))),
        );
    }
    optional("address", Ok(Some(name.to_string())));
    optional("revision", read_hex_byte(&dir, "revision"));
    optional("numa_node", read_numa(&dir, "numa_node"));
    optional("driver", dir.link_name("driver"));
    optional(
        "sriov_numvfs",
        dir.read_u64("sriov_numvfs")
            .map(|v| v.map(|n| n.to_string())),
    );
    optional("is_vf", Ok(Some(dir.has("physfn").to_string())));
    for (key, file) in [
        ("link_speed", "current_link_speed"),
        ("max_link_speed", "max_link_speed"),
    ] {
        optional(key, read_link_speed(&dir, file));
    }
    for (key, file) in [
        ("link_width", "current_link_width"),
        ("max_link_width", "max_link_width"),
    ] {
        optional(key, dir.read_u64(file).map(|v| v.map(|n| n.to_string())));
    }

    // Room for the two names `into_instance` adds.
    attributes.shrink_to_len_plus(2);
    let device = PciDevice {
        address: name.to_string(),
        sort_key,
        path: path.to_path_buf(),
        vendor_id: ids[1] as u16,
        device_id: ids[2] as u16,
        subsystem: (ids[3] as u16, ids[4] as u16),
        class_code,
        attributes,
    };
    Ok((device, problems))
}

/// NFD's normalisation: strip `0x`, trim, and keep the first 4 hex digits of `class`.
pub(crate) fn nfd_normalise(attr: &str, raw: &str) -> String {
    let v = raw.strip_prefix("0x").unwrap_or(raw).trim();
    if attr == "class" && v.len() > 4 {
        v.get(..4).unwrap_or(v).to_string()
    } else {
        v.to_string()
    }
}

fn raw_hex(raw: &str) -> &str {
    raw.strip_prefix("0x").unwrap_or(raw).trim()
}

/// A mandatory id attribute (`class`, `vendor`, `device`, `subsystem_*`), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PciId {
    /// NFD's attribute value (normalised, lower case).
    pub value: String,
    /// The number the hex digits spell.
    pub id: u32,
    /// How many hex digits the file had (`class` has 4 or 6).
    pub digits: usize,
}

/// Parses a mandatory id attribute: 4 hex digits (`class`: 4 to 6), `0x` optional. The error is
/// the reason, for a message that names the file.
pub(crate) fn parse_id(attr: &str, raw: &str) -> Result<PciId, String> {
    let hex = raw_hex(raw);
    let digits_ok = match attr {
        "class" => (4..=6).contains(&hex.len()),
        _ => hex.len() == 4,
    };
    if !digits_ok || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("not a hex id: {:?}", short(raw)));
    }
    Ok(PciId {
        value: nfd_normalise(attr, raw).to_ascii_lowercase(),
        id: u32::from_str_radix(hex, 16).unwrap_or_default(),
        digits: hex.len(),
    })
}

fn read_hex_byte(dir: &DirHandle, name: &str) -> Result<Option<String>, SysfsError> {
    let Some(raw) = dir.read(name)? else {
        return Ok(None);
    };
    parse_hex_byte(&raw)
        .map(Some)
        .map_err(|reason| SysfsError::invalid(&dir.path().join(name), reason))
}

/// `0xa1` -> `a1`: one byte in hex, two lower-case digits.
pub(crate) fn parse_hex_byte(raw: &str) -> Result<String, String> {
    let v = raw_hex(raw);
    if v.is_empty() || v.len() > 2 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("not a hex byte: {:?}", short(raw)));
    }
    Ok(format!("{:02x}", u8::from_str_radix(v, 16).unwrap_or(0)))
}

fn read_numa(dir: &DirHandle, name: &str) -> Result<Option<String>, SysfsError> {
    let Some(raw) = dir.read(name)? else {
        return Ok(None);
    };
    parse_numa(&raw).map_err(|reason| SysfsError::invalid(&dir.path().join(name), reason))
}

/// A `numa_node` value; `-1` (no NUMA affinity) is left out: absence means unknown.
pub(crate) fn parse_numa(raw: &str) -> Result<Option<String>, String> {
    match raw.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(Some(n.to_string())),
        Ok(_) => Ok(None),
        Err(_) => Err(format!("not a number: {:?}", short(raw))),
    }
}

fn read_link_speed(dir: &DirHandle, name: &str) -> Result<Option<String>, SysfsError> {
    let Some(raw) = dir.read(name)? else {
        return Ok(None);
    };
    parse_link_speed(&raw).map_err(|reason| SysfsError::invalid(&dir.path().join(name), reason))
}

/// `16.0 GT/s PCIe` -> `16.0`; older kernels write `8 GT/s` -> `8.0`. `Unknown` is left out.
pub(crate) fn parse_link_speed(raw: &str) -> Result<Option<String>, String> {
    if raw.starts_with("Unknown") {
        return Ok(None);
    }
    let first = raw.split_whitespace().next().unwrap_or_default();
    match first.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Some(format!("{v:.1}"))),
        _ => Err(format!("not a link speed: {:?}", short(raw))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_of_any_domain_width_parse_and_order() {
        let mut v: Vec<_> = [
            "10000:00:02.0",
            "0000:3b:00.0",
            "c941:00:02.0",
            "0001:00:00.0",
        ]
        .iter()
        .map(|s| PciAddress::parse(s).unwrap())
        .collect();
        v.sort();
        assert_eq!(
            v.iter().map(|a| a.domain).collect::<Vec<_>>(),
            vec![0, 1, 0xc941, 0x10000]
        );
        assert_eq!(PciAddress::parse("0000:3b:00"), None);
        assert_eq!(PciAddress::parse("0000:3b:20.0"), None);
        assert_eq!(PciAddress::parse("0000:3b:00.8"), None);
        assert_eq!(PciAddress::parse("zz:3b:00.0"), None);
    }

    #[test]
    fn nfd_normalisation() {
        assert_eq!(nfd_normalise("class", "0x030200"), "0302");
        assert_eq!(nfd_normalise("vendor", "0x10de"), "10de");
        assert_eq!(nfd_normalise("sriov_totalvfs", "16"), "16");
    }
}
