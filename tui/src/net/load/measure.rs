//! The console's initial load, timed phase by phase, for `drover bench`.

use super::{DecodeClock, read};
use crate::app::{App, Input, Update};
use crate::error::ConsoleError;
use std::time::{Duration, Instant};

/// How long the console's initial load took, phase by phase, and what it loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitialLoad {
    /// Reading every list, from the first call to the last answer decoded (wall clock).
    pub read: Duration,
    /// Of `read`, the time spent decoding answers into the console's rows, summed over the
    /// reads that ran at once (so on several cores it may exceed `read`).
    pub decode: Duration,
    /// Taking the loaded state over and drawing the first frame of the nodes view (its
    /// rows sorted from scratch), on the console's own thread.
    pub build: Duration,
    pub nodes: usize,
    pub jobs: usize,
    pub allocs: usize,
    pub evals: usize,
    /// How much this process's resident memory grew from before the load to after the
    /// first frame, with the loaded state still held: the console's memory for that state.
    /// `None` where the process's resident size cannot be read (not Linux).
    pub resident_growth_kib: Option<u64>,
}

impl InitialLoad {
    /// From the first call to the first frame.
    pub fn total(&self) -> Duration {
        self.read + self.build
    }
}

/// Loads the cluster from the server at `address` (plain gRPC, `host:port` or a URL,
/// several comma-separated as for the console) exactly as the console does when it starts,
/// through the same channels and reads, then builds the console's state from it and draws
/// its first frame into an 80x24 screen in memory; and says how long each part took. For
/// `drover bench`: the console's start-up time against a real server of a given size.
/// `token` is the ACL token's secret, as `--token` gives it to the console.
pub async fn measure_initial_load(
    address: &str,
    token: Option<String>,
) -> Result<InitialLoad, ConsoleError> {
    let servers = crate::net::Servers::new(address, &Default::default(), token.as_deref())?;
    // Made before the load starts, as the console makes it at start-up.
    let mut app = App::new(address, false, crate::now());
    app.handle(Input::Resize {
        width: 80,
        height: 24,
    });
    let clock = DecodeClock::default();
    let resident_before = resident_kib();
    let started = Instant::now();
    let snapshot = read(&servers.current().1.unary, &clock)
        .await
        .map_err(|status| ConsoleError::Load(Box::new(status)))?;
    let read_time = started.elapsed();
    let (nodes, jobs, allocs, evals) = (
        snapshot.nodes.len(),
        snapshot.jobs.len(),
        snapshot.allocs.len(),
        snapshot.evals.len(),
    );
    let started = Instant::now();
    app.handle(Input::Update(Update::Snapshot(Box::new(snapshot))));
    app.prepare_frame();
    let theme = crate::ui::Theme { color: true };
    let drawn = ratatui::Terminal::new(ratatui::backend::TestBackend::new(80, 24)).and_then(
        |mut screen| {
            screen
                .draw(|frame| crate::ui::draw(frame, &app, &theme))
                .map(|_| ())
        },
    );
    // A screen in memory cannot fail to draw.
    let Ok(()) = drawn;
    let build = started.elapsed();
    let resident_growth_kib = resident_before
        .zip(resident_kib())
        .map(|(before, after)| after.saturating_sub(before));
    drop(app);
    Ok(InitialLoad {
        read: read_time,
        decode: clock.total(),
        build,
        nodes,
        jobs,
        allocs,
        evals,
        resident_growth_kib,
    })
}

/// This process's resident set (`VmRSS`), in KiB.
fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
