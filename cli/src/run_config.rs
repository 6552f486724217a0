//! The config `kemu up` and `kemu run` read: a cluster config whose file may also hold the
//! `[load]` and `[chaos]` plans `kemu run` executes. Each part is parsed by the crate that owns
//! it, from the same text, so a bad key or value names its key and line wherever it is.

use std::path::Path;

use anyhow::Context;
use chaos::plan::ChaosPlan;
use cluster::config::{parse_toml, ClusterConfig, ConfigError};
use load::LoadPlan;
use serde::Deserialize;

/// The top-level tables of a cluster config that are not the cluster's.
const PLAN_TABLES: [&str; 2] = ["load", "chaos"];

/// A cluster config file: the cluster, and the plans `kemu run` executes on it.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub cluster: ClusterConfig,
    pub load: Option<LoadPlan>,
    pub chaos: Option<ChaosPlan>,
    /// The file's text, kept in the cluster directory.
    pub text: String,
}

impl RunConfig {
    /// Reads and validates the config file `path`.
    pub fn load(path: &Path) -> anyhow::Result<RunConfig> {
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read the cluster config {} (see clusters/ for examples)",
                path.display()
            )
        })?;
        Ok(RunConfig::parse(text, path)?)
    }

    /// Parses and validates `text`; `file` only names it in errors. A chaos plan with actions
    /// makes the API servers keep the store's whole history (its checks read it afterwards).
    pub fn parse(text: String, file: &Path) -> Result<RunConfig, ConfigError> {
        /// The plans' tables; the cluster's keys are left to `ClusterConfig`.
        #[derive(Default, Deserialize)]
        #[serde(default)]
        struct Plans {
            load: Option<LoadPlan>,
            chaos: Option<ChaosPlan>,
        }
        let mut cluster = ClusterConfig::parse_with(&text, file, &PLAN_TABLES)?;
        let mut plans: Plans = parse_toml(&text, file)?;
        // A clusterloader2 config and its overrides are found beside the cluster config.
        if let Some(cl2) = plans.load.as_mut().and_then(|l| l.cl2.as_mut()) {
            let base = file.parent().unwrap_or(Path::new("."));
            cl2.config = base.join(&cl2.config);
            for o in &mut cl2.overrides {
                *o = base.join(&*o);
            }
        }
        if let Some(load) = &plans.load {
            load.validate().map_err(|e| {
                ConfigError::invalid(&text, file, format!("load.{}", e.field), e.reason)
            })?;
        }
        if let Some(chaos) = &plans.chaos {
            chaos
                .validate()
                .map_err(|e| ConfigError::invalid(&text, file, e.field, e.reason))?;
        }
        cluster.apiserver.keep_history |= plans.chaos.as_ref().is_some_and(ChaosPlan::has_actions);
        Ok(RunConfig {
            cluster,
            load: plans.load,
            chaos: plans.chaos,
            text,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use cluster::config::ConfigError;
    use cluster::layout::{Kind, Layout};

    use super::RunConfig;

    fn parse(text: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::parse(text.to_string(), Path::new("test.toml"))
    }

    fn config(text: &str) -> cluster::config::ClusterConfig {
        parse(text).unwrap().cluster
    }

    #[test]
    fn full_config_parses() {
        let c = parse(
            r#"
name = "ha"
runtime = "realistic"
[store]
members = 5
[nodes]
hosts = 3
per_host = 10
[load]
pods = 10
[chaos]
seed = 7
[[chaos.action]]
at = 5.0
kind = "kill-store-leader"
restore_after = 2.0
"#,
        )
        .unwrap();
        assert_eq!(c.cluster.name, "ha");
        assert_eq!(c.chaos.unwrap().actions.len(), 1);
        assert_eq!(c.load.unwrap().pods, 10);
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = parse("name = \"x\"\n\n[nodes]\nper_host = 3\ncpus = \"4\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5"), "{e}");
        assert!(e.contains("cpus"), "{e}");
        let e = parse("[chaos]\n[[chaos.action]]\nat = 1.0\nkind = \"kill\"\nrestore = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("restore"), "{e}");
        let e = parse("[load]\npods = 1\npodz = 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 3") && e.contains("podz"), "{e}");
    }

    #[test]
    fn bad_plan_values_name_field_and_line() {
        let e = parse("[load]\npods = 1\n\nrate = 0.0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 4") && e.contains("load.rate"), "{e}");
        let e = parse("[chaos]\n[[chaos.action]]\nat = 1.0\nkind = \"kill\"\n[[chaos.action]]\nat = 2.0\nkind = \"kill\"\nevery = -1.0\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 8") && e.contains("chaos.action[1].every"),
            "{e}"
        );
    }

    /// Every config in `clusters/` passes every check, and taking the 100,000-node one back to
    /// the default pod ranges is refused before anything starts, naming the key and the limit.
    #[test]
    fn the_shipped_configs_pass_and_limits_name_the_key() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../clusters");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                RunConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                checked += 1;
            }
        }
        assert!(checked >= 8, "{checked} configs");
        let text = std::fs::read_to_string(dir.join("scale-100k.toml")).unwrap();
        let big = parse(&text).unwrap();
        assert_eq!(big.cluster.total_nodes(), 100_000);
        let e = parse(&text.replace(
            "cluster_cidr = \"10.0.0.0/8\"\nnode_cidr_mask_size = 25\n",
            "",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.ends_with("nodes.per_host: 100000 nodes (20 hosts × 5000 per host) need 100000 /24 ranges but nodes.cluster_cidr 10.128.0.0/9 holds 32768"),
            "{e}"
        );
    }

    #[test]
    fn a_chaos_plan_keeps_the_store_history_of_the_run() {
        let api_args = |text: &str| {
            let l =
                Layout::plan(&config(text), Path::new("/tmp/x"), Path::new("/bin/kemu")).unwrap();
            l.components
                .iter()
                .filter(|c| c.kind == Kind::Apiserver)
                .map(|c| c.args.join(" "))
                .collect::<Vec<_>>()
        };
        let never = "--compaction-interval-secs 0";
        let with_chaos = api_args(
            "[apiserver]\nreplicas = 2\n[chaos]\n[[chaos.action]]\nat = 1.0\nkind = \"kill-store-leader\"\n",
        );
        assert_eq!(with_chaos.len(), 2);
        assert!(
            with_chaos.iter().all(|a| a.contains(never)),
            "{with_chaos:?}"
        );
        let without = api_args("");
        assert!(
            without
                .iter()
                .all(|a| a.contains("--compaction-interval-secs 300")),
            "{without:?}"
        );
        let shorter = api_args("[apiserver]\ncompaction_interval_seconds = 60\n");
        assert!(
            shorter
                .iter()
                .all(|a| a.contains("--compaction-interval-secs 60")),
            "{shorter:?}"
        );
        // Chaos still keeps the whole history, whatever the interval says.
        let both = api_args(
            "[apiserver]\ncompaction_interval_seconds = 60\n[chaos]\n[[chaos.action]]\nat = 1.0\nkind = \"kill-store-leader\"\n",
        );
        assert!(both.iter().all(|a| a.contains(never)), "{both:?}");
    }
}
