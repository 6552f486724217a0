//! Object builders for the controllers' unit tests.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::owners::{controller_ref, time_at};

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn template(image: &str) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(labels(&[("app", "web")])),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "web".into(),
                image: Some(image.into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

pub fn meta(name: &str, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(uid.into()),
        generation: Some(1),
        creation_timestamp: Some(time_at(1000)),
        ..Default::default()
    }
}

/// A pod owned by `owner`: scheduled, running and ready (since t=1000) unless said otherwise.
pub fn pod(name: &str, owner: &ObjectMeta, kind: &str, phase: &str, ready: bool) -> Pod {
    let mut m = meta(name, &format!("uid-{name}"));
    m.labels = Some(labels(&[("app", "web")]));
    m.owner_references = Some(vec![controller_ref("apps/v1", kind, owner)]);
    Pod {
        metadata: m,
        spec: Some(PodSpec {
            node_name: Some("node-1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some(phase.into()),
            pod_ip: Some(format!("10.0.0.{}", name.len())),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(time_at(1000)),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

pub fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: meta(name, &format!("uid-{name}")),
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: Some(template("nginx:1.27")),
            ..Default::default()
        },
        status: None,
    }
}

pub fn deployment(name: &str, replicas: i32, image: &str) -> Deployment {
    Deployment {
        metadata: meta(name, &format!("uid-{name}")),
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                ..Default::default()
            },
            template: template(image),
            ..Default::default()
        },
        status: None,
    }
}

/// Sets a ReplicaSet's status as if all its `replicas` pods were `available`.
pub fn with_status(mut rs: ReplicaSet, replicas: i32, available: i32) -> ReplicaSet {
    rs.status = Some(ReplicaSetStatus {
        replicas,
        ready_replicas: Some(available),
        available_replicas: Some(available),
        ..Default::default()
    });
    rs
}
