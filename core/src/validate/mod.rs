//! Validation of a submitted [`Job`] before it may reach the state store.
//!
//! [`validate_job`] walks the whole job and collects every problem instead of stopping at the
//! first, so an operator fixes everything in one go; the server returns the collected
//! [`ValidationError`] as `INVALID_ARGUMENT`. Each problem carries the path of the field in
//! jobspec spelling (`groups[web].tasks[server].resources.cpu`) and a lowercase reason that
//! quotes the offending value.
//!
//! What is checked and why:
//!
//! * Identity: job id, namespace, names, priority, datacenter globs.
//! * Shape: at least one group per job and one task per group, unique names, counts within
//!   [`Limits`], per-node (system, sysbatch) groups at most one per node.
//! * Tasks: a known driver, a command for the process drivers, non-zero CPU and memory,
//!   environment a process can actually receive.
//! * Constraints: operator-specific checks so a constraint the feasibility checker cannot
//!   evaluate never reaches the scheduler (see [`VersionConstraint`] for `version`/`semver`).
//! * Policies: restart, reschedule, disconnect, periodic and parameterized settings with
//!   Nomad's rules for combinations that are ambiguous or unsupported.
//! * Size: every string, list and map that arrives over the network is bounded, so one
//!   register cannot bloat the Raft log or the state store.
//!
//! Server-owned fields (version, status, indexes, submit time) are not checked: the FSM
//! overwrites them. [`canonicalize`] fills the few defaults Nomad fills before validation.

mod constraint;
mod group;
mod network;
mod node;
mod service;
mod task_blocks;
mod task_files;
mod update;
mod version;

pub use network::is_env_name;
pub use task_blocks::is_signal;
pub use task_files::{CHECKSUMS, inside_task_dir, parse_checksum};

pub use node::{NodeLimitError, NodeLimits, check_node, check_snapshot_id};
pub use version::{VersionConstraint, VersionError, VersionFlavor};

use crate::types::{Job, ReschedulePolicy};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::time::Duration;

/// Bounds on what one job may ask for. Everything an operator fills in freely is bounded so
/// a single register stays small in the log and cheap to validate and schedule.
///
/// Only the first `max_groups` groups, `max_tasks_per_group` tasks and `max_constraints`
/// constraints of a list are inspected further: the over-long list is already reported, and
/// this keeps the work per job bounded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest `count` of one group.
    pub max_count: u32,
    /// Most groups in one job.
    pub max_groups: usize,
    /// Most tasks in one group.
    pub max_tasks_per_group: usize,
    /// Most constraints on one job or one group.
    pub max_constraints: usize,
    /// Most entries of any free-form map or list: meta, env, driver config, args,
    /// datacenters, dispatch meta keys.
    pub max_entries: usize,
    /// Longest identifier, in bytes: job id, job, group and task names.
    pub max_name_len: usize,
    /// Longest other string, in bytes (commands, args, env and meta values, targets…).
    pub max_string_len: usize,
    /// Largest dispatch payload, in bytes (Nomad's limit is 16 KiB).
    pub max_payload_bytes: usize,
    /// Longest duration any policy may name; beyond it a value is a typo, not a plan.
    pub max_duration: Duration,
    /// Longest `kill_timeout`. Nomad has no server-side bound (its clients clamp to 30 s by
    /// default); drover rejects more than an hour because a stopping task holds its node's
    /// resources, and a drain or rolling update waits for it, for that long.
    pub max_kill_timeout: Duration,
    /// Shortest reschedule delay when rescheduling is enabled (Nomad: 5 s). It keeps a
    /// crash-looping allocation from turning into a storm of evaluations and plans. Test
    /// servers may lower it.
    pub min_reschedule_delay: Duration,
    /// Most problems listed in one error; the rest are only counted.
    pub max_errors: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_count: 50_000,
            max_groups: 1_000,
            max_tasks_per_group: 100,
            max_constraints: 100,
            max_entries: 1_024,
            max_name_len: 128,
            max_string_len: 16 * 1024,
            max_payload_bytes: 16 * 1024,
            max_duration: Duration::from_secs(365 * 24 * 3600),
            max_kill_timeout: Duration::from_secs(3600),
            min_reschedule_delay: Duration::from_secs(5),
            max_errors: 100,
        }
    }
}

/// One problem: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field in jobspec spelling, e.g. `groups[web].tasks[server].resources.cpu`.
    /// Groups and tasks are named by their name, or by their index where the name cannot
    /// identify them (empty, a duplicate, or itself invalid).
    pub path: String,
    /// Lowercase, no trailing period, quoting the offending value.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

/// Every problem found in one job, in the order the fields appear in a jobspec.
///
/// Displays as `job "web" is invalid: 2 problems: path: reason; path: reason`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("job {} is invalid: {}", show(.job_id), Problems::new(.errors, *.omitted))]
pub struct ValidationError {
    /// The id of the job as submitted (possibly empty or itself invalid).
    pub job_id: String,
    /// Never empty.
    pub errors: Vec<FieldError>,
    /// Problems found beyond [`Limits::max_errors`], counted but not listed.
    pub omitted: usize,
}

impl ValidationError {
    /// Total number of problems found, listed or not.
    pub fn len(&self) -> usize {
        self.errors.len() + self.omitted
    }

    /// Always false: an error is only built when something is wrong.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `N problems: a; b` tail of a [`ValidationError`]'s message.
struct Problems<'a> {
    errors: &'a [FieldError],
    omitted: usize,
}

impl<'a> Problems<'a> {
    fn new(errors: &'a [FieldError], omitted: usize) -> Self {
        Self { errors, omitted }
    }
}

impl fmt::Display for Problems<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.errors.len() + self.omitted;
        write!(f, "{total} problem{}: ", if total == 1 { "" } else { "s" })?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        if self.omitted > 0 {
            write!(f, "; and {} more", self.omitted)?;
        }
        Ok(())
    }
}

/// Checks `job` against drover's rules and `limits`, reporting every problem at once.
///
/// Call [`canonicalize`] first when the job comes from a client that may leave defaults
/// empty. Validation is pure and bounded by `limits`: it reads no clock or time zone data.
pub fn validate_job(job: &Job, limits: &Limits) -> Result<(), ValidationError> {
    let mut r = Report::new(limits);
    check_job(&mut r, job);
    if r.errors.is_empty() && r.omitted == 0 {
        return Ok(());
    }
    let mut job_id = job.id.as_str().to_owned();
    crate::types::truncate_at_char(&mut job_id, limits.max_name_len);
    Err(ValidationError {
        job_id,
        errors: r.errors,
        omitted: r.omitted,
    })
}

/// Fills the defaults Nomad fills before validation, in place:
///
/// * an empty `name` becomes the id;
/// * an empty `namespace` becomes [`crate::DEFAULT_NAMESPACE`];
/// * empty `datacenters` become `["*"]` (every datacenter, Nomad's default since 1.5);
/// * groups of system and sysbatch jobs get [`ReschedulePolicy::disabled`], because
///   per-node jobs never reschedule (a failed allocation's node is its only home), while
///   [`crate::TaskGroup::new`] starts from the service default.
///
/// Type-appropriate restart and reschedule defaults for service and batch jobs are the
/// jobspec parser's business: our structs have no "unset" state, so this cannot tell an
/// operator's explicit policy from a default and leaves them alone.
pub fn canonicalize(job: &mut Job) {
    if job.name.is_empty() {
        job.name = job.id.to_string();
    }
    if job.namespace.is_empty() {
        job.namespace = crate::DEFAULT_NAMESPACE.to_owned();
    }
    if job.datacenters.is_empty() {
        job.datacenters = vec!["*".to_owned()];
    }
    if job.job_type.is_per_node() {
        for group in &mut job.groups {
            group.reschedule = ReschedulePolicy::disabled();
        }
    }
}

/// Parses a periodic `cron` spec exactly as validation does, so the periodic launcher runs
/// every spec validation accepted.
///
/// Five fields are the classic `minute hour day-of-month month day-of-week`; `@hourly`,
/// `@daily` and the other nicknames are accepted. Six fields put seconds first and seven
/// add a trailing year (croner's reading; Nomad reads six fields as minutes..year).
/// Errors are croner's message, lowercased and without trailing period.
pub fn parse_cron(spec: &str) -> Result<croner::Cron, String> {
    croner::parser::CronParser::new()
        .parse(spec)
        .map_err(|e| tidy_message(&e.to_string()))
}

/// Collects problems for one job. Paths are built only when a problem is found, so a valid
/// job costs no allocation beyond a label per group and task.
struct Report<'l> {
    limits: &'l Limits,
    errors: Vec<FieldError>,
    omitted: usize,
}

impl<'l> Report<'l> {
    fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            errors: Vec::new(),
            omitted: 0,
        }
    }

    /// Records a problem at `prefix.field` (or `field` alone when the prefix is empty).
    fn err(&mut self, prefix: &str, field: &str, reason: impl Into<String>) {
        if self.errors.len() >= self.limits.max_errors {
            self.omitted += 1;
            return;
        }
        let path = match (prefix.is_empty(), field.is_empty()) {
            (true, _) => field.to_owned(),
            (false, true) => prefix.to_owned(),
            (false, false) => format!("{prefix}.{field}"),
        };
        self.errors.push(FieldError {
            path,
            reason: reason.into(),
        });
    }

    /// Length and NUL check for any string; `what` names the value in the reason. Returns
    /// whether the value is sane enough for further checks (a huge value is not echoed).
    fn text(&mut self, prefix: &str, field: &str, what: &str, value: &str, max: usize) -> bool {
        if value.len() > max {
            self.err(
                prefix,
                field,
                format!(
                    "{what} is {} bytes long, above the limit of {max}",
                    value.len()
                ),
            );
            return false;
        }
        if value.contains('\0') {
            self.err(
                prefix,
                field,
                format!("{what} {} contains a NUL character", show(value)),
            );
            return false;
        }
        true
    }

    /// An identifier: non-empty, at most `max_name_len` bytes, no control characters.
    /// Returns whether it passed, so callers may go on to finer checks.
    fn ident(&mut self, prefix: &str, field: &str, what: &str, value: &str) -> bool {
        if value.is_empty() {
            self.err(prefix, field, format!("{what} must not be empty"));
            return false;
        }
        if !self.text(prefix, field, what, value, self.limits.max_name_len) {
            return false;
        }
        if value.chars().any(char::is_control) {
            self.err(
                prefix,
                field,
                format!("{what} {} contains a control character", show(value)),
            );
            return false;
        }
        if let Some(c) = value.chars().find(|c| is_invisible(*c)) {
            self.err(
                prefix,
                field,
                format!(
                    "{what} {} contains the invisible or text-direction character U+{:04X}: two names could look the same",
                    show(value),
                    u32::from(c)
                ),
            );
            return false;
        }
        true
    }

    /// A list or map size against [`Limits::max_entries`].
    fn entries(&mut self, prefix: &str, field: &str, len: usize) {
        let max = self.limits.max_entries;
        if len > max {
            self.err(
                prefix,
                field,
                format!("{len} entries are above the limit of {max}"),
            );
        }
    }

    /// A duration against [`Limits::max_duration`]; the reason names the last path part
    /// (`interval`, not `restart.interval`).
    fn duration(&mut self, prefix: &str, field: &str, value: Duration) {
        let max = self.limits.max_duration;
        if value > max {
            let name = field.rsplit('.').next().unwrap_or(field);
            self.err(
                prefix,
                field,
                format!(
                    "{name} {} is above the limit of {}",
                    fmt_duration(value),
                    fmt_duration(max)
                ),
            );
        }
    }

    /// A free-form map (meta, env, driver config). Keys must be non-empty; env keys must
    /// also be something `execve` can pass (no `=`).
    fn map(&mut self, prefix: &str, field: &str, map: &BTreeMap<String, String>, kind: MapKind) {
        self.entries(prefix, field, map.len());
        let max = self.limits.max_string_len;
        for (key, value) in map.iter().take(self.limits.max_entries) {
            if key.is_empty() {
                self.err(prefix, field, "key must not be empty");
                continue;
            }
            if !self.text(prefix, field, "key", key, max) {
                continue;
            }
            if kind == MapKind::Env && key.contains('=') {
                self.err(prefix, field, format!("key {} contains '='", show(key)));
                continue;
            }
            let entry = format!("{field}[{key}]");
            self.text(prefix, &entry, "value", value, max);
        }
    }
}

/// What a free-form map is for; environment maps have stricter keys.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MapKind {
    Meta,
    Env,
    Config,
}

fn check_job(r: &mut Report<'_>, job: &Job) {
    let limits = r.limits;
    if r.ident("", "id", "id", job.id.as_str()) && job.id.as_str().chars().any(char::is_whitespace)
    {
        r.err(
            "",
            "id",
            format!("id {} contains whitespace", show(job.id.as_str())),
        );
    }
    check_namespace(r, &job.namespace);
    if job.name.is_empty() {
        r.err("", "name", "name must not be empty");
    } else {
        r.text("", "name", "name", &job.name, limits.max_string_len);
    }
    if !(1..=Job::MAX_PRIORITY).contains(&job.priority) {
        r.err(
            "",
            "priority",
            format!(
                "priority {} is outside 1..={}",
                job.priority,
                Job::MAX_PRIORITY
            ),
        );
    }
    check_datacenters(r, &job.datacenters);
    constraint::check_list(r, "", &job.constraints);

    if job.groups.is_empty() {
        r.err("", "groups", "at least one group is required");
    } else if job.groups.len() > limits.max_groups {
        r.err(
            "",
            "groups",
            format!(
                "{} groups are above the limit of {}",
                job.groups.len(),
                limits.max_groups
            ),
        );
    }
    group::check_groups(r, job);

    update::check_update(r, job, "", &job.update);
    check_periodic(r, job);
    check_parameterized(r, job);
    if job.payload.len() > limits.max_payload_bytes {
        r.err(
            "",
            "payload",
            format!(
                "payload is {} bytes, above the limit of {}",
                job.payload.len(),
                limits.max_payload_bytes
            ),
        );
    }
    r.map("", "meta", &job.meta, MapKind::Meta);
}

/// Nomad's namespace names: 1 to 128 letters, digits and dashes.
fn check_namespace(r: &mut Report<'_>, ns: &str) {
    if ns.is_empty() {
        r.err("", "namespace", "namespace must not be empty");
    } else if ns.len() > 128 || !ns.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        r.err(
            "",
            "namespace",
            format!(
                "namespace {} must be 1 to 128 letters, digits or '-'",
                show(ns)
            ),
        );
    }
}

fn check_datacenters(r: &mut Report<'_>, dcs: &[String]) {
    if dcs.is_empty() {
        r.err("", "datacenters", "at least one datacenter is required");
        return;
    }
    r.entries("", "datacenters", dcs.len());
    for (i, dc) in dcs.iter().take(r.limits.max_entries).enumerate() {
        let field = format!("datacenters[{i}]");
        if dc.is_empty() {
            r.err("", &field, "datacenter must not be empty");
        } else if r.text("", &field, "datacenter", dc, r.limits.max_name_len) {
            if let Err(e) = globset::Glob::new(dc) {
                r.err(
                    "",
                    &field,
                    format!("datacenter {} is not a valid glob: {}", show(dc), e.kind()),
                );
            }
        }
    }
}

fn check_periodic(r: &mut Report<'_>, job: &Job) {
    // The block is checked whether enabled or not: re-enabling it later should not be the
    // moment an operator learns the spec never parsed.
    let Some(p) = &job.periodic else { return };
    if !job.job_type.runs_to_completion() {
        r.err(
            "",
            "periodic",
            format!(
                "periodic is only allowed for batch and sysbatch jobs, not {}",
                job.job_type
            ),
        );
    }
    if job.parameterized.is_some() {
        r.err(
            "",
            "periodic",
            "a job cannot be both periodic and parameterized",
        );
    }
    if p.cron.is_empty() {
        r.err("periodic", "cron", "cron must not be empty");
    } else if r.text("periodic", "cron", "cron", &p.cron, r.limits.max_name_len) {
        match parse_cron(&p.cron) {
            Err(e) => r.err(
                "periodic",
                "cron",
                format!("cron {} is invalid: {e}", show(&p.cron)),
            ),
            Ok(cron) if !fires_ever(&cron) => r.err(
                "periodic",
                "cron",
                format!("cron {} never fires", show(&p.cron)),
            ),
            Ok(_) => {}
        }
    }
    if !p.time_zone.is_empty()
        && r.text(
            "periodic",
            "time_zone",
            "time zone",
            &p.time_zone,
            r.limits.max_name_len,
        )
        && crate::periodic::zone(&p.time_zone).is_none()
    {
        r.err(
            "periodic",
            "time_zone",
            format!(
                "time zone {} is not in the IANA time zone database (e.g. UTC, Europe/Berlin)",
                show(&p.time_zone)
            ),
        );
    }
}

/// Whether the spec matches any instant at all (`0 0 30 2 *` parses but never fires).
/// Searched from a fixed origin because core reads no clock; a spec pinned to past years
/// passes here and simply never launches again.
fn fires_ever(cron: &croner::Cron) -> bool {
    let origin = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    cron.find_next_occurrence(&origin, true).is_ok()
}

fn check_parameterized(r: &mut Report<'_>, job: &Job) {
    let Some(p) = &job.parameterized else { return };
    if !job.job_type.runs_to_completion() {
        r.err(
            "",
            "parameterized",
            format!(
                "parameterized is only allowed for batch and sysbatch jobs, not {}",
                job.job_type
            ),
        );
    }
    for (field, keys) in [
        ("meta_required", &p.meta_required),
        ("meta_optional", &p.meta_optional),
    ] {
        r.entries("parameterized", field, keys.len());
        for (i, key) in keys.iter().take(r.limits.max_entries).enumerate() {
            let entry = format!("{field}[{i}]");
            if key.is_empty() {
                r.err("parameterized", &entry, "meta key must not be empty");
            } else if r.text(
                "parameterized",
                &entry,
                "meta key",
                key,
                r.limits.max_string_len,
            ) && keys[..i].contains(key)
            {
                r.err(
                    "parameterized",
                    &entry,
                    format!("meta key {} is listed twice", show(key)),
                );
            }
        }
    }
    for (i, key) in p
        .meta_optional
        .iter()
        .take(r.limits.max_entries)
        .enumerate()
    {
        if !key.is_empty() && p.meta_required.contains(key) {
            r.err(
                "parameterized",
                &format!("meta_optional[{i}]"),
                format!("meta key {} is also in meta_required", show(key)),
            );
        }
    }
}

/// A value quoted for a reason: escaped like a Rust string and cut at 64 characters so a
/// huge value cannot flood a log line.
/// Characters that change how text looks without showing themselves: bidirectional
/// controls (which reorder what follows) and zero-width or invisible format characters.
/// An identifier holding one can look exactly like another, in the console and the CLI.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

fn show(value: &str) -> String {
    const MAX: usize = 64;
    match value.char_indices().nth(MAX) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}…", &value[..cut]),
    }
}

/// A duration the way operators write them in job files: `1h30m`, `45s`, `250ms`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d.subsec_nanos() != 0 {
        return format!("{d:?}");
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = String::new();
    for (n, unit) in [(h, "h"), (m, "m"), (s, "s")] {
        if n > 0 {
            let _ = write!(out, "{n}{unit}");
        }
    }
    out
}

/// A third-party error message in our style: first letter lowercase, no trailing period,
/// one line.
fn tidy_message(msg: &str) -> String {
    let line = msg
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| msg.lines().next().unwrap_or(""))
        .trim()
        .trim_end_matches('.');
    let mut chars = line.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
