//! What the console's ACL token may do, as the server said (`AclService.TokenSelf`). The
//! server checks every call whatever the console shows; this only greys the actions the
//! token cannot do and refuses them before a round trip, naming what the token lacks.

use crate::views::ViewKind;
use std::collections::BTreeSet;

/// The areas the console's actions fall in, each behind one capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Area {
    /// Offline, online, drain, eligibility: `node` write.
    Nodes,
    /// Pausing and resuming workers: `operator` write.
    Operator,
    /// Stopping a job: `submit-job` in its namespace.
    Jobs,
}

impl Area {
    /// The area of the actions offered in `view`, if it offers any.
    pub fn of_view(view: ViewKind) -> Option<Area> {
        match view {
            ViewKind::Nodes => Some(Area::Nodes),
            ViewKind::Workers => Some(Area::Operator),
            ViewKind::Jobs => Some(Area::Jobs),
            _ => None,
        }
    }
}

/// Where the token may stop jobs, from the namespaces the server was asked about. A
/// namespace not asked about (a job that appeared since) is offered; the server decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobRights {
    Everywhere,
    Asked {
        allowed: BTreeSet<String>,
        denied: BTreeSet<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permissions {
    pub nodes: bool,
    pub operator: bool,
    pub jobs: JobRights,
}

impl Default for Permissions {
    /// ACLs off (or not known yet): everything is offered and the server decides.
    fn default() -> Self {
        Self::everything()
    }
}

impl Permissions {
    pub fn everything() -> Self {
        Self {
            nodes: true,
            operator: true,
            jobs: JobRights::Everywhere,
        }
    }

    /// Whether no action at all is open to the token: the console then runs read-only.
    pub fn none(&self) -> bool {
        !self.nodes && !self.allows(Area::Operator) && !self.allows(Area::Jobs)
    }

    /// Whether the token may act in `area` at all (for jobs: in some namespace).
    pub fn allows(&self, area: Area) -> bool {
        match area {
            Area::Nodes => self.nodes,
            Area::Operator => self.operator,
            Area::Jobs => match &self.jobs {
                JobRights::Everywhere => true,
                JobRights::Asked { allowed, .. } => !allowed.is_empty(),
            },
        }
    }

    pub fn may_stop_jobs_in(&self, namespace: &str) -> bool {
        match &self.jobs {
            JobRights::Everywhere => true,
            JobRights::Asked { allowed, denied } => {
                allowed.contains(namespace) || !denied.contains(namespace)
            }
        }
    }

    /// What the token lacks for `area`, in the server's words.
    pub fn lacking(area: Area) -> &'static str {
        match area {
            Area::Nodes => "write-node",
            Area::Operator => "operator write",
            Area::Jobs => "submit-job",
        }
    }
}
