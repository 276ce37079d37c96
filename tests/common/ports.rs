//! Ports for servers the tests start on a port they choose (the test API server's etcd and
//! server; a fake API server that is "down at start"), included by tests/kube and
//! tests/apiserver, each with its own range.
//!
//! Not ports `bind(0)` gives: those come from the kernel's ephemeral range (32768-60999 by
//! default), which every outgoing connection (the agents' own retries among them) also draws
//! from, so in the time between the check here and the server's own bind another socket could
//! take the port (etcd then exits with "address already in use", and the server is never
//! ready). Below that range, each process walks its own run of a range (from an offset its pid
//! picks), never the same port twice.

use std::sync::atomic::{AtomicU32, Ordering};

/// A port of `low..high` free now, the next after those `next` has counted.
pub fn walk(low: u32, high: u32, next: &AtomicU32) -> u16 {
    let span = high - low;
    let offset = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let port = (low + (offset + n) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {low}..{high}");
}
