//! Who a task runs as: the task's `user`, else the agent's `default_user`, else the agent's
//! own user. A name is resolved on this node (`/etc/passwd` through NSS) when the task
//! starts, as Nomad does: the same job may find different ids on different nodes.

use nix::unistd::User;
use std::path::PathBuf;

/// A resolved user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("user {user:?} does not exist on this node")]
    Unknown { user: String },
    #[error("cannot look up user {user:?}: {source}")]
    Lookup { user: String, source: nix::Error },
}

/// Resolves `name` (a user name, or a numeric uid).
pub fn lookup(name: &str) -> Result<TaskUser, UserError> {
    let found = match name.parse::<u32>() {
        Ok(uid) => User::from_uid(nix::unistd::Uid::from_raw(uid)),
        Err(_) => User::from_name(name),
    };
    let user = found
        .map_err(|source| UserError::Lookup {
            user: name.to_string(),
            source,
        })?
        .ok_or_else(|| UserError::Unknown {
            user: name.to_string(),
        })?;
    Ok(TaskUser {
        name: user.name,
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
        home: user.dir,
    })
}

/// Whether the agent runs as root, the only user that can start tasks as someone else.
pub fn agent_is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uids_resolve_and_strangers_are_named() {
        let root = lookup("root").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        assert_eq!(lookup("0").expect("uid 0").name, "root");
        let err = lookup("no-such-user-drover").expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "user \"no-such-user-drover\" does not exist on this node"
        );
    }
}
