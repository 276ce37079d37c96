//! Discovery: each source reads one part of the node and fills the `FeatureSet`.
//!
//! Sources never fail as a whole: what cannot be read is reported as a warning naming the path,
//! and everything else is still discovered.

use std::path::PathBuf;

use crate::config::Config;
use crate::features::FeatureSet;
use crate::pciids::PciIds;
use crate::sysfs::Sysfs;

pub mod accel;
pub mod amd;
pub mod dmi;
pub mod gpu;
mod gpu_names;
pub mod health;
pub mod intel;
pub mod kernel;
pub mod missing;
pub mod nvml;
pub mod pci;
pub mod sharing;
pub mod vgpu;
mod warnings;

pub const PCI_DEVICE: &str = "pci.device";

pub use warnings::Warnings;

/// Where and how to discover.
#[derive(Debug, Clone)]
pub struct DiscoveryOptions {
    pub sysfs_root: PathBuf,
    pub proc_root: PathBuf,
    /// A `pci.ids` file to prefer over the host's and the embedded database.
    pub pci_ids: Option<PathBuf>,
    pub config: Config,
}

/// The result of one discovery.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub features: FeatureSet,
    pub warnings: Warnings,
    /// A source the config requires that failed (`sources.nvml.enabled: true`). Everything
    /// else is still discovered; the command reports these as errors.
    pub errors: Vec<String>,
}

/// Discovers everything this node has. NVML is asked only when PCI shows an NVIDIA function
/// (or PCI could not be read), so AMD and Intel nodes never load it.
pub fn discover(opts: &DiscoveryOptions, nvml: &mut dyn nvml::NvmlProbe) -> Discovery {
    discover_with(opts, nvml, &mut sharing::SharingSource::new())
}

/// As `discover`, with the sharing configuration that was last read successfully: a daemon
/// keeps one `SharingSource` across scans so that a sharing file that turns bad keeps its
/// previous value in force (reported as a warning) instead of dropping `gpu.sharing`.
pub fn discover_with(
    opts: &DiscoveryOptions,
    nvml: &mut dyn nvml::NvmlProbe,
    sharing_source: &mut sharing::SharingSource,
) -> Discovery {
    let sysfs = Sysfs::new(&opts.sysfs_root);
    let proc = Sysfs::new(&opts.proc_root);
    let mut warnings = Warnings::new();
    let mut features = FeatureSet::default();

    let (devices, unreadable) = pci::scan_counted(&sysfs, &mut warnings);
    let wanted = pci::vendors(&devices);
    let ids = PciIds::select(opts.pci_ids.as_deref(), &wanted).unwrap_or_else(|e| {
        warnings.push(format!(
            "cannot read PCI ID database {e}; using the embedded one"
        ));
        PciIds::embedded(&wanted)
    });

    let nvml_scan = if devices.is_empty() || devices.iter().any(|d| d.vendor_id == 0x10de) {
        nvml.scan()
    } else {
        nvml::NvmlScan::unavailable("no NVIDIA PCI function")
    };
    let mut errors = Vec::new();
    let nvidia = devices.iter().any(|d| d.vendor_id == 0x10de);
    // Required where NVIDIA hardware is (or PCI could not be read): a fleet-wide config does
    // not make AMD nodes fail.
    let required = opts.config.sources.nvml.enabled == crate::config::NvmlEnabled::True
        && (nvidia || devices.is_empty());
    match &nvml_scan.status {
        nvml::NvmlStatus::Error(m) if required => errors.push(format!(
            "NVML is required (sources.nvml.enabled: true) and failed: {m}"
        )),
        nvml::NvmlStatus::Error(m) | nvml::NvmlStatus::Stale(m) => {
            warnings.push(format!("NVML: {m}"))
        }
        nvml::NvmlStatus::Unavailable(m) if m == nvml::DISABLED => {}
        nvml::NvmlStatus::Unavailable(m) if required => errors.push(format!(
            "NVML is required (sources.nvml.enabled: true) but unavailable: {m}"
        )),
        nvml::NvmlStatus::Unavailable(m) if nvidia => warnings.push(format!(
            "NVML unavailable ({m}); the NVIDIA GPUs are labelled from sysfs alone"
        )),
        _ => {}
    }
    warnings.extend(nvml_scan.warnings.iter().cloned());
    let accel_class = accel::accel_class(&sysfs, &mut warnings);
    let classes = accel::classify(&devices, &accel_class);
    accel::discover(
        &sysfs,
        &devices,
        &classes,
        &ids,
        &accel_class,
        &mut features,
        &mut warnings,
    );
    let kfd = gpu::discover(
        &sysfs,
        gpu::Pci {
            devices: &devices,
            classes: &classes,
            ids: &ids,
        },
        &nvml_scan,
        &opts.config.sources.health,
        &mut features,
        &mut warnings,
    );

    // The hardware's evidence of GPUs missing, in order of trust (src/discover/missing.rs);
    // the table's comes first, once DMI is read.
    let hardware: Vec<missing::Expectation> = [
        missing::nvswitch(&devices, &features),
        missing::nvlink(&nvml_scan, &devices, &features),
        missing::kfd(&kfd, &devices, &features),
    ]
    .into_iter()
    .flatten()
    .collect();

    // The feature exists even with no device, so that a snapshot says "scanned, found nothing".
    features
        .instances
        .entry(PCI_DEVICE.to_string())
        .or_default()
        .elements
        .extend(devices.into_iter().map(|d| d.into_instance(&ids)));

    sharing::discover(
        sharing_source,
        &opts.config.sources.sharing,
        &mut features,
        &mut warnings,
    );
    kernel::discover(&proc, &mut features, &mut warnings);
    dmi::discover(&sysfs, &mut features, &mut warnings);
    let keys = missing::TableKeys::read(&sysfs, &opts.config.sources.health.instance_type);
    let table = missing::table(
        &opts.config.sources.health.expected_gpus,
        missing::shipped_table(),
        &keys,
    );
    let evidence: Vec<missing::Expectation> = table.into_iter().chain(hardware).collect();
    missing::apply(&mut features, &evidence, unreadable);

    Discovery {
        features,
        warnings,
        errors,
    }
}
