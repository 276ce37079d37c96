//! GPU health through NVML (docs/health.md): XID events watched by a thread on an event set
//! kept open for the life of NVML's child, ECC and row-remapping counts, NVLink and fabric
//! state, thermal and power slowdowns; each GPU's faults as `NvmlGpu.faults`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use super::super::pci::PciAddress;
use super::calls::{FABRIC_STATE_COMPLETED, fabric_info, optional};
use super::model::*;

/// How long one `nvmlEventSetWait` may block the XID thread: its stop flag is looked at this
/// often, and a driver that answers errors is asked again no sooner.
pub(super) const XID_WAIT_MS: u32 = 500;

/// How often the XID event thread looks for GPUs it has not registered yet.
pub(super) const XID_REGISTER_EVERY: Duration = Duration::from_secs(5);

/// The longest wait before a failed XID registration is asked again.
pub(super) const XID_REGISTER_MAX: Duration = Duration::from_secs(300);

/// How long after its `tries`-th failure an XID registration is asked again:
/// `XID_REGISTER_EVERY`, doubling with each failure, at most `XID_REGISTER_MAX` (a driver may
/// fail it for a while, e.g. `NVML_ERROR_UNKNOWN` while the GPU comes up).
pub(super) fn xid_register_backoff(tries: u32) -> Duration {
    XID_REGISTER_EVERY
        .saturating_mul(1 << tries.saturating_sub(1).min(16))
        .min(XID_REGISTER_MAX)
}

/// A GPU whose XID registration failed: how often, the last error, when to ask again.
pub(super) struct FailedRegistration {
    pub(super) tries: u32,
    pub(super) error: u32,
    pub(super) next: Instant,
}

/// `nvmlEventTypeXidCriticalError`.
pub(super) const EVENT_XID: u64 = 0x8;
/// `NVML_ERROR_NOT_SUPPORTED`.
pub(super) const NVML_NOT_SUPPORTED: u32 = 3;
/// `NVML_ERROR_TIMEOUT`.
pub(super) const NVML_TIMEOUT: u32 = 10;

/// The clocks event reasons that are a fault (`thermal`), as nvidia-smi lists them; idle,
/// applications clocks, the software power cap, sync boost and the display clock are not.
pub(super) const SLOWDOWNS: [(u64, &str); 4] = [
    (0x8, "hw-slowdown"),
    (0x40, "hw-thermal-slowdown"),
    (0x80, "hw-power-brake-slowdown"),
    (0x20, "sw-thermal-slowdown"),
];

/// One critical XID as the event thread saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Seen {
    pub(super) at: Instant,
    /// A scan reported it: from now on it is reported only while within `clear_after`.
    pub(super) reported: bool,
}

/// What the XID event thread records: the critical XIDs by GPU (`gpu_key`) and XID, and its
/// own warnings for the next scan.
#[derive(Debug, Default)]
pub(super) struct XidLog {
    pub(super) seen: HashMap<String, BTreeMap<u32, Seen>>,
    pub(super) notes: Vec<String>,
}

/// What the health checks keep between scans of one process.
#[derive(Debug, Default)]
pub(super) struct HealthTracker {
    /// The NVLinks seen active so far, by GPU: one down now is a fault.
    pub(super) ever_up: HashMap<String, BTreeSet<u32>>,
    pub(super) xids: Arc<Mutex<XidLog>>,
    pub(super) stop: Arc<AtomicBool>,
    /// Warnings said already (a check this driver cannot do is said once).
    pub(super) said: BTreeSet<String>,
    /// GPUs' PCI addresses by NVML index, from earlier scans (for `lost`).
    pub(super) addresses: HashMap<u32, PciAddress>,
    /// GPUs NVML failed to answer for, by index: the warning said, and when it last failed.
    pub(super) failing: HashMap<u32, (String, Instant)>,
}

impl HealthTracker {
    pub(super) fn log(&self) -> std::sync::MutexGuard<'_, XidLog> {
        self.xids.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log().notes)
    }

    /// Whether GPU `index` failing with `message` is news: not when it failed with the same
    /// message less than `hold` ago, so that a GPU lost and back every second is said lost
    /// once, as its `lost` fault is held (`sources.health.clearAfter`), not every scan.
    pub(super) fn failing_anew(&mut self, index: u32, message: &str, hold: Duration) -> bool {
        let now = Instant::now();
        let anew = !self
            .failing
            .get(&index)
            .is_some_and(|(said, at)| said == message && now.saturating_duration_since(*at) < hold);
        self.failing.insert(index, (message.to_string(), now));
        anew
    }

    /// `message` once for the life of the process, with the next scan's warnings (about the
    /// driver, not one GPU).
    pub(super) fn once(&mut self, message: String) {
        if self.said.insert(message.clone()) {
            self.log().notes.push(message);
        }
    }

    /// Starts the thread that keeps an NVML event set open for the life of the process and
    /// records the critical XIDs it delivers.
    pub(super) fn watch_xids(&mut self, nvml: &'static Nvml, critical: Vec<u32>) {
        let log = self.xids.clone();
        let stop = self.stop.clone();
        let started = std::thread::Builder::new()
            .name("nvml-xid".into())
            .spawn(move || watch_xids(nvml, &critical, &log, &stop));
        if let Err(e) = started {
            self.log().notes.push(format!(
                "GPU health: cannot start the XID event thread: {e}"
            ));
        }
    }
}

/// A GPU's key in the health state: its UUID, else its index.
pub(super) fn gpu_key(index: u32, uuid: Option<&str>) -> String {
    uuid.map_or_else(|| format!("#{index}"), str::to_string)
}

/// The error of a return code that is not `NVML_SUCCESS`.
pub(super) fn nvml_error(rc: u32) -> NvmlError {
    nvml_wrapper::error::nvml_try(rc)
        .err()
        .unwrap_or(NvmlError::Unknown)
}

pub(super) fn symbol_missing(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_)
    )
}

/// The XID event thread: one event set for every GPU that supports critical XID events,
/// waited on `XID_WAIT_MS` at a time until `stop`. nvml-wrapper's `EventSet` borrows its
/// `Nvml` and has no v1 wait, so the library's own symbols are used: `nvmlEventSetWait_v2`,
/// else the `nvmlEventSetWait` of drivers before R450.
pub(super) fn watch_xids(
    nvml: &'static Nvml,
    critical: &[u32],
    log: &Mutex<XidLog>,
    stop: &AtomicBool,
) {
    let note = |m: String| log.lock().unwrap_or_else(|e| e.into_inner()).notes.push(m);
    let lib = nvml.lib();
    let (Ok(create), Ok(register), Ok(free)) = (
        lib.nvmlEventSetCreate.as_ref(),
        lib.nvmlDeviceRegisterEvents.as_ref(),
        lib.nvmlEventSetFree.as_ref(),
    ) else {
        note("GPU health: this driver has no NVML events: the xid check is skipped".into());
        return;
    };
    let Ok(wait) = lib
        .nvmlEventSetWait_v2
        .as_ref()
        .or(lib.nvmlEventSetWait.as_ref())
    else {
        note("GPU health: this driver has no nvmlEventSetWait: the xid check is skipped".into());
        return;
    };
    let supported = lib.nvmlDeviceGetSupportedEventTypes.as_ref().ok();
    // SAFETY: the symbols come from the loaded library with nvml.h's signatures (bindgen); the
    // `Nvml` is never dropped, so device handles stay valid; out-parameters are zeroed locals
    // of the named types (the v2 `nvmlEventData_t`, larger than the v1 one).
    unsafe {
        let mut set: nvml_wrapper_sys::bindings::nvmlEventSet_t = std::ptr::null_mut();
        let rc = create(&mut set);
        if rc != 0 {
            note(format!(
                "GPU health: cannot create an NVML event set ({}): the xid check is skipped",
                nvml_error(rc)
            ));
            return;
        }
        // Registered GPUs by handle, and the handles that cannot be (no XID events): looked at
        // again every `XID_REGISTER_EVERY`, so that a GPU NVML starts listing while the child
        // runs (back after a reset, hot-plugged) is watched too. A registration that failed is
        // asked again with backoff (`xid_register_backoff`), each failure said once per GPU
        // per change of error: until it succeeds, that GPU's XIDs are not seen.
        let mut keys: HashMap<usize, String> = HashMap::new();
        let mut refused: HashSet<usize> = HashSet::new();
        let mut failed: HashMap<usize, FailedRegistration> = HashMap::new();
        let mut register_new = |keys: &mut HashMap<usize, String>| {
            let now = Instant::now();
            for index in 0..nvml.device_count().unwrap_or(0) {
                let Ok(dev) = nvml.device_by_index(index) else {
                    continue;
                };
                let handle = dev.handle();
                let id = handle as usize;
                if keys.contains_key(&id)
                    || refused.contains(&id)
                    || failed.get(&id).is_some_and(|f| now < f.next)
                {
                    continue;
                }
                if let Some(get) = supported {
                    let mut types = 0;
                    if get(handle, &mut types) == 0 && types & EVENT_XID == 0 {
                        refused.insert(id);
                        continue;
                    }
                }
                let key = gpu_key(index, dev.uuid().ok().as_deref());
                match register(handle, EVENT_XID, set) {
                    0 => {
                        if let Some(f) = failed.remove(&id) {
                            note(format!(
                                "GPU health: GPU {index} ({key}) registered for XID events after {} failed {}",
                                f.tries,
                                if f.tries == 1 { "try" } else { "tries" }
                            ));
                        }
                        keys.insert(id, key);
                    }
                    NVML_NOT_SUPPORTED => {
                        refused.insert(id);
                    }
                    rc => {
                        let f = failed.entry(id).or_insert(FailedRegistration {
                            tries: 0,
                            error: 0,
                            next: now,
                        });
                        f.tries += 1;
                        f.next = now + xid_register_backoff(f.tries);
                        if f.error != rc {
                            f.error = rc;
                            note(format!(
                                "GPU health: cannot register GPU {index} ({key}) for XID events: {}; \
                                 its XIDs are not seen until it is, asked again in {} s doubling to {} s",
                                nvml_error(rc),
                                xid_register_backoff(f.tries).as_secs(),
                                XID_REGISTER_MAX.as_secs()
                            ));
                        }
                    }
                }
            }
        };
        register_new(&mut keys);
        let mut registered_at = Instant::now();
        let mut failing: Option<u32> = None;
        while !stop.load(Ordering::Relaxed) {
            if registered_at.elapsed() >= XID_REGISTER_EVERY {
                register_new(&mut keys);
                registered_at = Instant::now();
            }
            let mut data: nvml_wrapper_sys::bindings::nvmlEventData_t = std::mem::zeroed();
            match wait(set, &mut data, XID_WAIT_MS) {
                0 => {
                    failing = None;
                    let xid = u32::try_from(data.eventData).unwrap_or(u32::MAX);
                    if data.eventType & EVENT_XID == 0 || critical.binary_search(&xid).is_err() {
                        continue;
                    }
                    let key = keys
                        .get(&(data.device as usize))
                        .cloned()
                        .unwrap_or_else(|| "#?".into());
                    let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
                    log.seen.entry(key).or_default().insert(
                        xid,
                        Seen {
                            at: Instant::now(),
                            reported: false,
                        },
                    );
                }
                NVML_TIMEOUT => failing = None,
                rc => {
                    // Said once per change of error; asked again after a wait's length.
                    if failing != Some(rc) {
                        failing = Some(rc);
                        note(format!(
                            "GPU health: waiting for XID events: {}",
                            nvml_error(rc)
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(u64::from(XID_WAIT_MS)));
                }
            }
        }
        free(set);
    }
}

/// The faults of one GPU, in `NvmlFault::KINDS` order. `links` are its NVLinks' states now;
/// `mark`: this is a scan, whose report of an XID makes it clear after `clear_after` (the light
/// check only looks).
#[allow(clippy::too_many_arguments)]
pub(super) fn read_faults(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
    key: &str,
    links: Option<&[bool]>,
    health: &NvmlHealth,
    tracker: &mut HealthTracker,
    mark: bool,
    w: &mut Vec<String>,
) -> Vec<NvmlFault> {
    let mut faults = Vec::new();
    let mut fault = |kind: &str, detail: String| {
        faults.push(NvmlFault {
            kind: kind.into(),
            detail,
        })
    };
    let skipped = |tracker: &mut HealthTracker, kind: &str, what: &str| {
        tracker.once(format!(
            "GPU health: this driver lacks {what}: the {kind} check is skipped"
        ))
    };
    use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
    match dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile) {
        Ok(0) => {}
        Ok(n) => fault("ecc", format!("{n} volatile uncorrected")),
        Err(e) if symbol_missing(&e) => skipped(tracker, "ecc", "nvmlDeviceGetTotalEccErrors"),
        Err(e) => {
            optional::<()>("ECC errors", Err(e), w);
        }
    }
    if let Some(detail) = remap(nvml, dev, tracker, w) {
        fault("remap", detail);
    }
    let xids = xids(key, health, tracker, mark);
    if !xids.is_empty() {
        fault("xid", xids);
    }
    if let Some(links) = links {
        let up = tracker.ever_up.entry(key.to_string()).or_default();
        up.extend((0..).zip(links).filter(|(_, a)| **a).map(|(i, _)| i));
        let down: Vec<String> = up
            .iter()
            .filter(|&&i| !links.get(i as usize).copied().unwrap_or(false))
            .map(u32::to_string)
            .collect();
        match down.len() {
            0 => {}
            1 => fault("nvlink", format!("link {} down", down[0])),
            _ => fault("nvlink", format!("links {} down", down.join(","))),
        }
    }
    if let Some(detail) = fabric_fault(nvml, dev) {
        fault("fabric", detail);
    }
    match clocks_event_reasons(nvml, dev) {
        Ok(mask) => {
            let slow: Vec<&str> = SLOWDOWNS
                .iter()
                .filter(|(bit, _)| mask & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            if !slow.is_empty() {
                fault("thermal", slow.join(","));
            }
        }
        Err(e) if symbol_missing(&e) => skipped(
            tracker,
            "thermal",
            "nvmlDeviceGetCurrentClocksEventReasons and nvmlDeviceGetCurrentClocksThrottleReasons",
        ),
        Err(e) => {
            optional::<()>("clocks event reasons", Err(e), w);
        }
    }
    faults
}

/// The fabric health conditions of `nvmlGpuFabricInfo_v2/3_t.healthMask` (nvml.h
/// `NVML_GPU_FABRIC_HEALTH_MASK_*`): shift, value mask, and the name of a `TRUE` (1).
pub(super) const FABRIC_HEALTH: [(u32, u32, &str); 4] = [
    (0, 0x3, "degraded-bandwidth"),
    (2, 0x3, "route-recovery"),
    (4, 0x3, "route-unhealthy"),
    (6, 0x3, "access-timeout-recovery"),
];
/// `INCORRECT_CONFIGURATION` (shift 8, values 2-5 are faults) by value.
pub(super) const FABRIC_MISCONFIGURED: [(u32, &str); 4] = [
    (2, "incorrect-sysguid"),
    (3, "incorrect-chassis-sn"),
    (4, "no-partition"),
    (5, "insufficient-nvlinks"),
];

/// `fabric`: registration completed but failed (`failed: <NVML's status text>`), or completed
/// and succeeded with a health mask that names a condition (`degraded: <conditions>`; through
/// `nvmlDeviceGetGpuFabricInfoV`, R550 and later). A fabric still registering is not a fault.
pub(super) fn fabric_fault(nvml: &Nvml, dev: &nvml_wrapper::Device) -> Option<String> {
    if let Some(Ok(info)) = fabric_info(nvml, dev)
        && info.state == FABRIC_STATE_COMPLETED
        && info.status != 0
    {
        return Some(format!("failed: {}", error_text(nvml, info.status)));
    }
    let get = nvml.lib().nvmlDeviceGetGpuFabricInfoV.as_ref().ok()?;
    type V3 = nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v3_t;
    type V2 = nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_v2_t;
    const MISMATCH: u32 = 25; // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    let mut info: V3;
    // SAFETY: nvml.h's signature; a live handle; a zeroed v3 struct (the larger) with its
    // version set, v2's when the driver does not know v3.
    unsafe {
        info = std::mem::zeroed();
        info.version = (size_of::<V3>() as u32) | (3 << 24);
        let mut rc = get(dev.handle(), &mut info);
        if rc == MISMATCH {
            info = std::mem::zeroed();
            info.version = (size_of::<V2>() as u32) | (2 << 24);
            rc = get(dev.handle(), &mut info);
        }
        if rc != 0 {
            return None;
        }
    }
    if info.state != FABRIC_STATE_COMPLETED || info.status != 0 {
        return None;
    }
    let mut conditions: Vec<&str> = FABRIC_HEALTH
        .iter()
        .filter(|(shift, mask, _)| (info.healthMask >> shift) & mask == 1)
        .map(|(_, _, name)| *name)
        .collect();
    let config = (info.healthMask >> 8) & 0xF;
    conditions.extend(
        FABRIC_MISCONFIGURED
            .iter()
            .filter(|(v, _)| *v == config)
            .map(|(_, name)| *name),
    );
    (!conditions.is_empty()).then(|| format!("degraded: {}", conditions.join(",")))
}

/// `nvmlErrorString` of a status NVML reports as a value (the fabric's registration).
pub(super) fn error_text(nvml: &Nvml, code: u32) -> String {
    match nvml.lib().nvmlErrorString.as_ref() {
        // SAFETY: nvml.h's signature; NVML returns a static NUL-terminated string (or null).
        Ok(f) => unsafe {
            let p = f(code);
            if p.is_null() {
                format!("NVML error {code}")
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        },
        Err(_) => format!("NVML error {code}"),
    }
}

/// `nvmlDeviceGetCurrentClocksEventReasons` (R535), else the same mask under its older name.
pub(super) fn clocks_event_reasons(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
) -> Result<u64, NvmlError> {
    let lib = nvml.lib();
    let get = lib
        .nvmlDeviceGetCurrentClocksEventReasons
        .as_ref()
        .or(lib.nvmlDeviceGetCurrentClocksThrottleReasons.as_ref())
        .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut mask = 0;
    // SAFETY: nvml.h's signature (bindgen); a live handle; a local out-parameter.
    nvml_wrapper::error::nvml_try(unsafe { get(dev.handle(), &mut mask) })?;
    Ok(mask)
}

/// `remap`: row remapping failed or pending (`nvmlDeviceGetRemappedRows`, A100 and later), else,
/// where the GPU or driver has no row remapping, page retirement pending.
pub(super) fn remap(
    nvml: &Nvml,
    dev: &nvml_wrapper::Device,
    tracker: &mut HealthTracker,
    w: &mut Vec<String>,
) -> Option<String> {
    let lib = nvml.lib();
    if let Ok(get) = lib.nvmlDeviceGetRemappedRows.as_ref() {
        let (mut corr, mut unc, mut pending, mut failed) = (0, 0, 0, 0);
        // SAFETY: nvml.h's signature (bindgen); a live handle; local out-parameters.
        let rc = unsafe { get(dev.handle(), &mut corr, &mut unc, &mut pending, &mut failed) };
        match nvml_wrapper::error::nvml_try(rc) {
            Ok(()) if failed != 0 => return Some("failed".into()),
            Ok(()) if pending != 0 => return Some("pending".into()),
            Ok(()) => return None,
            Err(e) if e_is_absent(&e) => {}
            Err(e) => {
                optional::<()>("remapped rows", Err(e), w);
                return None;
            }
        }
    }
    match dev.are_pages_pending_retired() {
        Ok(true) => Some(match retired_page_count(nvml, dev) {
            Some(1) => "1 retired page pending".into(),
            Some(n) if n > 0 => format!("{n} retired pages pending"),
            _ => "retired pages pending".into(),
        }),
        Ok(false) => None,
        Err(e) if symbol_missing(&e) => {
            if lib.nvmlDeviceGetRemappedRows.is_err() {
                tracker.once(
                    "GPU health: this driver lacks nvmlDeviceGetRemappedRows and \
                     nvmlDeviceGetRetiredPagesPendingStatus: the remap check is skipped"
                        .into(),
                );
            }
            None
        }
        Err(e) => {
            optional::<()>("retired pages", Err(e), w);
            None
        }
    }
}

/// Not supported here, or not in this driver: the next way is tried.
pub(super) fn e_is_absent(e: &NvmlError) -> bool {
    matches!(e, NvmlError::NotSupported) || symbol_missing(e)
}

/// Retired pages of both causes (`nvmlDeviceGetRetiredPages`, asked for its count only).
pub(super) fn retired_page_count(nvml: &Nvml, dev: &nvml_wrapper::Device) -> Option<u32> {
    let get = nvml.lib().nvmlDeviceGetRetiredPages.as_ref().ok()?;
    let mut total = 0;
    for cause in 0..2 {
        let mut count = 0;
        // SAFETY: nvml.h's signature; a zero count asks for the count only (no addresses are
        // written; the buffer is null).
        let rc = unsafe { get(dev.handle(), cause, &mut count, std::ptr::null_mut()) };
        // NVML_ERROR_INSUFFICIENT_SIZE (7) is the count query's answer when there are pages.
        if rc != 0 && rc != 7 {
            return None;
        }
        total += count;
    }
    Some(total)
}

/// `xid`: the critical XIDs (ascending, each once) seen on this GPU that are still reported: one
/// not yet reported by a scan, or seen within `clear_after`. A scan (`mark`) reports them;
/// those past `clear_after` that a scan reported are forgotten.
pub(super) fn xids(
    key: &str,
    health: &NvmlHealth,
    tracker: &mut HealthTracker,
    mark: bool,
) -> String {
    let mut log = tracker.log();
    let Some(seen) = log.seen.get_mut(key) else {
        return String::new();
    };
    seen.retain(|_, s| !s.reported || s.at.elapsed() < health.clear_after);
    let out: Vec<String> = seen.keys().map(u32::to_string).collect();
    if mark {
        for s in seen.values_mut() {
            s.reported = true;
        }
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_xid_registration_is_asked_again_5_s_doubling_to_5_min() {
        let secs: Vec<u64> = (1..=9)
            .map(|tries| xid_register_backoff(tries).as_secs())
            .collect();
        assert_eq!(secs, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(xid_register_backoff(u32::MAX), XID_REGISTER_MAX);
    }

    #[test]
    fn an_xid_is_reported_by_one_scan_at_least_then_while_within_clear_after() {
        let mut tracker = HealthTracker::default();
        let at = |ago: u64| Seen {
            at: Instant::now() - Duration::from_secs(ago),
            reported: false,
        };
        tracker
            .log()
            .seen
            .insert("GPU-a".into(), BTreeMap::from([(79, at(10)), (48, at(0))]));
        let zero = NvmlHealth {
            critical_xids: vec![48, 79],
            clear_after: Duration::ZERO,
        };
        // The light check only looks; the first scan reports both, ascending, even with 0s.
        assert_eq!(xids("GPU-a", &zero, &mut tracker, false), "48,79");
        assert_eq!(xids("GPU-a", &zero, &mut tracker, true), "48,79");
        assert_eq!(xids("GPU-a", &zero, &mut tracker, true), "");
        assert_eq!(xids("GPU-b", &zero, &mut tracker, true), "");
        // With 5s, the one seen 10s ago goes after its first report, the other stays.
        tracker
            .log()
            .seen
            .insert("GPU-a".into(), BTreeMap::from([(79, at(10)), (48, at(0))]));
        let five = NvmlHealth {
            clear_after: Duration::from_secs(5),
            ..zero
        };
        assert_eq!(xids("GPU-a", &five, &mut tracker, true), "48,79");
        assert_eq!(xids("GPU-a", &five, &mut tracker, true), "48");
    }
}
