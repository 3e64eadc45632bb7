#!/usr/bin/env python3
"""Generate examples/cluster.yaml, the snapshot `wasm-scheduler simulate` runs by default.

The output has the shape ``kubectl get nodes,pods -A -o yaml`` prints: a v1 ``List``
of 20 nodes of varied size, zone and instance type (two GPU nodes tainted
``dedicated=gpu:NoSchedule``, one cordoned, one with a PreferNoSchedule taint, names
ending in digits so the NodeNumber plugin matters), the pods already running on them
(system pods, and low-priority batch fillers on the big nodes), and 50 pending pods of
varied shapes and priorities: most fit somewhere; some need a zone, an instance type
or a GPU; a few fit nowhere; a few critical ones fit only after preempting fillers.
The random choices use a fixed seed, so the file is the same on every run.

    python examples/make_cluster.py > examples/cluster.yaml
"""

from __future__ import annotations

import random
import sys
import uuid
from typing import Any

import yaml

SEED = 20240501
ZONES = ("zone-a", "zone-b", "zone-c")
#: instance type -> (cpu, memory, pods, gpus)
TYPES = {
    "e2-small": ("2", "4Gi", 30, 0),
    "e2-standard-4": ("4", "16Gi", 60, 0),
    "e2-standard-8": ("8", "32Gi", 110, 0),
    "e2-standard-16": ("16", "64Gi", 110, 0),
    "n1-standard-8-t4": ("8", "30Gi", 110, 2),
}
#: name suffix -> (instance type, zone index)
NODES = [
    ("e2-standard-4", 0), ("e2-standard-4", 1), ("e2-small", 2), ("e2-standard-8", 0), ("e2-standard-4", 1),
    ("e2-small", 2), ("e2-standard-8", 0), ("e2-standard-4", 1), ("e2-standard-16", 2), ("e2-standard-4", 0),
    ("e2-small", 1), ("e2-standard-8", 2), ("n1-standard-8-t4", 0), ("e2-standard-4", 1), ("e2-small", 2),
    ("e2-standard-8", 0), ("e2-standard-4", 1), ("n1-standard-8-t4", 2), ("e2-standard-16", 0), ("e2-standard-4", 2),
]
PRIORITY = {"low-priority": 100, "medium-priority": 1000, "high-priority": 100000, "critical": 1000000,
            "system-node-critical": 2000001000}
IMAGES = {"registry.k8s.io/kube-proxy:v1.29.2": 27_600_000, "nginx:1.25": 70_500_000,
          "python:3.11": 1_010_000_000, "redis:7.2": 45_100_000}
CREATED = "2024-05-01T08:00:00Z"


def uid(kind: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"wasm-scheduler-example:{kind}:{name}"))


def node(index: int, kind: str, zone: int, rng: random.Random) -> dict[str, Any]:
    name = f"node-{index:02d}"
    cpu, memory, pods, gpus = TYPES[kind]
    capacity: dict[str, Any] = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": kind,
        "topology.kubernetes.io/region": "region-1",
        "topology.kubernetes.io/zone": ZONES[zone],
    }
    spec: dict[str, Any] = {"podCIDR": f"10.0.{index}.0/24", "providerID": f"example://{name}"}
    taints = []
    if gpus:
        labels["accelerator"] = "nvidia-t4"
        taints.append({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"})
    if index == 14:
        spec["unschedulable"] = True
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": CREATED})
    if index == 6:
        taints.append({"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"})
    if taints:
        spec["taints"] = taints
    images = [name_ for name_ in IMAGES if name_.startswith("registry") or rng.random() < 0.4]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": uid("node", name), "labels": labels, "creationTimestamp": CREATED,
                     "resourceVersion": str(1000 + index)},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "lastHeartbeatTime": CREATED, "lastTransitionTime": CREATED}],
            "images": [{"names": [image], "sizeBytes": IMAGES[image]} for image in images],
            "nodeInfo": {"kubeletVersion": "v1.29.2", "containerRuntimeVersion": "containerd://1.7.13",
                         "architecture": "amd64", "operatingSystem": "linux"},
        },
    }


def pod(name: str, *, namespace: str = "default", cpu: str, memory: str, priority_class: str,
        image: str = "nginx:1.25", node_name: str = "", extra_spec: dict[str, Any] | None = None,
        gpus: int = 0, labels: dict[str, str] | None = None) -> dict[str, Any]:
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory}
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "containers": [{"name": name.rsplit("-", 1)[0], "image": image, "resources": resources}],
        "priorityClassName": priority_class,
        "priority": PRIORITY[priority_class],
        "schedulerName": "default-scheduler",
        "restartPolicy": "Always",
        "preemptionPolicy": "PreemptLowerPriority",
        "terminationGracePeriodSeconds": 30,
    }
    spec.update(extra_spec or {})
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Burstable"}
    if node_name:
        spec["nodeName"] = node_name
        status = {"phase": "Running", "qosClass": "Burstable", "startTime": CREATED,
                  "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": CREATED}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid("pod", f"{namespace}/{name}"),
                     "labels": labels or {"app": name.rsplit("-", 1)[0]}, "creationTimestamp": CREATED},
        "spec": spec,
        "status": status,
    }


def running_pods(nodes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    for n in nodes:
        name = n["metadata"]["name"]
        kind = n["metadata"]["labels"]["node.kubernetes.io/instance-type"]
        pods.append(pod(f"kube-proxy-{name}", namespace="kube-system", cpu="100m", memory="64Mi",
                        priority_class="system-node-critical", image="registry.k8s.io/kube-proxy:v1.29.2",
                        node_name=name, labels={"k8s-app": "kube-proxy"}))
        # Big nodes are full of low-priority batch work: critical pods must preempt it.
        fillers = {"e2-standard-8": 3, "e2-standard-16": 6}.get(kind, 0)
        for i in range(fillers):
            pods.append(pod(f"filler-{name}-{i}", namespace="batch", cpu="2", memory="2Gi",
                            priority_class="low-priority", image="python:3.11", node_name=name))
        if kind == "e2-standard-4" and rng.random() < 0.6:
            pods.append(pod(f"cache-{name}", cpu="1", memory="4Gi", priority_class="high-priority",
                            image="redis:7.2", node_name=name))
    return pods


def pending_pods(rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    for i in range(25):
        pods.append(pod(f"web-{i}", cpu=rng.choice(["100m", "250m", "500m"]),
                        memory=rng.choice(["128Mi", "256Mi", "512Mi"]), priority_class="medium-priority"))
    for i in range(8):
        pods.append(pod(f"batch-{i}", namespace="batch", cpu=rng.choice(["1", "1500m", "2"]),
                        memory=rng.choice(["2Gi", "3Gi", "4Gi"]), priority_class="low-priority",
                        image="python:3.11"))
    for i in range(4):
        pods.append(pod(f"zonal-{i}", cpu="250m", memory="256Mi", priority_class="medium-priority",
                        extra_spec={"nodeSelector": {"topology.kubernetes.io/zone": "zone-b"}}))
    for i in range(3):
        pods.append(pod(f"mem-{i}", cpu="500m", memory="8Gi", priority_class="medium-priority", image="redis:7.2",
                        extra_spec={"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{
                                "key": "node.kubernetes.io/instance-type", "operator": "In",
                                "values": ["e2-standard-8", "e2-standard-16"]}]}]}}}}))
    for i in range(3):
        pods.append(pod(f"gpu-{i}", namespace="ml", cpu="2", memory="8Gi", priority_class="high-priority",
                        image="python:3.11", gpus=1,
                        extra_spec={"nodeSelector": {"accelerator": "nvidia-t4"},
                                    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                                     "effect": "NoSchedule"}]}))
    pods.append(pod("huge-0", cpu="64", memory="8Gi", priority_class="medium-priority"))
    pods.append(pod("huge-1", cpu="1", memory="512Gi", priority_class="medium-priority"))
    pods.append(pod("huge-2", namespace="ml", cpu="4", memory="8Gi", priority_class="high-priority", gpus=4,
                    extra_spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]}))
    pods.append(pod("pinned-0", cpu="100m", memory="64Mi", priority_class="medium-priority",
                    extra_spec={"nodeSelector": {"topology.kubernetes.io/zone": "zone-z"}}))
    for i in range(3):
        pods.append(pod(f"critical-{i}", namespace="prod", cpu="6", memory="8Gi", priority_class="critical",
                        image="redis:7.2"))
    pods.append(pod("polite-0", namespace="prod", cpu="6", memory="8Gi", priority_class="critical",
                    extra_spec={"preemptionPolicy": "Never"}))
    return pods


def main() -> None:
    rng = random.Random(SEED)
    nodes = [node(i, kind, zone, rng) for i, (kind, zone) in enumerate(NODES)]
    items = [*nodes, *running_pods(nodes, rng), *pending_pods(rng)]
    document = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
    sys.stdout.write("# Generated by examples/make_cluster.py; edit that script, not this file.\n")
    yaml.safe_dump(document, sys.stdout, sort_keys=False, default_flow_style=False, width=120)


if __name__ == "__main__":
    main()
