//! `kemu render`: a cluster config as Kubernetes manifests, so that a cluster too big for one
//! machine runs on any real Kubernetes cluster, its node hosts in pods as kubemark's hollow
//! nodes are.
//!
//! [`Credentials::generate`] makes a fresh CA and a certificate per identity whose SANs are the
//! in-cluster DNS names ([`Names`]); [`render`] is pure: config, options and credentials in,
//! [`Manifest`]s out, in a fixed order (namespace, secrets, config, services, workloads, jobs).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
    HTTPGetAction, KeyToPath, Namespace, ObjectFieldSelector, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PodSecurityContext, PodSpec, PodTemplateSpec, Probe,
    ProjectedVolumeSource, ResourceRequirements, Secret, SecretProjection, SecretVolumeSource,
    Service, ServiceAccount, ServicePort, ServiceSpec, Volume, VolumeMount, VolumeProjection,
    VolumeResourceRequirements,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::ByteString;
use serde::Serialize;
use transport::pki::{self, CertSpec};

use crate::config::ClusterConfig;
use crate::layout::{
    admission_args, kubeconfig, nodehost_config, store_tuning_args, API_HTTP_PORT, API_QUIC_PORT,
    CONTROLLERS_METRICS_PORT, NODEHOST_LOGS_PORT, NODEHOST_METRICS_PORT, NODE_PREFIX,
    SCHEDULER_METRICS_PORT, STORE_CLIENT_PORT, STORE_METRICS_PORT, STORE_PEER_PORT, TOKEN_FILE,
};

/// The image `kemu render` puts in every pod unless `--image` names another: a locally built
/// image of the `kemu` binary (see docs/render.md), on `PATH` as `kemu`.
pub const DEFAULT_IMAGE: &str = "kemu:latest";

/// Where the pods find what the manifests mount.
const CERTS_DIR: &str = "/etc/kemu/certs";
const CONFIG_DIR: &str = "/etc/kemu/config";
const TOKENS_DIR: &str = "/etc/kemu/tokens";
const KUBECONFIG_DIR: &str = "/etc/kemu/kubeconfig";
const STORE_DATA_DIR: &str = "/var/lib/kemu";
/// The group that may read the mounted keys, whatever user the image runs as.
const FS_GROUP: i64 = 2000;
/// The store members' data volume, per member.
const STORE_VOLUME_SIZE: &str = "10Gi";
/// Every component stops cleanly on SIGTERM; a store member syncs its WAL, a node host stops
/// its kubelets: both well within this.
const TERMINATION_GRACE_SECONDS: i64 = 30;

/// Why the manifests could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// `--namespace` (or the cluster name it defaults to) is no namespace name.
    #[error("namespace {namespace:?}: {reason}")]
    Namespace { namespace: String, reason: String },
    #[error("image: must not be empty")]
    Image,
    #[error("creating the certificates: {0}")]
    Certificates(#[source] anyhow::Error),
    #[error("serializing {kind} {name}: {reason}")]
    Serialize {
        kind: &'static str,
        name: String,
        reason: String,
    },
}

/// What `kemu render` is asked for besides the config.
#[derive(Clone, Debug)]
pub struct RenderOptions {
    /// The namespace every object but the Namespace itself lives in.
    pub namespace: String,
    /// The image of every container.
    pub image: String,
    /// The config file's text, for the load Job's plan (`kemu load --plan` reads the `[load]`
    /// table of a cluster config); no Job without it.
    pub load_plan: Option<String>,
    /// The `[chaos]` plan as a Job: the config file's text (`kemu chaos --plan` reads its
    /// `[chaos]` table) and how long the run lasts; no Job without it.
    pub chaos: Option<ChaosJob>,
}

/// The chaos Job's plan.
#[derive(Clone, Debug)]
pub struct ChaosJob {
    /// The config file's text.
    pub config_text: String,
    /// `kemu chaos --duration`.
    pub duration_s: f64,
}

impl RenderOptions {
    /// Options for `config`: the namespace is the cluster's name, the image the default.
    pub fn new(config: &ClusterConfig) -> RenderOptions {
        RenderOptions {
            namespace: config.name.clone(),
            image: DEFAULT_IMAGE.to_string(),
            load_plan: None,
            chaos: None,
        }
    }

    pub fn validate(&self) -> Result<(), RenderError> {
        validate_namespace(&self.namespace)?;
        if self.image.trim().is_empty() {
            return Err(RenderError::Image);
        }
        Ok(())
    }
}

/// A namespace name is a DNS-1123 label, as Kubernetes checks it (with its messages).
pub fn validate_namespace(namespace: &str) -> Result<(), RenderError> {
    let errors = api::names::is_dns1123_label(namespace);
    if errors.is_empty() {
        return Ok(());
    }
    Err(RenderError::Namespace {
        namespace: namespace.to_string(),
        reason: errors.join("; "),
    })
}

/// The in-cluster names of a rendered cluster's objects and pods.
#[derive(Clone, Debug)]
pub struct Names {
    pub namespace: String,
}

impl Names {
    pub const STORE: &'static str = "kemu-store";
    pub const APISERVER: &'static str = "kemu-apiserver";
    pub const SCHEDULER: &'static str = "kemu-scheduler";
    pub const CONTROLLERS: &'static str = "kemu-controllers";
    pub const NODEHOST: &'static str = "kemu-nodehost";
    pub const LOAD: &'static str = "kemu-load";
    pub const CHAOS: &'static str = "kemu-chaos";

    /// Store member `ordinal`'s pod, also its member name and certificate identity.
    pub fn store_member(ordinal: u32) -> String {
        format!("{}-{ordinal}", Names::STORE)
    }

    /// Node host `ordinal`'s pod, also its certificate identity.
    pub fn node_host(ordinal: u32) -> String {
        format!("{}-{ordinal}", Names::NODEHOST)
    }

    /// A pod of a StatefulSet behind the headless Service of the same name, as other pods
    /// reach it (`kemu-store-0.kemu-store.NS.svc`).
    pub fn pod_host(&self, service: &str, pod: &str) -> String {
        format!("{pod}.{service}.{}.svc", self.namespace)
    }

    /// A Service as other pods reach it (`kemu-apiserver.NS.svc`).
    pub fn service_host(&self, service: &str) -> String {
        format!("{service}.{}.svc", self.namespace)
    }

    /// Every name a pod or Service answers to: the short forms the resolver's search path
    /// completes, and the fully qualified one for the default cluster domain.
    fn dns_sans(&self, host: &str) -> Vec<String> {
        let ns = &self.namespace;
        let mut parts: Vec<&str> = host.split('.').collect();
        // `x.svc` → `x` (the first label or two before the namespace).
        if parts.last() == Some(&"svc") {
            parts.pop();
        }
        if parts.last() == Some(&ns.as_str()) {
            parts.pop();
        }
        let base = parts.join(".");
        vec![
            base.clone(),
            format!("{base}.{ns}"),
            format!("{base}.{ns}.svc"),
            format!("{base}.{ns}.svc.cluster.local"),
        ]
    }

    /// `--initial-cluster`: every member by name at its peer port.
    pub fn initial_cluster(&self, members: u32, port: u16) -> String {
        (0..members)
            .map(|i| {
                let member = Names::store_member(i);
                format!("{member}={}:{port}", self.pod_host(Names::STORE, &member))
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `--store-endpoints`: every member at its client port.
    pub fn store_endpoints(&self, members: u32) -> String {
        (0..members)
            .map(|i| {
                let member = Names::store_member(i);
                format!(
                    "{}:{STORE_CLIENT_PORT}",
                    self.pod_host(Names::STORE, &member)
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The PEM files of a rendered cluster: the CA certificate, the service-account key and a
/// certificate and key per identity (by identity name). The CA's key is not kept: nothing in
/// the cluster issues certificates.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub ca_crt: String,
    pub service_account_key: String,
    /// identity → (certificate PEM, key PEM).
    pub pairs: BTreeMap<String, (String, String)>,
    /// The bearer-token file of the API servers (`token,user,uid,"groups"`).
    pub tokens: String,
}

impl Credentials {
    /// A fresh CA named after the cluster and a certificate for every identity of `config`'s
    /// cluster in namespace `names.namespace`, with the DNS names other pods reach it by.
    pub fn generate(config: &ClusterConfig, names: &Names) -> Result<Credentials, RenderError> {
        Credentials::generate_in(config, names).map_err(RenderError::Certificates)
    }

    fn generate_in(config: &ClusterConfig, names: &Names) -> anyhow::Result<Credentials> {
        use anyhow::Context;
        let dir = tempfile::tempdir().context("a temporary directory for the certificates")?;
        let dir = dir.path();
        pki::create_ca(dir, &config.name)?;
        let (service_account_key, _) = pki::service_account_key(dir)?;
        let members: Vec<String> = (0..config.store.members).map(Names::store_member).collect();
        let hosts: Vec<String> = (0..config.nodes.hosts).map(Names::node_host).collect();
        let mut pairs = BTreeMap::new();
        for (name, organizations) in crate::certs::identities(&members, &hosts) {
            let sans = if members.contains(&name) {
                names.dns_sans(&names.pod_host(Names::STORE, &name))
            } else if hosts.contains(&name) {
                names.dns_sans(&names.pod_host(Names::NODEHOST, &name))
            } else if name == "apiserver" {
                names.dns_sans(&names.service_host(Names::APISERVER))
            } else {
                Vec::new()
            };
            let spec = CertSpec {
                name: name.clone(),
                organizations,
                sans,
            };
            pki::issue(dir, &spec).with_context(|| format!("issuing the certificate of {name}"))?;
            let (crt, key) = pki::pair_paths(dir, &name);
            pairs.insert(
                name,
                (
                    std::fs::read_to_string(&crt)
                        .with_context(|| format!("reading {}", crt.display()))?,
                    std::fs::read_to_string(&key)
                        .with_context(|| format!("reading {}", key.display()))?,
                ),
            );
        }
        let ca = dir.join(format!("{}.crt", pki::CA_NAME));
        let ca_crt =
            std::fs::read_to_string(&ca).with_context(|| format!("reading {}", ca.display()))?;
        let token = format!("{:032x}", rand::random::<u128>());
        Ok(Credentials {
            ca_crt,
            service_account_key,
            pairs,
            tokens: format!("{token},kemu-admin,kemu-admin,\"system:masters\"\n"),
        })
    }

    fn pair(&self, identity: &str) -> (&str, &str) {
        self.pairs
            .get(identity)
            .map(|(c, k)| (c.as_str(), k.as_str()))
            .unwrap_or_default()
    }
}

/// One rendered object.
#[derive(Clone, Debug)]
pub struct Manifest {
    pub kind: &'static str,
    pub name: String,
    /// The object as one YAML document (no `---`).
    pub yaml: String,
}

/// The manifests as one multi-document YAML stream.
pub fn to_yaml_stream(manifests: &[Manifest]) -> String {
    let mut out = String::new();
    for m in manifests {
        out.push_str("---\n");
        out.push_str(&m.yaml);
        if !m.yaml.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// Every object of `config`'s cluster, in the order they are best applied in.
pub fn render(
    config: &ClusterConfig,
    options: &RenderOptions,
    credentials: &Credentials,
) -> Result<Vec<Manifest>, RenderError> {
    options.validate()?;
    let r = Renderer {
        config,
        options,
        names: Names {
            namespace: options.namespace.clone(),
        },
        credentials,
        out: Vec::new(),
    };
    r.render()
}

struct Renderer<'a> {
    config: &'a ClusterConfig,
    options: &'a RenderOptions,
    names: Names,
    credentials: &'a Credentials,
    out: Vec<Manifest>,
}

/// Secrets and the ConfigMap, by name.
const CA_SECRET: &str = "kemu-ca";
const STORE_CERTS_SECRET: &str = "kemu-store-certs";
const APISERVER_TLS_SECRET: &str = "kemu-apiserver-tls";
const SERVICE_ACCOUNT_SECRET: &str = "kemu-service-account-key";
const SCHEDULER_TLS_SECRET: &str = "kemu-scheduler-tls";
const CONTROLLERS_TLS_SECRET: &str = "kemu-controllers-tls";
const NODEHOST_CERTS_SECRET: &str = "kemu-nodehost-certs";
const TOKENS_SECRET: &str = "kemu-tokens";
const ADMIN_KUBECONFIG_SECRET: &str = "kemu-admin-kubeconfig";
const CONFIG_MAP: &str = "kemu-config";
const NODEHOST_CONFIG_KEY: &str = "nodehost.toml";
const LOAD_PLAN_KEY: &str = "cluster.toml";

impl Renderer<'_> {
    fn render(mut self) -> Result<Vec<Manifest>, RenderError> {
        let ns = self.options.namespace.clone();
        self.push(
            "Namespace",
            &ns,
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.clone()),
                    labels: Some(self.labels(None)),
                    ..Default::default()
                },
                ..Default::default()
            },
        )?;
        self.secrets()?;
        self.config_map()?;
        self.store()?;
        self.apiserver()?;
        self.deployment(
            Names::SCHEDULER,
            self.config.scheduler.replicas,
            self.scheduler_args(),
            SCHEDULER_TLS_SECRET,
            "scheduler",
            SCHEDULER_METRICS_PORT,
            ("250m", "256Mi"),
        )?;
        self.deployment(
            Names::CONTROLLERS,
            self.config.controllers.replicas,
            self.controllers_args(),
            CONTROLLERS_TLS_SECRET,
            "controllers",
            CONTROLLERS_METRICS_PORT,
            ("250m", "256Mi"),
        )?;
        self.node_hosts()?;
        self.load_job()?;
        self.chaos_job()?;
        Ok(self.out)
    }

    fn push<T: Serialize>(
        &mut self,
        kind: &'static str,
        name: &str,
        object: &T,
    ) -> Result<(), RenderError> {
        let yaml = serde_saphyr::to_string(object).map_err(|e| RenderError::Serialize {
            kind,
            name: name.to_string(),
            reason: e.to_string(),
        })?;
        self.out.push(Manifest {
            kind,
            name: name.to_string(),
            yaml,
        });
        Ok(())
    }

    /// The labels of every object; `component` adds the one that tells workloads apart.
    fn labels(&self, component: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            ("app.kubernetes.io/part-of".to_string(), "kemu".to_string()),
            (
                "app.kubernetes.io/instance".to_string(),
                self.config.name.clone(),
            ),
        ]);
        if let Some(c) = component {
            labels.insert("app.kubernetes.io/name".into(), c.to_string());
        }
        labels
    }

    fn selector(&self, component: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "app.kubernetes.io/instance".to_string(),
                self.config.name.clone(),
            ),
            ("app.kubernetes.io/name".to_string(), component.to_string()),
        ])
    }

    fn meta(&self, name: &str, component: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(self.options.namespace.clone()),
            labels: Some(self.labels(component)),
            ..Default::default()
        }
    }

    fn secret(
        &mut self,
        name: &str,
        type_: &str,
        data: Vec<(String, &str)>,
    ) -> Result<(), RenderError> {
        let secret = Secret {
            metadata: self.meta(name, None),
            type_: Some(type_.to_string()),
            data: Some(
                data.into_iter()
                    .map(|(k, v)| (k, ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        };
        self.push("Secret", name, &secret)
    }

    fn tls_secret(&mut self, name: &str, identity: &str) -> Result<(), RenderError> {
        let (crt, key) = self.credentials.pair(identity);
        self.secret(
            name,
            "kubernetes.io/tls",
            vec![("tls.crt".into(), crt), ("tls.key".into(), key)],
        )
    }

    /// Pairs of a StatefulSet's identities in one Secret (every pod mounts the same volumes and
    /// picks its own pair by its name).
    fn pairs_secret(&mut self, name: &str, identities: &[String]) -> Result<(), RenderError> {
        let credentials = self.credentials;
        let mut data = Vec::new();
        for identity in identities {
            let (crt, key) = credentials.pair(identity);
            data.push((format!("{identity}.crt"), crt));
            data.push((format!("{identity}.key"), key));
        }
        self.secret(name, "Opaque", data)
    }

    fn secrets(&mut self) -> Result<(), RenderError> {
        let credentials = self.credentials;
        self.secret(
            CA_SECRET,
            "Opaque",
            vec![("ca.crt".into(), credentials.ca_crt.as_str())],
        )?;
        let mut members: Vec<String> = (0..self.config.store.members)
            .map(Names::store_member)
            .collect();
        // `kemu kv` in a member's pod talks to the store as its administrator.
        members.push(store::config::STORE_ADMIN.to_string());
        self.pairs_secret(STORE_CERTS_SECRET, &members)?;
        self.tls_secret(APISERVER_TLS_SECRET, "apiserver")?;
        self.secret(
            SERVICE_ACCOUNT_SECRET,
            "Opaque",
            vec![(
                pki::SERVICE_ACCOUNT_KEY.into(),
                credentials.service_account_key.as_str(),
            )],
        )?;
        self.secret(
            TOKENS_SECRET,
            "Opaque",
            vec![(TOKEN_FILE.into(), credentials.tokens.as_str())],
        )?;
        self.tls_secret(SCHEDULER_TLS_SECRET, "scheduler")?;
        self.tls_secret(CONTROLLERS_TLS_SECRET, "controllers")?;
        let hosts: Vec<String> = (0..self.config.nodes.hosts).map(Names::node_host).collect();
        self.pairs_secret(NODEHOST_CERTS_SECRET, &hosts)?;
        let (crt, key) = credentials.pair("admin");
        let server = format!(
            "https://{}:{API_HTTP_PORT}",
            self.names.service_host(Names::APISERVER)
        );
        let kubeconfig = kubeconfig(
            &server,
            credentials.ca_crt.as_bytes(),
            crt.as_bytes(),
            key.as_bytes(),
        );
        self.secret(
            ADMIN_KUBECONFIG_SECRET,
            "Opaque",
            vec![("kubeconfig".into(), kubeconfig.as_str())],
        )
    }

    fn config_map(&mut self) -> Result<(), RenderError> {
        let nodehost = nodehost_config(self.config).map_err(|e| RenderError::Serialize {
            kind: "ConfigMap",
            name: CONFIG_MAP.into(),
            reason: e.to_string(),
        })?;
        let mut data = BTreeMap::from([(NODEHOST_CONFIG_KEY.to_string(), nodehost)]);
        let text = self.options.load_plan.as_ref().or(self
            .options
            .chaos
            .as_ref()
            .map(|c| &c.config_text));
        if let Some(text) = text {
            data.insert(LOAD_PLAN_KEY.to_string(), text.clone());
        }
        let map = ConfigMap {
            metadata: self.meta(CONFIG_MAP, None),
            data: Some(data),
            ..Default::default()
        };
        self.push("ConfigMap", CONFIG_MAP, &map)
    }

    /// The certificates directory every component reads: the CA and its own pair(s), as
    /// `<identity>.crt` and `<identity>.key`.
    fn certs_volume(&self, sources: Vec<SecretProjection>) -> Volume {
        let mut all = vec![SecretProjection {
            name: CA_SECRET.into(),
            ..Default::default()
        }];
        all.extend(sources);
        Volume {
            name: "certs".into(),
            projected: Some(ProjectedVolumeSource {
                default_mode: Some(0o440),
                sources: Some(
                    all.into_iter()
                        .map(|secret| VolumeProjection {
                            secret: Some(secret),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A `kubernetes.io/tls` Secret's pair as `<identity>.crt` and `<identity>.key`.
    fn tls_projection(secret: &str, identity: &str) -> SecretProjection {
        SecretProjection {
            name: secret.into(),
            items: Some(vec![
                KeyToPath {
                    key: "tls.crt".into(),
                    path: format!("{identity}.crt"),
                    ..Default::default()
                },
                KeyToPath {
                    key: "tls.key".into(),
                    path: format!("{identity}.key"),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    fn whole_secret(secret: &str) -> SecretProjection {
        SecretProjection {
            name: secret.into(),
            ..Default::default()
        }
    }

    fn mount(name: &str, path: &str) -> VolumeMount {
        VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            read_only: Some(true),
            ..Default::default()
        }
    }

    /// `POD_NAME` from the downward API, for `$(POD_NAME)` in the arguments.
    fn pod_env() -> Vec<EnvVar> {
        [("POD_NAME", "metadata.name")]
            .into_iter()
            .map(|(name, path)| EnvVar {
                name: name.into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: path.into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect()
    }

    fn port(name: &str, port: u16, protocol: &str) -> ContainerPort {
        ContainerPort {
            name: Some(name.into()),
            container_port: i32::from(port),
            protocol: Some(protocol.into()),
            ..Default::default()
        }
    }

    fn service_port(name: &str, port: u16, protocol: &str) -> ServicePort {
        ServicePort {
            name: Some(name.into()),
            port: i32::from(port),
            protocol: Some(protocol.into()),
            target_port: Some(IntOrString::String(name.into())),
            ..Default::default()
        }
    }

    /// An HTTP(S) GET probe on a named port.
    fn probe(path: &str, port: &str, https: bool, failure_threshold: i32) -> Probe {
        Probe {
            http_get: Some(HTTPGetAction {
                path: Some(path.into()),
                port: IntOrString::String(port.into()),
                scheme: Some(if https { "HTTPS" } else { "HTTP" }.into()),
                ..Default::default()
            }),
            period_seconds: Some(10),
            timeout_seconds: Some(5),
            failure_threshold: Some(failure_threshold),
            ..Default::default()
        }
    }

    fn resources(cpu: &str, memory: &str) -> ResourceRequirements {
        ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity(cpu.into())),
                ("memory".to_string(), Quantity(memory.into())),
            ])),
            ..Default::default()
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn container(
        &self,
        name: &str,
        args: Vec<String>,
        ports: Vec<ContainerPort>,
        mounts: Vec<VolumeMount>,
        probes: (Probe, Probe),
        requests: (&str, &str),
    ) -> Container {
        Container {
            name: name.into(),
            image: Some(self.options.image.clone()),
            image_pull_policy: Some("IfNotPresent".into()),
            command: Some(vec!["kemu".into()]),
            args: Some(args),
            env: Some(Self::pod_env()),
            ports: Some(ports),
            volume_mounts: Some(mounts),
            readiness_probe: Some(probes.0),
            liveness_probe: Some(probes.1),
            resources: Some(Self::resources(requests.0, requests.1)),
            ..Default::default()
        }
    }

    fn pod(&self, component: &str, container: Container, volumes: Vec<Volume>) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(self.labels(Some(component))),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container],
                volumes: Some(volumes),
                security_context: Some(PodSecurityContext {
                    fs_group: Some(FS_GROUP),
                    ..Default::default()
                }),
                termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
                ..Default::default()
            }),
        }
    }

    fn headless_service(&mut self, name: &str, ports: Vec<ServicePort>) -> Result<(), RenderError> {
        let service = Service {
            metadata: self.meta(name, Some(name)),
            spec: Some(ServiceSpec {
                cluster_ip: Some("None".into()),
                // Members must find each other before any is ready: readiness needs a leader.
                publish_not_ready_addresses: Some(true),
                selector: Some(self.selector(name)),
                ports: Some(ports),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.push("Service", name, &service)
    }

    fn store(&mut self) -> Result<(), RenderError> {
        let name = Names::STORE;
        let members = self.config.store.members;
        let grpc = self.config.store.grpc;
        let mut service_ports = vec![
            Self::service_port("client", STORE_CLIENT_PORT, "UDP"),
            Self::service_port("peer", STORE_PEER_PORT, "UDP"),
            Self::service_port("metrics", STORE_METRICS_PORT, "TCP"),
        ];
        if grpc {
            service_ports.push(Self::service_port("grpc", STORE_CLIENT_PORT, "TCP"));
        }
        self.headless_service(name, service_ports)?;

        let any = |port: u16| format!("0.0.0.0:{port}");
        let s = |v: &str| v.to_string();
        let mut args = vec![
            s("store"),
            s("--name"),
            s("$(POD_NAME)"),
            s("--data-dir"),
            format!("{STORE_DATA_DIR}/data"),
            s("--listen-client"),
            any(STORE_CLIENT_PORT),
            s("--listen-peer"),
            any(STORE_PEER_PORT),
            s("--listen-metrics"),
            any(STORE_METRICS_PORT),
            s("--initial-cluster"),
            self.names.initial_cluster(members, STORE_PEER_PORT),
            s("--certs"),
            s(CERTS_DIR),
        ];
        args.extend(store_tuning_args(self.config));
        let mut ports = vec![
            Self::port("client", STORE_CLIENT_PORT, "UDP"),
            Self::port("peer", STORE_PEER_PORT, "UDP"),
            Self::port("metrics", STORE_METRICS_PORT, "TCP"),
        ];
        if grpc {
            args.extend([
                s("--listen-grpc"),
                any(STORE_CLIENT_PORT),
                s("--initial-cluster-grpc"),
                self.names.initial_cluster(members, STORE_CLIENT_PORT),
            ]);
            ports.push(Self::port("grpc", STORE_CLIENT_PORT, "TCP"));
        }
        let container = self.container(
            "store",
            args,
            ports,
            vec![
                VolumeMount {
                    name: "data".into(),
                    mount_path: STORE_DATA_DIR.into(),
                    ..Default::default()
                },
                Self::mount("certs", CERTS_DIR),
            ],
            (
                Self::probe("/readyz", "metrics", false, 3),
                Self::probe("/livez", "metrics", false, 6),
            ),
            ("500m", "1Gi"),
        );
        let volumes = vec![self.certs_volume(vec![Self::whole_secret(STORE_CERTS_SECRET)])];
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_string(),
                        Quantity(STORE_VOLUME_SIZE.into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let set = StatefulSet {
            metadata: self.meta(name, Some(name)),
            spec: StatefulSetSpec {
                replicas: Some(replicas(members)),
                service_name: Some(name.into()),
                // Raft needs a quorum up before any member is ready: start them all at once.
                pod_management_policy: Some("Parallel".into()),
                selector: LabelSelector {
                    match_labels: Some(self.selector(name)),
                    ..Default::default()
                },
                template: self.pod(name, container, volumes),
                volume_claim_templates: Some(vec![claim]),
                ..Default::default()
            },
            ..Default::default()
        };
        self.push("StatefulSet", name, &set)
    }

    fn apiserver(&mut self) -> Result<(), RenderError> {
        let name = Names::APISERVER;
        let service = Service {
            metadata: self.meta(name, Some(name)),
            spec: Some(ServiceSpec {
                type_: Some("ClusterIP".into()),
                selector: Some(self.selector(name)),
                ports: Some(vec![
                    Self::service_port("https", API_HTTP_PORT, "TCP"),
                    Self::service_port("quic", API_QUIC_PORT, "UDP"),
                ]),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.push("Service", name, &service)?;
        let s = |v: &str| v.to_string();
        let [enable, disable] = admission_args(self.config);
        let compaction = if self.config.apiserver.keep_history {
            0
        } else {
            self.config.apiserver.compaction_interval_seconds
        };
        let args = vec![
            s("apiserver"),
            s("--store-endpoints"),
            self.names.store_endpoints(self.config.store.members),
            s("--certs"),
            s(CERTS_DIR),
            s("--identity"),
            s("apiserver"),
            s("--listen-http"),
            format!("0.0.0.0:{API_HTTP_PORT}"),
            s("--listen-quic"),
            format!("0.0.0.0:{API_QUIC_PORT}"),
            enable,
            disable,
            s("--token-auth-file"),
            format!("{TOKENS_DIR}/{TOKEN_FILE}"),
            s("--compaction-interval-secs"),
            compaction.to_string(),
            s("--store-batch-linger-us"),
            self.config.apiserver.store_batch_linger_us.to_string(),
        ];
        let container = self.container(
            "apiserver",
            args,
            vec![
                Self::port("https", API_HTTP_PORT, "TCP"),
                Self::port("quic", API_QUIC_PORT, "UDP"),
            ],
            vec![
                Self::mount("certs", CERTS_DIR),
                Self::mount("tokens", TOKENS_DIR),
            ],
            (
                Self::probe("/readyz", "https", true, 3),
                Self::probe("/livez", "https", true, 6),
            ),
            ("1", "2Gi"),
        );
        let volumes = vec![
            self.certs_volume(vec![
                Self::tls_projection(APISERVER_TLS_SECRET, "apiserver"),
                Self::whole_secret(SERVICE_ACCOUNT_SECRET),
            ]),
            Volume {
                name: "tokens".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(TOKENS_SECRET.into()),
                    default_mode: Some(0o440),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ];
        let replicas = self.config.apiserver.replicas;
        self.push_deployment(name, replicas, container, volumes)
    }

    fn api_quic(&self) -> String {
        format!(
            "{}:{API_QUIC_PORT}",
            self.names.service_host(Names::APISERVER)
        )
    }

    fn scheduler_args(&self) -> Vec<String> {
        let s = |v: &str| v.to_string();
        vec![
            s("scheduler"),
            s("--apiserver"),
            self.api_quic(),
            s("--certs"),
            s(CERTS_DIR),
            s("--name"),
            self.config.scheduler.name.clone(),
            s("--identity"),
            s("scheduler"),
            s("--workers"),
            self.config.scheduler.workers.to_string(),
            s("--metrics-addr"),
            format!("0.0.0.0:{SCHEDULER_METRICS_PORT}"),
            // Leader election on a Lease: each replica holds it under its own pod's name.
            s("--holder-identity"),
            s("$(POD_NAME)"),
        ]
    }

    fn controllers_args(&self) -> Vec<String> {
        let s = |v: &str| v.to_string();
        // Leader election is on unless `--no-leader-elect`.
        let mut args = vec![
            s("controllers"),
            s("--apiserver"),
            self.api_quic(),
            s("--certs"),
            s(CERTS_DIR),
            s("--identity"),
            s("controllers"),
            s("--metrics-addr"),
            format!("0.0.0.0:{CONTROLLERS_METRICS_PORT}"),
        ];
        args.extend(self.config.storage.controller_args());
        args
    }

    /// The scheduler's and the controller manager's Deployments: leader-elected replicas that
    /// serve health on their metrics port.
    #[allow(clippy::too_many_arguments)]
    fn deployment(
        &mut self,
        name: &str,
        replicas: u32,
        args: Vec<String>,
        tls_secret: &str,
        identity: &str,
        metrics_port: u16,
        requests: (&str, &str),
    ) -> Result<(), RenderError> {
        if replicas == 0 {
            return Ok(());
        }
        let container = self.container(
            identity,
            args,
            vec![Self::port("metrics", metrics_port, "TCP")],
            vec![Self::mount("certs", CERTS_DIR)],
            (
                Self::probe("/healthz", "metrics", false, 3),
                Self::probe("/healthz", "metrics", false, 6),
            ),
            requests,
        );
        let volumes = vec![self.certs_volume(vec![Self::tls_projection(tls_secret, identity)])];
        self.push_deployment(name, replicas, container, volumes)
    }

    fn push_deployment(
        &mut self,
        name: &str,
        replicas: u32,
        container: Container,
        volumes: Vec<Volume>,
    ) -> Result<(), RenderError> {
        let deployment = Deployment {
            metadata: self.meta(name, Some(name)),
            spec: DeploymentSpec {
                replicas: Some(self::replicas(replicas)),
                selector: LabelSelector {
                    match_labels: Some(self.selector(name)),
                    ..Default::default()
                },
                template: self.pod(name, container, volumes),
                ..Default::default()
            },
            ..Default::default()
        };
        self.push("Deployment", name, &deployment)
    }

    fn node_hosts(&mut self) -> Result<(), RenderError> {
        let hosts = self.config.nodes.hosts;
        if hosts == 0 {
            return Ok(());
        }
        let name = Names::NODEHOST;
        self.headless_service(
            name,
            vec![
                Self::service_port("metrics", NODEHOST_METRICS_PORT, "TCP"),
                Self::service_port("logs", NODEHOST_LOGS_PORT, "UDP"),
            ],
        )?;
        let s = |v: &str| v.to_string();
        let args = vec![
            s("node-host"),
            s("--apiserver"),
            self.api_quic(),
            s("--certs"),
            s(CERTS_DIR),
            s("--identity"),
            s("$(POD_NAME)"),
            s("--nodes"),
            self.config.nodes.per_host.to_string(),
            s("--name-prefix"),
            s(NODE_PREFIX),
            // Pod `kemu-nodehost-K` runs nodes K × per_host …: one name space for the cluster.
            s("--first-index-from-ordinal"),
            s("--config"),
            format!("{CONFIG_DIR}/{NODEHOST_CONFIG_KEY}"),
            s("--metrics-addr"),
            format!("0.0.0.0:{NODEHOST_METRICS_PORT}"),
            s("--logs-addr"),
            format!("0.0.0.0:{NODEHOST_LOGS_PORT}"),
            // The API server dials this for `kubectl logs`: a name in the host's certificate.
            s("--logs-advertise"),
            format!(
                "{}:{NODEHOST_LOGS_PORT}",
                self.names.pod_host(Names::NODEHOST, "$(POD_NAME)")
            ),
        ];
        // What a node host needs grows with its nodes and their pods (docs/node.md).
        let memory = format!("{}Mi", 128 + self.config.nodes.per_host / 2);
        let container = self.container(
            "nodehost",
            args,
            vec![
                Self::port("metrics", NODEHOST_METRICS_PORT, "TCP"),
                Self::port("logs", NODEHOST_LOGS_PORT, "UDP"),
            ],
            vec![
                Self::mount("certs", CERTS_DIR),
                Self::mount("config", CONFIG_DIR),
            ],
            (
                Self::probe("/healthz", "metrics", false, 3),
                Self::probe("/healthz", "metrics", false, 6),
            ),
            ("500m", &memory),
        );
        let volumes = vec![
            self.certs_volume(vec![Self::whole_secret(NODEHOST_CERTS_SECRET)]),
            self.config_volume(),
        ];
        let set = StatefulSet {
            metadata: self.meta(name, Some(name)),
            spec: StatefulSetSpec {
                replicas: Some(replicas(hosts)),
                service_name: Some(name.into()),
                pod_management_policy: Some("Parallel".into()),
                selector: LabelSelector {
                    match_labels: Some(self.selector(name)),
                    ..Default::default()
                },
                template: self.pod(name, container, volumes),
                ..Default::default()
            },
            ..Default::default()
        };
        self.push("StatefulSet", name, &set)
    }

    fn config_volume(&self) -> Volume {
        Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: CONFIG_MAP.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `kemu load` with the config's `[load]` plan, against the API Service, as the cluster's
    /// administrator.
    fn load_job(&mut self) -> Result<(), RenderError> {
        if self.options.load_plan.is_none() {
            return Ok(());
        }
        let name = Names::LOAD;
        let s = |v: &str| v.to_string();
        let args = vec![
            s("load"),
            s("--kubeconfig"),
            format!("{KUBECONFIG_DIR}/kubeconfig"),
            s("--plan"),
            format!("{CONFIG_DIR}/{LOAD_PLAN_KEY}"),
            s("--report-dir"),
            s("/tmp"),
        ];
        let container = Container {
            name: "load".into(),
            image: Some(self.options.image.clone()),
            image_pull_policy: Some("IfNotPresent".into()),
            command: Some(vec!["kemu".into()]),
            args: Some(args),
            volume_mounts: Some(vec![
                Self::mount("kubeconfig", KUBECONFIG_DIR),
                Self::mount("config", CONFIG_DIR),
            ]),
            resources: Some(Self::resources("500m", "512Mi")),
            ..Default::default()
        };
        let volumes = vec![Self::admin_kubeconfig_volume(), self.config_volume()];
        self.run_once(name, container, volumes, None)
    }

    /// The administrator's kubeconfig Secret as a volume.
    fn admin_kubeconfig_volume() -> Volume {
        Volume {
            name: "kubeconfig".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(ADMIN_KUBECONFIG_SECRET.into()),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A Job that runs `container` once: a run that failed its checks is a result, not
    /// something to retry (`backoffLimit: 0`, `restartPolicy: Never`).
    fn run_once(
        &mut self,
        name: &str,
        container: Container,
        volumes: Vec<Volume>,
        service_account: Option<&str>,
    ) -> Result<(), RenderError> {
        let mut template = self.pod(name, container, volumes);
        if let Some(spec) = template.spec.as_mut() {
            spec.restart_policy = Some("Never".into());
            spec.service_account_name = service_account.map(str::to_string);
        }
        let job = Job {
            metadata: self.meta(name, Some(name)),
            spec: Some(JobSpec {
                backoff_limit: Some(0),
                template,
                ..Default::default()
            }),
            ..Default::default()
        };
        self.push("Job", name, &job)
    }
}

impl Renderer<'_> {
    /// `kemu chaos --kubernetes` with the config's `[chaos]` plan, as a service account that
    /// may list and delete the namespace's pods (a kill deletes a pod with no grace period), and
    /// the store's administrator for its register workload and checks.
    fn chaos_job(&mut self) -> Result<(), RenderError> {
        let Some(chaos) = self.options.chaos.clone() else {
            return Ok(());
        };
        let name = Names::CHAOS;
        self.push(
            "ServiceAccount",
            name,
            &ServiceAccount {
                metadata: self.meta(name, Some(name)),
                ..Default::default()
            },
        )?;
        self.push(
            "Role",
            name,
            &Role {
                metadata: self.meta(name, Some(name)),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["pods".into()]),
                    verbs: vec!["get".into(), "list".into(), "delete".into()],
                    ..Default::default()
                }]),
            },
        )?;
        self.push(
            "RoleBinding",
            name,
            &RoleBinding {
                metadata: self.meta(name, Some(name)),
                role_ref: RoleRef {
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    kind: "Role".into(),
                    name: name.into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: name.into(),
                    namespace: Some(self.options.namespace.clone()),
                    ..Default::default()
                }]),
            },
        )?;
        let members = (0..self.config.store.members)
            .map(|i| {
                let pod = Names::store_member(i);
                let host = self.names.pod_host(Names::STORE, &pod);
                format!("{pod}={host}:{STORE_CLIENT_PORT}")
            })
            .collect::<Vec<_>>()
            .join(",");
        let s = |v: &str| v.to_string();
        let args = vec![
            s("chaos"),
            s("--kubernetes"),
            self.options.namespace.clone(),
            s("--instance"),
            self.config.name.clone(),
            s("--store-members"),
            members,
            s("--certs"),
            s(CERTS_DIR),
            s("--kubeconfig"),
            format!("{KUBECONFIG_DIR}/kubeconfig"),
            s("--plan"),
            format!("{CONFIG_DIR}/{LOAD_PLAN_KEY}"),
            s("--duration"),
            format!("{}", chaos.duration_s),
            s("--report"),
            s("/tmp"),
        ];
        let container = Container {
            name: "chaos".into(),
            image: Some(self.options.image.clone()),
            image_pull_policy: Some("IfNotPresent".into()),
            command: Some(vec!["kemu".into()]),
            args: Some(args),
            volume_mounts: Some(vec![
                Self::mount("certs", CERTS_DIR),
                Self::mount("kubeconfig", KUBECONFIG_DIR),
                Self::mount("config", CONFIG_DIR),
            ]),
            resources: Some(Self::resources("250m", "256Mi")),
            ..Default::default()
        };
        let admin = store::config::STORE_ADMIN;
        let store_admin = SecretProjection {
            name: STORE_CERTS_SECRET.into(),
            items: Some(
                ["crt", "key"]
                    .into_iter()
                    .map(|ext| KeyToPath {
                        key: format!("{admin}.{ext}"),
                        path: format!("{admin}.{ext}"),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        };
        let volumes = vec![
            self.certs_volume(vec![store_admin]),
            Self::admin_kubeconfig_volume(),
            self.config_volume(),
        ];
        self.run_once(name, container, volumes, Some(name))
    }
}

/// A count of the config as a `replicas` value (configs hold far fewer than `i32::MAX`).
fn replicas(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(text: &str) -> ClusterConfig {
        ClusterConfig::parse(text, Path::new("t.toml")).expect("a valid config")
    }

    fn rendered(text: &str) -> Vec<serde_json::Value> {
        let config = config(text);
        let options = RenderOptions::new(&config);
        let names = Names {
            namespace: options.namespace.clone(),
        };
        let credentials = Credentials::generate(&config, &names).expect("certificates");
        render(&config, &options, &credentials)
            .expect("rendered")
            .iter()
            .map(|m| serde_saphyr::from_str(&m.yaml).expect("YAML"))
            .collect()
    }

    #[test]
    fn names_of_pods_and_services() {
        let names = Names {
            namespace: "big".into(),
        };
        assert_eq!(Names::store_member(0), "kemu-store-0");
        assert_eq!(
            names.pod_host(Names::STORE, &Names::store_member(2)),
            "kemu-store-2.kemu-store.big.svc"
        );
        assert_eq!(
            names.initial_cluster(2, 2380),
            "kemu-store-0=kemu-store-0.kemu-store.big.svc:2380,kemu-store-1=kemu-store-1.kemu-store.big.svc:2380"
        );
        assert_eq!(
            names.store_endpoints(1),
            "kemu-store-0.kemu-store.big.svc:2379"
        );
        assert_eq!(
            names.dns_sans(&names.service_host(Names::APISERVER)),
            [
                "kemu-apiserver",
                "kemu-apiserver.big",
                "kemu-apiserver.big.svc",
                "kemu-apiserver.big.svc.cluster.local"
            ]
        );
        assert_eq!(
            names.dns_sans("kemu-store-0.kemu-store.big.svc")[0],
            "kemu-store-0.kemu-store"
        );
    }

    #[test]
    fn bad_namespaces_are_named() {
        for bad in ["", "Big", "-a", "a-", "a.b", &"a".repeat(64)] {
            let e = validate_namespace(bad).expect_err(bad).to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        validate_namespace("kemu-1").expect("a good name");
    }

    #[test]
    fn objects_come_in_a_fixed_order_with_the_config_counts() {
        let objects = rendered(
            "name = \"big\"\n[store]\nmembers = 3\n[apiserver]\nreplicas = 2\n[controllers]\nreplicas = 1\n[nodes]\nhosts = 4\nper_host = 10\n",
        );
        let kinds: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["metadata"]["name"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace/big",
                "Secret/kemu-ca",
                "Secret/kemu-store-certs",
                "Secret/kemu-apiserver-tls",
                "Secret/kemu-service-account-key",
                "Secret/kemu-tokens",
                "Secret/kemu-scheduler-tls",
                "Secret/kemu-controllers-tls",
                "Secret/kemu-nodehost-certs",
                "Secret/kemu-admin-kubeconfig",
                "ConfigMap/kemu-config",
                "Service/kemu-store",
                "StatefulSet/kemu-store",
                "Service/kemu-apiserver",
                "Deployment/kemu-apiserver",
                "Deployment/kemu-scheduler",
                "Deployment/kemu-controllers",
                "Service/kemu-nodehost",
                "StatefulSet/kemu-nodehost",
            ]
        );
        let by = |kind: &str, name: &str| {
            objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .cloned()
                .unwrap_or_default()
        };
        let store = by("StatefulSet", "kemu-store");
        assert_eq!(store["spec"]["replicas"], 3);
        let args = store["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(
            args.contains("kemu-store-2=kemu-store-2.kemu-store.big.svc:2380"),
            "{args}"
        );
        assert_eq!(by("Deployment", "kemu-apiserver")["spec"]["replicas"], 2);
        assert_eq!(by("StatefulSet", "kemu-nodehost")["spec"]["replicas"], 4);
        let secret = by("Secret", "kemu-nodehost-certs");
        assert!(secret["data"]["kemu-nodehost-3.crt"].is_string());
    }

    #[test]
    fn certificates_carry_the_in_cluster_names() {
        let config = config("[store]\nmembers = 1\n");
        let names = Names {
            namespace: "ns1".into(),
        };
        let credentials = Credentials::generate(&config, &names).expect("certificates");
        let (crt, _) = credentials.pair("kemu-store-0");
        let (_, pem) = x509_parser::pem::parse_x509_pem(crt.as_bytes()).expect("PEM");
        let cert = pem.parse_x509().expect("X.509");
        let sans = format!("{:?}", cert.subject_alternative_name());
        for want in [
            "kemu-store-0.kemu-store.ns1.svc",
            "localhost",
            "[127, 0, 0, 1]",
        ] {
            assert!(sans.contains(want), "{want} missing from {sans}");
        }
    }
}
