//! A cluster's certificates: the CA plus one certificate per component identity (`kemu certs`,
//! and every cluster directory `kemu up` prepares).

use std::path::{Path, PathBuf};

use anyhow::Context;
use transport::pki::{self, CertSpec};

/// Every identity in a cluster: (name, organisations). Organisations become groups later.
pub fn identities(store_members: &[String], node_hosts: &[String]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = store_members
        .iter()
        .map(|m| (m.clone(), vec![store::config::STORE_MEMBER_ORG.to_string()]))
        .collect();
    out.push(("apiserver".into(), vec!["kemu:apiserver".into()]));
    out.push(("scheduler".into(), vec!["system:kube-scheduler".into()]));
    out.push((
        "controllers".into(),
        vec!["system:kube-controller-manager".into()],
    ));
    out.extend(
        node_hosts
            .iter()
            .map(|h| (h.clone(), vec!["system:nodes".to_string()])),
    );
    out.push(("admin".into(), vec!["system:masters".into()]));
    out.push((
        store::config::STORE_ADMIN.into(),
        vec![store::config::STORE_CLIENT_ORG.into()],
    ));
    out
}

/// Creates the cluster CA `cluster_name` in `dir` and a certificate for every identity of a
/// cluster with these store members and node hosts (with `sans` besides loopback); the
/// certificates' paths.
pub fn create_all(
    dir: &Path,
    cluster_name: &str,
    store_members: &[String],
    node_hosts: &[String],
    sans: &[String],
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    pki::create_ca(dir, cluster_name)?;
    pki::service_account_key(dir)?;
    let mut issued = Vec::new();
    for (name, organizations) in identities(store_members, node_hosts) {
        let spec = CertSpec {
            name: name.clone(),
            organizations,
            sans: sans.to_vec(),
        };
        pki::issue(dir, &spec).with_context(|| format!("issuing the certificate of {name}"))?;
        issued.push(dir.join(format!("{name}.crt")));
    }
    Ok(issued)
}
