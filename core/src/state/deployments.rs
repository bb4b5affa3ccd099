//! The deployments table and its index by job.
//!
//! Invariant (checked by `check_consistency`): `deployments_by_job` holds exactly the
//! deployments table's keys, under each deployment's job; a job keeps at most
//! [`DEPLOYMENTS_KEPT`] deployments, so the table is bounded by the jobs.

use super::{StateStore, Table};
use crate::types::*;
use std::sync::Arc;

/// How many deployments of a job are kept; the oldest finished ones go first.
pub const DEPLOYMENTS_KEPT: usize = 6;

impl StateStore {
    pub fn deployment(&self, id: &DeploymentId) -> Option<&Arc<Deployment>> {
        self.deployments.get(id)
    }

    pub fn deployments(&self) -> impl Iterator<Item = &Arc<Deployment>> + '_ {
        self.deployments.values()
    }

    pub fn deployments_with_prefix(
        &self,
        prefix: &IdPrefix,
    ) -> impl Iterator<Item = &Arc<Deployment>> + '_ {
        let (lo, hi) = prefix.bounds(DeploymentId::from_bytes);
        self.deployments.range(lo..=hi).map(|(_, d)| d)
    }

    /// Whether the job has any deployment (one range probe, no allocation).
    pub fn has_deployments(&self, key: &JobKey) -> bool {
        self.deployments_by_job
            .range((key.clone(), DeploymentId::MIN)..=(key.clone(), DeploymentId::MAX))
            .next()
            .is_some()
    }

    /// A job's deployments, oldest first.
    pub fn deployments_by_job(&self, key: &JobKey) -> Vec<Arc<Deployment>> {
        let mut out: Vec<Arc<Deployment>> = self
            .deployments_by_job
            .range((key.clone(), DeploymentId::MIN)..=(key.clone(), DeploymentId::MAX))
            .filter_map(|(_, id)| self.deployments.get(id).cloned())
            .collect();
        out.sort_by_key(|d| (d.create_index, d.id));
        out
    }

    /// The newest deployment of the job as it is now (a purged and re-registered job's
    /// older deployments are not its own).
    pub fn latest_deployment(&self, key: &JobKey) -> Option<Arc<Deployment>> {
        let job = self.job(key)?;
        self.deployments_by_job(key)
            .into_iter()
            .rev()
            .find(|d| d.job_create_index == job.create_index)
    }

    /// Stores a deployment, dropping the job's oldest finished ones beyond the kept number.
    pub(crate) fn put_deployment(&mut self, index: Index, d: Deployment) -> Arc<Deployment> {
        let key = d.job_key();
        let d = Arc::new(d);
        self.deployments.insert(d.id, d.clone());
        self.deployments_by_job.insert((key.clone(), d.id));
        let all = self.deployments_by_job(&key);
        let excess = all.len().saturating_sub(DEPLOYMENTS_KEPT);
        for old in all
            .iter()
            .filter(|o| !o.is_active() && o.id != d.id)
            .take(excess)
        {
            self.deployments.remove(&old.id);
            self.deployments_by_job.remove(&(key.clone(), old.id));
        }
        self.touch(Table::Deployments, index);
        d
    }

    /// Removes every deployment of a purged job.
    pub(crate) fn remove_deployments_of(&mut self, index: Index, key: &JobKey) {
        let ids: Vec<DeploymentId> = self
            .deployments_by_job
            .range((key.clone(), DeploymentId::MIN)..=(key.clone(), DeploymentId::MAX))
            .map(|(_, id)| *id)
            .collect();
        if ids.is_empty() {
            return;
        }
        for id in ids {
            self.deployments.remove(&id);
            self.deployments_by_job.remove(&(key.clone(), id));
        }
        self.touch(Table::Deployments, index);
    }
}
