"""Reading a cluster snapshot: what ``kubectl get nodes,pods -A -o yaml`` prints.

This module owns turning a YAML file (a ``List``, a ``NodeList``/``PodList``, or
several documents of Nodes and Pods) into a checked `Cluster`: nodes, the pods
running on them (``spec.nodeName`` set) and the pending pods, in file order, plus the
Services, ReplicaSets, StatefulSets and ReplicationControllers when the file has them
(`Workloads`: PodTopologySpread's default constraints read their selectors). It fills
in what the API server would have (a uid, the namespace, ``spec.priority`` from a
``PriorityClass`` in the same file or a built-in one), drops pods that have finished,
and turns every mistake into a `UserError` naming the file, the object and the field.
Objects of other kinds are skipped with a warning. A large snapshot takes seconds to
parse: `load_cluster` reports the start and the end of a load to an optional callback
(`LoadStep`), so a caller can show progress, and logs ``cluster.loaded``.

See `docs/framework.md`.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wasm_scheduler.adapters.framework.errors import UserError, clip, shown, where
from wasm_scheduler.adapters.framework.pods import KubeObject, PodInfo, node_name_of, pod_name
from wasm_scheduler.adapters.framework.resources import QuantityError, Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo, Snapshot
from wasm_scheduler.adapters.framework.workloads import NO_WORKLOADS, WORKLOAD_KINDS, Workloads
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.framework.cluster")

#: PriorityClasses every cluster has.
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_LIST_KINDS = {"List": None, "NodeList": "Node", "PodList": "Pod", "PriorityClassList": "PriorityClass",
               **{f"{kind}List": kind for kind in WORKLOAD_KINDS}}
_TERMINAL_PHASES = ("Succeeded", "Failed")
#: Names a warning lists at most.
_WARNED_NAMES = 10
MIB = 1024 * 1024
#: Largest scheduler configuration, cluster snapshot or kubeconfig file read, in bytes.
MAX_FILE_BYTES = 256 * MIB


#: What the loader and the plugins read of an object, by type, so a wrong type is one
#: line at load time, not a traceback later: a type, a nested shape (a mapping of
#: field -> shape), a one-item list (a list of that shape), or `_STRING_MAP` (labels).
#: None stands for an absent field; unknown fields are not checked.
_STRING_MAP = "string map"
_OBJECT: Mapping[str, Any] = {
    "metadata": {"name": str, "namespace": str, "uid": str, "labels": _STRING_MAP, "annotations": _STRING_MAP},
}
#: A metav1.LabelSelector (a ReplicaSet's or StatefulSet's spec.selector).
_LABEL_SELECTOR = {"matchLabels": _STRING_MAP,
                   "matchExpressions": [{"key": str, "operator": str, "values": [str]}]}
_CONTAINER = {"name": str, "image": str, "resources": {"requests": Mapping, "limits": Mapping},
              "ports": [{"hostPort": int, "containerPort": int, "protocol": str, "hostIP": str}]}
_SHAPES: Mapping[str, Mapping[str, Any]] = {
    "Node": {
        **_OBJECT,
        "spec": {"unschedulable": bool, "taints": [{"key": str, "value": str, "effect": str}]},
        "status": {"allocatable": Mapping, "capacity": Mapping, "images": [{"names": [str], "sizeBytes": int}]},
    },
    "Pod": {
        **_OBJECT,
        "spec": {"nodeName": str, "schedulerName": str, "priorityClassName": str, "nodeSelector": _STRING_MAP,
                 "tolerations": [{"key": str, "operator": str, "value": str, "effect": str,
                                  "tolerationSeconds": int}],
                 "affinity": Mapping, "overhead": Mapping, "containers": [_CONTAINER],
                 "initContainers": [_CONTAINER], "topologySpreadConstraints": [Mapping], "volumes": [Mapping]},
        "status": {"phase": str, "nominatedNodeName": str},
    },
    "Service": {**_OBJECT, "spec": {"selector": _STRING_MAP}},
    "ReplicationController": {**_OBJECT, "spec": {"selector": _STRING_MAP}},
    "ReplicaSet": {**_OBJECT, "spec": {"selector": _LABEL_SELECTOR}},
    "StatefulSet": {**_OBJECT, "spec": {"selector": _LABEL_SELECTOR}},
}


def _shape_problem(value: Any, shape: Any, at: str) -> str:
    """"field: expected ..., got ..." for the first value of the wrong type, "" when all fit."""
    if value is None:
        return ""
    prefix = f"{at}: " if at else ""
    if shape == _STRING_MAP:
        if not isinstance(value, Mapping):
            return f"{prefix}expected a mapping of strings, got {type(value).__name__}"
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, str):
                bad = key if not isinstance(key, str) else item
                return f"{at}.{clip(str(key))}: expected a string (quote it), got {type(bad).__name__} {shown(bad)}"
        return ""
    if isinstance(shape, list):
        if not isinstance(value, list):
            return f"{prefix}expected a list, got {type(value).__name__}"
        for i, item in enumerate(value):
            problem = _shape_problem(item, shape[0], f"{at}[{i}]")
            if problem:
                return problem
        return ""
    if isinstance(shape, Mapping):
        if not isinstance(value, Mapping):
            return f"{prefix}expected a mapping, got {type(value).__name__}"
        for field, inner in shape.items():
            problem = _shape_problem(value.get(field), inner, f"{at}.{field}" if at else field)
            if problem:
                return problem
        return ""
    if not isinstance(value, shape) or (shape is int and isinstance(value, bool)):
        expected = {str: "a string", int: "an integer", bool: "true or false", Mapping: "a mapping"}[shape]
        return f"{prefix}expected {expected}, got {type(value).__name__} {shown(value)}"
    return ""


@dataclass(frozen=True)
class Cluster:
    """A checked snapshot: nodes with their allocatable, running and pending pods."""

    source: str
    nodes: tuple[NodeInfo, ...]
    #: Pods with spec.nodeName, as PodInfo, by node (already counted in `nodes`).
    running: tuple[PodInfo, ...]
    #: Pods without spec.nodeName, in file order.
    pending: tuple[PodInfo, ...]
    #: Services, ReplicaSets, StatefulSets and ReplicationControllers of the file (often none).
    workloads: Workloads = NO_WORKLOADS

    def snapshot(self) -> Snapshot:
        return Snapshot(self.nodes)

    def find_pending(self, name: str) -> PodInfo | None:
        """A pending pod by ``namespace/name``, or by name alone when that is unambiguous."""
        if "/" in name:
            return next((p for p in self.pending if p.key == name), None)
        matches = [p for p in self.pending if p.key.split("/", 1)[1] == name]
        return matches[0] if len(matches) == 1 else None


@dataclass(frozen=True)
class LoadStep:
    """The start (``done`` False) or the end (``done`` True, with the counts) of loading a cluster file."""

    path: Path
    size_bytes: int
    done: bool = False
    nodes: int = 0
    #: Pods kept: running and pending (finished pods are dropped).
    pods: int = 0
    seconds: float = 0.0


#: Called with a `LoadStep` when a load starts and when it ends (not when it fails).
LoadProgress = Callable[[LoadStep], None]


def yaml_loader() -> type[Any]:
    """libyaml's safe loader when PyYAML was built with it (several times faster), else the pure one."""
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_regular_file(path: Path, what: str, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; UserError for anything else.

    The path is stat'ed first: a device (``/dev/zero``), a FIFO or a socket is refused
    without being opened (opening a FIFO blocks until a writer comes), and so is a file
    larger than `max_bytes`. The read is bounded too, for a file that grows meanwhile.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what} file") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read the {what} file: {getattr(exc, 'strerror', None) or exc}") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{path}: is a directory, not a {what} file")
    if not stat.S_ISREG(mode):
        raise UserError(f"{path}: not a regular file (a device, FIFO or socket); give a {what} file")
    limit = f"the largest {what} file read is {max_bytes // MIB} MiB" if max_bytes >= MIB else \
        f"the largest {what} file read is {max_bytes} bytes"
    try:
        # O_NONBLOCK: were the path swapped for a FIFO since the stat, opening it must not block.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise UserError(f"{path}: not a regular file (a device, FIFO or socket); give a {what} file")
            if os.fstat(file.fileno()).st_size > max_bytes:
                raise UserError(f"{path}: the {what} file is too large ({limit})")
            data = file.read(max_bytes + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the {what} file: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise UserError(f"{path}: the {what} file is too large ({limit})")
    return data


def parse_yaml_documents(text: str, source: str, loader: type[Any] | None = None) -> list[Any]:
    """Every non-empty YAML document of `text`; UserError naming `source` for bad YAML."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=loader or yaml_loader()) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["unparsable"])[0]
        raise UserError(f"{source}: invalid YAML{at}: {clip(str(problem))}") from None
    except RecursionError:
        raise UserError(f"{source}: invalid YAML: nested too deeply") from None


def read_yaml_documents(path: Path, what: str) -> list[Any]:
    """Every YAML document of a file; UserError for a missing or irregular file, or bad YAML."""
    data = read_regular_file(path, what)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: cannot read the {what} file: not UTF-8 text ({exc.reason} at byte {exc.start})") \
            from None
    return parse_yaml_documents(text, str(path))


def load_cluster(path: str | Path, progress: LoadProgress | None = None) -> Cluster:
    """The checked cluster of a snapshot file; `progress` hears when the load starts and ends."""
    path = Path(path)
    started = time.perf_counter()
    try:
        size = os.stat(path).st_size
    except (OSError, ValueError):
        size = 0  # read_regular_file names the problem below
    if progress is not None:
        progress(LoadStep(path, size))
    cluster = cluster_from_objects(read_yaml_documents(path, "cluster"), str(path))
    elapsed = time.perf_counter() - started
    pods = len(cluster.running) + len(cluster.pending)
    log.info("cluster.loaded", source=str(path), size_bytes=size, nodes=len(cluster.nodes), pods=pods,
             pending=len(cluster.pending), duration_ms=round(elapsed * 1000, 1))
    if progress is not None:
        progress(LoadStep(path, size, True, len(cluster.nodes), pods, elapsed))
    return cluster


def _flatten(docs: Iterable[Any], source: str) -> list[tuple[str, dict[str, Any]]]:
    """(position for errors, object) of every object, lists unpacked."""
    out: list[tuple[str, dict[str, Any]]] = []
    for d, doc in enumerate(docs):
        here = f"document {d + 1}"
        if not isinstance(doc, Mapping):
            raise UserError(where(source, here, f"expected a Kubernetes object, got {type(doc).__name__}"))
        kind = _kind(doc, source, here)
        if kind in _LIST_KINDS:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise UserError(where(source, f"{here} ({kind})", "items: expected a list"))
            for i, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise UserError(where(source, f"{here} ({kind})", f"items[{i}]: expected an object"))
                item = dict(item)
                at = f"{here} ({kind}) items[{i}]"
                if not _kind(item, source, at) and _LIST_KINDS[kind]:
                    item["kind"] = _LIST_KINDS[kind]
                out.append((at, item))
        else:
            out.append((here, dict(doc)))
    return out


def _kind(obj: Mapping[str, Any], source: str, here: str) -> str:
    """The object's kind ("" when missing); UserError when it is not a string."""
    kind = obj.get("kind")
    if kind is None:
        return ""
    if not isinstance(kind, str):
        raise UserError(where(source, here, f"kind: expected a string such as Node, Pod or List, "
                                            f"got {type(kind).__name__} {shown(kind)}"))
    return kind


def _named(obj: Mapping[str, Any], kind: str, here: str, source: str) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise UserError(where(source, f"{kind} at {here}", "metadata: missing"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        got = "missing" if name is None or name == "" else f"expected a string, got {type(name).__name__}"
        raise UserError(where(source, f"{kind} at {here}", f"metadata.name: {got}"))
    problem = _shape_problem(obj, _SHAPES.get(kind, _OBJECT), "")
    if problem:
        namespace = meta.get("namespace") or "default"
        label = f"{namespace}/{name}" if kind == "Pod" and isinstance(namespace, str) else name
        raise UserError(where(source, f"{kind} {clip(label)}", problem))
    return name


def cluster_from_objects(docs: Iterable[Any], source: str = "<cluster>") -> Cluster:
    """A Cluster from parsed YAML documents (see the module docstring)."""
    objects = _flatten(docs, source)
    priority_classes = dict(BUILTIN_PRIORITY_CLASSES)
    default_priority = 0
    nodes: dict[str, KubeObject] = {}
    pods: list[tuple[str, dict[str, Any]]] = []
    workloads: dict[tuple[str, str, str], dict[str, Any]] = {}
    skipped: dict[str, int] = {}
    for here, obj in objects:
        kind = _kind(obj, source, here)
        if not kind:
            raise UserError(where(source, here, "kind: missing (expected Node, Pod or a List of them)"))
        if kind == "PriorityClass":
            name = _named(obj, kind, here, source)
            value = obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(where(source, f"PriorityClass {clip(name)}",
                                      f"value: expected an integer, got {shown(value)}"))
            priority_classes[name] = value
            if obj.get("globalDefault"):
                default_priority = value
        elif kind == "Node":
            name = _named(obj, kind, here, source)
            if name in nodes:
                raise UserError(where(source, f"Node {clip(name)}", "metadata.name: a second node of that name"))
            nodes[name] = obj
        elif kind == "Pod":
            _named(obj, kind, here, source)
            pods.append((here, obj))
        elif kind in WORKLOAD_KINDS:
            name = _named(obj, kind, here, source)
            namespace = (obj.get("metadata") or {}).get("namespace") or "default"
            if (kind, namespace, name) in workloads:
                raise UserError(where(source, f"{kind} {clip(f'{namespace}/{name}')}",
                                      f"metadata.name: a second {kind} of that name"))
            workloads[(kind, namespace, name)] = obj
        else:
            skipped[clip(kind)] = skipped.get(clip(kind), 0) + 1
    if not nodes and not pods:
        found = f" (found {', '.join(sorted(skipped))})" if skipped else ""
        raise UserError(f"{source}: no Node or Pod objects{found}; expected what "
                        "`kubectl get nodes,pods -A -o yaml` prints")

    node_allocatable = {name: _allocatable(node, source) for name, node in nodes.items()}
    on_node: dict[str, list[PodInfo]] = {name: [] for name in nodes}
    running: list[PodInfo] = []
    pending: list[PodInfo] = []
    seen: set[str] = set()
    uids: set[str] = set()
    #: Pod key -> the node it names that the file does not have (warned about once, at the end).
    on_unknown: dict[str, str] = {}
    for _here, obj in pods:
        pod = _complete_pod(obj, priority_classes, default_priority, source)
        key = pod_name(pod)
        if key in seen:
            raise UserError(where(source, f"Pod {clip(key)}", "metadata.name: a second pod of that name"))
        seen.add(key)
        if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            continue
        try:
            info = PodInfo.of(pod)
        except QuantityError as exc:
            raise UserError(where(source, f"Pod {clip(key)}", clip(str(exc), 240))) from None
        if info.uid in uids:
            raise UserError(where(source, f"Pod {clip(key)}", f"metadata.uid: {clip(info.uid)} is used by another pod"))
        uids.add(info.uid)
        node = node_name_of(pod)
        if not node:
            pending.append(info)
        elif node not in nodes:
            on_unknown[key] = node
        else:
            on_node[node].append(info)
            running.append(info)
    if not nodes:
        raise UserError(f"{source}: {len(pods)} Pod{'s' if len(pods) != 1 else ''} but no Node objects: nothing "
                        "to schedule on; were the nodes left out? expected what `kubectl get nodes,pods -A -o yaml` "
                        "prints")
    infos = tuple(NodeInfo.of(nodes[name], node_allocatable[name], on_node[name]) for name in nodes)
    cluster = Cluster(source, infos, tuple(running), tuple(pending), Workloads.of(workloads.values()))
    # Warnings only once the file is known to be good: a mistake is one line, not warnings and then the error.
    if skipped:
        log.warning("cluster.objects_skipped", source=source, kinds=skipped)
    if on_unknown:
        log.warning("cluster.pods_on_unknown_nodes", source=source, count=len(on_unknown),
                    nodes=sorted(set(on_unknown.values()))[:_WARNED_NAMES], pods=list(on_unknown)[:_WARNED_NAMES])
    return cluster


def _allocatable(node: KubeObject, source: str) -> Resources:
    status = node.get("status") or {}
    field = "status.allocatable" if status.get("allocatable") else "status.capacity"
    try:
        return Resources.from_list(status.get("allocatable") or status.get("capacity"))
    except QuantityError as exc:
        name = (node.get("metadata") or {}).get("name")
        raise UserError(where(source, f"Node {clip(str(name))}", clip(f"{field}.{exc}", 240))) from None


def _complete_pod(obj: dict[str, Any], classes: Mapping[str, int], default: int, source: str) -> dict[str, Any]:
    """What the API server adds: namespace, uid, a resolved priority."""
    meta = dict(obj["metadata"])
    meta["namespace"] = meta.get("namespace") or "default"
    pod = dict(obj)
    pod["metadata"] = meta
    key = clip(f"{meta['namespace']}/{meta['name']}")
    if not meta.get("uid"):
        meta["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"wasm-scheduler:pod:{meta['namespace']}/{meta['name']}"))
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise UserError(where(source, f"Pod {key}", "spec: missing"))
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise UserError(where(source, f"Pod {key}", "spec.containers: expected a non-empty list"))
    priority = spec.get("priority")
    if priority is None:
        class_name = spec.get("priorityClassName")
        if class_name is not None and not isinstance(class_name, str):
            raise UserError(where(source, f"Pod {key}", "spec.priorityClassName: expected a string, got "
                                  f"{type(class_name).__name__} {shown(class_name)}"))
        if class_name and class_name not in classes:
            raise UserError(where(source, f"Pod {key}", f"spec.priorityClassName: no PriorityClass "
                                  f"{shown(class_name)} in the file (or give spec.priority)"))
        spec = dict(spec)
        spec["priority"] = classes[class_name] if class_name else default
        pod["spec"] = spec
    elif isinstance(priority, bool) or not isinstance(priority, int):
        raise UserError(where(source, f"Pod {key}", f"spec.priority: expected an integer, got {shown(priority)}"))
    return pod
