//! The current Raft snapshot, one file in the data dir.
//!
//! Layout of `snapshot.bin`: the magic `"drsnap"`, a format byte, the meta length (u32 LE),
//! the postcard-encoded [`SnapshotMeta`], the data length (u64 LE), then the data (core's
//! versioned [`drover_core::fsm::encode_snapshot`] bytes). A snapshot is written to a temp
//! file, fsynced, renamed over the current one and the directory fsynced, so a crash leaves
//! either the old snapshot or the new one, never a torn file.

use super::types::SnapshotMeta;
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The snapshot file's name inside the snapshot dir.
pub const SNAPSHOT_FILE: &str = "snapshot.bin";
const TEMP_FILE: &str = "snapshot.bin.tmp";
const MAGIC: &[u8; 6] = b"drsnap";
/// The snapshot file format this build writes and reads.
pub const SNAPSHOT_FILE_FORMAT: u8 = 1;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot file {path}: {op} failed: {source}")]
    Io {
        path: PathBuf,
        op: &'static str,
        source: io::Error,
    },
    #[error("snapshot file {path} is corrupt: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "snapshot file {path}: format version {found} is not supported (this build reads {supported})"
    )]
    UnsupportedVersion {
        path: PathBuf,
        found: u8,
        supported: u8,
    },
    #[error("cannot encode the meta of snapshot {snapshot_id}: {source}")]
    EncodeMeta {
        snapshot_id: String,
        source: postcard::Error,
    },
    #[error("snapshot {snapshot_id} holds malformed state: {source}")]
    Decode {
        snapshot_id: String,
        source: drover_core::fsm::CodecError,
    },
    #[error("snapshot task failed: {reason}")]
    Task { reason: String },
}

/// The snapshot directory. Writes are serialized, and a snapshot older than the current one
/// is never written over it (a slow build can finish after a newer snapshot was installed).
pub struct SnapshotStore {
    dir: PathBuf,
    current: Mutex<Option<SnapshotMeta>>,
}

impl fmt::Debug for SnapshotStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> SnapshotError + 'a {
    move |source| SnapshotError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

impl SnapshotStore {
    /// Opens the snapshot dir (creating it) and returns the current snapshot, if any.
    pub fn open(
        dir: &Path,
    ) -> Result<(SnapshotStore, Option<(SnapshotMeta, Vec<u8>)>), SnapshotError> {
        super::private::private_dir(dir).map_err(io_err(dir, "create private dir"))?;
        let temp = dir.join(TEMP_FILE);
        if temp.exists() {
            // A write that crashed before its rename: the current file is still whole.
            fs::remove_file(&temp).map_err(io_err(&temp, "remove stale temp file"))?;
        }
        let store = SnapshotStore {
            dir: dir.to_path_buf(),
            current: Mutex::new(None),
        };
        let current = store.read()?;
        if current.is_some() {
            // Written by an older version under the umask: owner-only from now on.
            let path = store.path();
            super::private::private_file(&path).map_err(io_err(&path, "make private"))?;
        }
        *store.lock() = current.as_ref().map(|(m, _)| m.clone());
        Ok((store, current))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<SnapshotMeta>> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }

    /// The meta of the current snapshot.
    pub fn current_meta(&self) -> Option<SnapshotMeta> {
        self.lock().clone()
    }

    /// Reads the current snapshot file: its meta and its data.
    pub fn read(&self) -> Result<Option<(SnapshotMeta, Vec<u8>)>, SnapshotError> {
        let Some((meta, mut file, start)) = self.open_current()? else {
            return Ok(None);
        };
        let len = file.metadata().map_err(io_err(&self.path(), "stat"))?.len();
        let mut data = Vec::with_capacity(usize::try_from(len - start).unwrap_or(0));
        file.read_to_end(&mut data)
            .map_err(io_err(&self.path(), "read"))?;
        Ok(Some((meta, data)))
    }

    /// Opens the current snapshot file for reading its data: the meta, the file positioned
    /// at its data, and where the data starts. Reads only the header, however large the
    /// snapshot.
    pub fn open_current(&self) -> Result<Option<(SnapshotMeta, File, u64)>, SnapshotError> {
        let path = self.path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, "open")(e)),
        };
        let (meta, start) = read_head(&path, &file)?;
        Ok(Some((meta, file, start)))
    }

    /// Makes `meta` + `data` the current snapshot, unless the current one is newer. Returns
    /// whether it was written.
    pub fn write(&self, meta: &SnapshotMeta, data: &[u8]) -> Result<bool, SnapshotError> {
        Ok(self.write_with(meta, |out| out.write_all(data))?.is_some())
    }

    /// Makes `meta` and the data `encode` writes the current snapshot, unless the current
    /// one is newer, streaming the data to disk. Returns the new file opened for reading,
    /// positioned at its data, and where the data starts, or `None` when a newer snapshot
    /// was kept.
    pub fn write_with(
        &self,
        meta: &SnapshotMeta,
        encode: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<Option<(File, u64)>, SnapshotError> {
        let mut current = self.lock();
        if let Some(cur) = current.as_ref()
            && cur.last_log_id > meta.last_log_id
        {
            tracing::info!(
                snapshot_id = %meta.snapshot_id,
                current = %cur.snapshot_id,
                "not replacing a newer snapshot with an older one"
            );
            return Ok(None);
        }
        let meta_bytes =
            postcard::to_allocvec(meta).map_err(|source| SnapshotError::EncodeMeta {
                snapshot_id: meta.snapshot_id.clone(),
                source,
            })?;
        let meta_len = u32::try_from(meta_bytes.len()).map_err(|_| SnapshotError::Corrupt {
            path: self.path(),
            reason: format!("meta of {} bytes is too large", meta_bytes.len()),
        })?;
        let temp = self.dir.join(TEMP_FILE);
        let mut head = Vec::with_capacity(MAGIC.len() + 1 + 4 + meta_bytes.len() + 8);
        head.extend_from_slice(MAGIC);
        head.push(SNAPSHOT_FILE_FORMAT);
        head.extend_from_slice(&meta_len.to_le_bytes());
        head.extend_from_slice(&meta_bytes);
        // The data's length is not known until it is written: zero here, patched after.
        let length_at = head.len() as u64;
        head.extend_from_slice(&0u64.to_le_bytes());
        let start = head.len() as u64;
        let data_len = {
            let f = super::private::private_options()
                .open(&temp)
                .map_err(io_err(&temp, "create"))?;
            let mut out = io::BufWriter::with_capacity(1 << 20, SyncBehind::new(f));
            out.write_all(&head).map_err(io_err(&temp, "write"))?;
            encode(&mut out).map_err(io_err(&temp, "write"))?;
            let mut f = out
                .into_inner()
                .map_err(|e| io_err(&temp, "write")(e.into_error()))?
                .file;
            let end = f.stream_position().map_err(io_err(&temp, "write"))?;
            let data_len = end - start;
            f.seek(SeekFrom::Start(length_at))
                .and_then(|_| f.write_all(&data_len.to_le_bytes()))
                .map_err(io_err(&temp, "write"))?;
            f.sync_all().map_err(io_err(&temp, "fsync"))?;
            data_len
        };
        let path = self.path();
        fs::rename(&temp, &path).map_err(io_err(&path, "rename temp file over"))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir, "fsync dir"))?;
        // Opened while the lock is held, so it is this snapshot's file and not a later one.
        let mut written = File::open(&path).map_err(io_err(&path, "open"))?;
        written
            .seek(SeekFrom::Start(start))
            .map_err(io_err(&path, "seek"))?;
        *current = Some(meta.clone());
        tracing::info!(
            snapshot_id = %meta.snapshot_id,
            last_log = ?meta.last_log_id.map(|l| l.index),
            bytes = data_len,
            "raft snapshot written"
        );
        Ok(Some((written, start)))
    }
}

/// How many bytes of a snapshot may be written before they are synced.
const SYNC_EVERY_BYTES: u64 = 8 * 1024 * 1024;

/// A file that is synced every [`SYNC_EVERY_BYTES`] as it is written. A snapshot is tens to
/// hundreds of megabytes; left dirty in the page cache until its final fsync, it is what
/// the Raft log's next fsyncs wait behind (the filesystem's journal orders them), and every
/// append this server acknowledges stalls for as long. Synced as it goes, the log never
/// waits behind more than a few megabytes of it.
struct SyncBehind {
    file: File,
    unsynced: u64,
}

impl SyncBehind {
    fn new(file: File) -> Self {
        Self { file, unsynced: 0 }
    }
}

impl Write for SyncBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.unsynced += n as u64;
        if self.unsynced >= SYNC_EVERY_BYTES {
            self.file.sync_data()?;
            self.unsynced = 0;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

fn take<'a>(
    rest: &mut &'a [u8],
    n: usize,
    what: &str,
    path: &Path,
) -> Result<&'a [u8], SnapshotError> {
    if rest.len() < n {
        return Err(SnapshotError::Corrupt {
            path: path.to_path_buf(),
            reason: format!(
                "truncated in the {what}: needs {n} bytes, {} left",
                rest.len()
            ),
        });
    }
    let (head, tail) = rest.split_at(n);
    *rest = tail;
    Ok(head)
}

/// Reads and checks the header of the snapshot file `file`, and only the header, leaving
/// the file at the end of what was read; returns the meta and where the data starts.
fn read_head(path: &Path, mut file: &File) -> Result<(SnapshotMeta, u64), SnapshotError> {
    let file_len = file.metadata().map_err(io_err(path, "stat"))?.len();
    let mut head = Vec::new();
    let mut read_up_to = |n: u64, head: &mut Vec<u8>| {
        // A short file reads short; `decode_head` names the part that is missing.
        (&mut file)
            .take(n)
            .read_to_end(head)
            .map_err(io_err(path, "read"))
    };
    let fixed = MAGIC.len() + 1 + 4;
    if read_up_to(fixed as u64, &mut head)? == fixed {
        let mut len4 = [0u8; 4];
        len4.copy_from_slice(&head[MAGIC.len() + 1..]);
        read_up_to(u64::from(u32::from_le_bytes(len4)) + 8, &mut head)?;
    }
    let (meta, start) = decode_head(path, &head, file_len)?;
    Ok((meta, start as u64))
}

/// Checks a snapshot file's header, given its first bytes and the file's length, and
/// returns its meta and where its data starts (the data runs to the end).
fn decode_head(
    path: &Path,
    bytes: &[u8],
    file_len: u64,
) -> Result<(SnapshotMeta, usize), SnapshotError> {
    let corrupt = |reason: String| SnapshotError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let mut rest = bytes;
    let magic = take(&mut rest, MAGIC.len(), "magic", path)?;
    if magic != MAGIC {
        return Err(corrupt(format!("bad magic bytes {magic:02x?}")));
    }
    let version = take(&mut rest, 1, "format version", path)?[0];
    if version != SNAPSHOT_FILE_FORMAT {
        return Err(SnapshotError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: SNAPSHOT_FILE_FORMAT,
        });
    }
    let mut len4 = [0u8; 4];
    len4.copy_from_slice(take(&mut rest, 4, "meta length", path)?);
    let meta_bytes = take(&mut rest, u32::from_le_bytes(len4) as usize, "meta", path)?;
    let meta: SnapshotMeta =
        postcard::from_bytes(meta_bytes).map_err(|e| corrupt(format!("malformed meta: {e}")))?;
    let mut len8 = [0u8; 8];
    len8.copy_from_slice(take(&mut rest, 8, "data length", path)?);
    let data_len = usize::try_from(u64::from_le_bytes(len8))
        .map_err(|_| corrupt("data length does not fit in memory".to_string()))?;
    let offset = bytes.len() - rest.len();
    let data_in_file = file_len.saturating_sub(offset as u64);
    if data_in_file < data_len as u64 {
        return Err(corrupt(format!(
            "truncated in the data: needs {data_len} bytes, {data_in_file} left"
        )));
    }
    if data_in_file > data_len as u64 {
        return Err(corrupt(format!(
            "{} trailing bytes after the data",
            data_in_file - data_len as u64
        )));
    }
    Ok((meta, offset))
}
