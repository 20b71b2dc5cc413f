//! The Pod message's schema for the fake's protobuf encoding: every message a Pod holds,
//! as (JSON name, field number, kind). Names and numbers are those of k8s.io/api core/v1
//! `generated.proto` as of kubernetes/api commit 10b39a39 (July 2026, v1.37's fields),
//! listed from it by a script and reviewed; the messages Go embeds inline in JSON (a
//! Probe's handler, an EphemeralContainer's common part, a Volume's source, the
//! LocalObjectReference of config map and secret references) are `Inline`. LabelSelector is apimachinery's (meta/v1).

use super::Field;
use super::Kind::*;
use super::OBJECT_META;

const LABEL_SELECTOR_REQUIREMENT: &[Field] =
    &[("key", 1, Str), ("operator", 2, Str), ("values", 3, RepStr)];
const LABEL_SELECTOR: &[Field] = &[
    ("matchLabels", 1, MapStr),
    ("matchExpressions", 2, RepMsg(LABEL_SELECTOR_REQUIREMENT)),
];
const HOST_PATH_VOLUME_SOURCE: &[Field] = &[("path", 1, Str), ("type", 2, Str)];
const EMPTY_DIR_VOLUME_SOURCE: &[Field] = &[
    ("medium", 1, Str),
    ("sizeLimit", 2, Quantity),
    ("mode", 3, Int),
];
const GCE_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] = &[
    ("pdName", 1, Str),
    ("fsType", 2, Str),
    ("partition", 3, Int),
    ("readOnly", 4, Bool),
];
const AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: &[Field] = &[
    ("volumeID", 1, Str),
    ("fsType", 2, Str),
    ("partition", 3, Int),
    ("readOnly", 4, Bool),
];
const GIT_REPO_VOLUME_SOURCE: &[Field] = &[
    ("repository", 1, Str),
    ("revision", 2, Str),
    ("directory", 3, Str),
];
const KEY_TO_PATH: &[Field] = &[
    ("key", 1, Str),
    ("path", 2, Str),
    ("mode", 3, Int),
    ("user", 4, Int),
];
const SECRET_VOLUME_SOURCE: &[Field] = &[
    ("secretName", 1, Str),
    ("items", 2, RepMsg(KEY_TO_PATH)),
    ("defaultMode", 3, Int),
    ("optional", 4, Bool),
    ("defaultUser", 5, Int),
];
const NFS_VOLUME_SOURCE: &[Field] = &[("server", 1, Str), ("path", 2, Str), ("readOnly", 3, Bool)];
const LOCAL_OBJECT_REFERENCE: &[Field] = &[("name", 1, Str)];
const ISCSI_VOLUME_SOURCE: &[Field] = &[
    ("targetPortal", 1, Str),
    ("iqn", 2, Str),
    ("lun", 3, Int),
    ("iscsiInterface", 4, Str),
    ("fsType", 5, Str),
    ("readOnly", 6, Bool),
    ("portals", 7, RepStr),
    ("chapAuthDiscovery", 8, Bool),
    ("chapAuthSession", 11, Bool),
    ("secretRef", 10, Msg(LOCAL_OBJECT_REFERENCE)),
    ("initiatorName", 12, Str),
];
const GLUSTERFS_VOLUME_SOURCE: &[Field] = &[
    ("endpoints", 1, Str),
    ("path", 2, Str),
    ("readOnly", 3, Bool),
];
const PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: &[Field] =
    &[("claimName", 1, Str), ("readOnly", 2, Bool)];
const RBD_VOLUME_SOURCE: &[Field] = &[
    ("monitors", 1, RepStr),
    ("image", 2, Str),
    ("fsType", 3, Str),
    ("pool", 4, Str),
    ("user", 5, Str),
    ("keyring", 6, Str),
    ("secretRef", 7, Msg(LOCAL_OBJECT_REFERENCE)),
    ("readOnly", 8, Bool),
];
const FLEX_VOLUME_SOURCE: &[Field] = &[
    ("driver", 1, Str),
    ("fsType", 2, Str),
    ("secretRef", 3, Msg(LOCAL_OBJECT_REFERENCE)),
    ("readOnly", 4, Bool),
    ("options", 5, MapStr),
];
const CINDER_VOLUME_SOURCE: &[Field] = &[
    ("volumeID", 1, Str),
    ("fsType", 2, Str),
    ("readOnly", 3, Bool),
    ("secretRef", 4, Msg(LOCAL_OBJECT_REFERENCE)),
];
const CEPH_FS_VOLUME_SOURCE: &[Field] = &[
    ("monitors", 1, RepStr),
    ("path", 2, Str),
    ("user", 3, Str),
    ("secretFile", 4, Str),
    ("secretRef", 5, Msg(LOCAL_OBJECT_REFERENCE)),
    ("readOnly", 6, Bool),
];
const FLOCKER_VOLUME_SOURCE: &[Field] = &[("datasetName", 1, Str), ("datasetUUID", 2, Str)];
const OBJECT_FIELD_SELECTOR: &[Field] = &[("apiVersion", 1, Str), ("fieldPath", 2, Str)];
const RESOURCE_FIELD_SELECTOR: &[Field] = &[
    ("containerName", 1, Str),
    ("resource", 2, Str),
    ("divisor", 3, Quantity),
];
const DOWNWARD_API_VOLUME_FILE: &[Field] = &[
    ("path", 1, Str),
    ("fieldRef", 2, Msg(OBJECT_FIELD_SELECTOR)),
    ("resourceFieldRef", 3, Msg(RESOURCE_FIELD_SELECTOR)),
    ("mode", 4, Int),
    ("user", 5, Int),
];
const DOWNWARD_API_VOLUME_SOURCE: &[Field] = &[
    ("items", 1, RepMsg(DOWNWARD_API_VOLUME_FILE)),
    ("defaultMode", 2, Int),
    ("defaultUser", 3, Int),
];
const FC_VOLUME_SOURCE: &[Field] = &[
    ("targetWWNs", 1, RepStr),
    ("lun", 2, Int),
    ("fsType", 3, Str),
    ("readOnly", 4, Bool),
    ("wwids", 5, RepStr),
];
const AZURE_FILE_VOLUME_SOURCE: &[Field] = &[
    ("secretName", 1, Str),
    ("shareName", 2, Str),
    ("readOnly", 3, Bool),
];
const CONFIG_MAP_VOLUME_SOURCE: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("items", 2, RepMsg(KEY_TO_PATH)),
    ("defaultMode", 3, Int),
    ("optional", 4, Bool),
    ("defaultUser", 5, Int),
];
const VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: &[Field] = &[
    ("volumePath", 1, Str),
    ("fsType", 2, Str),
    ("storagePolicyName", 3, Str),
    ("storagePolicyID", 4, Str),
];
const QUOBYTE_VOLUME_SOURCE: &[Field] = &[
    ("registry", 1, Str),
    ("volume", 2, Str),
    ("readOnly", 3, Bool),
    ("user", 4, Str),
    ("group", 5, Str),
    ("tenant", 6, Str),
];
const AZURE_DISK_VOLUME_SOURCE: &[Field] = &[
    ("diskName", 1, Str),
    ("diskURI", 2, Str),
    ("cachingMode", 3, Str),
    ("fsType", 4, Str),
    ("readOnly", 5, Bool),
    ("kind", 6, Str),
];
const PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] = &[("pdID", 1, Str), ("fsType", 2, Str)];
const SECRET_PROJECTION: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("items", 2, RepMsg(KEY_TO_PATH)),
    ("optional", 4, Bool),
];
const DOWNWARD_API_PROJECTION: &[Field] = &[("items", 1, RepMsg(DOWNWARD_API_VOLUME_FILE))];
const CONFIG_MAP_PROJECTION: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("items", 2, RepMsg(KEY_TO_PATH)),
    ("optional", 4, Bool),
];
const SERVICE_ACCOUNT_TOKEN_PROJECTION: &[Field] = &[
    ("audience", 1, Str),
    ("expirationSeconds", 2, Int),
    ("path", 3, Str),
    ("user", 4, Int),
];
const CLUSTER_TRUST_BUNDLE_PROJECTION: &[Field] = &[
    ("name", 1, Str),
    ("signerName", 2, Str),
    ("labelSelector", 3, Msg(LABEL_SELECTOR)),
    ("optional", 5, Bool),
    ("path", 4, Str),
    ("user", 6, Int),
];
const POD_CERTIFICATE_PROJECTION: &[Field] = &[
    ("signerName", 1, Str),
    ("keyType", 2, Str),
    ("maxExpirationSeconds", 3, Int),
    ("credentialBundlePath", 4, Str),
    ("keyPath", 5, Str),
    ("certificateChainPath", 6, Str),
    ("userAnnotations", 7, MapStr),
    ("user", 8, Int),
];
const VOLUME_PROJECTION: &[Field] = &[
    ("secret", 1, Msg(SECRET_PROJECTION)),
    ("downwardAPI", 2, Msg(DOWNWARD_API_PROJECTION)),
    ("configMap", 3, Msg(CONFIG_MAP_PROJECTION)),
    (
        "serviceAccountToken",
        4,
        Msg(SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ),
    (
        "clusterTrustBundle",
        5,
        Msg(CLUSTER_TRUST_BUNDLE_PROJECTION),
    ),
    ("podCertificate", 6, Msg(POD_CERTIFICATE_PROJECTION)),
];
const PROJECTED_VOLUME_SOURCE: &[Field] = &[
    ("sources", 1, RepMsg(VOLUME_PROJECTION)),
    ("defaultMode", 2, Int),
    ("defaultUser", 3, Int),
];
const PORTWORX_VOLUME_SOURCE: &[Field] = &[
    ("volumeID", 1, Str),
    ("fsType", 2, Str),
    ("readOnly", 3, Bool),
];
const SCALE_IO_VOLUME_SOURCE: &[Field] = &[
    ("gateway", 1, Str),
    ("system", 2, Str),
    ("secretRef", 3, Msg(LOCAL_OBJECT_REFERENCE)),
    ("sslEnabled", 4, Bool),
    ("protectionDomain", 5, Str),
    ("storagePool", 6, Str),
    ("storageMode", 7, Str),
    ("volumeName", 8, Str),
    ("fsType", 9, Str),
    ("readOnly", 10, Bool),
];
const STORAGE_OS_VOLUME_SOURCE: &[Field] = &[
    ("volumeName", 1, Str),
    ("volumeNamespace", 2, Str),
    ("fsType", 3, Str),
    ("readOnly", 4, Bool),
    ("secretRef", 5, Msg(LOCAL_OBJECT_REFERENCE)),
];
const CSI_VOLUME_SOURCE: &[Field] = &[
    ("driver", 1, Str),
    ("readOnly", 2, Bool),
    ("fsType", 3, Str),
    ("volumeAttributes", 4, MapStr),
    ("nodePublishSecretRef", 5, Msg(LOCAL_OBJECT_REFERENCE)),
];
const VOLUME_RESOURCE_REQUIREMENTS: &[Field] =
    &[("limits", 1, MapQuantity), ("requests", 2, MapQuantity)];
const TYPED_LOCAL_OBJECT_REFERENCE: &[Field] =
    &[("apiGroup", 1, Str), ("kind", 2, Str), ("name", 3, Str)];
const TYPED_OBJECT_REFERENCE: &[Field] = &[
    ("apiGroup", 1, Str),
    ("kind", 2, Str),
    ("name", 3, Str),
    ("namespace", 4, Str),
];
const PERSISTENT_VOLUME_CLAIM_SPEC: &[Field] = &[
    ("accessModes", 1, RepStr),
    ("selector", 4, Msg(LABEL_SELECTOR)),
    ("resources", 2, Msg(VOLUME_RESOURCE_REQUIREMENTS)),
    ("volumeName", 3, Str),
    ("storageClassName", 5, Str),
    ("volumeMode", 6, Str),
    ("dataSource", 7, Msg(TYPED_LOCAL_OBJECT_REFERENCE)),
    ("dataSourceRef", 8, Msg(TYPED_OBJECT_REFERENCE)),
    ("volumeAttributesClassName", 9, Str),
];
const PERSISTENT_VOLUME_CLAIM_TEMPLATE: &[Field] = &[
    ("metadata", 1, Msg(OBJECT_META)),
    ("spec", 2, Msg(PERSISTENT_VOLUME_CLAIM_SPEC)),
];
const EPHEMERAL_VOLUME_SOURCE: &[Field] = &[(
    "volumeClaimTemplate",
    1,
    Msg(PERSISTENT_VOLUME_CLAIM_TEMPLATE),
)];
const IMAGE_VOLUME_SOURCE: &[Field] = &[("reference", 1, Str), ("pullPolicy", 2, Str)];
const VOLUME_SOURCE: &[Field] = &[
    ("hostPath", 1, Msg(HOST_PATH_VOLUME_SOURCE)),
    ("emptyDir", 2, Msg(EMPTY_DIR_VOLUME_SOURCE)),
    (
        "gcePersistentDisk",
        3,
        Msg(GCE_PERSISTENT_DISK_VOLUME_SOURCE),
    ),
    (
        "awsElasticBlockStore",
        4,
        Msg(AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE),
    ),
    ("gitRepo", 5, Msg(GIT_REPO_VOLUME_SOURCE)),
    ("secret", 6, Msg(SECRET_VOLUME_SOURCE)),
    ("nfs", 7, Msg(NFS_VOLUME_SOURCE)),
    ("iscsi", 8, Msg(ISCSI_VOLUME_SOURCE)),
    ("glusterfs", 9, Msg(GLUSTERFS_VOLUME_SOURCE)),
    (
        "persistentVolumeClaim",
        10,
        Msg(PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE),
    ),
    ("rbd", 11, Msg(RBD_VOLUME_SOURCE)),
    ("flexVolume", 12, Msg(FLEX_VOLUME_SOURCE)),
    ("cinder", 13, Msg(CINDER_VOLUME_SOURCE)),
    ("cephfs", 14, Msg(CEPH_FS_VOLUME_SOURCE)),
    ("flocker", 15, Msg(FLOCKER_VOLUME_SOURCE)),
    ("downwardAPI", 16, Msg(DOWNWARD_API_VOLUME_SOURCE)),
    ("fc", 17, Msg(FC_VOLUME_SOURCE)),
    ("azureFile", 18, Msg(AZURE_FILE_VOLUME_SOURCE)),
    ("configMap", 19, Msg(CONFIG_MAP_VOLUME_SOURCE)),
    ("vsphereVolume", 20, Msg(VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
    ("quobyte", 21, Msg(QUOBYTE_VOLUME_SOURCE)),
    ("azureDisk", 22, Msg(AZURE_DISK_VOLUME_SOURCE)),
    (
        "photonPersistentDisk",
        23,
        Msg(PHOTON_PERSISTENT_DISK_VOLUME_SOURCE),
    ),
    ("projected", 26, Msg(PROJECTED_VOLUME_SOURCE)),
    ("portworxVolume", 24, Msg(PORTWORX_VOLUME_SOURCE)),
    ("scaleIO", 25, Msg(SCALE_IO_VOLUME_SOURCE)),
    ("storageos", 27, Msg(STORAGE_OS_VOLUME_SOURCE)),
    ("csi", 28, Msg(CSI_VOLUME_SOURCE)),
    ("ephemeral", 29, Msg(EPHEMERAL_VOLUME_SOURCE)),
    ("image", 30, Msg(IMAGE_VOLUME_SOURCE)),
];
const VOLUME: &[Field] = &[("name", 1, Str), ("volumeSource", 2, Inline(VOLUME_SOURCE))];
const CONTAINER_PORT: &[Field] = &[
    ("name", 1, Str),
    ("hostPort", 2, Int),
    ("containerPort", 3, Int),
    ("protocol", 4, Str),
    ("hostIP", 5, Str),
];
const CONFIG_MAP_ENV_SOURCE: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("optional", 2, Bool),
];
const SECRET_ENV_SOURCE: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("optional", 2, Bool),
];
const ENV_FROM_SOURCE: &[Field] = &[
    ("prefix", 1, Str),
    ("configMapRef", 2, Msg(CONFIG_MAP_ENV_SOURCE)),
    ("secretRef", 3, Msg(SECRET_ENV_SOURCE)),
];
const CONFIG_MAP_KEY_SELECTOR: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("key", 2, Str),
    ("optional", 3, Bool),
];
const SECRET_KEY_SELECTOR: &[Field] = &[
    ("localObjectReference", 1, Inline(LOCAL_OBJECT_REFERENCE)),
    ("key", 2, Str),
    ("optional", 3, Bool),
];
const FILE_KEY_SELECTOR: &[Field] = &[
    ("volumeName", 1, Str),
    ("path", 2, Str),
    ("key", 3, Str),
    ("optional", 4, Bool),
];
const ENV_VAR_SOURCE: &[Field] = &[
    ("fieldRef", 1, Msg(OBJECT_FIELD_SELECTOR)),
    ("resourceFieldRef", 2, Msg(RESOURCE_FIELD_SELECTOR)),
    ("configMapKeyRef", 3, Msg(CONFIG_MAP_KEY_SELECTOR)),
    ("secretKeyRef", 4, Msg(SECRET_KEY_SELECTOR)),
    ("fileKeyRef", 5, Msg(FILE_KEY_SELECTOR)),
];
const ENV_VAR: &[Field] = &[
    ("name", 1, Str),
    ("value", 2, Str),
    ("valueFrom", 3, Msg(ENV_VAR_SOURCE)),
];
const RESOURCE_CLAIM: &[Field] = &[("name", 1, Str), ("request", 2, Str)];
const RESOURCE_REQUIREMENTS: &[Field] = &[
    ("limits", 1, MapQuantity),
    ("requests", 2, MapQuantity),
    ("claims", 3, RepMsg(RESOURCE_CLAIM)),
];
const CONTAINER_RESIZE_POLICY: &[Field] = &[("resourceName", 1, Str), ("restartPolicy", 2, Str)];
const CONTAINER_RESTART_RULE_ON_EXIT_CODES: &[Field] =
    &[("operator", 1, Str), ("values", 2, RepInt)];
const CONTAINER_RESTART_RULE: &[Field] = &[
    ("action", 1, Str),
    ("exitCodes", 2, Msg(CONTAINER_RESTART_RULE_ON_EXIT_CODES)),
];
const VOLUME_MOUNT: &[Field] = &[
    ("name", 1, Str),
    ("readOnly", 2, Bool),
    ("recursiveReadOnly", 7, Str),
    ("mountPath", 3, Str),
    ("subPath", 4, Str),
    ("mountPropagation", 5, Str),
    ("subPathExpr", 6, Str),
    ("bindMountOptions", 8, RepStr),
];
const VOLUME_DEVICE: &[Field] = &[("name", 1, Str), ("devicePath", 2, Str)];
const EXEC_ACTION: &[Field] = &[("command", 1, RepStr)];
const HTTP_HEADER: &[Field] = &[("name", 1, Str), ("value", 2, Str)];
const HTTP_GET_ACTION: &[Field] = &[
    ("path", 1, Str),
    ("port", 2, IntOrString),
    ("host", 3, Str),
    ("scheme", 4, Str),
    ("httpHeaders", 5, RepMsg(HTTP_HEADER)),
    ("protocol", 6, Str),
];
const TCP_SOCKET_ACTION: &[Field] = &[("port", 1, IntOrString), ("host", 2, Str)];
const GRPC_ACTION: &[Field] = &[("port", 1, Int), ("service", 2, Str), ("mode", 3, Str)];
const PROBE_HANDLER: &[Field] = &[
    ("exec", 1, Msg(EXEC_ACTION)),
    ("httpGet", 2, Msg(HTTP_GET_ACTION)),
    ("tcpSocket", 3, Msg(TCP_SOCKET_ACTION)),
    ("grpc", 4, Msg(GRPC_ACTION)),
];
const PROBE: &[Field] = &[
    ("handler", 1, Inline(PROBE_HANDLER)),
    ("initialDelaySeconds", 2, Int),
    ("timeoutSeconds", 3, Int),
    ("periodSeconds", 4, Int),
    ("successThreshold", 5, Int),
    ("failureThreshold", 6, Int),
    ("terminationGracePeriodSeconds", 7, Int),
];
const SLEEP_ACTION: &[Field] = &[("seconds", 1, Int)];
const LIFECYCLE_HANDLER: &[Field] = &[
    ("exec", 1, Msg(EXEC_ACTION)),
    ("httpGet", 2, Msg(HTTP_GET_ACTION)),
    ("tcpSocket", 3, Msg(TCP_SOCKET_ACTION)),
    ("sleep", 4, Msg(SLEEP_ACTION)),
];
const LIFECYCLE: &[Field] = &[
    ("postStart", 1, Msg(LIFECYCLE_HANDLER)),
    ("preStop", 2, Msg(LIFECYCLE_HANDLER)),
    ("stopSignal", 3, Str),
];
const CAPABILITIES: &[Field] = &[("add", 1, RepStr), ("drop", 2, RepStr)];
const SE_LINUX_OPTIONS: &[Field] = &[
    ("user", 1, Str),
    ("role", 2, Str),
    ("type", 3, Str),
    ("level", 4, Str),
];
const WINDOWS_SECURITY_CONTEXT_OPTIONS: &[Field] = &[
    ("gmsaCredentialSpecName", 1, Str),
    ("gmsaCredentialSpec", 2, Str),
    ("runAsUserName", 3, Str),
    ("hostProcess", 4, Bool),
];
const SECCOMP_PROFILE: &[Field] = &[("type", 1, Str), ("localhostProfile", 2, Str)];
const APP_ARMOR_PROFILE: &[Field] = &[("type", 1, Str), ("localhostProfile", 2, Str)];
const SECURITY_CONTEXT: &[Field] = &[
    ("capabilities", 1, Msg(CAPABILITIES)),
    ("privileged", 2, Bool),
    ("seLinuxOptions", 3, Msg(SE_LINUX_OPTIONS)),
    ("windowsOptions", 10, Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    ("runAsUser", 4, Int),
    ("runAsGroup", 8, Int),
    ("runAsNonRoot", 5, Bool),
    ("readOnlyRootFilesystem", 6, Bool),
    ("allowPrivilegeEscalation", 7, Bool),
    ("procMount", 9, Str),
    ("seccompProfile", 11, Msg(SECCOMP_PROFILE)),
    ("appArmorProfile", 12, Msg(APP_ARMOR_PROFILE)),
];
const CONTAINER: &[Field] = &[
    ("name", 1, Str),
    ("image", 2, Str),
    ("command", 3, RepStr),
    ("args", 4, RepStr),
    ("workingDir", 5, Str),
    ("ports", 6, RepMsg(CONTAINER_PORT)),
    ("envFrom", 19, RepMsg(ENV_FROM_SOURCE)),
    ("env", 7, RepMsg(ENV_VAR)),
    ("resources", 8, Msg(RESOURCE_REQUIREMENTS)),
    ("resizePolicy", 23, RepMsg(CONTAINER_RESIZE_POLICY)),
    ("restartPolicy", 24, Str),
    ("restartPolicyRules", 25, RepMsg(CONTAINER_RESTART_RULE)),
    ("volumeMounts", 9, RepMsg(VOLUME_MOUNT)),
    ("volumeDevices", 21, RepMsg(VOLUME_DEVICE)),
    ("livenessProbe", 10, Msg(PROBE)),
    ("readinessProbe", 11, Msg(PROBE)),
    ("startupProbe", 22, Msg(PROBE)),
    ("lifecycle", 12, Msg(LIFECYCLE)),
    ("terminationMessagePath", 13, Str),
    ("terminationMessagePolicy", 20, Str),
    ("imagePullPolicy", 14, Str),
    ("securityContext", 15, Msg(SECURITY_CONTEXT)),
    ("stdin", 16, Bool),
    ("stdinOnce", 17, Bool),
    ("tty", 18, Bool),
];
// An ephemeral container's common part has a container's fields, with the same numbers.
const EPHEMERAL_CONTAINER_COMMON: &[Field] = CONTAINER;
const EPHEMERAL_CONTAINER: &[Field] = &[
    (
        "ephemeralContainerCommon",
        1,
        Inline(EPHEMERAL_CONTAINER_COMMON),
    ),
    ("targetContainerName", 2, Str),
];
const SYSCTL: &[Field] = &[("name", 1, Str), ("value", 2, Str)];
const POD_SECURITY_CONTEXT: &[Field] = &[
    ("seLinuxOptions", 1, Msg(SE_LINUX_OPTIONS)),
    ("windowsOptions", 8, Msg(WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    ("runAsUser", 2, Int),
    ("runAsGroup", 6, Int),
    ("runAsNonRoot", 3, Bool),
    ("supplementalGroups", 4, RepInt),
    ("supplementalGroupsPolicy", 12, Str),
    ("fsGroup", 5, Int),
    ("sysctls", 7, RepMsg(SYSCTL)),
    ("fsGroupChangePolicy", 9, Str),
    ("seccompProfile", 10, Msg(SECCOMP_PROFILE)),
    ("appArmorProfile", 11, Msg(APP_ARMOR_PROFILE)),
    ("seLinuxChangePolicy", 13, Str),
];
const NODE_SELECTOR_REQUIREMENT: &[Field] =
    &[("key", 1, Str), ("operator", 2, Str), ("values", 3, RepStr)];
const NODE_SELECTOR_TERM: &[Field] = &[
    ("matchExpressions", 1, RepMsg(NODE_SELECTOR_REQUIREMENT)),
    ("matchFields", 2, RepMsg(NODE_SELECTOR_REQUIREMENT)),
];
const NODE_SELECTOR: &[Field] = &[("nodeSelectorTerms", 1, RepMsg(NODE_SELECTOR_TERM))];
const PREFERRED_SCHEDULING_TERM: &[Field] = &[
    ("weight", 1, Int),
    ("preference", 2, Msg(NODE_SELECTOR_TERM)),
];
const NODE_AFFINITY: &[Field] = &[
    (
        "requiredDuringSchedulingIgnoredDuringExecution",
        1,
        Msg(NODE_SELECTOR),
    ),
    (
        "preferredDuringSchedulingIgnoredDuringExecution",
        2,
        RepMsg(PREFERRED_SCHEDULING_TERM),
    ),
];
const POD_AFFINITY_TERM: &[Field] = &[
    ("labelSelector", 1, Msg(LABEL_SELECTOR)),
    ("namespaces", 2, RepStr),
    ("topologyKey", 3, Str),
    ("namespaceSelector", 4, Msg(LABEL_SELECTOR)),
    ("matchLabelKeys", 5, RepStr),
    ("mismatchLabelKeys", 6, RepStr),
];
const WEIGHTED_POD_AFFINITY_TERM: &[Field] = &[
    ("weight", 1, Int),
    ("podAffinityTerm", 2, Msg(POD_AFFINITY_TERM)),
];
const POD_AFFINITY: &[Field] = &[
    (
        "requiredDuringSchedulingIgnoredDuringExecution",
        1,
        RepMsg(POD_AFFINITY_TERM),
    ),
    (
        "preferredDuringSchedulingIgnoredDuringExecution",
        2,
        RepMsg(WEIGHTED_POD_AFFINITY_TERM),
    ),
];
/// PodAntiAffinity's message has PodAffinity's fields and numbers.
const POD_ANTI_AFFINITY: &[Field] = POD_AFFINITY;
const AFFINITY: &[Field] = &[
    ("nodeAffinity", 1, Msg(NODE_AFFINITY)),
    ("podAffinity", 2, Msg(POD_AFFINITY)),
    ("podAntiAffinity", 3, Msg(POD_ANTI_AFFINITY)),
];
const TOLERATION: &[Field] = &[
    ("key", 1, Str),
    ("operator", 2, Str),
    ("value", 3, Str),
    ("effect", 4, Str),
    ("tolerationSeconds", 5, Int),
];
const HOST_ALIAS: &[Field] = &[("ip", 1, Str), ("hostnames", 2, RepStr)];
const POD_DNS_CONFIG_OPTION: &[Field] = &[("name", 1, Str), ("value", 2, Str)];
const POD_DNS_CONFIG: &[Field] = &[
    ("nameservers", 1, RepStr),
    ("searches", 2, RepStr),
    ("options", 3, RepMsg(POD_DNS_CONFIG_OPTION)),
];
const POD_READINESS_GATE: &[Field] = &[("conditionType", 1, Str)];
const TOPOLOGY_SPREAD_CONSTRAINT: &[Field] = &[
    ("maxSkew", 1, Int),
    ("topologyKey", 2, Str),
    ("whenUnsatisfiable", 3, Str),
    ("labelSelector", 4, Msg(LABEL_SELECTOR)),
    ("minDomains", 5, Int),
    ("nodeAffinityPolicy", 6, Str),
    ("nodeTaintsPolicy", 7, Str),
    ("matchLabelKeys", 8, RepStr),
];
const POD_OS: &[Field] = &[("name", 1, Str)];
const POD_SCHEDULING_GATE: &[Field] = &[("name", 1, Str)];
const POD_RESOURCE_CLAIM: &[Field] = &[
    ("name", 1, Str),
    ("resourceClaimName", 3, Str),
    ("resourceClaimTemplateName", 4, Str),
];
const POD_SCHEDULING_GROUP: &[Field] = &[("podGroupName", 1, Str)];
const EVICTION_RESPONDER: &[Field] = &[("name", 1, Str), ("priority", 2, Int)];
const POD_SPEC: &[Field] = &[
    ("volumes", 1, RepMsg(VOLUME)),
    ("initContainers", 20, RepMsg(CONTAINER)),
    ("containers", 2, RepMsg(CONTAINER)),
    ("ephemeralContainers", 34, RepMsg(EPHEMERAL_CONTAINER)),
    ("restartPolicy", 3, Str),
    ("terminationGracePeriodSeconds", 4, Int),
    ("activeDeadlineSeconds", 5, Int),
    ("dnsPolicy", 6, Str),
    ("nodeSelector", 7, MapStr),
    ("serviceAccountName", 8, Str),
    ("serviceAccount", 9, Str),
    ("automountServiceAccountToken", 21, Bool),
    ("nodeName", 10, Str),
    ("hostNetwork", 11, Bool),
    ("hostPID", 12, Bool),
    ("hostIPC", 13, Bool),
    ("shareProcessNamespace", 27, Bool),
    ("securityContext", 14, Msg(POD_SECURITY_CONTEXT)),
    ("imagePullSecrets", 15, RepMsg(LOCAL_OBJECT_REFERENCE)),
    ("hostname", 16, Str),
    ("subdomain", 17, Str),
    ("affinity", 18, Msg(AFFINITY)),
    ("schedulerName", 19, Str),
    ("tolerations", 22, RepMsg(TOLERATION)),
    ("hostAliases", 23, RepMsg(HOST_ALIAS)),
    ("priorityClassName", 24, Str),
    ("priority", 25, Int),
    ("dnsConfig", 26, Msg(POD_DNS_CONFIG)),
    ("readinessGates", 28, RepMsg(POD_READINESS_GATE)),
    ("runtimeClassName", 29, Str),
    ("enableServiceLinks", 30, Bool),
    ("preemptionPolicy", 31, Str),
    ("overhead", 32, MapQuantity),
    (
        "topologySpreadConstraints",
        33,
        RepMsg(TOPOLOGY_SPREAD_CONSTRAINT),
    ),
    ("setHostnameAsFQDN", 35, Bool),
    ("os", 36, Msg(POD_OS)),
    ("hostUsers", 37, Bool),
    ("schedulingGates", 38, RepMsg(POD_SCHEDULING_GATE)),
    ("resourceClaims", 39, RepMsg(POD_RESOURCE_CLAIM)),
    ("resources", 40, Msg(RESOURCE_REQUIREMENTS)),
    ("hostnameOverride", 41, Str),
    ("schedulingGroup", 43, Msg(POD_SCHEDULING_GROUP)),
    ("evictionResponders", 44, RepMsg(EVICTION_RESPONDER)),
];
const POD_CONDITION: &[Field] = &[
    ("type", 1, Str),
    ("observedGeneration", 7, Int),
    ("status", 2, Str),
    ("lastProbeTime", 3, Time),
    ("lastTransitionTime", 4, Time),
    ("reason", 5, Str),
    ("message", 6, Str),
];
const HOST_IP: &[Field] = &[("ip", 1, Str)];
const POD_IP: &[Field] = &[("ip", 1, Str)];
const CONTAINER_STATE_WAITING: &[Field] = &[("reason", 1, Str), ("message", 2, Str)];
const CONTAINER_STATE_RUNNING: &[Field] = &[("startedAt", 1, Time)];
const CONTAINER_STATE_TERMINATED: &[Field] = &[
    ("exitCode", 1, Int),
    ("signal", 2, Int),
    ("reason", 3, Str),
    ("message", 4, Str),
    ("startedAt", 5, Time),
    ("finishedAt", 6, Time),
    ("containerID", 7, Str),
];
const CONTAINER_STATE: &[Field] = &[
    ("waiting", 1, Msg(CONTAINER_STATE_WAITING)),
    ("running", 2, Msg(CONTAINER_STATE_RUNNING)),
    ("terminated", 3, Msg(CONTAINER_STATE_TERMINATED)),
];
const IMAGE_VOLUME_STATUS: &[Field] = &[("imageRef", 1, Str)];
const VOLUME_STATUS: &[Field] = &[("image", 1, Msg(IMAGE_VOLUME_STATUS))];
const VOLUME_MOUNT_STATUS: &[Field] = &[
    ("name", 1, Str),
    ("mountPath", 2, Str),
    ("readOnly", 3, Bool),
    ("recursiveReadOnly", 4, Str),
    ("volumeStatus", 5, Msg(VOLUME_STATUS)),
];
const LINUX_CONTAINER_USER: &[Field] = &[
    ("uid", 1, Int),
    ("gid", 2, Int),
    ("supplementalGroups", 3, RepInt),
];
const CONTAINER_USER: &[Field] = &[("linux", 1, Msg(LINUX_CONTAINER_USER))];
const RESOURCE_HEALTH: &[Field] = &[
    ("resourceID", 1, Str),
    ("health", 2, Str),
    ("message", 6, Str),
];
const RESOURCE_STATUS: &[Field] = &[("name", 1, Str), ("resources", 2, RepMsg(RESOURCE_HEALTH))];
const CONTAINER_STATUS: &[Field] = &[
    ("name", 1, Str),
    ("state", 2, Msg(CONTAINER_STATE)),
    ("lastState", 3, Msg(CONTAINER_STATE)),
    ("ready", 4, Bool),
    ("restartCount", 5, Int),
    ("image", 6, Str),
    ("imageID", 7, Str),
    ("containerID", 8, Str),
    ("started", 9, Bool),
    ("allocatedResources", 10, MapQuantity),
    ("resources", 11, Msg(RESOURCE_REQUIREMENTS)),
    ("volumeMounts", 12, RepMsg(VOLUME_MOUNT_STATUS)),
    ("user", 13, Msg(CONTAINER_USER)),
    ("allocatedResourcesStatus", 14, RepMsg(RESOURCE_STATUS)),
    ("stopSignal", 15, Str),
];
const POD_RESOURCE_CLAIM_STATUS: &[Field] = &[("name", 1, Str), ("resourceClaimName", 2, Str)];
const CONTAINER_EXTENDED_RESOURCE_REQUEST: &[Field] = &[
    ("containerName", 1, Str),
    ("resourceName", 2, Str),
    ("requestName", 3, Str),
];
const POD_EXTENDED_RESOURCE_CLAIM_STATUS: &[Field] = &[
    (
        "requestMappings",
        1,
        RepMsg(CONTAINER_EXTENDED_RESOURCE_REQUEST),
    ),
    ("resourceClaimName", 2, Str),
];
const NODE_ALLOCATABLE_MAPPED_RESOURCES: &[Field] = &[("name", 1, Str), ("quantity", 2, Quantity)];
const NODE_ALLOCATABLE_OVERHEAD_RESOURCES: &[Field] = &[
    ("name", 1, Str),
    ("perPod", 2, Quantity),
    ("perContainer", 3, Quantity),
];
const NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS: &[Field] = &[
    ("resourceClaimName", 1, Str),
    ("containers", 2, RepStr),
    ("mapping", 4, RepMsg(NODE_ALLOCATABLE_MAPPED_RESOURCES)),
    ("overhead", 5, RepMsg(NODE_ALLOCATABLE_OVERHEAD_RESOURCES)),
];
const VOLUME_HEALTH_CONDITION: &[Field] =
    &[("status", 1, Str), ("reason", 2, Str), ("message", 3, Str)];
const POD_VOLUME_HEALTH: &[Field] = &[
    ("name", 1, Str),
    ("healthConditions", 2, RepMsg(VOLUME_HEALTH_CONDITION)),
    ("lastTransitionTime", 3, Time),
];
const POD_STATUS: &[Field] = &[
    ("observedGeneration", 17, Int),
    ("phase", 1, Str),
    ("conditions", 2, RepMsg(POD_CONDITION)),
    ("message", 3, Str),
    ("reason", 4, Str),
    ("nominatedNodeName", 11, Str),
    ("hostIP", 5, Str),
    ("hostIPs", 16, RepMsg(HOST_IP)),
    ("podIP", 6, Str),
    ("podIPs", 12, RepMsg(POD_IP)),
    ("startTime", 7, Time),
    ("initContainerStatuses", 10, RepMsg(CONTAINER_STATUS)),
    ("containerStatuses", 8, RepMsg(CONTAINER_STATUS)),
    ("qosClass", 9, Str),
    ("ephemeralContainerStatuses", 13, RepMsg(CONTAINER_STATUS)),
    ("resize", 14, Str),
    (
        "resourceClaimStatuses",
        15,
        RepMsg(POD_RESOURCE_CLAIM_STATUS),
    ),
    (
        "extendedResourceClaimStatus",
        18,
        Msg(POD_EXTENDED_RESOURCE_CLAIM_STATUS),
    ),
    ("allocatedResources", 19, MapQuantity),
    ("resources", 20, Msg(RESOURCE_REQUIREMENTS)),
    (
        "nodeAllocatableResourceClaimStatuses",
        21,
        RepMsg(NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS),
    ),
    ("volumeHealth", 22, RepMsg(POD_VOLUME_HEALTH)),
];
pub(super) const POD: &[Field] = &[
    ("metadata", 1, Msg(OBJECT_META)),
    ("spec", 2, Msg(POD_SPEC)),
    ("status", 3, Msg(POD_STATUS)),
];
