"""Reading a cluster snapshot: what ``kubectl get nodes,pods -A -o yaml`` prints.

This module owns turning a YAML file (a ``List``, a ``NodeList``/``PodList``, or
several documents of Nodes and Pods) into a checked `Cluster`: nodes, the pods
running on them (``spec.nodeName`` set) and the pending pods, in file order. It fills
in what the API server would have (a uid, the namespace, ``spec.priority`` from a
``PriorityClass`` in the same file or a built-in one), drops pods that have finished,
and turns every mistake into a `UserError` naming the file, the object and the field.
Objects of other kinds are skipped with a warning.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
import yaml

from adapters.framework.errors import UserError, where
from adapters.framework.pods import KubeObject, PodInfo, node_name_of, pod_key
from adapters.framework.resources import QuantityError, Resources
from adapters.framework.snapshot import NodeInfo, Snapshot

log = structlog.get_logger("adapters.framework.cluster")

#: PriorityClasses every cluster has.
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
_LIST_KINDS = {"List": None, "NodeList": "Node", "PodList": "Pod", "PriorityClassList": "PriorityClass"}
_TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Cluster:
    """A checked snapshot: nodes with their allocatable, running and pending pods."""

    source: str
    nodes: tuple[NodeInfo, ...]
    #: Pods with spec.nodeName, as PodInfo, by node (already counted in `nodes`).
    running: tuple[PodInfo, ...]
    #: Pods without spec.nodeName, in file order.
    pending: tuple[PodInfo, ...]

    def snapshot(self) -> Snapshot:
        return Snapshot(self.nodes)

    def find_pending(self, name: str) -> PodInfo | None:
        """A pending pod by ``namespace/name``, or by name alone when that is unambiguous."""
        if "/" in name:
            return next((p for p in self.pending if p.key == name), None)
        matches = [p for p in self.pending if p.key.split("/", 1)[1] == name]
        return matches[0] if len(matches) == 1 else None


def read_yaml_documents(path: Path, what: str) -> list[Any]:
    """Every YAML document of a file; UserError for a missing file or bad YAML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a {what} file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the {what} file: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}: invalid YAML{at}: {problem}") from None


def load_cluster(path: str | Path) -> Cluster:
    path = Path(path)
    return cluster_from_objects(read_yaml_documents(path, "cluster"), str(path))


def _flatten(docs: Iterable[Any], source: str) -> list[tuple[str, dict[str, Any]]]:
    """(position for errors, object) of every object, lists unpacked."""
    out: list[tuple[str, dict[str, Any]]] = []
    for d, doc in enumerate(docs):
        here = f"document {d + 1}"
        if not isinstance(doc, Mapping):
            raise UserError(where(source, here, f"expected a Kubernetes object, got {type(doc).__name__}"))
        kind = doc.get("kind")
        if kind in _LIST_KINDS:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise UserError(where(source, f"{here} ({kind})", "items: expected a list"))
            for i, item in enumerate(items):
                if not isinstance(item, Mapping):
                    raise UserError(where(source, f"{here} ({kind})", f"items[{i}]: expected an object"))
                item = dict(item)
                if not item.get("kind") and _LIST_KINDS[kind]:
                    item["kind"] = _LIST_KINDS[kind]
                out.append((f"{here} ({kind}) items[{i}]", item))
        else:
            out.append((here, dict(doc)))
    return out


def _named(obj: Mapping[str, Any], kind: str, here: str, source: str) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise UserError(where(source, f"{kind} at {here}", "metadata: missing"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(where(source, f"{kind} at {here}", "metadata.name: missing"))
    return name


def cluster_from_objects(docs: Iterable[Any], source: str = "<cluster>") -> Cluster:
    """A Cluster from parsed YAML documents (see the module docstring)."""
    objects = _flatten(docs, source)
    priority_classes = dict(BUILTIN_PRIORITY_CLASSES)
    default_priority = 0
    nodes: dict[str, KubeObject] = {}
    pods: list[tuple[str, dict[str, Any]]] = []
    skipped: dict[str, int] = {}
    for here, obj in objects:
        kind = obj.get("kind")
        if not kind:
            raise UserError(where(source, here, "kind: missing (expected Node, Pod or a List of them)"))
        if kind == "PriorityClass":
            name = _named(obj, kind, here, source)
            value = obj.get("value")
            if isinstance(value, bool) or not isinstance(value, int):
                raise UserError(where(source, f"PriorityClass {name}", "value: expected an integer"))
            priority_classes[name] = value
            if obj.get("globalDefault"):
                default_priority = value
        elif kind == "Node":
            name = _named(obj, kind, here, source)
            if name in nodes:
                raise UserError(where(source, f"Node {name}", "metadata.name: a second node of that name"))
            nodes[name] = obj
        elif kind == "Pod":
            _named(obj, kind, here, source)
            pods.append((here, obj))
        else:
            skipped[str(kind)] = skipped.get(str(kind), 0) + 1
    if skipped:
        log.warning("cluster.objects_skipped", source=source, kinds=skipped)
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
    for _here, obj in pods:
        pod = _complete_pod(obj, priority_classes, default_priority, source)
        key = pod_key(pod)
        if key in seen:
            raise UserError(where(source, f"Pod {key}", "metadata.name: a second pod of that name"))
        seen.add(key)
        if (pod.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            continue
        try:
            info = PodInfo.of(pod)
        except QuantityError as exc:
            raise UserError(where(source, f"Pod {key}", str(exc))) from None
        if info.uid in uids:
            raise UserError(where(source, f"Pod {key}", f"metadata.uid: {info.uid} is used by another pod"))
        uids.add(info.uid)
        node = node_name_of(pod)
        if not node:
            pending.append(info)
        elif node not in nodes:
            log.warning("cluster.pod_on_unknown_node", source=source, pod=key, node=node)
        else:
            on_node[node].append(info)
            running.append(info)
    infos = tuple(NodeInfo.of(nodes[name], node_allocatable[name], on_node[name]) for name in nodes)
    return Cluster(source, infos, tuple(running), tuple(pending))


def _allocatable(node: KubeObject, source: str) -> Resources:
    status = node.get("status") or {}
    field = "status.allocatable" if status.get("allocatable") else "status.capacity"
    try:
        return Resources.from_list(status.get("allocatable") or status.get("capacity"))
    except QuantityError as exc:
        name = (node.get("metadata") or {}).get("name")
        raise UserError(where(source, f"Node {name}", f"{field}.{exc}")) from None


def _complete_pod(obj: dict[str, Any], classes: Mapping[str, int], default: int, source: str) -> dict[str, Any]:
    """What the API server adds: namespace, uid, a resolved priority."""
    meta = dict(obj["metadata"])
    meta.setdefault("namespace", "default")
    pod = dict(obj)
    pod["metadata"] = meta
    key = f"{meta['namespace']}/{meta['name']}"
    if not meta.get("uid"):
        meta["uid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"wasm-scheduler:pod:{key}"))
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        raise UserError(where(source, f"Pod {key}", "spec: missing"))
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise UserError(where(source, f"Pod {key}", "spec.containers: expected a non-empty list"))
    priority = spec.get("priority")
    if priority is None:
        class_name = spec.get("priorityClassName")
        if class_name and class_name not in classes:
            raise UserError(where(source, f"Pod {key}", f"spec.priorityClassName: no PriorityClass {class_name!r} "
                                  "in the file (or give spec.priority)"))
        spec = dict(spec)
        spec["priority"] = classes[class_name] if class_name else default
        pod["spec"] = spec
    elif isinstance(priority, bool) or not isinstance(priority, int):
        raise UserError(where(source, f"Pod {key}", f"spec.priority: expected an integer, got {priority!r}"))
    return pod
