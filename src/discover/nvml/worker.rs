//! NVML off the publishing path. In the daemon one thread owns NVML's child process
//! (`IsolatedNvml`) and runs its scans and light checks; a cycle asks it for a scan and waits
//! only briefly (`PATIENCE`), publishing with NVML's last answer when the driver is slow or
//! hung. So a rule change, a PCI event or a label someone removed is published within seconds
//! whatever NVML does; NVML's own labels follow when NVML answers.
//!
//! - A scan that lands after its cycle stopped waiting, with an answer other than the one that
//!   cycle used, wakes a relabel (`Notice::Changed`); an answer equal to it does not, so a
//!   driver that is merely slow does not make the daemon cycle back to back.
//! - The light check runs here too, every `checkInterval` while NVML answers, its baseline the
//!   state right after the last scan; a change wakes a relabel.
//! - Every failure, of a scan or a light check, is reported (`Notice::Failed`: counted); a
//!   light check's failure is logged once per change of its message, not every check.
//! - The first scan is waited for up to NVML's own timeout: until NVML first answers, the
//!   daemon does not know which labels NVML gives, and a restarted agent must not take them
//!   off the Node only to put them back a moment later.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::child::{FailureReason, IsolatedNvml};
use super::{NvmlProbe, NvmlScan, NvmlStatus};
use crate::said::SaidOnce;

/// How long a cycle waits for the scan it asked for once NVML has answered before: a healthy
/// driver answers a persistent child in milliseconds.
pub const PATIENCE: Duration = Duration::from_millis(500);

/// What the worker tells the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// NVML's answer is not the one the labels were last computed from: relabel.
    Changed(&'static str),
    /// A scan or a light check (`during`) failed in the child.
    Failed {
        during: &'static str,
        reason: FailureReason,
    },
}

/// Called from the worker thread.
pub type Notify = Box<dyn Fn(Notice) + Send + Sync>;

struct State {
    /// A new child's settings, taken up at the worker's next turn.
    replace: Option<IsolatedNvml>,
    check_interval: Duration,
    scan_wanted: bool,
    /// A scan runs now.
    scanning: bool,
    /// Scans completed, and the last one's answer.
    scans: u64,
    last: Option<NvmlScan>,
    /// How long a first scan may take (the child's timeout).
    first_bound: Duration,
    /// A cycle waits for a scan now: an answer is not late.
    waiting: bool,
    /// The answer the last cycle was given (`key`).
    used: Option<String>,
    /// The light check runs while NVML answers: the last scan's status was ok or stale.
    in_use: bool,
    /// The light check's baseline.
    baseline: Option<String>,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
    notify: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The daemon's handle on the worker thread; dropping it ends the thread at its next turn
/// (a request in flight is bounded by the child's timeout).
pub struct NvmlWorker {
    shared: Arc<Shared>,
}

impl NvmlWorker {
    pub fn start(probe: IsolatedNvml, check_interval: Duration, notify: Notify) -> NvmlWorker {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                first_bound: probe.bound(),
                replace: None,
                check_interval,
                scan_wanted: false,
                scanning: false,
                scans: 0,
                last: None,
                waiting: false,
                used: None,
                in_use: false,
                baseline: None,
                stop: false,
            }),
            cond: Condvar::new(),
            notify,
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name("nvml".into())
            .spawn(move || work(&worker, probe))
            .expect("cannot start the NVML thread");
        NvmlWorker { shared }
    }

    /// Runs NVML with these settings from now on (a new child; the last answer is forgotten).
    pub fn replace(&self, probe: IsolatedNvml) {
        let mut st = self.shared.lock();
        st.first_bound = probe.bound();
        st.replace = Some(probe);
        st.last = None;
        st.used = None;
        st.baseline = None;
        st.in_use = false;
        drop(st);
        self.shared.cond.notify_all();
    }

    /// `0` turns the light check off.
    pub fn set_check_interval(&self, every: Duration) {
        let mut st = self.shared.lock();
        if st.check_interval != every {
            st.check_interval = every;
            drop(st);
            self.shared.cond.notify_all();
        }
    }

    /// Asks for a scan and waits for it: up to `PATIENCE` once NVML has answered before (then
    /// the last answer stands in), up to the child's timeout for the first one. Blocks: call it
    /// off the async thread.
    pub fn scan(&self) -> NvmlScan {
        let mut st = self.shared.lock();
        let first = st.last.is_none();
        // A scan already running started before this request; the one after it is this one's.
        // For the first answer any scan will do.
        let target = st.scans + 1 + u64::from(st.scanning && !first);
        let bound = if first { st.first_bound } else { PATIENCE };
        st.scan_wanted = true;
        st.waiting = true;
        self.shared.cond.notify_all();
        let deadline = Instant::now() + bound;
        while st.scans < target && !st.stop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = self
                .shared
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        st.waiting = false;
        let scan = st.last.clone().unwrap_or_else(|| NvmlScan {
            status: NvmlStatus::Error(format!(
                "no answer within {}",
                humantime::format_duration(bound)
            )),
            ..NvmlScan::unavailable("")
        });
        st.used = Some(key(&scan));
        scan
    }
}

impl Drop for NvmlWorker {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.cond.notify_all();
    }
}

/// As `NvmlProbe`, for `discover_with`.
pub struct WorkerProbe<'a>(pub &'a NvmlWorker);

impl NvmlProbe for WorkerProbe<'_> {
    fn scan(&mut self) -> NvmlScan {
        self.0.scan()
    }
}

/// What of an answer the labels depend on: everything but its warnings (which are reported,
/// not labelled).
fn key(scan: &NvmlScan) -> String {
    let mut s = scan.clone();
    s.warnings.clear();
    serde_json::to_string(&s).unwrap_or_default()
}

/// What the worker does next.
enum Turn {
    Replace(Box<IsolatedNvml>),
    Scan { checking: bool },
    Check,
}

fn work(shared: &Shared, mut probe: IsolatedNvml) {
    let mut next_check: Option<Instant> = None;
    // The light check's last failure as logged, so that a steady one is said once.
    let mut check_failure = SaidOnce::starting_at(None);
    loop {
        let turn = {
            let mut st = shared.lock();
            loop {
                if st.stop {
                    return;
                }
                if let Some(p) = st.replace.take() {
                    break Turn::Replace(Box::new(p));
                }
                if st.scan_wanted {
                    st.scan_wanted = false;
                    st.scanning = true;
                    break Turn::Scan {
                        checking: !st.check_interval.is_zero(),
                    };
                }
                let checking = st.in_use && !st.check_interval.is_zero();
                let now = Instant::now();
                st = match next_check {
                    Some(at) if checking && now >= at => break Turn::Check,
                    Some(at) if checking => {
                        shared
                            .cond
                            .wait_timeout(st, at - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0
                    }
                    None if checking => {
                        next_check = Some(now + st.check_interval);
                        st
                    }
                    _ => shared.cond.wait(st).unwrap_or_else(|e| e.into_inner()),
                };
            }
        };
        match turn {
            // The old child ends as its handle is dropped.
            Turn::Replace(p) => {
                probe = *p;
                next_check = None;
                check_failure.changed(None);
            }
            Turn::Scan { checking } => {
                let scan = probe.scan();
                let failure = probe.take_failure();
                let in_use = matches!(scan.status, NvmlStatus::Ok | NvmlStatus::Stale(_));
                // The light check's baseline is the state this scan saw, taken right after it:
                // a baseline taken later would take a change made in between as the starting
                // point, and never relabel for it.
                let baseline = if in_use && checking {
                    match probe.check() {
                        Some(Ok(state)) => Some(state),
                        Some(Err(f)) => {
                            report_check_failure(shared, &mut check_failure, &f);
                            None
                        }
                        None => None,
                    }
                } else {
                    None
                };
                let mut st = shared.lock();
                let late = !st.waiting && st.used.as_deref().is_some_and(|u| *u != key(&scan));
                st.scans += 1;
                st.scanning = false;
                st.in_use = in_use;
                st.baseline = baseline;
                st.last = Some(scan);
                next_check = Some(Instant::now() + st.check_interval);
                drop(st);
                shared.cond.notify_all();
                if let Some(reason) = failure {
                    (shared.notify)(Notice::Failed {
                        during: "scan",
                        reason,
                    });
                }
                if late {
                    (shared.notify)(Notice::Changed("NVML answered after its cycle"));
                }
            }
            Turn::Check => {
                let state = probe.check();
                let mut st = shared.lock();
                next_check = Some(Instant::now() + st.check_interval);
                match state {
                    Some(Ok(state)) => {
                        check_failure.changed(None);
                        let changed = st.baseline.as_ref().is_some_and(|b| *b != state);
                        st.baseline = Some(state);
                        drop(st);
                        if changed {
                            tracing::info!("NVML's GPU or MIG state changed: relabelling");
                            (shared.notify)(Notice::Changed("NVML's GPU or MIG state changed"));
                        }
                    }
                    Some(Err(f)) => {
                        drop(st);
                        report_check_failure(shared, &mut check_failure, &f);
                    }
                    None => {}
                }
            }
        }
    }
}

fn report_check_failure(
    shared: &Shared,
    last: &mut SaidOnce<Option<String>>,
    f: &super::child::Failure,
) {
    (shared.notify)(Notice::Failed {
        during: "check",
        reason: f.reason,
    });
    if last.changed(Some(f.message.clone())).is_some() {
        tracing::warn!("NVML's light check failed: {}", f.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::nvml::child::tests::{OK_ANSWER as OK, probe};
    use std::sync::mpsc;

    /// A worker whose "child" is `sh -c SCRIPT` (as the child module's tests), and what it notified.
    fn worker(script: &str, timeout_ms: u64) -> (NvmlWorker, mpsc::Receiver<Notice>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let w = NvmlWorker::start(
            probe(script, timeout_ms, Duration::from_secs(600)),
            Duration::ZERO,
            Box::new(move |n| {
                let _ = tx.lock().unwrap().send(n);
            }),
        );
        (w, rx)
    }

    #[test]
    fn a_hung_scan_costs_a_cycle_at_most_the_patience_and_its_late_answer_wakes_a_relabel() {
        // Answers the first request at once, the second after 1.5 s (a slow, not dead,
        // driver), then again at once.
        let (w, rx) = worker(
            &format!(
                "read l; echo '{OK}'; read l; sleep 1.5; echo '{}'; while read l; do echo '{}'; done",
                OK.replace("550.54.15", "550.90.07"),
                OK.replace("550.54.15", "550.90.07")
            ),
            5000,
        );
        assert_eq!(w.scan().driver_version.as_deref(), Some("550.54.15"));
        let started = Instant::now();
        let second = w.scan();
        let waited = started.elapsed();
        assert!(
            waited >= PATIENCE && waited < PATIENCE + Duration::from_millis(400),
            "{waited:?}"
        );
        assert_eq!(
            second.driver_version.as_deref(),
            Some("550.54.15"),
            "the last answer stands in"
        );
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)),
            Ok(Notice::Changed("NVML answered after its cycle"))
        );
        assert_eq!(w.scan().driver_version.as_deref(), Some("550.90.07"));
        // An answer equal to the one used wakes nothing.
        assert_eq!(w.scan().driver_version.as_deref(), Some("550.90.07"));
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(300)),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
    }

    #[test]
    fn the_first_scan_is_waited_for_up_to_the_timeout_and_failures_are_reported() {
        let (w, rx) = worker("read l; sleep 0.8; echo 'not json'", 3000);
        let scan = w.scan();
        assert_eq!(scan.status.as_str(), "error", "{scan:?}");
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(5)),
            Ok(Notice::Failed {
                during: "scan",
                reason: FailureReason::Protocol
            })
        );
        let (w, _rx) = worker("read l; exec sleep 30", 300);
        let started = Instant::now();
        let scan = w.scan();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            scan.status,
            NvmlStatus::Error("/opt/lib/libnvidia-ml.so.1: timed out after 300ms".into())
        );
    }
}
