"""The Kubernetes object codec: dict (kubectl JSON shape) <-> protobuf wire of core/v1."""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from google.protobuf import descriptor_pool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from tests import kube_decode
from tests.kube_decode import decode_node, decode_node_list, decode_pod
from wasm_scheduler.actors.kube import codec
from wasm_scheduler.actors.kube import schema as ks
from wasm_scheduler.actors.kube.codec import KubeCodecError, encode_node, encode_node_list, encode_pod

_HERE = Path(__file__).resolve().parent


def _testdata(name: str) -> Path:
    """Prefer the repo's copy; fall back to the shared folder beside the repo."""
    local = _HERE / "data" / name
    if local.exists():
        return local
    return Path(__file__).resolve().parents[2] / "shared" / "testdata" / name


@pytest.fixture(scope="module")
def real_pod() -> dict[str, Any]:
    return yaml.safe_load(_testdata("pod-real.yaml").read_text())


@pytest.fixture(scope="module")
def real_node() -> dict[str, Any]:
    return yaml.safe_load(_testdata("node-real.yaml").read_text())


# --------------------------------------------------------------------------------------
# Normalisation and the leaf walker
# --------------------------------------------------------------------------------------


def _rfc3339(value: dt.datetime) -> str:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def normalise(obj: Any, *, top: bool = False) -> Any:
    """What survives the wire: no apiVersion/kind, no nulls, no empty lists.

    Empty *objects* are kept: every dict-valued field in the test data is a message, and
    protobuf keeps an empty message's presence. (An empty map would be lost, like an
    empty list; the test data has none.) Numbers stay numbers; leaves are compared by
    `same_leaf`, which knows that a quantity given as a number comes back as text.
    """
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if top and key in ("apiVersion", "kind"):
                continue
            value = normalise(value)
            if value is None or value == []:
                continue
            out[key] = value
        return out
    if isinstance(obj, list):
        return [normalise(v) for v in obj]
    if isinstance(obj, dt.datetime):
        return _rfc3339(obj)
    return obj


def leaves(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every leaf of a JSON value with its path; an empty object counts as a leaf."""
    if isinstance(obj, dict) and obj:
        for key, value in obj.items():
            yield from leaves(value, (*path, key))
    elif isinstance(obj, list) and obj:
        for i, value in enumerate(obj):
            yield from leaves(value, (*path, i))
    else:
        yield path, obj


def dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def same_leaf(original: Any, decoded: Any) -> bool:
    if original == decoded and type(original) is type(decoded):
        return True
    # A quantity written as a JSON number comes back as its text.
    if isinstance(original, int | float) and not isinstance(original, bool):
        return isinstance(decoded, str) and str(original) == decoded
    return False


def assert_every_leaf_survives(original: Any, decoded: Any) -> int:
    """Walk the normalised original; each leaf must be at the same path in ``decoded``."""
    count = 0
    for path, value in leaves(normalise(original, top=True)):
        here: Any = decoded
        for step in path:
            try:
                here = here[step]
            except (KeyError, IndexError, TypeError):
                pytest.fail(f"{dotted(path)}: dropped (original value {value!r})")
        assert same_leaf(value, here), f"{dotted(path)}: {value!r} came back as {here!r}"
        count += 1
    return count


def assert_round_trip(original: dict[str, Any], decoded: dict[str, Any]) -> None:
    assert_every_leaf_survives(original, decoded)
    # ... and nothing was added: the decoded leaves are exactly the original's.
    n_original = sum(1 for _ in leaves(normalise(original, top=True)))
    n_decoded = sum(1 for _ in leaves(normalise(decoded, top=True)))
    assert n_decoded == n_original


# --------------------------------------------------------------------------------------
# Round trips of the real objects
# --------------------------------------------------------------------------------------


def test_real_pod_round_trip(real_pod: dict[str, Any]) -> None:
    unknown: list[str] = []
    data = encode_pod(real_pod, unknown_fields=unknown)
    assert unknown == []
    decoded = decode_pod(data)
    assert "apiVersion" not in decoded and "kind" not in decoded
    n = assert_every_leaf_survives(real_pod, decoded)
    assert n > 150  # the walker really walked the pod
    assert normalise(decoded) == normalise(real_pod, top=True)
    # Presence survives: explicit zero, false and empty object.
    assert decoded["spec"]["priority"] == 0
    assert decoded["spec"]["containers"][0]["securityContext"]["privileged"] is False
    assert decoded["status"]["containerStatuses"][0]["lastState"] == {}
    assert decoded["status"]["containerStatuses"][0]["restartCount"] == 0
    # Embedded structs come back flattened (Probe's handler).
    assert decoded["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] == "healthz"


def test_real_node_round_trip(real_node: dict[str, Any]) -> None:
    unknown: list[str] = []
    data = encode_node(real_node, unknown_fields=unknown)
    assert unknown == []
    decoded = decode_node(data)
    n = assert_every_leaf_survives(real_node, decoded)
    assert n > 100
    assert normalise(decoded) == normalise(real_node, top=True)
    assert decoded["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
    assert decoded["status"]["allocatable"]["cpu"] == "940m"


def test_encoding_is_deterministic(real_pod: dict[str, Any], real_node: dict[str, Any]) -> None:
    assert encode_pod(real_pod) == encode_pod(copy.deepcopy(real_pod))
    shuffled = copy.deepcopy(real_node)
    shuffled["metadata"]["labels"] = dict(reversed(list(shuffled["metadata"]["labels"].items())))
    assert encode_node(shuffled) == encode_node(real_node)  # map keys are sorted


def test_leaf_walker_catches_a_dropped_field(real_pod: dict[str, Any]) -> None:
    decoded = decode_pod(encode_pod(real_pod))
    del decoded["spec"]["tolerations"][1]["tolerationSeconds"]
    with pytest.raises(pytest.fail.Exception, match=r"spec\.tolerations\[1\]\.tolerationSeconds"):
        assert_every_leaf_survives(real_pod, decoded)


def _variant(node: dict[str, Any], i: int) -> dict[str, Any]:
    out = copy.deepcopy(node)
    out["metadata"]["name"] = f"node-{i}"
    out["metadata"]["labels"]["kubernetes.io/hostname"] = f"node-{i}"
    out["spec"]["taints"] = [
        {"key": "dedicated", "value": f"team-{i}", "effect": "NoSchedule"},
        {"key": "maint", "effect": "NoExecute", "timeAdded": f"2024-01-0{i + 1}T10:00:00Z"},
    ][: i + 1]
    out["spec"]["unschedulable"] = i == 2
    out["status"]["allocatable"]["cpu"] = f"{i + 1}"
    return out


def test_node_list_round_trip(real_node: dict[str, Any]) -> None:
    nodes = [_variant(real_node, i) for i in range(3)]
    data = encode_node_list(nodes)
    decoded = decode_node_list(data)
    assert len(decoded) == 3
    for original, back in zip(nodes, decoded, strict=True):
        assert_round_trip(original, back)
    assert [d["metadata"]["name"] for d in decoded] == ["node-0", "node-1", "node-2"]
    assert decoded[2]["spec"]["unschedulable"] is True
    assert decoded[0]["spec"]["unschedulable"] is False
    # The list is the items' own encodings behind tag 0x12 (NodeList.items = 2), with an
    # empty ListMeta left out: what the wire cache assembles from cached nodes.
    expected = b""
    for node in nodes:
        item = encode_node(node)
        expected += b"\x12" + _varint(len(item)) + item
    assert data == expected
    assert decode_node_list(encode_node_list([])) == []


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


# --------------------------------------------------------------------------------------
# Byte-level checks (expected bytes worked out by hand from the field numbers)
# --------------------------------------------------------------------------------------


def test_minimal_pod_bytes() -> None:
    # Pod.metadata (1, LEN) { ObjectMeta.name (1, LEN) "a" }
    assert encode_pod({"metadata": {"name": "a"}}) == b"\n\x03\n\x01a"
    assert encode_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}) == (b"\n\x03\n\x01a")
    assert decode_pod(b"\n\x03\n\x01a") == {"metadata": {"name": "a"}}
    assert encode_pod({}) == b""
    assert encode_pod({"spec": {}}) == b"\x12\x00"  # an empty message keeps its presence


def test_quantity_map_bytes() -> None:
    # Node.status (3) { NodeStatus.capacity (1) entry { key (1) "cpu", value (2) Quantity {
    #   string (1) "2" } } }
    want = b"\x1a\x0c" + b"\x0a\x0a" + b"\x0a\x03cpu" + b"\x12\x03" + b"\x0a\x012"
    assert encode_node({"status": {"capacity": {"cpu": "2"}}}) == want
    assert encode_node({"status": {"capacity": {"cpu": 2}}}) == want  # number -> text
    half = encode_node({"status": {"capacity": {"cpu": 0.5}}})
    assert half == b"\x1a\x0e\x0a\x0c\x0a\x03cpu\x12\x05\x0a\x030.5"
    assert decode_node(half)["status"]["capacity"] == {"cpu": "0.5"}


def test_string_map_is_a_protobuf_map_with_sorted_entries() -> None:
    # ObjectMeta.labels (11, LEN): one entry message per pair, key = 1, value = 2, sorted.
    data = encode_pod({"metadata": {"labels": {"b": "2", "a": "1"}}})
    entry_a = b"\x5a\x06\x0a\x01a\x12\x011"
    entry_b = b"\x5a\x06\x0a\x01b\x12\x012"
    assert data == b"\x0a\x10" + entry_a + entry_b
    labels = ks.Pod.DESCRIPTOR.fields_by_name["metadata"].message_type.fields_by_name["labels"]
    assert labels.message_type.GetOptions().map_entry
    assert labels.message_type.name == "LabelsEntry"


def test_time_bytes() -> None:
    # ObjectMeta.creationTimestamp (8, LEN) Time { seconds (1) 1684543588, nanos (2) 0 }
    # 1684543588 = 0x64681864: varint e4 b0 a0 a3 06 (7 bits at a time, low first).
    seconds = b"\x08\xe4\xb0\xa0\xa3\x06"
    want = b"\x0a\x0a" + b"\x42\x08" + seconds + b"\x10\x00"
    assert encode_pod({"metadata": {"creationTimestamp": "2023-05-20T00:46:28Z"}}) == want
    # Same instant written with an offset, with a fraction (whole seconds on the wire, as
    # in Kubernetes), or as the datetime a YAML loader makes of an unquoted timestamp.
    for same in (
        "2023-05-20T09:46:28+09:00",
        "2023-05-20T00:46:28.75Z",
        dt.datetime(2023, 5, 20, 0, 46, 28, tzinfo=dt.UTC),
        yaml.safe_load("t: 2023-05-20T00:46:28Z")["t"],
    ):
        assert encode_pod({"metadata": {"creationTimestamp": same}}) == want, same
    assert decode_pod(want) == {"metadata": {"creationTimestamp": "2023-05-20T00:46:28Z"}}
    # The epoch itself is written out in full, so it is not mistaken for Go's null Time,
    # which Go writes as an empty message and reads back as null.
    epoch = encode_pod({"metadata": {"creationTimestamp": "1970-01-01T00:00:00Z"}})
    assert epoch == b"\x0a\x06\x42\x04\x08\x00\x10\x00"
    assert decode_pod(epoch) == {"metadata": {"creationTimestamp": "1970-01-01T00:00:00Z"}}
    assert decode_pod(b"\x0a\x02\x42\x00") == {"metadata": {}}
    before_epoch = encode_pod({"metadata": {"creationTimestamp": "1969-12-31T23:59:59Z"}})
    assert decode_pod(before_epoch)["metadata"]["creationTimestamp"] == "1969-12-31T23:59:59Z"


def test_micro_time_keeps_the_fraction() -> None:
    msg = ks.message_class(ks.MICRO_TIME)()
    seconds, nanos = codec._to_instant("2023-05-20T00:46:28.123456789Z", None)
    msg.seconds, msg.nanos = seconds, nanos
    assert (seconds, nanos) == (1684543588, 123456789)
    assert kube_decode._from_micro_time(msg) == "2023-05-20T00:46:28.123456Z"


def _port_of(pod_bytes: bytes) -> bytes:
    pod = ks.Pod()
    pod.ParseFromString(pod_bytes)
    return pod.spec.containers[0].livenessProbe.handler.tcpSocket.port.SerializeToString()


def test_int_or_string_bytes() -> None:
    def pod(port: Any) -> dict[str, Any]:
        return {"spec": {"containers": [{"livenessProbe": {"tcpSocket": {"port": port}}}]}}

    # IntOrString { type (1) 0, intVal (2) 8080 = varint 90 3f, strVal (3) "" } - all three
    # fields, as Go writes them.
    ios = b"\x08\x00\x10\x90\x3f\x1a\x00"
    data = encode_pod(pod(8080))
    assert _port_of(data) == ios
    # The whole nesting by hand: Pod.spec(2) > PodSpec.containers(2) > Container.
    # livenessProbe(10) > Probe.handler(1, embedded) > ProbeHandler.tcpSocket(3) >
    # TCPSocketAction.port(1).
    inner = b"\x0a\x07" + ios  # TCPSocketAction
    inner = b"\x1a\x09" + inner  # ProbeHandler
    inner = b"\x0a\x0b" + inner  # Probe
    inner = b"\x52\x0d" + inner  # Container
    inner = b"\x12\x0f" + inner  # PodSpec
    assert data == b"\x12\x11" + inner  # Pod
    assert decode_pod(data) == pod(8080)
    named = encode_pod(pod("http"))
    assert _port_of(named) == b"\x08\x01\x10\x00\x1a\x04http"
    assert decode_pod(named) == pod("http")
    assert decode_pod(encode_pod(pod("8080"))) == pod("8080")  # a string stays a string


def test_embedded_structs_flatten() -> None:
    spec = {
        "volumes": [
            {"name": "cfg", "configMap": {"name": "my-config", "defaultMode": 420}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
        "containers": [
            {
                "name": "c",
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                ],
                "envFrom": [{"configMapRef": {"name": "cm2"}, "prefix": "P_"}],
            }
        ],
        "ephemeralContainers": [{"name": "debug", "image": "busybox", "targetContainerName": "c"}],
    }
    data = encode_pod({"spec": spec})
    msg = ks.Pod()
    msg.ParseFromString(data)
    assert msg.spec.volumes[0].volumeSource.configMap.localObjectReference.name == "my-config"
    assert msg.spec.volumes[1].volumeSource.emptyDir.sizeLimit.string == "1Gi"
    env = msg.spec.containers[0].env
    assert env[0].valueFrom.configMapKeyRef.localObjectReference.name == "cm"
    assert env[1].valueFrom.secretKeyRef.localObjectReference.name == "s"
    assert msg.spec.ephemeralContainers[0].ephemeralContainerCommon.name == "debug"
    assert decode_pod(data) == {"spec": spec}


def test_managed_fields_carry_json_bytes() -> None:
    fields_v1: dict[str, Any] = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}
    pod = {
        "metadata": {
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2023-05-20T00:46:28Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1,
                }
            ]
        }
    }
    data = encode_pod(pod)
    msg = ks.Pod()
    msg.ParseFromString(data)
    assert msg.metadata.managedFields[0].fieldsV1.Raw == (b'{"f:metadata":{"f:labels":{".":{},"f:app":{}}}}')
    assert decode_pod(data) == pod


def test_a_full_featured_pod_round_trips() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
    }
    term = {
        "labelSelector": selector,
        "topologyKey": "kubernetes.io/hostname",
        "namespaces": ["default"],
        "matchLabelKeys": ["pod-template-hash"],
    }
    node_term = {
        "matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}],
        "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}],
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "namespace": "default",
            "uid": "u-1",
            "generation": 3,
            "labels": {"app": "web"},
            "annotations": {"a": "b"},
            "finalizers": ["x/y"],
            "deletionTimestamp": "2024-02-03T04:05:06Z",
            "deletionGracePeriodSeconds": 30,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "StatefulSet",
                    "name": "web",
                    "uid": "o-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-1",
            "schedulerName": "my-scheduler",
            "priority": 1000,
            "priorityClassName": "high",
            "preemptionPolicy": "Never",
            "nodeSelector": {"disk": "ssd"},
            "runtimeClassName": "gvisor",
            "overhead": {"cpu": "250m", "memory": "120Mi"},
            "hostNetwork": True,
            "hostPID": False,
            "hostIPC": False,
            "hostUsers": False,
            "activeDeadlineSeconds": 600,
            "setHostnameAsFQDN": True,
            "hostname": "web-0",
            "subdomain": "web",
            "hostnameOverride": "web-zero",
            "os": {"name": "linux"},
            "schedulingGates": [{"name": "example.com/gate"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-tmpl"}],
            "resources": {"limits": {"cpu": "4"}, "requests": {"cpu": "2"}},
            "workloadRef": {"name": "w", "podGroup": "g", "podGroupReplicaKey": "r"},
            "readinessGates": [{"conditionType": "example.com/ready"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a", "b"]}],
            "dnsConfig": {
                "nameservers": ["1.1.1.1"],
                "searches": ["svc"],
                "options": [{"name": "ndots", "value": "2"}],
            },
            "securityContext": {
                "runAsUser": 1000,
                "runAsGroup": 3000,
                "fsGroup": 2000,
                "runAsNonRoot": True,
                "supplementalGroups": [4, 5],
                "supplementalGroupsPolicy": "Strict",
                "fsGroupChangePolicy": "OnRootMismatch",
                "seLinuxChangePolicy": "Recursive",
                "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
                "seLinuxOptions": {"level": "s0:c123,c456"},
                "seccompProfile": {"type": "RuntimeDefault"},
                "appArmorProfile": {"type": "Localhost", "localhostProfile": "p"},
                "windowsOptions": {"runAsUserName": "u", "hostProcess": False},
            },
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [node_term]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": node_term}],
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term}],
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        dict(term, namespaceSelector={}, mismatchLabelKeys=["x"])
                    ],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}],
                },
            },
            "tolerations": [
                {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 0},
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": selector,
                    "minDomains": 2,
                    "nodeAffinityPolicy": "Honor",
                    "nodeTaintsPolicy": "Ignore",
                    "matchLabelKeys": ["pod-template-hash"],
                }
            ],
            "volumes": [
                {"name": "hp", "hostPath": {"path": "/var/log", "type": "Directory"}},
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
                {
                    "name": "sec",
                    "secret": {
                        "secretName": "s",
                        "defaultMode": 256,
                        "optional": True,
                        "items": [{"key": "k", "path": "p", "mode": 384}],
                    },
                },
                {
                    "name": "dapi",
                    "downwardAPI": {
                        "items": [
                            {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                            {
                                "path": "cpu",
                                "resourceFieldRef": {
                                    "containerName": "c",
                                    "resource": "limits.cpu",
                                    "divisor": "1m",
                                },
                            },
                        ]
                    },
                },
                {
                    "name": "proj",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "audience": "api",
                                    "expirationSeconds": 3607,
                                    "path": "token",
                                }
                            },
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {"secret": {"name": "s2", "optional": False}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                    },
                },
                {
                    "name": "csi",
                    "csi": {
                        "driver": "d",
                        "volumeAttributes": {"a": "b"},
                        "nodePublishSecretRef": {"name": "n"},
                    },
                },
                {
                    "name": "eph",
                    "ephemeral": {
                        "volumeClaimTemplate": {
                            "metadata": {"labels": {"t": "1"}},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "storageClassName": "fast",
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    },
                },
                {"name": "img", "image": {"reference": "repo/img:1", "pullPolicy": "Always"}},
            ],
            "containers": [
                {
                    "name": "web",
                    "image": "nginx",
                    "command": ["nginx"],
                    "args": ["-g", "x"],
                    "workingDir": "/",
                    "stdin": True,
                    "stdinOnce": True,
                    "tty": True,
                    "ports": [
                        {
                            "name": "http",
                            "containerPort": 80,
                            "hostPort": 8080,
                            "protocol": "TCP",
                            "hostIP": "0.0.0.0",
                        }
                    ],
                    "env": [
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {
                            "name": "LIM",
                            "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
                        },
                        {
                            "name": "F",
                            "valueFrom": {
                                "fileKeyRef": {
                                    "volumeName": "v",
                                    "path": "p",
                                    "key": "k",
                                    "optional": True,
                                }
                            },
                        },
                    ],
                    "envFrom": [{"secretRef": {"name": "s", "optional": True}}],
                    "resources": {
                        "limits": {"cpu": 1, "memory": "1Gi", "nvidia.com/gpu": "1"},
                        "requests": {"cpu": 0.5, "memory": "512Mi"},
                        "claims": [{"name": "gpu", "request": "r"}],
                    },
                    "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                    "restartPolicy": "Always",
                    "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42, 43]}}],
                    "volumeMounts": [
                        {
                            "name": "hp",
                            "mountPath": "/logs",
                            "readOnly": True,
                            "recursiveReadOnly": "IfPossible",
                            "subPath": "a",
                            "mountPropagation": "None",
                        }
                    ],
                    "volumeDevices": [{"name": "blk", "devicePath": "/dev/xvda"}],
                    "livenessProbe": {
                        "exec": {"command": ["true"]},
                        "periodSeconds": 5,
                        "terminationGracePeriodSeconds": 10,
                    },
                    "readinessProbe": {"grpc": {"port": 9000, "service": "health"}},
                    "startupProbe": {
                        "httpGet": {
                            "path": "/",
                            "port": 80,
                            "scheme": "HTTPS",
                            "host": "h",
                            "httpHeaders": [{"name": "X", "value": "y"}],
                        }
                    },
                    "lifecycle": {
                        "postStart": {"sleep": {"seconds": 3}},
                        "preStop": {"exec": {"command": ["stop"]}},
                        "stopSignal": "SIGTERM",
                    },
                    "securityContext": {
                        "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                        "allowPrivilegeEscalation": False,
                        "procMount": "Default",
                        "ulimits": [{"name": "nofile", "hard": 2048, "soft": 1024}],
                    },
                }
            ],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox", "stdin": True, "targetContainerName": "web"}],
        },
        "status": {
            "phase": "Pending",
            "qosClass": "Burstable",
            "nominatedNodeName": "node-2",
            "hostIP": "10.0.0.2",
            "hostIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}],
            "podIP": "10.1.0.5",
            "podIPs": [{"ip": "10.1.0.5"}],
            "observedGeneration": 3,
            "startTime": "2024-02-03T04:05:06Z",
            "message": "m",
            "reason": "r",
            "resize": "Proposed",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "observedGeneration": 2,
                    "lastTransitionTime": "2024-02-03T04:05:06Z",
                }
            ],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "web-0-gpu"}],
            "extendedResourceClaimStatus": {
                "resourceClaimName": "x",
                "requestMappings": [{"containerName": "web", "resourceName": "example.com/r", "requestName": "q"}],
            },
            "allocatedResources": {"cpu": "2"},
            "resources": {"requests": {"cpu": "2"}},
            "containerStatuses": [
                {
                    "name": "web",
                    "ready": False,
                    "restartCount": 3,
                    "started": False,
                    "image": "nginx",
                    "imageID": "sha",
                    "containerID": "c://1",
                    "stopSignal": "SIGTERM",
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 137,
                            "signal": 9,
                            "reason": "OOMKilled",
                            "startedAt": "2024-02-03T04:05:06Z",
                            "finishedAt": "2024-02-03T04:06:06Z",
                            "containerID": "c://0",
                            "message": "oom",
                        }
                    },
                    "allocatedResources": {"cpu": "1"},
                    "resources": {"limits": {"cpu": "1"}},
                    "volumeMounts": [
                        {
                            "name": "hp",
                            "mountPath": "/logs",
                            "readOnly": True,
                            "recursiveReadOnly": "Disabled",
                            "volumeStatus": {"image": {"imageRef": "sha256:1"}},
                        }
                    ],
                    "user": {"linux": {"uid": 1000, "gid": 3000, "supplementalGroups": [4, 5]}},
                    "allocatedResourcesStatus": [
                        {
                            "name": "claim:gpu/r",
                            "resources": [{"resourceID": "dev-1", "health": "Healthy", "message": "ok"}],
                        }
                    ],
                }
            ],
            "ephemeralContainerStatuses": [
                {"name": "dbg", "state": {"running": {"startedAt": "2024-02-03T04:05:07Z"}}}
            ],
        },
    }
    unknown: list[str] = []
    decoded = decode_pod(encode_pod(pod, unknown_fields=unknown))
    assert unknown == []
    assert_round_trip(pod, decoded)


def test_a_full_featured_node_round_trips(real_node: dict[str, Any]) -> None:
    node = copy.deepcopy(real_node)
    node["spec"].update(
        unschedulable=True,
        externalID="ext",
        taints=[{"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2024-01-01T00:00:00Z"}],
        configSource={"configMap": {"namespace": "kube-system", "name": "cfg", "kubeletConfigKey": "kubelet"}},
    )
    node["status"].update(
        phase="Running",
        volumesInUse=["kubernetes.io/csi/pd^vol-1"],
        volumesAttached=[{"name": "kubernetes.io/csi/pd^vol-1", "devicePath": "/dev/sdb"}],
        config={
            "active": {
                "configMap": {
                    "namespace": "kube-system",
                    "name": "cfg",
                    "uid": "u",
                    "resourceVersion": "1",
                    "kubeletConfigKey": "kubelet",
                }
            },
            "error": "none",
        },
        runtimeHandlers=[
            {"name": "", "features": {"recursiveReadOnlyMounts": True, "userNamespaces": False}},
            {"name": "runc", "features": {}},
        ],
        features={"supplementalGroupsPolicy": True, "containerUlimits": False},
        declaredFeatures=["A", "B"],
    )
    node["status"]["nodeInfo"]["swap"] = {"capacity": 1 << 33}
    unknown: list[str] = []
    decoded = decode_node(encode_node(node, unknown_fields=unknown))
    assert unknown == []
    assert_round_trip(node, decoded)


# --------------------------------------------------------------------------------------
# Field numbers, cross-checked against Kubernetes' generated.proto
# --------------------------------------------------------------------------------------

# Written down separately from the schema tables, from the generated.proto files.
_KNOWN_NUMBERS = {
    "Pod": {"metadata": 1, "spec": 2, "status": 3},
    "PodSpec": {
        "nodeName": 10,
        "containers": 2,
        "tolerations": 22,
        "priority": 25,
        "nodeSelector": 7,
        "affinity": 18,
        "initContainers": 20,
        "volumes": 1,
        "schedulerName": 19,
        "overhead": 32,
        "topologySpreadConstraints": 33,
        "schedulingGates": 38,
        "resourceClaims": 39,
        "ephemeralContainers": 34,
    },
    "Node": {"metadata": 1, "spec": 2, "status": 3},
    "NodeSpec": {"taints": 5, "unschedulable": 4, "podCIDR": 1, "podCIDRs": 7, "providerID": 3},
    "NodeStatus": {
        "allocatable": 2,
        "capacity": 1,
        "images": 8,
        "conditions": 4,
        "addresses": 5,
        "runtimeHandlers": 12,
        "features": 13,
    },
    "NodeList": {"metadata": 1, "items": 2},
    "Container": {"name": 1, "image": 2, "resources": 8, "envFrom": 19, "startupProbe": 22},
    "PodStatus": {
        "phase": 1,
        "conditions": 2,
        "hostIP": 5,
        "podIPs": 12,
        "hostIPs": 16,
        "nominatedNodeName": 11,
        "qosClass": 9,
        "startTime": 7,
    },
    "Toleration": {"key": 1, "operator": 2, "value": 3, "effect": 4, "tolerationSeconds": 5},
    "Taint": {"key": 1, "value": 2, "effect": 3, "timeAdded": 4},
    "meta:ObjectMeta": {
        "name": 1,
        "namespace": 3,
        "uid": 5,
        "labels": 11,
        "resourceVersion": 6,
        "generateName": 2,
        "creationTimestamp": 8,
        "annotations": 12,
        "ownerReferences": 13,
        "managedFields": 17,
    },
    "meta:OwnerReference": {"kind": 1, "name": 3, "uid": 4, "apiVersion": 5, "controller": 6},
    "meta:Time": {"seconds": 1, "nanos": 2},
    "meta:FieldsV1": {"Raw": 1},
    "meta:ListMeta": {"resourceVersion": 2, "continue": 3},
    "resource:Quantity": {"string": 1},
    "intstr:IntOrString": {"type": 1, "intVal": 2, "strVal": 3},
}


@pytest.mark.parametrize("message", sorted(_KNOWN_NUMBERS))
def test_field_numbers_match_kubernetes(message: str) -> None:
    package = {"meta": ks.META_V1, "resource": ks.RESOURCE, "intstr": ks.INTSTR}
    prefix, _, name = message.rpartition(":")
    full = f"{package.get(prefix, ks.CORE_V1)}.{name}"
    fields = ks.message_class(full).DESCRIPTOR.fields_by_name
    for field, number in _KNOWN_NUMBERS[message].items():
        assert fields[field].number == number, f"{full}.{field}"


def test_schema_lives_in_a_private_pool() -> None:
    assert ks.Pod.DESCRIPTOR.file.pool is not descriptor_pool.Default()
    assert ks.Pod.DESCRIPTOR.full_name == "k8s.io.api.core.v1.Pod"
    assert ks.Pod.DESCRIPTOR.file.name == "k8s.io/api/core/v1/generated.proto"
    files = ks.build_file_descriptor_protos()
    assert [f.package for f in files] == [ks.INTSTR, ks.RESOURCE, ks.META_V1, ks.CORE_V1]


# --------------------------------------------------------------------------------------
# Numbers and strings in JSON
# --------------------------------------------------------------------------------------


def test_int_fields_accept_numeric_strings() -> None:
    data = encode_pod({"spec": {"priority": "7", "terminationGracePeriodSeconds": 30.0}})
    assert decode_pod(data) == {"spec": {"priority": 7, "terminationGracePeriodSeconds": 30}}


def test_bytes_are_standard_base64() -> None:
    assert codec._to_bytes("aGk+Pw==", None) == b"hi>?"
    assert kube_decode._from_bytes(b"hi>?") == "aGk+Pw=="
    with pytest.raises(KubeCodecError, match="x: expected base64 text"):
        codec._to_bytes("not base64!", (None, "x"))


# --------------------------------------------------------------------------------------
# Errors name the path
# --------------------------------------------------------------------------------------


def _container(**fields: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", **fields}]}}


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            _container(resources={"limits": {"cpu": {"a": 1}}}),
            "spec.containers[0].resources.limits.cpu: expected a quantity, got dict",
        ),
        (
            _container(resources={"limits": {"cpu": "1.2.3"}}),
            "spec.containers[0].resources.limits.cpu: '1.2.3' is not a quantity",
        ),
        (
            _container(resources={"requests": {"memory": True}}),
            "spec.containers[0].resources.requests.memory: expected a quantity, got bool True",
        ),
        (
            _container(resources={"limits": {"cpu": float("nan")}}),
            "spec.containers[0].resources.limits.cpu: expected a quantity, got float nan",
        ),
        (
            {"spec": {"priority": "high"}},
            "spec.priority: expected an integer (int32), got str 'high'",
        ),
        ({"spec": {"priority": 1 << 31}}, "spec.priority: 2147483648 is out of range for int32"),
        ({"spec": {"priority": 1.5}}, "spec.priority: expected an integer (int32), got float 1.5"),
        ({"spec": {"nodeName": {"a": "b"}}}, "spec.nodeName: expected a string, got dict"),
        ({"spec": {"hostNetwork": "true"}}, "spec.hostNetwork: expected a boolean, got str 'true'"),
        (
            {"metadata": {"creationTimestamp": "yesterday"}},
            "metadata.creationTimestamp: expected an RFC 3339 timestamp, got str 'yesterday'",
        ),
        (
            {"metadata": {"creationTimestamp": "2023-02-30T00:00:00Z"}},
            "metadata.creationTimestamp: expected an RFC 3339 timestamp",
        ),
        (
            {"metadata": {"creationTimestamp": 1684543588}},
            "metadata.creationTimestamp: expected an RFC 3339 timestamp, got int 1684543588",
        ),
        ({"metadata": {"labels": {"app": 1}}}, "metadata.labels.app: expected a string, got int 1"),
        (
            {"metadata": {"labels": {"app.kubernetes.io/name": None}}},
            'metadata.labels["app.kubernetes.io/name"]: expected a string, got null',
        ),
        ({"metadata": {"labels": {1: "x"}}}, 'metadata.labels["1"]: map keys must be strings'),
        ({"metadata": {"labels": ["a"]}}, "metadata.labels: expected an object, got list"),
        ({"spec": {"containers": {"name": "c"}}}, "spec.containers: expected a list, got dict"),
        (
            {"spec": {"containers": [{"name": "c"}, "d"]}},
            "spec.containers[1]: expected an object, got str 'd'",
        ),
        (_container(command="sleep 1"), "spec.containers[0].command: expected a list, got str"),
        (
            _container(command=["sleep", 1]),
            "spec.containers[0].command[1]: expected a string, got int 1",
        ),
        (
            _container(livenessProbe={"tcpSocket": {"port": 1.5}}),
            "spec.containers[0].livenessProbe.tcpSocket.port: expected an integer or a string",
        ),
        (
            _container(livenessProbe={"httpGet": {"port": 1 << 40}}),
            "spec.containers[0].livenessProbe.httpGet.port: 1099511627776 is out of range",
        ),
        (
            {"metadata": {"managedFields": [{"fieldsV1": "f:x"}]}},
            "metadata.managedFields[0].fieldsV1: expected an object, got str 'f:x'",
        ),
        (
            {"metadata": {"managedFields": [{"fieldsV1": {"a": float("inf")}}]}},
            "metadata.managedFields[0].fieldsV1: ",
        ),
        (
            {"spec": {"volumes": [{"name": "v", "configMap": {"name": 5}}]}},
            "spec.volumes[0].configMap.name: expected a string, got int 5",
        ),
        ({"kind": "Node"}, "kind: expected 'Pod', got str 'Node'"),
        ({"metadata": {"name": "bad\ud800"}}, "metadata.name: "),
    ],
)
def test_errors_name_the_path(pod: dict[str, Any], message: str) -> None:
    with pytest.raises(KubeCodecError) as info:
        encode_pod(pod)
    assert str(info.value).startswith(message)
    assert isinstance(info.value, ValueError)


def test_error_for_a_non_object_and_in_a_node_list(real_node: dict[str, Any]) -> None:
    with pytest.raises(KubeCodecError, match=r"^<root>: expected an object, got list"):
        encode_pod([])  # type: ignore[arg-type]
    with pytest.raises(KubeCodecError, match=r"^<root>: expected a list of nodes, got dict"):
        encode_node_list(real_node)  # type: ignore[arg-type]
    bad = copy.deepcopy(real_node)
    bad["metadata"]["name"] = ["x"]
    with pytest.raises(KubeCodecError, match=r"^items\[1\]\.metadata\.name: expected a string"):
        encode_node_list([real_node, bad])
    with pytest.raises(KubeCodecError, match=r"^items\[0\]\.status\.capacity\.cpu: "):
        encode_node_list([{"status": {"capacity": {"cpu": "lots"}}}])


def test_decode_errors() -> None:
    with pytest.raises(KubeCodecError, match="^<root>: not a valid Pod message"):
        decode_pod(b"\x0a\x05\x0a")  # a length that runs past the end
    with pytest.raises(KubeCodecError, match="^<root>: expected bytes, got str"):
        decode_pod("abc")  # type: ignore[arg-type]
    with pytest.raises(KubeCodecError, match=r"^metadata\.name: string field is not valid UTF-8"):
        decode_pod(b"\x0a\x04\x0a\x02\xff\xfe")
    # IntOrString with type 7, deep in a container.
    bad_port = b"\x08\x07"
    inner = b"\x0a" + bytes([len(bad_port)]) + bad_port  # TCPSocketAction.port
    inner = b"\x1a" + bytes([len(inner)]) + inner  # ProbeHandler.tcpSocket
    inner = b"\x0a" + bytes([len(inner)]) + inner  # Probe.handler
    inner = b"\x52" + bytes([len(inner)]) + inner  # Container.livenessProbe
    inner = b"\x12" + bytes([len(inner)]) + inner  # PodSpec.containers
    with pytest.raises(
        KubeCodecError,
        match=r"^spec\.containers\[0\]\.livenessProbe\.tcpSocket\.port: IntOrString type 7",
    ):
        decode_pod(b"\x12" + bytes([len(inner)]) + inner)
    # A time far outside what RFC 3339 can print.
    far = b"\x08" + _varint(1 << 50)
    with pytest.raises(KubeCodecError, match=r"^metadata\.creationTimestamp: time "):
        decode_pod(b"\x0a" + bytes([len(far) + 2]) + b"\x42" + bytes([len(far)]) + far)
    # managedFields whose FieldsV1 is not JSON.
    mf = b"\x3a\x03\x0a\x01{"  # ManagedFieldsEntry.fieldsV1 { Raw "{" }
    with pytest.raises(KubeCodecError, match=r"^metadata\.managedFields\[0\]\.fieldsV1: "):
        decode_pod(b"\x0a" + bytes([len(mf) + 3]) + b"\x8a\x01" + bytes([len(mf)]) + mf)


# --------------------------------------------------------------------------------------
# Unknown keys
# --------------------------------------------------------------------------------------


def test_unknown_keys_are_reported_and_logged(real_pod: dict[str, Any]) -> None:
    pod = copy.deepcopy(real_pod)
    pod["spec"]["containers"][0]["frobnicate"] = {"x": 1}
    pod["metadata"]["extra"] = "x"
    pod["status"]["conditions"][1]["app.example/odd key"] = 1
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        unknown: list[str] = []
        with capture_logs() as logs:
            data = encode_pod(pod, unknown_fields=unknown)
    finally:
        structlog.configure(**old)
    assert unknown == [
        "metadata.extra",
        "spec.containers[0].frobnicate",
        'status.conditions[1]["app.example/odd key"]',
    ]
    assert decode_pod(data) == decode_pod(encode_pod(real_pod))
    [event] = [e for e in logs if e["event"] == "kube_codec.unknown_fields_ignored"]
    assert event["log_level"] == "debug"
    assert event["paths"] == unknown
    assert event["object"] == "Pod"


# --------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------

_JSON_NAMES = sorted({f.name for fields in ks.MESSAGE_FIELDS.values() for f in fields} | {"apiVersion", "kind"})
_keys = st.one_of(st.sampled_from(_JSON_NAMES), st.text(max_size=8))
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["100m", "2Gi", "2023-05-20T00:46:28Z", "8080", "", "1e3"]),
)
_json_like = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=40,
)


def _only_codec_errors(call: Any, value: Any) -> None:
    with contextlib.suppress(KubeCodecError):
        call(value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _json_like, max_size=6))
def test_garbage_dicts_raise_only_codec_errors(obj: dict[Any, Any]) -> None:
    _only_codec_errors(encode_pod, obj)
    _only_codec_errors(encode_node, obj)
    _only_codec_errors(encode_node_list, [obj])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_bytes_raise_only_codec_errors(data: bytes) -> None:
    _only_codec_errors(decode_pod, data)
    _only_codec_errors(decode_node, data)
    _only_codec_errors(decode_node_list, data)


# Schema-shaped objects: each field holds a value of its JSON type, or now and then
# garbage; nested messages down to a bounded depth.
_text = st.text(max_size=10)
_quantities = st.one_of(
    st.from_regex(r"[+-]?[0-9]{1,4}(\.[0-9]{1,3})?(m|k|M|G|Ki|Mi|Gi|e3)?", fullmatch=True),
    st.integers(min_value=0, max_value=10**6),
)
_times = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(
    lambda d: d.replace(microsecond=0, tzinfo=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
)
_int_ranges = {ks.INT32: (-(1 << 31), (1 << 31) - 1), ks.INT64: (-(1 << 63), (1 << 63) - 1)}
_strategies: dict[tuple[str, int, bool], st.SearchStrategy[dict[str, Any]]] = {}


def _scalar_strategy(ftype: str) -> st.SearchStrategy[Any]:
    if ftype == ks.STRING:
        return _text
    if ftype == ks.BOOL:
        return st.booleans()
    if ftype == ks.BYTES:
        return st.binary(max_size=8).map(lambda b: base64.b64encode(b).decode())
    low, high = _int_ranges[ftype]
    return st.integers(min_value=low, max_value=high)


def _field_strategy(field: ks.Field, depth: int, garbage: bool) -> st.SearchStrategy[Any]:
    if field.type != ks.MESSAGE:
        one = _scalar_strategy(field.type)
        if field.label == ks.MAP:
            return st.dictionaries(_text, one, max_size=3)
        if field.label == ks.REPEATED:
            return st.lists(one, max_size=3)
        return one
    special: dict[str, st.SearchStrategy[Any]] = {
        ks.QUANTITY: _quantities,
        ks.TIME: _times,
        ks.INT_OR_STRING: st.one_of(st.integers(0, 65535), _text),
        ks.FIELDS_V1: st.dictionaries(_text, st.just({}), max_size=3),
    }
    assert field.type_name is not None
    if field.type_name in special:
        one = special[field.type_name]
    else:
        one = _message_strategy(field.type_name, depth - 1, garbage)
    if field.label == ks.MAP:
        return st.dictionaries(_text, one, max_size=3)
    if field.label == ks.REPEATED:
        return st.lists(one, max_size=2)
    return one


def _message_strategy(name: str, depth: int, garbage: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    """Objects shaped like message ``name``; with ``garbage``, any value may be junk."""
    if depth <= 0:
        return st.just({})
    if (name, depth, garbage) in _strategies:
        return _strategies[(name, depth, garbage)]
    optional: dict[str, st.SearchStrategy[Any]] = {}
    embedded: list[st.SearchStrategy[dict[str, Any]]] = []
    for field in ks.MESSAGE_FIELDS[name]:
        if field.label == ks.EMBED:
            assert field.type_name is not None
            embedded.append(_message_strategy(field.type_name, depth, garbage))
        else:
            value = _field_strategy(field, depth, garbage)
            if garbage:
                value = st.one_of(value, _json_like)
            optional[field.name] = value
    strategy = st.fixed_dictionaries({}, optional=optional)
    for inner in embedded:
        strategy = st.tuples(strategy, inner).map(lambda pair: {**pair[1], **pair[0]})
    _strategies[(name, depth, garbage)] = strategy
    return strategy


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_message_strategy(f"{ks.CORE_V1}.Pod", 5))
def test_schema_shaped_pods_round_trip(pod: dict[str, Any]) -> None:
    decoded = decode_pod(encode_pod(pod))
    assert _canon(decoded, f"{ks.CORE_V1}.Pod") == _canon(pod, f"{ks.CORE_V1}.Pod")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_message_strategy(f"{ks.CORE_V1}.Node", 5))
def test_schema_shaped_nodes_round_trip(node: dict[str, Any]) -> None:
    decoded = decode_node(encode_node(node))
    assert _canon(decoded, f"{ks.CORE_V1}.Node") == _canon(node, f"{ks.CORE_V1}.Node")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _message_strategy(f"{ks.CORE_V1}.Pod", 5, garbage=True),
    _message_strategy(f"{ks.CORE_V1}.Node", 5, garbage=True),
)
def test_schema_shaped_garbage_raises_only_codec_errors(pod: dict[str, Any], node: dict[str, Any]) -> None:
    # Wrong values deep inside real structure reach every converter; an object that does
    # encode must decode again.
    for encode, decode, obj in ((encode_pod, decode_pod, pod), (encode_node, decode_node, node)):
        try:
            data = encode(obj)
        except KubeCodecError as exc:
            assert ": " in str(exc)
            continue
        decode(data)


_OPAQUE = (ks.TIME, ks.INT_OR_STRING, ks.FIELDS_V1)  # compared as they are


def _canon(obj: dict[str, Any], name: str) -> dict[str, Any]:
    """Schema-aware normal form: drop empty lists and maps, quantities as text."""
    fields = {}
    for field in ks.MESSAGE_FIELDS[name]:
        if field.label == ks.EMBED:
            assert field.type_name is not None
            for inner in ks.MESSAGE_FIELDS[field.type_name]:
                fields[inner.name] = inner
        else:
            fields[field.name] = field
    out: dict[str, Any] = {}
    for key, value in obj.items():
        field = fields[key]
        if field.label in (ks.MAP, ks.REPEATED) and not value:
            continue
        if field.type_name == ks.QUANTITY:
            value = {k: str(v) for k, v in value.items()} if field.label == ks.MAP else str(value)
        elif field.type_name is not None and field.type_name not in _OPAQUE:
            if field.label == ks.REPEATED:
                value = [_canon(v, field.type_name) for v in value]
            elif field.label != ks.MAP:
                value = _canon(value, field.type_name)
        out[key] = value
    return out

