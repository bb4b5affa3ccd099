//! The bytes of a snapshot as openraft moves them: in memory while one arrives from a
//! leader, or read straight from the snapshot file once it is on disk.
//!
//! Why a file: at a million allocations a snapshot is a few hundred megabytes. Built into a
//! buffer, it sat in memory beside the store it encodes (the server's peak), and every
//! follower it was sent to read the whole file into another. The file variant reads from
//! disk as openraft asks for chunks.
//!
//! Invariant: positions are those of the snapshot's data, whatever its form. The file
//! variant starts `start` bytes into the file (after the header) and maps every seek and
//! position across that offset; openraft only seeks from the start.

use std::io::{self, Cursor, SeekFrom};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

#[derive(Debug)]
pub enum SnapshotData {
    /// Being received from a leader, or built where no file could be read back.
    Memory(Cursor<Vec<u8>>),
    /// The snapshot file, read-only; its data starts `start` bytes in, and the file is
    /// positioned within the data (at its start when made).
    File { file: tokio::fs::File, start: u64 },
}

impl SnapshotData {
    /// The snapshot file `file`, positioned at its data, which starts `start` bytes in.
    pub fn file(file: std::fs::File, start: u64) -> Self {
        SnapshotData::File {
            file: tokio::fs::File::from_std(file),
            start,
        }
    }

    /// An empty buffer to receive a snapshot into.
    pub fn receiving() -> Self {
        SnapshotData::Memory(Cursor::new(Vec::new()))
    }

    /// The data, whole: what installing a snapshot decodes.
    pub async fn into_bytes(self) -> io::Result<Vec<u8>> {
        match self {
            SnapshotData::Memory(c) => Ok(c.into_inner()),
            SnapshotData::File { mut file, start } => {
                use tokio::io::{AsyncReadExt, AsyncSeekExt};
                file.seek(SeekFrom::Start(start)).await?;
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes).await?;
                Ok(bytes)
            }
        }
    }
}

impl AsyncRead for SnapshotData {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).poll_read(cx, buf),
            SnapshotData::File { file, .. } => Pin::new(file).poll_read(cx, buf),
        }
    }
}

fn read_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a snapshot on disk is read-only; snapshots are received into memory",
    )
}

impl AsyncWrite for SnapshotData {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).poll_write(cx, buf),
            SnapshotData::File { .. } => Poll::Ready(Err(read_only())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).poll_flush(cx),
            SnapshotData::File { .. } => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).poll_shutdown(cx),
            SnapshotData::File { .. } => Poll::Ready(Ok(())),
        }
    }
}

impl AsyncSeek for SnapshotData {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).start_seek(position),
            SnapshotData::File { file, start } => {
                let position = match position {
                    SeekFrom::Start(n) => {
                        SeekFrom::Start(n.checked_add(*start).ok_or_else(|| {
                            io::Error::new(io::ErrorKind::InvalidInput, "seek past the end")
                        })?)
                    }
                    relative => relative,
                };
                Pin::new(file).start_seek(position)
            }
        }
    }

    fn poll_complete(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        match self.get_mut() {
            SnapshotData::Memory(c) => Pin::new(c).poll_complete(cx),
            SnapshotData::File { file, start } => Pin::new(file)
                .poll_complete(cx)
                .map_ok(|at| at.saturating_sub(*start)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    /// Both forms read and seek over the data alone, the same way.
    #[tokio::test]
    async fn file_and_memory_read_the_same_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        std::fs::write(&path, b"HEADERdata-bytes").unwrap();
        let file = tokio::fs::File::open(&path).await.unwrap();
        let forms = [
            SnapshotData::Memory(Cursor::new(b"data-bytes".to_vec())),
            SnapshotData::File { file, start: 6 },
        ];
        for mut data in forms {
            let what = format!("{data:?}");
            assert_eq!(data.seek(SeekFrom::Start(5)).await.unwrap(), 5, "{what}");
            let mut tail = String::new();
            data.read_to_string(&mut tail).await.unwrap();
            assert_eq!(tail, "bytes", "{what}");
            assert_eq!(data.seek(SeekFrom::Start(0)).await.unwrap(), 0, "{what}");
            assert_eq!(data.into_bytes().await.unwrap(), b"data-bytes", "{what}");
        }
    }

    #[tokio::test]
    async fn a_snapshot_file_refuses_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("snap");
        std::fs::write(&path, b"xx").unwrap();
        let file = tokio::fs::File::open(&path).await.unwrap();
        let mut data = SnapshotData::File { file, start: 0 };
        let e = data.write_all(b"more").await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        let mut receiving = SnapshotData::receiving();
        receiving.write_all(b"chunk").await.unwrap();
        assert_eq!(receiving.into_bytes().await.unwrap(), b"chunk");
    }
}
