//! The agent's data dir and who may read what in it.
//!
//! ```text
//! <data_dir>                    0711  traverse only: a task reaches its own directory by
//!                                     path, but cannot list what else lives here
//! <data_dir>/state              0700  node identity and allocation records (files 0600)
//! <data_dir>/allocs             0711  traverse only: allocation ids cannot be listed
//! <data_dir>/allocs/<id>        0751  see [`crate::runner::TaskDirs`] for what is inside
//! ```
//!
//! **Invariant:** nothing a task may read leads to `state`: it is a sibling of `allocs`, so
//! every path out of an allocation dir (`../../../state/node.json` included) meets a
//! directory only the agent's user may enter. That holds for tasks that run as another user
//! than the agent's (an `exec` task, or a `raw_exec` task with a `user`); a `raw_exec` task
//! running as the agent's own user can read whatever the agent can, modes or not, which is
//! why ARCHITECTURE.md's Trust section tells operators to give `raw_exec` a `user`.
//!
//! A data dir made by an older agent (everything 0755) is tightened in place at start; no
//! file moves.

use crate::AgentError;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Mode of the data dir and of `allocs`: others may pass through, not list.
pub const TRAVERSE_ONLY: u32 = 0o711;
/// Mode of `state` and everything under it that is a directory.
pub const PRIVATE_DIR: u32 = 0o700;
/// Mode of every file under `state`.
pub const PRIVATE_FILE: u32 = 0o600;

/// The data dir's parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub data_dir: PathBuf,
    pub state: PathBuf,
    pub allocs: PathBuf,
}

impl Layout {
    pub fn new(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            state: data_dir.join("state"),
            allocs: data_dir.join("allocs"),
        }
    }

    /// Creates the directories that are missing and sets the modes above on every one of
    /// them and on what `state` already holds (an older agent left them world-readable).
    pub fn prepare(&self) -> Result<(), AgentError> {
        let dir_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| AgentError::DataDir { path, source }
        };
        for (dir, mode) in [
            (&self.data_dir, TRAVERSE_ONLY),
            (&self.state, PRIVATE_DIR),
            (&self.allocs, TRAVERSE_ONLY),
        ] {
            std::fs::create_dir_all(dir).map_err(dir_err(dir))?;
            set_mode(dir, mode).map_err(dir_err(dir))?;
        }
        tighten(&self.state).map_err(dir_err(&self.state))
    }
}

pub fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Every directory under `dir` to 0700 and every file to 0600.
fn tighten(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            set_mode(&entry.path(), PRIVATE_DIR)?;
            tighten(&entry.path())?;
        } else if kind.is_file() {
            set_mode(&entry.path(), PRIVATE_FILE)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn an_old_world_readable_data_dir_is_tightened_in_place() {
        let dir = tempfile::tempdir().expect("temp dir");
        let layout = Layout::new(&dir.path().join("agent"));
        // What an agent before this change left: 0755 dirs, a 0644 identity file.
        std::fs::create_dir_all(layout.state.join("allocs")).expect("mkdir");
        std::fs::create_dir_all(&layout.allocs).expect("mkdir");
        std::fs::write(layout.state.join("node.json"), "{}").expect("write");
        for p in [&layout.data_dir, &layout.state, &layout.allocs] {
            set_mode(p, 0o755).expect("chmod");
        }
        set_mode(&layout.state.join("node.json"), 0o644).expect("chmod");

        layout.prepare().expect("prepare");
        let cases = [
            (layout.data_dir.clone(), TRAVERSE_ONLY),
            (layout.state.clone(), PRIVATE_DIR),
            (layout.state.join("allocs"), PRIVATE_DIR),
            (layout.state.join("node.json"), PRIVATE_FILE),
            (layout.allocs.clone(), TRAVERSE_ONLY),
        ];
        for (path, want) in cases {
            assert_eq!(mode(&path), want, "{}", path.display());
        }
        assert_eq!(
            std::fs::read_to_string(layout.state.join("node.json")).expect("kept"),
            "{}"
        );
    }
}
