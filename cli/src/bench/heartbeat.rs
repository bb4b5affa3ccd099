//! `drover bench --scenario heartbeat`: the heartbeat load of a big cluster. Every
//! simulated node registers and then heartbeats at the TTL the server hands out, for a
//! measured window. Measured: heartbeats the server handled per second, and the server's
//! CPU time per heartbeat, from which its capacity on one core follows (one second of
//! CPU over the CPU per heartbeat).
//!
//! The CPU figure is the server's whole CPU over the window divided by the heartbeats:
//! anything else it did meanwhile (the readiness checks, metrics) is charged to the
//! heartbeats, so the capacity is a floor.

use super::error::BenchError;
use super::progress::Progress;
use super::report::secs;
use super::server_figures::{Probe, ServerFigures};
use super::target::Target;
use super::workload::Workload;
use crate::client::Client;
use serde::Serialize;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct HeartbeatReport {
    pub scenario: &'static str,
    pub server_address: String,
    pub nodes: u64,
    /// Simulator start to every node healthy.
    pub registration_secs: f64,
    pub window_secs: f64,
    /// Heartbeats the server counted in the window (the simulator's count against a
    /// remote server).
    pub heartbeats: u64,
    pub heartbeats_per_sec: f64,
    pub heartbeat_errors: u64,
    /// Server CPU over the window per heartbeat, in microseconds.
    pub cpu_us_per_heartbeat: Option<f64>,
    /// Heartbeats one core could handle at that cost.
    pub capacity_per_core: Option<f64>,
    pub server: ServerFigures,
}

impl HeartbeatReport {
    pub fn render(&self) -> String {
        let mut pairs = vec![
            (
                "Heartbeat",
                format!(
                    "{} nodes heartbeating at the server's TTL for {:.0}s",
                    self.nodes, self.window_secs
                ),
            ),
            ("Server", self.server_address.clone()),
            (
                "Registration",
                format!("{:.2}s (start to all healthy)", self.registration_secs),
            ),
            (
                "Heartbeats",
                format!(
                    "{} handled, {:.0}/s ({} errors)",
                    self.heartbeats, self.heartbeats_per_sec, self.heartbeat_errors
                ),
            ),
            (
                "CPU per heartbeat",
                match (self.cpu_us_per_heartbeat, self.capacity_per_core) {
                    (Some(us), Some(cap)) => {
                        format!("{us:.1} µs of server CPU ({cap:.0} heartbeats/s per core)")
                    }
                    _ => "unknown (remote server, or no heartbeat in the window)".into(),
                },
            ),
        ];
        pairs.extend(self.server.pairs());
        crate::output::key_values(&pairs)
    }
}

pub async fn measure(
    target: &Target,
    client: &Client,
    workload: &Workload,
    window: Duration,
    deadline: Instant,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<HeartbeatReport, BenchError> {
    let started = Instant::now();
    let sim = super::nodes::start(client, workload, deadline, timeout, progress).await?;
    let registration = started.elapsed();
    progress.phase(&format!(
        "measuring heartbeats for {}",
        humantime::format_duration(window)
    ));
    let before = Probe::take(target).await;
    let sim_before = sim.stats().await;
    let opened = Instant::now();
    while opened.elapsed() < window {
        tokio::time::sleep(Duration::from_millis(500).min(window)).await;
        if let Ok(stats) = sim.stats().await {
            progress.tick(|| {
                format!(
                    "{:.0}s: {} heartbeats sent",
                    secs(opened.elapsed()),
                    stats.heartbeats
                )
            });
        }
    }
    let after = Probe::take(target).await;
    let measured = secs(opened.elapsed());
    let sim_after = sim.stats().await;
    sim.shutdown().await;
    let (sim_before, sim_after) = (sim_before?, sim_after?);
    let server = ServerFigures::between(&before, &after);
    let heartbeats = server
        .heartbeats
        .unwrap_or(sim_after.heartbeats.saturating_sub(sim_before.heartbeats));
    let cpu_us_per_heartbeat = server
        .cpu_secs
        .filter(|_| heartbeats > 0)
        .map(|cpu| cpu * 1e6 / heartbeats as f64);
    Ok(HeartbeatReport {
        scenario: "heartbeat",
        server_address: client.address().to_string(),
        nodes: u64::from(workload.nodes),
        registration_secs: secs(registration),
        window_secs: measured,
        heartbeats,
        heartbeats_per_sec: heartbeats as f64 / measured.max(1e-9),
        heartbeat_errors: sim_after
            .heartbeat_errors
            .saturating_sub(sim_before.heartbeat_errors),
        cpu_us_per_heartbeat,
        capacity_per_core: cpu_us_per_heartbeat
            .filter(|us| *us > 0.0)
            .map(|us| 1e6 / us),
        server,
    })
}
