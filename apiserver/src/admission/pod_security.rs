//! PodSecurity: the Pod Security Standards, enforced per namespace by its
//! `pod-security.kubernetes.io/enforce` label (`privileged`, `baseline` or `restricted`).
//!
//! Each check returns Kubernetes' reason and detail; the pod is refused with
//! `violates PodSecurity "baseline:latest": reason (detail), …`, checks in the order of their
//! identifiers as pod-security-admission reports them.

use serde_json::Value;

use super::policy::NamespaceFacts;

pub(crate) const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub(crate) const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";

/// A Pod Security Standards level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Privileged,
    Baseline,
    Restricted,
}

impl Level {
    /// A label value; anything unknown is treated as the strictest level, as Kubernetes does.
    pub fn parse(value: &str) -> Level {
        match value {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            _ => Level::Restricted,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// Capabilities a baseline container may add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// Volume types a restricted pod may use.
const RESTRICTED_VOLUME_TYPES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// Checks the pod against its namespace's enforce level. The error is the reason it is
/// forbidden.
pub fn admit(namespace: &NamespaceFacts, pod: &Value) -> Result<(), String> {
    let Some(level) = namespace.enforce.as_deref().map(Level::parse) else {
        return Ok(());
    };
    let version = namespace.enforce_version.as_deref().unwrap_or("latest");
    let violations = evaluate(level, pod);
    if violations.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = violations
        .iter()
        .map(|(reason, detail)| format!("{reason} ({detail})"))
        .collect();
    Err(format!(
        "violates PodSecurity \"{}:{version}\": {}",
        level.as_str(),
        list.join(", ")
    ))
}

/// The (reason, detail) of every check the pod fails at `level`, in check-identifier order.
pub fn evaluate(level: Level, pod: &Value) -> Vec<(&'static str, String)> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let restricted = level == Level::Restricted;
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let containers: Vec<&Value> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|k| spec.get(*k).and_then(Value::as_array))
        .flatten()
        .collect();
    let mut out = Vec::new();
    let mut push = |reason: &'static str, detail: Option<String>| {
        if let Some(d) = detail {
            out.push((reason, d));
        }
    };
    if restricted {
        push(
            "allowPrivilegeEscalation != false",
            allow_privilege_escalation(&containers),
        );
    }
    if restricted {
        push(
            "unrestricted capabilities",
            capabilities_restricted(&containers),
        );
    } else {
        push(
            "non-default capabilities",
            capabilities_baseline(&containers),
        );
    }
    push("host namespaces", host_namespaces(spec));
    if !restricted {
        push("hostPath volumes", host_path_volumes(spec));
    }
    push("hostPort", host_ports(&containers));
    push("privileged", privileged(&containers));
    push("procMount", proc_mount(&containers));
    if restricted {
        push("restricted volume types", restricted_volumes(spec));
        push("runAsNonRoot != true", run_as_non_root(spec, &containers));
        push("runAsUser=0", run_as_user(spec, &containers));
        push("seccompProfile", seccomp_restricted(spec, &containers));
    } else {
        push("seccompProfile", seccomp_baseline(spec, &containers));
    }
    out
}

fn pluralize<'a>(singular: &'a str, plural: &'a str, n: usize) -> &'a str {
    if n == 1 {
        singular
    } else {
        plural
    }
}

fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    items
        .iter()
        .map(|s| format!("{:?}", s.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn name(container: &Value) -> String {
    container
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn security<'a>(container: &'a Value, field: &str) -> Option<&'a Value> {
    container.get("securityContext").and_then(|s| s.get(field))
}

/// "container "a" …" / "containers "a", "b" …" for the containers matching `bad`.
fn containers_that(
    containers: &[&Value],
    bad: impl Fn(&Value) -> bool,
    rest: &str,
) -> Option<String> {
    let names: Vec<String> = containers
        .iter()
        .filter(|c| bad(c))
        .map(|c| name(c))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} {} {rest}",
            pluralize("container", "containers", names.len()),
            join_quote(&names)
        )
    })
}

fn privileged(containers: &[&Value]) -> Option<String> {
    containers_that(
        containers,
        |c| security(c, "privileged").and_then(Value::as_bool) == Some(true),
        "must not set securityContext.privileged=true",
    )
}

fn host_namespaces(spec: &Value) -> Option<String> {
    let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .iter()
        .filter(|k| spec.get(**k).and_then(Value::as_bool) == Some(true))
        .map(|k| format!("{k}=true"))
        .collect();
    (!set.is_empty()).then(|| set.join(", "))
}

fn volumes(spec: &Value) -> &[Value] {
    spec.get("volumes")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn host_path_volumes(spec: &Value) -> Option<String> {
    let names: Vec<String> = volumes(spec)
        .iter()
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names)
        )
    })
}

fn host_ports(containers: &[&Value]) -> Option<String> {
    let mut names = Vec::new();
    let mut ports: Vec<String> = Vec::new();
    for c in containers {
        let mut uses = false;
        for p in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let port = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if port != 0 {
                uses = true;
                if !ports.contains(&port.to_string()) {
                    ports.push(port.to_string());
                }
            }
        }
        if uses {
            names.push(name(c));
        }
    }
    (!names.is_empty()).then(|| {
        format!(
            "{} {} {} {} {}",
            pluralize("container", "containers", names.len()),
            join_quote(&names),
            pluralize("uses", "use", names.len()),
            pluralize("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        )
    })
}

fn added_capabilities(container: &Value) -> Vec<String> {
    security(container, "capabilities")
        .and_then(|c| c.get("add"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// Containers adding capabilities outside `allowed`, and those capabilities (sorted).
fn forbidden_adds(containers: &[&Value], allowed: &[&str]) -> Option<String> {
    let mut names = Vec::new();
    let mut caps: Vec<String> = Vec::new();
    for c in containers {
        let bad: Vec<String> = added_capabilities(c)
            .into_iter()
            .filter(|cap| !allowed.contains(&cap.as_str()))
            .collect();
        if !bad.is_empty() {
            names.push(name(c));
            caps.extend(bad);
        }
    }
    caps.sort();
    caps.dedup();
    (!names.is_empty()).then(|| {
        format!(
            "{} {} must not include {} in securityContext.capabilities.add",
            pluralize("container", "containers", names.len()),
            join_quote(&names),
            join_quote(&caps)
        )
    })
}

fn capabilities_baseline(containers: &[&Value]) -> Option<String> {
    forbidden_adds(containers, BASELINE_CAPABILITIES)
}

fn capabilities_restricted(containers: &[&Value]) -> Option<String> {
    let drops_all = |c: &Value| {
        security(c, "capabilities")
            .and_then(|c| c.get("drop"))
            .and_then(Value::as_array)
            .is_some_and(|d| d.iter().any(|v| v.as_str() == Some("ALL")))
    };
    let details: Vec<String> = [
        containers_that(
            containers,
            |c| !drops_all(c),
            "must set securityContext.capabilities.drop=[\"ALL\"]",
        ),
        forbidden_adds(containers, &["NET_BIND_SERVICE"]),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!details.is_empty()).then(|| details.join("; "))
}

fn proc_mount(containers: &[&Value]) -> Option<String> {
    let names: Vec<String> = containers
        .iter()
        .filter(|c| {
            security(c, "procMount")
                .and_then(Value::as_str)
                .is_some_and(|m| m != "Default")
        })
        .map(|c| name(c))
        .collect();
    (!names.is_empty()).then(|| {
        format!(
            "{} {} must not set securityContext.procMount to \"Unmasked\"",
            pluralize("container", "containers", names.len()),
            join_quote(&names)
        )
    })
}

fn allow_privilege_escalation(containers: &[&Value]) -> Option<String> {
    containers_that(
        containers,
        |c| security(c, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false),
        "must set securityContext.allowPrivilegeEscalation=false",
    )
}

fn restricted_volumes(spec: &Value) -> Option<String> {
    let mut names = Vec::new();
    let mut types: Vec<String> = Vec::new();
    for v in volumes(spec) {
        let bad: Vec<&String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, val)| k.as_str() != "name" && !val.is_null())
            .map(|(k, _)| k)
            .filter(|k| !RESTRICTED_VOLUME_TYPES.contains(&k.as_str()))
            .collect();
        if !bad.is_empty() {
            names.push(name(v));
            types.extend(bad.into_iter().cloned());
        }
    }
    types.sort();
    types.dedup();
    (!names.is_empty()).then(|| {
        format!(
            "{} {} {} restricted volume {} {}",
            pluralize("volume", "volumes", names.len()),
            join_quote(&names),
            pluralize("uses", "use", names.len()),
            pluralize("type", "types", types.len()),
            join_quote(&types)
        )
    })
}

/// A pod-level setting, then each container's, for runAsNonRoot-style checks.
fn run_as_non_root(spec: &Value, containers: &[&Value]) -> Option<String> {
    let pod_level = spec
        .pointer("/securityContext/runAsNonRoot")
        .and_then(Value::as_bool);
    let mut details = Vec::new();
    if pod_level == Some(false) {
        details.push("pod must not set securityContext.runAsNonRoot=false".to_string());
    }
    if let Some(d) = containers_that(
        containers,
        |c| security(c, "runAsNonRoot").and_then(Value::as_bool) == Some(false),
        "must not set securityContext.runAsNonRoot=false",
    ) {
        details.push(d);
    }
    if pod_level != Some(true) {
        let unset: Vec<String> = containers
            .iter()
            .filter(|c| security(c, "runAsNonRoot").is_none_or(Value::is_null))
            .map(|c| name(c))
            .collect();
        if !unset.is_empty() {
            details.push(format!(
                "pod or {} {} must set securityContext.runAsNonRoot=true",
                pluralize("container", "containers", unset.len()),
                join_quote(&unset)
            ));
        }
    }
    (!details.is_empty()).then(|| details.join("; "))
}

fn run_as_user(spec: &Value, containers: &[&Value]) -> Option<String> {
    let mut details = Vec::new();
    if spec
        .pointer("/securityContext/runAsUser")
        .and_then(Value::as_i64)
        == Some(0)
    {
        details.push("pod must not set runAsUser=0".to_string());
    }
    if let Some(d) = containers_that(
        containers,
        |c| security(c, "runAsUser").and_then(Value::as_i64) == Some(0),
        "must not set runAsUser=0",
    ) {
        details.push(d);
    }
    (!details.is_empty()).then(|| details.join("; "))
}

fn seccomp_type(security_context: Option<&Value>) -> Option<&str> {
    security_context
        .and_then(|s| s.pointer("/seccompProfile/type"))
        .and_then(Value::as_str)
}

fn seccomp_baseline(spec: &Value, containers: &[&Value]) -> Option<String> {
    let mut details = Vec::new();
    if seccomp_type(spec.get("securityContext")) == Some("Unconfined") {
        details.push(
            "pod must not set securityContext.seccompProfile.type to \"Unconfined\"".to_string(),
        );
    }
    if let Some(d) = containers_that(
        containers,
        |c| seccomp_type(c.get("securityContext")) == Some("Unconfined"),
        "must not set securityContext.seccompProfile.type to \"Unconfined\"",
    ) {
        details.push(d);
    }
    (!details.is_empty()).then(|| details.join("; "))
}

fn seccomp_restricted(spec: &Value, containers: &[&Value]) -> Option<String> {
    let allowed = |t: &str| t == "RuntimeDefault" || t == "Localhost";
    let pod_type = seccomp_type(spec.get("securityContext"));
    let mut details = Vec::new();
    if let Some(t) = pod_type.filter(|t| !allowed(t)) {
        details.push(format!(
            "pod must not set securityContext.seccompProfile.type to {t:?}"
        ));
    }
    let mut bad: Vec<(String, String)> = Vec::new();
    let mut unset = Vec::new();
    for c in containers {
        match seccomp_type(c.get("securityContext")) {
            Some(t) if !allowed(t) => bad.push((name(c), t.to_string())),
            Some(_) => {}
            None if pod_type.is_some_and(allowed) => {}
            None => unset.push(name(c)),
        }
    }
    if !bad.is_empty() {
        let names: Vec<&String> = bad.iter().map(|(n, _)| n).collect();
        let mut types: Vec<&String> = bad.iter().map(|(_, t)| t).collect();
        types.dedup();
        details.push(format!(
            "{} {} must not set securityContext.seccompProfile.type to {}",
            pluralize("container", "containers", names.len()),
            join_quote(&names),
            join_quote(&types)
        ));
    }
    if !unset.is_empty() {
        details.push(format!(
            "pod or {} {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
            pluralize("container", "containers", unset.len()),
            join_quote(&unset)
        ));
    }
    (!details.is_empty()).then(|| details.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The plugin, given the namespace object as the API holds it.
    fn admit(namespace: &Value, pod: &Value) -> Result<(), String> {
        super::admit(&NamespaceFacts::from_value(namespace), pod)
    }

    fn ns(level: &str) -> Value {
        json!({"metadata": {"name": "dev", "labels": {ENFORCE_LABEL: level}}})
    }

    #[test]
    fn unlabelled_and_privileged_namespaces_allow_anything() {
        let pod = json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "securityContext": {"privileged": true}}]}});
        assert!(admit(&json!({"metadata": {"name": "x"}}), &pod).is_ok());
        assert!(admit(&ns("privileged"), &pod).is_ok());
    }

    #[test]
    fn baseline_refuses_with_kubernetes_wording() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
        "hostNetwork": true, "hostPID": true,
        "volumes": [{"name": "v", "hostPath": {"path": "/"}}],
        "containers": [
            {"name": "c", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}, "ports": [{"containerPort": 80, "hostPort": 8080}]},
            {"name": "d", "securityContext": {"privileged": true}},
        ]}});
        assert_eq!(
            admit(&ns("baseline"), &pod).expect_err("refused"),
            "violates PodSecurity \"baseline:latest\": non-default capabilities (container \"c\" must not include \"NET_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume \"v\"), hostPort (container \"c\" uses hostPort 8080), privileged (containers \"c\", \"d\" must not set securityContext.privileged=true)"
        );
        let plain = json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        assert!(admit(&ns("baseline"), &plain).is_ok());
    }

    #[test]
    fn restricted_wants_the_hardened_settings() {
        let plain = json!({"spec": {"containers": [{"name": "nginx", "image": "nginx"}]}});
        let mut labelled = ns("restricted");
        labelled["metadata"]["labels"][ENFORCE_VERSION_LABEL] = json!("v1.30");
        assert_eq!(
            admit(&labelled, &plain).expect_err("refused"),
            "violates PodSecurity \"restricted:v1.30\": allowPrivilegeEscalation != false (container \"nginx\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"nginx\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"nginx\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"nginx\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        let hardened = json!({"spec": {
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [{"name": "cfg", "configMap": {"name": "x"}}],
            "containers": [{"name": "nginx", "image": "nginx", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]}});
        assert_eq!(admit(&ns("restricted"), &hardened), Ok(()));
        let mut with_host_path = hardened.clone();
        with_host_path["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}]);
        assert_eq!(
            admit(&ns("restricted"), &with_host_path).expect_err("refused"),
            "violates PodSecurity \"restricted:latest\": restricted volume types (volume \"h\" uses restricted volume type \"hostPath\")"
        );
    }

    #[test]
    fn unknown_levels_are_restricted() {
        assert_eq!(Level::parse("strict"), Level::Restricted);
        assert_eq!(Level::parse("baseline"), Level::Baseline);
    }
}
