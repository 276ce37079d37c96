//! What NVML says, checked against what hardware can be: a driver that lies (a corrupted
//! answer, a wedged GPU reporting garbage, a fake library) must not become labels that pods
//! schedule on. A value out of range is refused and replaced by the same GPU's last good value
//! (none when there is none), and said with a message that names the GPU and the field but not
//! the value, so that garbage changing every scan is reported once, not every cycle.

use super::model::{NvmlGpu, NvmlScan};

/// The most memory one GPU has (the largest parts today carry 288 GB; a terabyte leaves room).
pub const MAX_GPU_MEMORY_BYTES: u64 = 1 << 40;
/// The least (no GPU NVML supports has under 64 MiB).
pub const MIN_GPU_MEMORY_BYTES: u64 = 64 << 20;
/// The most GPUs one node's NVML lists (the largest nodes carry 16; NVML itself stops at 64).
pub const MAX_GPUS: usize = 64;
/// The most MIG devices one GPU has (7 on today's parts).
pub const MAX_MIG_DEVICES: usize = 16;
/// The most NVLinks one GPU has (18 on Hopper and Blackwell).
pub const MAX_NVLINKS: u32 = 64;

fn compute_ok(c: (i32, i32)) -> bool {
    (1..=20).contains(&c.0) && (0..=9).contains(&c.1)
}

/// `535.161.08`, `470.256.02`, `580.65`: two to four digits, then one or two more groups.
pub fn driver_version_ok(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()))
        && (2..=4).contains(&parts[0].len())
}

/// `12.2`: a CUDA major between 1 and 30.
pub fn cuda_version_ok(v: &str) -> bool {
    match v.split_once('.') {
        Some((major, minor)) => {
            major.parse::<u32>().is_ok_and(|m| (1..=30).contains(&m))
                && minor.parse::<u32>().is_ok_and(|m| m <= 99)
        }
        None => false,
    }
}

/// NVML's name buffer holds 96 bytes; any text, but no control characters.
fn name_ok(n: &str) -> bool {
    !n.is_empty() && n.len() <= 96 && !n.chars().any(char::is_control)
}

/// The last good answer's GPU that `gpu` is: the same PCI address, else the same UUID.
fn same_gpu<'a>(last: Option<&'a NvmlScan>, gpu: &NvmlGpu) -> Option<&'a NvmlGpu> {
    let last = last?;
    last.gpus
        .iter()
        .find(|g| g.address.is_some() && g.address == gpu.address)
        .or_else(|| {
            last.gpus
                .iter()
                .find(|g| g.uuid.is_some() && g.uuid == gpu.uuid)
        })
}

/// Checks `scan` (an `ok` answer), replacing what is out of range with `last`'s value; returns
/// one message per refused field.
pub fn check(scan: &mut NvmlScan, last: Option<&NvmlScan>) -> Vec<String> {
    let mut refused = Vec::new();
    if let Some(v) = &scan.driver_version
        && !driver_version_ok(v)
    {
        refused.push(
            "NVML: the driver version is not plausible; its last good value is kept".to_string(),
        );
        scan.driver_version = last.and_then(|l| l.driver_version.clone());
    }
    if let Some(v) = &scan.cuda_version
        && !cuda_version_ok(v)
    {
        refused.push(
            "NVML: the CUDA version is not plausible; its last good value is kept".to_string(),
        );
        scan.cuda_version = last.and_then(|l| l.cuda_version.clone());
    }
    if scan.gpus.len() > MAX_GPUS {
        refused.push(format!(
            "NVML: {} GPUs is not plausible (at most {MAX_GPUS}); only the first {MAX_GPUS} are used",
            scan.gpus.len()
        ));
        scan.gpus.truncate(MAX_GPUS);
    }
    for gpu in &mut scan.gpus {
        let who = match &gpu.address {
            Some(a) => format!(
                "NVML GPU {} ({:04x}:{:02x}:{:02x}.{})",
                gpu.index, a.domain, a.bus, a.device, a.function
            ),
            None => format!("NVML GPU {}", gpu.index),
        };
        let before = same_gpu(last, gpu).cloned();
        let mut refuse = |field: &str, why: &str| {
            refused.push(format!(
                "{who}: {field} is not plausible ({why}); its last good value is kept"
            ));
        };
        if gpu
            .memory_bytes
            .is_some_and(|m| !(MIN_GPU_MEMORY_BYTES..=MAX_GPU_MEMORY_BYTES).contains(&m))
        {
            refuse("the total memory", "between 64 MiB and 1 TiB");
            gpu.memory_bytes = before.as_ref().and_then(|b| b.memory_bytes);
        }
        if gpu.compute.is_some_and(|c| !compute_ok(c)) {
            refuse("the compute capability", "1.0 to 20.9");
            gpu.compute = before.as_ref().and_then(|b| b.compute);
        }
        if gpu.name.as_deref().is_some_and(|n| !name_ok(n)) {
            refuse("the name", "at most 96 bytes, no control characters");
            gpu.name = before.as_ref().and_then(|b| b.name.clone());
        }
        if gpu.nvlinks_active.is_some_and(|n| n > MAX_NVLINKS) {
            refuse("the active NVLink count", "at most 64");
            gpu.nvlinks_active = before.as_ref().and_then(|b| b.nvlinks_active);
        }
        let mig_ok = gpu.mig_devices.len() <= MAX_MIG_DEVICES
            && gpu.mig_devices.iter().all(|m| {
                m.memory_size_mb <= MAX_GPU_MEMORY_BYTES >> 20
                    && m.multiprocessors <= 1024
                    && m.slices_gi <= 8
                    && m.slices_ci <= 8
                    && [
                        m.engines_copy,
                        m.engines_decoder,
                        m.engines_encoder,
                        m.engines_jpeg,
                        m.engines_ofa,
                    ]
                    .iter()
                    .all(|e| *e <= 64)
            });
        if !mig_ok {
            refuse("the MIG devices", "at most 16, each within the GPU");
            gpu.mig_devices = before
                .as_ref()
                .map(|b| b.mig_devices.clone())
                .unwrap_or_default();
        }
    }
    refused
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::nvml::NvmlStatus;
    use crate::discover::pci::PciAddress;

    fn gpu(memory: u64, compute: (i32, i32)) -> NvmlGpu {
        NvmlGpu {
            index: 0,
            address: Some(PciAddress {
                domain: 0,
                bus: 0x17,
                device: 0,
                function: 0,
            }),
            name: Some("NVIDIA H100 80GB HBM3".into()),
            uuid: Some("GPU-1".into()),
            memory_bytes: Some(memory),
            compute: Some(compute),
            ..NvmlGpu::default()
        }
    }

    fn scan(gpus: Vec<NvmlGpu>, driver: &str, cuda: &str) -> NvmlScan {
        NvmlScan {
            status: NvmlStatus::Ok,
            driver_version: Some(driver.into()),
            cuda_version: Some(cuda.into()),
            gpus,
            warnings: Vec::new(),
            lost: Vec::new(),
        }
    }

    #[test]
    fn real_answers_pass_untouched() {
        let mut s = scan(vec![gpu(85_520_809_984, (9, 0))], "535.161.08", "12.2");
        let before = s.clone();
        assert_eq!(check(&mut s, None), Vec::<String>::new());
        assert_eq!(s, before);
        for v in ["535.161.08", "470.256.02", "580.65", "390.157"] {
            assert!(driver_version_ok(v), "{v}");
        }
        for v in [
            "",
            "5",
            "535",
            "abc.1",
            "535.161.08.1",
            "1.2",
            "535..1",
            "99999.1",
        ] {
            assert!(!driver_version_ok(v), "{v}");
        }
        for v in ["12.2", "11.8", "13.0"] {
            assert!(cuda_version_ok(v), "{v}");
        }
        for v in ["0.1", "99.0", "12", "12.x"] {
            assert!(!cuda_version_ok(v), "{v}");
        }
    }

    #[test]
    fn garbage_is_refused_and_the_last_good_value_kept_with_a_message_that_does_not_change() {
        let good = scan(vec![gpu(85_520_809_984, (9, 0))], "535.161.08", "12.2");
        let mut bad = scan(
            vec![gpu(2_415_267_542_309_u64 << 20, (117, -3))],
            "x.y",
            "77.1",
        );
        let said = check(&mut bad, Some(&good));
        assert_eq!(bad, good);
        assert_eq!(
            said,
            [
                "NVML: the driver version is not plausible; its last good value is kept",
                "NVML: the CUDA version is not plausible; its last good value is kept",
                "NVML GPU 0 (0000:17:00.0): the total memory is not plausible (between 64 MiB and 1 TiB); its last good value is kept",
                "NVML GPU 0 (0000:17:00.0): the compute capability is not plausible (1.0 to 20.9); its last good value is kept",
            ]
        );
        // Another garbage value: the same words (reported once per change, not every cycle).
        let mut again = scan(vec![gpu(7, (0, 0))], "1", "0.0");
        assert_eq!(check(&mut again, Some(&good)), said);
        // No good answer yet: nothing rather than garbage.
        let mut first = scan(vec![gpu(7, (0, 0))], "535.161.08", "12.2");
        check(&mut first, None);
        assert_eq!(
            (first.gpus[0].memory_bytes, first.gpus[0].compute),
            (None, None)
        );
    }
}
