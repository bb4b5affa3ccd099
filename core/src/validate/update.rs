//! Checks of `update` blocks: the rolling pace and, when the block makes the rollout a
//! deployment, its health settings.

use super::{Report, fmt_duration};
use crate::types::{Job, JobType, UpdateStrategy};

/// `p` is the path of the block's owner (`""` for the job, `groups[web]` for a group).
pub(super) fn check_update(r: &mut Report<'_>, job: &Job, p: &str, u: &UpdateStrategy) {
    r.duration(p, "update.stagger", u.stagger);
    let Some(d) = &u.deployment else {
        return;
    };
    r.duration(p, "update.min_healthy_time", d.min_healthy_time);
    r.duration(p, "update.healthy_deadline", d.healthy_deadline);
    r.duration(p, "update.progress_deadline", d.progress_deadline);
    if d.min_healthy_time >= d.healthy_deadline {
        r.err(
            p,
            "update.min_healthy_time",
            format!(
                "min_healthy_time {} must be shorter than healthy_deadline {}",
                fmt_duration(d.min_healthy_time),
                fmt_duration(d.healthy_deadline)
            ),
        );
    }
    if !d.progress_deadline.is_zero() && d.healthy_deadline >= d.progress_deadline {
        r.err(
            p,
            "update.healthy_deadline",
            format!(
                "healthy_deadline {} must be shorter than progress_deadline {}",
                fmt_duration(d.healthy_deadline),
                fmt_duration(d.progress_deadline)
            ),
        );
    }
    if d.auto_promote && d.canary == 0 {
        r.err(
            p,
            "update.auto_promote",
            "auto_promote needs canaries to promote: set canary above 0",
        );
    }
    if u.max_parallel == 0 && d.canary > 0 {
        r.err(
            p,
            "update.max_parallel",
            format!(
                "max_parallel 0 rolls out without a deployment, so its {} canaries would never be placed: set max_parallel above 0",
                d.canary
            ),
        );
    }
    if job.job_type != JobType::Service && d.canary > 0 {
        r.err(
            p,
            "update.canary",
            format!("canaries are only for service jobs, not {}", job.job_type),
        );
    }
}
