//! `kemu certs`: the cluster CA plus one certificate per component identity.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use transport::pki::{self, CertSpec};

#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Where to write `ca.crt`, `ca.key` and `<identity>.crt/.key`.
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, default_value = "kemu")]
    cluster_name: String,
    /// Store member names.
    #[arg(long, value_delimiter = ',', default_value = "s1,s2,s3")]
    store_members: Vec<String>,
    /// Node host names.
    #[arg(long, value_delimiter = ',', default_value = "nodehost-1,nodehost-2")]
    node_hosts: Vec<String>,
    /// Extra subject alternative names (IP addresses or DNS names) for every certificate,
    /// besides loopback: the addresses components serve on.
    #[arg(long, value_delimiter = ',')]
    san: Vec<String>,
}

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
    out
}

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    pki::create_ca(&args.dir, &args.cluster_name)?;
    for (name, organizations) in identities(&args.store_members, &args.node_hosts) {
        let spec = CertSpec {
            name: name.clone(),
            organizations,
            sans: args.san.clone(),
        };
        pki::issue(&args.dir, &spec)
            .with_context(|| format!("issuing the certificate of {name}"))?;
        println!("{}", args.dir.join(format!("{name}.crt")).display());
    }
    Ok(ExitCode::SUCCESS)
}
