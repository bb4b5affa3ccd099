//! Building a store from its primary tables (snapshot restore) and checking that every
//! derived structure agrees with a recount (what the property tests assert after each step).

use super::{JobSummary, StateStore, TableIndexes};
use crate::types::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The primary tables of a store, in key order. Everything else is derived from these.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct StoreParts {
    pub indexes: TableIndexes,
    pub jobs: Vec<Job>,
    pub job_versions: Vec<Job>,
    pub nodes: Vec<Node>,
    /// Shared with the store they came from (a copy out of a live store copies no
    /// allocation), and put behind their `Arc`s by the threads that decoded them.
    #[serde(with = "super::alloc_chunks::owned")]
    pub allocs: Vec<Arc<Allocation>>,
    pub evals: Vec<Evaluation>,
    pub scheduler_config: SchedulerConfig,
    pub services: Vec<ServiceRegistration>,
    pub deployments: Vec<Deployment>,
}

/// The primary tables borrowed from a live store: serializes to exactly the bytes of the
/// [`StoreParts`] that [`StateStore::to_parts`] would copy out, without copying a record.
/// Snapshots are encoded through it, so building one costs the encoded bytes and no
/// second copy of every allocation.
#[derive(Serialize)]
pub struct StorePartsRef<'a> {
    indexes: &'a TableIndexes,
    jobs: Records<'a, JobKey, Job>,
    job_versions: Records<'a, (JobKey, u64), Job>,
    nodes: Records<'a, NodeId, Node>,
    allocs: AllocChunks<'a>,
    evals: Records<'a, EvalId, Evaluation>,
    scheduler_config: &'a SchedulerConfig,
    services: Records<'a, Arc<str>, ServiceRegistration>,
    deployments: Records<'a, DeploymentId, Deployment>,
}

impl std::fmt::Debug for StorePartsRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorePartsRef")
            .field("allocs", &self.allocs.0.len())
            .finish_non_exhaustive()
    }
}

/// The allocations table, serialized as [`StoreParts::allocs`] is: in chunks.
struct AllocChunks<'a>(&'a imbl::OrdMap<AllocId, Arc<Allocation>>);

impl Serialize for AllocChunks<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        super::alloc_chunks::serialize(self.0.len(), self.0.values().map(|a| &**a), serializer)
    }
}

/// A table's records, serialized as the sequence a `Vec` of them would be.
struct Records<'a, K, V>(&'a imbl::OrdMap<K, Arc<V>>);

impl<K: Ord + Clone, V: Serialize> Serialize for Records<'_, K, V> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        for record in self.0.values() {
            seq.serialize_element(&**record)?;
        }
        seq.end()
    }
}

impl StateStore {
    /// The primary tables, borrowed, for encoding (see [`StorePartsRef`]).
    pub fn parts_ref(&self) -> StorePartsRef<'_> {
        StorePartsRef {
            indexes: &self.indexes,
            jobs: Records(&self.jobs),
            job_versions: Records(&self.job_versions),
            nodes: Records(&self.nodes),
            allocs: AllocChunks(&self.allocs),
            evals: Records(&self.evals),
            scheduler_config: &self.scheduler_config,
            services: Records(&self.services),
            deployments: Records(&self.deployments),
        }
    }

    /// The primary tables, in key order (so their encoding is deterministic).
    pub fn to_parts(&self) -> StoreParts {
        StoreParts {
            indexes: self.indexes,
            jobs: self.jobs.values().map(|j| (**j).clone()).collect(),
            job_versions: self.job_versions.values().map(|j| (**j).clone()).collect(),
            nodes: self.nodes.values().map(|n| (**n).clone()).collect(),
            allocs: self.allocs.values().cloned().collect(),
            evals: self.evals.values().map(|e| (**e).clone()).collect(),
            scheduler_config: (*self.scheduler_config).clone(),
            services: self.services.values().map(|r| (**r).clone()).collect(),
            deployments: self.deployments.values().map(|d| (**d).clone()).collect(),
        }
    }

    /// Rebuilds a store and all its derived structures from primary tables.
    pub fn from_parts(parts: StoreParts) -> StateStore {
        let mut s = StateStore::default();
        for j in parts.jobs {
            let key = j.key();
            s.jobs.insert(key.clone(), Arc::new(j));
            s.summaries
                .insert(key.clone(), Arc::new(JobSummary::new(key)));
        }
        for j in parts.job_versions {
            s.job_versions.insert((j.key(), j.version), Arc::new(j));
        }
        for mut n in parts.nodes {
            let id = n.id;
            s.nodes_by_name.insert((n.name.clone(), id));
            n.stored_class_key = StoredClassKey(Some(n.hash_class_key()));
            let n = Arc::new(n);
            s.list_schedulable(&n);
            s.nodes.insert(id, n);
            s.retaint(&id);
        }
        let summary_index = parts.indexes.job_summaries;
        s.restore_allocs(parts.allocs);
        for e in parts.evals {
            s.put_eval(0, e);
        }
        s.summaries = s
            .summaries
            .iter()
            .map(|(k, sum)| {
                let mut sum = (**sum).clone();
                sum.modify_index = summary_index;
                (k.clone(), Arc::new(sum))
            })
            .collect();
        s.scheduler_config = Arc::new(parts.scheduler_config);
        for r in parts.services {
            s.restore_service(r);
        }
        for d in parts.deployments {
            s.deployments_by_job.insert((d.job_key(), d.id));
            s.deployments.insert(d.id, Arc::new(d));
        }
        s.indexes = parts.indexes;
        s.restart_service_indexes();
        s
    }

    /// Checks every invariant of the module docs; the error says which one broke.
    pub fn check_consistency(&self) -> Result<(), String> {
        if self.indexes_lent {
            return Err("the allocation indexes are still lent to the helper thread".into());
        }
        self.acl_consistent()?;
        self.services_consistent()?;
        let rebuilt = StateStore::from_parts(self.to_parts());
        if self.allocs_by_node != rebuilt.allocs_by_node {
            return Err("allocs_by_node disagrees with the allocs table".into());
        }
        // Checked before the comparison with a rebuild, which would also catch it, to say
        // which entry is stale.
        if let Some(stale) = self
            .allocs_by_job
            .values()
            .flat_map(|entries| entries.iter())
            .find(|e| {
                self.allocs
                    .get(&e.id)
                    .is_none_or(|a| super::JobAlloc::new(a) != **e)
            })
        {
            return Err(format!(
                "allocs_by_job entry of alloc {} disagrees with the allocation it summarises",
                stale.id
            ));
        }
        if self.allocs_by_job != rebuilt.allocs_by_job {
            return Err("allocs_by_job disagrees with the allocs table".into());
        }
        if self.nodes_by_name != rebuilt.nodes_by_name {
            return Err("nodes_by_name disagrees with the node table".into());
        }
        if let Some(n) = self
            .nodes
            .values()
            .find(|n| n.stored_class_key.0 != Some(n.hash_class_key()))
        {
            return Err(format!("node {} holds a stale computed class key", n.id));
        }
        if self.schedulable != rebuilt.schedulable {
            return Err("schedulable disagrees with the node table".into());
        }
        if self.deployments_by_job != rebuilt.deployments_by_job {
            return Err("deployments_by_job disagrees with the deployments table".into());
        }
        if self.evals_by_job != rebuilt.evals_by_job {
            return Err("evals_by_job disagrees with the evals table".into());
        }
        let same_taint = self.tainted_nodes.len() == rebuilt.tainted_nodes.len()
            && self.tainted_nodes.iter().all(|(id, node)| {
                rebuilt
                    .tainted_nodes
                    .get(id)
                    .is_some_and(|want| match (node, want) {
                        (Some(a), Some(b)) => {
                            self.nodes.get(id).is_some_and(|n| Arc::ptr_eq(a, n)) && a == b
                        }
                        (None, None) => true,
                        _ => false,
                    })
            });
        if !same_taint {
            return Err("tainted_nodes disagrees with the node table and the allocations".into());
        }
        if self.node_usage != rebuilt.node_usage {
            return Err(
                "node_usage disagrees with a recount of live allocations and their ports".into(),
            );
        }
        let strip = |m: &imbl::OrdMap<JobKey, Arc<JobSummary>>| -> BTreeMap<JobKey, JobSummary> {
            m.iter()
                .map(|(k, s)| {
                    let mut s = (**s).clone();
                    s.modify_index = 0;
                    (k.clone(), s)
                })
                .collect()
        };
        if strip(&self.summaries) != strip(&rebuilt.summaries) {
            return Err("job summaries disagree with a recount".into());
        }
        for job in self.jobs.values() {
            let want = super::summary::derive_job_status(
                job,
                self.summaries.get(&job.key()).map(|s| &**s),
            );
            if job.status != want {
                return Err(format!(
                    "job {} has status {:?}, derived {:?}",
                    job.id, job.status, want
                ));
            }
        }
        if self.latest_index() != self.indexes.max().max(self.acl_index()) {
            return Err("latest index is not the maximum table index (acl tables included)".into());
        }
        let newest = [
            self.jobs.values().map(|j| j.modify_index).max(),
            self.nodes.values().map(|n| n.modify_index).max(),
            self.allocs.values().map(|a| a.modify_index).max(),
            self.evals.values().map(|e| e.modify_index).max(),
            self.deployments.values().map(|d| d.modify_index).max(),
        ];
        if let Some(m) = newest.into_iter().flatten().max()
            && m > self.latest_index()
        {
            return Err(format!(
                "an object has modify index {m} above the latest index"
            ));
        }
        Ok(())
    }
}
