//! Field order tables: for each Kubernetes type kemu serves, its JSON field names in the order
//! of the Go struct's declaration (which is the order kube-apiserver writes them in), and for
//! struct-valued fields the nested type. Maps (labels, data, resource lists) have no table: Go
//! writes map keys sorted, as `serde_json::Value` holds them. Data, not logic.

use super::{f, t, Ty};

// --- meta/v1 ---

pub static OBJECT_META: Ty = Ty(&[
    f("name"),
    f("generateName"),
    f("namespace"),
    f("selfLink"),
    f("uid"),
    f("resourceVersion"),
    f("generation"),
    f("creationTimestamp"),
    f("deletionTimestamp"),
    f("deletionGracePeriodSeconds"),
    f("labels"),
    f("annotations"),
    t("ownerReferences", &OWNER_REFERENCE),
    f("finalizers"),
    t("managedFields", &MANAGED_FIELDS_ENTRY),
]);
static OWNER_REFERENCE: Ty = Ty(&[
    f("apiVersion"),
    f("kind"),
    f("name"),
    f("uid"),
    f("controller"),
    f("blockOwnerDeletion"),
]);
static MANAGED_FIELDS_ENTRY: Ty = Ty(&[
    f("manager"),
    f("operation"),
    f("apiVersion"),
    f("time"),
    f("fieldsType"),
    f("fieldsV1"),
    f("subresource"),
]);
pub static LIST_META: Ty = Ty(&[
    f("selfLink"),
    f("resourceVersion"),
    f("continue"),
    f("remainingItemCount"),
]);
pub(super) static LABEL_SELECTOR: Ty = Ty(&[
    f("matchLabels"),
    t("matchExpressions", &SELECTOR_REQUIREMENT),
]);
static SELECTOR_REQUIREMENT: Ty = Ty(&[f("key"), f("operator"), f("values")]);
static CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("observedGeneration"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);
pub static STATUS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &LIST_META),
    f("status"),
    f("message"),
    f("reason"),
    t("details", &STATUS_DETAILS),
    f("code"),
]);
static STATUS_DETAILS: Ty = Ty(&[
    f("name"),
    f("group"),
    f("kind"),
    f("uid"),
    t("causes", &STATUS_CAUSE),
    f("retryAfterSeconds"),
]);
static STATUS_CAUSE: Ty = Ty(&[f("reason"), f("message"), f("field")]);
pub static API_VERSIONS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    f("versions"),
    t("serverAddressByClientCIDRs", &SERVER_ADDRESS),
]);
static SERVER_ADDRESS: Ty = Ty(&[f("clientCIDR"), f("serverAddress")]);
pub static API_GROUP_LIST: Ty = Ty(&[f("kind"), f("apiVersion"), t("groups", &API_GROUP)]);
pub static API_GROUP: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    f("name"),
    t("versions", &GROUP_VERSION),
    t("preferredVersion", &GROUP_VERSION),
    t("serverAddressByClientCIDRs", &SERVER_ADDRESS),
]);
static GROUP_VERSION: Ty = Ty(&[f("groupVersion"), f("version")]);
pub static API_RESOURCE_LIST: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    f("groupVersion"),
    t("resources", &API_RESOURCE),
]);
static API_RESOURCE: Ty = Ty(&[
    f("name"),
    f("singularName"),
    f("namespaced"),
    f("group"),
    f("version"),
    f("kind"),
    f("verbs"),
    f("shortNames"),
    f("categories"),
    f("storageVersionHash"),
]);
pub static TABLE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &LIST_META),
    t("columnDefinitions", &TABLE_COLUMN),
    t("rows", &TABLE_ROW),
]);
static TABLE_COLUMN: Ty = Ty(&[
    f("name"),
    f("type"),
    f("format"),
    f("description"),
    f("priority"),
]);
static TABLE_ROW: Ty = Ty(&[
    f("cells"),
    t("conditions", &TABLE_ROW_CONDITION),
    t("object", &PARTIAL_OBJECT_METADATA),
]);
static TABLE_ROW_CONDITION: Ty = Ty(&[f("type"), f("status"), f("reason"), f("message")]);
pub static PARTIAL_OBJECT_METADATA: Ty =
    Ty(&[f("kind"), f("apiVersion"), t("metadata", &OBJECT_META)]);
/// `version.Info` (`GET /version`).
pub static VERSION_INFO: Ty = Ty(&[
    f("major"),
    f("minor"),
    f("emulationMajor"),
    f("emulationMinor"),
    f("minCompatibilityMajor"),
    f("minCompatibilityMinor"),
    f("gitVersion"),
    f("gitCommit"),
    f("gitTreeState"),
    f("buildDate"),
    f("goVersion"),
    f("compiler"),
    f("platform"),
]);
static DELETE_OPTIONS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    f("gracePeriodSeconds"),
    t("preconditions", &PRECONDITIONS),
    f("orphanDependents"),
    f("propagationPolicy"),
    f("dryRun"),
    f("ignoreStoreReadErrorWithClusterBreakingPotential"),
]);
static PRECONDITIONS: Ty = Ty(&[f("uid"), f("resourceVersion")]);

// --- core/v1 ---

pub static NAMESPACE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("spec"),
    t("status", &NAMESPACE_STATUS),
]);
static NAMESPACE_STATUS: Ty = Ty(&[f("phase"), t("conditions", &NAMESPACE_CONDITION)]);
static NAMESPACE_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);

pub static POD: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &POD_SPEC),
    t("status", &POD_STATUS),
]);
static POD_SPEC: Ty = Ty(&[
    t("volumes", &VOLUME),
    t("initContainers", &CONTAINER),
    t("containers", &CONTAINER),
    t("ephemeralContainers", &CONTAINER),
    f("restartPolicy"),
    f("terminationGracePeriodSeconds"),
    f("activeDeadlineSeconds"),
    f("dnsPolicy"),
    f("nodeSelector"),
    f("serviceAccountName"),
    f("serviceAccount"),
    f("automountServiceAccountToken"),
    f("nodeName"),
    f("hostNetwork"),
    f("hostPID"),
    f("hostIPC"),
    f("shareProcessNamespace"),
    t("securityContext", &POD_SECURITY_CONTEXT),
    t("imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
    f("hostname"),
    f("subdomain"),
    t("affinity", &AFFINITY),
    f("schedulerName"),
    t("tolerations", &TOLERATION),
    t("hostAliases", &HOST_ALIAS),
    f("priorityClassName"),
    f("priority"),
    t("dnsConfig", &POD_DNS_CONFIG),
    f("readinessGates"),
    f("runtimeClassName"),
    f("enableServiceLinks"),
    f("preemptionPolicy"),
    f("overhead"),
    t("topologySpreadConstraints", &TOPOLOGY_SPREAD_CONSTRAINT),
    f("setHostnameAsFQDN"),
    f("os"),
    f("hostUsers"),
    f("schedulingGates"),
    f("resourceClaims"),
    t("resources", &RESOURCE_REQUIREMENTS),
    f("hostnameOverride"),
]);
static LOCAL_OBJECT_REFERENCE: Ty = Ty(&[f("name")]);
static POD_SECURITY_CONTEXT: Ty = Ty(&[
    f("seLinuxOptions"),
    f("windowsOptions"),
    f("runAsUser"),
    f("runAsGroup"),
    f("runAsNonRoot"),
    f("supplementalGroups"),
    f("supplementalGroupsPolicy"),
    f("fsGroup"),
    t("sysctls", &NAME_VALUE),
    f("fsGroupChangePolicy"),
    t("seccompProfile", &SECCOMP_PROFILE),
    t("appArmorProfile", &SECCOMP_PROFILE),
    f("seLinuxChangePolicy"),
]);
static NAME_VALUE: Ty = Ty(&[f("name"), f("value")]);
static SECCOMP_PROFILE: Ty = Ty(&[f("type"), f("localhostProfile")]);
static AFFINITY: Ty = Ty(&[
    t("nodeAffinity", &NODE_AFFINITY),
    t("podAffinity", &POD_AFFINITY),
    t("podAntiAffinity", &POD_AFFINITY),
]);
static NODE_AFFINITY: Ty = Ty(&[
    t(
        "requiredDuringSchedulingIgnoredDuringExecution",
        &NODE_SELECTOR,
    ),
    t(
        "preferredDuringSchedulingIgnoredDuringExecution",
        &PREFERRED_SCHEDULING_TERM,
    ),
]);
pub(super) static NODE_SELECTOR: Ty = Ty(&[t("nodeSelectorTerms", &NODE_SELECTOR_TERM)]);
static NODE_SELECTOR_TERM: Ty = Ty(&[
    t("matchExpressions", &SELECTOR_REQUIREMENT),
    t("matchFields", &SELECTOR_REQUIREMENT),
]);
static PREFERRED_SCHEDULING_TERM: Ty = Ty(&[f("weight"), t("preference", &NODE_SELECTOR_TERM)]);
static POD_AFFINITY: Ty = Ty(&[
    t(
        "requiredDuringSchedulingIgnoredDuringExecution",
        &POD_AFFINITY_TERM,
    ),
    t(
        "preferredDuringSchedulingIgnoredDuringExecution",
        &WEIGHTED_POD_AFFINITY_TERM,
    ),
]);
static POD_AFFINITY_TERM: Ty = Ty(&[
    t("labelSelector", &LABEL_SELECTOR),
    f("namespaces"),
    f("topologyKey"),
    t("namespaceSelector", &LABEL_SELECTOR),
    f("matchLabelKeys"),
    f("mismatchLabelKeys"),
]);
static WEIGHTED_POD_AFFINITY_TERM: Ty =
    Ty(&[f("weight"), t("podAffinityTerm", &POD_AFFINITY_TERM)]);
static TOLERATION: Ty = Ty(&[
    f("key"),
    f("operator"),
    f("value"),
    f("effect"),
    f("tolerationSeconds"),
]);
static HOST_ALIAS: Ty = Ty(&[f("ip"), f("hostnames")]);
static POD_DNS_CONFIG: Ty = Ty(&[f("nameservers"), f("searches"), t("options", &NAME_VALUE)]);
static TOPOLOGY_SPREAD_CONSTRAINT: Ty = Ty(&[
    f("maxSkew"),
    f("topologyKey"),
    f("whenUnsatisfiable"),
    t("labelSelector", &LABEL_SELECTOR),
    f("minDomains"),
    f("nodeAffinityPolicy"),
    f("nodeTaintsPolicy"),
    f("matchLabelKeys"),
]);
static CONTAINER: Ty = Ty(&[
    f("name"),
    f("image"),
    f("command"),
    f("args"),
    f("workingDir"),
    t("ports", &CONTAINER_PORT),
    t("envFrom", &ENV_FROM_SOURCE),
    t("env", &ENV_VAR),
    t("resources", &RESOURCE_REQUIREMENTS),
    f("resizePolicy"),
    f("restartPolicy"),
    f("restartPolicyRules"),
    t("volumeMounts", &VOLUME_MOUNT),
    f("volumeDevices"),
    t("livenessProbe", &PROBE),
    t("readinessProbe", &PROBE),
    t("startupProbe", &PROBE),
    t("lifecycle", &LIFECYCLE),
    f("terminationMessagePath"),
    f("terminationMessagePolicy"),
    f("imagePullPolicy"),
    t("securityContext", &SECURITY_CONTEXT),
    f("stdin"),
    f("stdinOnce"),
    f("tty"),
]);
static CONTAINER_PORT: Ty = Ty(&[
    f("name"),
    f("hostPort"),
    f("containerPort"),
    f("protocol"),
    f("hostIP"),
]);
static ENV_FROM_SOURCE: Ty = Ty(&[
    f("prefix"),
    t("configMapRef", &REF_OPTIONAL),
    t("secretRef", &REF_OPTIONAL),
]);
static REF_OPTIONAL: Ty = Ty(&[f("name"), f("optional")]);
static ENV_VAR: Ty = Ty(&[f("name"), f("value"), t("valueFrom", &ENV_VAR_SOURCE)]);
static ENV_VAR_SOURCE: Ty = Ty(&[
    t("fieldRef", &OBJECT_FIELD_SELECTOR),
    t("resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
    t("configMapKeyRef", &KEY_SELECTOR),
    t("secretKeyRef", &KEY_SELECTOR),
    f("fileKeyRef"),
]);
static OBJECT_FIELD_SELECTOR: Ty = Ty(&[f("apiVersion"), f("fieldPath")]);
static RESOURCE_FIELD_SELECTOR: Ty = Ty(&[f("containerName"), f("resource"), f("divisor")]);
static KEY_SELECTOR: Ty = Ty(&[f("name"), f("key"), f("optional")]);
pub(super) static RESOURCE_REQUIREMENTS: Ty =
    Ty(&[f("limits"), f("requests"), t("claims", &RESOURCE_CLAIM)]);
static RESOURCE_CLAIM: Ty = Ty(&[f("name"), f("request")]);
static VOLUME_MOUNT: Ty = Ty(&[
    f("name"),
    f("readOnly"),
    f("recursiveReadOnly"),
    f("mountPath"),
    f("subPath"),
    f("mountPropagation"),
    f("subPathExpr"),
]);
static PROBE: Ty = Ty(&[
    t("exec", &EXEC_ACTION),
    t("httpGet", &HTTP_GET_ACTION),
    t("tcpSocket", &TCP_SOCKET_ACTION),
    t("grpc", &GRPC_ACTION),
    f("initialDelaySeconds"),
    f("timeoutSeconds"),
    f("periodSeconds"),
    f("successThreshold"),
    f("failureThreshold"),
    f("terminationGracePeriodSeconds"),
]);
static EXEC_ACTION: Ty = Ty(&[f("command")]);
static HTTP_GET_ACTION: Ty = Ty(&[
    f("path"),
    f("port"),
    f("host"),
    f("scheme"),
    t("httpHeaders", &NAME_VALUE),
]);
static TCP_SOCKET_ACTION: Ty = Ty(&[f("port"), f("host")]);
static GRPC_ACTION: Ty = Ty(&[f("port"), f("service")]);
static LIFECYCLE: Ty = Ty(&[
    t("postStart", &LIFECYCLE_HANDLER),
    t("preStop", &LIFECYCLE_HANDLER),
    f("stopSignal"),
]);
static LIFECYCLE_HANDLER: Ty = Ty(&[
    t("exec", &EXEC_ACTION),
    t("httpGet", &HTTP_GET_ACTION),
    t("tcpSocket", &TCP_SOCKET_ACTION),
    f("sleep"),
]);
static SECURITY_CONTEXT: Ty = Ty(&[
    t("capabilities", &CAPABILITIES),
    f("privileged"),
    f("seLinuxOptions"),
    f("windowsOptions"),
    f("runAsUser"),
    f("runAsGroup"),
    f("runAsNonRoot"),
    f("readOnlyRootFilesystem"),
    f("allowPrivilegeEscalation"),
    f("procMount"),
    t("seccompProfile", &SECCOMP_PROFILE),
    t("appArmorProfile", &SECCOMP_PROFILE),
]);
static CAPABILITIES: Ty = Ty(&[f("add"), f("drop")]);
static VOLUME: Ty = Ty(&[
    f("name"),
    t("hostPath", &HOST_PATH),
    t("emptyDir", &EMPTY_DIR),
    f("gcePersistentDisk"),
    f("awsElasticBlockStore"),
    f("gitRepo"),
    t("secret", &SECRET_VOLUME),
    f("nfs"),
    f("iscsi"),
    f("glusterfs"),
    t("persistentVolumeClaim", &PVC_VOLUME),
    f("rbd"),
    f("flexVolume"),
    f("cinder"),
    f("cephfs"),
    f("flocker"),
    t("downwardAPI", &DOWNWARD_API_VOLUME),
    f("fc"),
    f("azureFile"),
    t("configMap", &CONFIG_MAP_VOLUME),
    f("vsphereVolume"),
    f("quobyte"),
    f("azureDisk"),
    f("photonPersistentDisk"),
    t("projected", &PROJECTED_VOLUME),
    f("portworxVolume"),
    f("scaleIO"),
    f("storageos"),
    f("csi"),
    f("ephemeral"),
    f("image"),
]);
pub(super) static HOST_PATH: Ty = Ty(&[f("path"), f("type")]);
static EMPTY_DIR: Ty = Ty(&[f("medium"), f("sizeLimit")]);
static SECRET_VOLUME: Ty = Ty(&[
    f("secretName"),
    t("items", &KEY_TO_PATH),
    f("defaultMode"),
    f("optional"),
]);
static KEY_TO_PATH: Ty = Ty(&[f("key"), f("path"), f("mode")]);
static PVC_VOLUME: Ty = Ty(&[f("claimName"), f("readOnly")]);
static DOWNWARD_API_VOLUME: Ty = Ty(&[t("items", &DOWNWARD_API_FILE), f("defaultMode")]);
static DOWNWARD_API_FILE: Ty = Ty(&[
    f("path"),
    t("fieldRef", &OBJECT_FIELD_SELECTOR),
    t("resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
    f("mode"),
]);
static CONFIG_MAP_VOLUME: Ty = Ty(&[
    f("name"),
    t("items", &KEY_TO_PATH),
    f("defaultMode"),
    f("optional"),
]);
static PROJECTED_VOLUME: Ty = Ty(&[t("sources", &VOLUME_PROJECTION), f("defaultMode")]);
static VOLUME_PROJECTION: Ty = Ty(&[
    t("secret", &PROJECTION),
    t("downwardAPI", &DOWNWARD_API_VOLUME),
    t("configMap", &PROJECTION),
    t("serviceAccountToken", &SERVICE_ACCOUNT_TOKEN_PROJECTION),
    f("clusterTrustBundle"),
    f("podCertificate"),
]);
static PROJECTION: Ty = Ty(&[f("name"), t("items", &KEY_TO_PATH), f("optional")]);
static SERVICE_ACCOUNT_TOKEN_PROJECTION: Ty =
    Ty(&[f("audience"), f("expirationSeconds"), f("path")]);
static POD_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("phase"),
    t("conditions", &POD_CONDITION),
    f("message"),
    f("reason"),
    f("nominatedNodeName"),
    f("hostIP"),
    f("hostIPs"),
    f("podIP"),
    f("podIPs"),
    f("startTime"),
    t("initContainerStatuses", &CONTAINER_STATUS),
    t("containerStatuses", &CONTAINER_STATUS),
    f("qosClass"),
    t("ephemeralContainerStatuses", &CONTAINER_STATUS),
    f("resize"),
    f("resourceClaimStatuses"),
    f("extendedResourceClaimStatus"),
]);
static POD_CONDITION: Ty = Ty(&[
    f("type"),
    f("observedGeneration"),
    f("status"),
    f("lastProbeTime"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);
static CONTAINER_STATUS: Ty = Ty(&[
    f("name"),
    t("state", &CONTAINER_STATE),
    t("lastState", &CONTAINER_STATE),
    f("ready"),
    f("restartCount"),
    f("image"),
    f("imageID"),
    f("containerID"),
    f("started"),
    f("allocatedResources"),
    t("resources", &RESOURCE_REQUIREMENTS),
    t("volumeMounts", &VOLUME_MOUNT_STATUS),
    f("user"),
    f("allocatedResourcesStatus"),
    f("stopSignal"),
]);
static VOLUME_MOUNT_STATUS: Ty = Ty(&[
    f("name"),
    f("mountPath"),
    f("readOnly"),
    f("recursiveReadOnly"),
]);
static CONTAINER_STATE: Ty = Ty(&[
    t("waiting", &STATE_WAITING),
    f("running"),
    t("terminated", &STATE_TERMINATED),
]);
static STATE_WAITING: Ty = Ty(&[f("reason"), f("message")]);
static STATE_TERMINATED: Ty = Ty(&[
    f("exitCode"),
    f("signal"),
    f("reason"),
    f("message"),
    f("startedAt"),
    f("finishedAt"),
    f("containerID"),
]);
pub static POD_TEMPLATE_SPEC: Ty = Ty(&[t("metadata", &OBJECT_META), t("spec", &POD_SPEC)]);
pub static BINDING: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("target", &OBJECT_REFERENCE),
]);
pub(super) static OBJECT_REFERENCE: Ty = Ty(&[
    f("kind"),
    f("namespace"),
    f("name"),
    f("uid"),
    f("apiVersion"),
    f("resourceVersion"),
    f("fieldPath"),
]);

pub static NODE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &NODE_SPEC),
    t("status", &NODE_STATUS),
]);
static NODE_SPEC: Ty = Ty(&[
    f("podCIDR"),
    f("podCIDRs"),
    f("providerID"),
    f("unschedulable"),
    t("taints", &TAINT),
    f("configSource"),
    f("externalID"),
]);
static TAINT: Ty = Ty(&[f("key"), f("value"), f("effect"), f("timeAdded")]);
static NODE_STATUS: Ty = Ty(&[
    f("capacity"),
    f("allocatable"),
    f("phase"),
    t("conditions", &NODE_CONDITION),
    t("addresses", &NODE_ADDRESS),
    f("daemonEndpoints"),
    t("nodeInfo", &NODE_SYSTEM_INFO),
    t("images", &CONTAINER_IMAGE),
    f("volumesInUse"),
    f("volumesAttached"),
    f("config"),
    f("runtimeHandlers"),
    f("features"),
    f("declaredFeatures"),
]);
static NODE_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastHeartbeatTime"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);
static NODE_ADDRESS: Ty = Ty(&[f("type"), f("address")]);
static NODE_SYSTEM_INFO: Ty = Ty(&[
    f("machineID"),
    f("systemUUID"),
    f("bootID"),
    f("kernelVersion"),
    f("osImage"),
    f("containerRuntimeVersion"),
    f("kubeletVersion"),
    f("kubeProxyVersion"),
    f("operatingSystem"),
    f("architecture"),
    f("swap"),
]);
static CONTAINER_IMAGE: Ty = Ty(&[f("names"), f("sizeBytes")]);

pub static EVENT: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("involvedObject", &OBJECT_REFERENCE),
    f("reason"),
    f("message"),
    t("source", &EVENT_SOURCE),
    f("firstTimestamp"),
    f("lastTimestamp"),
    f("count"),
    f("type"),
    f("eventTime"),
    t("series", &EVENT_SERIES),
    f("action"),
    t("related", &OBJECT_REFERENCE),
    f("reportingComponent"),
    f("reportingInstance"),
]);
static EVENT_SOURCE: Ty = Ty(&[f("component"), f("host")]);
static EVENT_SERIES: Ty = Ty(&[f("count"), f("lastObservedTime")]);
pub static EVENTS_V1_EVENT: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("eventTime"),
    t("series", &EVENT_SERIES),
    f("reportingController"),
    f("reportingInstance"),
    f("action"),
    f("reason"),
    t("regarding", &OBJECT_REFERENCE),
    t("related", &OBJECT_REFERENCE),
    f("note"),
    f("type"),
    t("deprecatedSource", &EVENT_SOURCE),
    f("deprecatedFirstTimestamp"),
    f("deprecatedLastTimestamp"),
    f("deprecatedCount"),
]);

pub static CONFIG_MAP: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("immutable"),
    f("data"),
    f("binaryData"),
]);
pub static SECRET: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("immutable"),
    f("data"),
    f("stringData"),
    f("type"),
]);
pub static SERVICE_ACCOUNT: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("secrets", &OBJECT_REFERENCE),
    t("imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
    f("automountServiceAccountToken"),
]);

pub static SERVICE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &SERVICE_SPEC),
    t("status", &SERVICE_STATUS),
]);
static SERVICE_SPEC: Ty = Ty(&[
    t("ports", &SERVICE_PORT),
    f("selector"),
    f("clusterIP"),
    f("clusterIPs"),
    f("type"),
    f("externalIPs"),
    f("sessionAffinity"),
    f("loadBalancerIP"),
    f("loadBalancerSourceRanges"),
    f("externalName"),
    f("externalTrafficPolicy"),
    f("healthCheckNodePort"),
    f("publishNotReadyAddresses"),
    f("sessionAffinityConfig"),
    f("ipFamilies"),
    f("ipFamilyPolicy"),
    f("allocateLoadBalancerNodePorts"),
    f("loadBalancerClass"),
    f("internalTrafficPolicy"),
    f("trafficDistribution"),
]);
static SERVICE_PORT: Ty = Ty(&[
    f("name"),
    f("protocol"),
    f("appProtocol"),
    f("port"),
    f("targetPort"),
    f("nodePort"),
]);
static SERVICE_STATUS: Ty = Ty(&[
    t("loadBalancer", &LOAD_BALANCER_STATUS),
    t("conditions", &CONDITION),
]);
static LOAD_BALANCER_STATUS: Ty = Ty(&[t("ingress", &LOAD_BALANCER_INGRESS)]);
static LOAD_BALANCER_INGRESS: Ty = Ty(&[
    f("ip"),
    f("hostname"),
    f("ipMode"),
    t("ports", &PORT_STATUS),
]);
static PORT_STATUS: Ty = Ty(&[f("port"), f("protocol"), f("error")]);

pub static ENDPOINTS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("subsets", &ENDPOINT_SUBSET),
]);
static ENDPOINT_SUBSET: Ty = Ty(&[
    t("addresses", &ENDPOINT_ADDRESS),
    t("notReadyAddresses", &ENDPOINT_ADDRESS),
    t("ports", &ENDPOINT_PORT),
]);
static ENDPOINT_ADDRESS: Ty = Ty(&[
    f("ip"),
    f("hostname"),
    f("nodeName"),
    t("targetRef", &OBJECT_REFERENCE),
]);
static ENDPOINT_PORT: Ty = Ty(&[f("name"), f("port"), f("protocol"), f("appProtocol")]);

pub static RESOURCE_QUOTA: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &RESOURCE_QUOTA_SPEC),
    t("status", &RESOURCE_QUOTA_STATUS),
]);
static RESOURCE_QUOTA_SPEC: Ty = Ty(&[f("hard"), f("scopes"), t("scopeSelector", &SCOPE_SELECTOR)]);
static SCOPE_SELECTOR: Ty = Ty(&[t("matchExpressions", &SCOPE_REQUIREMENT)]);
static SCOPE_REQUIREMENT: Ty = Ty(&[f("scopeName"), f("operator"), f("values")]);
static RESOURCE_QUOTA_STATUS: Ty = Ty(&[f("hard"), f("used")]);
pub static LIMIT_RANGE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &LIMIT_RANGE_SPEC),
]);
static LIMIT_RANGE_SPEC: Ty = Ty(&[t("limits", &LIMIT_RANGE_ITEM)]);
static LIMIT_RANGE_ITEM: Ty = Ty(&[
    f("type"),
    f("max"),
    f("min"),
    f("default"),
    f("defaultRequest"),
    f("maxLimitRequestRatio"),
]);
pub static REPLICATION_CONTROLLER: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &REPLICATION_CONTROLLER_SPEC),
    t("status", &REPLICA_SET_STATUS),
]);
static REPLICATION_CONTROLLER_SPEC: Ty = Ty(&[
    f("replicas"),
    f("minReadySeconds"),
    f("selector"),
    t("template", &POD_TEMPLATE_SPEC),
]);

// --- apps/v1, batch/v1, autoscaling/v1, policy/v1 ---

pub static DAEMON_SET: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &DAEMON_SET_SPEC),
    t("status", &DAEMON_SET_STATUS),
]);
static DAEMON_SET_SPEC: Ty = Ty(&[
    t("selector", &LABEL_SELECTOR),
    t("template", &POD_TEMPLATE_SPEC),
    t("updateStrategy", &DEPLOYMENT_STRATEGY),
    f("minReadySeconds"),
    f("revisionHistoryLimit"),
]);
static DAEMON_SET_STATUS: Ty = Ty(&[
    f("currentNumberScheduled"),
    f("numberMisscheduled"),
    f("desiredNumberScheduled"),
    f("numberReady"),
    f("observedGeneration"),
    f("updatedNumberScheduled"),
    f("numberAvailable"),
    f("numberUnavailable"),
    f("collisionCount"),
    t("conditions", &NAMESPACE_CONDITION),
]);
pub static DEPLOYMENT: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &DEPLOYMENT_SPEC),
    t("status", &DEPLOYMENT_STATUS),
]);
static DEPLOYMENT_SPEC: Ty = Ty(&[
    f("replicas"),
    t("selector", &LABEL_SELECTOR),
    t("template", &POD_TEMPLATE_SPEC),
    t("strategy", &DEPLOYMENT_STRATEGY),
    f("minReadySeconds"),
    f("revisionHistoryLimit"),
    f("paused"),
    f("progressDeadlineSeconds"),
]);
static DEPLOYMENT_STRATEGY: Ty = Ty(&[f("type"), t("rollingUpdate", &ROLLING_UPDATE)]);
static ROLLING_UPDATE: Ty = Ty(&[f("maxUnavailable"), f("maxSurge")]);
static DEPLOYMENT_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("replicas"),
    f("updatedReplicas"),
    f("readyReplicas"),
    f("availableReplicas"),
    f("unavailableReplicas"),
    f("terminatingReplicas"),
    t("conditions", &DEPLOYMENT_CONDITION),
    f("collisionCount"),
]);
static DEPLOYMENT_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastUpdateTime"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);
pub static REPLICA_SET: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &REPLICA_SET_SPEC),
    t("status", &REPLICA_SET_STATUS),
]);
static REPLICA_SET_SPEC: Ty = Ty(&[
    f("replicas"),
    f("minReadySeconds"),
    t("selector", &LABEL_SELECTOR),
    t("template", &POD_TEMPLATE_SPEC),
]);
static REPLICA_SET_STATUS: Ty = Ty(&[
    f("replicas"),
    f("fullyLabeledReplicas"),
    f("readyReplicas"),
    f("availableReplicas"),
    f("terminatingReplicas"),
    f("observedGeneration"),
    t("conditions", &NAMESPACE_CONDITION),
]);
pub static STATEFUL_SET: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &STATEFUL_SET_SPEC),
    t("status", &STATEFUL_SET_STATUS),
]);
static STATEFUL_SET_SPEC: Ty = Ty(&[
    f("replicas"),
    t("selector", &LABEL_SELECTOR),
    t("template", &POD_TEMPLATE_SPEC),
    t(
        "volumeClaimTemplates",
        &super::storage::PERSISTENT_VOLUME_CLAIM,
    ),
    f("serviceName"),
    f("podManagementPolicy"),
    t("updateStrategy", &STATEFUL_SET_UPDATE_STRATEGY),
    f("revisionHistoryLimit"),
    f("minReadySeconds"),
    t(
        "persistentVolumeClaimRetentionPolicy",
        &PVC_RETENTION_POLICY,
    ),
    f("ordinals"),
]);
static STATEFUL_SET_UPDATE_STRATEGY: Ty =
    Ty(&[f("type"), t("rollingUpdate", &STATEFUL_SET_ROLLING_UPDATE)]);
static STATEFUL_SET_ROLLING_UPDATE: Ty = Ty(&[f("partition"), f("maxUnavailable")]);
static PVC_RETENTION_POLICY: Ty = Ty(&[f("whenDeleted"), f("whenScaled")]);
static STATEFUL_SET_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("replicas"),
    f("readyReplicas"),
    f("currentReplicas"),
    f("updatedReplicas"),
    f("currentRevision"),
    f("updateRevision"),
    f("collisionCount"),
    t("conditions", &NAMESPACE_CONDITION),
    f("availableReplicas"),
]);
pub static CONTROLLER_REVISION: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("data"),
    f("revision"),
]);
pub static JOB: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &JOB_SPEC),
    t("status", &JOB_STATUS),
]);
static JOB_SPEC: Ty = Ty(&[
    f("parallelism"),
    f("completions"),
    f("activeDeadlineSeconds"),
    f("podFailurePolicy"),
    f("successPolicy"),
    f("backoffLimit"),
    f("backoffLimitPerIndex"),
    f("maxFailedIndexes"),
    t("selector", &LABEL_SELECTOR),
    f("manualSelector"),
    t("template", &POD_TEMPLATE_SPEC),
    f("ttlSecondsAfterFinished"),
    f("completionMode"),
    f("suspend"),
    f("podReplacementPolicy"),
    f("managedBy"),
]);
static JOB_STATUS: Ty = Ty(&[
    t("conditions", &JOB_CONDITION),
    f("startTime"),
    f("completionTime"),
    f("active"),
    f("succeeded"),
    f("failed"),
    f("terminating"),
    f("completedIndexes"),
    f("failedIndexes"),
    f("uncountedTerminatedPods"),
    f("ready"),
]);
static JOB_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastProbeTime"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);
pub static CRON_JOB: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &CRON_JOB_SPEC),
    t("status", &CRON_JOB_STATUS),
]);
static CRON_JOB_SPEC: Ty = Ty(&[
    f("schedule"),
    f("timeZone"),
    f("startingDeadlineSeconds"),
    f("concurrencyPolicy"),
    f("suspend"),
    t("jobTemplate", &JOB_TEMPLATE_SPEC),
    f("successfulJobsHistoryLimit"),
    f("failedJobsHistoryLimit"),
]);
static JOB_TEMPLATE_SPEC: Ty = Ty(&[t("metadata", &OBJECT_META), t("spec", &JOB_SPEC)]);
static CRON_JOB_STATUS: Ty = Ty(&[
    t("active", &OBJECT_REFERENCE),
    f("lastScheduleTime"),
    f("lastSuccessfulTime"),
]);
pub static SCALE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("spec"),
    t("status", &SCALE_STATUS),
]);
static SCALE_STATUS: Ty = Ty(&[f("replicas"), f("selector")]);
pub static POD_DISRUPTION_BUDGET: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &PDB_SPEC),
    t("status", &PDB_STATUS),
]);
static PDB_SPEC: Ty = Ty(&[
    f("minAvailable"),
    t("selector", &LABEL_SELECTOR),
    f("maxUnavailable"),
    f("unhealthyPodEvictionPolicy"),
]);
static PDB_STATUS: Ty = Ty(&[
    f("observedGeneration"),
    f("disruptedPods"),
    f("disruptionsAllowed"),
    f("currentHealthy"),
    f("desiredHealthy"),
    f("expectedPods"),
    t("conditions", &CONDITION),
]);
pub static EVICTION: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("deleteOptions", &DELETE_OPTIONS),
]);

// --- coordination, scheduling, discovery, rbac, authorization, authentication ---

pub static LEASE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &LEASE_SPEC),
]);
static LEASE_SPEC: Ty = Ty(&[
    f("holderIdentity"),
    f("leaseDurationSeconds"),
    f("acquireTime"),
    f("renewTime"),
    f("leaseTransitions"),
    f("strategy"),
    f("preferredHolder"),
]);
pub static PRIORITY_CLASS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("value"),
    f("globalDefault"),
    f("description"),
    f("preemptionPolicy"),
]);
pub static ENDPOINT_SLICE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("addressType"),
    t("endpoints", &SLICE_ENDPOINT),
    t("ports", &SLICE_PORT),
]);
static SLICE_ENDPOINT: Ty = Ty(&[
    f("addresses"),
    t("conditions", &SLICE_CONDITIONS),
    f("hostname"),
    t("targetRef", &OBJECT_REFERENCE),
    f("deprecatedTopology"),
    f("nodeName"),
    f("zone"),
    f("hints"),
]);
static SLICE_CONDITIONS: Ty = Ty(&[f("ready"), f("serving"), f("terminating")]);
static SLICE_PORT: Ty = Ty(&[f("name"), f("protocol"), f("port"), f("appProtocol")]);
pub static CLUSTER_ROLE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("rules", &POLICY_RULE),
    f("aggregationRule"),
]);
pub static ROLE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("rules", &POLICY_RULE),
]);
static POLICY_RULE: Ty = Ty(&[
    f("verbs"),
    f("apiGroups"),
    f("resources"),
    f("resourceNames"),
    f("nonResourceURLs"),
]);
pub static ROLE_BINDING: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("subjects", &SUBJECT),
    t("roleRef", &ROLE_REF),
]);
static SUBJECT: Ty = Ty(&[f("kind"), f("apiGroup"), f("name"), f("namespace")]);
static ROLE_REF: Ty = Ty(&[f("apiGroup"), f("kind"), f("name")]);
pub static ACCESS_REVIEW: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &ACCESS_REVIEW_SPEC),
    t("status", &ACCESS_REVIEW_STATUS),
]);
static ACCESS_REVIEW_SPEC: Ty = Ty(&[
    t("resourceAttributes", &RESOURCE_ATTRIBUTES),
    f("nonResourceAttributes"),
    f("user"),
    f("groups"),
    f("extra"),
    f("uid"),
]);
static RESOURCE_ATTRIBUTES: Ty = Ty(&[
    f("namespace"),
    f("verb"),
    f("group"),
    f("version"),
    f("resource"),
    f("subresource"),
    f("name"),
    f("fieldSelector"),
    f("labelSelector"),
]);
static ACCESS_REVIEW_STATUS: Ty =
    Ty(&[f("allowed"), f("denied"), f("reason"), f("evaluationError")]);
pub static SELF_SUBJECT_REVIEW: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("status", &SELF_SUBJECT_REVIEW_STATUS),
]);
static SELF_SUBJECT_REVIEW_STATUS: Ty = Ty(&[t("userInfo", &USER_INFO)]);
static USER_INFO: Ty = Ty(&[f("username"), f("uid"), f("groups"), f("extra")]);
