use super::*;
use std::collections::BTreeMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the test server answers for a path: a status, a body, and whether it says the
/// body's length up front.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: Vec<u8>,
    length: bool,
}

fn ok(body: Vec<u8>) -> Reply {
    Reply {
        status: 200,
        body,
        length: true,
    }
}

/// A local HTTP/1.1 server answering from `routes` (unknown paths get 404), for the tests'
/// lifetime; its base URL.
async fn serve(routes: BTreeMap<&'static str, Reply>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let routes = routes.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let target = text.split(' ').nth(1).unwrap_or("/");
                let path = target.split('?').next().unwrap_or(target).to_string();
                let reply = routes.get(path.as_str()).cloned().unwrap_or(Reply {
                    status: 404,
                    body: b"not found".to_vec(),
                    length: true,
                });
                let mut head = format!("HTTP/1.1 {} X\r\nConnection: close\r\n", reply.status);
                if reply.length {
                    head.push_str(&format!("Content-Length: {}\r\n", reply.body.len()));
                }
                head.push_str("\r\n");
                let _ = conn.write_all(head.as_bytes()).await;
                let _ = conn.write_all(&reply.body).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

fn artifact(source: &str, destination: &str) -> Artifact {
    Artifact {
        source: source.to_string(),
        destination: destination.to_string(),
        mode: ArtifactMode::Any,
        options: BTreeMap::new(),
    }
}

fn sha256(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn tar_gz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(gz);
    for (name, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o755);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, name, *data)
            .expect("tar entry");
    }
    builder.into_inner().expect("tar").finish().expect("gzip")
}

/// A tar whose one entry is named `name` as is (the tar crate refuses to write `..`).
fn raw_tar(name: &str, data: &[u8]) -> Vec<u8> {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, data).expect("entry");
    builder.into_inner().expect("tar")
}

fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in files {
        writer
            .start_file(*name, zip::write::SimpleFileOptions::default())
            .expect("zip entry");
        writer.write_all(data).expect("zip data");
    }
    writer.finish().expect("zip").into_inner()
}

struct Dirs {
    _root: tempfile::TempDir,
    alloc: PathBuf,
    task: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().expect("temp dir");
    let alloc = root.path().join("alloc-1");
    let task = alloc.join("web");
    std::fs::create_dir_all(task.join("local")).expect("task dir");
    Dirs {
        _root: root,
        alloc,
        task,
    }
}

fn fetcher(max_bytes: u64, file_roots: Vec<PathBuf>) -> Fetcher {
    Fetcher::new(ArtifactConfig {
        max_bytes,
        file_roots,
    })
}

fn target(d: &Dirs) -> Target<'_> {
    Target {
        task_dir: &d.task,
        alloc_dir: &d.alloc,
        owner: None,
    }
}

#[tokio::test]
async fn http_artifacts_are_checked_and_unpacked_into_the_task_dir() {
    let page = b"#!/bin/sh\necho hi\n".to_vec();
    let archive = tar_gz(&[("bin/run.sh", &page), ("conf/app.conf", b"port=1")]);
    let zipped = zip_of(&[("data/a.txt", b"alpha")]);
    let base = serve(BTreeMap::from([
        ("/run.sh", ok(page.clone())),
        ("/app.tar.gz", ok(archive.clone())),
        ("/data.zip", ok(zipped)),
        (
            "/streamed.txt",
            Reply {
                status: 200,
                body: b"no length".to_vec(),
                length: false,
            },
        ),
    ]))
    .await;
    let d = dirs();
    let f = fetcher(1 << 20, Vec::new());

    let mut plain = artifact(&format!("{base}/run.sh"), "local/");
    plain
        .options
        .insert("checksum".into(), format!("sha256:{}", sha256(&page)));
    f.fetch(&plain, target(&d)).await.expect("plain file");
    assert_eq!(
        std::fs::read(d.task.join("local/run.sh")).expect("run.sh"),
        page
    );

    let mut packed = artifact(&format!("{base}/app.tar.gz?ref=1"), "local/app");
    packed
        .options
        .insert("checksum".into(), format!("sha256:{}", sha256(&archive)));
    f.fetch(&packed, target(&d)).await.expect("tar.gz");
    let script = d.task.join("local/app/bin/run.sh");
    assert_eq!(std::fs::read(&script).expect("unpacked"), page);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&script)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "modes come from the archive");
    assert_eq!(
        std::fs::read_to_string(d.task.join("local/app/conf/app.conf")).expect("conf"),
        "port=1"
    );

    f.fetch(
        &artifact(&format!("{base}/data.zip"), "local/z"),
        target(&d),
    )
    .await
    .expect("zip");
    assert_eq!(
        std::fs::read_to_string(d.task.join("local/z/data/a.txt")).expect("zip entry"),
        "alpha"
    );

    // archive = "false" keeps an archive whole; mode = "file" names the file itself.
    let mut kept = artifact(&format!("{base}/app.tar.gz"), "local/keep.tgz");
    kept.mode = ArtifactMode::File;
    kept.options.insert("archive".into(), "false".into());
    f.fetch(&kept, target(&d)).await.expect("kept whole");
    assert_eq!(
        std::fs::read(d.task.join("local/keep.tgz")).expect("kept"),
        archive
    );

    f.fetch(
        &artifact(&format!("{base}/streamed.txt"), "local/"),
        target(&d),
    )
    .await
    .expect("a body without a length");
    assert_eq!(
        std::fs::read_to_string(d.task.join("local/streamed.txt")).expect("streamed"),
        "no length"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&d.task)
        .expect("task dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".artifact"))
        .collect();
    assert!(leftovers.is_empty(), "staging files are removed");
}

#[tokio::test]
async fn bad_artifacts_fail_with_what_is_wrong_and_never_as_the_nodes_fault() {
    let big = vec![b'x'; 4096];
    let base = serve(BTreeMap::from([
        ("/page.txt", ok(b"page".to_vec())),
        ("/big.bin", ok(big.clone())),
        (
            "/big-streamed.bin",
            Reply {
                status: 200,
                body: big,
                length: false,
            },
        ),
        (
            "/bomb.tar.gz",
            ok(tar_gz(&[("a", &[0u8; 3000]), ("b", &[0u8; 3000])])),
        ),
        ("/escape.tar", ok(raw_tar("../../evil", b"x"))),
        ("/plain.txt", ok(b"not an archive".to_vec())),
    ]))
    .await;
    let d = dirs();
    let f = fetcher(4000, Vec::new());
    let mut wrong_sum = artifact(&format!("{base}/page.txt"), "local/");
    wrong_sum
        .options
        .insert("checksum".into(), format!("sha256:{}", "0".repeat(64)));
    let mut not_a_dir = artifact(&format!("{base}/plain.txt"), "local/d");
    not_a_dir.mode = ArtifactMode::Dir;
    let cases = [
        (wrong_sum, "checksum mismatch: want sha256:0000"),
        (
            artifact(&format!("{base}/big.bin"), "local/"),
            "larger than the agent's limit of 4000 bytes",
        ),
        (
            artifact(&format!("{base}/big-streamed.bin"), "local/"),
            "larger than the agent's limit of 4000 bytes",
        ),
        (
            artifact(&format!("{base}/bomb.tar.gz"), "local/"),
            "larger than the agent's limit of 4000 bytes",
        ),
        (
            artifact(&format!("{base}/escape.tar"), "local/"),
            "entry ../../evil leaves the destination",
        ),
        (
            artifact(&format!("{base}/missing.txt"), "local/"),
            "the server answered 404 Not Found",
        ),
        (
            artifact("http://127.0.0.1:1/x", "local/"),
            "Connection refused",
        ),
        (not_a_dir, "mode \"dir\" needs an archive"),
    ];
    for (a, want) in cases {
        let err = f.fetch(&a, target(&d)).await.expect_err(want);
        let text = err.to_string();
        assert!(
            text.starts_with(&format!("artifact {}", a.source)) && text.contains(want),
            "{text}"
        );
        assert!(!err.is_infra(), "{text}");
    }
    assert!(!d.alloc.parent().expect("root").join("evil").exists());
}

#[tokio::test]
async fn file_sources_read_only_the_allocation_and_the_configured_roots() {
    let d = dirs();
    let shared = d.alloc.join("alloc");
    std::fs::create_dir_all(&shared).expect("shared dir");
    std::fs::write(shared.join("built.txt"), "from a sibling").expect("shared file");
    let roots = tempfile::tempdir().expect("roots");
    std::fs::write(roots.path().join("blob.txt"), "from a root").expect("root file");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret"), "no").expect("outside file");
    // A link inside the allocation pointing out of it is judged by where it points.
    std::os::unix::fs::symlink(outside.path().join("secret"), shared.join("link")).expect("link");
    let f = fetcher(1 << 20, vec![roots.path().to_path_buf()]);

    let from_alloc = artifact(
        &format!("file://{}", shared.join("built.txt").display()),
        "local/",
    );
    f.fetch(&from_alloc, target(&d)).await.expect("alloc file");
    assert_eq!(
        std::fs::read_to_string(d.task.join("local/built.txt")).expect("copied"),
        "from a sibling"
    );
    let relative = artifact("../alloc/built.txt", "local/again");
    f.fetch(&relative, target(&d)).await.expect("relative path");
    assert!(d.task.join("local/again/built.txt").exists());
    let from_root = artifact(
        &roots.path().join("blob.txt").display().to_string(),
        "local/",
    );
    f.fetch(&from_root, target(&d)).await.expect("root file");

    for source in [
        outside.path().join("secret").display().to_string(),
        format!("file://{}", shared.join("link").display()),
    ] {
        let err = f
            .fetch(&artifact(&source, "local/"), target(&d))
            .await
            .expect_err(&source);
        assert!(
            err.to_string()
                .contains("outside the directories file sources may read"),
            "{err}"
        );
    }
}

#[test]
fn archive_kinds_and_file_names_come_from_the_source() {
    let cases = [
        (
            "https://h/app.tar.gz?x=1",
            "app.tar.gz",
            Some(ArchiveKind::TarGz),
        ),
        ("https://h/app.TGZ", "app.TGZ", Some(ArchiveKind::TarGz)),
        ("file:///a/b.tar", "b.tar", Some(ArchiveKind::Tar)),
        ("/a/b.zip", "b.zip", Some(ArchiveKind::Zip)),
        ("https://h/log.gz", "log.gz", Some(ArchiveKind::Gz)),
        ("https://h/run.sh#frag", "run.sh", None),
        ("https://h/", "h", None),
    ];
    for (source, name, kind) in cases {
        assert_eq!(file_name(source), name, "{source}");
        assert_eq!(archive_kind(&file_name(source)), kind, "{source}");
    }
}
