//! [`ListStrategy`]: how a list field of a kind merges, which strategic merge patch and
//! server-side apply share. Kubernetes reads it from the `patchStrategy`/`patchMergeKey` struct
//! tags of its types; kemu reads the same facts from the list metadata its OpenAPI schemas
//! publish ([`crate::openapi::list_fields`]).

use crate::openapi::list_fields::ListType;

/// How a list field merges, as Kubernetes' `patchStrategy`/`patchMergeKey` struct tags say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListStrategy {
    /// No strategy: the patch's list replaces the original wholesale.
    Atomic,
    /// `patchStrategy: merge` with a merge key: elements are maps matched by that key.
    MergeByKey(&'static str),
    /// `patchStrategy: merge` on a list of primitives (e.g. `metadata.finalizers`): a set union.
    PrimitiveSet,
}

/// The list strategy of the list at `path` (field names from the object root; list elements add
/// no segment) in an object of `kind`.
pub fn list_strategy(kind: &str, path: &[String]) -> ListStrategy {
    let Some(field) = crate::openapi::list_field(kind, path) else {
        return ListStrategy::Atomic;
    };
    let merges = field
        .patch_strategy
        .is_some_and(|s| s.split(',').any(|s| s == "merge"));
    match (merges, field.patch_merge_key, field.list_type) {
        (true, Some(key), _) => ListStrategy::MergeByKey(key),
        (true, None, ListType::Set | ListType::Atomic) => ListStrategy::PrimitiveSet,
        _ => ListStrategy::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ListStrategy::{Atomic, MergeByKey, PrimitiveSet};

    fn strategy(kind: &str, path: &str) -> ListStrategy {
        let path: Vec<String> = path.split('.').map(str::to_string).collect();
        list_strategy(kind, &path)
    }

    #[test]
    fn strategies_follow_the_schemas() {
        assert_eq!(strategy("Pod", "spec.containers"), MergeByKey("name"));
        assert_eq!(
            strategy("Pod", "spec.containers.ports"),
            MergeByKey("containerPort")
        );
        assert_eq!(strategy("Pod", "spec.containers.args"), Atomic);
        assert_eq!(strategy("Pod", "spec.volumes"), MergeByKey("name"));
        assert_eq!(strategy("Pod", "spec.tolerations"), Atomic);
        assert_eq!(strategy("Pod", "status.conditions"), MergeByKey("type"));
        assert_eq!(strategy("Pod", "status.hostIPs"), MergeByKey("ip"));
        assert_eq!(strategy("Pod", "metadata.finalizers"), PrimitiveSet);
        assert_eq!(
            strategy("Pod", "metadata.ownerReferences"),
            MergeByKey("uid")
        );
        assert_eq!(
            strategy("Deployment", "spec.template.spec.containers.env"),
            MergeByKey("name")
        );
        assert_eq!(
            strategy("Deployment", "spec.template.metadata.finalizers"),
            PrimitiveSet
        );
        assert_eq!(
            strategy(
                "CronJob",
                "spec.jobTemplate.spec.template.spec.initContainers"
            ),
            MergeByKey("name")
        );
        assert_eq!(
            strategy("Deployment", "status.conditions"),
            MergeByKey("type")
        );
        assert_eq!(strategy("Node", "spec.podCIDRs"), PrimitiveSet);
        assert_eq!(strategy("Node", "spec.taints"), Atomic);
        assert_eq!(strategy("Node", "status.addresses"), MergeByKey("type"));
        assert_eq!(strategy("Service", "spec.ports"), MergeByKey("port"));
        assert_eq!(strategy("Service", "spec.nope"), Atomic);
        // A custom kind: only its metadata's lists are known.
        assert_eq!(strategy("Widget", "metadata.finalizers"), PrimitiveSet);
        assert_eq!(strategy("Widget", "spec.items"), Atomic);
    }
}
