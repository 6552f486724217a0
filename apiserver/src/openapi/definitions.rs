//! The component schemas of the built-in kinds, generated from k8s-openapi's `JsonSchema`
//! implementations (which carry the upstream descriptions) and finished into kube-apiserver's
//! shape: definition names such as `io.k8s.api.core.v1.PodStatus`, references as
//! `#/components/schemas/…` (wrapped in `allOf` where the field has its own description), the
//! int-or-string and quantity formats upstream writes, the list metadata of [`super::list_fields`]
//! and each kind's `x-kubernetes-group-version-kind`.

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{json, Map, Value};

use super::list_fields::{ListType, LIST_FIELDS};

/// `#/components/schemas/`: where OpenAPI 3 documents keep their definitions.
pub const V3_PREFIX: &str = "#/components/schemas/";

pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// A generator whose definitions land under `#/components/schemas/`.
pub fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator()
}

/// `{"$ref": "#/components/schemas/<name>"}`.
pub fn reference(name: &str) -> Value {
    json!({ "$ref": format!("{V3_PREFIX}{name}") })
}

/// The definition name a reference points to.
pub fn referenced(schema: &Value) -> Option<&str> {
    let target = match schema.get("allOf").and_then(Value::as_array) {
        Some(all) if all.len() == 1 => all[0].get("$ref"),
        _ => schema.get("$ref"),
    }?;
    target.as_str()?.strip_prefix(V3_PREFIX)
}

macro_rules! kinds {
    ($($group:literal $version:literal $kind:literal => $type:ty,)*) => {
        /// Generates the schema of a built-in kind into `generator` and returns the definition
        /// name; `None` for a kind with no known type.
        pub fn kind(
            generator: &mut SchemaGenerator,
            group: &str,
            version: &str,
            kind: &str,
        ) -> Option<String> {
            let schema = match (group, version, kind) {
                $(($group, $version, $kind) => generator.subschema_for::<$type>(),)*
                _ => return None,
            };
            referenced(&schema.to_value()).map(str::to_string)
        }

        /// Every kind of [`kind`]'s table, for tests that check the whole table.
        #[cfg(test)]
        pub const ALL_KINDS: &[(&str, &str, &str)] = &[$(($group, $version, $kind),)*];
    };
}

kinds! {
    "" "v1" "Binding" => api::core::v1::Binding,
    "" "v1" "ConfigMap" => api::core::v1::ConfigMap,
    "" "v1" "Endpoints" => api::core::v1::Endpoints,
    "" "v1" "Event" => api::core::v1::Event,
    "" "v1" "LimitRange" => api::core::v1::LimitRange,
    "" "v1" "Namespace" => api::core::v1::Namespace,
    "" "v1" "Node" => api::core::v1::Node,
    "" "v1" "PersistentVolume" => api::core::v1::PersistentVolume,
    "" "v1" "PersistentVolumeClaim" => api::core::v1::PersistentVolumeClaim,
    "" "v1" "Pod" => api::core::v1::Pod,
    "" "v1" "PodTemplate" => api::core::v1::PodTemplate,
    "" "v1" "ReplicationController" => api::core::v1::ReplicationController,
    "" "v1" "ResourceQuota" => api::core::v1::ResourceQuota,
    "" "v1" "Secret" => api::core::v1::Secret,
    "" "v1" "Service" => api::core::v1::Service,
    "" "v1" "ServiceAccount" => api::core::v1::ServiceAccount,
    "apps" "v1" "ControllerRevision" => api::apps::v1::ControllerRevision,
    "apps" "v1" "DaemonSet" => api::apps::v1::DaemonSet,
    "apps" "v1" "Deployment" => api::apps::v1::Deployment,
    "apps" "v1" "ReplicaSet" => api::apps::v1::ReplicaSet,
    "apps" "v1" "StatefulSet" => api::apps::v1::StatefulSet,
    "batch" "v1" "CronJob" => api::batch::v1::CronJob,
    "batch" "v1" "Job" => api::batch::v1::Job,
    "coordination.k8s.io" "v1" "Lease" => api::coordination::v1::Lease,
    "policy" "v1" "PodDisruptionBudget" => api::policy::v1::PodDisruptionBudget,
    "policy" "v1" "Eviction" => api::policy::v1::Eviction,
    "scheduling.k8s.io" "v1" "PriorityClass" => api::scheduling::v1::PriorityClass,
    "discovery.k8s.io" "v1" "EndpointSlice" => api::discovery::v1::EndpointSlice,
    "events.k8s.io" "v1" "Event" => api::events::v1::Event,
    "rbac.authorization.k8s.io" "v1" "ClusterRole" => api::rbac::v1::ClusterRole,
    "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" => api::rbac::v1::ClusterRoleBinding,
    "rbac.authorization.k8s.io" "v1" "Role" => api::rbac::v1::Role,
    "rbac.authorization.k8s.io" "v1" "RoleBinding" => api::rbac::v1::RoleBinding,
    "apiextensions.k8s.io" "v1" "CustomResourceDefinition" => apiextensions::v1::CustomResourceDefinition,
    "authorization.k8s.io" "v1" "SelfSubjectAccessReview" => api::authorization::v1::SelfSubjectAccessReview,
    "authorization.k8s.io" "v1" "SelfSubjectRulesReview" => api::authorization::v1::SelfSubjectRulesReview,
    "authorization.k8s.io" "v1" "SubjectAccessReview" => api::authorization::v1::SubjectAccessReview,
    "authorization.k8s.io" "v1" "LocalSubjectAccessReview" => api::authorization::v1::LocalSubjectAccessReview,
    "authentication.k8s.io" "v1" "SelfSubjectReview" => api::authentication::v1::SelfSubjectReview,
    "authentication.k8s.io" "v1" "TokenReview" => api::authentication::v1::TokenReview,
    "authentication.k8s.io" "v1" "TokenRequest" => api::authentication::v1::TokenRequest,
    "autoscaling" "v1" "Scale" => api::autoscaling::v1::Scale,
    "autoscaling" "v1" "HorizontalPodAutoscaler" => api::autoscaling::v1::HorizontalPodAutoscaler,
    "autoscaling" "v2" "HorizontalPodAutoscaler" => api::autoscaling::v2::HorizontalPodAutoscaler,
    "networking.k8s.io" "v1" "Ingress" => api::networking::v1::Ingress,
    "networking.k8s.io" "v1" "IngressClass" => api::networking::v1::IngressClass,
    "networking.k8s.io" "v1" "NetworkPolicy" => api::networking::v1::NetworkPolicy,
    "storage.k8s.io" "v1" "StorageClass" => api::storage::v1::StorageClass,
    "storage.k8s.io" "v1" "CSIDriver" => api::storage::v1::CSIDriver,
    "storage.k8s.io" "v1" "CSINode" => api::storage::v1::CSINode,
    "storage.k8s.io" "v1" "CSIStorageCapacity" => api::storage::v1::CSIStorageCapacity,
    "storage.k8s.io" "v1" "VolumeAttachment" => api::storage::v1::VolumeAttachment,
}

/// The definitions every group-version document carries: what the operations' bodies and
/// answers refer to.
pub fn common(generator: &mut SchemaGenerator) {
    generator.subschema_for::<meta::DeleteOptions>();
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::Patch>();
    generator.subschema_for::<meta::ObjectMeta>();
    generator.subschema_for::<meta::ListMeta>();
}

/// The definitions generated so far, in kube-apiserver's shape.
pub fn finish(generator: &mut SchemaGenerator) -> Map<String, Value> {
    let mut definitions = generator.take_definitions(true);
    if let Some(schema) = definitions.get_mut(INT_OR_STRING) {
        // Upstream: one of an integer or a string, in the int-or-string format.
        *schema = json!({
            "description": schema.get("description").cloned().unwrap_or_default(),
            "oneOf": [{"type": "integer"}, {"type": "string"}],
            "format": "int-or-string",
        });
    }
    if let Some(schema) = definitions.get_mut(QUANTITY) {
        *schema = json!({
            "description": schema.get("description").cloned().unwrap_or_default(),
            "oneOf": [{"type": "string"}, {"type": "number"}],
        });
    }
    for field in LIST_FIELDS {
        let Some(property) = definitions
            .get_mut(field.definition)
            .and_then(|d| d.pointer_mut(&format!("/properties/{}", field.field)))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        match field.list_type {
            ListType::Atomic => {
                property.insert("x-kubernetes-list-type".into(), json!("atomic"));
            }
            ListType::Set => {
                property.insert("x-kubernetes-list-type".into(), json!("set"));
            }
            ListType::Map(keys) => {
                property.insert("x-kubernetes-list-map-keys".into(), json!(keys));
                property.insert("x-kubernetes-list-type".into(), json!("map"));
            }
        }
        if let Some(strategy) = field.patch_strategy {
            property.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        }
        if let Some(key) = field.patch_merge_key {
            property.insert("x-kubernetes-patch-merge-key".into(), json!(key));
        }
    }
    definitions
}

/// Marks `name` as the schema of a kind, as kube-apiserver marks every top-level kind.
pub fn mark_kind(definitions: &mut Map<String, Value>, name: &str, gvk: &Value) {
    if let Some(schema) = definitions.get_mut(name).and_then(Value::as_object_mut) {
        schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
    }
}

/// The `<Kind>List` definition of a kind: items of the kind's schema, list metadata and the
/// list's group-version-kind.
pub fn list_of(kind: &str, item_definition: &str, gvk_of_list: &Value) -> Value {
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("List of {kind} objects."),
                "type": "array",
                "items": reference(item_definition),
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": {
                "allOf": [reference(LIST_META)],
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
        },
        "x-kubernetes-group-version-kind": [gvk_of_list],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_generates_under_its_upstream_name() {
        let mut generator = generator();
        for (group, version, kind) in ALL_KINDS {
            let name = super::kind(&mut generator, group, version, kind).expect("generated");
            assert!(name.ends_with(&format!(".{version}.{kind}")), "{name}");
        }
        common(&mut generator);
        let definitions = finish(&mut generator);
        assert!(definitions.contains_key("io.k8s.api.core.v1.PodStatus"));
        assert!(definitions.contains_key(OBJECT_META));
        // References use the components path; a described reference is wrapped in allOf.
        let template = &definitions["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"];
        assert_eq!(
            referenced(template),
            Some("io.k8s.api.core.v1.PodTemplateSpec")
        );
        assert!(template["allOf"].is_array(), "{template}");
        assert!(template["description"].is_string());
        assert_eq!(definitions[INT_OR_STRING]["format"], "int-or-string");
        assert_eq!(
            definitions["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["format"],
            "date-time"
        );
        assert!(definitions[QUANTITY]["oneOf"].is_array());
        // Every list field of the table names a property that exists.
        for field in LIST_FIELDS {
            let property = definitions
                .get(field.definition)
                .and_then(|d| d.pointer(&format!("/properties/{}", field.field)));
            assert!(
                property.is_some_and(|p| p["type"] == "array"),
                "{}.{} is not a list property",
                field.definition,
                field.field
            );
        }
        let containers = &definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
    }
}
