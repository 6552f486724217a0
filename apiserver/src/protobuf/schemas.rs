//! The schema tables: for each message kemu decodes, its field numbers, JSON names, types and
//! presence, taken from Kubernetes' `generated.proto` files. Data, not logic; the decoder that
//! reads them is in the parent module.

use super::{Field, Kind, Msg, Pres};

#[path = "autoscaling_schemas.rs"]
mod autoscaling;

const fn fld(num: u32, name: &'static str, kind: Kind, pres: Pres, repeated: bool) -> Field {
    Field {
        num,
        name,
        kind,
        pres,
        repeated,
    }
}
/// `string` with `omitempty`.
const fn s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Omit, false)
}
/// `string` without `omitempty`.
const fn s_req(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Req, false)
}
/// `*string`.
const fn s_ptr(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Ptr, false)
}
/// `[]string`.
const fn strs(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Omit, true)
}
const fn i32_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Omit, false)
}
const fn i32_r(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Req, false)
}
const fn i32_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Ptr, false)
}
const fn i64_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Omit, false)
}
const fn i64_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Ptr, false)
}
const fn i64s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Omit, true)
}
const fn b_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Omit, false)
}
const fn b_r(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Req, false)
}
const fn b_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Ptr, false)
}
/// A struct value field (always printed).
const fn msg(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Req, false)
}
/// A pointer-to-struct field.
const fn msg_p(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Ptr, false)
}
/// A list of structs.
const fn msgs(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Omit, true)
}
const fn inline(num: u32, m: &'static Msg) -> Field {
    fld(num, "", Kind::Inline(m), Pres::Req, false)
}
const fn map_s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapStr, Pres::Omit, false)
}
const fn map_b(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapBytes, Pres::Omit, false)
}
const fn map_q(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapQuantity, Pres::Omit, false)
}
const fn time(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Time, Pres::Ptr, false)
}
const fn micro_time(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MicroTime, Pres::Ptr, false)
}
const fn int_or_string(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::IntOrString, Pres::Ptr, false)
}
const fn int_or_string_req(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::IntOrString, Pres::Req, false)
}
const fn quantity(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Quantity, Pres::Ptr, false)
}

// --- k8s.io/apimachinery meta/v1 ---

static OBJECT_META: Msg = Msg {
    name: "ObjectMeta",
    fields: &[
        s(1, "name"),
        s(2, "generateName"),
        s(3, "namespace"),
        s(4, "selfLink"),
        s(5, "uid"),
        s(6, "resourceVersion"),
        i64_o(7, "generation"),
        time(8, "creationTimestamp"),
        time(9, "deletionTimestamp"),
        i64_p(10, "deletionGracePeriodSeconds"),
        map_s(11, "labels"),
        map_s(12, "annotations"),
        msgs(13, "ownerReferences", &OWNER_REFERENCE),
        strs(14, "finalizers"),
        // managedFields (17) is skipped.
    ],
};

static OWNER_REFERENCE: Msg = Msg {
    name: "OwnerReference",
    fields: &[
        s_req(5, "apiVersion"),
        s_req(1, "kind"),
        s_req(3, "name"),
        s_req(4, "uid"),
        b_p(6, "controller"),
        b_p(7, "blockOwnerDeletion"),
    ],
};

static LABEL_SELECTOR: Msg = Msg {
    name: "LabelSelector",
    fields: &[
        map_s(1, "matchLabels"),
        msgs(2, "matchExpressions", &LABEL_SELECTOR_REQUIREMENT),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "LabelSelectorRequirement",
    fields: &[s_req(1, "key"), s_req(2, "operator"), strs(3, "values")],
};

static CONDITION: Msg = Msg {
    name: "Condition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        i64_o(3, "observedGeneration"),
        time(4, "lastTransitionTime"),
        s_req(5, "reason"),
        s_req(6, "message"),
    ],
};

static DELETE_OPTIONS: Msg = Msg {
    name: "DeleteOptions",
    fields: &[
        i64_p(1, "gracePeriodSeconds"),
        msg_p(2, "preconditions", &PRECONDITIONS),
        b_p(3, "orphanDependents"),
        s_ptr(4, "propagationPolicy"),
        strs(5, "dryRun"),
        b_p(6, "ignoreStoreReadErrorWithClusterBreakingPotential"),
    ],
};

static PRECONDITIONS: Msg = Msg {
    name: "Preconditions",
    fields: &[s_ptr(1, "uid"), s_ptr(2, "resourceVersion")],
};

// --- k8s.io/api core/v1 ---

static NAMESPACE: Msg = Msg {
    name: "Namespace",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &NAMESPACE_SPEC),
        msg(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Msg = Msg {
    name: "NamespaceSpec",
    fields: &[strs(1, "finalizers")],
};

static NAMESPACE_STATUS: Msg = Msg {
    name: "NamespaceStatus",
    fields: &[s(1, "phase"), msgs(2, "conditions", &NAMESPACE_CONDITION)],
};

static NAMESPACE_CONDITION: Msg = Msg {
    name: "NamespaceCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(4, "lastTransitionTime"),
        s(5, "reason"),
        s(6, "message"),
    ],
};

static CONFIG_MAP: Msg = Msg {
    name: "ConfigMap",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        b_p(4, "immutable"),
        map_s(2, "data"),
        map_b(3, "binaryData"),
    ],
};

static SECRET: Msg = Msg {
    name: "Secret",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        b_p(5, "immutable"),
        map_b(2, "data"),
        map_s(4, "stringData"),
        s(3, "type"),
    ],
};

static SERVICE_ACCOUNT: Msg = Msg {
    name: "ServiceAccount",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "secrets", &OBJECT_REFERENCE),
        msgs(3, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
        b_p(4, "automountServiceAccountToken"),
    ],
};

static OBJECT_REFERENCE: Msg = Msg {
    name: "ObjectReference",
    fields: &[
        s(1, "kind"),
        s(2, "namespace"),
        s(3, "name"),
        s(4, "uid"),
        s(5, "apiVersion"),
        s(6, "resourceVersion"),
        s(7, "fieldPath"),
    ],
};

static LOCAL_OBJECT_REFERENCE: Msg = Msg {
    name: "LocalObjectReference",
    fields: &[s(1, "name")],
};

static BINDING: Msg = Msg {
    name: "Binding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "target", &OBJECT_REFERENCE),
    ],
};

static SERVICE: Msg = Msg {
    name: "Service",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SERVICE_SPEC),
        msg(3, "status", &SERVICE_STATUS),
    ],
};

static SERVICE_SPEC: Msg = Msg {
    name: "ServiceSpec",
    fields: &[
        msgs(1, "ports", &SERVICE_PORT),
        map_s(2, "selector"),
        s(3, "clusterIP"),
        strs(18, "clusterIPs"),
        s(4, "type"),
        strs(5, "externalIPs"),
        s(7, "sessionAffinity"),
        s(8, "loadBalancerIP"),
        strs(9, "loadBalancerSourceRanges"),
        s(10, "externalName"),
        s(11, "externalTrafficPolicy"),
        i32_o(12, "healthCheckNodePort"),
        b_o(13, "publishNotReadyAddresses"),
        msg_p(14, "sessionAffinityConfig", &SESSION_AFFINITY_CONFIG),
        strs(19, "ipFamilies"),
        s_ptr(17, "ipFamilyPolicy"),
        b_p(20, "allocateLoadBalancerNodePorts"),
        s_ptr(21, "loadBalancerClass"),
        s_ptr(22, "internalTrafficPolicy"),
        s_ptr(23, "trafficDistribution"),
    ],
};

static SESSION_AFFINITY_CONFIG: Msg = Msg {
    name: "SessionAffinityConfig",
    fields: &[msg_p(1, "clientIP", &CLIENT_IP_CONFIG)],
};

static CLIENT_IP_CONFIG: Msg = Msg {
    name: "ClientIPConfig",
    fields: &[i32_p(1, "timeoutSeconds")],
};

static SERVICE_PORT: Msg = Msg {
    name: "ServicePort",
    fields: &[
        s(1, "name"),
        s(2, "protocol"),
        s_ptr(6, "appProtocol"),
        i32_r(3, "port"),
        int_or_string_req(4, "targetPort"),
        i32_o(5, "nodePort"),
    ],
};

static SERVICE_STATUS: Msg = Msg {
    name: "ServiceStatus",
    fields: &[
        msg(1, "loadBalancer", &LOAD_BALANCER_STATUS),
        msgs(2, "conditions", &CONDITION),
    ],
};

static LOAD_BALANCER_STATUS: Msg = Msg {
    name: "LoadBalancerStatus",
    fields: &[msgs(1, "ingress", &LOAD_BALANCER_INGRESS)],
};

static LOAD_BALANCER_INGRESS: Msg = Msg {
    name: "LoadBalancerIngress",
    fields: &[
        s(1, "ip"),
        s(2, "hostname"),
        s_ptr(3, "ipMode"),
        msgs(4, "ports", &PORT_STATUS),
    ],
};

static PORT_STATUS: Msg = Msg {
    name: "PortStatus",
    fields: &[i32_r(1, "port"), s_req(2, "protocol"), s_ptr(3, "error")],
};

static POD: Msg = Msg {
    name: "Pod",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_SPEC),
        msg(3, "status", &POD_STATUS),
    ],
};

/// Only the scalar part of a pod's status (a client creating a pod sends it empty).
static POD_STATUS: Msg = Msg {
    name: "PodStatus",
    fields: &[
        s(1, "phase"),
        s(3, "message"),
        s(4, "reason"),
        s(11, "nominatedNodeName"),
        s(5, "hostIP"),
        s(6, "podIP"),
        time(7, "startTime"),
        s(9, "qosClass"),
    ],
};

static POD_TEMPLATE_SPEC: Msg = Msg {
    name: "PodTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &POD_SPEC)],
};

static POD_SPEC: Msg = Msg {
    name: "PodSpec",
    fields: &[
        msgs(1, "volumes", &VOLUME),
        msgs(20, "initContainers", &CONTAINER),
        msgs(2, "containers", &CONTAINER),
        s(3, "restartPolicy"),
        i64_p(4, "terminationGracePeriodSeconds"),
        i64_p(5, "activeDeadlineSeconds"),
        s(6, "dnsPolicy"),
        map_s(7, "nodeSelector"),
        s(8, "serviceAccountName"),
        s(9, "serviceAccount"),
        b_p(21, "automountServiceAccountToken"),
        s(10, "nodeName"),
        b_o(11, "hostNetwork"),
        b_o(12, "hostPID"),
        b_o(13, "hostIPC"),
        b_p(27, "shareProcessNamespace"),
        msg_p(14, "securityContext", &POD_SECURITY_CONTEXT),
        msgs(15, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
        s(16, "hostname"),
        s(17, "subdomain"),
        // affinity (18) is skipped.
        s(19, "schedulerName"),
        msgs(22, "tolerations", &TOLERATION),
        s(24, "priorityClassName"),
        i32_p(25, "priority"),
        s_ptr(29, "runtimeClassName"),
        b_p(30, "enableServiceLinks"),
        s_ptr(31, "preemptionPolicy"),
        b_p(35, "setHostnameAsFQDN"),
        msg_p(36, "os", &POD_OS),
        b_p(37, "hostUsers"),
    ],
};

static POD_OS: Msg = Msg {
    name: "PodOS",
    fields: &[s_req(1, "name")],
};

static POD_SECURITY_CONTEXT: Msg = Msg {
    name: "PodSecurityContext",
    fields: &[
        i64_p(2, "runAsUser"),
        i64_p(6, "runAsGroup"),
        b_p(3, "runAsNonRoot"),
        i64s(4, "supplementalGroups"),
        i64_p(5, "fsGroup"),
        msgs(7, "sysctls", &SYSCTL),
        s_ptr(9, "fsGroupChangePolicy"),
        msg_p(10, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static SYSCTL: Msg = Msg {
    name: "Sysctl",
    fields: &[s_req(1, "name"), s_req(2, "value")],
};

static SECCOMP_PROFILE: Msg = Msg {
    name: "SeccompProfile",
    fields: &[s_req(1, "type"), s_ptr(2, "localhostProfile")],
};

static TOLERATION: Msg = Msg {
    name: "Toleration",
    fields: &[
        s(1, "key"),
        s(2, "operator"),
        s(3, "value"),
        s(4, "effect"),
        i64_p(5, "tolerationSeconds"),
    ],
};

static CONTAINER: Msg = Msg {
    name: "Container",
    fields: &[
        s_req(1, "name"),
        s(2, "image"),
        strs(3, "command"),
        strs(4, "args"),
        s(5, "workingDir"),
        msgs(6, "ports", &CONTAINER_PORT),
        msgs(19, "envFrom", &ENV_FROM_SOURCE),
        msgs(7, "env", &ENV_VAR),
        msg(8, "resources", &RESOURCE_REQUIREMENTS),
        msgs(9, "volumeMounts", &VOLUME_MOUNT),
        // probes (10, 11, 22) and lifecycle (12) are skipped.
        s(13, "terminationMessagePath"),
        s(20, "terminationMessagePolicy"),
        s(14, "imagePullPolicy"),
        msg_p(15, "securityContext", &SECURITY_CONTEXT),
        b_o(16, "stdin"),
        b_o(17, "stdinOnce"),
        b_o(18, "tty"),
    ],
};

static CONTAINER_PORT: Msg = Msg {
    name: "ContainerPort",
    fields: &[
        s(1, "name"),
        i32_o(2, "hostPort"),
        i32_r(3, "containerPort"),
        s(4, "protocol"),
        s(5, "hostIP"),
    ],
};

static ENV_VAR: Msg = Msg {
    name: "EnvVar",
    fields: &[
        s_req(1, "name"),
        s(2, "value"),
        msg_p(3, "valueFrom", &ENV_VAR_SOURCE),
    ],
};

static ENV_VAR_SOURCE: Msg = Msg {
    name: "EnvVarSource",
    fields: &[
        msg_p(1, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg_p(2, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        msg_p(3, "configMapKeyRef", &KEY_SELECTOR),
        msg_p(4, "secretKeyRef", &KEY_SELECTOR),
    ],
};

static OBJECT_FIELD_SELECTOR: Msg = Msg {
    name: "ObjectFieldSelector",
    fields: &[s(1, "apiVersion"), s_req(2, "fieldPath")],
};

static RESOURCE_FIELD_SELECTOR: Msg = Msg {
    name: "ResourceFieldSelector",
    fields: &[
        s(1, "containerName"),
        s_req(2, "resource"),
        quantity(3, "divisor"),
    ],
};

/// `ConfigMapKeySelector` and `SecretKeySelector`.
static KEY_SELECTOR: Msg = Msg {
    name: "KeySelector",
    fields: &[
        inline(1, &LOCAL_OBJECT_REFERENCE),
        s_req(2, "key"),
        b_p(3, "optional"),
    ],
};

static ENV_FROM_SOURCE: Msg = Msg {
    name: "EnvFromSource",
    fields: &[
        s(1, "prefix"),
        msg_p(2, "configMapRef", &ENV_SOURCE),
        msg_p(3, "secretRef", &ENV_SOURCE),
    ],
};

/// `ConfigMapEnvSource` and `SecretEnvSource`.
static ENV_SOURCE: Msg = Msg {
    name: "EnvSource",
    fields: &[inline(1, &LOCAL_OBJECT_REFERENCE), b_p(2, "optional")],
};

static RESOURCE_REQUIREMENTS: Msg = Msg {
    name: "ResourceRequirements",
    fields: &[
        map_q(1, "limits"),
        map_q(2, "requests"),
        msgs(3, "claims", &RESOURCE_CLAIM),
    ],
};

static RESOURCE_CLAIM: Msg = Msg {
    name: "ResourceClaim",
    fields: &[s_req(1, "name"), s(2, "request")],
};

static VOLUME_MOUNT: Msg = Msg {
    name: "VolumeMount",
    fields: &[
        s_req(1, "name"),
        b_o(2, "readOnly"),
        s_ptr(7, "recursiveReadOnly"),
        s_req(3, "mountPath"),
        s(4, "subPath"),
        s_ptr(5, "mountPropagation"),
        s(6, "subPathExpr"),
    ],
};

static SECURITY_CONTEXT: Msg = Msg {
    name: "SecurityContext",
    fields: &[
        msg_p(1, "capabilities", &CAPABILITIES),
        b_p(2, "privileged"),
        i64_p(4, "runAsUser"),
        i64_p(8, "runAsGroup"),
        b_p(5, "runAsNonRoot"),
        b_p(6, "readOnlyRootFilesystem"),
        b_p(7, "allowPrivilegeEscalation"),
        s_ptr(9, "procMount"),
        msg_p(11, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static CAPABILITIES: Msg = Msg {
    name: "Capabilities",
    fields: &[strs(1, "add"), strs(2, "drop")],
};

/// A volume with the common sources; other sources are skipped.
static VOLUME: Msg = Msg {
    name: "Volume",
    fields: &[s_req(1, "name"), inline(2, &VOLUME_SOURCE)],
};

static VOLUME_SOURCE: Msg = Msg {
    name: "VolumeSource",
    fields: &[
        msg_p(1, "hostPath", &HOST_PATH_VOLUME_SOURCE),
        msg_p(2, "emptyDir", &EMPTY_DIR_VOLUME_SOURCE),
        msg_p(6, "secret", &SECRET_VOLUME_SOURCE),
        msg_p(10, "persistentVolumeClaim", &PVC_VOLUME_SOURCE),
        msg_p(19, "configMap", &CONFIG_MAP_VOLUME_SOURCE),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Msg = Msg {
    name: "HostPathVolumeSource",
    fields: &[s_req(1, "path"), s_ptr(2, "type")],
};

static EMPTY_DIR_VOLUME_SOURCE: Msg = Msg {
    name: "EmptyDirVolumeSource",
    fields: &[s(1, "medium"), quantity(2, "sizeLimit")],
};

static SECRET_VOLUME_SOURCE: Msg = Msg {
    name: "SecretVolumeSource",
    fields: &[
        s(1, "secretName"),
        msgs(2, "items", &KEY_TO_PATH),
        i32_p(3, "defaultMode"),
        b_p(4, "optional"),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Msg = Msg {
    name: "ConfigMapVolumeSource",
    fields: &[
        inline(1, &LOCAL_OBJECT_REFERENCE),
        msgs(2, "items", &KEY_TO_PATH),
        i32_p(3, "defaultMode"),
        b_p(4, "optional"),
    ],
};

static KEY_TO_PATH: Msg = Msg {
    name: "KeyToPath",
    fields: &[s_req(1, "key"), s_req(2, "path"), i32_p(3, "mode")],
};

static PVC_VOLUME_SOURCE: Msg = Msg {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[s_req(1, "claimName"), b_o(2, "readOnly")],
};

static RESOURCE_QUOTA: Msg = Msg {
    name: "ResourceQuota",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &RESOURCE_QUOTA_SPEC),
        msg(3, "status", &RESOURCE_QUOTA_STATUS),
    ],
};

static RESOURCE_QUOTA_SPEC: Msg = Msg {
    name: "ResourceQuotaSpec",
    fields: &[
        map_q(1, "hard"),
        strs(2, "scopes"),
        msg_p(3, "scopeSelector", &SCOPE_SELECTOR),
    ],
};

static SCOPE_SELECTOR: Msg = Msg {
    name: "ScopeSelector",
    fields: &[msgs(
        1,
        "matchExpressions",
        &SCOPED_RESOURCE_SELECTOR_REQUIREMENT,
    )],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        s_req(1, "scopeName"),
        s_req(2, "operator"),
        strs(3, "values"),
    ],
};

static RESOURCE_QUOTA_STATUS: Msg = Msg {
    name: "ResourceQuotaStatus",
    fields: &[map_q(1, "hard"), map_q(2, "used")],
};

// --- apps/v1 ---

static DEPLOYMENT: Msg = Msg {
    name: "Deployment",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &DEPLOYMENT_SPEC),
        msg(3, "status", &DEPLOYMENT_STATUS),
    ],
};

static DEPLOYMENT_SPEC: Msg = Msg {
    name: "DeploymentSpec",
    fields: &[
        i32_p(1, "replicas"),
        msg_p(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
        msg(4, "strategy", &DEPLOYMENT_STRATEGY),
        i32_o(5, "minReadySeconds"),
        i32_p(6, "revisionHistoryLimit"),
        b_o(7, "paused"),
        i32_p(9, "progressDeadlineSeconds"),
        s_ptr(10, "podReplacementPolicy"),
    ],
};

static DEPLOYMENT_STRATEGY: Msg = Msg {
    name: "DeploymentStrategy",
    fields: &[
        s(1, "type"),
        msg_p(2, "rollingUpdate", &ROLLING_UPDATE_DEPLOYMENT),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Msg = Msg {
    name: "RollingUpdateDeployment",
    fields: &[
        int_or_string(1, "maxUnavailable"),
        int_or_string(2, "maxSurge"),
    ],
};

static DEPLOYMENT_STATUS: Msg = Msg {
    name: "DeploymentStatus",
    fields: &[
        i64_o(1, "observedGeneration"),
        i32_o(2, "replicas"),
        i32_o(3, "updatedReplicas"),
        i32_o(7, "readyReplicas"),
        i32_o(4, "availableReplicas"),
        i32_o(5, "unavailableReplicas"),
        i32_p(9, "terminatingReplicas"),
        msgs(6, "conditions", &DEPLOYMENT_CONDITION),
        i32_p(8, "collisionCount"),
    ],
};

static DEPLOYMENT_CONDITION: Msg = Msg {
    name: "DeploymentCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(6, "lastUpdateTime"),
        time(7, "lastTransitionTime"),
        s(4, "reason"),
        s(5, "message"),
    ],
};

static REPLICA_SET: Msg = Msg {
    name: "ReplicaSet",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &REPLICA_SET_SPEC),
        msg(3, "status", &REPLICA_SET_STATUS),
    ],
};

static REPLICA_SET_SPEC: Msg = Msg {
    name: "ReplicaSetSpec",
    fields: &[
        i32_p(1, "replicas"),
        i32_o(4, "minReadySeconds"),
        msg_p(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
    ],
};

static REPLICA_SET_STATUS: Msg = Msg {
    name: "ReplicaSetStatus",
    fields: &[
        i32_r(1, "replicas"),
        i32_o(2, "fullyLabeledReplicas"),
        i32_o(4, "readyReplicas"),
        i32_o(5, "availableReplicas"),
        i32_p(7, "terminatingReplicas"),
        i64_o(3, "observedGeneration"),
        msgs(6, "conditions", &REPLICA_SET_CONDITION),
    ],
};

static REPLICA_SET_CONDITION: Msg = Msg {
    name: "ReplicaSetCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(3, "lastTransitionTime"),
        s(4, "reason"),
        s(5, "message"),
    ],
};

// --- batch/v1 ---

static JOB: Msg = Msg {
    name: "Job",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &JOB_SPEC),
        msg(3, "status", &JOB_STATUS),
    ],
};

static JOB_SPEC: Msg = Msg {
    name: "JobSpec",
    fields: &[
        i32_p(1, "parallelism"),
        i32_p(2, "completions"),
        i64_p(3, "activeDeadlineSeconds"),
        // podFailurePolicy (11) and successPolicy (16) are skipped.
        i32_p(7, "backoffLimit"),
        i32_p(12, "backoffLimitPerIndex"),
        i32_p(13, "maxFailedIndexes"),
        msg_p(4, "selector", &LABEL_SELECTOR),
        b_p(5, "manualSelector"),
        msg(6, "template", &POD_TEMPLATE_SPEC),
        i32_p(8, "ttlSecondsAfterFinished"),
        s_ptr(9, "completionMode"),
        b_p(10, "suspend"),
        s_ptr(14, "podReplacementPolicy"),
        s_ptr(15, "managedBy"),
    ],
};

static JOB_STATUS: Msg = Msg {
    name: "JobStatus",
    fields: &[
        msgs(1, "conditions", &JOB_CONDITION),
        time(2, "startTime"),
        time(3, "completionTime"),
        i32_o(4, "active"),
        i32_o(5, "succeeded"),
        i32_o(6, "failed"),
        i32_p(11, "terminating"),
        s(7, "completedIndexes"),
        s_ptr(10, "failedIndexes"),
        i32_p(9, "ready"),
    ],
};

static JOB_CONDITION: Msg = Msg {
    name: "JobCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(3, "lastProbeTime"),
        time(4, "lastTransitionTime"),
        s(5, "reason"),
        s(6, "message"),
    ],
};

static CRON_JOB: Msg = Msg {
    name: "CronJob",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &CRON_JOB_SPEC),
        msg(3, "status", &CRON_JOB_STATUS),
    ],
};

static CRON_JOB_SPEC: Msg = Msg {
    name: "CronJobSpec",
    fields: &[
        s_req(1, "schedule"),
        s_ptr(8, "timeZone"),
        i64_p(2, "startingDeadlineSeconds"),
        s(3, "concurrencyPolicy"),
        b_p(4, "suspend"),
        msg(5, "jobTemplate", &JOB_TEMPLATE_SPEC),
        i32_p(6, "successfulJobsHistoryLimit"),
        i32_p(7, "failedJobsHistoryLimit"),
    ],
};

static JOB_TEMPLATE_SPEC: Msg = Msg {
    name: "JobTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &JOB_SPEC)],
};

static CRON_JOB_STATUS: Msg = Msg {
    name: "CronJobStatus",
    fields: &[
        msgs(1, "active", &OBJECT_REFERENCE),
        time(4, "lastScheduleTime"),
        time(5, "lastSuccessfulTime"),
    ],
};

// --- rbac.authorization.k8s.io/v1 ---

static ROLE: Msg = Msg {
    name: "Role",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "rules", &POLICY_RULE),
    ],
};

static CLUSTER_ROLE: Msg = Msg {
    name: "ClusterRole",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "rules", &POLICY_RULE),
        msg_p(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static POLICY_RULE: Msg = Msg {
    name: "PolicyRule",
    fields: &[
        strs(1, "verbs"),
        strs(2, "apiGroups"),
        strs(3, "resources"),
        strs(4, "resourceNames"),
        strs(5, "nonResourceURLs"),
    ],
};

static AGGREGATION_RULE: Msg = Msg {
    name: "AggregationRule",
    fields: &[msgs(1, "clusterRoleSelectors", &LABEL_SELECTOR)],
};

/// `RoleBinding` and `ClusterRoleBinding`.
static ROLE_BINDING: Msg = Msg {
    name: "RoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "subjects", &SUBJECT),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Msg = Msg {
    name: "Subject",
    fields: &[
        s_req(1, "kind"),
        s(2, "apiGroup"),
        s_req(3, "name"),
        s(4, "namespace"),
    ],
};

static ROLE_REF: Msg = Msg {
    name: "RoleRef",
    fields: &[s_req(1, "apiGroup"), s_req(2, "kind"), s_req(3, "name")],
};

// --- authorization.k8s.io/v1 ---

static SELF_SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SelfSubjectAccessReview",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SELF_SUBJECT_ACCESS_REVIEW_SPEC),
        msg(3, "status", &SUBJECT_ACCESS_REVIEW_STATUS),
    ],
};

/// `kubectl auth whoami` sends only metadata; the status is the server's answer (skipped).
static SELF_SUBJECT_REVIEW: Msg = Msg {
    name: "SelfSubjectReview",
    fields: &[msg(1, "metadata", &OBJECT_META)],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        msg_p(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        msg_p(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
    ],
};

static RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "ResourceAttributes",
    fields: &[
        s(1, "namespace"),
        s(2, "verb"),
        s(3, "group"),
        s(4, "version"),
        s(5, "resource"),
        s(6, "subresource"),
        s(7, "name"),
        msg_p(8, "fieldSelector", &FIELD_SELECTOR_ATTRIBUTES),
        msg_p(9, "labelSelector", &LABEL_SELECTOR_ATTRIBUTES),
    ],
};

static FIELD_SELECTOR_ATTRIBUTES: Msg = Msg {
    name: "FieldSelectorAttributes",
    fields: &[
        s(1, "rawSelector"),
        msgs(2, "requirements", &FIELD_SELECTOR_REQUIREMENT),
    ],
};

static FIELD_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "FieldSelectorRequirement",
    fields: &[s_req(1, "key"), s_req(2, "operator"), strs(3, "values")],
};

static LABEL_SELECTOR_ATTRIBUTES: Msg = Msg {
    name: "LabelSelectorAttributes",
    fields: &[
        s(1, "rawSelector"),
        msgs(2, "requirements", &LABEL_SELECTOR_REQUIREMENT),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "NonResourceAttributes",
    fields: &[s(1, "path"), s(2, "verb")],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Msg = Msg {
    name: "SubjectAccessReviewStatus",
    fields: &[
        b_r(1, "allowed"),
        b_o(4, "denied"),
        s(2, "reason"),
        s(3, "evaluationError"),
    ],
};

static SELF_SUBJECT_RULES_REVIEW: Msg = Msg {
    name: "SelfSubjectRulesReview",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SELF_SUBJECT_RULES_REVIEW_SPEC),
        msg(3, "status", &SUBJECT_RULES_REVIEW_STATUS),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[s(1, "namespace")],
};

static SUBJECT_RULES_REVIEW_STATUS: Msg = Msg {
    name: "SubjectRulesReviewStatus",
    fields: &[
        msgs(1, "resourceRules", &RESOURCE_RULE),
        msgs(2, "nonResourceRules", &NON_RESOURCE_RULE),
        b_r(3, "incomplete"),
        s(4, "evaluationError"),
    ],
};

static RESOURCE_RULE: Msg = Msg {
    name: "ResourceRule",
    fields: &[
        strs(1, "verbs"),
        strs(2, "apiGroups"),
        strs(3, "resources"),
        strs(4, "resourceNames"),
    ],
};

static NON_RESOURCE_RULE: Msg = Msg {
    name: "NonResourceRule",
    fields: &[strs(1, "verbs"), strs(2, "nonResourceURLs")],
};

// --- authentication.k8s.io/v1 ---

static TOKEN_REQUEST: Msg = Msg {
    name: "TokenRequest",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &TOKEN_REQUEST_SPEC),
        msg(3, "status", &TOKEN_REQUEST_STATUS),
    ],
};

static TOKEN_REQUEST_SPEC: Msg = Msg {
    name: "TokenRequestSpec",
    fields: &[
        strs(1, "audiences"),
        i64_p(4, "expirationSeconds"),
        msg_p(3, "boundObjectRef", &BOUND_OBJECT_REFERENCE),
    ],
};

static BOUND_OBJECT_REFERENCE: Msg = Msg {
    name: "BoundObjectReference",
    fields: &[s(1, "kind"), s(2, "apiVersion"), s(3, "name"), s(4, "uid")],
};

static TOKEN_REQUEST_STATUS: Msg = Msg {
    name: "TokenRequestStatus",
    fields: &[s_req(1, "token"), time(2, "expirationTimestamp")],
};

// --- scheduling.k8s.io/v1, coordination.k8s.io/v1, policy/v1 ---

static PRIORITY_CLASS: Msg = Msg {
    name: "PriorityClass",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        i32_r(2, "value"),
        b_o(3, "globalDefault"),
        s(4, "description"),
        s_ptr(5, "preemptionPolicy"),
    ],
};

static LEASE: Msg = Msg {
    name: "Lease",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &LEASE_SPEC),
    ],
};

static LEASE_SPEC: Msg = Msg {
    name: "LeaseSpec",
    fields: &[
        s_ptr(1, "holderIdentity"),
        i32_p(2, "leaseDurationSeconds"),
        micro_time(3, "acquireTime"),
        micro_time(4, "renewTime"),
        i32_p(5, "leaseTransitions"),
        s_ptr(6, "strategy"),
        s_ptr(7, "preferredHolder"),
    ],
};

static EVICTION: Msg = Msg {
    name: "Eviction",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg_p(2, "deleteOptions", &DELETE_OPTIONS),
    ],
};

/// The schema of a top-level kind.
pub(super) fn schema_for(group: &str, version: &str, kind: &str) -> Option<&'static Msg> {
    let msg = match (group, version, kind) {
        ("", "v1", "Namespace") => &NAMESPACE,
        ("", "v1", "ConfigMap") => &CONFIG_MAP,
        ("", "v1", "Secret") => &SECRET,
        ("", "v1", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("", "v1", "Service") => &SERVICE,
        ("", "v1", "Pod") => &POD,
        ("", "v1", "ResourceQuota") => &RESOURCE_QUOTA,
        ("", "v1", "Binding") => &BINDING,
        ("apps", "v1", "Deployment") => &DEPLOYMENT,
        ("apps", "v1", "ReplicaSet") => &REPLICA_SET,
        ("batch", "v1", "Job") => &JOB,
        ("batch", "v1", "CronJob") => &CRON_JOB,
        ("rbac.authorization.k8s.io", "v1", "Role") => &ROLE,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => &CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding" | "ClusterRoleBinding") => &ROLE_BINDING,
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => &SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => &SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io", "v1", "TokenRequest") => &TOKEN_REQUEST,
        ("authentication.k8s.io", "v1", "SelfSubjectReview") => &SELF_SUBJECT_REVIEW,
        ("scheduling.k8s.io", "v1", "PriorityClass") => &PRIORITY_CLASS,
        ("coordination.k8s.io", "v1", "Lease") => &LEASE,
        ("policy", "v1", "Eviction") => &EVICTION,
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => &autoscaling::HPA_V2,
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => &autoscaling::HPA_V1,
        _ => return None,
    };
    Some(msg)
}
