//! The config loader against configs written in clusterloader2's format: the shipped test
//! configs in `load/tests/cl2`, and each kind of bad input.

use std::path::{Path, PathBuf};

use super::config::{ConfigError, LoadedConfig, Parameters};
use super::gotmpl::Value;

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cl2")
        .join(name)
}

fn params(overrides: &[PathBuf], env: &[(&str, &str)], params: &[&str], nodes: u64) -> Parameters {
    Parameters::gather(
        overrides,
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        &params.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        nodes,
        "registry.k8s.io",
    )
    .unwrap()
}

/// Writes `files` into a temp dir and loads `config.yaml` from it.
fn load(files: &[(&str, &str)]) -> Result<LoadedConfig, String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    LoadedConfig::load(&dir.path().join("config.yaml"), params(&[], &[], &[], 3)).map_err(
        |e: ConfigError| {
            e.to_string()
                .replace(&format!("{}/", dir.path().display()), "")
        },
    )
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{.Name}}\nspec:\n  containers:\n  - name: c\n    image: pause\n";

fn config(step: &str) -> String {
    format!(
        "name: t\nnamespace:\n  number: 2\ntuningSets:\n- name: Q\n  qpsLoad:\n    qps: 5\nsteps:\n{step}"
    )
}

const PHASE: &str = "- phases:\n  - namespaceRange: {min: 1, max: 2}\n    replicasPerNamespace: 1\n    tuningSet: Q\n    objectBundle:\n    - basename: p\n      objectTemplatePath: pod.yaml\n";

#[test]
fn the_density_config_loads_with_overrides_env_and_params() {
    let p = params(
        &[shipped("overrides.yaml")],
        &[("CL2_NAMESPACES", "3"), ("HOME", "/x")],
        &["REPLICAS=2"],
        5,
    );
    assert_eq!(p.values["Nodes"], Value::Int(5));
    assert_eq!(p.values["PODS_PER_NODE"], Value::Int(2));
    assert_eq!(p.values["REPLICAS"], Value::Int(2));
    assert!(!p.values.contains_key("HOME"));
    assert_eq!(
        p.values["ImageRegistry"],
        Value::Str("registry.k8s.io".into())
    );
    let loaded = LoadedConfig::load(&shipped("density.yaml"), p).unwrap();
    let test = &loaded.test;
    assert_eq!(test.name, "density");
    assert_eq!(test.namespace.number, 3);
    assert_eq!(test.tuningsets.len(), 3);
    assert_eq!(test.steps.len(), 7);
    let create = &test.steps[1].phases[0];
    // 5 nodes × 2 pods / 3 namespaces = 3 per namespace, in Deployments of 2: 1 each.
    assert_eq!(create.replicaspernamespace, 1);
    assert_eq!(create.objectbundle[0].templatefillmap["Replicas"], 2);
    assert_eq!(test.steps[0].measurements[1].method, "PodStartupLatency");
    assert_eq!(
        test.steps[0].measurements[1].params["labelSelector"],
        "group = density"
    );
}

#[test]
fn image_registry_is_a_builtin_a_param_can_replace() {
    let p = Parameters::gather(&[], Vec::new(), &[], 3, "mirror.example:5000").unwrap();
    assert_eq!(
        p.values["ImageRegistry"],
        Value::Str("mirror.example:5000".into())
    );
    let p = params(&[], &[], &["ImageRegistry=other.example"], 3);
    assert_eq!(
        p.values["ImageRegistry"],
        Value::Str("other.example".into())
    );
}

#[test]
fn modules_are_expanded_with_their_params() {
    let module = "steps:\n- name: from module\n  measurements:\n  - Identifier: {{.Id}}\n    Method: Sleep\n    Params: {duration: 1ms}\n";
    let loaded = load(&[
        (
            "config.yaml",
            &config("- module:\n    path: module.yaml\n    params:\n      Id: fromParams\n"),
        ),
        ("module.yaml", module),
    ])
    .unwrap();
    assert_eq!(loaded.test.steps.len(), 1);
    assert_eq!(loaded.test.steps[0].name, "from module");
    assert_eq!(
        loaded.test.steps[0].measurements[0].identifier,
        "fromParams"
    );
}

#[test]
fn every_path_is_the_config_directory_s_a_leading_slash_included() {
    // As clusterloader2's template provider joins each path to the config's directory: a module
    // in modules/ names a nested module by `modules/...` and its objects by their names beside
    // the config; `/modules/...` is the same directory.
    let outer = "steps:\n- module:\n    path: modules/inner.yaml\n";
    let inner = "steps:\n- name: inner\n  phases:\n  - namespaceRange: {min: 1, max: 2}\n    replicasPerNamespace: 1\n    tuningSet: Q\n    objectBundle:\n    - basename: p\n      objectTemplatePath: /pod.yaml\n";
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("modules")).unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        config("- module:\n    path: /modules/outer.yaml\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("modules/outer.yaml"), outer).unwrap();
    std::fs::write(dir.path().join("modules/inner.yaml"), inner).unwrap();
    std::fs::write(dir.path().join("pod.yaml"), POD).unwrap();
    let loaded =
        LoadedConfig::load(&dir.path().join("config.yaml"), params(&[], &[], &[], 3)).unwrap();
    assert_eq!(loaded.test.steps.len(), 1);
    assert_eq!(loaded.test.steps[0].name, "inner");
    assert_eq!(loaded.file("/pod.yaml"), dir.path().join("pod.yaml"));
}

#[test]
fn keys_are_case_insensitive_but_params_keep_theirs() {
    let step =
        "- Measurements:\n  - method: Sleep\n    identifier: s\n    params: {Duration: 1s}\n";
    let loaded = load(&[("config.yaml", &config(step))]).unwrap();
    let m = &loaded.test.steps[0].measurements[0];
    assert_eq!(m.method, "Sleep");
    assert!(m.params.contains_key("Duration"));
}

#[test]
fn an_unknown_function_names_file_and_line() {
    let e = load(&[("config.yaml", "name: t\n\nsteps: {{Frob 1}}\n")]).unwrap_err();
    assert_eq!(e, "config.yaml:3: function \"Frob\" not defined");
}

#[test]
fn a_missing_parameter_names_file_and_line() {
    let e = load(&[(
        "config.yaml",
        "name: t\nnamespace:\n  number: {{.NAMESPACES}}\n",
    )])
    .unwrap_err();
    assert!(
        e.starts_with("config.yaml:3: parameter .NAMESPACES is not set"),
        "{e}"
    );
}

#[test]
fn an_unknown_measurement_names_file_and_line() {
    let step = "- measurements:\n  - Identifier: x\n    Method: PodStartupLatencyy\n";
    let e = load(&[("config.yaml", &config(step))]).unwrap_err();
    assert_eq!(
        e,
        "config.yaml:11: unknown measurement method \"PodStartupLatencyy\""
    );
}

#[test]
fn an_unknown_tuning_set_names_file_and_line() {
    let step = PHASE.replace("tuningSet: Q", "tuningSet: Missing");
    let e = load(&[("config.yaml", &config(&step)), ("pod.yaml", POD)]).unwrap_err();
    assert_eq!(
        e,
        "config.yaml:12: tuning set \"Missing\" is not defined in tuningSets"
    );
}

#[test]
fn a_tuning_set_without_a_kind_is_refused() {
    let text = "name: t\ntuningSets:\n- name: Nothing\n  bogusLoad: {qps: 1}\nsteps: []\n";
    let e = load(&[("config.yaml", text)]).unwrap_err();
    assert!(
        e.starts_with("config.yaml:3: tuning set \"Nothing\" must have exactly one of"),
        "{e}"
    );
}

#[test]
fn invalid_yaml_after_rendering_quotes_the_rendered_line() {
    let text = "name: t\n{{if true}}steps: [\n{{end}}";
    let e = load(&[("config.yaml", text)]).unwrap_err();
    assert!(
        e.starts_with("config.yaml: invalid YAML after rendering"),
        "{e}"
    );
}

#[test]
fn a_bad_object_template_fails_before_the_run() {
    let e = load(&[
        ("config.yaml", &config(PHASE)),
        (
            "pod.yaml",
            "kind: Pod\nmetadata:\n  name: {{.Name}}\n  labels: {a: {{.Label}}}\n",
        ),
    ])
    .unwrap_err();
    assert!(
        e.starts_with("pod.yaml:4: parameter .Label is not set"),
        "{e}"
    );
    let e = load(&[
        ("config.yaml", &config(PHASE)),
        ("pod.yaml", "kind: Pod\nspec: {{Nope}}\n"),
    ])
    .unwrap_err();
    assert_eq!(e, "pod.yaml:2: function \"Nope\" not defined");
    let e = load(&[("config.yaml", &config(PHASE))]).unwrap_err();
    assert!(e.starts_with("pod.yaml:0: cannot read"), "{e}");
}

#[test]
fn a_namespace_range_must_fit_the_automanaged_namespaces() {
    let step = PHASE.replace("max: 2", "max: 5");
    let e = load(&[("config.yaml", &config(&step)), ("pod.yaml", POD)]).unwrap_err();
    assert!(
        e.contains("namespaceRange 1..5 is outside the 2 automanaged namespaces"),
        "{e}"
    );
}

#[test]
fn a_schema_error_names_the_field() {
    let e = load(&[("config.yaml", "name: t\nnamespace:\n  number: many\n")]).unwrap_err();
    assert!(e.starts_with("config.yaml:3: namespace.number"), "{e}");
}

#[test]
fn object_templates_see_clusterloader2_builtins() {
    let loaded = LoadedConfig::load(
        &shipped("density.yaml"),
        params(&[shipped("overrides.yaml")], &[], &[], 4),
    )
    .unwrap();
    let object = &loaded.test.steps[1].phases[0].objectbundle[0];
    let data = loaded.object_data(object, "density-ns-2", 3);
    let template =
        super::gotmpl::Template::from_file(&shipped("deployment.yaml")).expect("template");
    let rendered = template.render(&data).unwrap();
    let object = super::config::yaml("deployment.yaml", &rendered).unwrap();
    assert_eq!(object["metadata"]["name"], "density-3");
    assert_eq!(
        object["metadata"]["annotations"]["replica"],
        "density 3 in density-ns-2"
    );
}

#[test]
fn resource_constraints_of_the_density_config_render_with_nodes() {
    let constraints =
        super::resource_usage::read_constraints(&shipped("resource-constraints.yaml"), 3).unwrap();
    assert_eq!(constraints["etcd"].memory, 3 * 2147483648);
    assert_eq!(constraints["kube-apiserver"].cpu, 8.0);
}
