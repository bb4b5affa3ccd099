//! Drawing the nodes view with 100,000 nodes and 1,000,000 allocations in state (the goals
//! of issue 19: p99 ≤ 8 ms per frame at 80x24 and 240x70, and the console's resident
//! memory with that state ≤ 500 MB).
//!
//! The frame that matters is the one after the event stream changed something: each frame
//! here first applies a batch of 1 to 50 changes (nodes changing health, so they move
//! between groups, and allocations failing, recovering, being placed and deleted, so node
//! counts and resource use change), then prepares and draws, as the runtime does. It is
//! measured in the natural (health-grouped) order and sorted by the allocation count,
//! which the allocation changes reorder. Besides criterion's figures this prints per-frame
//! p50/p99 over a run of frames, how long building the state took, the resident memory
//! right after it was built (the loaded state itself) and the peak, which criterion does
//! not.
//!
//! `DROVER_BENCH_SCALE` scales the cluster: `1` (the default) is 100,000 nodes and
//! 1,000,000 allocations, `0.1` the 10,000 and 100,000 of the console's first goals.
//! Criterion's quick `--test` mode (what smoke runs use) defaults to `0.1` and 30 frames
//! per run, so it ends in seconds; the full-size state takes a few seconds per order to
//! build.

use criterion::{Criterion, criterion_group, criterion_main};
use drover_core::{ClientStatus, NodeHealth, SuspendReason};
use drover_tui::app::{App, Input, Update};
use drover_tui::fixtures;
use drover_tui::model::{Change, EventRow};
use drover_tui::ui::{Theme, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// The full-size cluster.
const NODES: f64 = 100_000.0;
const ALLOCS: f64 = 1_000_000.0;
/// Terminal sizes drawn: the smallest supported and a large screen.
const SIZES: [(u16, u16); 2] = [(80, 24), (240, 70)];
/// The most changes applied before one frame (at 30 frames a second, 1,500 a second).
const MAX_BATCH: u64 = 50;

/// How big a cluster, and how many frames the percentiles are taken over.
#[derive(Clone, Copy)]
struct Scale {
    nodes: u64,
    allocs: u64,
    frames: u64,
}

impl Scale {
    fn from_env() -> Self {
        let test_mode = std::env::args().any(|a| a == "--test");
        let factor: f64 = std::env::var("DROVER_BENCH_SCALE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if test_mode { 0.1 } else { 1.0 });
        Scale {
            nodes: ((NODES * factor) as u64).max(1),
            allocs: ((ALLOCS * factor) as u64).max(1),
            frames: if test_mode { 30 } else { 600 },
        }
    }
}

/// How the table is ordered while measuring.
#[derive(Clone, Copy)]
enum Order {
    /// Grouped by health, then by name: node changes move rows between groups.
    Natural,
    /// By the ALLOCS column: allocation changes move rows.
    ByAllocs,
}

impl Order {
    fn label(self) -> &'static str {
        match self {
            Order::Natural => "by health",
            Order::ByAllocs => "sorted by allocs",
        }
    }
}

/// The loaded console, and what the event stream picks changes from.
struct Scene {
    app: App,
    terminal: Terminal<TestBackend>,
    scale: Scale,
    next: u64,
    next_index: u64,
}

impl Scene {
    /// The console holding the fixture cluster, its first frame drawn; says how long that
    /// took and how much memory the process holds with it.
    fn new(scale: Scale, order: Order) -> Self {
        let started = Instant::now();
        let (width, height) = SIZES[0];
        let mut app = fixtures::app(scale.nodes, scale.allocs, width, height);
        if let Order::ByAllocs = order {
            app.handle(Input::Key(KeyEvent::new(
                KeyCode::Char('8'),
                KeyModifiers::NONE,
            )));
        }
        let mut scene = Scene {
            app,
            terminal: Terminal::new(TestBackend::new(width, height)).expect("terminal"),
            scale,
            next: 0,
            next_index: 1_000_000,
        };
        scene.frame(&Theme { color: true });
        println!(
            "state of {} nodes and {} allocations built and drawn {} in {:.2?}; {}",
            scale.nodes,
            scale.allocs,
            order.label(),
            started.elapsed(),
            memory()
        );
        scene
    }

    fn resize(&mut self, width: u16, height: u16) {
        self.app.handle(Input::Resize { width, height });
        self.terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    }

    /// One change as the event stream delivers it, cycling through the kinds.
    fn change(&mut self) -> (Change, EventRow) {
        self.next += 1;
        self.next_index += 1;
        let (n, index) = (self.next, self.next_index);
        let (nodes, allocs) = (self.scale.nodes, self.scale.allocs);
        let change = match n % 4 {
            0 => {
                let id = fixtures::node_id((n * 7_919) % nodes);
                let mut node = self.app.cluster.nodes[&id].clone();
                node.health = match node.health {
                    NodeHealth::Healthy => NodeHealth::Suspended(SuspendReason::Lost),
                    _ => NodeHealth::Healthy,
                };
                node.health_since = self.app.now;
                node.modify_index = index;
                Change::Node(Box::new(node))
            }
            1 | 2 => {
                let id = fixtures::alloc_id((n * 104_729) % allocs);
                match self.app.cluster.allocs.get(&id) {
                    Some(row) => {
                        let mut row = row.clone();
                        row.client = match row.client {
                            ClientStatus::Running => ClientStatus::Failed,
                            _ => ClientStatus::Running,
                        };
                        row.modify_index = index;
                        Change::Alloc(row)
                    }
                    None => Change::AllocRemoved(id),
                }
            }
            _ => {
                // Deletes an allocation, or places it again if it was deleted before.
                let id = fixtures::alloc_id((n * 15_485_863) % allocs);
                if self.app.cluster.allocs.contains_key(&id) {
                    Change::AllocRemoved(id)
                } else {
                    let mut row = self
                        .app
                        .cluster
                        .allocs
                        .values()
                        .next()
                        .expect("allocations in state")
                        .clone();
                    row.id = id;
                    row.node_id = fixtures::node_id((n * 31) % nodes);
                    row.modify_index = index;
                    Change::Alloc(row)
                }
            }
        };
        let row = EventRow {
            seq: 0,
            index,
            topic: "node",
            event_type: "node-health",
            key: String::new(),
            summary: String::new(),
            received: fixtures::now(),
            payload: None,
        };
        (change, row)
    }

    /// Applies a batch of `size` changes.
    fn events(&mut self, size: u64) {
        let batch = (0..size).map(|_| self.change()).collect();
        self.app.handle(Input::Update(Update::Events(batch)));
    }

    /// One frame as the runtime draws it: bring the rows up to date, then draw.
    fn frame(&mut self, theme: &Theme) {
        self.app.prepare_frame();
        let app = &self.app;
        self.terminal
            .draw(|f| draw(f, app, theme))
            .expect("drawing into a test backend cannot fail");
    }
}

/// Batch sizes 1..=MAX_BATCH, spread over the run.
fn batch_size(frame: u64) -> u64 {
    1 + (frame * 17) % MAX_BATCH
}

/// For each order, one state built and measured at both sizes: first the per-frame
/// percentiles over a run of frames, each after a batch of 1 to 50 changes, in wall-clock
/// and in CPU time; then criterion's figures for an unchanged frame and for one after
/// changes.
fn draw_nodes(c: &mut Criterion) {
    let scale = Scale::from_env();
    let theme = Theme { color: true };
    for order in [Order::Natural, Order::ByAllocs] {
        let mut scene = Scene::new(scale, order);
        let label = order.label();
        for (width, height) in SIZES {
            scene.resize(width, height);
            let (mut wall, mut cpu): (Vec<Duration>, Vec<Duration>) = (0..scale.frames)
                .map(|frame| {
                    let (wall, cpu) = (Instant::now(), thread_cpu_time());
                    scene.events(batch_size(frame));
                    scene.frame(&theme);
                    (wall.elapsed(), thread_cpu_time().saturating_sub(cpu))
                })
                .unzip();
            println!(
                "nodes view {width}x{height} {label}, {} nodes, {} allocations, frame after 1-{MAX_BATCH} events: wall {}; cpu {}",
                scale.nodes,
                scale.allocs,
                summary(&mut wall),
                summary(&mut cpu),
            );
        }
        for (width, height) in SIZES {
            scene.resize(width, height);
            c.bench_function(
                &format!("draw nodes view {width}x{height} {label} (unchanged)"),
                |b| {
                    b.iter(|| {
                        // Marks the frame dirty without changing the rows, like the clock tick.
                        scene.app.dirty = true;
                        scene.frame(&theme);
                        black_box(&scene.app);
                    })
                },
            );
            let mut frame = 0;
            c.bench_function(
                &format!("draw nodes view {width}x{height} {label} (after 1-50 events)"),
                |b| {
                    b.iter(|| {
                        frame += 1;
                        scene.events(batch_size(frame));
                        scene.frame(&theme);
                        black_box(&scene.app);
                    })
                },
            );
        }
    }
    println!("after both orders: {}", memory());
}

/// The process's resident memory now and at its peak.
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or("?".to_owned(), |v| v.trim().to_owned())
    };
    format!(
        "resident memory {} (peak {})",
        field("VmRSS:"),
        field("VmHWM:")
    )
}

/// This thread's CPU time so far: unlike the wall clock, it does not count the time the
/// thread waited while other processes ran, which on a shared machine is most of the p99.
fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

/// `p50 … p99 … max …` of `times`.
fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    format!(
        "p50 {:.2?} p99 {:.2?} max {:.2?}",
        at(0.50),
        at(0.99),
        times[times.len() - 1]
    )
}

criterion_group!(benches, draw_nodes);
criterion_main!(benches);
