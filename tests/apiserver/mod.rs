//! A fake Kubernetes API server for the daemon's tests and the fleet bench (which includes this
//! file with `#[path]`), plus the helpers that run the real binary against it.
//!
//! It implements what the agent relies on, with the real semantics:
//! - `GET /api/v1/nodes?watch=true&fieldSelector=metadata.name=N`: a watch of that Node
//!   (ADDED, then MODIFIED on every change, until `timeoutSeconds`);
//! - `GET /api/v1/nodes` (a list, `limit` and `continue` paged, name order) and
//!   `GET /api/v1/nodes/{name}`: the Node with `metadata.labels`, `annotations`,
//!   `managedFields` (FieldsV1, per manager and operation) and `resourceVersion`;
//! - `PATCH` with `application/apply-patch+yaml` (JSON or YAML body), `fieldManager` and `force`:
//!   each manager owns the label and annotation keys it applies; a key it stops applying is
//!   removed unless another manager owns it too; a key owned by another manager with a different
//!   value is a 409 Conflict with a Status body like the real one (unless `force`);
//! - `PATCH` with `application/merge-patch+json` from another controller (operation `Update`);
//! - `resourceVersion` bumps on every change and not on a no-op apply;
//! - `GET`/apply `PATCH` of NFD `NodeFeature` objects under
//!   `/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{ns}/nodefeatures/{name}` (created by apply).
//!
//! Faults can be injected: N answers of 500, N of 409, N slow answers, N dropped connections,
//! and "down at start" (reserve a port, start the server on it later). Every request is
//! recorded (method, path, query, content type, body, the fault it got).
//!
//! In proxy mode ([`FakeApiServer::proxy_to`]) it holds no objects: it injects its faults and
//! forwards every other request to Kubernetes' own test API server (tests/kube), which is how
//! the daemon's fault tests meet real semantics. Its own imitation is left to the tests that
//! need numbers or shapes the real server cannot be made to produce here (the fleet and soak
//! benches' thousand agents, the health and event tests that count its recorded requests).
//!
//! Simplifications: apply does not create Nodes (kubelet does), ownership is tracked only for
//! `metadata.labels` and `metadata.annotations`, and NodeFeature objects have a single owner.
//!
//! Split by concern: `state` (the objects and faults), `server` (serving them), `proxy` (forwarding
//! to the real server), `agent` (the binary run against either).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;

// Also loaded by tests/kube, where both are in a test: each walks its own range of ports.
#[allow(clippy::duplicate_mod)]
#[path = "../common/ports.rs"]
mod ports;

mod agent;
mod proxy;
mod server;
mod state;

pub use agent::*;
use proxy::*;
pub use server::*;
pub use state::*;
