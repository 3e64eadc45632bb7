"""The JSON shapes of kube-scheduler's extender API (`k8s.io/kube-scheduler/extender/v1`).

This module owns decoding requests and encoding answers. The Go types carry no JSON
tags, so kube-scheduler sends Go's field names (`Pod`, `Nodes`, `NodeNames`,
`FailedNodes`, `NodeNameToMetaVictims`, ...) and decodes answers case-insensitively, as
encoding/json does; requests are decoded case-insensitively here too (`nodenames`
works) and answers use Go's names. Every shape error raises `ProtocolError` with the
path of the offending field; the server answers it with HTTP 400.

Whole nodes (a request that is not node-cache-capable) are the bulk of a filter or
prioritize request: hundreds of node objects of several KB each. They are not decoded
when the request arrives: msgspec scans the request, each node's JSON is kept as it came
(`WireNode`) with only its name read, and the node is decoded the first time something
reads it (a guest asking for it); the filter's answer sends the passing nodes back as
the bytes that came (docs/performance.md). See `docs/extender.md` ("How kube-scheduler calls an extender").
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

#: Scores the extender API allows (MinExtenderPriority..MaxExtenderPriority).
MAX_EXTENDER_PRIORITY = 10


class ProtocolError(ValueError):
    """A request that is not valid JSON of the expected shape."""


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json matching: exact name first, then case-insensitively."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _json_value(raw: msgspec.Raw | None) -> Any:
    return None if raw is None else json.loads(bytes(raw))


def parse_json(body: bytes) -> Mapping[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _object(value: Any, where: str, required: bool = True) -> Mapping[str, Any] | None:
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise ProtocolError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _pod(value: Any, where: str) -> Mapping[str, Any]:
    pod = _object(value, where)
    assert pod is not None
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise ProtocolError(f"{where}.metadata.name: a pod needs a name")
    return pod


class _NodeMeta(msgspec.Struct):
    name: str = ""


class _NodeHead(msgspec.Struct):
    """What is read of each whole node when a request arrives: its name."""

    metadata: _NodeMeta | None = None


_OBJECT_OF_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OPTIONAL_OBJECT_OF_RAW = msgspec.json.Decoder(dict[str, msgspec.Raw] | None)
_LIST_OF_RAW = msgspec.json.Decoder(list[msgspec.Raw] | None)
_NODE_HEAD = msgspec.json.Decoder(_NodeHead)
_LIST_OF_HEADS = msgspec.json.Decoder(list[_NodeHead] | None)
#: Answers: `msgspec.Raw` values (a `WireNode`'s bytes) are written as they are.
ANSWER_ENCODER = msgspec.json.Encoder()


class WireNode(Mapping[str, Any]):
    """A node object of a request, as kube-scheduler sent it: its name read, the rest
    decoded the first time any of it is read. Immutable, like the dicts it stands for."""

    __slots__ = ("name", "raw", "_decoded")

    def __init__(self, name: str, raw: msgspec.Raw) -> None:
        self.name = name
        self.raw = raw
        self._decoded: dict[str, Any] | None = None

    def _object(self) -> dict[str, Any]:
        decoded = self._decoded
        if decoded is None:
            # Checked as an object with a name when the request came; a race decodes twice.
            decoded = self._decoded = json.loads(bytes(self.raw))
        return decoded

    def __getitem__(self, key: str) -> Any:
        return self._object()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._object())

    def __len__(self) -> int:
        return len(self._object())

    def __repr__(self) -> str:
        return f"WireNode({self.name!r}, {len(self.raw)} bytes)"


def _wire_nodes(items: msgspec.Raw) -> list[WireNode]:
    """`Nodes.items` as WireNodes; the shape errors name the item as the full decoder would."""
    try:
        raws = _LIST_OF_RAW.decode(items) or []
        heads = _LIST_OF_HEADS.decode(items) or []
    except msgspec.ValidationError:
        return _checked_wire_nodes(items)
    names = [head.metadata.name if head.metadata is not None else "" for head in heads]
    if not all(names):
        return _checked_wire_nodes(items)
    return list(map(WireNode, names, raws))


def _checked_wire_nodes(items: msgspec.Raw) -> list[WireNode]:
    """Node by node, to name the first one that is wrong."""
    try:
        raws = _LIST_OF_RAW.decode(items)
    except msgspec.ValidationError:
        raise ProtocolError("Nodes.items: expected a list of nodes") from None
    nodes = []
    for i, raw in enumerate(raws or ()):
        try:
            head = _NODE_HEAD.decode(raw)
            name = head.metadata.name if head.metadata is not None else ""
        except msgspec.ValidationError:
            _object(json.loads(bytes(raw)), f"Nodes.items[{i}]")  # not an object: its clear error
            name = ""  # else a metadata that is not an object, or a name that is not a string
        if not name:
            raise ProtocolError(f"Nodes.items[{i}].metadata.name: a node needs a name")
        nodes.append(WireNode(name, raw))
    return nodes


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise ProtocolError(f"{where}: expected a list of node names")
    return list(value)


@dataclass(frozen=True)
class ExtenderArgs:
    """filter and prioritize: the pod and its candidate nodes (objects, or names only)."""

    pod: Mapping[str, Any]
    #: Node objects when kube-scheduler sent them (not node-cache-capable), else None.
    nodes: list[Mapping[str, Any]] | None
    node_names: list[str]

    @classmethod
    def decode(cls, body: Mapping[str, Any]) -> ExtenderArgs:
        pod = _pod(_field(body, "Pod"), "Pod")
        node_list = _object(_field(body, "Nodes"), "Nodes", required=False)
        names_value = _field(body, "NodeNames")
        if node_list is not None:
            items = node_list.get("items")
            items = [] if items is None else items
            if not isinstance(items, list):
                raise ProtocolError("Nodes.items: expected a list of nodes")
            nodes: list[Mapping[str, Any]] = []
            for i, node in enumerate(items):
                obj = _object(node, f"Nodes.items[{i}]")
                assert obj is not None
                name = obj.get("metadata", {}).get("name") if isinstance(obj.get("metadata"), dict) else None
                if not isinstance(name, str) or not name:
                    raise ProtocolError(f"Nodes.items[{i}].metadata.name: a node needs a name")
                nodes.append(obj)
            return cls(pod, nodes, [n["metadata"]["name"] for n in nodes])
        if names_value is not None:
            return cls(pod, None, _names(names_value, "NodeNames"))
        raise ProtocolError("neither Nodes nor NodeNames is set")

    @classmethod
    def from_json(cls, body: bytes) -> ExtenderArgs:
        """Decode a request's bytes; whole nodes become `WireNode`s (read when used). A
        request msgspec will not scan takes the full decoder, which names what is wrong."""
        try:
            body.decode("utf-8")  # msgspec's scan does not check what it skips
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"malformed JSON: {exc}") from None
        try:
            fields = _OBJECT_OF_RAW.decode(body)
            nodes_raw = _field(fields, "Nodes")  # kube-scheduler sends "Nodes": null with names
            node_list = _OPTIONAL_OBJECT_OF_RAW.decode(nodes_raw) if nodes_raw is not None else None
        except msgspec.MsgspecError:
            return cls.decode(parse_json(body))
        if node_list is None:
            return cls.decode({key: json.loads(bytes(value)) for key, value in fields.items()})
        pod = _pod(_json_value(_field(fields, "Pod")), "Pod")
        items = node_list.get("items")
        nodes = _wire_nodes(items) if items is not None else []
        return cls(pod, list(nodes), [node.name for node in nodes])


@dataclass(frozen=True)
class BindingArgs:
    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str

    @classmethod
    def decode(cls, body: Mapping[str, Any]) -> BindingArgs:
        values = {}
        for go_name in ("PodName", "PodNamespace", "PodUID", "Node"):
            value = _field(body, go_name)
            if not isinstance(value, str) or (go_name != "PodNamespace" and not value):
                raise ProtocolError(f"{go_name}: expected a non-empty string")
            values[go_name] = value
        return cls(values["PodName"], values["PodNamespace"] or "default", values["PodUID"], values["Node"])


@dataclass(frozen=True)
class PreemptionArgs:
    """preempt: the preemptor and, per candidate node, the victims (pods, or UIDs only)."""

    pod: Mapping[str, Any]
    #: node name -> victim pods (objects when given, else {"metadata": {"uid": ...}} stubs)
    victims: dict[str, list[Mapping[str, Any]]]
    pdb_violations: dict[str, int]
    meta_only: bool

    @classmethod
    def decode(cls, body: Mapping[str, Any]) -> PreemptionArgs:
        pod = _pod(_field(body, "Pod"), "Pod")
        full = _object(_field(body, "NodeNameToVictims"), "NodeNameToVictims", required=False)
        meta = _object(_field(body, "NodeNameToMetaVictims"), "NodeNameToMetaVictims", required=False)
        source, meta_only = (full, False) if full else (meta or {}, True)
        victims: dict[str, list[Mapping[str, Any]]] = {}
        violations: dict[str, int] = {}
        where_map = "NodeNameToMetaVictims" if meta_only else "NodeNameToVictims"
        for node, entry in source.items():
            where = f"{where_map}[{node}]"
            obj = _object(entry, where)
            assert obj is not None
            pods = _field(obj, "Pods") or []
            if not isinstance(pods, list):
                raise ProtocolError(f"{where}.Pods: expected a list")
            victims[node] = []
            for i, victim in enumerate(pods):
                v = _object(victim, f"{where}.Pods[{i}]")
                assert v is not None
                if meta_only:
                    uid = _field(v, "UID")
                    if not isinstance(uid, str) or not uid:
                        raise ProtocolError(f"{where}.Pods[{i}].UID: expected a non-empty string")
                    victims[node].append({"metadata": {"uid": uid, "name": uid}})
                else:
                    victims[node].append(_pod(v, f"{where}.Pods[{i}]"))
            count = _field(obj, "NumPDBViolations") or 0
            if isinstance(count, bool) or not isinstance(count, int):
                raise ProtocolError(f"{where}.NumPDBViolations: expected an integer")
            violations[node] = count
        return cls(pod, victims, violations, meta_only)


def filter_result(
    passed: list[str],
    nodes: list[Mapping[str, Any]] | None,
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
    error: str = "",
) -> dict[str, Any]:
    """ExtenderFilterResult: node objects back when they came as objects, names otherwise."""
    result: dict[str, Any] = {
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": error,
    }
    if nodes is not None:
        keep = set(passed)
        result["Nodes"] = {"metadata": {}, "items": [
            n.raw if isinstance(n, WireNode) else n for n in nodes
            if (n.name if isinstance(n, WireNode) else n["metadata"]["name"]) in keep]}
        result["NodeNames"] = None
    else:
        result["Nodes"] = None
        result["NodeNames"] = list(passed)
    return result


def host_priority_list(scores: Mapping[str, int]) -> list[dict[str, Any]]:
    return [{"Host": name, "Score": int(score)} for name, score in scores.items()]


def preemption_result(victims: Mapping[str, list[Mapping[str, Any]]],
                      violations: Mapping[str, int]) -> dict[str, Any]:
    return {
        "NodeNameToMetaVictims": {
            node: {
                "Pods": [{"UID": str(p.get("metadata", {}).get("uid", ""))} for p in pods],
                "NumPDBViolations": violations.get(node, 0),
            }
            for node, pods in victims.items()
        }
    }
