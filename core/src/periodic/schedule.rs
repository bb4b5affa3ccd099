//! When a periodic job launches: its cron spec, read in its time zone, on whole seconds.

use crate::types::{PeriodicConfig, Timestamp};
use chrono::{DateTime, TimeZone as _};
use chrono_tz::Tz;

/// Why a periodic block cannot be turned into launch times.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The spec does not parse. Validation refuses such jobs, so this only shows up for jobs
    /// stored before a rule changed.
    #[error("cron {spec:?} is invalid: {reason}")]
    InvalidCron { spec: String, reason: String },
    /// Not a zone of the IANA time zone database.
    #[error("time zone {zone:?} is not in the IANA time zone database (e.g. UTC, Europe/Berlin)")]
    UnsupportedTimeZone { zone: String },
}

/// A parsed periodic block: the cron spec and the time zone it is read in.
///
/// Specs are parsed by [`crate::validate::parse_cron`], so every spec validation accepted
/// runs here exactly as it was checked. Zones come from the IANA database compiled into the
/// binary (`chrono-tz`), so `Europe/Berlin` launches at Berlin's wall-clock time across
/// daylight-saving changes, and no server reads zone files from its host.
///
/// Launch times are whole seconds: cron has no finer field, and child job ids carry the
/// launch time in seconds.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: croner::Cron,
    zone: Tz,
}

impl Schedule {
    pub fn new(periodic: &PeriodicConfig) -> Result<Self, ScheduleError> {
        let cron = crate::validate::parse_cron(&periodic.cron).map_err(|reason| {
            ScheduleError::InvalidCron {
                spec: periodic.cron.clone(),
                reason,
            }
        })?;
        let zone = zone(&periodic.time_zone).ok_or_else(|| ScheduleError::UnsupportedTimeZone {
            zone: periodic.time_zone.clone(),
        })?;
        Ok(Self { cron, zone })
    }

    /// The first launch strictly after `t`, or `None` when the spec never fires again (a
    /// spec pinned to past years) or the answer lies beyond what a timestamp can hold.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        // Any whole second after floor(t) is also after t itself.
        let start = self.at(t)?;
        from_datetime(self.cron.find_next_occurrence(&start, false).ok()?)
    }

    /// The last launch at or before `t`, if the spec ever fired by then.
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let start = self.at(t)?;
        from_datetime(self.cron.find_previous_occurrence(&start, true).ok()?)
    }

    /// `t` floored to the second, on the wall clock of the schedule's zone.
    fn at(&self, t: Timestamp) -> Option<DateTime<Tz>> {
        let secs = i64::try_from(t.as_millis() / 1000).ok()?;
        self.zone.timestamp_opt(secs, 0).single()
    }
}

fn from_datetime(t: DateTime<Tz>) -> Option<Timestamp> {
    let secs = u64::try_from(t.timestamp()).ok()?;
    Some(Timestamp::from_millis(secs.checked_mul(1000)?))
}

/// The zone a periodic block names; empty means UTC. `Local` is not an IANA zone and is
/// refused: it would mean a different zone on every server.
pub fn zone(name: &str) -> Option<Tz> {
    if name.is_empty() {
        return Some(Tz::UTC);
    }
    name.parse::<Tz>().ok()
}
