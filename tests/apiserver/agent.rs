//! Running the real binary against a server: the agent process, its arguments and rule files,
//! and a minimal HTTP client for its health server.

use super::*;

/// A minimal HTTP/1.1 client: one request on a new connection. Returns (status, body).
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<(&str, &str)>,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some((ct, b)) = body {
        req.push_str(&format!(
            "Content-Type: {ct}\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some((_, b)) = body {
        req.push_str(b);
    }
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((code, body))
}

pub(crate) fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// A kubeconfig pointing at `url` over plain HTTP.
pub fn write_kubeconfig(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\n\
             users:\n- name: fake\n  user:\n    token: test-token\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n"
        ),
    )
    .expect("write kubeconfig");
    path
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub const MACHINE: &str = "dell-xe9680-8xh100";

/// The discovery flags of the Dell XE9680 fixture, without NVML.
pub fn fixture_args() -> Vec<String> {
    let f = repo().join("tests/fixtures");
    vec![
        "--sysfs-root".into(),
        f.join("sysfs").join(MACHINE).display().to_string(),
        "--proc-root".into(),
        f.join("proc").join(MACHINE).display().to_string(),
        "--pci-ids".into(),
        f.join("pci.ids").display().to_string(),
        "--no-nvml".into(),
    ]
}

/// Rules that make the agent report each kind of outcome on the fixture: one good label
/// (`test.nvidia`), one the validation rejects (`test.bad`), one rule that fails at evaluation
/// (`Gt` on a hex id). `tests/daemon_health.rs` and `tests/monitoring.rs` run the agent on them.
pub const OUTCOME_RULES: &str = r#"apiVersion: nfd.k8s-sigs.io/v1alpha1
kind: NodeFeatureRule
metadata:
  name: outcomes
spec:
  rules:
    - name: good
      labels: {test.nvidia: "true"}
      matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: In, value: ["10de"]}}}]
    - name: rejected
      labels: {test.bad: "not a valid value!"}
      matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: In, value: ["10de"]}}}]
    - name: failing
      labels: {test.never: "true"}
      matchFeatures: [{feature: pci.device, matchExpressions: {vendor: {op: Gt, value: ["5"]}}}]
"#;

/// NFD's built-in PCI labels of that fixture.
pub fn fixture_pci_labels() -> BTreeMap<String, String> {
    [
        "feature.node.kubernetes.io/pci-0300_102b.present",
        "feature.node.kubernetes.io/pci-0302_10de.present",
        "feature.node.kubernetes.io/pci-0302_10de.sriov.capable",
    ]
    .iter()
    .map(|k| (k.to_string(), "true".to_string()))
    .collect()
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A running `gpu-labeler run`, its stderr collected line by line.
pub struct Agent {
    pub child: Child,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
    /// What the agent's files live in (tests/support's spec directory), kept while it runs.
    pub keep: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl Agent {
    /// Starts `gpu-labeler ARGS` with a clean environment (no `GPU_LABELER_*`, no `NODE_NAME`,
    /// no `KUBERNETES_SERVICE_HOST`) plus `env`.
    pub fn start(args: &[String], env: &[(&str, &str)]) -> Agent {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gpu-labeler"));
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("GPU_LABELER_")
                || k == "NODE_NAME"
                || k == "KUBERNETES_SERVICE_HOST"
                || k == "KUBECONFIG"
                || k == "POD_NAMESPACE"
            {
                cmd.env_remove(k);
            }
        }
        cmd.args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn gpu-labeler");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                l.lock().expect("log").push(line);
            }
        });
        Agent {
            child,
            log,
            reader: Some(reader),
            keep: None,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn child_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().expect("log").clone()
    }

    pub fn log_text(&self) -> String {
        self.log().join("\n")
    }

    /// How many log lines contain `needle` (a thing said once per change is said once).
    pub fn count_lines(&self, needle: &str) -> usize {
        self.log().iter().filter(|l| l.contains(needle)).count()
    }

    /// Waits until a log line contains `needle`; panics with the log after `timeout`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let found = wait_for(timeout, || {
            self.log().into_iter().find(|l| l.contains(needle))
        });
        found.unwrap_or_else(|| {
            panic!(
                "no log line with {needle:?} within {timeout:?}; log:\n{}",
                self.log_text()
            )
        })
    }

    /// The address the health server bound (from its log line).
    pub fn health_addr(&self) -> SocketAddr {
        let line = self.wait_log("serving /healthz", Duration::from_secs(10));
        let url = line
            .split("http://")
            .nth(1)
            .expect("address in the log line")
            .trim();
        url.parse().expect("socket address")
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([format!("-{sig}"), self.pid().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig}");
    }

    /// Waits for the process to exit; returns its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> i32 {
        let code = wait_for(timeout, || {
            self.child
                .try_wait()
                .ok()
                .flatten()
                .map(|s| s.code().unwrap_or(-1))
        });
        let Some(code) = code else {
            let _ = self.child.kill();
            panic!("did not exit within {timeout:?}; log:\n{}", self.log_text());
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        assert!(
            !self.log_text().contains("panicked"),
            "gpu-labeler panicked:\n{}",
            self.log_text()
        );
        code
    }

    /// SIGTERM, then the exit code.
    pub fn stop(&mut self) -> i32 {
        self.signal("TERM");
        self.wait_exit(Duration::from_secs(10))
    }

    pub fn stdout(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut out) = self.child.stdout.take() {
            let _ = out.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `f` every 50 ms until it gives `Some`, or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `run` against `server` for node `node`: fixture discovery, `--no-default-rules`, 1 s interval,
/// health on a free port, plus `extra`.
pub fn run_args(kubeconfig: &Path, node: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec!["run".to_string()];
    a.extend(fixture_args());
    let kubeconfig = kubeconfig.display().to_string();
    let options = [
        ("--kubeconfig", kubeconfig.as_str()),
        ("--node-name", node),
        ("--interval", "1s"),
        ("--listen", "127.0.0.1:0"),
    ];
    a.push("--no-default-rules".into());
    a.extend(
        options
            .iter()
            .flat_map(|(k, v)| [k.to_string(), v.to_string()]),
    );
    // DRA's own tests read it (tests/daemon_dra.rs, the soak): the others count and fault the
    // Node's requests alone.
    a.push("--no-dra".into());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

/// A NodeFeatureRule file whose rules each label NVIDIA nodes: `(rule name, label name)`; the
/// label gets NFD's prefix and the value `true`.
pub fn rule_file(rules: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata:\n  name: test-rules\nspec:\n  rules:\n",
    );
    for (name, label) in rules {
        s.push_str(&format!(
            "    - name: {name}\n      labels:\n        {label}: \"true\"\n      matchFeatures:\n        - feature: pci.device\n          matchExpressions:\n            vendor: {{op: In, value: [\"10de\"]}}\n"
        ));
    }
    s
}

/// `feature.node.kubernetes.io/<name>` = `true` for each name.
pub fn rule_labels(names: &[&str]) -> BTreeMap<String, String> {
    names
        .iter()
        .map(|n| {
            (
                format!("feature.node.kubernetes.io/{n}"),
                "true".to_string(),
            )
        })
        .collect()
}

/// Union of label maps.
pub fn union(maps: &[&BTreeMap<String, String>]) -> BTreeMap<String, String> {
    maps.iter()
        .flat_map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())))
        .collect()
}

/// The PATCH requests that reached the handler (faults excluded).
pub fn writes(reqs: &[Recorded]) -> Vec<&Recorded> {
    reqs.iter().filter(|r| r.is_write()).collect()
}

/// `GET path` on the agent's health server: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, None).unwrap_or((0, String::new()))
}

/// The value of one sample line of /metrics (`name{labels}` exactly as printed).
pub fn metric(addr: SocketAddr, series: &str) -> Option<f64> {
    let (_, body) = get(addr, "/metrics");
    body.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
