//! Task logs: stdout and stderr go straight into files the task itself holds open in append
//! mode, so a task keeps logging (and never gets SIGPIPE) while the agent is down or
//! restarting. The agent bounds them by copy-and-truncate: once the live file passes the
//! size limit its content moves to `<name>.1` (older copies shift to `.2`, ... and the
//! oldest is dropped), then the live file is truncated; with `O_APPEND` the task's next
//! write lands at the new end. Lines written between the copy and the truncate are lost,
//! the price of rotating without the task's help.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// Where one task's logs live: `<alloc dir>/alloc/logs/<task>.stdout` and `.stderr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogPaths {
    pub stdout: PathBuf,
    pub stderr: PathBuf,
}

impl LogPaths {
    pub fn new(log_dir: &Path, task: &str) -> Self {
        Self {
            stdout: log_dir.join(format!("{task}.stdout")),
            stderr: log_dir.join(format!("{task}.stderr")),
        }
    }

    /// Opens both files for the task to inherit, creating them (and never truncating: a
    /// restarted task appends to what its predecessor wrote).
    pub fn open(&self) -> io::Result<(File, File)> {
        Ok((open_append(&self.stdout)?, open_append(&self.stderr)?))
    }
}

/// Log files are 0640: the agent's user and group read them, nobody else (a task needs no
/// access: it writes through the descriptor it inherits).
pub const LOG_FILE_MODE: u32 = 0o640;

fn open_append(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(LOG_FILE_MODE)
        .open(path)?;
    // An older agent's log (0644) keeps its mode through `open`; set it.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(LOG_FILE_MODE))?;
    Ok(file)
}

fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Rotates `path` if it has grown past `max_bytes`, keeping at most `max_files` old copies
/// (0: none, the content is simply dropped). Returns whether it rotated.
pub fn rotate_if_needed(path: &Path, max_bytes: u64, max_files: u32) -> io::Result<bool> {
    let len = match std::fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if len <= max_bytes {
        return Ok(false);
    }
    if max_files > 0 {
        for n in (1..max_files).rev() {
            let from = rotated(path, n);
            if from.exists() {
                std::fs::rename(&from, rotated(path, n + 1))?;
            }
        }
        std::fs::copy(path, rotated(path, 1))?;
    }
    OpenOptions::new().write(true).open(path)?.set_len(0)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn rotation_keeps_the_newest_copies_within_bounds() {
        let dir = tempfile::tempdir().expect("temp dir");
        let logs = LogPaths::new(dir.path(), "web");
        let (mut out, _err) = logs.open().expect("open");
        for round in 0..5u8 {
            out.write_all(&[b'a' + round; 100]).expect("write");
            assert!(rotate_if_needed(&logs.stdout, 50, 2).expect("rotate"));
            assert_eq!(std::fs::metadata(&logs.stdout).expect("live").len(), 0);
        }
        // The task keeps appending at the start of the truncated file.
        out.write_all(b"tail").expect("write");
        assert_eq!(std::fs::read(&logs.stdout).expect("live"), b"tail");
        assert_eq!(
            std::fs::read(rotated(&logs.stdout, 1)).expect(".1"),
            [b'e'; 100]
        );
        assert_eq!(
            std::fs::read(rotated(&logs.stdout, 2)).expect(".2"),
            [b'd'; 100]
        );
        assert!(!rotated(&logs.stdout, 3).exists());
        assert!(!rotate_if_needed(&logs.stdout, 50, 2).expect("small"));
        assert!(!rotate_if_needed(&dir.path().join("none"), 50, 2).expect("missing"));
    }
}
