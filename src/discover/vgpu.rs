//! NVIDIA vGPU guests, recognised from PCI configuration space (`<device>/config`), as GPU
//! Feature Discovery's `internal/vgpu` package does it (NVIDIA/k8s-device-plugin).
//!
//! A vGPU guest's GPU carries a vendor-specific capability (id `0x09`) whose bytes 3 and 4 are
//! the signature `VF`; from byte 5 on it holds records (`id`, `length`, data). Record 0 is the
//! host's driver: 10 bytes of version (`460.16`) then 10 of branch (`r460_00`), NUL-padded.
//!
//! The capability list lives past the 64-byte header, and Linux shows an unprivileged reader
//! only those 64 bytes of `config`: that is reported as [`ConfigSpace::HeaderOnly`] ("cannot
//! tell"), never read as "no vGPU". GFD itself refuses such a device the same way (it asks for
//! privileged mode). Unlike GFD, nothing here indexes past the bytes read: a looping or
//! truncated list, or a zero-length record, ends the walk.

use std::io::Read;
use std::path::Path;

/// PCI status register (byte 6), bit 4: a capability list exists.
const STATUS: usize = 0x06;
const STATUS_CAP_LIST: u8 = 0x10;
/// Byte holding the offset of the first capability.
const CAP_POINTER: usize = 0x34;
const CAP_VENDOR_SPECIFIC: u8 = 0x09;
/// A capability's header: id, next pointer, length.
const CAP_HEADER: usize = 3;
/// The standard (non-extended) configuration space, where the capability list lives.
const STANDARD_SIZE: usize = 256;
/// vGPU capability: where its records start, and the host driver record's field sizes.
const RECORDS_START: usize = 5;
const VERSION_LEN: usize = 10;
const BRANCH_LEN: usize = 10;
/// More than the 4 KiB of PCIe extended configuration space is never read.
const MAX_CONFIG: u64 = 4096;

/// What a GPU's configuration space says about vGPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSpace {
    /// Fewer than 256 bytes were readable (an unprivileged reader sees 64): the capability list
    /// cannot be reached, so whether this is a vGPU is unknown.
    HeaderOnly { len: usize },
    /// The capability list was read and has no vGPU capability.
    NotVgpu,
    /// A vGPU guest; the host driver record, when it has one.
    Vgpu(Option<HostDriver>),
}

/// The vGPU manager's driver on the hypervisor host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostDriver {
    pub version: String,
    pub branch: String,
}

impl ConfigSpace {
    /// `gpu.device`'s `vgpu_capability`: `present`, `absent`, or `unknown`.
    pub fn capability(&self) -> &'static str {
        match self {
            ConfigSpace::HeaderOnly { .. } => "unknown",
            ConfigSpace::NotVgpu => "absent",
            ConfigSpace::Vgpu(_) => "present",
        }
    }
}

/// The first vendor-specific capability in the standard capability list (its length byte's worth,
/// never less than its 3-byte header), bounded by what was read. `Err(len)` when the list cannot
/// be reached.
pub fn vendor_specific_capability(config: &[u8]) -> Result<Option<&[u8]>, usize> {
    if config.len() < STANDARD_SIZE {
        return Err(config.len());
    }
    if config[STATUS] & STATUS_CAP_LIST == 0 {
        return Ok(None);
    }
    let mut visited = [false; STANDARD_SIZE];
    let mut pos = config[CAP_POINTER] as usize;
    // `pos` is a byte, so always inside the 256 bytes; its id, next and length bytes may not be.
    while pos != 0 && pos + 2 < STANDARD_SIZE && !visited[pos] {
        visited[pos] = true;
        let (id, next, len) = (config[pos], config[pos + 1], config[pos + 2] as usize);
        if id == 0xff {
            break;
        }
        if id == CAP_VENDOR_SPECIFIC {
            // A length byte below 3 does not even cover the capability's own header (id, next,
            // length); the header is still returned, never an empty slice.
            let end = (pos + len.max(CAP_HEADER)).min(config.len());
            return Ok(Some(&config[pos..end]));
        }
        pos = next as usize;
    }
    Ok(None)
}

/// Whether a vendor-specific capability is NVIDIA's vGPU one (signature `VF`).
pub fn is_vgpu_capability(cap: &[u8]) -> bool {
    cap.len() >= 5 && cap[3] == b'V' && cap[4] == b'F'
}

/// The host driver record of a vGPU capability, if it has a whole one.
pub fn host_driver(cap: &[u8]) -> Option<HostDriver> {
    let mut pos = RECORDS_START;
    loop {
        let record = *cap.get(pos)?;
        if record == 0 {
            break;
        }
        let len = *cap.get(pos + 1)? as usize;
        if len == 0 {
            return None;
        }
        pos += len;
    }
    let data = cap.get(pos + 2..pos + 2 + VERSION_LEN + BRANCH_LEN)?;
    let text = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .trim_matches('\0')
            .trim()
            .to_string()
    };
    Some(HostDriver {
        version: text(&data[..VERSION_LEN]),
        branch: text(&data[VERSION_LEN..]),
    })
}

/// Parses configuration space bytes.
pub fn parse(config: &[u8]) -> ConfigSpace {
    match vendor_specific_capability(config) {
        Err(len) => ConfigSpace::HeaderOnly { len },
        Ok(Some(cap)) if is_vgpu_capability(cap) => ConfigSpace::Vgpu(host_driver(cap)),
        Ok(_) => ConfigSpace::NotVgpu,
    }
}

/// Reads `<device>/config`. `Ok(None)` when there is no such file.
pub fn read(device_dir: &Path) -> Result<Option<ConfigSpace>, String> {
    let path = device_dir.join("config");
    let file = match crate::sysfs::open_nonblocking(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut buf = Vec::with_capacity(STANDARD_SIZE);
    file.take(MAX_CONFIG)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(parse(&buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GFD's `NewMockNvidiaPCI` configuration spaces (internal/vgpu/pciutil.go), kept as files.
    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/pciconfig")
                .join(name),
        )
        .unwrap()
    }

    // Ported from GFD's TestGetVendorSpecificCapability and TestIsVGPUDevice.
    #[test]
    fn vendor_specific_capabilities_of_gfds_mock_devices() {
        let passthrough = fixture("gfd-passthrough-10de-118a.config");
        let vgpu = fixture("gfd-vgpu-guest-10de-1eb8.config");
        for config in [&passthrough, &vgpu] {
            assert_eq!(u16::from_le_bytes([config[0], config[1]]), 0x10de);
        }
        let cap = vendor_specific_capability(&passthrough).unwrap().unwrap();
        assert_eq!(cap.len(), 20);
        assert!(!is_vgpu_capability(cap));
        let cap = vendor_specific_capability(&vgpu).unwrap().unwrap();
        assert_eq!(cap.len(), 27);
        assert_eq!(cap[0], 9);
        assert!(is_vgpu_capability(cap));
    }

    // Ported from GFD's TestVGPUGetInfo.
    #[test]
    fn host_driver_of_gfds_mock_vgpu() {
        let vgpu = fixture("gfd-vgpu-guest-10de-1eb8.config");
        assert_eq!(vgpu.len(), 256);
        assert_eq!(
            parse(&vgpu),
            ConfigSpace::Vgpu(Some(HostDriver {
                version: "460.16".into(),
                branch: "r460_00".into(),
            }))
        );
        assert_eq!(
            parse(&fixture("gfd-passthrough-10de-118a.config")),
            ConfigSpace::NotVgpu
        );
    }

    #[test]
    fn an_unprivileged_reader_cannot_tell() {
        let vgpu = fixture("gfd-vgpu-guest-10de-1eb8.config");
        assert_eq!(parse(&vgpu[..64]), ConfigSpace::HeaderOnly { len: 64 });
        assert_eq!(parse(&[]), ConfigSpace::HeaderOnly { len: 0 });
        assert_eq!(parse(&vgpu[..64]).capability(), "unknown");
    }

    #[test]
    fn malformed_lists_end_the_walk_without_panicking() {
        // A list that loops back on itself.
        let mut c = vec![0u8; 256];
        c[STATUS] = STATUS_CAP_LIST;
        c[CAP_POINTER] = 0x40;
        c[0x40] = 0x01;
        c[0x41] = 0x40;
        assert_eq!(parse(&c), ConfigSpace::NotVgpu);
        // A capability at the very end, its length running past the buffer.
        c[0x41] = 0xfd;
        c[0xfd] = CAP_VENDOR_SPECIFIC;
        c[0xff] = 0xff;
        assert_eq!(parse(&c), ConfigSpace::NotVgpu);
        c[0x41] = 0xf0;
        c[0xf0] = CAP_VENDOR_SPECIFIC;
        c[0xf2] = 0xff;
        c[0xf3] = b'V';
        c[0xf4] = b'F';
        // Records run off the end: a vGPU without host driver information.
        c[0xf5] = 1;
        c[0xf6] = 0;
        assert_eq!(parse(&c), ConfigSpace::Vgpu(None));
        c[0xf6] = 3;
        assert_eq!(parse(&c), ConfigSpace::Vgpu(None));
        // A vendor-specific capability whose length byte does not cover its header: found
        // (its header is returned), and not a vGPU one.
        c[0xf2] = 0;
        assert_eq!(vendor_specific_capability(&c), Ok(Some(&c[0xf0..0xf3])));
        assert_eq!(parse(&c), ConfigSpace::NotVgpu);
        // No capability list at all.
        c[STATUS] = 0;
        assert_eq!(parse(&c), ConfigSpace::NotVgpu);
    }

    #[test]
    fn reading_a_missing_file_is_none() {
        assert_eq!(read(Path::new("/nonexistent")), Ok(None));
    }
}
