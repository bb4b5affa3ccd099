//! The deployments as the console keeps them: every deployment by id, each job's in the
//! order they were created, and which allocations each one placed, so neither an event nor
//! a detail walks every deployment or the allocation table.

use super::rows::AllocRow;
use drover_core::{AllocId, Deployment, DeploymentId, JobKey};
use std::collections::{BTreeSet, HashMap};

/// Invariants: `by_job` lists exactly the deployments of `by_id`, each under its job with
/// its create index (which never changes); `allocs` lists exactly the allocations whose
/// row names the deployment, whether or not the deployment itself is held (an
/// allocation's event may come before its deployment's).
#[derive(Debug, Default)]
pub struct DeploymentTable {
    by_id: HashMap<DeploymentId, Deployment>,
    by_job: HashMap<JobKey, BTreeSet<(u64, DeploymentId)>>,
    allocs: HashMap<DeploymentId, BTreeSet<AllocId>>,
}

impl DeploymentTable {
    /// The deployments, and the allocations placed for them among `allocs`.
    pub fn of<'a>(
        deployments: Vec<Deployment>,
        allocs: impl Iterator<Item = &'a AllocRow>,
    ) -> Self {
        let mut table = Self::default();
        for d in deployments {
            table.upsert(d);
        }
        for a in allocs {
            table.alloc_moved(a.id, None, a.deployment.map(|p| p.id));
        }
        table
    }

    pub fn get(&self, id: &DeploymentId) -> Option<&Deployment> {
        self.by_id.get(id)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Deployment> {
        self.by_id.values()
    }

    /// Keeps `d` unless a newer version of it (by modify index) is held: replaying events
    /// the load already covers changes nothing. As the servers do, only the job's newest
    /// [`drover_core::state::DEPLOYMENTS_KEPT`] are kept, active ones always; the servers
    /// drop the older ones without an event.
    pub fn upsert(&mut self, d: Deployment) {
        let known = self.by_id.get(&d.id);
        if known.is_some_and(|old| old.modify_index > d.modify_index) {
            return;
        }
        let key = d.job_key();
        let (id, created) = (d.id, d.create_index);
        let of_job = self.by_job.entry(key).or_default();
        if let Some(old) = known {
            of_job.remove(&(old.create_index, old.id));
        }
        of_job.insert((created, id));
        self.by_id.insert(id, d);
        let excess = of_job
            .len()
            .saturating_sub(drover_core::state::DEPLOYMENTS_KEPT);
        if excess == 0 {
            return;
        }
        let dropped: Vec<(u64, DeploymentId)> = of_job
            .iter()
            .filter(|(_, old)| *old != id && self.by_id.get(old).is_some_and(|o| !o.is_active()))
            .take(excess)
            .copied()
            .collect();
        for entry in dropped {
            of_job.remove(&entry);
            self.by_id.remove(&entry.1);
        }
    }

    /// Forgets the deployments of a purged job, as the servers do.
    pub fn remove_job(&mut self, key: &JobKey) {
        for (_, id) in self.by_job.remove(key).unwrap_or_default() {
            self.by_id.remove(&id);
        }
    }

    /// The deployments of a job, oldest first.
    pub fn of_job(&self, key: &JobKey) -> impl Iterator<Item = &Deployment> {
        self.by_job
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|(_, id)| self.by_id.get(id))
    }

    /// Follows allocation `alloc` from the deployment it was placed for to the one it is
    /// placed for now (`None`: none, or the allocation is gone).
    pub fn alloc_moved(
        &mut self,
        alloc: AllocId,
        was: Option<DeploymentId>,
        is: Option<DeploymentId>,
    ) {
        if was == is {
            return;
        }
        if let Some(deployment) = was
            && let Some(ids) = self.allocs.get_mut(&deployment)
        {
            ids.remove(&alloc);
            if ids.is_empty() {
                self.allocs.remove(&deployment);
            }
        }
        if let Some(deployment) = is {
            self.allocs.entry(deployment).or_default().insert(alloc);
        }
    }

    /// The allocations placed for a deployment, in id order.
    pub fn allocs_of(&self, id: &DeploymentId) -> impl Iterator<Item = &AllocId> {
        self.allocs.get(id).into_iter().flatten()
    }

    /// The newest deployment of a job (by creation), if the console holds one.
    pub fn latest_of(&self, key: &JobKey) -> Option<&Deployment> {
        self.of_job(key).last()
    }
}
