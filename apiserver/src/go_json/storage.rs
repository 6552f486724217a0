//! Field order of core/v1 PersistentVolumes and PersistentVolumeClaims and of storage.k8s.io/v1
//! StorageClasses, CSIDrivers, CSINodes, VolumeAttachments and CSIStorageCapacities, as their Go
//! structs declare them. Data, not logic.

use super::types::{
    HOST_PATH, LABEL_SELECTOR, NODE_SELECTOR, OBJECT_META, OBJECT_REFERENCE, RESOURCE_REQUIREMENTS,
};
use super::{f, t, Ty};

pub static PERSISTENT_VOLUME: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &PV_SPEC),
    t("status", &PV_STATUS),
]);
/// The spec with its inlined `PersistentVolumeSource` (the volume types, in Go's order).
static PV_SPEC: Ty = Ty(&[
    f("capacity"),
    f("gcePersistentDisk"),
    f("awsElasticBlockStore"),
    t("hostPath", &HOST_PATH),
    f("glusterfs"),
    t("nfs", &NFS),
    f("rbd"),
    f("iscsi"),
    f("cinder"),
    f("cephfs"),
    f("fc"),
    f("flocker"),
    f("flexVolume"),
    f("azureFile"),
    f("vsphereVolume"),
    f("quobyte"),
    f("azureDisk"),
    f("photonPersistentDisk"),
    f("portworxVolume"),
    f("scaleIO"),
    t("local", &LOCAL),
    f("storageos"),
    t("csi", &CSI_SOURCE),
    f("accessModes"),
    t("claimRef", &OBJECT_REFERENCE),
    f("persistentVolumeReclaimPolicy"),
    f("storageClassName"),
    f("mountOptions"),
    f("volumeMode"),
    t("nodeAffinity", &VOLUME_NODE_AFFINITY),
    f("volumeAttributesClassName"),
]);
static NFS: Ty = Ty(&[f("server"), f("path"), f("readOnly")]);
static LOCAL: Ty = Ty(&[f("path"), f("fsType")]);
static CSI_SOURCE: Ty = Ty(&[
    f("driver"),
    f("volumeHandle"),
    f("readOnly"),
    f("fsType"),
    f("volumeAttributes"),
    t("controllerPublishSecretRef", &SECRET_REFERENCE),
    t("nodeStageSecretRef", &SECRET_REFERENCE),
    t("nodePublishSecretRef", &SECRET_REFERENCE),
    t("controllerExpandSecretRef", &SECRET_REFERENCE),
    t("nodeExpandSecretRef", &SECRET_REFERENCE),
]);
static SECRET_REFERENCE: Ty = Ty(&[f("name"), f("namespace")]);
static VOLUME_NODE_AFFINITY: Ty = Ty(&[t("required", &NODE_SELECTOR)]);
static PV_STATUS: Ty = Ty(&[
    f("phase"),
    f("message"),
    f("reason"),
    f("lastPhaseTransitionTime"),
]);

pub static PERSISTENT_VOLUME_CLAIM: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &PVC_SPEC),
    t("status", &PVC_STATUS),
]);
static PVC_SPEC: Ty = Ty(&[
    f("accessModes"),
    t("selector", &LABEL_SELECTOR),
    t("resources", &RESOURCE_REQUIREMENTS),
    f("volumeName"),
    f("storageClassName"),
    f("volumeMode"),
    t("dataSource", &TYPED_LOCAL_OBJECT_REFERENCE),
    t("dataSourceRef", &TYPED_OBJECT_REFERENCE),
    f("volumeAttributesClassName"),
]);
static TYPED_LOCAL_OBJECT_REFERENCE: Ty = Ty(&[f("apiGroup"), f("kind"), f("name")]);
static TYPED_OBJECT_REFERENCE: Ty = Ty(&[f("apiGroup"), f("kind"), f("name"), f("namespace")]);
static PVC_STATUS: Ty = Ty(&[
    f("phase"),
    f("accessModes"),
    f("capacity"),
    t("conditions", &PVC_CONDITION),
    f("allocatedResources"),
    f("allocatedResourceStatuses"),
    f("currentVolumeAttributesClassName"),
    f("modifyVolumeStatus"),
]);
static PVC_CONDITION: Ty = Ty(&[
    f("type"),
    f("status"),
    f("lastProbeTime"),
    f("lastTransitionTime"),
    f("reason"),
    f("message"),
]);

pub static STORAGE_CLASS: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    f("provisioner"),
    f("parameters"),
    f("reclaimPolicy"),
    f("mountOptions"),
    f("allowVolumeExpansion"),
    f("volumeBindingMode"),
    t("allowedTopologies", &TOPOLOGY_SELECTOR_TERM),
]);
static TOPOLOGY_SELECTOR_TERM: Ty = Ty(&[t("matchLabelExpressions", &TOPOLOGY_REQUIREMENT)]);
static TOPOLOGY_REQUIREMENT: Ty = Ty(&[f("key"), f("values")]);

pub static CSI_DRIVER: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &CSI_DRIVER_SPEC),
]);
static CSI_DRIVER_SPEC: Ty = Ty(&[
    f("attachRequired"),
    f("podInfoOnMount"),
    f("volumeLifecycleModes"),
    f("storageCapacity"),
    f("fsGroupPolicy"),
    t("tokenRequests", &TOKEN_REQUEST),
    f("requiresRepublish"),
    f("seLinuxMount"),
    f("nodeAllocatableUpdatePeriodSeconds"),
    f("serviceAccountTokenInSecrets"),
]);
static TOKEN_REQUEST: Ty = Ty(&[f("audience"), f("expirationSeconds")]);

pub static CSI_NODE: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &CSI_NODE_SPEC),
]);
static CSI_NODE_SPEC: Ty = Ty(&[t("drivers", &CSI_NODE_DRIVER)]);
static CSI_NODE_DRIVER: Ty = Ty(&[f("name"), f("nodeID"), f("topologyKeys"), f("allocatable")]);

pub static VOLUME_ATTACHMENT: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("spec", &VOLUME_ATTACHMENT_SPEC),
    t("status", &VOLUME_ATTACHMENT_STATUS),
]);
static VOLUME_ATTACHMENT_SPEC: Ty = Ty(&[
    f("attacher"),
    t("source", &VOLUME_ATTACHMENT_SOURCE),
    f("nodeName"),
]);
static VOLUME_ATTACHMENT_SOURCE: Ty =
    Ty(&[f("persistentVolumeName"), t("inlineVolumeSpec", &PV_SPEC)]);
static VOLUME_ATTACHMENT_STATUS: Ty = Ty(&[
    f("attached"),
    f("attachmentMetadata"),
    t("attachError", &VOLUME_ERROR),
    t("detachError", &VOLUME_ERROR),
]);
static VOLUME_ERROR: Ty = Ty(&[f("time"), f("message"), f("errorCode")]);

pub static CSI_STORAGE_CAPACITY: Ty = Ty(&[
    f("kind"),
    f("apiVersion"),
    t("metadata", &OBJECT_META),
    t("nodeTopology", &LABEL_SELECTOR),
    f("storageClassName"),
    f("capacity"),
    f("maximumVolumeSize"),
]);
