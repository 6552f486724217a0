use super::*;
use api::resources::{find, pods};

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2025-06-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn pod(status: Value) -> Value {
    json!({
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "7",
                     "creationTimestamp": "2025-06-01T11:55:00Z", "labels": {"run": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        "status": status,
    })
}

fn waiting(reason: &str) -> Value {
    json!({"name": "app", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": reason}}})
}

fn running(ready: bool) -> Value {
    json!({"name": "app", "ready": ready, "restartCount": 0,
           "state": {"running": {"startedAt": "2025-06-01T11:56:00Z"}}})
}

fn terminated(reason: &str, exit_code: i64) -> Value {
    json!({"name": "app", "ready": false, "restartCount": 0,
           "state": {"terminated": {"reason": reason, "exitCode": exit_code}}})
}

#[test]
fn pod_status_reasons() {
    let cases = [
        (json!({"phase": "Pending"}), "Pending"),
        (
            json!({"phase": "Pending", "containerStatuses": [waiting("ContainerCreating")]}),
            "ContainerCreating",
        ),
        (
            json!({"phase": "Running", "containerStatuses": [running(true)]}),
            "Running",
        ),
        (
            json!({"phase": "Succeeded", "containerStatuses": [terminated("Completed", 0)]}),
            "Completed",
        ),
        (
            json!({"phase": "Failed", "containerStatuses": [terminated("Error", 1)]}),
            "Error",
        ),
        (
            json!({"phase": "Failed", "containerStatuses": [terminated("", 137)]}),
            "ExitCode:137",
        ),
        (
            json!({"phase": "Running", "containerStatuses": [waiting("CrashLoopBackOff")]}),
            "CrashLoopBackOff",
        ),
        (
            json!({"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff")]}),
            "ImagePullBackOff",
        ),
        (json!({"phase": "Failed", "reason": "Evicted"}), "Evicted"),
    ];
    for (status, want) in cases {
        assert_eq!(pod_status_reason(&pod(status.clone())), want, "{status}");
    }
}

#[test]
fn init_container_reasons() {
    let mut p = pod(json!({
        "phase": "Pending",
        "initContainerStatuses": [
            {"name": "init-a", "ready": false, "restartCount": 0, "state": {"running": {}}},
            {"name": "init-b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}},
        ],
        "containerStatuses": [waiting("PodInitializing")],
    }));
    p["spec"]["initContainers"] =
        json!([{"name": "init-a", "image": "busybox"}, {"name": "init-b", "image": "busybox"}]);
    assert_eq!(pod_status_reason(&p), "Init:0/2");

    p["status"]["initContainerStatuses"][0]["state"] =
        json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
    assert_eq!(pod_status_reason(&p), "Init:1/2");

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"waiting": {"reason": "CrashLoopBackOff"}});
    assert_eq!(pod_status_reason(&p), "Init:CrashLoopBackOff");

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"terminated": {"exitCode": 2, "reason": "Error"}});
    assert_eq!(pod_status_reason(&p), "Init:Error");

    p["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 3}});
    assert_eq!(pod_status_reason(&p), "Init:ExitCode:3");

    p["status"]["initContainerStatuses"][1]["state"] =
        json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
    assert_eq!(pod_status_reason(&p), "PodInitializing");
}

#[test]
fn completed_with_a_running_container_and_deletion() {
    let mut p = pod(json!({
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "False"}],
        "containerStatuses": [terminated("Completed", 0), running(true)],
    }));
    assert_eq!(pod_status_reason(&p), "NotReady");
    p["status"]["conditions"][0]["status"] = json!("True");
    assert_eq!(pod_status_reason(&p), "Running");

    p["metadata"]["deletionTimestamp"] = json!("2025-06-01T11:59:00Z");
    assert_eq!(pod_status_reason(&p), "Terminating");
    p["status"]["reason"] = json!("NodeLost");
    assert_eq!(pod_status_reason(&p), "Unknown");

    let mut done =
        pod(json!({"phase": "Succeeded", "containerStatuses": [terminated("Completed", 0)]}));
    done["metadata"]["deletionTimestamp"] = json!("2025-06-01T11:59:00Z");
    assert_eq!(pod_status_reason(&done), "Completed");
}

#[test]
fn restarts_show_when_the_last_one_was() {
    let mut status = running(true);
    status["restartCount"] = json!(3);
    status["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error",
                                                "finishedAt": "2025-06-01T11:55:00Z"}});
    let p = pod(json!({"phase": "Running", "containerStatuses": [status]}));
    let t = table(pods(), &[p], IncludeObject::Metadata, now(), "9", None);
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[1], "1/1");
    assert_eq!(cells[2], "Running");
    assert_eq!(cells[3], "3 (5m ago)");
    assert_eq!(cells[4], "5m");

    let fresh = pod(json!({"phase": "Running", "containerStatuses": [running(false)]}));
    let t = table(pods(), &[fresh], IncludeObject::Metadata, now(), "9", None);
    assert_eq!(t["rows"][0]["cells"][1], "0/1");
    assert_eq!(t["rows"][0]["cells"][3], "0");
}

#[test]
fn human_durations() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (119, "119s"),
        (123, "2m3s"),
        (300, "5m"),
        (600, "10m"),
        (179 * 60 + 59, "179m"),
        (3 * 3600 + 4 * 60 + 5, "3h4m"),
        (5 * 3600, "5h"),
        (47 * 3600, "47h"),
        (2 * 86400 + 3 * 3600, "2d3h"),
        (3 * 86400, "3d"),
        (100 * 86400, "100d"),
        (729 * 86400, "729d"),
        ((3 * 365 + 45) * 86400, "3y45d"),
        (4 * 365 * 86400, "4y"),
        (10 * 365 * 86400 + 7 * 86400, "10y"),
    ];
    for (seconds, want) in cases {
        assert_eq!(
            human_duration(Duration::seconds(seconds)),
            want,
            "{seconds}s"
        );
    }
    assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
}

#[test]
fn pod_table_shape() {
    let mut p = pod(
        json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "containerStatuses": [running(true)]}),
    );
    p["spec"]["nodeName"] = json!("node-1");
    let t = table(
        pods(),
        std::slice::from_ref(&p),
        IncludeObject::Metadata,
        now(),
        "42",
        Some("next"),
    );
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(
        t["metadata"],
        json!({"resourceVersion": "42", "continue": "next"})
    );
    let columns = t["columnDefinitions"].as_array().unwrap();
    let names: Vec<&str> = columns
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Status",
            "Restarts",
            "Age",
            "IP",
            "Node",
            "Nominated Node",
            "Readiness Gates"
        ]
    );
    let priorities: Vec<i64> = columns
        .iter()
        .map(|c| c["priority"].as_i64().unwrap())
        .collect();
    assert_eq!(priorities, [0, 0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(columns[0]["format"], "name");
    assert_eq!(columns[0]["type"], "string");

    let row = &t["rows"][0];
    assert_eq!(
        row["cells"],
        json!(["web", "1/1", "Running", "0", "5m", "10.0.0.5", "node-1", "<none>", "<none>"])
    );
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(row["object"]["metadata"], p["metadata"]);
    assert!(row.get("conditions").is_none());

    let full = table(
        pods(),
        std::slice::from_ref(&p),
        IncludeObject::parse("Object"),
        now(),
        "42",
        None,
    );
    assert_eq!(full["rows"][0]["object"], p);
    assert!(full["metadata"].get("continue").is_none());
    let bare = table(
        pods(),
        &[p],
        IncludeObject::parse("None"),
        now(),
        "42",
        None,
    );
    assert!(bare["rows"][0]["object"].is_null());
    assert_eq!(IncludeObject::parse(""), IncludeObject::Metadata);
}

#[test]
fn node_status_and_roles() {
    let node = json!({
        "kind": "Node",
        "metadata": {"name": "n1", "creationTimestamp": "2025-05-30T12:00:00Z",
                     "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker"}},
        "spec": {"unschedulable": true},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}, {"type": "Hostname", "address": "n1"}],
            "nodeInfo": {"kubeletVersion": "v1.37.0-kemu", "osImage": "kemu", "kernelVersion": "6.1",
                         "containerRuntimeVersion": "kemu://0.1"},
        },
    });
    let nodes = find("", "v1", "nodes").unwrap();
    let t = table(
        nodes,
        std::slice::from_ref(&node),
        IncludeObject::Metadata,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "n1",
            "Ready,SchedulingDisabled",
            "control-plane,worker",
            "2d",
            "v1.37.0-kemu",
            "192.168.1.10",
            "<none>",
            "kemu",
            "6.1",
            "kemu://0.1"
        ])
    );
    let mut not_ready = node.clone();
    not_ready["spec"] = json!({});
    not_ready["metadata"]["labels"] = json!({});
    not_ready["status"]["conditions"][1]["status"] = json!("Unknown");
    let t = table(
        nodes,
        &[not_ready.clone()],
        IncludeObject::Metadata,
        now(),
        "1",
        None,
    );
    assert_eq!(t["rows"][0]["cells"][1], "NotReady");
    assert_eq!(t["rows"][0]["cells"][2], "<none>");
    not_ready["status"]["conditions"] = json!([]);
    let t = table(
        nodes,
        &[not_ready],
        IncludeObject::Metadata,
        now(),
        "1",
        None,
    );
    assert_eq!(t["rows"][0]["cells"][1], "Unknown");
}

#[test]
fn events_in_both_api_groups() {
    let core = json!({
        "kind": "Event",
        "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "nginx", "fieldPath": "spec.containers{app}"},
        "reason": "Pulled", "type": "Normal", "message": "Pulled image \"nginx\"\n",
        "firstTimestamp": "2025-06-01T11:50:00Z", "lastTimestamp": "2025-06-01T11:58:00Z", "count": 2,
        "source": {"component": "kubelet", "host": "n1"},
    });
    let t = table(
        find("", "v1", "events").unwrap(),
        &[core],
        IncludeObject::Metadata,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "2m",
            "Normal",
            "Pulled",
            "pod/nginx",
            "spec.containers{app}",
            "kubelet, n1",
            "Pulled image \"nginx\"",
            "10m",
            2,
            "web.1"
        ])
    );
    let new = json!({
        "kind": "Event",
        "metadata": {"name": "web.2", "namespace": "default"},
        "regarding": {"kind": "Pod", "name": "nginx"},
        "reason": "Scheduled", "type": "Normal", "note": "Successfully assigned default/nginx to n1",
        "eventTime": "2025-06-01T11:59:30.000000Z", "reportingController": "default-scheduler",
    });
    let t = table(
        find("events.k8s.io", "v1", "events").unwrap(),
        &[new],
        IncludeObject::Metadata,
        now(),
        "1",
        None,
    );
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[0], "30s");
    assert_eq!(cells[3], "pod/nginx");
    assert_eq!(cells[5], "default-scheduler");
    assert_eq!(cells[6], "Successfully assigned default/nginx to n1");
    assert_eq!(cells[8], 1);
}

#[test]
fn workload_and_service_rows() {
    let deploy = json!({
        "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"},
                 "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]},
                 "template": {"spec": {"containers": [{"name": "app", "image": "nginx"}, {"name": "log", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
    });
    let t = table(
        find("apps", "v1", "deployments").unwrap(),
        &[deploy],
        IncludeObject::None,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "web",
            "2/3",
            3,
            2,
            "60m",
            "app,log",
            "nginx,busybox",
            "app=web,tier in (a,b)"
        ])
    );

    let job = json!({
        "metadata": {"name": "pi", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
        "status": {"succeeded": 1, "startTime": "2025-06-01T11:00:00Z", "completionTime": "2025-06-01T11:00:42Z",
                   "conditions": [{"type": "Complete", "status": "True"}]},
    });
    let t = table(
        find("batch", "v1", "jobs").unwrap(),
        &[job],
        IncludeObject::None,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["pi", "Complete", "1/1", "42s", "60m", "pi", "perl", "<none>"])
    );

    let svc = json!({
        "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"], "selector": {"app": "web"},
                 "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]},
    });
    let t = table(
        find("", "v1", "services").unwrap(),
        &[svc],
        IncludeObject::None,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "web",
            "NodePort",
            "10.96.0.10",
            "<none>",
            "80:30080/TCP,53/UDP",
            "60m",
            "app=web"
        ])
    );

    let ep = json!({
        "metadata": {"name": "web"},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}, {"ip": "10.0.0.4"}],
                     "ports": [{"port": 8080}]}],
    });
    let t = table(
        find("", "v1", "endpoints").unwrap(),
        &[ep],
        IncludeObject::None,
        now(),
        "1",
        None,
    );
    assert_eq!(
        t["rows"][0]["cells"][1],
        "10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080 + 1 more..."
    );
}

#[test]
fn replication_controllers_pod_templates_and_budgets() {
    let cells = |group: &str, plural: &str, object: Value| {
        let t = table(
            find(group, "v1", plural).unwrap(),
            &[object],
            IncludeObject::None,
            now(),
            "1",
            None,
        );
        let names: Vec<Value> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].clone())
            .collect();
        (names, t["rows"][0]["cells"].clone())
    };
    let rc = json!({
        "metadata": {"name": "legacy", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"replicas": 3, "selector": {"app": "legacy", "tier": "web"},
                 "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2},
    });
    let (names, row) = cells("", "replicationcontrollers", rc);
    assert_eq!(
        names,
        json!([
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ])
        .as_array()
        .unwrap()
        .clone()
    );
    assert_eq!(
        row,
        json!([
            "legacy",
            3,
            3,
            2,
            "60m",
            "web",
            "nginx",
            "app=legacy,tier=web"
        ])
    );
    let template = json!({
        "metadata": {"name": "tpl"},
        "template": {"metadata": {"labels": {"tier": "front"}},
                     "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}},
    });
    let (names, row) = cells("", "podtemplates", template);
    assert_eq!(
        names,
        vec![
            json!("Name"),
            json!("Containers"),
            json!("Images"),
            json!("Pod Labels")
        ]
    );
    assert_eq!(row, json!(["tpl", "a,b", "x,y", "tier=front"]));
    let pdb = json!({
        "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:59:00Z"},
        "spec": {"maxUnavailable": "25%"},
        "status": {"disruptionsAllowed": 1},
    });
    let (names, row) = cells("policy", "poddisruptionbudgets", pdb);
    assert_eq!(
        names,
        vec![
            json!("Name"),
            json!("Min Available"),
            json!("Max Unavailable"),
            json!("Allowed Disruptions"),
            json!("Age")
        ]
    );
    assert_eq!(row, json!(["web", "N/A", "25%", 1, "60s"]));
}

/// The Table of one object of `plural`.
fn one_row_table(group: &str, plural: &str, object: Value) -> Value {
    table(
        find(group, "v1", plural).unwrap(),
        &[object],
        IncludeObject::None,
        now(),
        "1",
        None,
    )
}

fn column_names(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[test]
fn daemon_set_rows() {
    let ds = json!({
        "metadata": {"name": "agent", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"spec": {"nodeSelector": {"disk": "ssd"},
                                       "containers": [{"name": "agent", "image": "agent:1"}]}}},
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                   "updatedNumberScheduled": 1, "numberAvailable": 2, "numberMisscheduled": 0},
    });
    let t = one_row_table("apps", "daemonsets", ds);
    let names = column_names(&t);
    assert_eq!(
        names,
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "agent",
            3,
            3,
            2,
            1,
            2,
            "disk=ssd",
            "60m",
            "agent",
            "agent:1",
            "app=agent"
        ])
    );
}

#[test]
fn cron_job_rows() {
    let cj = json!({
        "metadata": {"name": "tick", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"schedule": "*/1 * * * *", "suspend": false,
                 "jobTemplate": {"spec": {"template": {"spec": {
                     "containers": [{"name": "tick", "image": "busybox"}]}}}}},
        "status": {"active": [{"name": "tick-1"}], "lastScheduleTime": "2025-06-01T11:59:00Z"},
    });
    let t = one_row_table("batch", "cronjobs", cj);
    let names = column_names(&t);
    assert_eq!(
        names,
        [
            "Name",
            "Schedule",
            "Timezone",
            "Suspend",
            "Active",
            "Last Schedule",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    assert_eq!(t["columnDefinitions"][3]["type"], "boolean");
    assert_eq!(
        t["rows"][0]["cells"],
        json!([
            "tick",
            "*/1 * * * *",
            "<none>",
            "False",
            1,
            "60s",
            "60m",
            "tick",
            "busybox",
            "<none>"
        ])
    );
}

#[test]
fn stateful_sets_and_controller_revisions() {
    let sts = json!({
        "metadata": {"name": "web", "creationTimestamp": "2025-06-01T11:00:00Z"},
        "spec": {"replicas": 3,
                 "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}},
        "status": {"replicas": 3, "readyReplicas": 2},
    });
    let t = one_row_table("apps", "statefulsets", sts);
    assert_eq!(
        column_names(&t),
        ["Name", "Ready", "Age", "Containers", "Images"]
    );
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["web", "2/3", "60m", "nginx", "nginx:1.27"])
    );
    let revision = json!({
        "metadata": {"name": "web-5d8b9cf6b4", "creationTimestamp": "2025-06-01T11:59:00Z",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                          "name": "web", "uid": "u", "controller": true}]},
        "data": {"spec": {}},
        "revision": 2,
    });
    let t = one_row_table("apps", "controllerrevisions", revision);
    assert_eq!(column_names(&t), ["Name", "Controller", "Revision", "Age"]);
    assert_eq!(
        t["rows"][0]["cells"],
        json!(["web-5d8b9cf6b4", "statefulset.apps/web", 2, "60s"])
    );
    let orphan = json!({"metadata": {"name": "lone", "creationTimestamp": "2025-06-01T11:59:00Z"},
                        "data": {}, "revision": 1});
    let t = one_row_table("apps", "controllerrevisions", orphan);
    assert_eq!(t["rows"][0]["cells"][1], "<none>");
}
