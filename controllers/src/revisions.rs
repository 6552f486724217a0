//! ControllerRevisions: the history of pod templates StatefulSets and DaemonSets keep, which
//! `kubectl rollout history` lists and `kubectl rollout undo` applies.
//!
//! A revision's data is the patch `{"spec":{"template":{…,"$patch":"replace"}}}` that restores
//! its template, its name `OWNER-HASH`, its labels the template's plus the hash, its
//! annotations the owner's, and its number one more than the highest. A template equal to an
//! older revision's takes that revision back with the next number, as after an undo. Revisions
//! beyond the history limit that nothing uses any more are deleted oldest first.

use std::collections::HashSet;
use std::sync::Arc;

use api::client::{Client, DeleteParams, Patch};
use api::informer::Store;
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{json, Value};

use crate::owners::{controlled_by, controller_ref};
use crate::worker::ReconcileError;

/// The revision data of a template: the strategic merge patch that restores it.
pub fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_else(|_| json!({}));
    if let Some(map) = template.as_object_mut() {
        map.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": template}})
}

/// The pod template a revision holds.
pub fn revision_template(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let template = revision.data.0.pointer("/spec/template")?;
    serde_json::from_value(template.clone()).ok()
}

/// A revision's number.
pub fn number(revision: &ControllerRevision) -> i64 {
    revision.revision.unwrap_or(0)
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// The revision an owner's current template is, after this sync.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved {
    /// The revision's name, `OWNER-HASH`.
    pub name: String,
    /// Its hash (what pods carry when the owner labels them with the hash alone).
    pub hash: String,
    /// A revision to create, when none holds the data yet.
    pub create: Option<ControllerRevision>,
    /// An older revision holding the data: (name, its new number).
    pub renumber: Option<(String, i64)>,
    /// The owner's collision count, raised past names other revisions hold.
    pub collision_count: i32,
}

/// What the owner of a history is: the object, its kind, its template and the label its
/// revisions carry their hash in.
pub struct Owner<'a> {
    pub kind: &'static str,
    pub meta: &'a ObjectMeta,
    pub template: &'a PodTemplateSpec,
    pub hash_label: &'static str,
}

impl Owner<'_> {
    /// Finds (or makes) the revision of the owner's template among `revisions`, the owner's
    /// own. `hash` gives the hash of the data for a collision count; a name already held by a
    /// revision with other data is a collision, and the count goes up.
    pub fn resolve(
        &self,
        revisions: &[&ControllerRevision],
        collision_count: i32,
        hash: impl Fn(i32) -> String,
    ) -> Resolved {
        let owner_name = name_of(self.meta);
        let data = revision_data(self.template);
        let highest = revisions.iter().map(|r| number(r)).max().unwrap_or(0);
        let equal = revisions
            .iter()
            .filter(|r| r.data.0 == data)
            .max_by_key(|r| number(r));
        let hash_in = |name: &str| {
            name.strip_prefix(owner_name)
                .unwrap_or(name)
                .trim_start_matches('-')
                .to_string()
        };
        match equal {
            Some(r) => {
                let name = name_of(&r.metadata).to_string();
                let renumber = (number(r) != highest).then(|| (name.clone(), highest + 1));
                Resolved {
                    hash: hash_in(&name),
                    name,
                    create: None,
                    renumber,
                    collision_count,
                }
            }
            None => {
                let mut collision_count = collision_count;
                let mut name = format!("{owner_name}-{}", hash(collision_count));
                while revisions.iter().any(|r| name_of(&r.metadata) == name) {
                    collision_count += 1;
                    name = format!("{owner_name}-{}", hash(collision_count));
                }
                let hash = hash_in(&name);
                let revision = self.new_revision(&name, &hash, data, highest + 1);
                Resolved {
                    name,
                    hash,
                    create: Some(revision),
                    renumber: None,
                    collision_count,
                }
            }
        }
    }

    /// A new revision: the template's labels plus the hash, the owner's annotations, and a
    /// controller reference.
    fn new_revision(&self, name: &str, hash: &str, data: Value, number: i64) -> ControllerRevision {
        let mut labels = self
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        labels.insert(self.hash_label.into(), hash.to_string());
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: self.meta.namespace.clone(),
                labels: Some(labels),
                annotations: self.meta.annotations.clone(),
                owner_references: Some(vec![controller_ref("apps/v1", self.kind, self.meta)]),
                ..Default::default()
            },
            data: RawExtension(data),
            revision: Some(number),
        }
    }
}

/// The revisions in `namespace` whose controller is the object with `uid`.
pub fn owned_by(
    revisions: &Store<ControllerRevision>,
    namespace: &str,
    uid: &str,
) -> Vec<Arc<ControllerRevision>> {
    revisions
        .list()
        .into_iter()
        .filter(|r| {
            r.metadata.namespace.as_deref() == Some(namespace) && controlled_by(&r.metadata, uid)
        })
        .collect()
}

/// The revisions beyond `limit` among those not `live`, oldest first: what to delete.
pub fn beyond_limit(
    revisions: &[&ControllerRevision],
    live: &HashSet<&str>,
    limit: Option<i32>,
) -> Vec<String> {
    let mut history: Vec<&&ControllerRevision> = revisions
        .iter()
        .filter(|r| !live.contains(name_of(&r.metadata)))
        .collect();
    history.sort_by_key(|r| number(r));
    let limit = usize::try_from(limit.unwrap_or(10)).unwrap_or(0);
    let excess = history.len().saturating_sub(limit);
    history[..excess]
        .iter()
        .map(|r| name_of(&r.metadata).to_string())
        .collect()
}

fn served() -> Result<&'static ResourceInfo, ReconcileError> {
    resources::find("apps", "v1", "controllerrevisions")
        .ok_or_else(|| ReconcileError::Invalid("controllerrevisions are not served".into()))
}

/// The writes a sync makes to an owner's history, in order: the new revision (false when its
/// name is held by a revision with other data: a collision), the renumbering, the deletions.
pub async fn write(
    client: &Client,
    namespace: &str,
    create: Option<&ControllerRevision>,
    renumber: Option<&(String, i64)>,
    delete: &[String],
) -> Result<bool, ReconcileError> {
    let resource = served()?;
    if let Some(revision) = create {
        let name = name_of(&revision.metadata);
        match client
            .create::<ControllerRevision, Value>(resource, Some(namespace), revision)
            .await
        {
            Ok(_) => {}
            // Ours but not cached yet when the data is the same (a slow informer).
            Err(e) if e.is_already_exists() => {
                let existing: ControllerRevision = client
                    .get(resource, Some(namespace), name)
                    .await
                    .map_err(ReconcileError::api("get controllerrevision"))?;
                if existing.data != revision.data {
                    return Ok(false);
                }
            }
            Err(e) => return Err(ReconcileError::api("create controllerrevision")(e)),
        }
    }
    if let Some((revision, number)) = renumber {
        let patch = Patch::Merge(json!({ "revision": number }));
        client
            .patch::<Value>(resource, Some(namespace), revision, &patch)
            .await
            .map_err(ReconcileError::api("renumber controllerrevision"))?;
    }
    for revision in delete {
        match client
            .delete::<Value>(
                resource,
                Some(namespace),
                revision,
                &DeleteParams::default(),
            )
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(ReconcileError::api("delete controllerrevision")(e)),
        }
    }
    Ok(true)
}
