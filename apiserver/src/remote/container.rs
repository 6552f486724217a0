//! An emulated container as an exec sees it: its hostname, IP, environment and files, built
//! from the pod and read through the API server's own storage, as the kubelet would have set
//! them up.
//!
//! - Environment, in the order a container runtime gives it: `PATH` (containerd's default),
//!   `HOSTNAME`, the container's `env` (values, `fieldRef`, `configMapKeyRef`, `secretKeyRef`)
//!   and `envFrom`, the `kubernetes` Service's variables, `HOME=/root`.
//! - Files: `/etc/hostname`, the kubelet's `/etc/hosts`, and each volume mount's files —
//!   `configMap`, `secret`, `downwardAPI` and `projected` volumes (their configMap, secret and
//!   downwardAPI sources; `items` and `subPath` honoured), so the service account volume
//!   shows `ca.crt` and `namespace`; a `serviceAccountToken` source holds a token signed for
//!   the pod's service account when the exec reads it (its audience and expiration as the
//!   source asks), as the kubelet would have requested it. `emptyDir` contents are not
//!   emulated.

use std::collections::BTreeMap;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;

use crate::registry::Registry;
use crate::service_account_tokens::{ServiceAccountTokens, ISSUER};

/// What runs inside one container, for exec.
#[derive(Clone, Debug, Default)]
pub struct Container {
    pub hostname: String,
    pub ip: String,
    pub env: Vec<(String, String)>,
    /// Absolute path → contents.
    pub files: BTreeMap<String, Bytes>,
}

/// containerd's `PATH` for an image that sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where a pod lists its containers, of every kind.
pub const CONTAINER_LISTS: &[&str] = &[
    "/spec/containers",
    "/spec/initContainers",
    "/spec/ephemeralContainers",
];
/// Where a pod's status lists its containers' statuses, of every kind.
pub const STATUS_LISTS: &[&str] = &[
    "/status/containerStatuses",
    "/status/initContainerStatuses",
    "/status/ephemeralContainerStatuses",
];

/// The entries called `name` in the pod's lists at `lists`.
pub fn named<'p>(
    pod: &'p Value,
    lists: &'static [&'static str],
    name: &'p str,
) -> impl Iterator<Item = &'p Value> + 'p {
    lists
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .filter(move |c| c.get("name").and_then(Value::as_str) == Some(name))
}

fn text<'v>(value: &'v Value, pointer: &str) -> &'v str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Reads ConfigMaps and Secrets of the pod's namespace; an absent one is `None`.
struct Sources<'r> {
    registry: &'r Registry,
    tokens: Option<&'r ServiceAccountTokens>,
    namespace: String,
}

impl Sources<'_> {
    /// A token for the pod's service account as a `serviceAccountToken` projection asks for
    /// it (audience, expiration), or none when the account is gone or nothing signs tokens.
    async fn token(&self, pod: &Value, source: &Value) -> Option<String> {
        let tokens = self.tokens?;
        let account = match text(pod, "/spec/serviceAccountName") {
            "" => "default",
            name => name,
        };
        let account = self.object("serviceaccounts", account).await?;
        let audience = match text(source, "/audience") {
            "" => ISSUER,
            audience => audience,
        };
        let seconds = source
            .get("expirationSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(3600);
        tokens
            .sign(
                &account,
                vec![audience.to_string()],
                seconds,
                chrono::Utc::now(),
            )
            .ok()
            .map(|(token, _)| token)
    }

    async fn object(&self, plural: &str, name: &str) -> Option<Value> {
        let resource = api::resources::find("", "v1", plural)?;
        self.registry
            .get(resource, Some(&self.namespace), name)
            .await
            .ok()
    }

    /// A ConfigMap's or Secret's keys and their bytes.
    async fn data(&self, plural: &str, name: &str) -> BTreeMap<String, Bytes> {
        let mut out = BTreeMap::new();
        let Some(object) = self.object(plural, name).await else {
            return out;
        };
        let decode = |v: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .map(Bytes::from)
                .ok()
        };
        let maps = [
            (object.get("data"), plural == "secrets"),
            (object.get("binaryData"), true),
        ];
        for (map, encoded) in maps {
            let Some(map) = map.and_then(Value::as_object) else {
                continue;
            };
            for (k, v) in map {
                let Some(v) = v.as_str() else { continue };
                let bytes = if encoded {
                    decode(v)
                } else {
                    Some(Bytes::copy_from_slice(v.as_bytes()))
                };
                if let Some(bytes) = bytes {
                    out.insert(k.clone(), bytes);
                }
            }
        }
        out
    }

    /// A `configMap`/`secret` volume (or projection): its keys as files, or its `items`.
    async fn keys(&self, plural: &str, name: &str, source: &Value) -> BTreeMap<String, Bytes> {
        let data = self.data(plural, name).await;
        match source.get("items").and_then(Value::as_array) {
            Some(items) => items
                .iter()
                .filter_map(|i| {
                    let key = i.get("key").and_then(Value::as_str)?;
                    let path = i.get("path").and_then(Value::as_str).unwrap_or(key);
                    Some((path.to_string(), data.get(key)?.clone()))
                })
                .collect(),
            None => data,
        }
    }
}

/// The value of a downward API `fieldPath` for the pod.
fn field(pod: &Value, path: &str) -> Option<String> {
    let quoted_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
    };
    let map_lines = |pointer: &str| {
        pod.pointer(pointer)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        format!(
                            "{k}={}",
                            serde_json::to_string(v.as_str().unwrap_or("")).unwrap_or_default()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    };
    Some(match path {
        "metadata.name" => text(pod, "/metadata/name").to_string(),
        "metadata.namespace" => text(pod, "/metadata/namespace").to_string(),
        "metadata.uid" => text(pod, "/metadata/uid").to_string(),
        "spec.nodeName" => text(pod, "/spec/nodeName").to_string(),
        "spec.serviceAccountName" => text(pod, "/spec/serviceAccountName").to_string(),
        "status.podIP" => text(pod, "/status/podIP").to_string(),
        "status.hostIP" => text(pod, "/status/hostIP").to_string(),
        "metadata.labels" => map_lines("/metadata/labels"),
        "metadata.annotations" => map_lines("/metadata/annotations"),
        _ => {
            let (map, key) = match (
                quoted_key("metadata.labels"),
                quoted_key("metadata.annotations"),
            ) {
                (Some(k), _) => ("labels", k),
                (_, Some(k)) => ("annotations", k),
                _ => return None,
            };
            pod.pointer(&format!("/metadata/{map}"))
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        }
    })
}

/// The files of one volume, by path within it.
async fn volume_files(
    sources: &Sources<'_>,
    pod: &Value,
    volume: &Value,
) -> BTreeMap<String, Bytes> {
    let mut files = BTreeMap::new();
    let downward = |items: &Value, files: &mut BTreeMap<String, Bytes>| {
        for item in items.as_array().into_iter().flatten() {
            let path = text(item, "/path");
            if let Some(value) = field(pod, text(item, "/fieldRef/fieldPath")) {
                files.insert(path.to_string(), Bytes::from(value));
            }
        }
    };
    if let Some(cm) = volume.get("configMap") {
        files.extend(sources.keys("configmaps", text(cm, "/name"), cm).await);
    } else if let Some(secret) = volume.get("secret") {
        let name = text(secret, "/secretName");
        files.extend(sources.keys("secrets", name, secret).await);
    } else if let Some(items) = volume.pointer("/downwardAPI/items") {
        downward(items, &mut files);
    } else if let Some(projected) = volume
        .pointer("/projected/sources")
        .and_then(Value::as_array)
    {
        for source in projected {
            if let Some(cm) = source.get("configMap") {
                files.extend(sources.keys("configmaps", text(cm, "/name"), cm).await);
            } else if let Some(secret) = source.get("secret") {
                files.extend(sources.keys("secrets", text(secret, "/name"), secret).await);
            } else if let Some(items) = source.pointer("/downwardAPI/items") {
                downward(items, &mut files);
            } else if let Some(token) = source.get("serviceAccountToken") {
                if let Some(signed) = sources.token(pod, token).await {
                    files.insert(text(token, "/path").to_string(), Bytes::from(signed));
                }
            }
        }
    }
    files
}

impl Container {
    /// The container `name` of `pod`, as an exec in it sees it.
    pub async fn load(
        registry: &Registry,
        tokens: Option<&ServiceAccountTokens>,
        pod: &Value,
        name: &str,
    ) -> Container {
        let spec = named(pod, CONTAINER_LISTS, name)
            .next()
            .cloned()
            .unwrap_or(Value::Null);
        let sources = Sources {
            registry,
            tokens,
            namespace: text(pod, "/metadata/namespace").to_string(),
        };
        let hostname = match text(pod, "/spec/hostname") {
            "" => text(pod, "/metadata/name"),
            h => h,
        }
        .to_string();
        let ip = text(pod, "/status/podIP").to_string();
        let mut env = vec![
            ("PATH".to_string(), DEFAULT_PATH.to_string()),
            ("HOSTNAME".to_string(), hostname.clone()),
        ];
        let set = |env: &mut Vec<(String, String)>, k: String, v: String| match env
            .iter_mut()
            .find(|(name, _)| *name == k)
        {
            Some(entry) => entry.1 = v,
            None => env.push((k, v)),
        };
        for from in spec
            .get("envFrom")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let prefix = text(from, "/prefix");
            let data = if let Some(cm) = from.get("configMapRef") {
                sources.data("configmaps", text(cm, "/name")).await
            } else if let Some(secret) = from.get("secretRef") {
                sources.data("secrets", text(secret, "/name")).await
            } else {
                continue;
            };
            for (k, v) in data {
                set(
                    &mut env,
                    format!("{prefix}{k}"),
                    String::from_utf8_lossy(&v).into_owned(),
                );
            }
        }
        for var in spec
            .get("env")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = text(var, "/name").to_string();
            let value = if let Some(v) = var.get("value").and_then(Value::as_str) {
                Some(v.to_string())
            } else if let Some(path) = var
                .pointer("/valueFrom/fieldRef/fieldPath")
                .and_then(Value::as_str)
            {
                field(pod, path)
            } else if let Some(r) = var.pointer("/valueFrom/configMapKeyRef") {
                let data = sources.data("configmaps", text(r, "/name")).await;
                data.get(text(r, "/key"))
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            } else if let Some(r) = var.pointer("/valueFrom/secretKeyRef") {
                let data = sources.data("secrets", text(r, "/name")).await;
                data.get(text(r, "/key"))
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            } else if var.get("valueFrom").is_none() {
                Some(String::new())
            } else {
                None
            };
            if let Some(value) = value {
                set(&mut env, name, value);
            }
        }
        if let Some(service) = sources_default_kubernetes(registry).await {
            for (k, v) in service {
                set(&mut env, k, v);
            }
        }
        if !env.iter().any(|(k, _)| k == "HOME") {
            env.push(("HOME".to_string(), "/root".to_string()));
        }

        let mut files = BTreeMap::new();
        files.insert(
            "/etc/hostname".to_string(),
            Bytes::from(format!("{hostname}\n")),
        );
        let mut hosts = String::from(
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n",
        );
        if !ip.is_empty() {
            hosts.push_str(&format!("{ip}\t{hostname}\n"));
        }
        files.insert("/etc/hosts".to_string(), Bytes::from(hosts));
        let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array);
        for mount in spec
            .get("volumeMounts")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let volume_name = text(mount, "/name");
            let Some(volume) = volumes
                .into_iter()
                .flatten()
                .find(|v| text(v, "/name") == volume_name)
            else {
                continue;
            };
            let mount_path = text(mount, "/mountPath").trim_end_matches('/');
            let contents = volume_files(&sources, pod, volume).await;
            match text(mount, "/subPath") {
                "" => {
                    for (path, data) in contents {
                        files.insert(format!("{mount_path}/{path}"), data);
                    }
                }
                sub => {
                    let sub = sub.trim_matches('/');
                    for (path, data) in contents {
                        if path == sub {
                            files.insert(mount_path.to_string(), data);
                        } else if let Some(rest) = path.strip_prefix(&format!("{sub}/")) {
                            files.insert(format!("{mount_path}/{rest}"), data);
                        }
                    }
                }
            }
        }
        Container {
            hostname,
            ip,
            env,
            files,
        }
    }
}

/// The variables every container gets for the `kubernetes` Service in `default`.
async fn sources_default_kubernetes(registry: &Registry) -> Option<Vec<(String, String)>> {
    let services = api::resources::find("", "v1", "services")?;
    let service = registry
        .get(services, Some("default"), "kubernetes")
        .await
        .ok()?;
    let ip = text(&service, "/spec/clusterIP").to_string();
    let port = service
        .pointer("/spec/ports/0/port")
        .and_then(Value::as_i64)
        .unwrap_or(443);
    if ip.is_empty() {
        return None;
    }
    let url = format!("tcp://{ip}:{port}");
    Some(vec![
        ("KUBERNETES_SERVICE_HOST".into(), ip.clone()),
        ("KUBERNETES_SERVICE_PORT".into(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.to_string()),
        ("KUBERNETES_PORT".into(), url.clone()),
        (format!("KUBERNETES_PORT_{port}_TCP"), url),
        (format!("KUBERNETES_PORT_{port}_TCP_PROTO"), "tcp".into()),
        (format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.to_string()),
        (format!("KUBERNETES_PORT_{port}_TCP_ADDR"), ip),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn downward_fields() {
        let pod = json!({"metadata": {"name": "p", "namespace": "n", "labels": {"app": "web", "tier": "a"}},
                         "status": {"podIP": "10.0.0.1"}});
        assert_eq!(field(&pod, "metadata.name").as_deref(), Some("p"));
        assert_eq!(field(&pod, "status.podIP").as_deref(), Some("10.0.0.1"));
        assert_eq!(
            field(&pod, "metadata.labels['app']").as_deref(),
            Some("web")
        );
        assert_eq!(
            field(&pod, "metadata.labels").as_deref(),
            Some("app=\"web\"\ntier=\"a\"")
        );
        assert_eq!(field(&pod, "spec.nope"), None);
    }
}
