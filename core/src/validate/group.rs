//! Checks of task groups and their tasks.

use super::{MapKind, Report, constraint, fmt_duration, show};
use crate::types::{
    DelayFunction, Job, KNOWN_DRIVERS, ReschedulePolicy, RestartMode, RestartPolicy, Task,
    TaskGroup,
};
use std::collections::HashSet;
use std::time::Duration;

/// Checks the first `max_groups` groups. Each is addressed as `groups[<name>]` when its name
/// is a valid identifier seen for the first time, else as `groups[<index>]`, so every path
/// names exactly one group.
pub(super) fn check_groups(r: &mut Report<'_>, job: &Job) {
    let take = job.groups.len().min(r.limits.max_groups);
    let mut seen = HashSet::new();
    for (i, group) in job.groups[..take].iter().enumerate() {
        let by_index = format!("groups[{i}]");
        let prefix = if !r.ident(&by_index, "name", "group name", &group.name) {
            by_index
        } else if !seen.insert(group.name.as_str()) {
            let reason = format!(
                "group name {} is already used by another group",
                show(&group.name)
            );
            r.err(&by_index, "name", reason);
            by_index
        } else {
            format!("groups[{}]", group.name)
        };
        check_group(r, job, &prefix, group);
    }
}

fn check_group(r: &mut Report<'_>, job: &Job, p: &str, g: &TaskGroup) {
    let limits = r.limits;
    // System and sysbatch jobs run one allocation per node: their count is documented as
    // ignored, so it is not checked either.
    if !job.job_type.is_per_node() && g.count > limits.max_count {
        r.err(
            p,
            "count",
            format!(
                "count {} is above the limit of {}",
                g.count, limits.max_count
            ),
        );
    }
    constraint::check_list(r, p, &g.constraints);

    if g.tasks.is_empty() {
        r.err(p, "tasks", "at least one task is required");
    } else if g.tasks.len() > limits.max_tasks_per_group {
        r.err(
            p,
            "tasks",
            format!(
                "{} tasks are above the limit of {}",
                g.tasks.len(),
                limits.max_tasks_per_group
            ),
        );
    }
    let mut seen = HashSet::new();
    for (i, task) in g.tasks.iter().take(limits.max_tasks_per_group).enumerate() {
        let by_index = format!("{p}.tasks[{i}]");
        let prefix = if !check_task_name(r, &by_index, &task.name) {
            by_index
        } else if !seen.insert(task.name.as_str()) {
            let reason = format!(
                "task name {} is already used in this group",
                show(&task.name)
            );
            r.err(&by_index, "name", reason);
            by_index
        } else {
            format!("{p}.tasks[{}]", task.name)
        };
        check_task(r, &prefix, task);
        let owner = Some((prefix.as_str(), task.name.as_str()));
        super::service::check_services(r, job, p, g, owner, &task.services);
        super::task_files::check_task_ports(r, &prefix, task, g.network.as_ref());
    }

    check_restart(r, p, &g.restart);
    super::task_blocks::check_group_blocks(r, p, g);
    check_reschedule(r, job, p, &g.reschedule);
    check_disconnect(r, p, g);
    if let Some(update) = &g.update {
        if job.job_type.runs_to_completion() {
            r.err(
                p,
                "update",
                format!(
                    "update is only allowed for service and system jobs, not {}",
                    job.job_type
                ),
            );
        }
        super::update::check_update(r, job, p, update);
    }
    check_migrate(r, p, &g.migrate);
    if let Some(network) = &g.network {
        super::network::check_network(r, p, network);
    }
    super::service::check_services(r, job, p, g, None, &g.services);
    r.map(p, "meta", &g.meta, MapKind::Meta);
}

/// A drain paces moves by `max_parallel` and waits `min_healthy_time` for each
/// replacement, giving up on it at `healthy_deadline`.
fn check_migrate(r: &mut Report<'_>, p: &str, m: &crate::types::MigrateStrategy) {
    if m.max_parallel == 0 {
        r.err(
            p,
            "migrate.max_parallel",
            "max_parallel must be at least 1: a drain moves at least one allocation at a time",
        );
    }
    r.duration(p, "migrate.min_healthy_time", m.min_healthy_time);
    r.duration(p, "migrate.healthy_deadline", m.healthy_deadline);
    if m.min_healthy_time >= m.healthy_deadline {
        r.err(
            p,
            "migrate.min_healthy_time",
            format!(
                "min_healthy_time {} must be shorter than healthy_deadline {}",
                fmt_duration(m.min_healthy_time),
                fmt_duration(m.healthy_deadline)
            ),
        );
    }
}

/// Task names become directory names on the node, so a slash is refused as in Nomad.
fn check_task_name(r: &mut Report<'_>, prefix: &str, name: &str) -> bool {
    if !r.ident(prefix, "name", "task name", name) {
        return false;
    }
    if name.contains('/') {
        r.err(
            prefix,
            "name",
            format!("task name {} contains '/'", show(name)),
        );
        return false;
    }
    true
}

fn check_task(r: &mut Report<'_>, p: &str, t: &Task) {
    let limits = r.limits;
    let max = limits.max_string_len;
    if !KNOWN_DRIVERS.contains(&t.driver.as_str()) {
        if t.driver.is_empty() {
            r.err(
                p,
                "driver",
                format!("driver must be set (known: {})", KNOWN_DRIVERS.join(", ")),
            );
        } else if r.text(p, "driver", "driver", &t.driver, limits.max_name_len) {
            r.err(
                p,
                "driver",
                format!(
                    "driver {} is not supported (known: {})",
                    show(&t.driver),
                    KNOWN_DRIVERS.join(", ")
                ),
            );
        }
    }
    let process_driver = matches!(t.driver.as_str(), "raw_exec" | "exec");
    if process_driver && t.config.command.is_empty() {
        r.err(
            p,
            "config.command",
            format!("command is required by the {} driver", t.driver),
        );
    } else {
        r.text(p, "config.command", "command", &t.config.command, max);
    }
    r.entries(p, "config.args", t.config.args.len());
    for (i, arg) in t.config.args.iter().take(limits.max_entries).enumerate() {
        r.text(p, &format!("config.args[{i}]"), "argument", arg, max);
    }
    r.map(p, "config", &t.config.extra, MapKind::Config);
    r.map(p, "env", &t.env, MapKind::Env);

    // Disk may be zero: a task that writes nothing needs none.
    if t.resources.cpu_mhz == 0 {
        r.err(
            p,
            "resources.cpu",
            "cpu 0 MHz is below the minimum of 1 MHz",
        );
    }
    if t.resources.memory_mb == 0 {
        r.err(
            p,
            "resources.memory",
            "memory 0 MB is below the minimum of 1 MB",
        );
    }

    if let Some(snapshot) = &t.snapshot {
        if snapshot.is_empty() {
            r.err(p, "snapshot", "snapshot must not be empty when set");
        } else {
            r.text(p, "snapshot", "snapshot", snapshot, max);
        }
    }
    if t.kill_timeout > limits.max_kill_timeout {
        r.err(
            p,
            "kill_timeout",
            format!(
                "kill_timeout {} is above the limit of {}",
                fmt_duration(t.kill_timeout),
                fmt_duration(limits.max_kill_timeout)
            ),
        );
    }
    r.map(p, "meta", &t.meta, MapKind::Meta);
    super::task_blocks::check_task_blocks(r, p, t);
    super::task_files::check_task_files(r, p, t);
}

/// Nomad's rules: `delay` mode needs attempts to be meaningful, and the attempts with their
/// delays must fit in the interval they are counted in.
pub(super) fn check_restart(r: &mut Report<'_>, p: &str, rp: &RestartPolicy) {
    r.duration(p, "restart.interval", rp.interval);
    r.duration(p, "restart.delay", rp.delay);
    if rp.attempts == 0 && rp.mode == RestartMode::Delay {
        r.err(
            p,
            "restart.mode",
            "mode \"delay\" with 0 attempts is ambiguous (use mode \"fail\")",
        );
    }
    if rp.attempts == 0 {
        return;
    }
    if rp.interval.is_zero() {
        r.err(
            p,
            "restart.interval",
            format!("interval must be positive when attempts is {}", rp.attempts),
        );
    } else if rp.delay.saturating_mul(rp.attempts) > rp.interval {
        r.err(
            p,
            "restart.delay",
            format!(
                "{} attempts with delay {} do not fit in interval {}",
                rp.attempts,
                fmt_duration(rp.delay),
                fmt_duration(rp.interval)
            ),
        );
    }
}

fn check_reschedule(r: &mut Report<'_>, job: &Job, p: &str, rs: &ReschedulePolicy) {
    r.duration(p, "reschedule.interval", rs.interval);
    r.duration(p, "reschedule.delay", rs.delay);
    r.duration(p, "reschedule.max_delay", rs.max_delay);
    if !rs.enabled() {
        return;
    }
    if job.job_type.is_per_node() {
        r.err(
            p,
            "reschedule",
            format!(
                "rescheduling is not supported for {} jobs (set attempts = 0 and unlimited = false)",
                job.job_type
            ),
        );
        return;
    }
    if rs.unlimited && rs.attempts > 0 {
        r.err(
            p,
            "reschedule.attempts",
            format!(
                "attempts {} with unlimited = true is ambiguous",
                rs.attempts
            ),
        );
    }
    let mut delays_ok = true;
    let min = r.limits.min_reschedule_delay;
    if rs.delay < min {
        delays_ok = false;
        r.err(
            p,
            "reschedule.delay",
            format!(
                "delay {} is below the minimum of {}",
                fmt_duration(rs.delay),
                fmt_duration(min)
            ),
        );
    }
    if rs.delay_function != DelayFunction::Constant && rs.max_delay < rs.delay {
        delays_ok = false;
        r.err(
            p,
            "reschedule.max_delay",
            format!(
                "max_delay {} is below delay {} (the {} delay function needs a ceiling)",
                fmt_duration(rs.max_delay),
                fmt_duration(rs.delay),
                delay_function_name(rs.delay_function)
            ),
        );
    }
    if rs.unlimited {
        return;
    }
    if rs.interval.is_zero() {
        r.err(
            p,
            "reschedule.interval",
            format!("interval must be positive when attempts is {}", rs.attempts),
        );
    } else if delays_ok {
        let (needed, strict) = needed_interval(rs);
        if rs.interval < needed || (strict && rs.interval == needed) {
            r.err(
                p,
                "reschedule.interval",
                format!(
                    "interval {} cannot fit {} attempts with delay {} ({}); it needs {} {}",
                    fmt_duration(rs.interval),
                    rs.attempts,
                    fmt_duration(rs.delay),
                    delay_function_name(rs.delay_function),
                    if strict { "more than" } else { "at least" },
                    fmt_duration(needed)
                ),
            );
        }
    }
}

fn delay_function_name(f: DelayFunction) -> &'static str {
    match f {
        DelayFunction::Constant => "constant",
        DelayFunction::Exponential => "exponential",
        DelayFunction::Fibonacci => "fibonacci",
    }
}

/// The interval Nomad requires for `attempts` reschedules (its `viableAttempts`), so any job
/// file Nomad accepts is accepted here. Returns the bound and whether it is strict (the
/// exponential case wants the interval strictly longer). Computed in closed form once the
/// delay reaches its ceiling, so a huge `attempts` costs nothing. Assumes `delay > 0` and,
/// for growing functions, `max_delay >= delay`.
fn needed_interval(rs: &ReschedulePolicy) -> (Duration, bool) {
    let (delay, cap, attempts) = (rs.delay, rs.max_delay, rs.attempts);
    match rs.delay_function {
        DelayFunction::Constant => (delay.saturating_mul(attempts), false),
        DelayFunction::Exponential => {
            // Nomad tracks the latest delay while below the ceiling, then adds the ceiling
            // once per further attempt.
            let mut needed = Duration::ZERO;
            let mut next = delay;
            let mut i = 0;
            while i < attempts && next <= cap {
                needed = next;
                next = next.saturating_mul(2);
                i += 1;
            }
            (
                needed.saturating_add(cap.saturating_mul(attempts - i)),
                true,
            )
        }
        DelayFunction::Fibonacci => {
            // Two delays, then the Fibonacci sum up to the ceiling, then linear in the
            // ceiling; the requirement is the last slot.
            let (mut prev, mut last) = (delay, delay);
            let mut i = 2;
            while i < attempts {
                let next = prev.saturating_add(last);
                if next > cap {
                    last = cap;
                    i += 1;
                    break;
                }
                (prev, last) = (last, next);
                i += 1;
            }
            let rest = attempts.saturating_sub(i);
            (last.saturating_add(cap.saturating_mul(rest)), false)
        }
    }
}

/// Nomad's disconnect rules: a window must be positive, and a group cannot both tolerate a
/// disconnect (`lost_after`) and stop on one, nor set the same stop twice.
fn check_disconnect(r: &mut Report<'_>, p: &str, g: &TaskGroup) {
    if let Some(stop) = g.stop_after_client_disconnect {
        r.duration(p, "stop_after_client_disconnect", stop);
    }
    let Some(d) = &g.disconnect else { return };
    if let Some(lost_after) = d.lost_after {
        if lost_after.is_zero() {
            r.err(
                p,
                "disconnect.lost_after",
                "lost_after must be positive when set",
            );
        }
        r.duration(p, "disconnect.lost_after", lost_after);
    }
    if let Some(stop) = d.stop_on_client_after {
        r.duration(p, "disconnect.stop_on_client_after", stop);
    }
    if d.lost_after.is_some() && d.stop_on_client_after.is_some() {
        r.err(
            p,
            "disconnect",
            "lost_after and stop_on_client_after cannot both be set (a disconnected allocation \
             either waits to reconnect or stops)",
        );
    }
    if g.stop_after_client_disconnect.is_some() {
        if d.stop_on_client_after.is_some() {
            r.err(
                p,
                "stop_after_client_disconnect",
                "stop_after_client_disconnect and disconnect.stop_on_client_after cannot both \
                 be set (use disconnect.stop_on_client_after)",
            );
        }
        if d.lost_after.is_some() {
            r.err(
                p,
                "stop_after_client_disconnect",
                "stop_after_client_disconnect and disconnect.lost_after cannot both be set",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(f: DelayFunction, attempts: u32, delay: u64, cap: u64) -> ReschedulePolicy {
        ReschedulePolicy {
            attempts,
            interval: Duration::from_secs(1),
            delay: Duration::from_secs(delay),
            delay_function: f,
            max_delay: Duration::from_secs(cap),
            unlimited: false,
        }
    }

    #[test]
    fn constant_needs_attempts_times_delay() {
        let rs = policy(DelayFunction::Constant, 4, 30, 0);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(120), false));
    }

    #[test]
    fn exponential_follows_nomad_below_and_above_the_ceiling() {
        // 10, 20, 40 are below the ceiling of 60: Nomad keeps the last (40).
        let rs = policy(DelayFunction::Exponential, 3, 10, 60);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(40), true));
        // Then 80 > 60 twice: 40 + 60 + 60.
        let rs = policy(DelayFunction::Exponential, 5, 10, 60);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(160), true));
    }

    #[test]
    fn fibonacci_follows_nomad_below_and_above_the_ceiling() {
        // Slots 10, 10, 20, 30: the last is needed.
        let rs = policy(DelayFunction::Fibonacci, 4, 10, 100);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(30), false));
        // Slots 10, 10, 20, 30, 50, 80, 100 (capped), 200, 300.
        let rs = policy(DelayFunction::Fibonacci, 9, 10, 100);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(300), false));
        // One attempt still needs the first delay.
        let rs = policy(DelayFunction::Fibonacci, 1, 10, 100);
        assert_eq!(needed_interval(&rs), (Duration::from_secs(10), false));
    }

    #[test]
    fn huge_attempts_saturate_instead_of_looping() {
        let rs = policy(DelayFunction::Exponential, u32::MAX, 5, 3600);
        assert!(needed_interval(&rs).0 > Duration::from_secs(365 * 24 * 3600));
        let rs = policy(DelayFunction::Fibonacci, u32::MAX, 5, 3600);
        assert!(needed_interval(&rs).0 > Duration::from_secs(365 * 24 * 3600));
    }
}
