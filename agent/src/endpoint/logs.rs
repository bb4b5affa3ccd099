//! Reading a task's log file for a caller: from the start or its last lines, then, when
//! following, what the task appends. The file is rotated by copy-and-truncate
//! (`crate::driver::logs`), so a file shorter than what was already sent has been
//! truncated: reading starts over at its beginning.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;
use tokio::sync::mpsc;

/// The most bytes one message carries.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// How often a followed file is checked for new bytes.
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// The offset at which the last `lines` lines of `file` start (a final newline does not
/// begin another line); 0 when the file holds fewer.
pub fn tail_offset(file: &mut (impl Read + Seek), lines: u64) -> io::Result<u64> {
    let len = file.seek(SeekFrom::End(0))?;
    if lines == 0 {
        return Ok(len);
    }
    let mut block = vec![0u8; 8 * 1024];
    let mut end = len;
    let mut seen = 0u64;
    let mut last_byte = true;
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let buf = &mut block[..usize::try_from(end - start).unwrap_or(0)];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(buf)?;
        for (i, b) in buf.iter().enumerate().rev() {
            let at = start + i as u64;
            if *b == b'\n' && !(last_byte && at + 1 == len) {
                seen += 1;
                if seen == lines {
                    return Ok(at + 1);
                }
            }
            last_byte = false;
        }
        end = start;
    }
    Ok(0)
}

/// Up to [`CHUNK_BYTES`] of `path` from `offset`, and the offset after them. A file
/// shorter than `offset` was truncated by rotation: it is read from 0. A missing file
/// reads as empty (the task has not written yet).
pub fn read_chunk(path: &Path, offset: u64) -> io::Result<(Vec<u8>, u64)> {
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let from = if len < offset { 0 } else { offset };
    file.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity(CHUNK_BYTES.min(usize::try_from(len - from).unwrap_or(0)));
    file.take(CHUNK_BYTES as u64).read_to_end(&mut buf)?;
    let next = from + buf.len() as u64;
    Ok((buf, next))
}

/// What a log stream is asked for.
#[derive(Clone, Copy, Debug)]
pub struct LogRead {
    pub tail_lines: Option<u64>,
    pub follow: bool,
}

/// Sends `path`'s content as [`LogRead`] asks into `out` until it is read (or, when
/// following, until `done` says the task has ended and nothing is left, or the receiver
/// hangs up).
pub async fn stream(
    path: &Path,
    read: LogRead,
    out: mpsc::Sender<io::Result<Vec<u8>>>,
    done: impl Fn() -> bool,
) {
    let mut offset = match read.tail_lines {
        Some(lines) => match std::fs::File::open(path) {
            Ok(mut f) => match tail_offset(&mut f, lines) {
                Ok(o) => o,
                Err(e) => {
                    let _ = out.send(Err(e)).await;
                    return;
                }
            },
            Err(_) => 0,
        },
        None => 0,
    };
    loop {
        let finished = read.follow && done();
        match read_chunk(path, offset) {
            Ok((bytes, next)) if !bytes.is_empty() => {
                offset = next;
                if out.send(Ok(bytes)).await.is_err() {
                    return;
                }
                continue;
            }
            Ok((_, next)) => offset = next,
            Err(e) => {
                let _ = out.send(Err(e)).await;
                return;
            }
        }
        if !read.follow || finished {
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(FOLLOW_POLL) => {}
            () = out.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn tail_offsets_count_lines_from_the_end() {
        let cases: [(&str, u64, usize); 9] = [
            ("a\nb\nc\n", 1, 4),
            ("a\nb\nc\n", 2, 2),
            ("a\nb\nc\n", 3, 0),
            ("a\nb\nc\n", 10, 0),
            ("a\nb\nc", 1, 4),
            ("a\nb\nc", 2, 2),
            ("", 3, 0),
            ("a\nb\n", 0, 4),
            ("\n\n\n", 2, 1),
        ];
        for (text, lines, want) in cases {
            let got = tail_offset(&mut Cursor::new(text.as_bytes()), lines).expect("read");
            assert_eq!(got, want as u64, "{text:?} last {lines}");
        }
        // Longer than one block.
        let long: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let at = tail_offset(&mut Cursor::new(long.as_bytes()), 3).expect("read");
        assert_eq!(&long[at as usize..], "line 4997\nline 4998\nline 4999\n");
    }

    #[test]
    fn chunks_follow_the_file_and_start_over_after_truncation() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.stdout");
        assert_eq!(read_chunk(&path, 0).expect("missing"), (Vec::new(), 0));
        std::fs::write(&path, b"hello\n").expect("write");
        assert_eq!(
            read_chunk(&path, 0).expect("read"),
            (b"hello\n".to_vec(), 6)
        );
        assert_eq!(read_chunk(&path, 6).expect("end"), (Vec::new(), 6));
        std::fs::write(&path, b"new\n").expect("truncate");
        assert_eq!(
            read_chunk(&path, 6).expect("rotated"),
            (b"new\n".to_vec(), 4)
        );
        let big = vec![b'x'; CHUNK_BYTES + 10];
        std::fs::write(&path, &big).expect("big");
        let (first, next) = read_chunk(&path, 0).expect("first");
        assert_eq!((first.len(), next), (CHUNK_BYTES, CHUNK_BYTES as u64));
        assert_eq!(read_chunk(&path, next).expect("rest").0.len(), 10);
    }

    #[tokio::test]
    async fn a_followed_stream_sends_appends_until_the_task_is_done() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.stdout");
        std::fs::write(&path, b"1\n2\n3\n").expect("write");
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, mut rx) = mpsc::channel(4);
        let read = LogRead {
            tail_lines: Some(2),
            follow: true,
        };
        let flag = done.clone();
        let task = tokio::spawn({
            let path = path.clone();
            async move {
                stream(&path, read, tx, move || {
                    flag.load(std::sync::atomic::Ordering::Relaxed)
                })
                .await
            }
        });
        assert_eq!(rx.recv().await.expect("tail").expect("ok"), b"2\n3\n");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut f, b"4\n").expect("append");
        assert_eq!(rx.recv().await.expect("append").expect("ok"), b"4\n");
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(rx.recv().await.is_none(), "the stream ends with the task");
        task.await.expect("stream task");
    }
}
