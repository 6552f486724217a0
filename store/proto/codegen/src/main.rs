//! Writes the Rust code for `store/proto/*.proto` into `store/src/grpc/pb/`, with a digest of the
//! sources that a store unit test compares (so a .proto changed without regenerating fails).
//! Run from anywhere: `cargo run --manifest-path store/proto/codegen/Cargo.toml` (needs protoc,
//! which scripts/setup installs).

use std::path::Path;

fn main() {
    let store = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let proto = store.join("proto");
    let out = store.join("src/grpc/pb");
    std::fs::create_dir_all(&out).expect("creating the output directory");
    let files = ["mvccpb/kv.proto", "etcdserverpb/rpc.proto"];
    tonic_prost_build::configure()
        .build_server(true)
        // kemu talks to its store through `store::Client`; etcd clients bring their own stubs.
        .build_client(false)
        // Keys and values are `Bytes`: a request's value goes into the raft entry and the MVCC
        // state without a copy per step.
        .bytes(".")
        .out_dir(&out)
        .compile_protos(&files.map(|f| proto.join(f)), &[proto.clone()])
        .expect("compiling the .proto files");
    // The same layout whatever prettyplease did: `cargo fmt` does not reach included files.
    for f in ["mvccpb.rs", "etcdserverpb.rs"] {
        let status = std::process::Command::new("rustfmt")
            .args(["--edition", "2021"])
            .arg(out.join(f))
            .status()
            .expect("running rustfmt");
        assert!(status.success(), "rustfmt failed on {f}");
    }
    let mut sources = Vec::new();
    for f in files {
        sources.extend(std::fs::read(proto.join(f)).expect("reading a .proto file"));
    }
    std::fs::write(out.join("digest"), format!("{:016x}\n", fnv1a(&sources)))
        .expect("writing the digest");
}

/// FNV-1a, 64 bit: the digest the store's test recomputes without a dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
