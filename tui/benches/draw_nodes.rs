//! Drawing the nodes view with 10,000 nodes and 100,000 allocations in state (the console
//! issue's goal: p99 ≤ 8 ms per frame, memory ≤ 200 MB).
//!
//! Besides criterion's figures this prints the per-frame p50/p99 over a run of frames and
//! the process's peak resident memory, which criterion does not report.

use criterion::{Criterion, criterion_group, criterion_main};
use drover_tui::app::{App, Input, Update};
use drover_tui::fixtures;
use drover_tui::model::Change;
use drover_tui::ui::{Theme, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::hint::black_box;
use std::time::{Duration, Instant};

const NODES: u64 = 10_000;
const ALLOCS: u64 = 100_000;
/// Terminal sizes drawn: the smallest supported and a large screen.
const SIZES: [(u16, u16); 2] = [(80, 24), (240, 70)];

fn loaded(width: u16, height: u16) -> App {
    fixtures::app(NODES, ALLOCS, width, height)
}

/// One frame as the runtime draws it: bring the rows up to date, then draw.
fn frame(terminal: &mut Terminal<TestBackend>, app: &mut App, theme: &Theme) {
    app.prepare_frame();
    terminal
        .draw(|f| draw(f, app, theme))
        .expect("drawing into a test backend cannot fail");
}

/// A node changing health, as the event stream delivers it: forces the view to rebuild
/// its order before the next frame.
fn node_update(app: &mut App, n: u64) {
    let id = fixtures::node_id(n % NODES);
    let mut node = app.cluster.nodes[&id].clone();
    node.modify_index += 1;
    let row = drover_tui::model::EventRow {
        seq: 0,
        index: node.modify_index,
        topic: "node",
        event_type: "node-health",
        key: id.to_string(),
        summary: String::new(),
    };
    app.handle(Input::Update(Update::Events(vec![(
        Change::Node(Box::new(node)),
        row,
    )])));
}

fn draw_nodes(c: &mut Criterion) {
    let theme = Theme { color: true };
    for (width, height) in SIZES {
        let mut app = loaded(width, height);
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        c.bench_function(
            &format!("draw nodes view {width}x{height} (unchanged)"),
            |b| {
                b.iter(|| {
                    // Marks the frame dirty without changing the rows, like the clock tick.
                    app.dirty = true;
                    frame(&mut terminal, &mut app, &theme);
                    black_box(&app);
                })
            },
        );
        let mut n = 0;
        c.bench_function(
            &format!("draw nodes view {width}x{height} (after an event)"),
            |b| {
                b.iter(|| {
                    n += 1;
                    node_update(&mut app, n);
                    frame(&mut terminal, &mut app, &theme);
                    black_box(&app);
                })
            },
        );
    }
}

/// Per-frame percentiles over `FRAMES` frames, each after an event (the worst case: the
/// order is rebuilt every frame), and the peak resident memory.
fn percentiles(_: &mut Criterion) {
    const FRAMES: usize = 500;
    let theme = Theme { color: true };
    for (width, height) in SIZES {
        let mut app = loaded(width, height);
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        let mut times: Vec<Duration> = (0..FRAMES as u64)
            .map(|n| {
                let start = Instant::now();
                node_update(&mut app, n);
                frame(&mut terminal, &mut app, &theme);
                start.elapsed()
            })
            .collect();
        times.sort();
        let at = |q: f64| times[((FRAMES as f64 * q) as usize).min(FRAMES - 1)];
        println!(
            "nodes view {width}x{height}, {NODES} nodes, {ALLOCS} allocations, frame after an event: p50 {:.2?} p99 {:.2?} max {:.2?}",
            at(0.50),
            at(0.99),
            times[FRAMES - 1]
        );
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

criterion_group!(benches, percentiles, draw_nodes);
criterion_main!(benches);
