//! A clusterloader2 test config: rendered with its parameters, read into [`TestConfig`]
//! (clusterloader2's schema: namespace settings, tuning sets, steps of phases or measurements,
//! modules), and checked — every object template parsed and test-rendered — before anything
//! is created. Keys are matched case-insensitively, as clusterloader2's decoder does
//! (`Method`, `method`); `Params` and `templateFillMap` keep their keys as written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value as Json;

use super::gotmpl::{Template, TemplateError, Value};
use super::measurements;

/// A config that cannot run, with the file and line it comes from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("{file}: invalid YAML after rendering: {message}\n  rendered line: {rendered}")]
    Yaml {
        file: String,
        message: String,
        rendered: String,
    },
    #[error("{file}:{line}: {message}")]
    Schema {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{file}: {message}")]
    Parameters { file: String, message: String },
}

/// The parameters templates see: override files, then `CL2_*` variables, then `--param`s,
/// each over the one before, and built-ins (`Nodes`, `ImageRegistry`) where none of those set
/// them.
#[derive(Clone, Debug, Default)]
pub struct Parameters {
    pub values: BTreeMap<String, Value>,
}

impl Parameters {
    /// Builds the parameters: `overrides` files (YAML maps, later ones winning), the
    /// environment's `CL2_*` variables, then `params` (`KEY=VALUE`, values read as
    /// clusterloader2 reads its environment variables), `nodes` as `.Nodes` and
    /// `image_registry` as `.ImageRegistry` unless set.
    pub fn gather(
        overrides: &[PathBuf],
        env: impl IntoIterator<Item = (String, String)>,
        params: &[String],
        nodes: u64,
        image_registry: &str,
    ) -> Result<Parameters, ConfigError> {
        let mut values = BTreeMap::new();
        for path in overrides {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Parameters {
                file: file.clone(),
                message: format!("cannot read the overrides file: {e}"),
            })?;
            let json: Json = if text.trim().is_empty() {
                Json::Object(Default::default())
            } else {
                serde_saphyr::from_str(&text).map_err(|e| ConfigError::Parameters {
                    file: file.clone(),
                    message: format!("invalid YAML: {}", e.without_snippet()),
                })?
            };
            let Value::Map(map) = Value::from_json(&json) else {
                return Err(ConfigError::Parameters {
                    file,
                    message: "an overrides file must be a map of parameter: value".into(),
                });
            };
            values.extend(map);
        }
        for (key, value) in env {
            if key.starts_with("CL2_") {
                values.insert(key, Value::unpack(&value));
            }
        }
        for param in params {
            let Some((key, value)) = param.split_once('=') else {
                return Err(ConfigError::Parameters {
                    file: "--param".into(),
                    message: format!("{param:?} is not KEY=VALUE"),
                });
            };
            values.insert(key.trim().to_string(), Value::unpack(value.trim()));
        }
        values
            .entry("Nodes".to_string())
            .or_insert(Value::Int(nodes as i64));
        values
            .entry("ImageRegistry".to_string())
            .or_insert_with(|| Value::Str(image_registry.to_string()));
        Ok(Parameters { values })
    }

    pub fn as_value(&self) -> Value {
        Value::Map(self.values.clone())
    }
}

/// Go's `time.Duration` as clusterloader2 configs write it (`30s`, `1m30s`, `100ms`), or a
/// number of nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GoDuration(pub Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Json::deserialize(d)? {
            Json::Number(n) => Ok(GoDuration(Duration::from_nanos(n.as_u64().unwrap_or(0)))),
            Json::String(s) => parse_duration(&s)
                .map(GoDuration)
                .ok_or_else(|| serde::de::Error::custom(format!("invalid duration {s:?}"))),
            other => Err(serde::de::Error::custom(format!(
                "invalid duration {other}"
            ))),
        }
    }
}

/// Parses a Go duration string.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0.0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&e| e > 0)?;
        let n: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_secs_f64(total))
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct TestConfig {
    pub name: String,
    pub namespace: NamespaceConfig,
    pub tuningsets: Vec<TuningSet>,
    pub steps: Vec<Step>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct NamespaceConfig {
    pub number: u32,
    pub prefix: String,
    pub deletestalenamespaces: bool,
    pub deleteautomanagednamespaces: bool,
    pub enableexistingnamespaces: bool,
}

impl Default for NamespaceConfig {
    fn default() -> Self {
        NamespaceConfig {
            number: 1,
            prefix: String::new(),
            deletestalenamespaces: false,
            deleteautomanagednamespaces: true,
            enableexistingnamespaces: false,
        }
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct TuningSet {
    pub name: String,
    pub initialdelay: GoDuration,
    pub qpsload: Option<QpsLoad>,
    pub randomizedload: Option<RandomizedLoad>,
    pub steppedload: Option<SteppedLoad>,
    pub timelimitedload: Option<TimeLimitedLoad>,
    pub randomizedtimelimitedload: Option<TimeLimitedLoad>,
    pub parallelismlimitedload: Option<ParallelismLimitedLoad>,
    pub globalqpsload: Option<GlobalQpsLoad>,
    pub poissonload: Option<PoissonLoad>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct QpsLoad {
    pub qps: f64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct RandomizedLoad {
    pub averageqps: f64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct SteppedLoad {
    pub burstsize: u32,
    pub stepdelay: GoDuration,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct TimeLimitedLoad {
    pub timelimit: GoDuration,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct ParallelismLimitedLoad {
    pub parallelismlimit: u32,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct GlobalQpsLoad {
    pub qps: f64,
    pub burst: u32,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct PoissonLoad {
    pub expectedactionspersecond: f64,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct Step {
    pub name: String,
    pub phases: Vec<Phase>,
    pub measurements: Vec<Measurement>,
    pub module: Option<ModuleRef>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct ModuleRef {
    pub path: String,
    pub params: BTreeMap<String, Json>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct Phase {
    pub namespacerange: Option<NamespaceRange>,
    pub namespacelist: Vec<String>,
    pub replicaspernamespace: u32,
    pub tuningset: String,
    pub objectbundle: Vec<Object>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct NamespaceRange {
    pub min: u32,
    pub max: u32,
    pub basename: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct Object {
    pub basename: String,
    pub objecttemplatepath: String,
    pub templatefillmap: BTreeMap<String, Json>,
    /// Objects the test did not create (a StatefulSet's claims) that the phase takes as its
    /// existing replicas: those of the template's kind matching the selector, counted in each
    /// namespace when the phase first meets the object.
    pub listunknownobjectoptions: Option<ListUnknownObjectOptions>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct ListUnknownObjectOptions {
    /// A `metav1.LabelSelector` (`matchLabels`, `matchExpressions`).
    pub labelselector: Json,
}

impl ListUnknownObjectOptions {
    /// The selector as a `labelSelector` query value.
    pub fn selector(&self) -> Result<String, String> {
        api::selectors::LabelSelector::from_label_selector_json(&self.labelselector)
            .map(|s| s.to_string())
            .map_err(|e| format!("listUnknownObjectOptions.labelSelector: {e}"))
    }
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct Measurement {
    pub method: String,
    pub identifier: String,
    pub params: BTreeMap<String, Json>,
    pub instances: Vec<MeasurementInstance>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "lowercase")]
pub struct MeasurementInstance {
    pub identifier: String,
    pub params: BTreeMap<String, Json>,
}

/// Lowercases the schema's keys, leaving the maps whose keys are the user's as written.
fn normalize(value: Json) -> Json {
    match value {
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let key = k.to_ascii_lowercase();
                    let v = if key == "params" || key == "templatefillmap" || key == "labelselector"
                    {
                        v
                    } else {
                        normalize(v)
                    };
                    (key, v)
                })
                .collect(),
        ),
        Json::Array(items) => Json::Array(items.into_iter().map(normalize).collect()),
        other => other,
    }
}

/// The first line of `source` that contains `needle` (1 when none does).
pub fn line_of(source: &str, needle: &str) -> usize {
    source
        .lines()
        .position(|l| !needle.is_empty() && l.contains(needle))
        .map_or(1, |i| i + 1)
}

/// Renders a template file with `data` and reads the result as YAML.
pub fn render_yaml(path: &Path, data: &Value) -> Result<(Json, String), ConfigError> {
    let template = Template::from_file(path)?;
    let rendered = template.render(data)?;
    let json = yaml(&path.display().to_string(), &rendered)?;
    Ok((json, rendered))
}

/// What Go's text/template prints for a missing map key.
const NO_VALUE: &str = "<no value>";

/// Reads rendered text as YAML; an error quotes the rendered line it is on.
pub fn yaml(file: &str, rendered: &str) -> Result<Json, ConfigError> {
    serde_saphyr::from_str(rendered).map_err(|e| {
        let message = e.without_snippet().to_string();
        let line = message
            .split("line ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse::<usize>().ok());
        let rendered_line = line
            .and_then(|l| rendered.lines().nth(l.saturating_sub(1)))
            .unwrap_or("")
            .to_string();
        ConfigError::Yaml {
            file: file.to_string(),
            message,
            rendered: rendered_line,
        }
    })
}

/// A loaded config: the test, its file's directory (object templates and modules are
/// relative to it) and the parameters it was rendered with.
#[derive(Clone, Debug)]
pub struct LoadedConfig {
    pub path: PathBuf,
    pub source: String,
    pub test: TestConfig,
    pub parameters: Parameters,
}

impl LoadedConfig {
    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// A template, module or constraints file the config names, found as clusterloader2
    /// finds it (see [`template_path`]).
    pub fn file(&self, name: &str) -> PathBuf {
        template_path(self.dir(), name)
    }

    /// Renders and checks `path`: modules expanded, tuning sets, measurements and object
    /// templates checked. Nothing is sent anywhere.
    pub fn load(path: &Path, parameters: Parameters) -> Result<LoadedConfig, ConfigError> {
        let file = path.display().to_string();
        let source = std::fs::read_to_string(path).map_err(|e| ConfigError::Schema {
            file: file.clone(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        let (json, _) = render_yaml(path, &parameters.as_value())?;
        let mut test: TestConfig = decode(&file, &source, json)?;
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        test.steps = expand_modules(&dir, &file, &source, test.steps, &parameters, 0)?;
        let loaded = LoadedConfig {
            path: path.to_path_buf(),
            source,
            test,
            parameters,
        };
        loaded.check()?;
        Ok(loaded)
    }

    fn schema(&self, needle: &str, message: String) -> ConfigError {
        ConfigError::Schema {
            file: self.path.display().to_string(),
            line: line_of(&self.source, needle),
            message,
        }
    }

    fn check(&self) -> Result<(), ConfigError> {
        let test = &self.test;
        for set in &test.tuningsets {
            super::tuning::Pacing::from_config(set).map_err(|m| self.schema(&set.name, m))?;
        }
        for step in &test.steps {
            for m in &step.measurements {
                if !measurements::KNOWN.contains(&m.method.as_str()) {
                    return Err(self.schema(
                        &m.method,
                        format!("unknown measurement method {:?}", m.method),
                    ));
                }
            }
            for phase in &step.phases {
                if !test.tuningsets.iter().any(|t| t.name == phase.tuningset) {
                    return Err(self.schema(
                        &phase.tuningset,
                        format!(
                            "tuning set {:?} is not defined in tuningSets",
                            phase.tuningset
                        ),
                    ));
                }
                if let Some(range) = &phase.namespacerange {
                    if range.basename.is_none()
                        && (range.min < 1
                            || range.max > test.namespace.number
                            || range.min > range.max)
                    {
                        return Err(self.schema(
                            "namespaceRange",
                            format!(
                                "namespaceRange {}..{} is outside the {} automanaged namespaces (1..{})",
                                range.min, range.max, test.namespace.number, test.namespace.number
                            ),
                        ));
                    }
                }
                for object in &phase.objectbundle {
                    self.check_object(object, phase.replicaspernamespace == 0)?;
                }
            }
        }
        Ok(())
    }

    /// Parses an object template and renders it for replica 0, so that a bad template fails
    /// before the run starts.
    /// A phase that only deletes renders leniently, as its deletes will.
    fn check_object(&self, object: &Object, deletes_only: bool) -> Result<(), ConfigError> {
        let path = self.file(&object.objecttemplatepath);
        let data = self.object_data(object, "", 0);
        let template = Template::from_file(&path)?;
        let rendered = if deletes_only {
            template.render_lenient(&data)?
        } else {
            template.render(&data)?
        };
        let json = yaml(&path.display().to_string(), &rendered)?;
        if let Some(options) = &object.listunknownobjectoptions {
            options.selector().map_err(|message| ConfigError::Schema {
                file: self.path.display().to_string(),
                line: 1,
                message: format!("object {:?}: {message}", object.basename),
            })?;
        }
        // A template that renders to nothing is skipped, as clusterloader2 skips it.
        if !json.is_null() && json.get("kind").and_then(Json::as_str).is_none() {
            return Err(ConfigError::Schema {
                file: path.display().to_string(),
                line: 1,
                message: "the rendered object has no kind".into(),
            });
        }
        Ok(())
    }

    /// What an object template sees: the parameters, the bundle's `templateFillMap`, and
    /// clusterloader2's built-ins for the replica: `Name` (`BASENAME-INDEX`), `Index`,
    /// `BaseName` and `Namespace` (empty for a cluster-scoped object).
    pub fn object_data(&self, object: &Object, namespace: &str, index: u32) -> Value {
        let mut values = self.parameters.values.clone();
        for (k, v) in &object.templatefillmap {
            let value = match v {
                // What Go prints for a parameter nobody set (a module's caller left it out).
                Json::String(s) if s == NO_VALUE => Value::Missing(format!(".{k}")),
                _ => Value::from_json(v),
            };
            values.insert(k.clone(), value);
        }
        let name = format!("{}-{index}", object.basename);
        values.insert("Name".into(), Value::Str(name));
        values.insert("Index".into(), Value::Int(index as i64));
        values.insert("BaseName".into(), Value::Str(object.basename.clone()));
        values.insert("Namespace".into(), Value::Str(namespace.to_string()));
        Value::Map(values)
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    file: &str,
    source: &str,
    json: Json,
) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(normalize(json)).map_err(|e| {
        let path = e.path().to_string();
        let key = path.rsplit('.').next().unwrap_or("").to_string();
        ConfigError::Schema {
            file: file.to_string(),
            line: line_of(&source.to_ascii_lowercase(), &key),
            message: format!("{path}: {}", e.inner()),
        }
    })
}

/// Replaces each `module` step by the module's steps, rendered with the parameters and the
/// module's `params`.
/// Where clusterloader2 finds a file a test names: under the config's directory, whichever file
/// names it (a module in `modules/` names `deployment.yaml` beside the config), and a leading
/// `/` is that directory too (`path: /modules/measurements.yaml`), as Go's `filepath.Join`
/// makes it.
pub fn template_path(base: &Path, name: &str) -> PathBuf {
    base.join(name.trim_start_matches('/'))
}

fn expand_modules(
    dir: &Path,
    file: &str,
    source: &str,
    steps: Vec<Step>,
    parameters: &Parameters,
    depth: usize,
) -> Result<Vec<Step>, ConfigError> {
    let mut out = Vec::new();
    for step in steps {
        let Some(module) = &step.module else {
            out.push(step);
            continue;
        };
        if depth > 8 {
            return Err(ConfigError::Schema {
                file: file.to_string(),
                line: line_of(source, &module.path),
                message: "modules nest more than 8 deep".into(),
            });
        }
        let path = template_path(dir, &module.path);
        let mut values = parameters.values.clone();
        for (k, v) in &module.params {
            values.insert(k.clone(), Value::from_json(v));
        }
        let module_parameters = Parameters { values };
        // A module renders as Go renders it: a parameter its caller leaves out prints as
        // `<no value>` (CL2's load test calls its reconcile module without `daemonSetEnv` when it
        // deletes). Should such a value reach an object that is created, the object's template
        // names it as a missing parameter (`object_data`).
        let template = Template::from_file(&path)?;
        let rendered = template.render_lenient(&module_parameters.as_value())?;
        let mut json = yaml(&path.display().to_string(), &rendered)?;
        if json.is_null() {
            // Everything inside a false `{{if}}`: a module of no steps, as Go's YAML decoder
            // leaves an empty document's struct empty.
            json = Json::Object(Default::default());
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Module {
            steps: Vec<Step>,
        }
        let module_file = path.display().to_string();
        let module_source = std::fs::read_to_string(&path).unwrap_or_default();
        let module: Module = decode(&module_file, &module_source, json)?;
        // A module's own paths, like every path in the test, are the config directory's.
        out.extend(expand_modules(
            dir,
            &module_file,
            &module_source,
            module.steps,
            &module_parameters,
            depth + 1,
        )?);
    }
    Ok(out)
}
