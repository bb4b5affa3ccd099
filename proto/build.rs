//! Compiles every `.proto` under `proto/` with no system `protoc`: protox parses them into a
//! descriptor set, tonic-prost-build generates messages, clients and servers from it, and
//! the encoded set is written next to the code for gRPC reflection.

use prost::Message;
use std::path::{Path, PathBuf};

/// The include root; files are named relative to it (`drover/v1/types.proto`), which is
/// also how their imports spell them.
const PROTO_ROOT: &str = "proto";

/// Where the encoded `FileDescriptorSet` goes in `OUT_DIR`; `lib.rs` embeds it.
const DESCRIPTOR_FILE: &str = "drover_descriptor.bin";
/// Where every message's shape goes in `OUT_DIR`; `src/decode_budget.rs` includes it.
const SHAPES_FILE: &str = "drover_shapes.rs";

#[path = "build/shapes.rs"]
mod shapes;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");
    println!("cargo:rerun-if-changed=build.rs");

    let root = Path::new(PROTO_ROOT);
    let mut files = Vec::new();
    collect_protos(root, root, &mut files)?;
    // A stable order keeps the generated code and the descriptor set byte-identical
    // between builds whatever order the file system lists entries in.
    files.sort();
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }

    let fds = protox::compile(&files, [root])?;

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join(DESCRIPTOR_FILE), fds.encode_to_vec())?;

    std::fs::write(out_dir.join(SHAPES_FILE), shapes::generate(&fds))?;

    let mut config = prost_build::Config::new();
    // `prost::Name` on every message: the codec finds a message's shape by its name.
    config.enable_type_names();
    tonic_prost_build::configure()
        // Maps as BTreeMap, like core's, so conversions need no re-sorting and encoding is
        // deterministic (the same object always encodes to the same bytes).
        .btree_map(".")
        // Smaller first buffers than prost's codec, and a bound on what a message may cost
        // to decode: see `src/codec.rs`.
        .codec_path("crate::codec::DroverCodec")
        .compile_fds_with_config(fds, config)?;
    Ok(())
}

/// Every `.proto` file under `dir`, as a path relative to `root`.
fn collect_protos(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect_protos(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            let relative = path
                .strip_prefix(root)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            out.push(relative.to_path_buf());
        }
    }
    Ok(())
}
