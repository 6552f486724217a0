//! `kemu certs`: the cluster CA plus one certificate per component identity.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

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

pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    for crt in cluster::certs::create_all(
        &args.dir,
        &args.cluster_name,
        &args.store_members,
        &args.node_hosts,
        &args.san,
    )? {
        println!("{}", crt.display());
    }
    Ok(ExitCode::SUCCESS)
}
