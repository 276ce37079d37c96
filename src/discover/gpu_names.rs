//! The GPU features' names and the GPU vendors, for the sources that fill the features
//! (`gpu`) and those that read them back (`health`).

pub const GPU_DEVICE: &str = "gpu.device";
pub const GPU_MIG: &str = "gpu.mig";
/// MIG profile (as NVIDIA names it, `1g.10gb+me`) -> number of MIG devices with it.
pub const GPU_MIGPROFILE: &str = "gpu.migprofile";
pub const GPU_NODE: &str = "gpu.node";
pub const GPU_DRIVER: &str = "gpu.driver";

/// The value of `health` on a GPU (or the node) without a fault.
pub const OK: &str = "ok";
/// `gpu.node` `health` when a GPU has a fault or GPUs are missing (`health`, `missing`).
pub const DEGRADED: &str = "degraded";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Vendor {
    Nvidia,
    Amd,
    Intel,
    /// A further vendor of the catalogue (`mthreads`, `hygon`, ...), by its name there.
    Other(&'static str),
}

impl Vendor {
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
            Vendor::Other(name) => name,
        }
    }
}
