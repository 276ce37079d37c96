//! NVML out of process. A driver can hang in `nvmlInit` (a wedged GPU, one fallen off the bus),
//! crash inside a call, or end its caller; none of that may cost more than NVML's own features.
//! So the agent re-executes itself (`gpu-labeler __nvml-child LIB`) to load NVML there, and asks
//! it for one `NvmlScan` per line on a pipe. The parent bounds every answer in time and size and
//! kills the child on expiry; a hang, a signal, an exit or garbage is a failed scan (status
//! `error`, the GPUs fall back to sysfs) and the next scan starts a new child.
//!
//! While NVML fails, its last good answer stands in for up to the grace period (status `stale`),
//! so that a wedged driver does not take pods' placement labels away at once.
//!
//! The child keeps one `Nvml` for its life, as the in-process library did: NVML initialises once,
//! not once per scan.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{NvmlChoice, NvmlHealth, NvmlLibrary, NvmlProbe, NvmlScan, NvmlStatus};

/// The hidden subcommand the child runs as: `EXE __nvml-child LIB`.
pub const CHILD_COMMAND: &str = "__nvml-child";

/// An answer is a few KiB per GPU; anything near this is not an answer.
const MAX_ANSWER: u64 = 4 << 20;

/// How long a child that closed its output may take to exit.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// Why a scan in the child failed (`gpu_labeler_nvml_failures_total{reason}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// The child could not be started.
    Spawn,
    /// No answer within the timeout: the child was killed.
    Timeout,
    /// The child died of a signal.
    Crash,
    /// The child exited.
    Exit,
    /// The answer was not one (not JSON, too long).
    Protocol,
}

impl FailureReason {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [FailureReason; 5] = [
        FailureReason::Spawn,
        FailureReason::Timeout,
        FailureReason::Crash,
        FailureReason::Exit,
        FailureReason::Protocol,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Spawn => "spawn",
            FailureReason::Timeout => "timeout",
            FailureReason::Crash => "crash",
            FailureReason::Exit => "exit",
            FailureReason::Protocol => "protocol",
        }
    }
}

/// A request the child did not answer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: FailureReason,
    pub message: String,
}

/// A running child and the line reader on its output.
struct Running {
    process: Child,
    stdin: ChildStdin,
    answers: Receiver<Result<String, String>>,
}

/// NVML in a child process: an `NvmlProbe` whose every scan is bounded by `timeout`.
pub struct IsolatedNvml {
    choice: NvmlChoice,
    exe: PathBuf,
    timeout: Duration,
    grace: Duration,
    child: Option<Running>,
    /// NVML's last good answer, when it came (for the grace period, and as a time of day
    /// for the stale status: a message that stays the same while NVML stays down).
    last_good: Option<(Instant, std::time::SystemTime, NvmlScan)>,
    last_failure: Option<FailureReason>,
    /// What the child's health checks need (`sources.health`), passed on its command line.
    health: NvmlHealth,
    /// Each GPU's last checked answer, by address (else UUID): the plausibility check's "last
    /// good value" of a GPU that a scan in between left out (lost and back) is its own.
    known_gpus: Vec<super::NvmlGpu>,
}

impl IsolatedNvml {
    /// `exe` is this program (`std::env::current_exe()`), run as `exe __nvml-child LIB`.
    pub fn new(choice: NvmlChoice, exe: PathBuf, timeout: Duration, grace: Duration) -> Self {
        IsolatedNvml {
            choice,
            exe,
            timeout,
            grace,
            child: None,
            last_good: None,
            last_failure: None,
            health: NvmlHealth::default(),
            known_gpus: Vec::new(),
        }
    }

    /// With these health settings (`sources.health`) instead of the defaults.
    pub fn with_health(mut self, health: NvmlHealth) -> Self {
        self.health = health;
        self
    }

    /// Whether `other` would run the same library the same way (the daemon keeps its child
    /// across cycles until the config says otherwise; new health settings start a new child,
    /// and with it a new XID event set).
    pub fn same_settings(&self, other: &IsolatedNvml) -> bool {
        (
            &self.choice,
            &self.exe,
            self.timeout,
            self.grace,
            &self.health,
        ) == (
            &other.choice,
            &other.exe,
            other.timeout,
            other.grace,
            &other.health,
        )
    }

    /// Why the last scan failed in the child, if it did and this was not asked since.
    pub fn take_failure(&mut self) -> Option<FailureReason> {
        self.last_failure.take()
    }

    /// The light check (`NvmlLibrary::check`) in the child: `None` when NVML is disabled,
    /// else the state it saw or why the child did not answer.
    pub fn check(&mut self) -> Option<Result<String, Failure>> {
        let NvmlChoice::Library(lib) = self.choice.clone() else {
            return None;
        };
        Some(self.request::<String>(&lib, "check"))
    }

    /// How long one request may take, its answer read and a child that ended reaped.
    pub fn bound(&self) -> Duration {
        self.timeout + EXIT_WAIT
    }

    /// The child's process id while one runs (tests look at it).
    pub fn child_id(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.process.id())
    }

    fn spawn(&self, lib: &Path) -> Result<Running, Failure> {
        let xids: Vec<String> = self
            .health
            .critical_xids
            .iter()
            .map(u32::to_string)
            .collect();
        let mut process = Command::new(&self.exe)
            .arg(CHILD_COMMAND)
            .arg(lib)
            .arg(format!("--critical-xids={}", xids.join(",")))
            .arg(format!(
                "--clear-after-ms={}",
                self.health.clear_after.as_millis()
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| Failure {
                reason: FailureReason::Spawn,
                message: format!("cannot start {} {CHILD_COMMAND}: {e}", self.exe.display()),
            })?;
        let stdin = process.stdin.take().expect("piped");
        let stdout = process.stdout.take().expect("piped");
        let (tx, answers) = mpsc::channel();
        // Ends when the child closes its output (exit, crash, kill).
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                let read = (&mut reader)
                    .take(MAX_ANSWER + 1)
                    .read_until(b'\n', &mut line);
                let answer = match read {
                    Ok(0) => return,
                    Ok(_) if line.len() as u64 > MAX_ANSWER => {
                        Err(format!("an answer longer than {} MiB", MAX_ANSWER >> 20))
                    }
                    Ok(_) => Ok(String::from_utf8_lossy(&line).into_owned()),
                    Err(e) => Err(format!("reading its answer: {e}")),
                };
                let stop = answer.is_err();
                if tx.send(answer).is_err() || stop {
                    return;
                }
            }
        });
        Ok(Running {
            process,
            stdin,
            answers,
        })
    }

    fn ask(&mut self, lib: &Path) -> Result<NvmlScan, Failure> {
        self.request(lib, "scan")
    }

    /// Sends one request line (`scan`, `check`) and reads its one JSON answer, bounded by the
    /// timeout.
    fn request<T: serde::de::DeserializeOwned>(
        &mut self,
        lib: &Path,
        what: &str,
    ) -> Result<T, Failure> {
        if self.child.is_none() {
            self.child = Some(self.spawn(lib)?);
        }
        let running = self.child.as_mut().expect("set above");
        if running
            .stdin
            .write_all(format!("{what}\n").as_bytes())
            .and_then(|()| running.stdin.flush())
            .is_err()
        {
            return Err(self.reap());
        }
        match running.answers.recv_timeout(self.timeout) {
            Ok(Ok(line)) => serde_json::from_str::<T>(&line).map_err(|e| {
                self.kill();
                Failure {
                    reason: FailureReason::Protocol,
                    message: format!(
                        "sent something that is not an answer ({e}): {:?}",
                        crate::validate::elide(line.trim_end(), 80)
                    ),
                }
            }),
            Ok(Err(message)) => {
                self.kill();
                Err(Failure {
                    reason: FailureReason::Protocol,
                    message: format!("sent {message}"),
                })
            }
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(Failure {
                    reason: FailureReason::Timeout,
                    message: format!(
                        "timed out after {}",
                        humantime::format_duration(self.timeout)
                    ),
                })
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.reap()),
        }
    }

    /// The child closed its output: it is ending. Says how.
    fn reap(&mut self) -> Failure {
        let mut running = self.child.take().expect("a child ran");
        match wait_bounded(&mut running.process, EXIT_WAIT) {
            Some(status) => describe(status),
            None => {
                let _ = running.process.kill();
                let _ = running.process.wait();
                Failure {
                    reason: FailureReason::Protocol,
                    message: "closed its output without exiting".into(),
                }
            }
        }
    }

    fn kill(&mut self) {
        if let Some(mut running) = self.child.take() {
            let _ = running.process.kill();
            let _ = running.process.wait();
        }
    }

    /// Keeps each GPU of `scan` (checked) as its last answer, in place of the one before.
    fn remember_gpus(&mut self, scan: &NvmlScan) {
        for g in &scan.gpus {
            let same = |k: &super::NvmlGpu| {
                (g.address.is_some() && k.address == g.address)
                    || (g.address.is_none() && g.uuid.is_some() && k.uuid == g.uuid)
            };
            match self.known_gpus.iter_mut().find(|k| same(k)) {
                Some(k) => *k = g.clone(),
                None => self.known_gpus.push(g.clone()),
            }
        }
        // Bounded as NVML's list is (plausible::MAX_GPUS): the oldest go first.
        let excess = self
            .known_gpus
            .len()
            .saturating_sub(super::plausible::MAX_GPUS);
        self.known_gpus.drain(..excess);
    }

    /// A scan that did not answer `ok`: NVML's last good answer while within the grace period,
    /// else the failure itself.
    fn degraded(&self, why: String, failed: NvmlScan) -> NvmlScan {
        match &self.last_good {
            Some((at, when, good)) if at.elapsed() <= self.grace => NvmlScan {
                status: NvmlStatus::Stale(format!(
                    "{why}; keeping NVML's last good answer, of {} ({})",
                    humantime::format_rfc3339_seconds(*when),
                    if self.grace == crate::config::FOREVER {
                        "while its GPUs are on the PCI bus".to_string()
                    } else {
                        format!("for up to {}", humantime::format_duration(self.grace))
                    }
                )),
                warnings: Vec::new(),
                ..good.clone()
            },
            _ => failed,
        }
    }
}

impl NvmlProbe for IsolatedNvml {
    fn scan(&mut self) -> NvmlScan {
        let lib = match &self.choice {
            NvmlChoice::Disabled => return NvmlScan::unavailable(super::DISABLED),
            NvmlChoice::Library(p) => p.clone(),
        };
        match self.ask(&lib) {
            Ok(scan) => {
                self.last_failure = None;
                match &scan.status {
                    NvmlStatus::Ok => {
                        // What the driver says is checked against what hardware can be: an
                        // implausible value never becomes a label, the last good one stands.
                        let mut scan = scan;
                        let reference = self.last_good.as_ref().map(|(_, _, s)| NvmlScan {
                            gpus: self.known_gpus.clone(),
                            ..s.clone()
                        });
                        let refused = super::plausible::check(&mut scan, reference.as_ref());
                        scan.warnings.extend(refused);
                        self.remember_gpus(&scan);
                        self.last_good =
                            Some((Instant::now(), std::time::SystemTime::now(), scan.clone()));
                        scan
                    }
                    NvmlStatus::Error(m) | NvmlStatus::Unavailable(m) | NvmlStatus::Stale(m) => {
                        self.degraded(m.clone(), scan.clone())
                    }
                }
            }
            Err(f) => {
                self.last_failure = Some(f.reason);
                let why = format!("{}: {}", lib.display(), f.message);
                let failed = NvmlScan {
                    status: NvmlStatus::Error(why.clone()),
                    ..NvmlScan::unavailable("")
                };
                self.degraded(why, failed)
            }
        }
    }
}

impl Drop for IsolatedNvml {
    fn drop(&mut self) {
        // The child holds nothing worth a clean exit (NVML only reads): ended at once, so a
        // printing command does not wait for it.
        self.kill();
    }
}

fn wait_bounded(process: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        match process.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(5)),
            _ => return None,
        }
    }
}

fn describe(status: ExitStatus) -> Failure {
    use std::os::unix::process::ExitStatusExt;
    match (status.signal(), status.code()) {
        (Some(sig), _) => Failure {
            reason: FailureReason::Crash,
            message: format!("killed by {}", signal_name(sig)),
        },
        (None, Some(code)) => Failure {
            reason: FailureReason::Exit,
            message: format!("exited with status {code}"),
        },
        (None, None) => Failure {
            reason: FailureReason::Exit,
            message: format!("ended ({status})"),
        },
    }
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// `serve` with the health settings of its command line (`--critical-xids 48,79`,
/// `--clear-after-ms 300000`; the defaults when left out). A list that does not parse is a
/// usage error (exit 2): the parent wrote it.
pub fn serve_args(lib: PathBuf, critical_xids: &str, clear_after_ms: Option<u64>) -> u8 {
    let mut health = NvmlHealth::default();
    if let Some(ms) = clear_after_ms {
        health.clear_after = Duration::from_millis(ms);
    }
    let parsed: Result<Vec<u32>, _> = critical_xids
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse::<u32>())
        .collect();
    match parsed {
        Ok(mut xids) => {
            xids.sort_unstable();
            xids.dedup();
            health.critical_xids = xids;
        }
        Err(e) => {
            crate::error::print_error(&format!(
                "{CHILD_COMMAND}: --critical-xids {critical_xids:?}: {e}"
            ));
            return 2;
        }
    }
    serve(lib, health)
}

/// The child: loads `lib` once and answers each `scan` (or `check`) line on standard input with
/// one JSON line. Answers go to a private copy of standard output; the process's own standard output is
/// pointed at standard error first, so that a library that prints cannot corrupt an answer.
/// Returns the exit code (0 at end of input).
pub fn serve(lib: PathBuf, health: NvmlHealth) -> u8 {
    // A child hung in the driver must not outlive the agent. (PR_SET_PDEATHSIG would follow
    // the parent *thread*, and the agent spawns from a pool thread that may end.)
    let parent = rustix::process::getppid();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            if rustix::process::getppid() != parent {
                std::process::exit(0);
            }
        }
    });
    let answers = match rustix::io::dup(std::io::stdout())
        .and_then(|fd| rustix::stdio::dup2_stdout(std::io::stderr()).map(|()| fd))
    {
        Ok(fd) => fd,
        Err(e) => {
            crate::error::print_error(&format!(
                "{CHILD_COMMAND}: cannot set up the answer pipe: {e}"
            ));
            return 3;
        }
    };
    let mut out = std::io::BufWriter::new(std::fs::File::from(answers));
    let mut nvml = NvmlLibrary::with_health(NvmlChoice::Library(lib), health);
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let written = match line.trim() {
            "scan" => serde_json::to_writer(&mut out, &nvml.scan()),
            "check" => serde_json::to_writer(&mut out, &nvml.check()),
            _ => continue,
        };
        let written = written
            .map_err(std::io::Error::other)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if written.is_err() {
            break;
        }
    }
    0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A stand-in child: `sh -c SCRIPT` receives `__nvml-child LIB` as `$0 $1`.
    pub(crate) fn probe(script: &str, timeout_ms: u64, grace: Duration) -> IsolatedNvml {
        let dir = tempfile::tempdir().unwrap().keep();
        let exe = dir.join("child.sh");
        std::fs::write(&exe, format!("#!/bin/sh\n{script}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        IsolatedNvml::new(
            NvmlChoice::Library("/opt/lib/libnvidia-ml.so.1".into()),
            exe,
            Duration::from_millis(timeout_ms),
            grace,
        )
    }

    pub(crate) const OK_ANSWER: &str = r#"{"status":"Ok","driver_version":"550.54.15","cuda_version":"12.4","gpus":[],"warnings":[]}"#;

    #[test]
    fn an_answer_is_a_scan() {
        let mut p = probe(
            &format!("while read l; do echo '{OK_ANSWER}'; done"),
            5000,
            Duration::ZERO,
        );
        let scan = p.scan();
        assert_eq!(scan.status, NvmlStatus::Ok);
        assert_eq!(scan.driver_version.as_deref(), Some("550.54.15"));
        let pid = p.child_id();
        assert_eq!(p.scan().status, NvmlStatus::Ok);
        assert_eq!(p.child_id(), pid, "one child answers every scan");
        assert_eq!(p.take_failure(), None);
    }

    #[test]
    fn garbage_is_a_protocol_failure() {
        let mut p = probe("read l; echo 'hello from the driver'", 5000, Duration::ZERO);
        let scan = p.scan();
        assert_eq!(
            scan.status,
            NvmlStatus::Error(
                "/opt/lib/libnvidia-ml.so.1: sent something that is not an answer (expected value at line 1 column 1): \"hello from the driver\"".into()
            )
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Protocol));
        assert_eq!(p.child_id(), None);
    }

    #[test]
    fn an_endless_answer_is_cut() {
        let mut p = probe("read l; yes x | tr -d '\\n'", 20_000, Duration::ZERO);
        let scan = p.scan();
        assert_eq!(
            scan.status,
            NvmlStatus::Error(
                "/opt/lib/libnvidia-ml.so.1: sent an answer longer than 4 MiB".into()
            )
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Protocol));
    }

    #[test]
    fn a_hang_times_out_and_the_next_scan_starts_a_new_child() {
        let mut p = probe("read l; exec sleep 30", 200, Duration::ZERO);
        let start = Instant::now();
        let scan = p.scan();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(
            scan.status,
            NvmlStatus::Error("/opt/lib/libnvidia-ml.so.1: timed out after 200ms".into())
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Timeout));
        assert_eq!(p.child_id(), None, "killed");
        p.scan();
        assert_eq!(
            p.take_failure(),
            Some(FailureReason::Timeout),
            "tried again"
        );
    }

    #[test]
    fn exit_and_signal_are_named() {
        let mut p = probe("read l; exit 7", 5000, Duration::ZERO);
        assert_eq!(
            p.scan().status,
            NvmlStatus::Error("/opt/lib/libnvidia-ml.so.1: exited with status 7".into())
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Exit));
        let mut p = probe("read l; kill -SEGV $$", 5000, Duration::ZERO);
        assert_eq!(
            p.scan().status,
            NvmlStatus::Error("/opt/lib/libnvidia-ml.so.1: killed by SIGSEGV".into())
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Crash));
    }

    #[test]
    fn a_missing_program_is_a_spawn_failure() {
        let mut p = IsolatedNvml::new(
            NvmlChoice::Library("/opt/lib/libnvidia-ml.so.1".into()),
            "/nonexistent/gpu-labeler".into(),
            Duration::from_secs(1),
            Duration::ZERO,
        );
        assert_eq!(
            p.scan().status,
            NvmlStatus::Error(
                "/opt/lib/libnvidia-ml.so.1: cannot start /nonexistent/gpu-labeler __nvml-child: No such file or directory (os error 2)".into()
            )
        );
        assert_eq!(p.take_failure(), Some(FailureReason::Spawn));
    }

    /// A GPU lost for a scan and back with an implausible memory size keeps its own last good
    /// value: the scan in between, which left it out, is not its last answer (#44).
    #[test]
    fn a_gpu_lost_and_back_with_garbage_keeps_its_own_last_good_value() {
        let gpu = |memory: u64| {
            format!(
                r#"{{"index":3,"address":{{"domain":0,"bus":93,"device":0,"function":0}},"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-3","memory_bytes":{memory},"compute":[9,0],"mig_enabled":false,"vgpu_guest":false,"mig_devices":[]}}"#
            )
        };
        let answer = |gpus: &str| {
            format!(
                r#"{{"status":"Ok","driver_version":"550.54.15","cuda_version":"12.4","gpus":[{gpus}],"warnings":[]}}"#
            )
        };
        let good = 85_520_809_984u64;
        let script = format!(
            "read l; echo '{}'; read l; echo '{}'; read l; echo '{}'; exec sleep 30",
            answer(&gpu(good)),
            answer(""),
            answer(&gpu(1 << 50)),
        );
        let mut p = probe(&script, 2000, Duration::ZERO);
        let memory = |s: &NvmlScan| s.gpus.iter().map(|g| g.memory_bytes).collect::<Vec<_>>();
        assert_eq!(memory(&p.scan()), [Some(good)]);
        assert_eq!(memory(&p.scan()), []);
        let back = p.scan();
        assert_eq!(memory(&back), [Some(good)]);
        assert_eq!(
            back.warnings,
            [
                "NVML GPU 3 (0000:5d:00.0): the total memory is not plausible (between 64 MiB and 1 TiB); its last good value is kept"
            ]
        );
    }

    #[test]
    fn within_the_grace_period_the_last_good_answer_stands() {
        // The first scan answers; the second finds the child hung.
        let script = format!("read l; echo '{OK_ANSWER}'; exec sleep 30");
        let mut p = probe(&script, 300, Duration::from_secs(600));
        assert_eq!(p.scan().status, NvmlStatus::Ok);
        let when = p.last_good.as_ref().map(|(_, w, _)| *w).unwrap();
        let stale = p.scan();
        // The answer's time of day, not its age: the same words on every scan while NVML
        // stays down, so that the warning is said once, not every cycle.
        let said = format!(
            "/opt/lib/libnvidia-ml.so.1: timed out after 300ms; keeping NVML's last good answer, of {} (for up to 10m)",
            humantime::format_rfc3339_seconds(when)
        );
        assert_eq!(stale.status, NvmlStatus::Stale(said));
        assert_eq!(stale.driver_version.as_deref(), Some("550.54.15"));
        let mut none = probe(&script, 300, Duration::ZERO);
        assert_eq!(none.scan().status, NvmlStatus::Ok);
        assert_eq!(none.scan().status.as_str(), "error", "no grace");
    }

    #[test]
    fn new_health_settings_are_new_settings_and_reach_the_child() {
        // The stand-in child answers with its arguments as a warning.
        let script = r#"while read l; do printf '{"status":"Ok","driver_version":null,"cuda_version":null,"gpus":[],"warnings":["%s %s"]}\n' "$3" "$4"; done"#;
        let a = probe(script, 5000, Duration::ZERO);
        let (exe, choice) = (a.exe.clone(), a.choice.clone());
        let same = IsolatedNvml::new(choice.clone(), exe.clone(), a.timeout, a.grace);
        assert!(a.same_settings(&same));
        let mut other =
            IsolatedNvml::new(choice, exe, a.timeout, a.grace).with_health(NvmlHealth {
                critical_xids: vec![48, 79],
                clear_after: Duration::from_secs(60),
            });
        assert!(!a.same_settings(&other));
        assert_eq!(
            other.scan().warnings,
            ["--critical-xids=48,79 --clear-after-ms=60000"]
        );
    }

    #[test]
    fn disabled_starts_nothing() {
        let mut p = IsolatedNvml::new(
            NvmlChoice::Disabled,
            "/nonexistent".into(),
            Duration::from_secs(1),
            Duration::ZERO,
        );
        assert_eq!(p.scan(), NvmlScan::unavailable("disabled"));
        assert_eq!(p.child_id(), None);
    }
}
