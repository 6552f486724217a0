//! CEL `x-kubernetes-validations` end to end with the real kubectl: a CRD whose schema carries
//! rules is established; objects breaking a rule are refused with kube-apiserver's message
//! (`The Widget "w1" is invalid: spec: Invalid value: "object": ...`), transition rules guard
//! updates and not creates, a messageExpression and a reason shape the error, and a CRD whose
//! rule does not compile, names an undefined field or costs too much is refused.

mod common;

use common::Cluster;

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.rules.example.com
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-validations:
        - rule: "self.metadata.name.startsWith('w')"
          message: "widget names start with w"
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.replicas <= self.maxReplicas"
              message: "replicas must be <= maxReplicas"
            - rule: "!has(self.tier) || self.tier in ['gold', 'silver']"
              messageExpression: "'tier ' + self.tier + ' is not offered'"
              fieldPath: .tier
            properties:
              replicas: {type: integer}
              maxReplicas: {type: integer}
              tier: {type: string}
              owner:
                type: string
                x-kubernetes-validations:
                - rule: "self == oldSelf"
                  message: "owner is immutable"
              tags:
                type: array
                maxItems: 10
                items: {type: string, maxLength: 20}
                x-kubernetes-validations:
                - rule: "self.all(t, t == t.lowerAscii())"
                  reason: FieldValueForbidden
                  message: "tags must be lower case"
          status:
            type: object
            properties:
              phase:
                type: string
                x-kubernetes-validations:
                - rule: "self != 'Broken'"
"#;

fn widget(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: rules.example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rules_with_kubectl() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/widgets.rules.example.com",
        "--timeout=30s",
    ]);

    // A rule on spec, with its message.
    let out = c.apply_refused(&widget(
        "w1",
        "  replicas: 5\n  maxReplicas: 3\n  owner: ann\n",
    ));
    assert!(
        out.contains(
            "The Widget \"w1\" is invalid: spec: Invalid value: \"object\": replicas must be <= maxReplicas"
        ),
        "{out}"
    );
    // A root rule has no field path; a messageExpression at a fieldPath; a reason.
    let out = c.apply_refused(&widget(
        "x1",
        "  replicas: 1\n  maxReplicas: 3\n  tier: bronze\n  tags: [Red]\n",
    ));
    for expected in [
        "<nil>: Invalid value: \"object\": widget names start with w",
        "spec.tier: Invalid value: \"object\": tier bronze is not offered",
        "spec.tags: Forbidden: tags must be lower case",
    ] {
        assert!(out.contains(expected), "{expected:?} not in {out}");
    }

    // A valid object is created; the transition rule does not run on create.
    c.ok_stdin(
        &["apply", "-f", "-"],
        &widget(
            "w1",
            "  replicas: 2\n  maxReplicas: 3\n  owner: ann\n  tier: gold\n",
        ),
    );
    // It runs on update.
    let out = c.apply_refused(&widget(
        "w1",
        "  replicas: 2\n  maxReplicas: 3\n  owner: bob\n  tier: gold\n",
    ));
    assert!(
        out.contains("spec.owner: Invalid value: \"string\": owner is immutable"),
        "{out}"
    );
    let out = c.fails(&[
        "patch",
        "widget",
        "w1",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ]);
    assert!(out.contains("replicas must be <= maxReplicas"), "{out}");
    // Rules under status run on status writes.
    let out = c.fails(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Broken"}}"#,
    ]);
    assert!(
        out.contains("status.phase: Invalid value: \"string\": failed rule: self != 'Broken'"),
        "{out}"
    );
    c.ok(&[
        "patch",
        "widget",
        "w1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Ready"}}"#,
    ]);

    // CRDs whose rules cannot be admitted.
    let bad_syntax = CRD
        .replace("widgets.rules", "gizmos.rules")
        .replace(
            "plural: widgets, singular: widget, kind: Widget",
            "plural: gizmos, singular: gizmo, kind: Gizmo",
        )
        .replace("self.replicas <= self.maxReplicas", "self.replicas <=");
    let out = c.apply_refused(&bad_syntax);
    assert!(
        out.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas <=\""),
        "{out}"
    );
    assert!(
        out.contains("compilation failed: ERROR: <input>:1:"),
        "{out}"
    );
    let undefined = CRD
        .replace("widgets.rules", "gizmos.rules")
        .replace(
            "plural: widgets, singular: widget, kind: Widget",
            "plural: gizmos, singular: gizmo, kind: Gizmo",
        )
        .replace(
            "self.replicas <= self.maxReplicas",
            "self.replicas <= self.maximum",
        );
    let out = c.apply_refused(&undefined);
    assert!(out.contains("undefined field 'maximum'"), "{out}");
    let costly = CRD
        .replace("widgets.rules", "gizmos.rules")
        .replace(
            "plural: widgets, singular: widget, kind: Widget",
            "plural: gizmos, singular: gizmo, kind: Gizmo",
        )
        .replace("                maxItems: 10\n", "")
        .replace(
            "self.all(t, t == t.lowerAscii())",
            "self.all(a, self.all(b, self.all(d, a + b != d)))",
        );
    let out = c.apply_refused(&costly);
    assert!(
        out.contains("estimated rule cost exceeds budget by factor of more than 100x"),
        "{out}"
    );
    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}
