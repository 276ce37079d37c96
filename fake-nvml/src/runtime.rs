//! The library's process-global state, device handles, and the wrapper every exported function
//! runs its body in (panic barrier, call trace, missing-function and fault injection).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, c_uint};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::ctypes::*;
use crate::fixture::{
    Action, Device, Fixture, MAX_COMPUTE_INSTANCE_ID, MAX_GPU_INSTANCE_ID, MAX_GPUS,
    MAX_MIG_DEVICES, MigDevice,
};

/// The environment variable naming the fixture, read by every `nvmlInit`.
pub const FIXTURE_ENV: &str = "FAKE_NVML_FIXTURE";
/// When set, every call is appended to this file as one line: the function name, then the
/// GPU index (`3`) or MIG device (`3:1`) it was about, if any.
pub const TRACE_ENV: &str = "FAKE_NVML_TRACE";

struct State {
    /// `nvmlInit` calls not yet matched by `nvmlShutdown`, as real NVML counts them.
    refcount: u32,
    fixture: Option<Fixture>,
    /// The fixture file's modification time and length when it was read.
    stamp: Option<(std::time::SystemTime, u64)>,
    trace: Option<File>,
    /// Event sets by slot (`nvmlEventSetCreate`), freed by `nvmlEventSetFree`.
    event_sets: Vec<Option<EventSet>>,
}

/// One `nvmlEventSet_t`: when it was created, which GPUs registered which event types, and
/// which `xid_events` entries it delivered.
struct EventSet {
    created: Instant,
    registered: BTreeMap<usize, u64>,
    delivered: BTreeSet<usize>,
}

static STATE: Mutex<State> = Mutex::new(State {
    refcount: 0,
    fixture: None,
    stamp: None,
    trace: None,
    event_sets: Vec::new(),
});

fn lock() -> MutexGuard<'static, State> {
    // A panic while the lock was held was already turned into an error; the state is still whole.
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    // A real driver answers with the GPUs' state now (MIG reconfigured, a GPU lost) without a
    // new init: so does the fake, re-reading a fixture file that changed. A file that does not
    // parse (caught mid-write) keeps the last one.
    if st.fixture.is_some() {
        let now = fixture_stamp();
        if now.is_some()
            && now != st.stamp
            && let Ok(f) = load_fixture()
        {
            st.fixture = Some(f);
            st.stamp = now;
        }
    }
    st
}

fn fixture_stamp() -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::metadata(std::env::var_os(FIXTURE_ENV)?).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Handles are addresses in this table: the first `MAX_GPUS` bytes are GPUs, then
/// `MAX_MIG_DEVICES` per GPU for their MIG devices. Callers only compare and pass them back.
static HANDLE_SLOTS: [u8; MAX_GPUS * (1 + MAX_MIG_DEVICES)] = [0; MAX_GPUS * (1 + MAX_MIG_DEVICES)];

pub fn gpu_handle(gpu: usize) -> Handle {
    HANDLE_SLOTS.as_ptr().wrapping_add(gpu) as Handle
}

pub fn mig_handle(gpu: usize, mig: usize) -> Handle {
    HANDLE_SLOTS
        .as_ptr()
        .wrapping_add(MAX_GPUS + gpu * MAX_MIG_DEVICES + mig) as Handle
}

/// GPU instance handles: `MAX_GPU_INSTANCE_ID` slots per GPU, by instance id.
static GPU_INSTANCE_SLOTS: [u8; MAX_GPUS * MAX_GPU_INSTANCE_ID] =
    [0; MAX_GPUS * MAX_GPU_INSTANCE_ID];

pub fn gpu_instance_handle(gpu: usize, id: usize) -> GpuInstanceHandle {
    GPU_INSTANCE_SLOTS
        .as_ptr()
        .wrapping_add(gpu * MAX_GPU_INSTANCE_ID + id) as GpuInstanceHandle
}

/// The GPU index and instance id of a GPU instance handle.
fn resolve_gpu_instance(h: GpuInstanceHandle) -> Option<(usize, u32)> {
    let offset = (h as usize).wrapping_sub(GPU_INSTANCE_SLOTS.as_ptr() as usize);
    (offset < GPU_INSTANCE_SLOTS.len()).then_some((
        offset / MAX_GPU_INSTANCE_ID,
        (offset % MAX_GPU_INSTANCE_ID) as u32,
    ))
}

/// A function on a GPU instance handle: `body` gets the GPU and one MIG device of that
/// instance (the first; they all share its profile). Unknown handle: invalid argument.
pub fn gpu_instance(
    name: &str,
    handle: GpuInstanceHandle,
    body: impl FnOnce(&Fixture, usize, &MigDevice) -> Result<(), Return>,
) -> Return {
    guarded(|| {
        let mut st = lock();
        let resolved = resolve_gpu_instance(handle);
        st.trace(name, resolved.map(|(gpu, _)| About { gpu, mig: None }));
        let f = st.ready(name)?;
        let (gpu, id) = resolved.ok_or(ERROR_INVALID_ARGUMENT)?;
        let dev = f.devices.get(gpu).ok_or(ERROR_INVALID_ARGUMENT)?;
        let (slot, mig) = dev
            .mig_devices
            .iter()
            .enumerate()
            .find(|(_, m)| m.gpu_instance_id == Some(id))
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        injected(
            f,
            name,
            Some(About {
                gpu,
                mig: Some(slot),
            }),
        )?;
        body(f, gpu, mig)
    })
}

/// Compute instance handles: `MAX_COMPUTE_INSTANCE_ID` slots per GPU instance handle slot.
static COMPUTE_INSTANCE_SLOTS: [u8; MAX_GPUS * MAX_GPU_INSTANCE_ID * MAX_COMPUTE_INSTANCE_ID] =
    [0; MAX_GPUS * MAX_GPU_INSTANCE_ID * MAX_COMPUTE_INSTANCE_ID];

pub fn compute_instance_handle(gpu: usize, gi: usize, ci: usize) -> ComputeInstanceHandle {
    COMPUTE_INSTANCE_SLOTS
        .as_ptr()
        .wrapping_add((gpu * MAX_GPU_INSTANCE_ID + gi) * MAX_COMPUTE_INSTANCE_ID + ci)
        as ComputeInstanceHandle
}

/// The GPU index, GPU instance id and compute instance id of a compute instance handle.
fn resolve_compute_instance(h: ComputeInstanceHandle) -> Option<(usize, u32, u32)> {
    let offset = (h as usize).wrapping_sub(COMPUTE_INSTANCE_SLOTS.as_ptr() as usize);
    (offset < COMPUTE_INSTANCE_SLOTS.len()).then_some((
        offset / (MAX_GPU_INSTANCE_ID * MAX_COMPUTE_INSTANCE_ID),
        ((offset / MAX_COMPUTE_INSTANCE_ID) % MAX_GPU_INSTANCE_ID) as u32,
        (offset % MAX_COMPUTE_INSTANCE_ID) as u32,
    ))
}

/// A function on a compute instance handle: `body` gets the GPU index and the MIG device of
/// that compute instance. Unknown handle: invalid argument.
pub fn compute_instance(
    name: &str,
    handle: ComputeInstanceHandle,
    body: impl FnOnce(&Fixture, usize, &MigDevice) -> Result<(), Return>,
) -> Return {
    guarded(|| {
        let mut st = lock();
        let resolved = resolve_compute_instance(handle);
        st.trace(name, resolved.map(|(gpu, _, _)| About { gpu, mig: None }));
        let f = st.ready(name)?;
        let (gpu, gi, ci) = resolved.ok_or(ERROR_INVALID_ARGUMENT)?;
        let dev = f.devices.get(gpu).ok_or(ERROR_INVALID_ARGUMENT)?;
        let (slot, mig) = dev
            .mig_devices
            .iter()
            .enumerate()
            .find(|(_, m)| m.gpu_instance_id == Some(gi) && m.compute_instance_id == Some(ci))
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        injected(
            f,
            name,
            Some(About {
                gpu,
                mig: Some(slot),
            }),
        )?;
        body(f, gpu, mig)
    })
}

/// What a handle refers to in the loaded fixture.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    Gpu {
        index: usize,
        dev: &'a Device,
    },
    Mig {
        gpu: usize,
        parent: &'a Device,
        index: usize,
        mig: &'a MigDevice,
    },
}

impl<'a> Target<'a> {
    fn resolve(f: &'a Fixture, h: Handle) -> Option<Target<'a>> {
        let offset = (h as usize).wrapping_sub(HANDLE_SLOTS.as_ptr() as usize);
        if offset < MAX_GPUS {
            let dev = f.devices.get(offset)?;
            Some(Target::Gpu { index: offset, dev })
        } else if offset < HANDLE_SLOTS.len() {
            let gpu = (offset - MAX_GPUS) / MAX_MIG_DEVICES;
            let index = (offset - MAX_GPUS) % MAX_MIG_DEVICES;
            let parent = f.devices.get(gpu)?;
            let mig = parent.mig_devices.get(index)?;
            Some(Target::Mig {
                gpu,
                parent,
                index,
                mig,
            })
        } else {
            None
        }
    }

    /// The physical GPU: itself, or a MIG device's parent.
    pub fn gpu(&self) -> &'a Device {
        match *self {
            Target::Gpu { dev, .. } => dev,
            Target::Mig { parent, .. } => parent,
        }
    }

    fn about(&self) -> About {
        match *self {
            Target::Gpu { index, .. } => About {
                gpu: index,
                mig: None,
            },
            Target::Mig { gpu, index, .. } => About {
                gpu,
                mig: Some(index),
            },
        }
    }
}

/// The GPU (and MIG device) a call is about, for fault matching and the trace.
#[derive(Clone, Copy)]
pub struct About {
    pub gpu: usize,
    pub mig: Option<usize>,
}

impl State {
    fn trace(&mut self, name: &str, about: Option<About>) {
        if let Some(file) = &mut self.trace {
            let line = match about {
                None => format!("{name}\n"),
                Some(About { gpu, mig: None }) => format!("{name} {gpu}\n"),
                Some(About { gpu, mig: Some(m) }) => format!("{name} {gpu}:{m}\n"),
            };
            // Tracing is a test aid; losing a line must not change what the caller sees.
            let _ = file.write_all(line.as_bytes());
        }
    }

    /// The fixture, if NVML is initialised and the function "exists" in this driver.
    fn ready(&self, name: &str) -> Result<&Fixture, Return> {
        let f = self.fixture.as_ref().ok_or(ERROR_UNINITIALIZED)?;
        if f.faults.not_found.iter().any(|n| n == name) {
            return Err(ERROR_FUNCTION_NOT_FOUND);
        }
        Ok(f)
    }
}

/// Acts out the first `misbehave` rule that matches the call, if any.
fn misbehave(f: &Fixture, name: &str, about: Option<About>) {
    let rule = f.faults.misbehave.iter().find(|r| {
        r.function.as_deref().is_none_or(|n| n == name)
            && r.gpu.is_none_or(|g| about.is_some_and(|a| a.gpu == g))
            && r.mig
                .is_none_or(|m| about.is_some_and(|a| a.mig == Some(m)))
    });
    let Some(rule) = rule else { return };
    match rule.action {
        Action::Hang => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Action::Segv => {
            unsafe extern "C" {
                fn signal(sig: c_int, handler: usize) -> usize;
                fn raise(sig: c_int) -> c_int;
            }
            const SIGSEGV: c_int = 11;
            const SIG_DFL: usize = 0;
            // SAFETY: plain libc calls; the default action ends the process here.
            unsafe {
                signal(SIGSEGV, SIG_DFL);
                raise(SIGSEGV);
            }
        }
        Action::Exit => std::process::exit(3),
        Action::Stdout => {
            let mut out = std::io::stdout();
            let _ = out.write_all(format!("fake-nvml: {name} says hello on stdout\n").as_bytes());
            let _ = out.flush();
        }
    }
}

/// The injected error for a call, if any (see `Faults`).
pub fn injected(f: &Fixture, name: &str, about: Option<About>) -> Result<(), Return> {
    misbehave(f, name, about);
    if let Some(a) = about {
        let lost = f
            .faults
            .device_errors
            .iter()
            .find(|(k, _)| k.parse::<usize>() == Ok(a.gpu));
        if let Some((_, e)) = lost {
            return Err(e.0);
        }
    }
    let mut spent = RULE_CALLS.lock().unwrap_or_else(|e| e.into_inner());
    let rule = f.faults.errors.iter().enumerate().find(|(i, r)| {
        r.function.as_deref().is_none_or(|n| n == name)
            && r.gpu.is_none_or(|g| about.is_some_and(|a| a.gpu == g))
            && r.mig
                .is_none_or(|m| about.is_some_and(|a| a.mig == Some(m)))
            && r.times
                .is_none_or(|n| spent.get(i).copied().unwrap_or(0) < n)
    });
    match rule {
        Some((i, r)) => {
            if r.times.is_some() {
                *spent.entry(i).or_insert(0) += 1;
            }
            Err(r.error.0)
        }
        None => Ok(()),
    }
}

/// How many calls each `errors` rule with `times` has failed since `nvmlInit`, by its place in
/// the list.
static RULE_CALLS: Mutex<BTreeMap<usize, u32>> = Mutex::new(BTreeMap::new());

/// Runs `body`, turning a panic into `NVML_ERROR_UNKNOWN` so none crosses the C boundary.
fn guarded(body: impl FnOnce() -> Result<(), Return>) -> Return {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => ERROR_UNKNOWN,
    }
}

/// A function about the system (or a GPU index, which `body` checks itself).
pub fn system(name: &str, body: impl FnOnce(&Fixture) -> Result<(), Return>) -> Return {
    guarded(|| {
        let mut st = lock();
        st.trace(name, None);
        let f = st.ready(name)?;
        injected(f, name, None)?;
        body(f)
    })
}

/// A function about the GPU (and optionally the MIG device) of `about`, which the caller named
/// by index rather than by handle (`nvmlDeviceGetHandleByIndex_v2`).
pub fn indexed(
    name: &str,
    about: About,
    body: impl FnOnce(&Fixture) -> Result<(), Return>,
) -> Return {
    guarded(|| {
        let mut st = lock();
        st.trace(name, Some(about));
        let f = st.ready(name)?;
        if about.gpu < f.devices.len() {
            injected(f, name, Some(about))?;
        }
        body(f)
    })
}

/// A function on a device handle; an unknown handle is `NVML_ERROR_INVALID_ARGUMENT`.
pub fn device(
    name: &str,
    handle: Handle,
    body: impl FnOnce(&Fixture, Target<'_>) -> Result<(), Return>,
) -> Return {
    guarded(|| {
        let mut st = lock();
        let about = st
            .fixture
            .as_ref()
            .and_then(|f| Target::resolve(f, handle))
            .map(|t| t.about());
        st.trace(name, about);
        let f = st.ready(name)?;
        let target = Target::resolve(f, handle).ok_or(ERROR_INVALID_ARGUMENT)?;
        injected(f, name, Some(target.about()))?;
        body(f, target)
    })
}

/// `nvmlInit_v2` and `nvmlInitWithFlags`: (re)load the fixture named by `FAKE_NVML_FIXTURE`.
pub fn init(name: &str) -> Return {
    guarded(|| {
        let mut st = lock();
        let fixture = load_fixture()?;
        if let Some(path) = std::env::var_os(TRACE_ENV) {
            st.trace = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .inspect_err(|e| {
                    eprintln!("fake-nvml: cannot open {TRACE_ENV}={}: {e}", path.display())
                })
                .ok();
        }
        st.trace(name, None);
        misbehave(&fixture, name, None);
        if let Some(e) = fixture.faults.init {
            return Err(e.0);
        }
        // An `errors` rule's `times` count from init.
        RULE_CALLS.lock().unwrap_or_else(|e| e.into_inner()).clear();
        st.fixture = Some(fixture);
        st.stamp = fixture_stamp();
        st.refcount += 1;
        Ok(())
    })
}

fn load_fixture() -> Result<Fixture, Return> {
    let fail = |msg: String| {
        eprintln!("fake-nvml: nvmlInit fails: {msg}");
        ERROR_UNKNOWN
    };
    let Some(path) = std::env::var_os(FIXTURE_ENV) else {
        return Err(fail(format!("{FIXTURE_ENV} is not set")));
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| fail(format!("{shown}: {e}")))?;
    Fixture::parse(&text).map_err(|e| fail(format!("{shown}: {e}")))
}

/// `nvmlShutdown`: the last one unloads the fixture.
pub fn shutdown(name: &str) -> Return {
    guarded(|| {
        let mut st = lock();
        st.trace(name, None);
        st.ready(name)?;
        st.refcount -= 1;
        if st.refcount == 0 {
            st.event_sets.clear();
            st.fixture = None;
            st.stamp = None;
            st.trace = None;
        }
        Ok(())
    })
}

/// `nvmlErrorString`: static text, available before `nvmlInit`.
pub fn error_string(code: Return) -> *const c_char {
    let text = crate::fixture::RETURN_CODES
        .iter()
        .find(|(c, _, _)| *c == code)
        .map_or("Unknown Error\0", |(_, _, text)| text);
    text.as_ptr().cast()
}

/// Writes one out-parameter.
///
/// # Safety
/// `p` is null or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, value: T) -> Result<(), Return> {
    if p.is_null() {
        return Err(ERROR_INVALID_ARGUMENT);
    }
    // SAFETY: non-null, and the caller vouches for the rest.
    unsafe { p.write(value) };
    Ok(())
}

/// Fails unless `p` is non-null, for out-parameters checked before the value is known.
pub fn non_null<T>(p: *const T) -> Result<(), Return> {
    if p.is_null() {
        Err(ERROR_INVALID_ARGUMENT)
    } else {
        Ok(())
    }
}

/// Copies `value` and its NUL into the caller's `length`-byte buffer, as NVML's string getters
/// do: null buffer -> invalid argument, unknown value -> not supported, too small -> insufficient
/// size.
///
/// # Safety
/// `buf` is null or valid for `length` bytes of writes.
pub unsafe fn put_str(buf: *mut c_char, length: c_uint, value: Option<&str>) -> Result<(), Return> {
    non_null(buf)?;
    let value = value.ok_or(ERROR_NOT_SUPPORTED)?;
    if value.len() + 1 > length as usize {
        return Err(ERROR_INSUFFICIENT_SIZE);
    }
    // SAFETY: the buffer holds `length` >= len + 1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(value.as_ptr().cast::<c_char>(), buf, value.len());
        buf.add(value.len()).write(0);
    }
    Ok(())
}

/// Fills a fixed C char array (struct member) with `value`, truncated to leave room for the NUL.
pub fn fill_chars(dst: &mut [c_char], value: &str) {
    dst.fill(0);
    let n = value.len().min(dst.len().saturating_sub(1));
    for (d, s) in dst.iter_mut().zip(&value.as_bytes()[..n]) {
        *d = *s as c_char;
    }
}

/// Event set handles: addresses in this table, by slot.
const MAX_EVENT_SETS: usize = 64;
static EVENT_SET_SLOTS: [u8; MAX_EVENT_SETS] = [0; MAX_EVENT_SETS];

fn event_set_slot(h: EventSetHandle) -> Option<usize> {
    let offset = (h as usize).wrapping_sub(EVENT_SET_SLOTS.as_ptr() as usize);
    (offset < MAX_EVENT_SETS).then_some(offset)
}

/// The event types every GPU here supports (as NVML on Linux for Fermi and later GPUs).
pub const SUPPORTED_EVENTS: u64 = EVENT_TYPE_SINGLE_BIT_ECC_ERROR
    | EVENT_TYPE_DOUBLE_BIT_ECC_ERROR
    | EVENT_TYPE_XID_CRITICAL_ERROR;

/// `nvmlEventSetCreate`.
pub fn event_set_create(name: &str, out: *mut EventSetHandle) -> Return {
    guarded(|| {
        let mut st = lock();
        st.trace(name, None);
        let f = st.ready(name)?;
        injected(f, name, None)?;
        non_null(out)?;
        let slot = match st.event_sets.iter().position(Option::is_none) {
            Some(s) => s,
            None if st.event_sets.len() < MAX_EVENT_SETS => {
                st.event_sets.push(None);
                st.event_sets.len() - 1
            }
            None => return Err(20), // NVML_ERROR_MEMORY
        };
        st.event_sets[slot] = Some(EventSet {
            created: Instant::now(),
            registered: BTreeMap::new(),
            delivered: BTreeSet::new(),
        });
        let handle = EVENT_SET_SLOTS.as_ptr().wrapping_add(slot) as EventSetHandle;
        // SAFETY: checked non-null; the caller passes an nvmlEventSet_t to fill.
        unsafe { put(out, handle) }
    })
}

/// `nvmlEventSetFree`.
pub fn event_set_free(name: &str, set: EventSetHandle) -> Return {
    guarded(|| {
        let mut st = lock();
        st.trace(name, None);
        st.ready(name)?;
        let slot = event_set_slot(set).ok_or(ERROR_INVALID_ARGUMENT)?;
        match st.event_sets.get_mut(slot) {
            Some(s @ Some(_)) => {
                *s = None;
                Ok(())
            }
            _ => Err(ERROR_INVALID_ARGUMENT),
        }
    })
}

/// `nvmlDeviceRegisterEvents`: GPU handles only; types outside `SUPPORTED_EVENTS` are not
/// supported.
pub fn register_events(name: &str, handle: Handle, types: u64, set: EventSetHandle) -> Return {
    guarded(|| {
        let mut st = lock();
        let about = st
            .fixture
            .as_ref()
            .and_then(|f| Target::resolve(f, handle))
            .map(|t| t.about());
        st.trace(name, about);
        let f = st.ready(name)?;
        let target = Target::resolve(f, handle).ok_or(ERROR_INVALID_ARGUMENT)?;
        injected(f, name, Some(target.about()))?;
        let Target::Gpu { index, .. } = target else {
            return Err(ERROR_NOT_SUPPORTED);
        };
        if types & !SUPPORTED_EVENTS != 0 {
            return Err(ERROR_NOT_SUPPORTED);
        }
        let slot = event_set_slot(set).ok_or(ERROR_INVALID_ARGUMENT)?;
        let es = st
            .event_sets
            .get_mut(slot)
            .and_then(Option::as_mut)
            .ok_or(ERROR_INVALID_ARGUMENT)?;
        *es.registered.entry(index).or_insert(0) |= types;
        Ok(())
    })
}

/// What one `nvmlEventSetWait` delivered: the GPU and XID.
pub struct Delivered {
    pub gpu: usize,
    pub xid: u64,
}

/// `nvmlEventSetWait(_v2)`: the first `xid_events` entry due for this set that it has not
/// delivered, else waits for one (the fixture file may gain one meanwhile) up to `timeout_ms`,
/// then `NVML_ERROR_TIMEOUT`. Never holds the library's lock while it sleeps, so other calls
/// go on meanwhile. A `misbehave` rule `hang` for the function (with no `gpu`/`mig`) makes it
/// never return, also without the lock: a wait that ignores its timeout.
pub fn event_wait(
    name: &str,
    set: EventSetHandle,
    timeout_ms: c_uint,
    deliver: impl FnOnce(Delivered) -> Result<(), Return>,
) -> Return {
    guarded(|| {
        let start = Instant::now();
        let limit = Duration::from_millis(u64::from(timeout_ms));
        let mut traced = false;
        loop {
            let mut guard = lock();
            if !traced {
                guard.trace(name, None);
                traced = true;
            }
            let f = guard.ready(name)?;
            let hang = f.faults.misbehave.iter().any(|r| {
                r.function.as_deref() == Some(name)
                    && r.gpu.is_none()
                    && r.mig.is_none()
                    && matches!(r.action, Action::Hang)
            });
            if hang {
                drop(guard);
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            injected(f, name, None)?;
            let slot = event_set_slot(set).ok_or(ERROR_INVALID_ARGUMENT)?;
            let State {
                fixture,
                event_sets,
                ..
            } = &mut *guard;
            let f = fixture.as_ref().ok_or(ERROR_UNINITIALIZED)?;
            let es = event_sets
                .get_mut(slot)
                .and_then(Option::as_mut)
                .ok_or(ERROR_INVALID_ARGUMENT)?;
            let age = es.created.elapsed();
            let due = f.xid_events.iter().enumerate().find(|(i, e)| {
                !es.delivered.contains(i)
                    && es
                        .registered
                        .get(&e.gpu)
                        .is_some_and(|t| t & EVENT_TYPE_XID_CRITICAL_ERROR != 0)
                    && age >= Duration::from_millis(e.at_ms)
            });
            if let Some((i, e)) = due {
                es.delivered.insert(i);
                return deliver(Delivered {
                    gpu: e.gpu,
                    xid: e.xid,
                });
            }
            let waited = start.elapsed();
            if waited >= limit {
                return Err(ERROR_TIMEOUT);
            }
            drop(guard);
            std::thread::sleep((limit - waited).min(Duration::from_millis(5)));
        }
    })
}
