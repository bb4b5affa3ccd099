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
    /// Stopping a job, acting on its deployments: `submit-job` in its namespace.
    Jobs,
    /// Restarting and stopping an allocation: `alloc-lifecycle` in its namespace.
    Allocs,
}

impl Area {
    /// The area of the actions offered in `view`, if it offers any.
    pub fn of_view(view: ViewKind) -> Option<Area> {
        match view {
            ViewKind::Nodes => Some(Area::Nodes),
            ViewKind::Workers => Some(Area::Operator),
            ViewKind::Jobs | ViewKind::Deployments => Some(Area::Jobs),
            ViewKind::Allocs => Some(Area::Allocs),
            _ => None,
        }
    }
}

/// Where the token holds one namespace capability (stopping jobs, restarting and stopping
/// allocations), from the namespaces the server was asked about. A namespace not asked
/// about (a job that appeared since) is offered; the server decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobRights {
    Everywhere,
    Asked {
        allowed: BTreeSet<String>,
        denied: BTreeSet<String>,
    },
}

impl JobRights {
    /// Whether some namespace grants it.
    fn anywhere(&self) -> bool {
        match self {
            JobRights::Everywhere => true,
            JobRights::Asked { allowed, .. } => !allowed.is_empty(),
        }
    }

    fn allows(&self, namespace: &str) -> bool {
        match self {
            JobRights::Everywhere => true,
            JobRights::Asked { allowed, denied } => {
                allowed.contains(namespace) || !denied.contains(namespace)
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permissions {
    pub nodes: bool,
    pub operator: bool,
    pub jobs: JobRights,
    pub allocs: JobRights,
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
            allocs: JobRights::Everywhere,
        }
    }

    /// Whether no action at all is open to the token: the console then runs read-only.
    pub fn none(&self) -> bool {
        [Area::Nodes, Area::Operator, Area::Jobs, Area::Allocs]
            .into_iter()
            .all(|area| !self.allows(area))
    }

    /// Whether the token may act in `area` at all (for jobs: in some namespace).
    pub fn allows(&self, area: Area) -> bool {
        match area {
            Area::Nodes => self.nodes,
            Area::Operator => self.operator,
            Area::Jobs => self.jobs.anywhere(),
            Area::Allocs => self.allocs.anywhere(),
        }
    }

    pub fn may_stop_jobs_in(&self, namespace: &str) -> bool {
        self.jobs.allows(namespace)
    }

    pub fn may_touch_allocs_in(&self, namespace: &str) -> bool {
        self.allocs.allows(namespace)
    }

    /// What the token lacks for `area`, in the server's words.
    pub fn lacking(area: Area) -> &'static str {
        match area {
            Area::Nodes => "write-node",
            Area::Operator => "operator write",
            Area::Jobs => "submit-job",
            Area::Allocs => "alloc-lifecycle",
        }
    }
}
