//! Writing into a task's directory as the agent. The agent often runs as root while the
//! task runs as another user who owns its directory and may, while it runs, replace any
//! part of it with a link (`local -> /etc`). Everything the agent writes there (artifacts,
//! templates, payloads) goes through these functions, which never follow a link: each
//! directory on the way is checked (and created) one component at a time, and a file is
//! created fresh (`O_CREAT | O_EXCL`, which refuses a link) and changed through its handle.

use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

/// Whether a failed write was refused by these checks (a link, a file where a directory
/// should be, a path leaving the root): the task's doing, not the node's.
pub fn is_tampering(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::AlreadyExists | io::ErrorKind::InvalidInput
    )
}

/// `relative`'s components with `.` and `..` resolved lexically; an error if it is absolute
/// or climbs above its root.
fn normal_parts(relative: &Path) -> io::Result<Vec<&std::ffi::OsStr>> {
    let mut parts = Vec::new();
    for c in relative.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            Component::ParentDir if parts.pop().is_some() => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} leaves the task's directory", relative.display()),
                ));
            }
        }
    }
    Ok(parts)
}

/// The directory `relative` under `root`, created as needed (owned by `owner`), refusing
/// any component that is a link or not a directory.
pub fn dir_within(root: &Path, relative: &Path, owner: Option<(u32, u32)>) -> io::Result<PathBuf> {
    let mut at = root.to_path_buf();
    for part in normal_parts(relative)? {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is a link or not a directory", at.display()),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir(&at)?;
                if let Some((uid, gid)) = owner {
                    std::os::unix::fs::lchown(&at, Some(uid), Some(gid))?;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// The file `relative` under `root`: its directory checked by [`dir_within`], and its name.
pub fn file_within(root: &Path, relative: &Path, owner: Option<(u32, u32)>) -> io::Result<PathBuf> {
    let parts = normal_parts(relative)?;
    let Some((name, dirs)) = parts.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", relative.display()),
        ));
    };
    let dir = dir_within(root, &dirs.iter().collect::<PathBuf>(), owner)?;
    Ok(dir.join(name))
}

/// Creates `path` fresh (whatever was there, a link included, is removed first, never
/// followed) with `mode`, owned by `owner`.
pub fn create_file(path: &Path, mode: u32, owner: Option<(u32, u32)>) -> io::Result<std::fs::File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    // The umask may have taken bits away; the handle is the file we made, whatever the
    // path names by now.
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::fchown(&file, Some(uid), Some(gid))?;
    }
    Ok(file)
}

/// Writes `bytes` to the file `relative` under `root` and puts it in place whole (a reader
/// never sees half of it): written beside it under a hidden name, then renamed, which
/// replaces a link at the destination instead of following it.
pub fn replace_file(
    root: &Path,
    relative: &Path,
    bytes: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<PathBuf> {
    use std::io::Write;
    let path = file_within(root, relative, owner)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let staged = path.with_file_name(format!(".{name}.drover-new"));
    let mut file = create_file(&staged, mode, owner)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&staged, &path)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_land_inside_and_links_are_never_followed() {
        let root = tempfile::tempdir().expect("temp dir");
        let outside = tempfile::tempdir().expect("outside");
        let task = root.path();
        let written = replace_file(task, Path::new("local/./a/../b/f.txt"), b"one", 0o640, None)
            .expect("written");
        assert_eq!(written, task.join("local/b/f.txt"));
        assert_eq!(std::fs::read(&written).expect("read"), b"one");
        let mode = std::fs::metadata(&written)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);

        // The task swaps a directory for a link out of its tree: the agent refuses it.
        std::fs::remove_dir_all(task.join("local/b")).expect("rm");
        std::os::unix::fs::symlink(outside.path(), task.join("local/b")).expect("link");
        let err = replace_file(task, Path::new("local/b/f.txt"), b"two", 0o644, None)
            .expect_err("through a link");
        assert!(
            err.to_string().contains("is a link or not a directory"),
            "{err}"
        );
        assert!(!outside.path().join("f.txt").exists());

        // A link at the file itself is replaced, not written through.
        let target = outside.path().join("victim");
        std::fs::write(&target, "keep").expect("victim");
        std::os::unix::fs::symlink(&target, task.join("local/f")).expect("link");
        replace_file(task, Path::new("local/f"), b"mine", 0o644, None).expect("replaced");
        assert_eq!(std::fs::read_to_string(&target).expect("victim"), "keep");
        assert_eq!(
            std::fs::read_to_string(task.join("local/f")).expect("f"),
            "mine"
        );

        for bad in ["../x", "/etc/passwd", "a/../../x", ""] {
            assert!(
                replace_file(task, Path::new(bad), b"", 0o644, None).is_err(),
                "{bad}"
            );
        }
    }
}
