//! The header: who leads, how far the log has come, whether scheduling is paused, nodes
//! per health, the placement rate; and the tabs below it.

use super::layout::{tab_label, tab_width};
use super::theme::Theme;
use crate::app::{App, Connection};
use crate::model::WorkerStatusLabel;
use crate::views::{Tone, ViewKind};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

/// Columns the placement sparkline takes when the terminal is wide enough.
const SPARKLINE_WIDTH: u16 = 30;

pub fn draw(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let [first, second] = Layout::vertical([Constraint::Length(1); 2]).areas(area);
    let info = &app.cluster.info;
    let dim = theme.tone(Tone::Dim);
    if let Some(why) = app.unreached() {
        // Nothing is known of the cluster: "no leader" would blame a cluster never seen.
        let tone = if app.connection == Connection::Connecting {
            Tone::Warn
        } else {
            Tone::Bad
        };
        let spans = vec![
            Span::styled(" drover ", theme.accent()),
            Span::styled(why, theme.tone(tone)),
        ];
        frame.render_widget(Paragraph::new(Line::from(spans)), first);
        return;
    }
    let leader = if info.leader_id.is_empty() {
        Span::styled("no leader", theme.tone(Tone::Bad))
    } else {
        Span::raw(info.leader_id.clone())
    };
    let mut spans = vec![
        Span::styled(" drover ", theme.accent()),
        Span::styled("leader ", dim),
        leader,
    ];
    // Which server answers matters only when it is not the leader (reads may lag).
    if !info.server_id.is_empty() && info.server_id != info.leader_id {
        spans.push(Span::styled(
            format!("  via {} ({})", info.server_id, info.role),
            dim,
        ));
    }
    // With several servers, each one's state: a server down shows before anyone asks.
    if info.servers.len() > 1 {
        spans.push(Span::styled("  servers", dim));
        for s in &info.servers {
            let (state, tone) = match (s.reachable, s.role) {
                (false, _) => ("down", Tone::Bad),
                (true, "leader") => ("leader", Tone::Good),
                (true, "candidate") => ("candidate", Tone::Warn),
                (true, role) => (role, Tone::Normal),
            };
            spans.push(Span::raw(format!(" {}:", s.name)));
            spans.push(Span::styled(state, theme.tone(tone)));
        }
    }
    spans.push(Span::styled("  index ", dim));
    spans.push(Span::raw(app.cluster.index.to_string()));
    // Why nothing (or less) gets scheduled, where the operator looks first in every view.
    if let Some((long, short, tone)) = paused(app) {
        let used: usize = spans.iter().map(Span::width).sum::<usize>() + 2;
        let text = if used + long.chars().count() <= usize::from(first.width) {
            long
        } else {
            short
        };
        spans.push(Span::raw("  "));
        spans.push(Span::styled(text, theme.tone(tone)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), first);

    let counts = app.cluster.health_counts();
    let count = |label: &'static str, n: usize, tone: Tone| {
        [
            Span::styled(format!("{label} "), dim),
            Span::styled(
                n.to_string(),
                theme.tone(if n > 0 { tone } else { Tone::Normal }),
            ),
            Span::raw("  "),
        ]
    };
    // The health model's own shape: suspended is one set with three reasons.
    let reason = |label: &'static str, n: usize, tone: Tone| {
        [
            Span::styled(format!("{label} "), dim),
            Span::styled(
                n.to_string(),
                theme.tone(if n > 0 { tone } else { Tone::Normal }),
            ),
        ]
    };
    let nodes_line = |with_reasons: bool| {
        let mut spans = vec![Span::styled(" nodes  ", dim)];
        spans.extend(count("healthy", counts.healthy, Tone::Good));
        spans.extend(count("suspended", counts.suspended(), Tone::Warn));
        if with_reasons {
            spans.pop();
            spans.push(Span::styled(" (", dim));
            spans.extend(reason("new", counts.new, Tone::Warn));
            spans.push(Span::styled(", ", dim));
            spans.extend(reason("lost", counts.lost, Tone::Bad));
            spans.push(Span::styled(", ", dim));
            spans.extend(reason("flaky", counts.flaky, Tone::Bad));
            spans.push(Span::styled(")  ", dim));
        }
        spans.extend(count("offlined", counts.offlined, Tone::Dim));
        spans
    };
    let mut spans = nodes_line(true);
    // On a narrow terminal every set's total beats the reasons cut off mid-line.
    if spans.iter().map(Span::width).sum::<usize>() > usize::from(second.width) {
        spans = nodes_line(false);
    }
    let rate = app.placements.last_rate();
    let label = format!("placements/s {rate:>5} ");
    let line_width: u16 = spans.iter().map(|s| s.width() as u16).sum();
    let spark_room = second
        .width
        .saturating_sub(line_width + label.len() as u16 + 1);
    if spark_room >= 8 {
        let spark_width = spark_room.min(SPARKLINE_WIDTH);
        let [text, label_area, spark] = Layout::horizontal([
            Constraint::Min(0),
            Constraint::Length(label.len() as u16),
            Constraint::Length(spark_width),
        ])
        .areas(second);
        frame.render_widget(Paragraph::new(Line::from(spans)), text);
        frame.render_widget(Paragraph::new(Span::styled(label, dim)), label_area);
        let series = app.placements.series();
        let start = series.len().saturating_sub(usize::from(spark_width));
        frame.render_widget(
            Sparkline::default()
                .data(&series[start..])
                .style(theme.tone(Tone::Good)),
            spark,
        );
    } else {
        frame.render_widget(Paragraph::new(Line::from(spans)), second);
    }
}

/// What is paused, if anything: the eval broker (the scheduler config's
/// `pause_eval_broker`) and workers paused by an operator, as a sentence and as a short
/// form for narrow terminals. Bad when nothing can be scheduled at all, a warning when
/// only some workers are paused.
fn paused(app: &App) -> Option<(String, String, Tone)> {
    let workers = &app.cluster.workers;
    let paused_workers = workers
        .iter()
        .filter(|w| {
            matches!(
                w.status,
                WorkerStatusLabel::Paused | WorkerStatusLabel::Pausing
            )
        })
        .count();
    let broker = app.cluster.stats.broker_paused;
    let all_workers = paused_workers > 0 && paused_workers == workers.len();
    let (mut long, mut short) = (Vec::new(), Vec::new());
    if broker {
        long.push("eval broker paused".to_owned());
        short.push("broker".to_owned());
    }
    if all_workers {
        long.push(format!("all {paused_workers} workers paused"));
    } else if paused_workers > 0 {
        long.push(format!(
            "{paused_workers} of {} workers paused",
            workers.len()
        ));
    }
    if paused_workers > 0 {
        short.push(format!("workers {paused_workers}/{}", workers.len()));
    }
    if long.is_empty() {
        return None;
    }
    Some(if broker || all_workers {
        (
            format!("scheduling paused: {}", long.join(", ")),
            format!("scheduling paused: {}", short.join(", ")),
            Tone::Bad,
        )
    } else {
        (
            long.join(", "),
            format!("paused: {}", short.join(", ")),
            Tone::Warn,
        )
    })
}

pub fn draw_tabs(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let mut spans = vec![Span::raw(" ")];
    for view in ViewKind::TABS {
        let label = format!(
            "{:^width$}",
            tab_label(view, area.width),
            width = usize::from(tab_width(view, area.width))
        );
        spans.push(if view == app.view {
            Span::styled(label, theme.selected())
        } else {
            Span::styled(label, theme.tone(Tone::Dim))
        });
        spans.push(Span::raw(" "));
    }
    if app.read_only {
        spans.push(Span::styled(" read-only", theme.tone(Tone::Warn)));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}
