//! The invariant soak, long (issue 35): `cargo bench --bench invariant` runs `SOAK_FAULT_SECS`
//! (default 600) of randomized faults from every side at once against the real daemon and
//! Kubernetes' own API server, checking the invariants all along (see
//! `tests/invariant/mod.rs`), and prints the summary BENCHMARKS.md records. `SOAK_SEED`
//! replays a schedule. Under `cargo test --benches` it runs 5 seconds of faults, so CI keeps
//! the harness working (the test `invariant_soak` runs 30).

#[path = "../tests/apiserver/mod.rs"]
mod apiserver;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/invariant/mod.rs"]
mod invariant;
#[path = "../tests/kube/mod.rs"]
mod kube;

use std::time::Duration;

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let secs = std::env::var("SOAK_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full { 600 } else { 5 });
    let report = invariant::run(invariant::seed(), Duration::from_secs(secs));
    println!("invariant soak, {secs} s of faults: {}", report.summary());
    if !report.violations.is_empty() {
        eprintln!("{}", report.violations.join("\n"));
        std::process::exit(1);
    }
}
