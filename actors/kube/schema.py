"""Our own protobuf schema for the Kubernetes objects a guest receives: Pod, Node, NodeList.

This module owns the *wire schema*: the protobuf messages reachable from Pod, Node and
NodeList in ``k8s.io.api.core.v1`` and the apimachinery packages it uses, with the field
names, numbers, types and labels of Kubernetes' public ``generated.proto`` files. There
is no protoc step: at import the tables become ``FileDescriptorProto``s in a private
``DescriptorPool`` (never the global one), and message classes come from
``message_factory.GetMessageClass``. Its one user is the codec (``actors.kube.codec``);
the one JSON fact kept here is which fields are Go *embedded* structs (``LABEL EMBED``),
whose fields JSON flattens into the parent. Everything built here is immutable after
import. `docs/abi-notes.md` ("The objects a guest reads") tells the story.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

CORE_V1: Final = "k8s.io.api.core.v1"
META_V1: Final = "k8s.io.apimachinery.pkg.apis.meta.v1"
RESOURCE: Final = "k8s.io.apimachinery.pkg.api.resource"
INTSTR: Final = "k8s.io.apimachinery.pkg.util.intstr"

#: Short prefixes usable in a table's type_name column for types of another package.
_ALIASES: Final = {"meta": META_V1, "resource": RESOURCE, "intstr": INTSTR, "core": CORE_V1}

# Field types (the table's third column).
STRING: Final = "string"
INT32: Final = "int32"
INT64: Final = "int64"
BOOL: Final = "bool"
BYTES: Final = "bytes"
MESSAGE: Final = "message"

# Labels (the table's fourth column). MAP is ``map<string, T>`` with T given by the type
# (and type_name for a message value); EMBED is an optional message field whose Go field
# is an embedded struct, so its JSON fields appear inline in the parent object.
OPTIONAL: Final = "optional"
REPEATED: Final = "repeated"
MAP: Final = "map"
EMBED: Final = "embed"

_S, _I32, _I64, _B, _BY, _M = STRING, INT32, INT64, BOOL, BYTES, MESSAGE
_O, _R, _MAP, _EMB = OPTIONAL, REPEATED, MAP, EMBED

_Row = tuple[str, int, str, str, str | None]

# --------------------------------------------------------------------------------------
# k8s.io.apimachinery.pkg.util.intstr / pkg.api.resource
# --------------------------------------------------------------------------------------

_INTSTR_TABLE: dict[str, list[_Row]] = {
    # type: 0 = Int (intVal holds the value), 1 = String (strVal holds it).
    "IntOrString": [
        ("type", 1, _I64, _O, None),
        ("intVal", 2, _I32, _O, None),
        ("strVal", 3, _S, _O, None),
    ],
}

_RESOURCE_TABLE: dict[str, list[_Row]] = {
    # The quantity's text, e.g. "100m", "2Gi".
    "Quantity": [("string", 1, _S, _O, None)],
}

# --------------------------------------------------------------------------------------
# k8s.io.apimachinery.pkg.apis.meta.v1
# --------------------------------------------------------------------------------------

_TIMESTAMP: list[_Row] = [("seconds", 1, _I64, _O, None), ("nanos", 2, _I32, _O, None)]

_META_TABLE: dict[str, list[_Row]] = {
    "Time": _TIMESTAMP,
    "MicroTime": _TIMESTAMP,
    "FieldsV1": [("Raw", 1, _BY, _O, None)],
    "ObjectMeta": [
        ("name", 1, _S, _O, None),
        ("generateName", 2, _S, _O, None),
        ("namespace", 3, _S, _O, None),
        ("selfLink", 4, _S, _O, None),
        ("uid", 5, _S, _O, None),
        ("resourceVersion", 6, _S, _O, None),
        ("generation", 7, _I64, _O, None),
        ("creationTimestamp", 8, _M, _O, "Time"),
        ("deletionTimestamp", 9, _M, _O, "Time"),
        ("deletionGracePeriodSeconds", 10, _I64, _O, None),
        ("labels", 11, _S, _MAP, None),
        ("annotations", 12, _S, _MAP, None),
        ("ownerReferences", 13, _M, _R, "OwnerReference"),
        ("finalizers", 14, _S, _R, None),
        ("managedFields", 17, _M, _R, "ManagedFieldsEntry"),
    ],
    "OwnerReference": [
        ("kind", 1, _S, _O, None),
        ("name", 3, _S, _O, None),
        ("uid", 4, _S, _O, None),
        ("apiVersion", 5, _S, _O, None),
        ("controller", 6, _B, _O, None),
        ("blockOwnerDeletion", 7, _B, _O, None),
    ],
    "ManagedFieldsEntry": [
        ("manager", 1, _S, _O, None),
        ("operation", 2, _S, _O, None),
        ("apiVersion", 3, _S, _O, None),
        ("time", 4, _M, _O, "Time"),
        ("fieldsType", 6, _S, _O, None),
        ("fieldsV1", 7, _M, _O, "FieldsV1"),
        ("subresource", 8, _S, _O, None),
    ],
    "ListMeta": [
        ("selfLink", 1, _S, _O, None),
        ("resourceVersion", 2, _S, _O, None),
        ("continue", 3, _S, _O, None),
        ("remainingItemCount", 4, _I64, _O, None),
    ],
    "LabelSelector": [
        ("matchLabels", 1, _S, _MAP, None),
        ("matchExpressions", 2, _M, _R, "LabelSelectorRequirement"),
    ],
    "LabelSelectorRequirement": [
        ("key", 1, _S, _O, None),
        ("operator", 2, _S, _O, None),
        ("values", 3, _S, _R, None),
    ],
}

# --------------------------------------------------------------------------------------
# k8s.io.api.core.v1: the messages reachable from Pod, Node and NodeList
# --------------------------------------------------------------------------------------

# Container and EphemeralContainerCommon carry the same fields under the same numbers.
_CONTAINER_FIELDS: list[_Row] = [
    ("name", 1, _S, _O, None),
    ("image", 2, _S, _O, None),
    ("command", 3, _S, _R, None),
    ("args", 4, _S, _R, None),
    ("workingDir", 5, _S, _O, None),
    ("ports", 6, _M, _R, "ContainerPort"),
    ("env", 7, _M, _R, "EnvVar"),
    ("resources", 8, _M, _O, "ResourceRequirements"),
    ("volumeMounts", 9, _M, _R, "VolumeMount"),
    ("livenessProbe", 10, _M, _O, "Probe"),
    ("readinessProbe", 11, _M, _O, "Probe"),
    ("lifecycle", 12, _M, _O, "Lifecycle"),
    ("terminationMessagePath", 13, _S, _O, None),
    ("imagePullPolicy", 14, _S, _O, None),
    ("securityContext", 15, _M, _O, "SecurityContext"),
    ("stdin", 16, _B, _O, None),
    ("stdinOnce", 17, _B, _O, None),
    ("tty", 18, _B, _O, None),
    ("envFrom", 19, _M, _R, "EnvFromSource"),
    ("terminationMessagePolicy", 20, _S, _O, None),
    ("volumeDevices", 21, _M, _R, "VolumeDevice"),
    ("startupProbe", 22, _M, _O, "Probe"),
    ("resizePolicy", 23, _M, _R, "ContainerResizePolicy"),
    ("restartPolicy", 24, _S, _O, None),
    ("restartPolicyRules", 25, _M, _R, "ContainerRestartRule"),
]

# Messages whose first field is an embedded LocalObjectReference (JSON: "name" inline).
_LOCAL_REF: _Row = ("localObjectReference", 1, _M, _EMB, "LocalObjectReference")

_CORE_TABLE: dict[str, list[_Row]] = {
    # --- Pod ---------------------------------------------------------------------------
    "Pod": [
        ("metadata", 1, _M, _O, "meta.ObjectMeta"),
        ("spec", 2, _M, _O, "PodSpec"),
        ("status", 3, _M, _O, "PodStatus"),
    ],
    "PodSpec": [
        ("volumes", 1, _M, _R, "Volume"),
        ("containers", 2, _M, _R, "Container"),
        ("restartPolicy", 3, _S, _O, None),
        ("terminationGracePeriodSeconds", 4, _I64, _O, None),
        ("activeDeadlineSeconds", 5, _I64, _O, None),
        ("dnsPolicy", 6, _S, _O, None),
        ("nodeSelector", 7, _S, _MAP, None),
        ("serviceAccountName", 8, _S, _O, None),
        ("serviceAccount", 9, _S, _O, None),
        ("nodeName", 10, _S, _O, None),
        ("hostNetwork", 11, _B, _O, None),
        ("hostPID", 12, _B, _O, None),
        ("hostIPC", 13, _B, _O, None),
        ("securityContext", 14, _M, _O, "PodSecurityContext"),
        ("imagePullSecrets", 15, _M, _R, "LocalObjectReference"),
        ("hostname", 16, _S, _O, None),
        ("subdomain", 17, _S, _O, None),
        ("affinity", 18, _M, _O, "Affinity"),
        ("schedulerName", 19, _S, _O, None),
        ("initContainers", 20, _M, _R, "Container"),
        ("automountServiceAccountToken", 21, _B, _O, None),
        ("tolerations", 22, _M, _R, "Toleration"),
        ("hostAliases", 23, _M, _R, "HostAlias"),
        ("priorityClassName", 24, _S, _O, None),
        ("priority", 25, _I32, _O, None),
        ("dnsConfig", 26, _M, _O, "PodDNSConfig"),
        ("shareProcessNamespace", 27, _B, _O, None),
        ("readinessGates", 28, _M, _R, "PodReadinessGate"),
        ("runtimeClassName", 29, _S, _O, None),
        ("enableServiceLinks", 30, _B, _O, None),
        ("preemptionPolicy", 31, _S, _O, None),
        ("overhead", 32, _M, _MAP, "resource.Quantity"),
        ("topologySpreadConstraints", 33, _M, _R, "TopologySpreadConstraint"),
        ("ephemeralContainers", 34, _M, _R, "EphemeralContainer"),
        ("setHostnameAsFQDN", 35, _B, _O, None),
        ("os", 36, _M, _O, "PodOS"),
        ("hostUsers", 37, _B, _O, None),
        ("schedulingGates", 38, _M, _R, "PodSchedulingGate"),
        ("resourceClaims", 39, _M, _R, "PodResourceClaim"),
        ("resources", 40, _M, _O, "ResourceRequirements"),
        ("hostnameOverride", 41, _S, _O, None),
        ("workloadRef", 42, _M, _O, "WorkloadReference"),
    ],
    "PodStatus": [
        ("phase", 1, _S, _O, None),
        ("conditions", 2, _M, _R, "PodCondition"),
        ("message", 3, _S, _O, None),
        ("reason", 4, _S, _O, None),
        ("hostIP", 5, _S, _O, None),
        ("podIP", 6, _S, _O, None),
        ("startTime", 7, _M, _O, "meta.Time"),
        ("containerStatuses", 8, _M, _R, "ContainerStatus"),
        ("qosClass", 9, _S, _O, None),
        ("initContainerStatuses", 10, _M, _R, "ContainerStatus"),
        ("nominatedNodeName", 11, _S, _O, None),
        ("podIPs", 12, _M, _R, "PodIP"),
        ("ephemeralContainerStatuses", 13, _M, _R, "ContainerStatus"),
        ("resize", 14, _S, _O, None),
        ("resourceClaimStatuses", 15, _M, _R, "PodResourceClaimStatus"),
        ("hostIPs", 16, _M, _R, "HostIP"),
        ("observedGeneration", 17, _I64, _O, None),
        ("extendedResourceClaimStatus", 18, _M, _O, "PodExtendedResourceClaimStatus"),
        ("allocatedResources", 19, _M, _MAP, "resource.Quantity"),
        ("resources", 20, _M, _O, "ResourceRequirements"),
    ],
    "PodCondition": [
        ("type", 1, _S, _O, None),
        ("status", 2, _S, _O, None),
        ("lastProbeTime", 3, _M, _O, "meta.Time"),
        ("lastTransitionTime", 4, _M, _O, "meta.Time"),
        ("reason", 5, _S, _O, None),
        ("message", 6, _S, _O, None),
        ("observedGeneration", 7, _I64, _O, None),
    ],
    "HostIP": [("ip", 1, _S, _O, None)],
    "PodIP": [("ip", 1, _S, _O, None)],
    "PodResourceClaimStatus": [
        ("name", 1, _S, _O, None),
        ("resourceClaimName", 2, _S, _O, None),
    ],
    "PodExtendedResourceClaimStatus": [
        ("requestMappings", 1, _M, _R, "ContainerExtendedResourceRequest"),
        ("resourceClaimName", 2, _S, _O, None),
    ],
    "ContainerExtendedResourceRequest": [
        ("containerName", 1, _S, _O, None),
        ("resourceName", 2, _S, _O, None),
        ("requestName", 3, _S, _O, None),
    ],
    "ContainerStatus": [
        ("name", 1, _S, _O, None),
        ("state", 2, _M, _O, "ContainerState"),
        ("lastState", 3, _M, _O, "ContainerState"),
        ("ready", 4, _B, _O, None),
        ("restartCount", 5, _I32, _O, None),
        ("image", 6, _S, _O, None),
        ("imageID", 7, _S, _O, None),
        ("containerID", 8, _S, _O, None),
        ("started", 9, _B, _O, None),
        ("allocatedResources", 10, _M, _MAP, "resource.Quantity"),
        ("resources", 11, _M, _O, "ResourceRequirements"),
        ("volumeMounts", 12, _M, _R, "VolumeMountStatus"),
        ("user", 13, _M, _O, "ContainerUser"),
        ("allocatedResourcesStatus", 14, _M, _R, "ResourceStatus"),
        ("stopSignal", 15, _S, _O, None),
    ],
    "ContainerState": [
        ("waiting", 1, _M, _O, "ContainerStateWaiting"),
        ("running", 2, _M, _O, "ContainerStateRunning"),
        ("terminated", 3, _M, _O, "ContainerStateTerminated"),
    ],
    "ContainerStateWaiting": [("reason", 1, _S, _O, None), ("message", 2, _S, _O, None)],
    "ContainerStateRunning": [("startedAt", 1, _M, _O, "meta.Time")],
    "ContainerStateTerminated": [
        ("exitCode", 1, _I32, _O, None),
        ("signal", 2, _I32, _O, None),
        ("reason", 3, _S, _O, None),
        ("message", 4, _S, _O, None),
        ("startedAt", 5, _M, _O, "meta.Time"),
        ("finishedAt", 6, _M, _O, "meta.Time"),
        ("containerID", 7, _S, _O, None),
    ],
    "ContainerUser": [("linux", 1, _M, _O, "LinuxContainerUser")],
    "LinuxContainerUser": [
        ("uid", 1, _I64, _O, None),
        ("gid", 2, _I64, _O, None),
        ("supplementalGroups", 3, _I64, _R, None),
    ],
    "ResourceStatus": [
        ("name", 1, _S, _O, None),
        ("resources", 2, _M, _R, "ResourceHealth"),
    ],
    "ResourceHealth": [
        ("resourceID", 1, _S, _O, None),
        ("health", 2, _S, _O, None),
        ("message", 6, _S, _O, None),
    ],
    "VolumeMountStatus": [
        ("name", 1, _S, _O, None),
        ("mountPath", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
        ("recursiveReadOnly", 4, _S, _O, None),
        ("volumeStatus", 5, _M, _O, "VolumeStatus"),
    ],
    "VolumeStatus": [("image", 1, _M, _O, "ImageVolumeStatus")],
    "ImageVolumeStatus": [("imageRef", 1, _S, _O, None)],
    # --- containers ----------------------------------------------------------------------
    "Container": _CONTAINER_FIELDS,
    "EphemeralContainerCommon": _CONTAINER_FIELDS,
    "EphemeralContainer": [
        ("ephemeralContainerCommon", 1, _M, _EMB, "EphemeralContainerCommon"),
        ("targetContainerName", 2, _S, _O, None),
    ],
    "ContainerPort": [
        ("name", 1, _S, _O, None),
        ("hostPort", 2, _I32, _O, None),
        ("containerPort", 3, _I32, _O, None),
        ("protocol", 4, _S, _O, None),
        ("hostIP", 5, _S, _O, None),
    ],
    "ContainerResizePolicy": [
        ("resourceName", 1, _S, _O, None),
        ("restartPolicy", 2, _S, _O, None),
    ],
    "ContainerRestartRule": [
        ("action", 1, _S, _O, None),
        ("exitCodes", 2, _M, _O, "ContainerRestartRuleOnExitCodes"),
    ],
    "ContainerRestartRuleOnExitCodes": [
        ("operator", 1, _S, _O, None),
        ("values", 2, _I32, _R, None),
    ],
    "EnvVar": [
        ("name", 1, _S, _O, None),
        ("value", 2, _S, _O, None),
        ("valueFrom", 3, _M, _O, "EnvVarSource"),
    ],
    "EnvVarSource": [
        ("fieldRef", 1, _M, _O, "ObjectFieldSelector"),
        ("resourceFieldRef", 2, _M, _O, "ResourceFieldSelector"),
        ("configMapKeyRef", 3, _M, _O, "ConfigMapKeySelector"),
        ("secretKeyRef", 4, _M, _O, "SecretKeySelector"),
        ("fileKeyRef", 5, _M, _O, "FileKeySelector"),
    ],
    "EnvFromSource": [
        ("prefix", 1, _S, _O, None),
        ("configMapRef", 2, _M, _O, "ConfigMapEnvSource"),
        ("secretRef", 3, _M, _O, "SecretEnvSource"),
    ],
    "ConfigMapEnvSource": [_LOCAL_REF, ("optional", 2, _B, _O, None)],
    "SecretEnvSource": [_LOCAL_REF, ("optional", 2, _B, _O, None)],
    "ConfigMapKeySelector": [
        _LOCAL_REF,
        ("key", 2, _S, _O, None),
        ("optional", 3, _B, _O, None),
    ],
    "SecretKeySelector": [
        _LOCAL_REF,
        ("key", 2, _S, _O, None),
        ("optional", 3, _B, _O, None),
    ],
    "FileKeySelector": [
        ("volumeName", 1, _S, _O, None),
        ("path", 2, _S, _O, None),
        ("key", 3, _S, _O, None),
        ("optional", 4, _B, _O, None),
    ],
    "ObjectFieldSelector": [
        ("apiVersion", 1, _S, _O, None),
        ("fieldPath", 2, _S, _O, None),
    ],
    "ResourceFieldSelector": [
        ("containerName", 1, _S, _O, None),
        ("resource", 2, _S, _O, None),
        ("divisor", 3, _M, _O, "resource.Quantity"),
    ],
    "LocalObjectReference": [("name", 1, _S, _O, None)],
    "ResourceRequirements": [
        ("limits", 1, _M, _MAP, "resource.Quantity"),
        ("requests", 2, _M, _MAP, "resource.Quantity"),
        ("claims", 3, _M, _R, "ResourceClaim"),
    ],
    "ResourceClaim": [("name", 1, _S, _O, None), ("request", 2, _S, _O, None)],
    "VolumeMount": [
        ("name", 1, _S, _O, None),
        ("readOnly", 2, _B, _O, None),
        ("mountPath", 3, _S, _O, None),
        ("subPath", 4, _S, _O, None),
        ("mountPropagation", 5, _S, _O, None),
        ("subPathExpr", 6, _S, _O, None),
        ("recursiveReadOnly", 7, _S, _O, None),
    ],
    "VolumeDevice": [("name", 1, _S, _O, None), ("devicePath", 2, _S, _O, None)],
    # --- probes and lifecycle ----------------------------------------------------------
    "Probe": [
        ("handler", 1, _M, _EMB, "ProbeHandler"),
        ("initialDelaySeconds", 2, _I32, _O, None),
        ("timeoutSeconds", 3, _I32, _O, None),
        ("periodSeconds", 4, _I32, _O, None),
        ("successThreshold", 5, _I32, _O, None),
        ("failureThreshold", 6, _I32, _O, None),
        ("terminationGracePeriodSeconds", 7, _I64, _O, None),
    ],
    "ProbeHandler": [
        ("exec", 1, _M, _O, "ExecAction"),
        ("httpGet", 2, _M, _O, "HTTPGetAction"),
        ("tcpSocket", 3, _M, _O, "TCPSocketAction"),
        ("grpc", 4, _M, _O, "GRPCAction"),
    ],
    "ExecAction": [("command", 1, _S, _R, None)],
    "HTTPGetAction": [
        ("path", 1, _S, _O, None),
        ("port", 2, _M, _O, "intstr.IntOrString"),
        ("host", 3, _S, _O, None),
        ("scheme", 4, _S, _O, None),
        ("httpHeaders", 5, _M, _R, "HTTPHeader"),
    ],
    "HTTPHeader": [("name", 1, _S, _O, None), ("value", 2, _S, _O, None)],
    "TCPSocketAction": [
        ("port", 1, _M, _O, "intstr.IntOrString"),
        ("host", 2, _S, _O, None),
    ],
    "GRPCAction": [("port", 1, _I32, _O, None), ("service", 2, _S, _O, None)],
    "Lifecycle": [
        ("postStart", 1, _M, _O, "LifecycleHandler"),
        ("preStop", 2, _M, _O, "LifecycleHandler"),
        ("stopSignal", 3, _S, _O, None),
    ],
    "LifecycleHandler": [
        ("exec", 1, _M, _O, "ExecAction"),
        ("httpGet", 2, _M, _O, "HTTPGetAction"),
        ("tcpSocket", 3, _M, _O, "TCPSocketAction"),
        ("sleep", 4, _M, _O, "SleepAction"),
    ],
    "SleepAction": [("seconds", 1, _I64, _O, None)],
    # --- security ----------------------------------------------------------------------
    "SecurityContext": [
        ("capabilities", 1, _M, _O, "Capabilities"),
        ("privileged", 2, _B, _O, None),
        ("seLinuxOptions", 3, _M, _O, "SELinuxOptions"),
        ("runAsUser", 4, _I64, _O, None),
        ("runAsNonRoot", 5, _B, _O, None),
        ("readOnlyRootFilesystem", 6, _B, _O, None),
        ("allowPrivilegeEscalation", 7, _B, _O, None),
        ("runAsGroup", 8, _I64, _O, None),
        ("procMount", 9, _S, _O, None),
        ("windowsOptions", 10, _M, _O, "WindowsSecurityContextOptions"),
        ("seccompProfile", 11, _M, _O, "SeccompProfile"),
        ("appArmorProfile", 12, _M, _O, "AppArmorProfile"),
        ("ulimits", 13, _M, _R, "Ulimit"),
    ],
    "PodSecurityContext": [
        ("seLinuxOptions", 1, _M, _O, "SELinuxOptions"),
        ("runAsUser", 2, _I64, _O, None),
        ("runAsNonRoot", 3, _B, _O, None),
        ("supplementalGroups", 4, _I64, _R, None),
        ("fsGroup", 5, _I64, _O, None),
        ("runAsGroup", 6, _I64, _O, None),
        ("sysctls", 7, _M, _R, "Sysctl"),
        ("windowsOptions", 8, _M, _O, "WindowsSecurityContextOptions"),
        ("fsGroupChangePolicy", 9, _S, _O, None),
        ("seccompProfile", 10, _M, _O, "SeccompProfile"),
        ("appArmorProfile", 11, _M, _O, "AppArmorProfile"),
        ("supplementalGroupsPolicy", 12, _S, _O, None),
        ("seLinuxChangePolicy", 13, _S, _O, None),
    ],
    "Capabilities": [("add", 1, _S, _R, None), ("drop", 2, _S, _R, None)],
    "SELinuxOptions": [
        ("user", 1, _S, _O, None),
        ("role", 2, _S, _O, None),
        ("type", 3, _S, _O, None),
        ("level", 4, _S, _O, None),
    ],
    "WindowsSecurityContextOptions": [
        ("gmsaCredentialSpecName", 1, _S, _O, None),
        ("gmsaCredentialSpec", 2, _S, _O, None),
        ("runAsUserName", 3, _S, _O, None),
        ("hostProcess", 4, _B, _O, None),
    ],
    "SeccompProfile": [("type", 1, _S, _O, None), ("localhostProfile", 2, _S, _O, None)],
    "AppArmorProfile": [("type", 1, _S, _O, None), ("localhostProfile", 2, _S, _O, None)],
    "Ulimit": [
        ("name", 1, _S, _O, None),
        ("hard", 2, _I64, _O, None),
        ("soft", 3, _I64, _O, None),
    ],
    "Sysctl": [("name", 1, _S, _O, None), ("value", 2, _S, _O, None)],
    # --- scheduling --------------------------------------------------------------------
    "Affinity": [
        ("nodeAffinity", 1, _M, _O, "NodeAffinity"),
        ("podAffinity", 2, _M, _O, "PodAffinity"),
        ("podAntiAffinity", 3, _M, _O, "PodAntiAffinity"),
    ],
    "NodeAffinity": [
        ("requiredDuringSchedulingIgnoredDuringExecution", 1, _M, _O, "NodeSelector"),
        ("preferredDuringSchedulingIgnoredDuringExecution", 2, _M, _R, "PreferredSchedulingTerm"),
    ],
    "NodeSelector": [("nodeSelectorTerms", 1, _M, _R, "NodeSelectorTerm")],
    "NodeSelectorTerm": [
        ("matchExpressions", 1, _M, _R, "NodeSelectorRequirement"),
        ("matchFields", 2, _M, _R, "NodeSelectorRequirement"),
    ],
    "NodeSelectorRequirement": [
        ("key", 1, _S, _O, None),
        ("operator", 2, _S, _O, None),
        ("values", 3, _S, _R, None),
    ],
    "PreferredSchedulingTerm": [
        ("weight", 1, _I32, _O, None),
        ("preference", 2, _M, _O, "NodeSelectorTerm"),
    ],
    "PodAffinity": [
        ("requiredDuringSchedulingIgnoredDuringExecution", 1, _M, _R, "PodAffinityTerm"),
        ("preferredDuringSchedulingIgnoredDuringExecution", 2, _M, _R, "WeightedPodAffinityTerm"),
    ],
    "PodAntiAffinity": [
        ("requiredDuringSchedulingIgnoredDuringExecution", 1, _M, _R, "PodAffinityTerm"),
        ("preferredDuringSchedulingIgnoredDuringExecution", 2, _M, _R, "WeightedPodAffinityTerm"),
    ],
    "PodAffinityTerm": [
        ("labelSelector", 1, _M, _O, "meta.LabelSelector"),
        ("namespaces", 2, _S, _R, None),
        ("topologyKey", 3, _S, _O, None),
        ("namespaceSelector", 4, _M, _O, "meta.LabelSelector"),
        ("matchLabelKeys", 5, _S, _R, None),
        ("mismatchLabelKeys", 6, _S, _R, None),
    ],
    "WeightedPodAffinityTerm": [
        ("weight", 1, _I32, _O, None),
        ("podAffinityTerm", 2, _M, _O, "PodAffinityTerm"),
    ],
    "Toleration": [
        ("key", 1, _S, _O, None),
        ("operator", 2, _S, _O, None),
        ("value", 3, _S, _O, None),
        ("effect", 4, _S, _O, None),
        ("tolerationSeconds", 5, _I64, _O, None),
    ],
    "TopologySpreadConstraint": [
        ("maxSkew", 1, _I32, _O, None),
        ("topologyKey", 2, _S, _O, None),
        ("whenUnsatisfiable", 3, _S, _O, None),
        ("labelSelector", 4, _M, _O, "meta.LabelSelector"),
        ("minDomains", 5, _I32, _O, None),
        ("nodeAffinityPolicy", 6, _S, _O, None),
        ("nodeTaintsPolicy", 7, _S, _O, None),
        ("matchLabelKeys", 8, _S, _R, None),
    ],
    "PodReadinessGate": [("conditionType", 1, _S, _O, None)],
    "PodSchedulingGate": [("name", 1, _S, _O, None)],
    "PodResourceClaim": [
        ("name", 1, _S, _O, None),
        ("resourceClaimName", 3, _S, _O, None),
        ("resourceClaimTemplateName", 4, _S, _O, None),
    ],
    "WorkloadReference": [
        ("name", 1, _S, _O, None),
        ("podGroup", 2, _S, _O, None),
        ("podGroupReplicaKey", 3, _S, _O, None),
    ],
    "PodOS": [("name", 1, _S, _O, None)],
    "HostAlias": [("ip", 1, _S, _O, None), ("hostnames", 2, _S, _R, None)],
    "PodDNSConfig": [
        ("nameservers", 1, _S, _R, None),
        ("searches", 2, _S, _R, None),
        ("options", 3, _M, _R, "PodDNSConfigOption"),
    ],
    "PodDNSConfigOption": [("name", 1, _S, _O, None), ("value", 2, _S, _O, None)],
    # --- volumes -------------------------------------------------------------------------
    "Volume": [
        ("name", 1, _S, _O, None),
        ("volumeSource", 2, _M, _EMB, "VolumeSource"),
    ],
    "VolumeSource": [
        ("hostPath", 1, _M, _O, "HostPathVolumeSource"),
        ("emptyDir", 2, _M, _O, "EmptyDirVolumeSource"),
        ("gcePersistentDisk", 3, _M, _O, "GCEPersistentDiskVolumeSource"),
        ("awsElasticBlockStore", 4, _M, _O, "AWSElasticBlockStoreVolumeSource"),
        ("gitRepo", 5, _M, _O, "GitRepoVolumeSource"),
        ("secret", 6, _M, _O, "SecretVolumeSource"),
        ("nfs", 7, _M, _O, "NFSVolumeSource"),
        ("iscsi", 8, _M, _O, "ISCSIVolumeSource"),
        ("glusterfs", 9, _M, _O, "GlusterfsVolumeSource"),
        ("persistentVolumeClaim", 10, _M, _O, "PersistentVolumeClaimVolumeSource"),
        ("rbd", 11, _M, _O, "RBDVolumeSource"),
        ("flexVolume", 12, _M, _O, "FlexVolumeSource"),
        ("cinder", 13, _M, _O, "CinderVolumeSource"),
        ("cephfs", 14, _M, _O, "CephFSVolumeSource"),
        ("flocker", 15, _M, _O, "FlockerVolumeSource"),
        ("downwardAPI", 16, _M, _O, "DownwardAPIVolumeSource"),
        ("fc", 17, _M, _O, "FCVolumeSource"),
        ("azureFile", 18, _M, _O, "AzureFileVolumeSource"),
        ("configMap", 19, _M, _O, "ConfigMapVolumeSource"),
        ("vsphereVolume", 20, _M, _O, "VsphereVirtualDiskVolumeSource"),
        ("quobyte", 21, _M, _O, "QuobyteVolumeSource"),
        ("azureDisk", 22, _M, _O, "AzureDiskVolumeSource"),
        ("photonPersistentDisk", 23, _M, _O, "PhotonPersistentDiskVolumeSource"),
        ("portworxVolume", 24, _M, _O, "PortworxVolumeSource"),
        ("scaleIO", 25, _M, _O, "ScaleIOVolumeSource"),
        ("projected", 26, _M, _O, "ProjectedVolumeSource"),
        ("storageos", 27, _M, _O, "StorageOSVolumeSource"),
        ("csi", 28, _M, _O, "CSIVolumeSource"),
        ("ephemeral", 29, _M, _O, "EphemeralVolumeSource"),
        ("image", 30, _M, _O, "ImageVolumeSource"),
    ],
    "HostPathVolumeSource": [("path", 1, _S, _O, None), ("type", 2, _S, _O, None)],
    "EmptyDirVolumeSource": [
        ("medium", 1, _S, _O, None),
        ("sizeLimit", 2, _M, _O, "resource.Quantity"),
    ],
    "GCEPersistentDiskVolumeSource": [
        ("pdName", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("partition", 3, _I32, _O, None),
        ("readOnly", 4, _B, _O, None),
    ],
    "AWSElasticBlockStoreVolumeSource": [
        ("volumeID", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("partition", 3, _I32, _O, None),
        ("readOnly", 4, _B, _O, None),
    ],
    "GitRepoVolumeSource": [
        ("repository", 1, _S, _O, None),
        ("revision", 2, _S, _O, None),
        ("directory", 3, _S, _O, None),
    ],
    "SecretVolumeSource": [
        ("secretName", 1, _S, _O, None),
        ("items", 2, _M, _R, "KeyToPath"),
        ("defaultMode", 3, _I32, _O, None),
        ("optional", 4, _B, _O, None),
    ],
    "KeyToPath": [
        ("key", 1, _S, _O, None),
        ("path", 2, _S, _O, None),
        ("mode", 3, _I32, _O, None),
    ],
    "NFSVolumeSource": [
        ("server", 1, _S, _O, None),
        ("path", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
    ],
    "ISCSIVolumeSource": [
        ("targetPortal", 1, _S, _O, None),
        ("iqn", 2, _S, _O, None),
        ("lun", 3, _I32, _O, None),
        ("iscsiInterface", 4, _S, _O, None),
        ("fsType", 5, _S, _O, None),
        ("readOnly", 6, _B, _O, None),
        ("portals", 7, _S, _R, None),
        ("chapAuthDiscovery", 8, _B, _O, None),
        ("secretRef", 10, _M, _O, "LocalObjectReference"),
        ("chapAuthSession", 11, _B, _O, None),
        ("initiatorName", 12, _S, _O, None),
    ],
    "GlusterfsVolumeSource": [
        ("endpoints", 1, _S, _O, None),
        ("path", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
    ],
    "PersistentVolumeClaimVolumeSource": [
        ("claimName", 1, _S, _O, None),
        ("readOnly", 2, _B, _O, None),
    ],
    "RBDVolumeSource": [
        ("monitors", 1, _S, _R, None),
        ("image", 2, _S, _O, None),
        ("fsType", 3, _S, _O, None),
        ("pool", 4, _S, _O, None),
        ("user", 5, _S, _O, None),
        ("keyring", 6, _S, _O, None),
        ("secretRef", 7, _M, _O, "LocalObjectReference"),
        ("readOnly", 8, _B, _O, None),
    ],
    "FlexVolumeSource": [
        ("driver", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("secretRef", 3, _M, _O, "LocalObjectReference"),
        ("readOnly", 4, _B, _O, None),
        ("options", 5, _S, _MAP, None),
    ],
    "CinderVolumeSource": [
        ("volumeID", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
        ("secretRef", 4, _M, _O, "LocalObjectReference"),
    ],
    "CephFSVolumeSource": [
        ("monitors", 1, _S, _R, None),
        ("path", 2, _S, _O, None),
        ("user", 3, _S, _O, None),
        ("secretFile", 4, _S, _O, None),
        ("secretRef", 5, _M, _O, "LocalObjectReference"),
        ("readOnly", 6, _B, _O, None),
    ],
    "FlockerVolumeSource": [
        ("datasetName", 1, _S, _O, None),
        ("datasetUUID", 2, _S, _O, None),
    ],
    "DownwardAPIVolumeSource": [
        ("items", 1, _M, _R, "DownwardAPIVolumeFile"),
        ("defaultMode", 2, _I32, _O, None),
    ],
    "DownwardAPIVolumeFile": [
        ("path", 1, _S, _O, None),
        ("fieldRef", 2, _M, _O, "ObjectFieldSelector"),
        ("resourceFieldRef", 3, _M, _O, "ResourceFieldSelector"),
        ("mode", 4, _I32, _O, None),
    ],
    "FCVolumeSource": [
        ("targetWWNs", 1, _S, _R, None),
        ("lun", 2, _I32, _O, None),
        ("fsType", 3, _S, _O, None),
        ("readOnly", 4, _B, _O, None),
        ("wwids", 5, _S, _R, None),
    ],
    "AzureFileVolumeSource": [
        ("secretName", 1, _S, _O, None),
        ("shareName", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
    ],
    "ConfigMapVolumeSource": [
        _LOCAL_REF,
        ("items", 2, _M, _R, "KeyToPath"),
        ("defaultMode", 3, _I32, _O, None),
        ("optional", 4, _B, _O, None),
    ],
    "VsphereVirtualDiskVolumeSource": [
        ("volumePath", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("storagePolicyName", 3, _S, _O, None),
        ("storagePolicyID", 4, _S, _O, None),
    ],
    "QuobyteVolumeSource": [
        ("registry", 1, _S, _O, None),
        ("volume", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
        ("user", 4, _S, _O, None),
        ("group", 5, _S, _O, None),
        ("tenant", 6, _S, _O, None),
    ],
    "AzureDiskVolumeSource": [
        ("diskName", 1, _S, _O, None),
        ("diskURI", 2, _S, _O, None),
        ("cachingMode", 3, _S, _O, None),
        ("fsType", 4, _S, _O, None),
        ("readOnly", 5, _B, _O, None),
        ("kind", 6, _S, _O, None),
    ],
    "PhotonPersistentDiskVolumeSource": [
        ("pdID", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
    ],
    "PortworxVolumeSource": [
        ("volumeID", 1, _S, _O, None),
        ("fsType", 2, _S, _O, None),
        ("readOnly", 3, _B, _O, None),
    ],
    "ScaleIOVolumeSource": [
        ("gateway", 1, _S, _O, None),
        ("system", 2, _S, _O, None),
        ("secretRef", 3, _M, _O, "LocalObjectReference"),
        ("sslEnabled", 4, _B, _O, None),
        ("protectionDomain", 5, _S, _O, None),
        ("storagePool", 6, _S, _O, None),
        ("storageMode", 7, _S, _O, None),
        ("volumeName", 8, _S, _O, None),
        ("fsType", 9, _S, _O, None),
        ("readOnly", 10, _B, _O, None),
    ],
    "ProjectedVolumeSource": [
        ("sources", 1, _M, _R, "VolumeProjection"),
        ("defaultMode", 2, _I32, _O, None),
    ],
    "VolumeProjection": [
        ("secret", 1, _M, _O, "SecretProjection"),
        ("downwardAPI", 2, _M, _O, "DownwardAPIProjection"),
        ("configMap", 3, _M, _O, "ConfigMapProjection"),
        ("serviceAccountToken", 4, _M, _O, "ServiceAccountTokenProjection"),
        ("clusterTrustBundle", 5, _M, _O, "ClusterTrustBundleProjection"),
        ("podCertificate", 6, _M, _O, "PodCertificateProjection"),
    ],
    "SecretProjection": [
        _LOCAL_REF,
        ("items", 2, _M, _R, "KeyToPath"),
        ("optional", 4, _B, _O, None),
    ],
    "ConfigMapProjection": [
        _LOCAL_REF,
        ("items", 2, _M, _R, "KeyToPath"),
        ("optional", 4, _B, _O, None),
    ],
    "DownwardAPIProjection": [("items", 1, _M, _R, "DownwardAPIVolumeFile")],
    "ServiceAccountTokenProjection": [
        ("audience", 1, _S, _O, None),
        ("expirationSeconds", 2, _I64, _O, None),
        ("path", 3, _S, _O, None),
    ],
    "ClusterTrustBundleProjection": [
        ("name", 1, _S, _O, None),
        ("signerName", 2, _S, _O, None),
        ("labelSelector", 3, _M, _O, "meta.LabelSelector"),
        ("path", 4, _S, _O, None),
        ("optional", 5, _B, _O, None),
    ],
    "PodCertificateProjection": [
        ("signerName", 1, _S, _O, None),
        ("keyType", 2, _S, _O, None),
        ("maxExpirationSeconds", 3, _I32, _O, None),
        ("credentialBundlePath", 4, _S, _O, None),
        ("keyPath", 5, _S, _O, None),
        ("certificateChainPath", 6, _S, _O, None),
        ("userAnnotations", 7, _S, _MAP, None),
    ],
    "StorageOSVolumeSource": [
        ("volumeName", 1, _S, _O, None),
        ("volumeNamespace", 2, _S, _O, None),
        ("fsType", 3, _S, _O, None),
        ("readOnly", 4, _B, _O, None),
        ("secretRef", 5, _M, _O, "LocalObjectReference"),
    ],
    "CSIVolumeSource": [
        ("driver", 1, _S, _O, None),
        ("readOnly", 2, _B, _O, None),
        ("fsType", 3, _S, _O, None),
        ("volumeAttributes", 4, _S, _MAP, None),
        ("nodePublishSecretRef", 5, _M, _O, "LocalObjectReference"),
    ],
    "EphemeralVolumeSource": [
        ("volumeClaimTemplate", 1, _M, _O, "PersistentVolumeClaimTemplate"),
    ],
    "PersistentVolumeClaimTemplate": [
        ("metadata", 1, _M, _O, "meta.ObjectMeta"),
        ("spec", 2, _M, _O, "PersistentVolumeClaimSpec"),
    ],
    "PersistentVolumeClaimSpec": [
        ("accessModes", 1, _S, _R, None),
        ("resources", 2, _M, _O, "VolumeResourceRequirements"),
        ("volumeName", 3, _S, _O, None),
        ("selector", 4, _M, _O, "meta.LabelSelector"),
        ("storageClassName", 5, _S, _O, None),
        ("volumeMode", 6, _S, _O, None),
        ("dataSource", 7, _M, _O, "TypedLocalObjectReference"),
        ("dataSourceRef", 8, _M, _O, "TypedObjectReference"),
        ("volumeAttributesClassName", 9, _S, _O, None),
    ],
    "VolumeResourceRequirements": [
        ("limits", 1, _M, _MAP, "resource.Quantity"),
        ("requests", 2, _M, _MAP, "resource.Quantity"),
    ],
    "TypedLocalObjectReference": [
        ("apiGroup", 1, _S, _O, None),
        ("kind", 2, _S, _O, None),
        ("name", 3, _S, _O, None),
    ],
    "TypedObjectReference": [
        ("apiGroup", 1, _S, _O, None),
        ("kind", 2, _S, _O, None),
        ("name", 3, _S, _O, None),
        ("namespace", 4, _S, _O, None),
    ],
    "ImageVolumeSource": [("reference", 1, _S, _O, None), ("pullPolicy", 2, _S, _O, None)],
    # --- Node ----------------------------------------------------------------------------
    "Node": [
        ("metadata", 1, _M, _O, "meta.ObjectMeta"),
        ("spec", 2, _M, _O, "NodeSpec"),
        ("status", 3, _M, _O, "NodeStatus"),
    ],
    "NodeList": [
        ("metadata", 1, _M, _O, "meta.ListMeta"),
        ("items", 2, _M, _R, "Node"),
    ],
    "NodeSpec": [
        ("podCIDR", 1, _S, _O, None),
        ("externalID", 2, _S, _O, None),
        ("providerID", 3, _S, _O, None),
        ("unschedulable", 4, _B, _O, None),
        ("taints", 5, _M, _R, "Taint"),
        ("configSource", 6, _M, _O, "NodeConfigSource"),
        ("podCIDRs", 7, _S, _R, None),
    ],
    "Taint": [
        ("key", 1, _S, _O, None),
        ("value", 2, _S, _O, None),
        ("effect", 3, _S, _O, None),
        ("timeAdded", 4, _M, _O, "meta.Time"),
    ],
    "NodeConfigSource": [("configMap", 2, _M, _O, "ConfigMapNodeConfigSource")],
    "ConfigMapNodeConfigSource": [
        ("namespace", 1, _S, _O, None),
        ("name", 2, _S, _O, None),
        ("uid", 3, _S, _O, None),
        ("resourceVersion", 4, _S, _O, None),
        ("kubeletConfigKey", 5, _S, _O, None),
    ],
    "NodeStatus": [
        ("capacity", 1, _M, _MAP, "resource.Quantity"),
        ("allocatable", 2, _M, _MAP, "resource.Quantity"),
        ("phase", 3, _S, _O, None),
        ("conditions", 4, _M, _R, "NodeCondition"),
        ("addresses", 5, _M, _R, "NodeAddress"),
        ("daemonEndpoints", 6, _M, _O, "NodeDaemonEndpoints"),
        ("nodeInfo", 7, _M, _O, "NodeSystemInfo"),
        ("images", 8, _M, _R, "ContainerImage"),
        ("volumesInUse", 9, _S, _R, None),
        ("volumesAttached", 10, _M, _R, "AttachedVolume"),
        ("config", 11, _M, _O, "NodeConfigStatus"),
        ("runtimeHandlers", 12, _M, _R, "NodeRuntimeHandler"),
        ("features", 13, _M, _O, "NodeFeatures"),
        ("declaredFeatures", 14, _S, _R, None),
    ],
    "NodeCondition": [
        ("type", 1, _S, _O, None),
        ("status", 2, _S, _O, None),
        ("lastHeartbeatTime", 3, _M, _O, "meta.Time"),
        ("lastTransitionTime", 4, _M, _O, "meta.Time"),
        ("reason", 5, _S, _O, None),
        ("message", 6, _S, _O, None),
    ],
    "NodeAddress": [("type", 1, _S, _O, None), ("address", 2, _S, _O, None)],
    "NodeDaemonEndpoints": [("kubeletEndpoint", 1, _M, _O, "DaemonEndpoint")],
    # The JSON name really is capitalised: `json:"Port"`.
    "DaemonEndpoint": [("Port", 1, _I32, _O, None)],
    "NodeSystemInfo": [
        ("machineID", 1, _S, _O, None),
        ("systemUUID", 2, _S, _O, None),
        ("bootID", 3, _S, _O, None),
        ("kernelVersion", 4, _S, _O, None),
        ("osImage", 5, _S, _O, None),
        ("containerRuntimeVersion", 6, _S, _O, None),
        ("kubeletVersion", 7, _S, _O, None),
        ("kubeProxyVersion", 8, _S, _O, None),
        ("operatingSystem", 9, _S, _O, None),
        ("architecture", 10, _S, _O, None),
        ("swap", 11, _M, _O, "NodeSwapStatus"),
    ],
    "NodeSwapStatus": [("capacity", 1, _I64, _O, None)],
    "ContainerImage": [("names", 1, _S, _R, None), ("sizeBytes", 2, _I64, _O, None)],
    "AttachedVolume": [("name", 1, _S, _O, None), ("devicePath", 2, _S, _O, None)],
    "NodeConfigStatus": [
        ("assigned", 1, _M, _O, "NodeConfigSource"),
        ("active", 2, _M, _O, "NodeConfigSource"),
        ("lastKnownGood", 3, _M, _O, "NodeConfigSource"),
        ("error", 4, _S, _O, None),
    ],
    "NodeRuntimeHandler": [
        ("name", 1, _S, _O, None),
        ("features", 2, _M, _O, "NodeRuntimeHandlerFeatures"),
    ],
    "NodeRuntimeHandlerFeatures": [
        ("recursiveReadOnlyMounts", 1, _B, _O, None),
        ("userNamespaces", 2, _B, _O, None),
    ],
    "NodeFeatures": [
        ("supplementalGroupsPolicy", 1, _B, _O, None),
        ("containerUlimits", 2, _B, _O, None),
    ],
}

# (file name, package, imports, table), in dependency order.
_FILES: Final = (
    ("k8s.io/apimachinery/pkg/util/intstr/generated.proto", INTSTR, (), _INTSTR_TABLE),
    ("k8s.io/apimachinery/pkg/api/resource/generated.proto", RESOURCE, (), _RESOURCE_TABLE),
    ("k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto", META_V1, (), _META_TABLE),
    (
        "k8s.io/api/core/v1/generated.proto",
        CORE_V1,
        (
            "k8s.io/apimachinery/pkg/api/resource/generated.proto",
            "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto",
            "k8s.io/apimachinery/pkg/util/intstr/generated.proto",
        ),
        _CORE_TABLE,
    ),
)

_SCALAR_TYPES: Final = {
    STRING: descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    INT32: descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    INT64: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    BOOL: descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    BYTES: descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}
_LABEL_OPTIONAL: Final = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
_LABEL_REPEATED: Final = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
_TYPE_MESSAGE: Final = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE


class Field(NamedTuple):
    """One field of one message, with its type name resolved to a full name."""

    name: str
    number: int
    type: str  # STRING, INT32, INT64, BOOL, BYTES or MESSAGE (for MAP: the value type)
    label: str  # OPTIONAL, REPEATED, MAP or EMBED
    type_name: str | None  # full message name (no leading dot) for MESSAGE, else None


def _resolve(type_name: str, package: str) -> str:
    prefix, dot, rest = type_name.partition(".")
    if dot and prefix in _ALIASES:
        return f"{_ALIASES[prefix]}.{rest}"
    return f"{package}.{type_name}"


def _map_entry_name(field_name: str) -> str:
    # protoc's rule for the synthesized entry type: CamelCase(field) + "Entry".
    return field_name[0].upper() + field_name[1:] + "Entry"


def _check_table(package: str, table: Mapping[str, list[_Row]]) -> None:
    for message, rows in table.items():
        names = [r[0] for r in rows]
        numbers = [r[1] for r in rows]
        if len(set(names)) != len(names) or len(set(numbers)) != len(numbers):
            raise AssertionError(f"{package}.{message}: duplicate field name or number")
        for name, number, ftype, label, type_name in rows:
            where = f"{package}.{message}.{name}"
            if number <= 0 or label not in (OPTIONAL, REPEATED, MAP, EMBED):
                raise AssertionError(f"{where}: bad number or label")
            if (ftype == MESSAGE) != (type_name is not None):
                raise AssertionError(f"{where}: type_name goes with (only) message fields")
            if ftype != MESSAGE and ftype not in _SCALAR_TYPES:
                raise AssertionError(f"{where}: unknown type {ftype!r}")
            if label == EMBED and ftype != MESSAGE:
                raise AssertionError(f"{where}: only a message can be embedded")


def build_file_descriptor_protos() -> tuple[descriptor_pb2.FileDescriptorProto, ...]:
    """The four ``FileDescriptorProto``s, freshly built from the tables."""
    files = []
    for file_name, package, deps, table in _FILES:
        _check_table(package, table)
        fdp = descriptor_pb2.FileDescriptorProto(
            name=file_name, package=package, syntax="proto2", dependency=list(deps)
        )
        for message, rows in table.items():
            mp = fdp.message_type.add(name=message)
            for name, number, ftype, label, type_name in rows:
                fp = mp.field.add(name=name, number=number, json_name=name)
                if label == MAP:
                    entry = mp.nested_type.add(name=_map_entry_name(name))
                    entry.options.map_entry = True
                    entry.field.add(
                        name="key",
                        number=1,
                        label=_LABEL_OPTIONAL,
                        json_name="key",
                        type=_SCALAR_TYPES[STRING],
                    )
                    value = entry.field.add(name="value", number=2, label=_LABEL_OPTIONAL, json_name="value")
                    if ftype == MESSAGE:
                        value.type = _TYPE_MESSAGE
                        value.type_name = "." + _resolve(type_name or "", package)
                    else:
                        value.type = _SCALAR_TYPES[ftype]
                    fp.label = _LABEL_REPEATED
                    fp.type = _TYPE_MESSAGE
                    fp.type_name = f".{package}.{message}.{entry.name}"
                    continue
                fp.label = _LABEL_REPEATED if label == REPEATED else _LABEL_OPTIONAL
                if ftype == MESSAGE:
                    fp.type = _TYPE_MESSAGE
                    fp.type_name = "." + _resolve(type_name or "", package)
                else:
                    fp.type = _SCALAR_TYPES[ftype]
        files.append(fdp)
    return tuple(files)


def _build() -> tuple[
    descriptor_pool.DescriptorPool,
    Mapping[str, tuple[Field, ...]],
    Mapping[str, type[Message]],
]:
    pool = descriptor_pool.DescriptorPool()
    for fdp in build_file_descriptor_protos():
        pool.AddSerializedFile(fdp.SerializeToString())
    fields: dict[str, tuple[Field, ...]] = {}
    classes: dict[str, type[Message]] = {}
    for _file, package, _deps, table in _FILES:
        for message, rows in table.items():
            full = f"{package}.{message}"
            fields[full] = tuple(
                Field(n, num, t, lab, _resolve(tn, package) if tn is not None else None) for n, num, t, lab, tn in rows
            )
            classes[full] = message_factory.GetMessageClass(pool.FindMessageTypeByName(full))
    return pool, MappingProxyType(fields), MappingProxyType(classes)


# MESSAGE_FIELDS: full message name -> its fields as written in the tables (read-only).
# MESSAGE_CLASSES: full message name -> message class from the private pool (read-only).
_POOL, MESSAGE_FIELDS, MESSAGE_CLASSES = _build()

QUANTITY: Final = f"{RESOURCE}.Quantity"
INT_OR_STRING: Final = f"{INTSTR}.IntOrString"
TIME: Final = f"{META_V1}.Time"
MICRO_TIME: Final = f"{META_V1}.MicroTime"
FIELDS_V1: Final = f"{META_V1}.FieldsV1"

Pod: Final[type[Message]] = MESSAGE_CLASSES[f"{CORE_V1}.Pod"]
Node: Final[type[Message]] = MESSAGE_CLASSES[f"{CORE_V1}.Node"]
NodeList: Final[type[Message]] = MESSAGE_CLASSES[f"{CORE_V1}.NodeList"]


def message_class(full_name: str) -> type[Message]:
    """The message class for a full name such as ``k8s.io.api.core.v1.Pod``."""
    try:
        return MESSAGE_CLASSES[full_name]
    except KeyError:
        raise KeyError(f"no message {full_name!r} in the kube schema") from None

