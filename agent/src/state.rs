//! The agent's durable state: its node identity and, per allocation, what it runs (spec,
//! task states, the process of each task). Each is one JSON file replaced atomically
//! (written to a temp file in the same directory, synced, renamed over the old one), so a
//! crash at any moment leaves either the old or the new version, never a torn one.
//!
//! Layout under `<data_dir>/state`: `node.json`, and `allocs/<alloc id>.json`. Only the
//! agent's user may read any of it (directories 0700, files 0600; see [`crate::layout`]):
//! the node secret in `node.json` lets whoever holds it act as the node.

use crate::AgentError;
use crate::driver::ProcessRecord;
use drover_core::types::{
    AllocId, AllocatedPort, ClientStatus, JobType, NodeId, TaskGroup, TaskState,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Who this node is to the servers; kept so that a restarted agent is the same node.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeIdentity {
    pub node_id: NodeId,
    pub secret_id: String,
}

impl std::fmt::Debug for NodeIdentity {
    /// Never prints the secret: whoever holds it can act as the node.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeIdentity")
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

/// The identifying parts of an allocation the agent needs to run it (the servers' full
/// allocation is not kept: it changes under the agent and is re-read from the watch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocInfo {
    pub id: AllocId,
    pub name: String,
    pub namespace: String,
    pub job_id: String,
    pub job_name: String,
    pub job_type: JobType,
    pub job_version: u64,
    pub datacenter: String,
    /// The ports it holds on this node (its tasks' `NOMAD_PORT_*`); absent in records
    /// written before ports existed.
    #[serde(default)]
    pub ports: Vec<AllocatedPort>,
    /// The job's `meta` (a dispatched job's includes the dispatch's), which tasks see as
    /// `NOMAD_META_*`. Absent from records of older agents.
    #[serde(default)]
    pub job_meta: BTreeMap<String, String>,
    /// A dispatched job's payload, written where a task's `dispatch_payload` says.
    #[serde(default)]
    pub payload: Vec<u8>,
}

/// One task as last recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub state: TaskState,
    /// The process while it runs; `None` before the first start and after it ended.
    pub process: Option<ProcessRecord>,
}

/// Everything about one allocation the agent must not forget across a restart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocRecord {
    pub alloc: AllocInfo,
    pub group: TaskGroup,
    pub tasks: BTreeMap<String, TaskRecord>,
    pub client_status: ClientStatus,
    pub client_description: String,
    /// The failure, if any, was the node's fault.
    pub infra_failure: bool,
    /// The deployment that placed it and what the agent decided of its health for it.
    /// Absent from records of older agents.
    #[serde(default)]
    pub deployment: Option<DeploymentWatch>,
}

/// An allocation watched for its deployment's health (see
/// `drover_core::client_report::health`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeploymentWatch {
    pub id: drover_core::types::DeploymentId,
    pub min_healthy_time: std::time::Duration,
    pub healthy_deadline: std::time::Duration,
    pub since: drover_core::types::Timestamp,
    /// Whether the allocation's service checks count (records of older agents: they did not).
    #[serde(default = "task_states")]
    pub health_check: drover_core::types::HealthCheck,
    /// Decided once and then reported with every update.
    pub healthy: Option<bool>,
}

fn task_states() -> drover_core::types::HealthCheck {
    drover_core::types::HealthCheck::TaskStates
}

impl DeploymentWatch {
    /// The watch for `alloc` placed with `job`'s `group`, when a deployment placed it;
    /// starting `now` unless the servers already hold its health.
    pub fn of(
        alloc: &drover_core::types::Allocation,
        job: &drover_core::types::Job,
        group: &TaskGroup,
        now: drover_core::types::Timestamp,
    ) -> Option<DeploymentWatch> {
        let link = alloc.links.get().deployment.as_ref()?;
        let strategy = group
            .update
            .as_ref()
            .unwrap_or(&job.update)
            .deployment
            .as_ref()?;
        Some(DeploymentWatch {
            id: link.id,
            min_healthy_time: strategy.min_healthy_time,
            healthy_deadline: strategy.healthy_deadline,
            since: now,
            health_check: strategy.health_check,
            healthy: link.health.map(|h| h.healthy),
        })
    }
}

/// The `state` directory of the data dir.
#[derive(Clone, Debug)]
pub struct StateStore {
    dir: PathBuf,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> AgentError {
    AgentError::State {
        path: path.to_path_buf(),
        problem: e.to_string(),
    }
}

impl StateStore {
    /// Opens (creating) `<data_dir>/state`, private to the agent's user.
    pub fn open(data_dir: &Path) -> Result<Self, AgentError> {
        let dir = data_dir.join("state");
        let allocs = dir.join("allocs");
        for d in [&dir, &allocs] {
            std::fs::create_dir_all(d)
                .and_then(|()| crate::layout::set_mode(d, crate::layout::PRIVATE_DIR))
                .map_err(|source| AgentError::DataDir {
                    path: d.clone(),
                    source,
                })?;
        }
        Ok(Self { dir })
    }

    fn identity_path(&self) -> PathBuf {
        self.dir.join("node.json")
    }

    fn alloc_path(&self, id: AllocId) -> PathBuf {
        self.dir.join("allocs").join(format!("{id}.json"))
    }

    pub fn load_identity(&self) -> Result<Option<NodeIdentity>, AgentError> {
        read_json(&self.identity_path())
    }

    pub fn save_identity(&self, identity: &NodeIdentity) -> Result<(), AgentError> {
        write_json(&self.identity_path(), identity)
    }

    /// Every allocation record on disk. A file that cannot be read is logged and skipped
    /// rather than stopping the agent: its allocation is then treated as unknown here.
    pub fn load_allocs(&self) -> Vec<AllocRecord> {
        let dir = self.dir.join("allocs");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut records = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "json") {
                continue;
            }
            match read_json::<AllocRecord>(&path) {
                Ok(Some(r)) => records.push(r),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "skipping alloc state")
                }
            }
        }
        records.sort_by_key(|r| r.alloc.id);
        records
    }

    pub fn save_alloc(&self, record: &AllocRecord) -> Result<(), AgentError> {
        write_json(&self.alloc_path(record.alloc.id), record)
    }

    pub fn remove_alloc(&self, id: AllocId) -> Result<(), AgentError> {
        let path = self.alloc_path(id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(&path, e)),
            _ => Ok(()),
        }
    }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, AgentError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io_err(path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), AgentError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| io_err(path, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io_err(path, e))?;
    // A temp file is created 0600; set it anyway so no umask or platform default matters.
    crate::layout::set_mode(tmp.path(), crate::layout::PRIVATE_FILE)
        .map_err(|e| io_err(path, e))?;
    tmp.write_all(&bytes).map_err(|e| io_err(path, e))?;
    tmp.as_file().sync_all().map_err(|e| io_err(path, e))?;
    tmp.persist(path).map_err(|e| io_err(path, e.error))?;
    // The rename is durable only once the directory entry is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_core::mock;

    fn record(n: u64) -> AllocRecord {
        let job = mock::service_job("web", 1);
        let mut tasks = BTreeMap::new();
        tasks.insert(
            "server".to_string(),
            TaskRecord {
                state: TaskState::default(),
                process: Some(ProcessRecord {
                    pid: 42,
                    start_ticks: 7,
                }),
            },
        );
        AllocRecord {
            deployment: None,
            alloc: AllocInfo {
                id: mock::alloc_id(n),
                name: "web.web[0]".into(),
                namespace: "default".into(),
                job_id: "web".into(),
                job_name: "web".into(),
                job_type: JobType::Service,
                job_version: 0,
                datacenter: "dc1".into(),
                ports: Vec::new(),
                job_meta: BTreeMap::from([("k".into(), "v".into())]),
                payload: b"input".to_vec(),
            },
            group: job.groups[0].clone(),
            tasks,
            client_status: ClientStatus::Running,
            client_description: Default::default(),
            infra_failure: false,
        }
    }

    #[test]
    fn identity_and_allocs_round_trip_and_corrupt_files_are_skipped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = StateStore::open(dir.path()).expect("open");
        assert_eq!(store.load_identity().expect("none yet"), None);
        let id = NodeIdentity {
            node_id: mock::node_id(1),
            secret_id: "s3cret".into(),
        };
        store.save_identity(&id).expect("save");
        assert_eq!(store.load_identity().expect("load"), Some(id.clone()));
        assert!(!format!("{id:?}").contains("s3cret"));

        store.save_alloc(&record(2)).expect("save");
        store.save_alloc(&record(1)).expect("save");
        std::fs::write(dir.path().join("state/allocs/broken.json"), "{").expect("write");
        let loaded = store.load_allocs();
        assert_eq!(loaded, vec![record(1), record(2)]);

        store.remove_alloc(mock::alloc_id(1)).expect("remove");
        store
            .remove_alloc(mock::alloc_id(1))
            .expect("twice is fine");
        assert_eq!(store.load_allocs(), vec![record(2)]);
    }
}
