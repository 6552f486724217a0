//! Admission end to end: the real kubectl against a real kemu API server — defaults visible in
//! `kubectl get pod -o yaml`, 422 with field causes, NamespaceLifecycle, ResourceQuota (its
//! message, its status, concurrent creates), LimitRanger and PodSecurity.

use crate::common;

use std::time::Duration;

use common::{wait_until, Cluster};
use serde_json::{json, Value};

fn get(c: &Cluster, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&c.ok(&all)).expect("kubectl get -o json prints JSON")
}

fn apply_fails(c: &Cluster, name: &str, manifest: &str) -> String {
    let path = c.file(name, manifest);
    c.fails(&["apply", "-f", &path])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_validation_and_namespace_lifecycle() -> anyhow::Result<()> {
    // No controller manager here: the account pods run as is made by hand.
    let c = Cluster::start_with_api_args(
        1,
        &["--enable-admission-plugins=ServiceAccount".to_string()],
    )
    .await?;
    c.ok(&["create", "serviceaccount", "default"]);

    // The defaults kube-apiserver fills in, as `kubectl get pod -o yaml` shows them.
    c.ok(&["run", "web", "--image=nginx"]);
    let yaml = c.ok(&["get", "pod", "web", "-o", "yaml"]);
    for line in [
        "restartPolicy: Always",
        "terminationGracePeriodSeconds: 30",
        "dnsPolicy: ClusterFirst",
        "schedulerName: default-scheduler",
        "imagePullPolicy: Always",
        "serviceAccountName: default",
        "serviceAccount: default",
        "enableServiceLinks: true",
        "securityContext: {}",
        "priority: 0",
        "preemptionPolicy: PreemptLowerPriority",
        "terminationMessagePath: /dev/termination-log",
        "terminationMessagePolicy: File",
        "key: node.kubernetes.io/not-ready",
        "key: node.kubernetes.io/unreachable",
        "tolerationSeconds: 300",
    ] {
        assert!(yaml.contains(line), "{line:?} missing from:\n{yaml}");
    }
    let pod = get(&c, &["pod", "web"]);
    assert_eq!(
        pod["spec"]["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );
    c.ok(&["run", "pinned", "--image=nginx:1.27"]);
    let pinned = get(&c, &["pod", "pinned"]);
    assert_eq!(
        pinned["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // Priority from a PriorityClass; an unknown class is refused.
    c.ok(&["create", "priorityclass", "high", "--value=1000"]);
    c.ok(&[
        "run",
        "important",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"priorityClassName":"high"}}"#,
    ]);
    assert_eq!(get(&c, &["pod", "important"])["spec"]["priority"], 1000);
    let err = c.fails(&[
        "run",
        "lost",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"priorityClassName":"nope"}}"#,
    ]);
    assert!(
        err.contains("pods \"lost\" is forbidden: no PriorityClass with name nope was found"),
        "{err}"
    );

    // 422 with the field named, in kubectl's rendering and in the Status causes.
    let bad = r#"
apiVersion: v1
kind: Pod
metadata: {name: Bad_Name}
spec:
  containers:
  - name: c
    image: nginx
    ports: [{containerPort: 70000}]
  - name: c
    image: ""
    resources:
      requests: {cpu: "2"}
      limits: {cpu: "1"}
"#;
    let err = apply_fails(&c, "bad.yaml", bad);
    assert!(err.contains("The Pod \"Bad_Name\" is invalid"), "{err}");
    for cause in [
        "metadata.name: Invalid value: \"Bad_Name\"",
        "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        "spec.containers[1].name: Duplicate value: \"c\"",
        "spec.containers[1].image: Required value",
        "spec.containers[1].resources.requests[cpu]: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
    ] {
        assert!(err.contains(cause), "{cause:?} missing from:\n{err}");
    }
    let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dup"},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "a", "image": "x"}]}}))?;
    let (code, status) = c
        .http(
            "POST",
            "/api/v1/namespaces/default/pods",
            Some("application/json"),
            &body,
        )
        .await?;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["details"]["causes"],
        json!([{"reason": "FieldValueDuplicate", "message": "Duplicate value: \"a\"", "field": "spec.containers[1].name"}])
    );

    // Immutable pod spec.
    let err = c.fails(&[
        "patch",
        "pod",
        "web",
        "-p",
        r#"{"spec":{"restartPolicy":"Never"}}"#,
    ]);
    assert!(
        err.contains("pod updates may not change fields other than `spec.containers[*].image`"),
        "{err}"
    );

    // ServiceAccount: the account a pod names must exist; `default` is waited for a moment
    // (the controller manager makes it), then refused in kube-apiserver's words.
    let err = c.fails(&[
        "run",
        "robot",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"serviceAccountName":"robot"}}"#,
    ]);
    assert!(
        err.contains(r#"Error from server (Forbidden): pods "robot" is forbidden: error looking up service account default/robot: serviceaccount "robot" not found"#),
        "{err}"
    );
    c.ok(&["create", "serviceaccount", "robot"]);
    c.ok(&[
        "run",
        "robot",
        "--image=nginx",
        "--overrides",
        r#"{"spec":{"serviceAccountName":"robot"}}"#,
    ]);
    c.ok(&["create", "namespace", "fresh"]);
    let started = std::time::Instant::now();
    let err = c.fails(&["run", "early", "--image=nginx", "-n", "fresh"]);
    assert!(
        err.contains(r#"pods "early" is forbidden: error looking up service account fresh/default: serviceaccount "default" not found"#),
        "{err}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "looked up again before refusing"
    );

    // NamespaceLifecycle.
    let err = c.fails(&["run", "x", "--image=nginx", "-n", "nope"]);
    assert!(err.contains("namespaces \"nope\" not found"), "{err}");
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        c.ok(&["get", "namespace", ns]);
    }
    let err = c.fails(&["delete", "namespace", "kube-system"]);
    assert!(
        err.contains("namespaces \"kube-system\" is forbidden: this namespace may not be deleted"),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_quota_counts_and_refuses() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok(&["create", "namespace", "q"]);
    c.ok(&["run", "before", "--image=nginx", "-n", "q"]);
    c.ok(&[
        "create",
        "quota",
        "pods",
        "--hard=pods=2,count/configmaps=5",
        "-n",
        "q",
    ]);
    // The quota starts out counting what is already there.
    let quota = get(&c, &["quota", "pods", "-n", "q"]);
    assert_eq!(
        quota["status"]["hard"],
        json!({"pods": "2", "count/configmaps": "5"})
    );
    assert_eq!(
        quota["status"]["used"],
        json!({"pods": "1", "count/configmaps": "0"})
    );

    c.ok(&["run", "second", "--image=nginx", "-n", "q"]);
    let err = c.fails(&["run", "third", "--image=nginx", "-n", "q"]);
    assert!(
        err.contains("Error from server (Forbidden): pods \"third\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2"),
        "{err}"
    );
    let table = c.ok(&["get", "quota", "-n", "q"]);
    assert!(
        table.contains("count/configmaps: 0/5, pods: 2/2"),
        "{table}"
    );

    // A delete gives the pod back.
    c.ok(&["delete", "pod", "before", "-n", "q", "--wait=false"]);
    wait_until(
        "the deleted pod is refunded",
        Duration::from_secs(30),
        || async { get(&c, &["quota", "pods", "-n", "q"])["status"]["used"]["pods"] == "1" },
    )
    .await?;

    // Concurrent creates never overshoot: 12 racing for 3 free configmap slots… and 1 pod slot.
    let attempts: Vec<_> = (0..12)
        .map(|i| {
            let body = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}")}}))
            .expect("encodes");
            let c = &c;
            async move {
                c.http(
                    "POST",
                    "/api/v1/namespaces/q/configmaps",
                    Some("application/json"),
                    &body,
                )
                .await
            }
        })
        .collect();
    c.ok(&["create", "configmap", "first", "-n", "q"]);
    c.ok(&["create", "configmap", "second", "-n", "q"]);
    let results = futures::future::join_all(attempts).await;
    let mut created = 0;
    for result in results {
        let (code, status) = result?;
        match code {
            201 => created += 1,
            403 => assert!(
                status["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("exceeded quota: pods, requested: count/configmaps=1, used: count/configmaps=5, limited: count/configmaps=5")),
                "{status}"
            ),
            other => panic!("unexpected {other}: {status}"),
        }
    }
    assert_eq!(created, 3, "exactly the free slots were taken");
    let quota = get(&c, &["quota", "pods", "-n", "q"]);
    assert_eq!(quota["status"]["used"]["count/configmaps"], "5");

    // A compute quota wants every container to state what it asks for.
    c.ok(&["create", "namespace", "compute"]);
    c.ok(&[
        "create",
        "quota",
        "compute",
        "--hard=requests.cpu=1,limits.memory=1Gi",
        "-n",
        "compute",
    ]);
    let err = c.fails(&["run", "loose", "--image=nginx", "-n", "compute"]);
    assert!(
        err.contains("pods \"loose\" is forbidden: failed quota: compute: must specify limits.memory,requests.cpu"),
        "{err}"
    );
    c.ok(&["run", "tight", "--image=nginx", "-n", "compute", "--overrides",
        r#"{"spec":{"containers":[{"name":"tight","image":"nginx","resources":{"requests":{"cpu":"600m"},"limits":{"memory":"512Mi"}}}]}}"#]);
    let err = c.fails(&["run", "greedy", "--image=nginx", "-n", "compute", "--overrides",
        r#"{"spec":{"containers":[{"name":"greedy","image":"nginx","resources":{"requests":{"cpu":"500m"},"limits":{"memory":"256Mi"}}}]}}"#]);
    assert!(
        err.contains("exceeded quota: compute, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1"),
        "{err}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_ranges_and_pod_security() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;

    // LimitRanger: defaults land in the pod; bounds refuse.
    c.ok(&["create", "namespace", "lr"]);
    let range = c.file(
        "range.yaml",
        r#"
apiVersion: v1
kind: LimitRange
metadata: {name: cpu, namespace: lr}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 256Mi}
    defaultRequest: {cpu: 100m}
    max: {cpu: "1"}
"#,
    );
    c.ok(&["apply", "-f", &range]);
    let stored = get(&c, &["limitrange", "cpu", "-n", "lr"]);
    assert_eq!(
        stored["spec"]["limits"][0]["defaultRequest"],
        json!({"cpu": "100m", "memory": "256Mi"}),
        "defaultRequest falls back to default"
    );
    assert!(c.ok(&["get", "limits", "-n", "lr"]).contains("cpu"));
    c.ok(&["run", "web", "--image=nginx", "-n", "lr"]);
    let pod = get(&c, &["pod", "web", "-n", "lr"]);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "256Mi"}})
    );
    assert_eq!(pod["status"]["qosClass"], "Burstable");
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container web; cpu, memory limit for container web"
    );
    let err = c.fails(&["run", "big", "--image=nginx", "-n", "lr", "--overrides",
        r#"{"spec":{"containers":[{"name":"big","image":"nginx","resources":{"limits":{"cpu":"2"}}}]}}"#]);
    assert!(
        err.contains(
            "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
        ),
        "{err}"
    );

    // PodSecurity: the namespace label decides.
    c.ok(&["create", "namespace", "secure"]);
    c.ok(&[
        "label",
        "namespace",
        "secure",
        "pod-security.kubernetes.io/enforce=baseline",
    ]);
    let privileged = r#"
apiVersion: v1
kind: Pod
metadata: {name: root, namespace: secure}
spec:
  hostNetwork: true
  volumes: [{name: host, hostPath: {path: /}}]
  containers:
  - name: c
    image: nginx
    securityContext: {privileged: true}
"#;
    let err = apply_fails(&c, "privileged.yaml", privileged);
    assert!(
        err.contains("pods \"root\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), hostPath volumes (volume \"host\"), privileged (container \"c\" must not set securityContext.privileged=true)"),
        "{err}"
    );
    c.ok(&["run", "plain", "--image=nginx", "-n", "secure"]);
    c.ok(&[
        "label",
        "namespace",
        "secure",
        "--overwrite",
        "pod-security.kubernetes.io/enforce=restricted",
    ]);
    let err = c.fails(&["run", "plain2", "--image=nginx", "-n", "secure"]);
    assert!(
        err.contains("violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"plain2\" must set securityContext.allowPrivilegeEscalation=false)"),
        "{err}"
    );
    Ok(())
}
