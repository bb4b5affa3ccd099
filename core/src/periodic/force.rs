//! `job periodic force`: a periodic job's child launched now, outside its schedule, as
//! Nomad's `Periodic.Force` does. The schedule is left as it is: the next launch still
//! comes at its cron slot.

use super::launcher::{Launch, launch_at, launchable};
use crate::types::{Job, Timestamp};
use crate::validate::Limits;
use rand::Rng;

/// Why a periodic job cannot be forced. Messages are lowercase and name the job, for the
/// API to return as `FAILED_PRECONDITION`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ForceError {
    #[error("job {job:?} is not periodic and cannot be forced")]
    NotPeriodic { job: String },
    #[error("job {job:?} is stopped and cannot be forced")]
    Stopped { job: String },
    #[error("job {job:?} has its periodic launches disabled and cannot be forced")]
    Disabled { job: String },
}

/// The launch of `parent`'s child at `now` (its slot: `now` in whole seconds, so the child
/// is `<parent>/periodic-<unix seconds of now>`), with its pending eval. The caller
/// registers it only if no child of that second exists yet (a check-and-set register), so
/// two forces within one second launch one child.
///
/// Randomness: 16 bytes from `rng` for the eval id.
pub fn force(
    parent: &Job,
    now: Timestamp,
    rng: &mut impl Rng,
    limits: &Limits,
) -> Result<Launch, ForceError> {
    let job = || parent.id.to_string();
    let Some(periodic) = &parent.periodic else {
        return Err(ForceError::NotPeriodic { job: job() });
    };
    if parent.parent_id.is_some() {
        return Err(ForceError::NotPeriodic { job: job() });
    }
    if parent.stop {
        return Err(ForceError::Stopped { job: job() });
    }
    if !periodic.enabled {
        return Err(ForceError::Disabled { job: job() });
    }
    debug_assert!(launchable(parent).is_some());
    let slot = Timestamp::from_millis(now.as_millis() / 1000 * 1000);
    Ok(launch_at(parent, slot, now, rng, limits.max_name_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock;
    use crate::types::{JobId, PeriodicConfig, TriggeredBy};
    use rand::SeedableRng;

    fn periodic(edit: impl FnOnce(&mut Job)) -> Job {
        let mut job = mock::batch_job("nightly", 1);
        job.periodic = Some(PeriodicConfig {
            enabled: true,
            cron: "0 3 * * *".into(),
            prohibit_overlap: false,
            time_zone: String::new(),
        });
        edit(&mut job);
        job
    }

    #[test]
    fn force_launches_a_child_of_this_second_or_says_why_not() {
        let now = Timestamp::from_millis(1_700_000_123_456);
        let cases: Vec<(&str, Job, Result<&str, ForceError>)> = vec![
            (
                "periodic",
                periodic(|_| {}),
                Ok("nightly/periodic-1700000123"),
            ),
            (
                "not periodic",
                mock::batch_job("nightly", 1),
                Err(ForceError::NotPeriodic {
                    job: "nightly".into(),
                }),
            ),
            (
                "stopped",
                periodic(|j| j.stop = true),
                Err(ForceError::Stopped {
                    job: "nightly".into(),
                }),
            ),
            (
                "disabled",
                periodic(|j| {
                    if let Some(p) = &mut j.periodic {
                        p.enabled = false;
                    }
                }),
                Err(ForceError::Disabled {
                    job: "nightly".into(),
                }),
            ),
            (
                "a child",
                periodic(|j| j.parent_id = Some(JobId::new("other"))),
                Err(ForceError::NotPeriodic {
                    job: "nightly".into(),
                }),
            ),
        ];
        for (name, job, want) in cases {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
            let got = force(&job, now, &mut rng, &Limits::default());
            match (got, want) {
                (Ok(launch), Ok(id)) => {
                    assert_eq!(launch.job.id.as_str(), id, "{name}");
                    assert_eq!(launch.job.parent_id.as_ref(), Some(&job.id), "{name}");
                    assert!(launch.job.periodic.is_none(), "{name}");
                    assert_eq!(launch.eval.triggered_by, TriggeredBy::PeriodicJob, "{name}");
                    assert_eq!(launch.eval.job_id, launch.job.id, "{name}");
                }
                (got, want) => assert_eq!(
                    got.map(|l| l.job.id.to_string()),
                    want.map(str::to_string),
                    "{name}"
                ),
            }
        }
    }
}
