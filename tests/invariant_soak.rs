//! The invariant soak, short (30 s of faults; `SOAK_FAULT_SECS` for longer, `SOAK_SEED` to
//! replay a schedule): see `tests/invariant/mod.rs`. The long one is `cargo bench --bench
//! invariant`.

mod apiserver;
mod common;
mod invariant;
mod kube;

use std::time::Duration;

#[test]
fn the_agent_keeps_its_invariants_under_randomized_faults() {
    let secs = std::env::var("SOAK_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let report = invariant::run(invariant::seed(), Duration::from_secs(secs));
    eprintln!("{}", report.summary());
    assert!(
        report.violations.is_empty(),
        "{}\n{}",
        report.summary(),
        report.violations.join("\n")
    );
}
