//! Drawing the nodes view with 10,000 nodes and 100,000 allocations in state (the console
//! issue's goal: p99 ≤ 8 ms per frame, memory ≤ 200 MB).
//!
//! The frame that matters is the one after the event stream changed something: each frame
//! here first applies a batch of 1 to 50 changes (nodes changing health, so they move
//! between groups, and allocations failing, recovering, being placed and deleted, so node
//! counts and resource use change), then prepares and draws, as the runtime does. It is
//! measured in the natural (health-grouped) order and sorted by the allocation count,
//! which the allocation changes reorder. Besides criterion's figures this prints per-frame
//! p50/p99 over a run of frames and the peak resident memory, which criterion does not.

use criterion::{Criterion, criterion_group, criterion_main};
use drover_core::{AllocId, ClientStatus, NodeHealth, SuspendReason};
use drover_tui::app::{App, Input, Update};
use drover_tui::fixtures;
use drover_tui::model::{Change, EventRow};
use drover_tui::ui::{Theme, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::hint::black_box;
use std::time::{Duration, Instant};

const NODES: u64 = 10_000;
const ALLOCS: u64 = 100_000;
/// Terminal sizes drawn: the smallest supported and a large screen.
const SIZES: [(u16, u16); 2] = [(80, 24), (240, 70)];
/// The most changes applied before one frame (at 30 frames a second, 1,500 a second).
const MAX_BATCH: u64 = 50;

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
    allocs: Vec<AllocId>,
    next: u64,
    next_index: u64,
}

impl Scene {
    fn new(width: u16, height: u16, order: Order) -> Self {
        let mut app = fixtures::app(NODES, ALLOCS, width, height);
        if let Order::ByAllocs = order {
            app.handle(Input::Key(KeyEvent::new(
                KeyCode::Char('8'),
                KeyModifiers::NONE,
            )));
        }
        let mut allocs: Vec<AllocId> = app.cluster.allocs.keys().copied().collect();
        allocs.sort();
        let terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        Scene {
            app,
            terminal,
            allocs,
            next: 0,
            next_index: 1_000_000,
        }
    }

    /// One change as the event stream delivers it, cycling through the kinds.
    fn change(&mut self) -> (Change, EventRow) {
        self.next += 1;
        self.next_index += 1;
        let n = self.next;
        let index = self.next_index;
        let change = match n % 4 {
            0 => {
                let id = fixtures::node_id((n * 7_919) % NODES);
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
                let id = self.allocs[((n * 104_729) % self.allocs.len() as u64) as usize];
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
                let id = self.allocs[((n * 15_485_863) % self.allocs.len() as u64) as usize];
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
                    row.node_id = fixtures::node_id((n * 31) % NODES);
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

fn draw_nodes(c: &mut Criterion) {
    let theme = Theme { color: true };
    for (width, height) in SIZES {
        for order in [Order::Natural, Order::ByAllocs] {
            let mut scene = Scene::new(width, height, order);
            let label = order.label();
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
}

/// Per-frame percentiles over `FRAMES` frames, each after a batch of 1 to 50 changes, in
/// wall-clock and in CPU time, and the peak resident memory.
fn percentiles(_: &mut Criterion) {
    const FRAMES: u64 = 600;
    let theme = Theme { color: true };
    for (width, height) in SIZES {
        for order in [Order::Natural, Order::ByAllocs] {
            let mut scene = Scene::new(width, height, order);
            let (mut wall, mut cpu): (Vec<Duration>, Vec<Duration>) = (0..FRAMES)
                .map(|frame| {
                    let (wall, cpu) = (Instant::now(), thread_cpu_time());
                    scene.events(batch_size(frame));
                    scene.frame(&theme);
                    (wall.elapsed(), thread_cpu_time().saturating_sub(cpu))
                })
                .unzip();
            println!(
                "nodes view {width}x{height} {}, {NODES} nodes, {ALLOCS} allocations, frame after 1-{MAX_BATCH} events: wall {}; cpu {}",
                order.label(),
                summary(&mut wall),
                summary(&mut cpu),
            );
        }
    }
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        for line in status
            .lines()
            .filter(|l| l.starts_with("VmHWM") || l.starts_with("VmRSS"))
        {
            println!("memory: {line}");
        }
    }
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

criterion_group!(benches, percentiles, draw_nodes);
criterion_main!(benches);
