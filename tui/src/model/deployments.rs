//! The deployments as the console keeps them: every deployment by id, and which
//! allocations each one placed, so its detail never walks the allocation table.

use super::rows::AllocRow;
use drover_core::{AllocId, Deployment, DeploymentId, JobKey};
use std::collections::{BTreeSet, HashMap};

/// Invariant: `allocs` lists exactly the allocations whose row names the deployment, each
/// under it, whether or not the deployment itself is held (an allocation's event may come
/// before its deployment's).
#[derive(Debug, Default)]
pub struct DeploymentTable {
    by_id: HashMap<DeploymentId, Deployment>,
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
        if self
            .by_id
            .get(&d.id)
            .is_some_and(|old| old.modify_index > d.modify_index)
        {
            return;
        }
        let key = d.job_key();
        let id = d.id;
        self.by_id.insert(id, d);
        let mut of_job: Vec<&Deployment> = self
            .by_id
            .values()
            .filter(|o| o.namespace == *key.namespace && o.job_id == key.id)
            .collect();
        let excess = of_job
            .len()
            .saturating_sub(drover_core::state::DEPLOYMENTS_KEPT);
        if excess == 0 {
            return;
        }
        of_job.sort_by_key(|o| (o.create_index, o.id));
        let dropped: Vec<DeploymentId> = of_job
            .iter()
            .filter(|o| !o.is_active() && o.id != id)
            .take(excess)
            .map(|o| o.id)
            .collect();
        for old in dropped {
            self.by_id.remove(&old);
        }
    }

    /// Forgets the deployments of a purged job, as the servers do.
    pub fn remove_job(&mut self, key: &JobKey) {
        self.by_id
            .retain(|_, d| !(d.namespace == *key.namespace && d.job_id == key.id));
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
        self.by_id
            .values()
            .filter(|d| d.namespace == *key.namespace && d.job_id == key.id)
            .max_by_key(|d| (d.create_index, d.id))
    }
}
