//! A test API server built from Kubernetes' own code (tests/kube-apiserver): `k8s.io/apiserver`'s
//! request handlers, server-side apply field manager and ValidatingAdmissionPolicy plugin on etcd,
//! built once from Debian's Go packages and cached under `target/kube-apiserver/`.
//!
//! [`KubeApiServer::start`] fetches and builds it when needed (tests/debian-fetch.sh and
//! tests/kube-apiserver/build.sh, under a file lock so that parallel tests build it once:
//! tests/go_build), starts etcd and the server
//! on free loopback ports in a temporary directory, and hands out kubeconfigs and a small HTTP
//! client for identities it mints: an admin, the agent's service account with a token bound to a
//! node (`authentication.kubernetes.io/node-name`, as the kubelet binds it), any other user.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use serde_json::{Value, json};

/// The agent's service account, as the base installs it.
pub const SA: &str = "system:serviceaccount:gpu-labeler:gpu-labeler";
/// The prune Job's service account (deploy/prune).
pub const PRUNE_SA: &str = "system:serviceaccount:gpu-labeler:gpu-labeler-prune";

// Also loaded by the test files that build another Go program.
#[allow(clippy::duplicate_mod)]
#[path = "../go_build/mod.rs"]
mod go_build;

/// The test API server's sources (tests/kube-apiserver) and cache (target/kube-apiserver).
const SERVER: go_build::GoProgram = go_build::GoProgram {
    name: "kube-apiserver",
    what: "the test API server",
    build_inputs: &["build.sh", "main.go"],
    binary: "bin/testapiserver",
};

/// Where the fetched packages, the Go cache and the server binary are kept between runs.
pub fn cache_dir() -> PathBuf {
    SERVER.cache_dir()
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    })
}

/// The server binary, fetched and built on first use and when its sources change.
pub fn server_binary() -> PathBuf {
    static BUILT: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = built.as_ref() {
        return p.clone();
    }
    let binary = SERVER.build();
    *built = Some(binary.clone());
    binary
}

// Also loaded by tests/apiserver, where both are in a test: each walks its own range of ports.
#[allow(clippy::duplicate_mod)]
#[path = "../common/ports.rs"]
mod ports;

/// A port for etcd or the API server to listen on, free now (tests/common/ports.rs says why
/// not one `bind(0)` gives): 10,000-21,383 (tests/apiserver's are above).
fn free_port() -> u16 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    ports::walk(10_000, 21_384, &NEXT)
}

/// How many times `KubeApiServer::start` starts etcd and the server afresh when one of them
/// exits before the server is ready (a port taken under it).
const START_ATTEMPTS: u32 = 3;

/// One identity the server knows: its bearer token is its key in the token file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Who {
    pub user: String,
    pub groups: Vec<String>,
    /// The node bound into a service-account token (`authentication.kubernetes.io/node-name`).
    pub node: Option<String>,
}

impl Who {
    pub fn admin() -> Who {
        Who {
            user: "admin".into(),
            groups: vec!["system:masters".into()],
            node: None,
        }
    }

    /// A service account's token, bound to `node` when given (as a projected token in a pod).
    pub fn service_account(user: &str, node: Option<&str>) -> Who {
        let namespace = user.split(':').nth(2).unwrap_or("default");
        Who {
            user: user.into(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            node: node.map(str::to_string),
        }
    }

    /// The agent's token in its pod on `node`.
    pub fn agent(node: &str) -> Who {
        Who::service_account(SA, Some(node))
    }

    /// The prune Job's token (deploy/prune: its own service account, not bound to a node).
    pub fn prune() -> Who {
        Who::service_account(PRUNE_SA, None)
    }

    pub fn user(name: &str) -> Who {
        Who {
            user: name.into(),
            groups: Vec::new(),
            node: None,
        }
    }

    fn token(&self) -> String {
        let text = format!(
            "{}|{}|{}",
            self.user,
            self.groups.join(","),
            self.node.as_deref().unwrap_or("")
        );
        format!("t{:016x}", fnv1a(text.as_bytes()))
    }
}

/// An answer: status code and body (JSON, or a string when it is not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    pub code: u16,
    pub body: Value,
}

impl Answer {
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// The message of a `Status` answer.
    pub fn message(&self) -> String {
        self.body["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The message an admission policy denied the request with, or `None` when the answer is
    /// not a policy denial.
    pub fn denial(&self) -> Option<String> {
        let m = self.message();
        m.split_once(" denied request: ")
            .map(|(_, why)| why.to_string())
    }

    /// `Ok(())` when the request went through, `Err(denial)` when a policy denied it; panics on
    /// any other answer (the test's request was wrong, not the policy).
    pub fn decision(&self) -> Result<(), String> {
        if self.ok() {
            return Ok(());
        }
        match self.denial() {
            Some(why) => Err(why),
            None => panic!(
                "neither admitted nor denied by a policy: {} {}",
                self.code, self.body
            ),
        }
    }
}

/// One request as the server's handlers logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub verb: String,
    pub uri: String,
    pub user_agent: String,
    /// The client's address and port: one value per TCP connection.
    pub src: String,
    pub code: u16,
}

impl Logged {
    fn parse(line: &str) -> Option<Logged> {
        let field = |name: &str| -> Option<String> {
            let start = line.find(&format!(" {name}=\""))? + name.len() + 3;
            let end = start + line[start..].find('"')?;
            Some(line[start..end].to_string())
        };
        let code = line
            .split(" resp=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        Some(Logged {
            verb: field("verb")?,
            uri: field("URI")?,
            user_agent: field("userAgent").unwrap_or_default(),
            src: field("srcIP")?,
            code,
        })
    }

    /// A write: create, update, patch or delete.
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE" | "CREATE" | "UPDATE"
        )
    }
}

pub struct KubeApiServer {
    pub dir: tempfile::TempDir,
    pub port: u16,
    etcd: Child,
    /// In a mutex: [`KubeApiServer::terminate`] waits for it while other threads use the server.
    server: Mutex<Child>,
    tokens: Mutex<BTreeMap<String, Value>>,
    clients: Mutex<BTreeMap<PathBuf, kube::Client>>,
    ca: String,
    runtime: tokio::runtime::Runtime,
}

impl KubeApiServer {
    /// A fresh etcd and API server with nothing in them but what the server creates itself.
    /// Started again, on other ports, when etcd or the server exits before the server is ready.
    pub fn start() -> KubeApiServer {
        for attempt in 1..=START_ATTEMPTS {
            match KubeApiServer::try_start() {
                Ok(s) => return s,
                Err(why) if attempt < START_ATTEMPTS => {
                    eprintln!("test API server: start {attempt} failed, again: {why}");
                }
                Err(why) => panic!("{why}"),
            }
        }
        unreachable!("the last attempt panics")
    }

    fn try_start() -> Result<KubeApiServer, String> {
        let binary = server_binary();
        let etcd_bin = cache_dir().join("root/usr/bin/etcd");
        let dir = tempfile::tempdir().unwrap();
        let (client, peer, port) = (free_port(), free_port(), free_port());
        let log = |name: &str| File::create(dir.path().join(name)).unwrap();
        let etcd = Command::new(&etcd_bin)
            .args(["--data-dir", dir.path().join("etcd").to_str().unwrap()])
            .arg("--unsafe-no-fsync")
            .args([
                "--listen-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args([
                "--advertise-client-urls",
                &format!("http://127.0.0.1:{client}"),
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args([
                "--initial-cluster",
                &format!("default=http://127.0.0.1:{peer}"),
            ])
            .args(["--log-level", "warn"])
            .stdout(Stdio::null())
            .stderr(log("etcd.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", etcd_bin.display()));
        let tokens_path = dir.path().join("tokens.json");
        fs::write(&tokens_path, "{}").unwrap();
        let server = Command::new(&binary)
            .args(["--port", &port.to_string()])
            .args(["--etcd-servers", &format!("http://127.0.0.1:{client}")])
            .args(["--token-file", tokens_path.to_str().unwrap()])
            .args(["--cert-dir", dir.path().join("certs").to_str().unwrap()])
            // -v=3: the handlers log every request (verb, URI, User-Agent, client address,
            // answer), which the tests read as the server saw it.
            .arg("-v=3")
            .stdout(Stdio::null())
            .stderr(log("apiserver.log"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut s = KubeApiServer {
            dir,
            port,
            etcd,
            server: Mutex::new(server),
            tokens: Mutex::new(BTreeMap::new()),
            clients: Mutex::new(BTreeMap::new()),
            ca: String::new(),
            runtime,
        };
        let cert = s.dir.path().join("certs/apiserver.crt");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // The certificate is written while the server starts: use it only once it is
            // whole, and forget a kubeconfig and client made from an earlier read.
            if let Ok(pem) = fs::read(&cert)
                && String::from_utf8_lossy(&pem).contains("-----END CERTIFICATE-----")
            {
                s.ca = base64(&pem);
                let ready = s
                    .try_request(&Who::admin(), "GET", "/readyz", None)
                    .is_ok_and(|a| a.code == 200);
                if ready {
                    break;
                }
                let kubeconfig = s.kubeconfig(&Who::admin());
                s.clients.lock().unwrap().remove(&kubeconfig);
                let _ = fs::remove_file(kubeconfig);
            }
            if let Ok(Some(status)) = s.server.lock().unwrap().try_wait() {
                return Err(format!(
                    "the test API server exited ({status}):\n{}\netcd:\n{}",
                    s.log(),
                    fs::read_to_string(s.dir.path().join("etcd.log")).unwrap_or_default()
                ));
            }
            if let Ok(Some(status)) = s.etcd.try_wait() {
                return Err(format!(
                    "etcd exited ({status}):\n{}",
                    fs::read_to_string(s.dir.path().join("etcd.log")).unwrap_or_default()
                ));
            }
            assert!(
                Instant::now() < deadline,
                "the test API server was not ready in 60 s:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(s)
    }

    /// A fresh server with the `gpu-labeler` namespace and `policy` (a ValidatingAdmissionPolicy
    /// and its binding, as deploy/ ships them) installed, and enforced by the admission plugin.
    pub fn with_policy(policy: &[Value]) -> KubeApiServer {
        let s = KubeApiServer::start();
        s.create_namespace("gpu-labeler");
        s.add_policy(policy);
        s
    }

    /// Installs `policy` (a ValidatingAdmissionPolicy and its binding) and waits until the
    /// admission plugin enforces it.
    pub fn add_policy(&self, policy: &[Value]) {
        let s = self;
        for doc in policy {
            let path = object_path(doc);
            let doc = without_namespace_if_cluster_scoped(doc.clone(), &path);
            let a = s.apply(&Who::admin(), "kubectl", &path, &doc, true);
            assert!(a.ok(), "{path}: {} {}", a.code, a.body);
        }
        // The plugin loads policies through informers: wait until a request it must refuse is
        // refused (creating a Node is refused by the Node policies, another node's NodeFeature
        // by the NodeFeature policy).
        // The account the policy concerns: the service account its match condition names
        // (`gpu-labeler`, `gpu-labeler-prune`, or a Helm release's own name).
        let account = policy[0]["spec"]["matchConditions"][0]["expression"]
            .as_str()
            .and_then(|e| e.split("[^:]+:").nth(1))
            .and_then(|rest| rest.split('$').next())
            .expect("the policy's match condition names a service account");
        let agent = Who::service_account(
            &format!("system:serviceaccount:gpu-labeler:{account}"),
            Some("n1"),
        );
        let nodefeature = policy[0]["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.ends_with("-own-nodefeature"));
        s.wait_enforced(|| {
            if nodefeature {
                let probe = json!({"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
                                   "metadata": {"name": "probe", "namespace": "gpu-labeler"}});
                s.apply(&agent, "gpu-labeler", &object_path(&probe), &probe, true)
            } else {
                let probe =
                    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "probe"}});
                let a = s.request(
                    &agent,
                    "POST",
                    "/api/v1/nodes",
                    Some(("application/json", &probe)),
                );
                if a.ok() {
                    s.delete("/api/v1/nodes/probe");
                }
                a
            }
        });
    }

    /// The shipped Node policy (deploy/base/admission-policy.yaml).
    pub fn with_shipped_node_policy() -> KubeApiServer {
        KubeApiServer::with_policy(&shipped_node_policy(None))
    }

    /// Widens the installed Node policy's `allowedKey` (the base's, as shipped) by one more
    /// alternative (`amd\\.com/`), as README's "Writing labels in another namespace" does. The
    /// plugin sees it a moment later: see [`KubeApiServer::wait_admitted`].
    pub fn widen_node_policy(&self, alternative: &str) {
        let path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/gpu-labeler-own-node";
        let mut policy = self.get(path);
        let base =
            r"r'^(f:)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*(feature|profile)\.node\.kubernetes\.io/'";
        let variables = policy["spec"]["variables"].as_array_mut().unwrap();
        let allowed = variables
            .iter_mut()
            .find(|v| v["name"] == "allowedKey")
            .unwrap();
        assert_eq!(
            allowed["expression"], base,
            "the base policy's allowedKey changed"
        );
        allowed["expression"] = json!(format!(
            r"r'^(f:)?(([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*(feature|profile)\.node\.kubernetes\.io/|{alternative})'"
        ));
        let a = self.request(
            &Who::admin(),
            "PUT",
            path,
            Some(("application/json", &policy)),
        );
        assert!(a.ok(), "{}", a.body);
    }

    /// Waits until `who`'s dry-run request is admitted (a policy change has reached the plugin).
    pub fn wait_admitted(&self, who: &Who, path: &str, body: &Value) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let a = self.request(
                who,
                "PATCH",
                &format!("{path}?fieldManager=gpu-labeler&dryRun=All&force=true"),
                Some(("application/apply-patch+yaml", body)),
            );
            if a.ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "not admitted after 30 s: {}",
                a.body
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the server as the kubelet stops a pod (SIGTERM) and waits up to `within` for it to
    /// exit: how long it took, or `None` when it is still running.
    pub fn terminate(&self, within: Duration) -> Option<Duration> {
        let mut server = self.server.lock().unwrap();
        let pid = rustix::process::Pid::from_child(&server);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .unwrap_or_else(|e| panic!("SIGTERM to the test API server: {e}"));
        let start = Instant::now();
        while start.elapsed() < within {
            if let Ok(Some(_)) = server.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The server's log (for a failure message).
    pub fn log(&self) -> String {
        let text = fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Every request the server logged (its own loopback client's aside), in order.
    pub fn requests(&self) -> Vec<Logged> {
        let text = fs::read_to_string(self.dir.path().join("apiserver.log")).unwrap_or_default();
        text.lines()
            .filter(|l| l.contains("httplog.go") && l.contains("\"HTTP\""))
            .filter_map(Logged::parse)
            .filter(|r| !r.user_agent.starts_with("testapiserver/"))
            .collect()
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn register(&self, who: &Who) -> String {
        let token = who.token();
        let mut tokens = self.tokens.lock().unwrap();
        if !tokens.contains_key(&token) {
            let mut entry =
                json!({"username": who.user, "uid": format!("uid-{token}"), "groups": who.groups});
            if let Some(node) = &who.node {
                entry["extra"] = json!({"authentication.kubernetes.io/node-name": [node]});
            }
            tokens.insert(token.clone(), entry);
            let path = self.dir.path().join("tokens.json");
            let tmp = path.with_extension("tmp");
            fs::write(&tmp, serde_json::to_vec(&*tokens).unwrap()).unwrap();
            fs::rename(tmp, path).unwrap();
        }
        token
    }

    /// A kubeconfig for `who` (written once, in the server's directory).
    pub fn kubeconfig(&self, who: &Who) -> PathBuf {
        let token = self.register(who);
        let path = self.dir.path().join(format!("kubeconfig-{token}"));
        if !path.exists() {
            let mut f = File::create(&path).unwrap();
            write!(
                f,
                "apiVersion: v1\nkind: Config\nclusters: [{{name: t, cluster: {{server: \"{}\", certificate-authority-data: \"{}\"}}}}]\n\
                 users: [{{name: u, user: {{token: {token}}}}}]\ncontexts: [{{name: t, context: {{cluster: t, user: u}}}}]\ncurrent-context: t\n",
                self.url(),
                self.ca
            )
            .unwrap();
        }
        path
    }

    fn client(&self, who: &Who) -> kube::Client {
        let path = self.kubeconfig(who);
        if let Some(c) = self.clients.lock().unwrap().get(&path) {
            return c.clone();
        }
        let client = self.runtime.block_on(async {
            let kc = kube::config::Kubeconfig::read_from(&path).unwrap();
            let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        self.clients.lock().unwrap().insert(path, client.clone());
        client
    }

    /// One request as `who`, its transport error given back (a watch the server ends).
    pub fn try_request(
        &self,
        who: &Who,
        method: &str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<Answer, kube::Error> {
        let client = self.client(who);
        let mut req = http::Request::builder().method(method).uri(path);
        let bytes = match body {
            Some((content_type, value)) => {
                req = req.header("content-type", content_type);
                serde_json::to_vec(value).unwrap()
            }
            None => Vec::new(),
        };
        let req = req.body(kube::client::Body::from(bytes)).unwrap();
        self.runtime.block_on(async {
            let response = client.send(req).await?;
            let code = response.status().as_u16();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| kube::Error::Service(e.into()))?
                .to_bytes();
            let body = serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
            Ok(Answer { code, body })
        })
    }

    /// One request as `who`; `body` is sent with its content type.
    pub fn request(
        &self,
        who: &Who,
        method: &str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Answer {
        self.try_request(who, method, path, body)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}\n{}", self.log()))
    }

    /// Server-side apply of `object` by field manager `manager` as `who`.
    pub fn apply(
        &self,
        who: &Who,
        manager: &str,
        path: &str,
        object: &Value,
        force: bool,
    ) -> Answer {
        let force = if force { "&force=true" } else { "" };
        self.request(
            who,
            "PATCH",
            &format!("{path}?fieldManager={manager}{force}"),
            Some(("application/apply-patch+yaml", object)),
        )
    }

    /// A JSON merge patch by field manager `manager` as `who` (recorded as an `Update`).
    /// An admin's forced server-side apply of `doc` as `manager` (`kubectl apply
    /// --server-side`, a driver publishing its objects); it must be admitted.
    #[track_caller]
    pub fn admin_apply(&self, manager: &str, doc: &Value) {
        let a = self.admin_force_apply(manager, doc);
        assert!(a.ok(), "{}: {}", object_path(doc), a.body);
    }

    /// An admin's forced server-side apply of `doc` at its own path as `manager`, answered
    /// whatever the answer.
    pub fn admin_force_apply(&self, manager: &str, doc: &Value) -> Answer {
        self.apply(&Who::admin(), manager, &object_path(doc), doc, true)
    }

    /// An admin's merge patch of `path` as `manager` (`kubectl label`, `kubectl taint`, another
    /// controller); it must be admitted.
    #[track_caller]
    pub fn admin_patch(&self, manager: &str, path: &str, patch: &Value) {
        let a = self.merge_patch(&Who::admin(), manager, path, patch);
        assert!(a.ok(), "{path}: {}", a.body);
    }

    pub fn merge_patch(&self, who: &Who, manager: &str, path: &str, patch: &Value) -> Answer {
        self.request(
            who,
            "PATCH",
            &format!("{path}?fieldManager={manager}"),
            Some(("application/merge-patch+json", patch)),
        )
    }

    pub fn get(&self, path: &str) -> Value {
        let a = self.request(&Who::admin(), "GET", path, None);
        assert_eq!(a.code, 200, "GET {path}: {}", a.body);
        a.body
    }

    pub fn node(&self, name: &str) -> Value {
        self.get(&format!("/api/v1/nodes/{name}"))
    }

    pub fn labels(&self, name: &str) -> BTreeMap<String, String> {
        let node = self.node(name);
        node["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The label keys each field manager owns on the Node (from the real managedFields), with
    /// the manager's operation and subresource: `manager/Operation[/subresource]` -> keys.
    pub fn label_owners(&self, name: &str) -> BTreeMap<String, Vec<String>> {
        let node = self.node(name);
        let mut owners = BTreeMap::new();
        for m in node["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let mut who = format!(
                "{}/{}",
                m["manager"].as_str().unwrap(),
                m["operation"].as_str().unwrap()
            );
            if let Some(sub) = m["subresource"].as_str() {
                who = format!("{who}/{sub}");
            }
            let keys: Vec<String> = m["fieldsV1"]["f:metadata"]["f:labels"]
                .as_object()
                .map(|o| {
                    o.keys()
                        .filter(|k| *k != ".")
                        .map(|k| k.trim_start_matches("f:").to_string())
                        .collect()
                })
                .unwrap_or_default();
            if !keys.is_empty() {
                owners.insert(who, keys);
            }
        }
        owners
    }

    /// An admin's strategic merge patch of `path` (a Node's status) as `manager`; it must be
    /// admitted.
    #[track_caller]
    pub fn admin_status_patch(&self, manager: &str, path: &str, patch: &Value) {
        let a = self.request(
            &Who::admin(),
            "PATCH",
            &format!("{path}?fieldManager={manager}"),
            Some(("application/strategic-merge-patch+json", patch)),
        );
        assert!(a.ok(), "{path}: {}", a.body);
    }

    /// An admin's `POST` of `body` (JSON) to `path`.
    fn admin_create(&self, path: &str, body: &Value) -> Answer {
        self.request(
            &Who::admin(),
            "POST",
            path,
            Some(("application/json", body)),
        )
    }

    /// Creates a Node as the kubelet registers it: its labels owned by manager `kubelet`.
    pub fn create_node(&self, name: &str, labels: &[(&str, &str)]) {
        let labels: serde_json::Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}});
        let a = self.admin_create("/api/v1/nodes?fieldManager=kubelet", &node);
        assert!(a.ok(), "create node {name}: {} {}", a.code, a.body);
    }

    /// Creates a Namespace (a NodeFeature's namespace must exist for the admission plugin).
    pub fn create_namespace(&self, name: &str) {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        let a = self.admin_create("/api/v1/namespaces", &namespace);
        // 409: it exists already.
        let done = a.ok() || a.code == 409;
        assert!(done, "create namespace {name}: {} {}", a.code, a.body);
    }

    pub fn delete(&self, path: &str) {
        let a = self.request(&Who::admin(), "DELETE", path, None);
        assert!(
            a.ok() || a.code == 404,
            "DELETE {path}: {} {}",
            a.code,
            a.body
        );
    }

    /// Creates (or replaces) every object of a YAML stream as the admin, and for each
    /// ValidatingAdmissionPolicy waits until the admission plugin enforces it.
    pub fn apply_yaml(&self, text: &str) {
        let docs: Vec<Value> = text
            .split("\n---\n")
            .map(|doc| serde_saphyr::from_str::<Value>(doc).expect("YAML document"))
            .collect();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let path = object_path(&doc);
            let doc = without_namespace_if_cluster_scoped(doc, &path);
            let a = self.apply(&Who::admin(), "kubectl", &path, &doc, true);
            assert!(a.ok(), "apply {path}: {} {}", a.code, a.body);
        }
    }

    /// Waits until `probe` gets a denial from a policy (the plugin loads policies and bindings
    /// through informers, a moment after they are created).
    pub fn wait_enforced(&self, mut probe: impl FnMut() -> Answer) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if probe().denial().is_some() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the policy is not enforced after 30 s: {:?}",
                probe()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The shipped Node policy and its binding (deploy/base/admission-policy.yaml), changed by
/// `component`'s JSON patch when given (deploy/components/COMPONENT: a `test` of a variable's
/// name and a `replace` of its expression, applied as kustomize applies them): nvidia-gfd's
/// `allowedKey`, health-condition's `allowedConditionType`.
pub fn shipped_node_policy(component: Option<&str>) -> Vec<Value> {
    let read = |rel: &str| {
        let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
        text.split("\n---\n")
            .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
            .collect::<Vec<Value>>()
    };
    let mut docs = read("deploy/base/admission-policy.yaml");
    if let Some(component) = component {
        patch_policy(&mut docs, component);
    }
    docs
}

/// Applies deploy/components/COMPONENT's JSON patch of a policy among `docs` (a `test` of a
/// variable's name and a `replace` of its expression), as kustomize applies it.
fn patch_policy(docs: &mut [Value], component: &str) {
    let rel = format!("deploy/components/{component}/kustomization.yaml");
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(&rel)).unwrap();
    let kustomization: Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let patch = kustomization["patches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["target"]["kind"] == "ValidatingAdmissionPolicy")
        .unwrap_or_else(|| panic!("{component}: no patch of the policy"));
    let ops: Vec<Value> = serde_saphyr::from_str(patch["patch"].as_str().unwrap()).unwrap();
    let target = patch["target"]["name"]
        .as_str()
        .unwrap_or("gpu-labeler-own-node");
    let at = docs
        .iter()
        .position(|d| d["metadata"]["name"] == target && d["kind"] == "ValidatingAdmissionPolicy")
        .unwrap_or_else(|| panic!("{component}: no policy {target}"));
    let variables = &mut docs[at]["spec"]["variables"];
    for op in ops {
        let path = op["path"].as_str().unwrap();
        let (i, field) = path
            .strip_prefix("/spec/variables/")
            .and_then(|rest| rest.split_once('/'))
            .unwrap_or_else(|| panic!("unexpected path {path}"));
        let i: usize = i.parse().unwrap();
        match (op["op"].as_str().unwrap(), field) {
            ("test", "name") => assert_eq!(op["value"], variables[i]["name"]),
            ("replace", "expression") => variables[i]["expression"] = op["value"].clone(),
            other => panic!("unexpected op {other:?}"),
        }
    }
}

/// The shipped Node policy with deploy/components/device-taints' policy beside it, changed by
/// deploy/components/device-taints-noexecute when `no_execute`.
pub fn shipped_device_taint_policy(no_execute: bool) -> Vec<Value> {
    let rel = "deploy/components/device-taints/admission-policy.yaml";
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
    let mut docs = shipped_node_policy(None);
    docs.extend(
        text.split("\n---\n")
            .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{rel}: {e}"))),
    );
    if no_execute {
        patch_policy(&mut docs, "device-taints-noexecute");
    }
    docs
}

/// The shipped prune policy and its binding (deploy/prune/admission-policy.yaml).
pub fn shipped_prune_policy() -> Vec<Value> {
    let rel = "deploy/prune/admission-policy.yaml";
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap();
    text.split("\n---\n")
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap_or_else(|e| panic!("{rel}: {e}")))
        .collect()
}

/// The REST path of an object (core/v1, admissionregistration, nfd, resource.k8s.io; cluster or
/// namespaced).
pub fn object_path(doc: &Value) -> String {
    let api_version = doc["apiVersion"].as_str().expect("apiVersion");
    let kind = doc["kind"].as_str().expect("kind");
    let name = doc["metadata"]["name"].as_str().expect("metadata.name");
    let resource = match kind {
        "ValidatingAdmissionPolicy" => "validatingadmissionpolicies".to_string(),
        "DeviceClass" => "deviceclasses".to_string(),
        other => format!("{}s", other.to_lowercase()),
    };
    let root = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    // A cluster-scoped kind ignores a namespace in its metadata (kustomize's `namespace:` sets
    // one on kinds it does not know, such as the admission policies), as kubectl does.
    let cluster_scoped = matches!(
        kind,
        "Node"
            | "Namespace"
            | "ValidatingAdmissionPolicy"
            | "ValidatingAdmissionPolicyBinding"
            | "ResourceSlice"
            | "DeviceClass"
            | "DeviceTaintRule"
    );
    match doc["metadata"]["namespace"].as_str() {
        Some(ns) if !cluster_scoped => format!("{root}/namespaces/{ns}/{resource}/{name}"),
        _ => format!("{root}/{resource}/{name}"),
    }
}

/// The object as kubectl sends it to a cluster-scoped path: without a namespace.
pub fn without_namespace_if_cluster_scoped(mut doc: Value, path: &str) -> Value {
    if !path.contains("/namespaces/")
        && let Some(meta) = doc["metadata"].as_object_mut()
    {
        meta.remove("namespace");
    }
    doc
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        let server = self.server.get_mut().unwrap_or_else(|e| e.into_inner());
        for child in [server, &mut self.etcd] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `GPUHealthy` condition of `node` as `status`, `reason` and `message` joined by `sep`
/// (`None`: it has none).
pub fn gpu_healthy_condition(node: &Value, sep: &str) -> Option<String> {
    let c = node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "GPUHealthy")?;
    Some(
        ["status", "reason", "message"]
            .map(|f| c[f].as_str().unwrap_or(""))
            .join(sep),
    )
}
