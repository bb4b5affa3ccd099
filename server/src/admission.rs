//! Gates on new work that the operator sets through the scheduler config. They read the
//! local state, as Nomad's do: a registration racing a config change may pass, which is
//! harmless, unlike the check-and-set of a job's index, which the FSM performs.

use crate::error::ServerError;
use drover_core::types::SchedulerConfig;

/// Refuses registrations and dispatches while `reject_job_registration` is set, naming the
/// setting so the operator knows what to clear.
pub(crate) fn check_registration(config: &SchedulerConfig) -> Result<(), ServerError> {
    if config.reject_job_registration {
        tracing::debug!(
            setting = "reject_job_registration",
            "job registration refused by the scheduler config"
        );
        return Err(ServerError::precondition(
            "job registration is disabled by the scheduler config (reject_job_registration = true)",
        ));
    }
    Ok(())
}
