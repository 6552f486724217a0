//! CEL `x-kubernetes-validations` end to end with the real kubectl: a CRD whose schema carries
//! rules is established; objects breaking a rule are refused with kube-apiserver's message
//! (`The Widget "w1" is invalid: spec: Invalid value: "object": ...`), transition rules guard
//! updates and not creates, a messageExpression and a reason shape the error, and a CRD whose
//! rule does not compile, names an undefined field or costs too much is refused. Kubernetes'
//! CEL libraries (quantity, URL, IP, CIDR) and timestamps and durations (from `date-time` and
//! `duration` strings) work in rules (`ip.isCanonical`, `string()` of a CIDR), and a rule
//! calling one of them, or a standard function, with the wrong argument types is refused when
//! the CRD is written.

use crate::common;

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

const LIBRARY_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: backends.rules.example.com
spec:
  group: rules.example.com
  scope: Namespaced
  names: {plural: backends, singular: backend, kind: Backend}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "quantity(self.memory).isLessThan(quantity('2Gi'))"
              message: "memory must be below 2Gi"
            - rule: "cidr(self.network).containsIP(self.address)"
              messageExpression: "'address ' + self.address + ' is outside ' + self.network"
              fieldPath: .address
            - rule: "self.notAfter - self.notBefore <= duration('720h')"
              message: "certificates last at most 30 days"
            - rule: "self.notBefore + self.grace < self.notAfter"
              message: "grace must end before notAfter"
            - rule: "ip.isCanonical(self.address) && string(cidr(self.network).masked()) == self.network"
              message: "address and network must be canonical"
            properties:
              memory: {type: string}
              address: {type: string}
              network: {type: string}
              endpoint:
                type: string
                x-kubernetes-validations:
                - rule: "url(self).getScheme() == 'https' && url(self).getPort() != ''"
                  message: "endpoint must be https with a port"
              notBefore: {type: string, format: date-time}
              notAfter: {type: string, format: date-time}
              grace: {type: string, format: duration}
"#;

fn backend(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: rules.example.com/v1\nkind: Backend\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

const GOOD_BACKEND: &str = "  memory: 512Mi\n  address: 10.1.2.3\n  network: 10.0.0.0/8\n  endpoint: https://db.example.com:5432/main\n  notBefore: \"2024-05-01T00:00:00Z\"\n  notAfter: \"2024-05-20T00:00:00Z\"\n  grace: 24h\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_cel_libraries_with_kubectl() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    c.ok_stdin(&["apply", "-f", "-"], LIBRARY_CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/backends.rules.example.com",
        "--timeout=30s",
    ]);
    c.ok_stdin(&["apply", "-f", "-"], &backend("b1", GOOD_BACKEND));

    let bad = GOOD_BACKEND
        .replace("512Mi", "3Gi")
        .replace("10.1.2.3", "192.168.0.9")
        .replace(
            "https://db.example.com:5432/main",
            "http://db.example.com/main",
        )
        .replace("2024-05-20T00:00:00Z", "2024-07-01T00:00:00Z")
        .replace("24h", "2000h");
    let out = c.apply_refused(&backend("b2", &bad));
    for expected in [
        "The Backend \"b2\" is invalid: ",
        "spec: Invalid value: \"object\": memory must be below 2Gi",
        "spec.address: Invalid value: \"object\": address 192.168.0.9 is outside 10.0.0.0/8",
        "spec: Invalid value: \"object\": certificates last at most 30 days",
        "spec: Invalid value: \"object\": grace must end before notAfter",
        "spec.endpoint: Invalid value: \"string\": endpoint must be https with a port",
    ] {
        assert!(out.contains(expected), "{expected:?} not in {out}");
    }
    // A value a library cannot parse is the library's error, with the rule.
    let out = c.apply_refused(&backend("b3", &GOOD_BACKEND.replace("512Mi", "lots")));
    assert!(
        out.contains("spec: Invalid value: \"object\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory must be below 2Gi"),
        "{out}"
    );
    let out = c.apply_refused(&backend("b4", &GOOD_BACKEND.replace("10.1.2.3", "10.1.2")));
    assert!(
        out.contains("IP Address \"10.1.2\" parse error during conversion from string: ParseAddr(\"10.1.2\"): IPv4 address too short evaluating rule"),
        "{out}"
    );
    // IPv6 in upper case, or a network with host bits, is not canonical.
    let v6 = GOOD_BACKEND
        .replace("10.1.2.3", "\"2001:DB8::1\"")
        .replace("10.0.0.0/8", "\"2001:db8::/32\"");
    let out = c.apply_refused(&backend("b5", &v6));
    assert!(
        out.contains("spec: Invalid value: \"object\": address and network must be canonical"),
        "{out}"
    );
    let out = c.apply_refused(&backend(
        "b6",
        &GOOD_BACKEND.replace("10.0.0.0/8", "10.0.0.1/8"),
    ));
    assert!(
        out.contains("spec: Invalid value: \"object\": address and network must be canonical"),
        "{out}"
    );
    c.ok_stdin(
        &["apply", "-f", "-"],
        &backend("b7", &v6.replace("2001:DB8::1", "2001:db8::1")),
    );

    // Wrong argument types are refused when the CRD is written.
    let wrong = LIBRARY_CRD
        .replace("backends.rules", "gadgets.rules")
        .replace(
            "plural: backends, singular: backend, kind: Backend",
            "plural: gadgets, singular: gadget, kind: Gadget",
        )
        .replace(
            "quantity(self.memory).isLessThan(quantity('2Gi'))",
            "quantity(self.memory).isLessThan(2)",
        )
        .replace(
            "self.notAfter - self.notBefore <= duration('720h')",
            "self.notAfter > '2024-01-01'",
        )
        .replace(
            "url(self).getScheme() == 'https' && url(self).getPort() != ''",
            "self.startsWith(443)",
        );
    let out = c.apply_refused(&wrong);
    assert!(
        out.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"quantity(self.memory).isLessThan(2)\""),
        "{out}"
    );
    assert!(
        out.contains(
            "found no matching overload for 'isLessThan' applied to 'kubernetes.Quantity.(int)'"
        ),
        "{out}"
    );
    assert!(
        out.contains("spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[2].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.notAfter > '2024-01-01'\""),
        "{out}"
    );
    assert!(
        out.contains(
            "found no matching overload for '_>_' applied to '(google.protobuf.Timestamp, string)'"
        ),
        "{out}"
    );
    // A standard function's too.
    assert!(
        out.contains("spec.validation.openAPIV3Schema.properties[spec].properties[endpoint].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.startsWith(443)\""),
        "{out}"
    );
    assert!(
        out.contains("compilation failed: ERROR: <input>:1:16: found no matching overload for 'startsWith' applied to 'string.(int)'"),
        "{out}"
    );
    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}
