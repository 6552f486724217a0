//! Image names as containerd reports them, and stable stand-ins for image digests and
//! container IDs.

/// `nginx` → `docker.io/library/nginx:latest`, as containerd reports images.
pub fn normalize_image(image: &str) -> String {
    let (name, tagged) = match image.rsplit_once('/') {
        Some((_, last)) => (image.to_string(), last.contains(':') || last.contains('@')),
        None => (
            format!("library/{image}"),
            image.contains(':') || image.contains('@'),
        ),
    };
    let first = name.split('/').next().unwrap_or("");
    let qualified = if name.contains('/')
        && (first.contains('.') || first.contains(':') || first == "localhost")
    {
        name
    } else {
        format!("docker.io/{name}")
    };
    if tagged {
        qualified
    } else {
        format!("{qualified}:latest")
    }
}

/// A stable fake digest for an image name.
pub(super) fn image_id(image: &str) -> String {
    let base = image.rsplit_once(':').map(|(b, _)| b).unwrap_or(image);
    let base = base.split('@').next().unwrap_or(base);
    format!("{base}@sha256:{}", hex_digest(image))
}

fn hex_digest(text: &str) -> String {
    // FNV-1a, stretched to 64 hex digits: a stable stand-in, not a real digest.
    let mut out = String::with_capacity(64);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for round in 0..4u8 {
        for b in text.bytes().chain([round]) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
        out.push_str(&format!("{h:016x}"));
    }
    out
}

pub(super) fn container_id(pod_uid: &str, name: &str, n: u32) -> String {
    format!(
        "containerd://{}",
        hex_digest(&format!("{pod_uid}/{name}/{n}"))
    )
}
