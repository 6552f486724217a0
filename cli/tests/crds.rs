//! CustomResourceDefinitions end to end with the real kubectl: a CRD is established, its objects
//! are applied, listed with their printer columns, validated against the schema (422 with the
//! field path), defaulted and pruned, scaled through the scale subresource, read in a second
//! served version, and removed with the CRD.

use crate::common;

use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{wait_until, Cluster};
use serde_json::Value;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
    shortNames: [wd]
    categories: [gadgets]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.selector
    additionalPrinterColumns:
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Color
      type: string
      jsonPath: .spec.color
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              replicas:
                type: integer
                minimum: 0
              color:
                type: string
                enum: [red, green, blue]
              size:
                type: string
                default: M
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {x-kubernetes-int-or-string: true}
              extra:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str = "apiVersion: example.com/v1
kind: Widget
metadata:
  name: w1
  labels:
    app: shop
spec:
  replicas: 2
  color: red
  ports:
  - name: http
    port: 8080
  - name: admin
    port: metrics
  extra:
    anything: [1, 2]
";

fn widget(c: &Cluster, name: &str) -> Value {
    let out = c.ok(&["get", "widget", name, "-o", "json", "--show-managed-fields"]);
    serde_json::from_str(&out).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_with_kubectl() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ]);
    let crd: Value =
        serde_json::from_str(&c.ok(&["get", "crd", "widgets.example.com", "-o", "json"]))?;
    let conditions = crd["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for kind in ["NamesAccepted", "Established"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == kind && c["status"] == "True"),
            "{kind} missing: {crd}"
        );
    }
    assert_eq!(crd["status"]["storedVersions"], serde_json::json!(["v1"]));
    assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
    // kubectl explain reads the version's schema from /openapi/v3.
    let explained = c.ok(&["explain", "widgets.spec.color"]);
    assert!(explained.contains("Widget"), "{explained}");
    assert!(
        explained.contains("color") && explained.contains("<string>"),
        "{explained}"
    );
    // Its metadata is the ObjectMeta of every kind.
    let explained = c.ok(&["explain", "widgets.metadata.labels"]);
    assert!(explained.contains("<map[string]string>"), "{explained}");
    let explained = c.ok(&["explain", "widgets.spec"]);
    assert!(
        explained.contains("replicas") && explained.contains("<integer>"),
        "{explained}"
    );

    c.ok_stdin(&["apply", "-f", "-"], WIDGET);
    let w = widget(&c, "w1");
    // Defaulted, and kept where the schema preserves unknown fields.
    assert_eq!(w["spec"]["size"], "M", "{w}");
    assert_eq!(
        w["spec"]["extra"]["anything"],
        serde_json::json!([1, 2]),
        "{w}"
    );
    assert_eq!(w["metadata"]["generation"], 1, "{w}");
    assert!(
        w["metadata"]["managedFields"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{w}"
    );

    // Printer columns, short names and categories.
    let table = c.ok(&["get", "wd"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "REPLICAS", "COLOR", "AGE"], "{table}");
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("w1") && l.contains(" 2 ") && l.contains("red")),
        "{table}"
    );
    assert!(c.ok(&["get", "gadgets"]).contains("w1"));
    assert!(c
        .ok(&["api-resources", "--api-group=example.com"])
        .contains("wd"));

    // Selectors.
    assert!(c
        .ok(&["get", "widgets", "-l", "app=shop", "-o", "name"])
        .contains("widget.example.com/w1"));
    assert!(!c
        .ok(&["get", "widgets", "-l", "app=other", "-o", "name"])
        .contains("w1"));
    assert!(c
        .ok(&[
            "get",
            "widgets",
            "--field-selector",
            "metadata.name=w1",
            "-o",
            "name"
        ])
        .contains("w1"));

    // Schema violations are 422s naming the field.
    let bad = WIDGET.replace("replicas: 2", "replicas: two");
    let out = c.apply_refused(&bad);
    assert!(
        out.contains(r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#),
        "{out}"
    );
    let out = c.apply_refused(&WIDGET.replace("color: red", "color: pink"));
    assert!(
        out.contains(
            r#"spec.color: Unsupported value: "pink": supported values: "red", "green", "blue""#
        ),
        "{out}"
    );
    let out = c.apply_refused(&WIDGET.replace("replicas: 2", "replicas: -1"));
    assert!(
        out.contains("spec.replicas in body should be greater than or equal to 0"),
        "{out}"
    );
    let duplicate = WIDGET.replace("name: admin", "name: http");
    let out = c.apply_refused(&duplicate);
    assert!(out.contains("spec.ports[1]: Duplicate value"), "{out}");
    // Unknown fields: refused by kubectl's strict validation, pruned without it.
    let unknown = WIDGET.replace("color: red", "color: red\n  bogus: 1");
    let out = c.apply_refused(&unknown);
    assert!(out.contains(r#"unknown field "spec.bogus""#), "{out}");
    c.ok_stdin(&["apply", "--validate=false", "-f", "-"], &unknown);
    assert!(widget(&c, "w1")["spec"].get("bogus").is_none());
    // With warnings asked for, the pruned field comes back as a Warning header.
    let path = c.file("warned.yaml", &unknown.replace("color: red", "color: blue"));
    let out = c.kubectl(&["apply", "--validate=warn", "-f", &path]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"Warning: unknown field "spec.bogus""#),
        "{stderr}"
    );

    // Scale, status and patches.
    c.ok(&["scale", "widget/w1", "--replicas=5"]);
    assert_eq!(widget(&c, "w1")["spec"]["replicas"], 5);
    // Generation 1 at create, 2 for the blue colour, 3 for the scale.
    assert_eq!(widget(&c, "w1")["metadata"]["generation"], 3);
    c.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"replicas":5,"selector":"app=shop"}}"#,
    ]);
    let scale: Value = serde_json::from_str(&c.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
    ]))?;
    assert_eq!(scale["spec"]["replicas"], 5, "{scale}");
    assert_eq!(scale["status"]["replicas"], 5, "{scale}");
    assert_eq!(scale["status"]["selector"], "app=shop", "{scale}");
    c.ok(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"color":"blue"}}"#,
    ]);
    assert_eq!(widget(&c, "w1")["spec"]["color"], "blue");
    let out = c.kubectl(&[
        "patch",
        "widget",
        "w1",
        "-p",
        r#"{"spec":{"color":"green"}}"#,
    ]);
    assert!(
        !out.status.success(),
        "a strategic merge patch of a custom object must fail"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.ok(&[
        "apply",
        "--server-side",
        "--field-manager=tester",
        "-f",
        &c.file("w2.yaml", &WIDGET.replace("name: w1", "name: w2")),
    ]);
    assert_eq!(widget(&c, "w2")["spec"]["color"], "red");
    // Another manager's port joins the list (a map keyed by name in the schema) rather than
    // replacing it, and its managed fields name the element by its key.
    c.ok_stdin(
        &["apply", "--server-side", "--field-manager=other", "-f", "-"],
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  color: red\n  ports:\n  - name: extra\n    port: 9090\n",
    );
    let w2 = widget(&c, "w2");
    let names: Vec<&str> = w2["spec"]["ports"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["http", "admin", "extra"], "{w2}");
    let other = w2["metadata"]["managedFields"]
        .as_array()
        .and_then(|m| m.iter().find(|e| e["manager"] == "other"))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        other["fieldsV1"]["f:spec"]["f:ports"]
            .get("k:{\"name\":\"extra\"}")
            .is_some(),
        "{other}"
    );

    // The second served version shows the same objects in its apiVersion.
    let beta: Value =
        serde_json::from_str(&c.ok(&["get", "widgets.v1beta1.example.com", "w1", "-o", "json"]))?;
    assert_eq!(beta["apiVersion"], "example.com/v1beta1", "{beta}");
    assert_eq!(beta["spec"]["replicas"], 5, "{beta}");
    let raw = c.ok(&[
        "get",
        "--raw",
        "/apis/example.com/v1/namespaces/default/widgets",
    ]);
    assert!(raw.starts_with(r#"{"apiVersion":"example.com/v1","items":[{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"#), "{raw}");
    assert!(
        raw.contains(r#""kind":"WidgetList","metadata":{"continue":"","resourceVersion":""#),
        "{raw}"
    );

    // A watch sees the changes.
    let mut watcher = c.spawn(&[
        "get",
        "widgets",
        "-w",
        "-o",
        "json",
        "--output-watch-events",
    ]);
    let seen = Arc::new(Mutex::new(String::new()));
    let stdout = watcher.stdout.take().expect("piped");
    let sink = seen.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(mut seen) = sink.lock() {
                seen.push_str(&line);
            }
        }
    });
    let saw = |what: &'static str| {
        let seen = seen.clone();
        async move { seen.lock().map(|s| s.contains(what)).unwrap_or(false) }
    };
    let watched = async {
        wait_until(
            "the watch lists the widgets",
            Duration::from_secs(10),
            || saw("ADDED"),
        )
        .await?;
        c.ok(&["label", "widget", "w1", "tier=front"]);
        c.ok(&["delete", "widget", "w2"]);
        wait_until("the watch sees the label", Duration::from_secs(10), || {
            saw("MODIFIED")
        })
        .await?;
        wait_until(
            "the watch sees the deletion",
            Duration::from_secs(10),
            || saw("DELETED"),
        )
        .await
    }
    .await;
    let _ = watcher.kill();
    let _ = watcher.wait();
    watched?;

    // Invalid definitions are refused with Kubernetes' messages.
    let two_storage = CRD.replace("storage: false", "storage: true");
    let out = c.apply_refused(&two_storage);
    assert!(
        out.contains("must have exactly one version marked as storage version"),
        "{out}"
    );
    let untyped = CRD.replace(
        "              selector: {type: string}",
        "              selector: {}",
    );
    let out = c.apply_refused(&untyped);
    assert!(
        out.contains("properties[status].properties[selector].type: Required value: must not be empty for specified object fields"),
        "{out}"
    );
    let misnamed = CRD.replace("name: widgets.example.com", "name: gizmos.example.com");
    let out = c.apply_refused(&misnamed);
    assert!(out.contains(r#"metadata.name: Invalid value: "gizmos.example.com": must be spec.names.plural+"."+spec.group"#), "{out}");

    // Deleting the definition deletes its objects.
    c.ok(&["delete", "crd", "widgets.example.com"]);
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.example.com",
        "--timeout=30s",
    ]);
    let left = c.ok(&["get", "widgets", "-A", "-o", "name"]);
    assert!(
        left.trim().is_empty(),
        "objects outlived their definition: {left}"
    );

    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}
