//! Fleet simulation (written below).

fn main() {}
