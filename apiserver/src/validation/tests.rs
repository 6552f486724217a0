use super::*;
use api::resources::find;
use serde_json::json;

fn resource(group: &str, plural: &str) -> &'static ResourceInfo {
    find(group, "v1", plural).expect("resource")
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

fn causes(resource: &ResourceInfo, object: &Value) -> Vec<String> {
    validate_create(resource, object)
        .iter()
        .map(Cause::to_string)
        .collect()
}

fn pod_causes(spec: Value) -> Vec<String> {
    causes(resource("", "pods"), &pod(spec))
}

#[test]
fn valid_pod_passes() {
    let spec = json!({
        "containers": [{"name": "app", "image": "nginx", "ports": [{"name": "http", "containerPort": 80}],
                        "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "500m"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "restartPolicy": "OnFailure",
        "dnsPolicy": "ClusterFirst",
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    });
    assert_eq!(pod_causes(spec), Vec::<String>::new());
}

#[test]
fn object_names_namespaces_and_labels() {
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    p["metadata"]["name"] = json!("Foo_Bar");
    let found = validate_create(resource("", "pods"), &p);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].field, "metadata.name");
    assert_eq!(found[0].reason, "FieldValueInvalid");
    assert!(found[0]
        .message
        .starts_with("Invalid value: \"Foo_Bar\": a lowercase RFC 1123 subdomain must consist of"));

    p["metadata"] = json!({"namespace": "default"});
    assert_eq!(
        causes(resource("", "pods"), &p),
        vec!["metadata.name: Required value: name or generateName is required"]
    );
    p["metadata"] =
        json!({"name": "x", "namespace": "Bad_NS", "labels": {"app": "-x", "in valid": "a"}});
    let found = causes(resource("", "pods"), &p);
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("metadata.namespace: Invalid value: \"Bad_NS\"")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|c| c.starts_with("metadata.labels: Invalid value: \"-x\"")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|c| c
            .starts_with("metadata.labels: Invalid value: \"in valid\": name part must consist")),
        "{found:?}"
    );

    let ns = json!({"metadata": {"name": "a.b"}});
    assert!(causes(resource("", "namespaces"), &ns)[0]
        .starts_with("metadata.name: Invalid value: \"a.b\": a lowercase RFC 1123 label"));
    let node = json!({"metadata": {"name": "n1", "namespace": "x"}});
    assert_eq!(
        causes(resource("", "nodes"), &node),
        vec!["metadata.namespace: Forbidden: not allowed on this type"]
    );
}

#[test]
fn annotations_size_limit() {
    let mut p = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
    p["metadata"]["annotations"] = json!({"big": "x".repeat(256 * 1024)});
    let found = validate_create(resource("", "pods"), &p);
    assert_eq!(found[0].reason, "FieldValueTooLong");
    assert_eq!(
        found[0].to_string(),
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    );
}

#[test]
fn containers_required_and_image_required() {
    assert_eq!(
        pod_causes(json!({})),
        vec!["spec.containers: Required value"]
    );
    let found = validate_create(
        resource("", "pods"),
        &pod(json!({"containers": [{"name": "app"}]})),
    );
    assert_eq!(
        found,
        vec![Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.containers[0].image".into()
        }]
    );
    assert_eq!(
        pod_causes(json!({"containers": [{"name": "app", "image": " nginx"}]})),
        vec!["spec.containers[0].image: Invalid value: \" nginx\": must not have leading or trailing whitespace"]
    );
}

#[test]
fn duplicate_and_invalid_container_names() {
    let found = pod_causes(json!({
        "initContainers": [{"name": "nginx", "image": "busybox"}],
        "containers": [{"name": "nginx", "image": "nginx"}, {"name": "Bad_Name", "image": "x"}, {"image": "y"}]
    }));
    assert_eq!(
        found[0],
        "spec.containers[0].name: Duplicate value: \"nginx\""
    );
    assert!(found[1].starts_with(
        "spec.containers[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 label"
    ));
    assert_eq!(found[2], "spec.containers[2].name: Required value");
    assert_eq!(found.len(), 3);
}

#[test]
fn port_rules() {
    let found = pod_causes(json!({"containers": [{"name": "c", "image": "i", "ports": [
        {"containerPort": 0},
        {"containerPort": 70000, "hostPort": -1, "protocol": "HTTP", "name": "this-is-way-too-long"},
        {"containerPort": 80, "name": "web"},
        {"containerPort": 80, "name": "web"}
    ]}]}));
    assert!(
        found.contains(&"spec.containers[0].ports[0].containerPort: Required value".to_string()),
        "{found:?}"
    );
    assert!(found.contains(&"spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive".to_string()));
    assert!(found.contains(&"spec.containers[0].ports[1].hostPort: Invalid value: -1: must be between 1 and 65535, inclusive".to_string()));
    assert!(found.contains(&"spec.containers[0].ports[1].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"".to_string()));
    assert!(found.contains(&"spec.containers[0].ports[1].name: Invalid value: \"this-is-way-too-long\": must be no more than 15 characters".to_string()));
    assert!(
        found.contains(&"spec.containers[0].ports[3].name: Duplicate value: \"web\"".to_string())
    );
    assert!(found.contains(
        &"spec.containers[0].ports[3].containerPort: Duplicate value: \"80/TCP\"".to_string()
    ));
    // The same port over another protocol is fine.
    assert!(
        pod_causes(json!({"containers": [{"name": "c", "image": "i", "ports": [
        {"containerPort": 53, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]}]}))
        .is_empty()
    );
}

#[test]
fn resources_requests_within_limits() {
    let found = pod_causes(
        json!({"containers": [{"name": "c", "image": "i", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "lots"}
        }}]}),
    );
    assert_eq!(
        found,
        vec![
            "spec.containers[0].resources.limits[ephemeral-storage]: Invalid value: \"lots\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            "spec.containers[0].resources.requests[cpu]: Invalid value: \"1\": must be less than or equal to cpu limit of 500m",
        ]
    );
    let negative = pod_causes(
        json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "-1"}}}]}),
    );
    assert_eq!(negative, vec!["spec.containers[0].resources.requests[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"]);
}

#[test]
fn policies_volumes_and_mounts() {
    let found = pod_causes(json!({
        "restartPolicy": "Sometimes",
        "dnsPolicy": "Cluster",
        "terminationGracePeriodSeconds": -5,
        "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "cache", "emptyDir": {}}, {"name": "none"}],
        "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cache"}]}]
    }));
    let want = [
        "spec.volumes[1].name: Duplicate value: \"cache\"",
        "spec.volumes[2]: Required value: must specify a volume type",
        "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
        "spec.containers[0].volumeMounts[1].mountPath: Required value",
        "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
        "spec.dnsPolicy: Unsupported value: \"Cluster\": supported values: \"ClusterFirst\", \"ClusterFirstWithHostNet\", \"Default\", \"None\"",
        "spec.terminationGracePeriodSeconds: Invalid value: -5: must be greater than or equal to 0",
    ];
    assert_eq!(found, want);
    let not_found = validate_create(
        resource("", "pods"),
        &pod(
            json!({"containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}),
        ),
    );
    assert_eq!(not_found[0].reason, "FieldValueNotFound");
}

#[test]
fn tolerations() {
    let found = pod_causes(
        json!({"containers": [{"name": "c", "image": "i"}], "tolerations": [
            {"operator": "Equal", "value": "x"},
            {"key": "k", "operator": "Exists", "value": "v"},
            {"key": "k", "operator": "Equal", "effect": "NoSchedule", "tolerationSeconds": 5},
            {"key": "k", "effect": "Sometimes"}
        ]}),
    );
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(found[3].starts_with("spec.tolerations[3].effect: Unsupported value: \"Sometimes\""));
}

#[test]
fn pod_update_rules() {
    let pods = resource("", "pods");
    let old = pod(json!({
        "containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}],
        "tolerations": [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}],
        "activeDeadlineSeconds": 100,
        "hostNetwork": false
    }));
    // Image change, shorter deadline, added toleration, changed tolerationSeconds: allowed.
    let mut new = old.clone();
    new["spec"]["containers"][0]["image"] = json!("nginx:2");
    new["spec"]["activeDeadlineSeconds"] = json!(50);
    new["spec"]["tolerations"] = json!([
        {"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5},
        {"key": "b", "operator": "Exists"}
    ]);
    new["metadata"]["labels"] = json!({"x": "y"});
    new["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("hostNetwork");
    assert_eq!(validate_update(pods, &old, &new), vec![]);

    let mut changed = old.clone();
    changed["spec"]["containers"][0]["ports"][0]["containerPort"] = json!(81);
    let found = validate_update(pods, &old, &changed);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].field, "spec");
    assert_eq!(found[0].reason, "FieldValueForbidden");
    assert!(found[0].message.starts_with(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`"
    ));

    let mut removed = old.clone();
    removed["spec"]["tolerations"] = json!([]);
    assert_eq!(
        validate_update(pods, &old, &removed).iter().map(Cause::to_string).collect::<Vec<_>>(),
        vec!["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
    );

    let mut longer = old.clone();
    longer["spec"]["activeDeadlineSeconds"] = json!(200);
    assert_eq!(
        validate_update(pods, &old, &longer)[0].field,
        "spec.activeDeadlineSeconds"
    );

    let mut renamed = old.clone();
    renamed["metadata"]["name"] = json!("other");
    renamed["metadata"]["uid"] = json!("u2");
    let mut with_uid = old.clone();
    with_uid["metadata"]["uid"] = json!("u1");
    let found: Vec<String> = validate_update(pods, &with_uid, &renamed)
        .iter()
        .map(Cause::to_string)
        .collect();
    assert_eq!(
        found,
        vec![
            "metadata.name: Invalid value: \"other\": field is immutable",
            "metadata.uid: Invalid value: \"u2\": field is immutable"
        ]
    );

    // Status writes do not look at the spec.
    assert!(validate_status_update(pods, &old, &changed).is_empty());
}

fn deployment(selector: Value, labels: Value, replicas: i64) -> Value {
    json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {
        "replicas": replicas, "selector": selector,
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    }})
}

#[test]
fn deployments_and_replicasets() {
    let deployments = find("apps", "v1", "deployments").expect("deployments");
    let replicasets = find("apps", "v1", "replicasets").expect("replicasets");
    let ok = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web", "x": "y"}),
        2,
    );
    assert!(causes(deployments, &ok).is_empty());
    assert!(causes(replicasets, &ok).is_empty());

    let bad = deployment(
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "db"}),
        -1,
    );
    assert_eq!(
        causes(deployments, &bad),
        vec![
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"db\"}: `selector` does not match template `labels`",
        ]
    );
    let mut no_selector = ok.clone();
    no_selector["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("selector");
    assert_eq!(
        causes(deployments, &no_selector),
        vec![
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\", \"x\":\"y\"}: `selector` does not match template `labels`",
        ]
    );
    let empty = deployment(json!({}), json!({"app": "web"}), 1);
    assert_eq!(
        causes(deployments, &empty)[0],
        "spec.selector: Required value"
    );

    let mut nested = ok.clone();
    nested["spec"]["template"]["spec"]["containers"][0]["image"] = json!("");
    assert_eq!(
        causes(deployments, &nested),
        vec!["spec.template.spec.containers[0].image: Required value"]
    );

    let moved = deployment(
        json!({"matchLabels": {"app": "web", "x": "y"}}),
        json!({"app": "web", "x": "y"}),
        2,
    );
    let found = validate_update(deployments, &ok, &moved);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].field, "spec.selector");
}

#[test]
fn jobs() {
    let jobs = find("batch", "v1", "jobs").expect("jobs");
    let job = json!({"metadata": {"name": "pi", "namespace": "default"}, "spec": {"template": {"spec": {
        "containers": [{"name": "pi", "image": "perl"}]}}}});
    assert_eq!(
        causes(jobs, &job),
        vec!["spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""]
    );
    let mut ok = job.clone();
    ok["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    assert!(causes(jobs, &ok).is_empty());
}

#[test]
fn services_configmaps_secrets_leases() {
    let services = resource("", "services");
    let svc = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": []}});
    assert_eq!(causes(services, &svc), vec!["spec.ports: Required value"]);
    let svc = json!({"metadata": {"name": "1web", "namespace": "default"}, "spec": {"ports": [
        {"name": "http", "port": 80, "targetPort": 8080}, {"port": 0, "protocol": "TCP"}]}});
    let found = causes(services, &svc);
    assert!(
        found[0].starts_with("metadata.name: Invalid value: \"1web\": a DNS-1035 label"),
        "{found:?}"
    );
    assert!(found.contains(&"spec.ports[1].name: Required value".to_string()));
    assert!(found.contains(
        &"spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive".to_string()
    ));
    let headless =
        json!({"metadata": {"name": "db", "namespace": "default"}, "spec": {"clusterIP": "None"}});
    assert!(causes(services, &headless).is_empty());

    let cm = json!({"metadata": {"name": "cfg", "namespace": "default"}, "data": {"good.key": "v", "bad key": "v"}});
    let found = causes(resource("", "configmaps"), &cm);
    assert_eq!(found.len(), 1);
    assert!(found[0].starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters"));

    let secrets = resource("", "secrets");
    let tls = json!({"metadata": {"name": "tls", "namespace": "default"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
    assert_eq!(causes(secrets, &tls), vec!["data[tls.key]: Required value"]);
    let old = json!({"metadata": {"name": "s", "namespace": "default"}, "immutable": true, "data": {"a": "eA=="}});
    let mut new = old.clone();
    new["data"]["a"] = json!("eQ==");
    assert_eq!(
        validate_update(secrets, &old, &new)
            .iter()
            .map(Cause::to_string)
            .collect::<Vec<_>>(),
        vec!["data: Forbidden: field is immutable when `immutable` is set"]
    );

    let leases = find("coordination.k8s.io", "v1", "leases").expect("leases");
    let lease = json!({"metadata": {"name": "node-1", "namespace": "kube-node-lease"}, "spec": {"leaseDurationSeconds": 0}});
    assert_eq!(
        causes(leases, &lease),
        vec!["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    );
}

#[test]
fn invalid_message_format() {
    let pods = resource("", "pods");
    let found = validate_create(pods, &pod(json!({"containers": [{"name": "app"}]})));
    assert_eq!(
        invalid_message(pods, "web", &found),
        "Pod \"web\" is invalid: spec.containers[0].image: Required value"
    );
    let deployments = find("apps", "v1", "deployments").expect("deployments");
    let two = vec![Cause::required("a", ""), Cause::required("b", "")];
    assert_eq!(
        invalid_message(deployments, "web", &two),
        "Deployment.apps \"web\" is invalid: [a: Required value, b: Required value]"
    );
}

#[test]
fn replication_controllers_and_pod_templates() {
    let rcs = resource("", "replicationcontrollers");
    let rc = |selector: Value, labels: Value, replicas: i64| {
        json!({"metadata": {"name": "rc", "namespace": "default"}, "spec": {
            "replicas": replicas, "selector": selector,
            "template": {"metadata": {"labels": labels},
                "spec": {"restartPolicy": "Always", "containers": [{"name": "web", "image": "nginx"}]}}
        }})
    };
    assert!(causes(rcs, &rc(json!({"app": "web"}), json!({"app": "web"}), 2)).is_empty());
    assert_eq!(
        causes(rcs, &rc(json!({"app": "web"}), json!({"app": "db"}), -1)),
        vec![
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"db\"}: `selector` does not match template `labels`",
        ]
    );
    let mut never = rc(json!({}), json!({"app": "web"}), 1);
    never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    never["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    assert_eq!(
        causes(rcs, &never),
        vec![
            "spec.selector: Required value",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in ReplicationController is not Supported",
        ]
    );
    let no_template = json!({"metadata": {"name": "rc", "namespace": "default"}, "spec": {"selector": {"a": "b"}}});
    assert_eq!(
        causes(rcs, &no_template),
        vec!["spec.template: Required value"]
    );

    let templates = resource("", "podtemplates");
    let template = json!({"metadata": {"name": "t", "namespace": "default"},
        "template": {"metadata": {"labels": {"bad key!": "x"}}, "spec": {"containers": [{"name": "c"}]}}});
    let got = causes(templates, &template);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("template.metadata.labels: Invalid value: \"bad key!\""));
    assert_eq!(got[1], "template.spec.containers[0].image: Required value");
}

#[test]
fn pod_disruption_budgets() {
    let pdbs = resource("policy", "poddisruptionbudgets");
    let pdb =
        |spec: Value| json!({"metadata": {"name": "b", "namespace": "default"}, "spec": spec});
    assert!(causes(
        pdbs,
        &pdb(json!({"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}))
    )
    .is_empty());
    assert!(causes(pdbs, &pdb(json!({"maxUnavailable": "50%", "selector": {}}))).is_empty());
    let both = causes(
        pdbs,
        &pdb(json!({"minAvailable": -1, "maxUnavailable": "101%"})),
    );
    assert_eq!(both.len(), 3, "{both:?}");
    assert!(both[0].starts_with(
        "spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0x"
    ));
    assert!(both[0].ends_with("}: minAvailable and maxUnavailable cannot be both set"));
    assert_eq!(
        both[1],
        "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"
    );
    assert_eq!(
        both[2],
        "spec.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"101%\"}: must not be greater than 100%"
    );
    assert_eq!(
        causes(pdbs, &pdb(json!({"minAvailable": "half"}))),
        vec!["spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"half\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%', or '93%', regex used for validation is '[0-9]+%')"]
    );
    assert_eq!(
        causes(pdbs, &pdb(json!({"unhealthyPodEvictionPolicy": "Sometimes",
            "selector": {"matchExpressions": [{"key": "app", "operator": "In"}, {"key": "x", "operator": "Near", "values": ["a"]}]}}))),
        vec![
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "spec.selector.matchExpressions[1].operator: Invalid value: \"Near\": not a valid selector operator",
            "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
        ]
    );
}

fn daemon_set(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
           "metadata": {"name": "agent", "namespace": "default"}, "spec": spec})
}

#[test]
fn daemon_sets() {
    let daemon_sets = resource("apps", "daemonsets");
    let template = json!({"metadata": {"labels": {"app": "agent"}},
                          "spec": {"containers": [{"name": "a", "image": "agent"}]}});
    let valid = json!({"selector": {"matchLabels": {"app": "agent"}}, "template": template,
                       "updateStrategy": {"type": "RollingUpdate",
                                          "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}});
    assert_eq!(
        causes(daemon_sets, &daemon_set(valid.clone())),
        Vec::<String>::new()
    );
    let mut no_selector = valid.clone();
    no_selector["selector"] = Value::Null;
    no_selector["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    assert_eq!(
        causes(daemon_sets, &daemon_set(no_selector)),
        [
            "spec.selector: Required value",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"agent\"}: `selector` does not match template `labels`",
            "spec.template.spec.activeDeadlineSeconds: Invalid value: 5: activeDeadlineSeconds in DaemonSet is not Supported",
        ]
    );
    let mut both = valid.clone();
    both["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": "10%", "maxSurge": 1});
    assert_eq!(
        causes(daemon_sets, &daemon_set(both)),
        ["spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: \"1\": may not be set when maxUnavailable is non-zero"]
    );
    let mut neither = valid.clone();
    neither["updateStrategy"]["rollingUpdate"] = json!({"maxUnavailable": 0, "maxSurge": "0%"});
    assert_eq!(
        causes(daemon_sets, &daemon_set(neither)),
        ["spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"]
    );
    let mut unknown = valid.clone();
    unknown["updateStrategy"] = json!({"type": "Sometimes"});
    assert_eq!(
        causes(daemon_sets, &daemon_set(unknown)),
        ["spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\""]
    );
}

fn cron_job(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

#[test]
fn cron_jobs() {
    let cron_jobs = resource("batch", "cronjobs");
    let valid = json!({"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow",
        "timeZone": "Europe/Paris",
        "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}}});
    assert_eq!(
        causes(cron_jobs, &cron_job("tick", valid.clone())),
        Vec::<String>::new()
    );
    let mut bad = valid.clone();
    bad["schedule"] = json!("61 * * * *");
    bad["timeZone"] = json!("Mars/Olympus");
    bad["concurrencyPolicy"] = json!("Sometimes");
    bad["startingDeadlineSeconds"] = json!(-1);
    bad["failedJobsHistoryLimit"] = json!(-2);
    bad["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    assert_eq!(
        causes(cron_jobs, &cron_job(&"x".repeat(53), bad)),
        [
            "metadata.name: Invalid value: \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": must be no more than 52 characters",
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            "spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
            "spec.failedJobsHistoryLimit: Invalid value: -2: must be greater than or equal to 0",
        ]
    );
    let mut tz = valid.clone();
    tz["schedule"] = json!("TZ=UTC 0 * * * *");
    tz["timeZone"] = json!("Local");
    assert_eq!(
        causes(cron_jobs, &cron_job("tick", tz)),
        [
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ]
    );
    let mut missing = valid;
    missing["schedule"] = json!("");
    missing["concurrencyPolicy"] = json!("");
    assert_eq!(
        causes(cron_jobs, &cron_job("tick", missing)),
        [
            "spec.schedule: Required value",
            "spec.concurrencyPolicy: Required value"
        ]
    );
}

fn stateful_set(spec: Value) -> Value {
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2, "serviceName": "web", "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": {"app": "web"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"restartPolicy": "Always",
                                  "containers": [{"name": "nginx", "image": "nginx",
                                                  "volumeMounts": [{"name": "www", "mountPath": "/data"}]}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "www"},
                                      "spec": {"accessModes": ["ReadWriteOnce"]}}]
        }
    });
    if let (Some(base), Value::Object(changes)) = (object["spec"].as_object_mut(), spec) {
        for (key, value) in changes {
            base.insert(key, value);
        }
    }
    object
}

#[test]
fn stateful_sets() {
    let sts = resource("apps", "statefulsets");
    // Mounts of claim templates are fine: the pod template is not validated as a pod.
    assert_eq!(causes(sts, &stateful_set(json!({}))), Vec::<String>::new());
    let bad = stateful_set(json!({
        "replicas": -1,
        "podManagementPolicy": "Sometimes",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": -2, "maxUnavailable": 0}},
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep", "whenScaled": "Retain"},
        "selector": {"matchLabels": {"app": "other"}},
    }));
    assert_eq!(
        causes(sts, &bad),
        [
            "spec.podManagementPolicy: Invalid value: \"Sometimes\": must be 'OrderedReady' or 'Parallel'",
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -2: must be greater than or equal to 0",
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: cannot be 0",
            "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\": supported values: \"Retain\", \"Delete\"",
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`",
        ]
    );
    let on_delete = stateful_set(json!({
        "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}},
        "selector": {},
    }));
    assert_eq!(
        causes(sts, &on_delete),
        [
            "spec.updateStrategy.rollingUpdate: Invalid value: apps.RollingUpdateStatefulSetStrategy{Partition:1, MaxUnavailable:(*intstr.IntOrString)(nil)}: only allowed for updateStrategy 'RollingUpdate'",
            "spec.selector: Invalid value: {}: empty selector is invalid for statefulset",
        ]
    );
    let mut dotted = stateful_set(json!({"updateStrategy": {"type": "Sometimes"}}));
    dotted["metadata"]["name"] = json!("web.v2");
    dotted["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    dotted["spec"]["template"]["spec"]["activeDeadlineSeconds"] = json!(5);
    let found = causes(sts, &dotted);
    assert!(
        found[0]
            .starts_with("metadata.name: Invalid value: \"web.v2\": a lowercase RFC 1123 label"),
        "{found:?}"
    );
    assert_eq!(
        &found[1..],
        [
            "spec.updateStrategy: Invalid value: apps.StatefulSetUpdateStrategy{Type:\"Sometimes\", RollingUpdate:(*apps.RollingUpdateStatefulSetStrategy)(nil)}: must be 'RollingUpdate' or 'OnDelete'",
            "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
            "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in StatefulSet is not Supported",
        ]
    );
    // Only some fields change after creation.
    let old = stateful_set(json!({}));
    let scaled = stateful_set(json!({"replicas": 5, "updateStrategy": {"type": "OnDelete"}}));
    assert!(validate_update(sts, &old, &scaled).is_empty());
    let renamed = stateful_set(json!({"serviceName": "other"}));
    let found: Vec<String> = validate_update(sts, &old, &renamed)
        .iter()
        .map(Cause::to_string)
        .collect();
    assert_eq!(found, ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]);
}

#[test]
fn controller_revisions() {
    let revisions = resource("apps", "controllerrevisions");
    let revision = |data: Value, number: i64| {
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
               "metadata": {"name": "web-1", "namespace": "default"}, "data": data, "revision": number})
    };
    assert!(causes(revisions, &revision(json!({"spec": {}}), 1)).is_empty());
    assert_eq!(
        causes(revisions, &revision(Value::Null, -1)),
        [
            "data: Required value: data is mandatory",
            "revision: Invalid value: -1: must be greater than or equal to 0",
        ]
    );
    let changed = validate_update(
        revisions,
        &revision(json!({"a": 1}), 1),
        &revision(json!({"a": 2}), 2),
    );
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].field, "data");
    assert!(validate_update(
        revisions,
        &revision(json!({"a": 1}), 1),
        &revision(json!({"a": 1}), 3)
    )
    .is_empty());
}
