//! End-to-end tests of drover live in `tests/tests/`; this library holds their shared
//! harness as it grows (servers on `127.0.0.1:0`, temp data dirs, polling with deadlines).

pub use drover_core as core;
