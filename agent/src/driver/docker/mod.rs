//! The `docker` driver: tasks as containers of a Docker Engine, over its API (`bollard`,
//! on the engine's unix socket).
//!
//! A task's container is named `<task>-<alloc id>` and labelled with the allocation and
//! the task ([`LABEL_ALLOC`], [`LABEL_TASK`]), so an agent that restarts finds the
//! containers it started and re-attaches to them instead of starting duplicates. The image
//! is pulled only when the engine does not have it; the engine's memory, CPU-share and pids
//! limits carry the task's `resources`; stdout and stderr are copied from the engine's log
//! stream into the task's log files, which `alloc logs` reads as for any driver.
//!
//! Whose fault: an engine that answers and refuses (an image that cannot be pulled, a
//! command the image lacks) is the job's mistake; an engine that does not answer is the
//! node's, and makes the driver unhealthy at the next fingerprint.

mod container;

pub use container::{Container, ContainerSpec, ContainerStats};

use bollard::Docker;
use std::time::Duration;

/// Label holding the allocation id of a container the agent started.
pub const LABEL_ALLOC: &str = "com.drover.alloc_id";
/// Label holding the task name of a container the agent started.
pub const LABEL_TASK: &str = "com.drover.task";

/// The engine's address when the agent's config names none (Docker's own default).
pub const DEFAULT_ENDPOINT: &str = "unix:///var/run/docker.sock";

/// How long one call to the engine may take (a pull may take longer; it streams).
const CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// What went wrong talking to the engine.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// The engine cannot be reached or answered nonsense: the node's fault.
    #[error("docker engine at {endpoint}: {message}")]
    Engine { endpoint: String, message: String },
    /// The engine refused the image: the job's fault.
    #[error("image {image:?}: {message}")]
    Image { image: String, message: String },
    /// The engine refused the container (create or start): the job's fault.
    #[error("container {name}: {message}")]
    Container { name: String, message: String },
    /// The task's `config.ports` names a port its allocation does not hold: the job's fault.
    #[error("port {label:?} is not among the allocation's ports [{held}]")]
    Port { label: String, held: String },
}

impl DockerError {
    pub fn is_infra(&self) -> bool {
        matches!(self, DockerError::Engine { .. })
    }
}

/// The engine's own words when it answered; `None` when it did not (a transport error).
pub(crate) fn engine_message(e: &bollard::errors::Error) -> Option<String> {
    use bollard::errors::Error as E;
    match e {
        E::DockerResponseServerError { message, .. } => Some(message.trim().to_string()),
        E::DockerStreamError { error } => Some(error.trim().to_string()),
        E::DockerContainerWaitError { error, .. } => Some(error.trim().to_string()),
        _ => None,
    }
}

/// Whether the engine answered "no such thing" (a 404).
pub(crate) fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// A connection to one engine, with the API version both sides speak.
#[derive(Clone, Debug)]
pub struct DockerDriver {
    pub(crate) docker: Docker,
    pub endpoint: String,
    /// The engine's version, as `docker version` prints it.
    pub version: String,
}

impl DockerDriver {
    /// Connects to the engine at `endpoint` (`unix:///path`) and agrees on an API version.
    /// The error says whether the engine is missing or does not answer.
    pub async fn connect(endpoint: &str) -> Result<Self, (bool, String)> {
        let path = endpoint.strip_prefix("unix://").unwrap_or(endpoint);
        if !std::path::Path::new(path).exists() {
            return Err((
                false,
                format!(
                    "no docker engine socket at {path} (install one, e.g. Debian's docker.io, \
                     and start dockerd)"
                ),
            ));
        }
        let docker = Docker::connect_with_unix(
            endpoint,
            CALL_TIMEOUT.as_secs(),
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| (true, format!("cannot use {endpoint}: {e}")))?;
        let docker = docker.negotiate_version().await.map_err(|e| {
            (
                true,
                format!("the engine at {endpoint} does not answer: {e}"),
            )
        })?;
        let version = docker
            .version()
            .await
            .map_err(|e| {
                (
                    true,
                    format!("the engine at {endpoint} does not answer: {e}"),
                )
            })?
            .version
            .unwrap_or_default();
        Ok(Self {
            docker,
            endpoint: endpoint.to_string(),
            version,
        })
    }

    pub(crate) fn engine_error(&self, e: &bollard::errors::Error) -> DockerError {
        DockerError::Engine {
            endpoint: self.endpoint.clone(),
            message: e.to_string(),
        }
    }

    /// The name of `task`'s container in allocation `alloc_id`.
    pub fn container_name(alloc_id: &str, task: &str) -> String {
        format!("{task}-{alloc_id}")
    }

    /// Removes a container and its anonymous volumes; one already gone is no error.
    pub async fn remove(&self, name: &str) -> Result<(), DockerError> {
        let options = bollard::query_parameters::RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            // "removal already in progress" is the engine finishing what was asked.
            Err(e) if engine_message(&e).is_some_and(|m| m.contains("in progress")) => Ok(()),
            Err(e) => Err(self.engine_error(&e)),
        }
    }
}
