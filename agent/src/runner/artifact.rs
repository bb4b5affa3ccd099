//! A task's `artifact` blocks: each source (http(s), `file://` or a path) is fetched into
//! the task's directory before the task first starts, checked against its `checksum`, and
//! unpacked when it is an archive (`.tar`, `.tar.gz` / `.tgz`, `.zip`, or a lone `.gz`).
//!
//! Limits: what one artifact downloads, and what it unpacks to, may not pass the agent's
//! `artifact { max_size_mb }`; `file` sources read only the allocation's own directory and
//! the directories the agent's config lists in `artifact { file_roots }`, never the rest of
//! the node; nothing an archive holds may land outside the destination (entries that climb
//! out, absolute paths and links are refused).
//!
//! Whose fault: a source that does not answer or is not there, a wrong checksum, an archive
//! that is too large or broken are the job's; only a failure to write into the task's own
//! directory is the node's.

use super::task_files::{create_file, dir_within, file_within};
use crate::config::ArtifactConfig;
use drover_core::types::{Artifact, ArtifactMode};
use drover_core::validate::parse_checksum;
use futures::StreamExt;
use sha2::Digest;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

/// Why an artifact could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("artifact {url}: {message}")]
    Fetch { url: String, message: String },
    #[error("artifact {url}: larger than the agent's limit of {limit} bytes")]
    TooLarge { url: String, limit: u64 },
    #[error("artifact {url}: checksum mismatch: want {kind}:{want}, got {kind}:{got}")]
    Checksum {
        url: String,
        kind: String,
        want: String,
        got: String,
    },
    #[error("artifact {url}: {path} is outside the directories file sources may read")]
    FileNotAllowed { url: String, path: String },
    #[error("artifact {url}: cannot unpack: {message}")]
    Archive { url: String, message: String },
    #[error("artifact {url}: cannot write {path}: {error}")]
    Write {
        url: String,
        path: String,
        error: std::io::Error,
    },
}

impl ArtifactError {
    /// Only a task directory the agent cannot write to is the node's fault (one the task
    /// turned into a link is the task's doing).
    pub fn is_infra(&self) -> bool {
        matches!(self, ArtifactError::Write { error, .. } if !super::task_files::is_tampering(error))
    }
}

/// The kinds of archive the agent unpacks, by the source's file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArchiveKind {
    Tar,
    TarGz,
    Zip,
    Gz,
}

fn archive_kind(name: &str) -> Option<ArchiveKind> {
    let name = name.to_ascii_lowercase();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        Some(ArchiveKind::TarGz)
    } else if name.ends_with(".tar") {
        Some(ArchiveKind::Tar)
    } else if name.ends_with(".zip") {
        Some(ArchiveKind::Zip)
    } else if name.ends_with(".gz") {
        Some(ArchiveKind::Gz)
    } else {
        None
    }
}

/// The last path segment of a source (without its query), the name a plain file gets.
fn file_name(source: &str) -> String {
    let path = source.split(['?', '#']).next().unwrap_or(source);
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "..")
        .unwrap_or("artifact")
        .to_string()
}

/// Fetches artifacts for the tasks of one agent.
#[derive(Clone, Debug)]
pub struct Fetcher {
    client: reqwest::Client,
    config: ArtifactConfig,
}

/// Where one task's artifacts go and what its file sources may read.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The task's directory (`<alloc>/<task>`): destinations are relative to it.
    pub task_dir: &'a Path,
    /// The allocation's directory, which file sources may read.
    pub alloc_dir: &'a Path,
    /// The task's user, who owns what is written.
    pub owner: Option<(u32, u32)>,
}

impl Fetcher {
    pub fn new(config: ArtifactConfig) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Self { client, config }
    }

    /// Fetches `artifact` into `target`, checks and unpacks it; returns what it wrote.
    pub async fn fetch(
        &self,
        artifact: &Artifact,
        target: Target<'_>,
    ) -> Result<PathBuf, ArtifactError> {
        let source = artifact.source.as_str();
        let staging = target
            .task_dir
            .join(format!(".artifact-{}", std::process::id()));
        let write_err = |path: &Path, error: std::io::Error| ArtifactError::Write {
            url: source.to_string(),
            path: path.display().to_string(),
            error,
        };
        let http = source.starts_with("http://") || source.starts_with("https://");
        let downloaded = if http {
            self.download(source, &staging).await
        } else {
            Ok(())
        };
        // Copying a file and unpacking are blocking work: off the runtime's threads.
        let result = match downloaded {
            Ok(()) => {
                let (this, artifact, file) = (self.clone(), artifact.clone(), staging.clone());
                let (task_dir, alloc_dir) = (
                    target.task_dir.to_path_buf(),
                    target.alloc_dir.to_path_buf(),
                );
                let owner = target.owner;
                tokio::task::spawn_blocking(move || {
                    let target = Target {
                        task_dir: &task_dir,
                        alloc_dir: &alloc_dir,
                        owner,
                    };
                    if !http {
                        this.copy_file(&artifact.source, &file, target)?;
                    }
                    this.place(&artifact, &file, target)
                })
                .await
                .unwrap_or_else(|e| {
                    Err(ArtifactError::Archive {
                        url: source.to_string(),
                        message: format!("the unpacking task failed: {e}"),
                    })
                })
            }
            Err(e) => Err(e),
        };
        if let Err(e) = std::fs::remove_file(&staging)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(write_err(&staging, e));
        }
        result
    }

    /// Streams an http(s) source into `to`, refusing it once past the limit.
    async fn download(&self, source: &str, to: &Path) -> Result<(), ArtifactError> {
        let fetch_err = |message: String| ArtifactError::Fetch {
            url: source.to_string(),
            message,
        };
        let response = self
            .client
            .get(source)
            .send()
            .await
            .map_err(|e| fetch_err(describe(&e)))?;
        if !response.status().is_success() {
            return Err(fetch_err(format!(
                "the server answered {}",
                response.status()
            )));
        }
        let limit = self.config.max_bytes;
        if response.content_length().is_some_and(|n| n > limit) {
            return Err(ArtifactError::TooLarge {
                url: source.to_string(),
                limit,
            });
        }
        let mut file = create_file(to, 0o600, None).map_err(|error| ArtifactError::Write {
            url: source.to_string(),
            path: to.display().to_string(),
            error,
        })?;
        let mut body = response.bytes_stream();
        let mut total: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| fetch_err(describe(&e)))?;
            total += chunk.len() as u64;
            if total > limit {
                return Err(ArtifactError::TooLarge {
                    url: source.to_string(),
                    limit,
                });
            }
            file.write_all(&chunk)
                .map_err(|error| ArtifactError::Write {
                    url: source.to_string(),
                    path: to.display().to_string(),
                    error,
                })?;
        }
        Ok(())
    }

    /// Copies a `file://` or path source into `to`, if it is in a directory file sources
    /// may read.
    fn copy_file(&self, source: &str, to: &Path, target: Target<'_>) -> Result<(), ArtifactError> {
        let raw = source.strip_prefix("file://").unwrap_or(source);
        let path = if Path::new(raw).is_absolute() {
            PathBuf::from(raw)
        } else {
            target.task_dir.join(raw)
        };
        let fetch_err = |message: String| ArtifactError::Fetch {
            url: source.to_string(),
            message,
        };
        // Resolve links first: the check is on where the bytes really are.
        let real = path
            .canonicalize()
            .map_err(|e| fetch_err(format!("{}: {e}", path.display())))?;
        let allowed = std::iter::once(target.alloc_dir.to_path_buf())
            .chain(self.config.file_roots.iter().cloned())
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| real.starts_with(root));
        if !allowed {
            return Err(ArtifactError::FileNotAllowed {
                url: source.to_string(),
                path: real.display().to_string(),
            });
        }
        let from = std::fs::File::open(&real)
            .map_err(|e| fetch_err(format!("{}: {e}", real.display())))?;
        let mut to_file = create_file(to, 0o600, None).map_err(|error| ArtifactError::Write {
            url: source.to_string(),
            path: to.display().to_string(),
            error,
        })?;
        let limit = self.config.max_bytes;
        let copied = std::io::copy(&mut from.take(limit + 1), &mut to_file)
            .map_err(|e| fetch_err(format!("{}: {e}", real.display())))?;
        if copied > limit {
            return Err(ArtifactError::TooLarge {
                url: source.to_string(),
                limit,
            });
        }
        Ok(())
    }

    /// Checks the downloaded file and puts it (or what it unpacks to) at its destination.
    fn place(
        &self,
        artifact: &Artifact,
        staged: &Path,
        target: Target<'_>,
    ) -> Result<PathBuf, ArtifactError> {
        let source = artifact.source.as_str();
        if let Some(checksum) = artifact.options.get("checksum") {
            verify(source, staged, checksum)?;
        }
        let relative = Path::new(&artifact.destination);
        let write_err = |path: &Path, error: std::io::Error| ArtifactError::Write {
            url: source.to_string(),
            path: path.display().to_string(),
            error,
        };
        let unpack = artifact.options.get("archive").is_none_or(|a| a != "false");
        let kind = archive_kind(&file_name(source)).filter(|_| unpack);
        match (artifact.mode, kind) {
            (ArtifactMode::File, _) => {
                let file = file_within(target.task_dir, relative, target.owner)
                    .map_err(|e| write_err(relative, e))?;
                std::fs::rename(staged, &file).map_err(|e| write_err(&file, e))?;
                own(&file, target.owner).map_err(|e| write_err(&file, e))?;
                Ok(file)
            }
            (ArtifactMode::Dir, None) => Err(ArtifactError::Archive {
                url: source.to_string(),
                message: "mode \"dir\" needs an archive (.tar, .tar.gz, .tgz, .zip)".into(),
            }),
            (_, None) => {
                let dir = dir_within(target.task_dir, relative, target.owner)
                    .map_err(|e| write_err(relative, e))?;
                let file = dir.join(file_name(source));
                std::fs::rename(staged, &file).map_err(|e| write_err(&file, e))?;
                own(&file, target.owner).map_err(|e| write_err(&file, e))?;
                Ok(dir)
            }
            (_, Some(kind)) => {
                let dir = dir_within(target.task_dir, relative, target.owner)
                    .map_err(|e| write_err(relative, e))?;
                let mut unpacker = Unpacker {
                    source,
                    root: &dir,
                    left: self.config.max_bytes,
                    limit: self.config.max_bytes,
                    owner: target.owner,
                };
                unpacker.unpack(kind, staged, &file_name(source))?;
                Ok(dir)
            }
        }
    }
}

/// reqwest's error with its causes, which hold the useful part ("connection refused").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

fn own(path: &Path, owner: Option<(u32, u32)>) -> std::io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::lchown(path, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

/// Checks `file` against `checksum` (`TYPE:HEX`, validated when the job was submitted).
fn verify(source: &str, file: &Path, checksum: &str) -> Result<(), ArtifactError> {
    let (kind, want) = parse_checksum(checksum).map_err(|message| ArtifactError::Fetch {
        url: source.to_string(),
        message,
    })?;
    let mut input = std::fs::File::open(file).map_err(|error| ArtifactError::Write {
        url: source.to_string(),
        path: file.display().to_string(),
        error,
    })?;
    let got = match kind {
        "md5" => digest::<md5::Md5>(&mut input),
        "sha1" => digest::<sha1::Sha1>(&mut input),
        "sha256" => digest::<sha2::Sha256>(&mut input),
        _ => digest::<sha2::Sha512>(&mut input),
    }
    .map_err(|error| ArtifactError::Write {
        url: source.to_string(),
        path: file.display().to_string(),
        error,
    })?;
    if !got.eq_ignore_ascii_case(want) {
        return Err(ArtifactError::Checksum {
            url: source.to_string(),
            kind: kind.to_string(),
            want: want.to_ascii_lowercase(),
            got,
        });
    }
    Ok(())
}

fn digest<D: Digest + Write>(input: &mut std::fs::File) -> std::io::Result<String> {
    let mut hasher = D::new();
    std::io::copy(input, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Unpacks one archive under `root`, counting what it writes against the limit.
struct Unpacker<'a> {
    source: &'a str,
    root: &'a Path,
    left: u64,
    limit: u64,
    owner: Option<(u32, u32)>,
}

impl Unpacker<'_> {
    fn refused(&self, message: impl Into<String>) -> ArtifactError {
        ArtifactError::Archive {
            url: self.source.to_string(),
            message: message.into(),
        }
    }

    fn unpack(&mut self, kind: ArchiveKind, file: &Path, name: &str) -> Result<(), ArtifactError> {
        let input = std::fs::File::open(file).map_err(|e| self.refused(e.to_string()))?;
        match kind {
            ArchiveKind::Tar => self.tar(input),
            ArchiveKind::TarGz => self.tar(flate2::read::GzDecoder::new(input)),
            ArchiveKind::Gz => {
                let inner = name
                    .get(..name.len() - 3)
                    .filter(|n| !n.is_empty())
                    .unwrap_or("artifact");
                let path = self.inside(Path::new(inner))?;
                self.write(&path, &mut flate2::read::GzDecoder::new(input), 0o644)
            }
            ArchiveKind::Zip => self.zip(input),
        }
    }

    /// `entry` under the root, refusing absolute paths and `..`.
    fn inside(&self, entry: &Path) -> Result<PathBuf, ArtifactError> {
        let mut path = self.root.to_path_buf();
        for c in entry.components() {
            match c {
                Component::Normal(part) => path.push(part),
                Component::CurDir => {}
                _ => {
                    return Err(
                        self.refused(format!("entry {} leaves the destination", entry.display()))
                    );
                }
            }
        }
        Ok(path)
    }

    /// Writes one file from `data`, counting its bytes against the limit.
    fn write(&mut self, path: &Path, data: &mut dyn Read, mode: u32) -> Result<(), ArtifactError> {
        if let Some(parent) = path.parent() {
            self.make_dirs(parent)?;
        }
        // A file an earlier entry or artifact left there (a link included) is replaced,
        // never written through.
        let mut out =
            create_file(path, mode & 0o755, self.owner).map_err(|error| ArtifactError::Write {
                url: self.source.to_string(),
                path: path.display().to_string(),
                error,
            })?;
        let written = std::io::copy(&mut data.take(self.left + 1), &mut out)
            .map_err(|e| self.refused(e.to_string()))?;
        if written > self.left {
            return Err(ArtifactError::TooLarge {
                url: self.source.to_string(),
                limit: self.limit,
            });
        }
        self.left -= written;
        Ok(())
    }

    fn make_dirs(&self, dir: &Path) -> Result<(), ArtifactError> {
        let relative = dir.strip_prefix(self.root).unwrap_or(Path::new(""));
        dir_within(self.root, relative, self.owner)
            .map(|_| ())
            .map_err(|e| self.refused(e.to_string()))
    }

    fn tar(&mut self, input: impl Read) -> Result<(), ArtifactError> {
        let mut archive = tar::Archive::new(input);
        let entries = archive.entries().map_err(|e| self.refused(e.to_string()))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| self.refused(e.to_string()))?;
            let name = entry
                .path()
                .map_err(|e| self.refused(e.to_string()))?
                .into_owned();
            let path = self.inside(&name)?;
            let mode = entry.header().mode().unwrap_or(0o644);
            match entry.header().entry_type() {
                tar::EntryType::Directory => self.make_dirs(&path)?,
                tar::EntryType::Regular | tar::EntryType::Continuous => {
                    self.write(&path, &mut entry, mode)?;
                }
                other => {
                    return Err(self.refused(format!(
                        "entry {} is a {other:?}; only files and directories are unpacked",
                        name.display()
                    )));
                }
            }
        }
        Ok(())
    }

    fn zip(&mut self, input: std::fs::File) -> Result<(), ArtifactError> {
        let mut archive = zip::ZipArchive::new(input).map_err(|e| self.refused(e.to_string()))?;
        for i in 0..archive.len() {
            let mut entry = archive
                .by_index(i)
                .map_err(|e| self.refused(e.to_string()))?;
            let name = PathBuf::from(entry.name());
            let path = self.inside(&name)?;
            if entry.is_dir() {
                self.make_dirs(&path)?;
            } else if entry.is_symlink() {
                return Err(self.refused(format!(
                    "entry {} is a link; only files and directories are unpacked",
                    name.display()
                )));
            } else {
                let mode = entry.unix_mode().unwrap_or(0o644);
                self.write(&path, &mut entry, mode)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
