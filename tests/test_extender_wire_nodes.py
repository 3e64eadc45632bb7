"""Whole nodes of a filter or prioritize request: scanned when the request comes, each node
decoded only when something reads it, and sent back as the bytes that came."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.protocol import ExtenderArgs, ProtocolError, WireNode

POD = {"metadata": {"name": "pod-1", "namespace": "default", "uid": "uid-1"}}


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"zone": "東京"}}, "status": {"capacity": {"cpu": "4"}}}


def _body(**fields: Any) -> bytes:
    return json.dumps(fields, ensure_ascii=False).encode()


def test_whole_nodes_are_named_and_decoded_only_when_read() -> None:
    nodes = [_node("node-1"), _node("node-2")]
    args = ExtenderArgs.from_json(_body(Pod=POD, Nodes={"metadata": {}, "items": nodes}))
    assert args.node_names == ["node-1", "node-2"] and args.pod == POD
    assert args.nodes is not None and all(isinstance(n, WireNode) for n in args.nodes)
    first = args.nodes[0]
    assert isinstance(first, WireNode) and first._decoded is None
    assert first["metadata"]["labels"] == {"zone": "東京"} and dict(first) == nodes[0]
    assert first._decoded is not None and args.nodes[1]._decoded is None  # type: ignore[union-attr]


def test_the_filter_answer_sends_the_passing_nodes_back_as_they_came() -> None:
    items = b'[{"metadata":{"name":"node-1"},"x":1.50} , {"metadata": {"name": "node-2"}, "y": "\\u00e9"}]'
    body = b'{"pod": ' + json.dumps(POD).encode() + b', "nodes": {"items": ' + items + b"}}"
    args = ExtenderArgs.from_json(body)  # lower-case field names, as Go's decoder takes them
    assert args.nodes is not None
    answer = protocol.ANSWER_ENCODER.encode(protocol.filter_result(["node-2"], args.nodes, {"node-1": "no"}, {}))
    decoded = json.loads(answer)
    assert decoded["Nodes"]["items"] == [{"metadata": {"name": "node-2"}, "y": "é"}]
    assert b'{"metadata": {"name": "node-2"}, "y": "\\u00e9"}' in answer  # the very bytes
    assert decoded["FailedNodes"] == {"node-1": "no"} and decoded["NodeNames"] is None


def test_the_same_request_decodes_to_the_same_arguments_either_way() -> None:
    for fields in ({"Pod": POD, "Nodes": {"items": [_node("a"), _node("b")]}},
                   {"Pod": POD, "NodeNames": ["a", "b"]},
                   {"Pod": POD, "Nodes": None, "NodeNames": ["a"]},
                   {"Pod": POD, "Nodes": {"items": None}},
                   {"Pod": POD, "Nodes": {}}):
        fast = ExtenderArgs.from_json(_body(**fields))
        full = ExtenderArgs.decode(json.loads(_body(**fields)))
        assert fast.pod == full.pod and fast.node_names == full.node_names
        assert (None if fast.nodes is None else [dict(n) for n in fast.nodes]) == full.nodes


@pytest.mark.parametrize(("fields", "message"), [
    ({"Pod": POD, "Nodes": {"items": "x"}}, "Nodes.items: expected a list of nodes"),
    ({"Pod": POD, "Nodes": {"items": [_node("a"), 7]}}, "Nodes.items[1]: expected an object, got int"),
    ({"Pod": POD, "Nodes": {"items": [{"metadata": []}]}}, "Nodes.items[0].metadata.name: a node needs a name"),
    ({"Pod": POD, "Nodes": {"items": [{"metadata": {"name": 3}}]}},
     "Nodes.items[0].metadata.name: a node needs a name"),
    ({"Pod": POD, "Nodes": {"items": [{"metadata": {"name": ""}}]}},
     "Nodes.items[0].metadata.name: a node needs a name"),
    ({"Pod": POD, "Nodes": {"items": [{}]}}, "Nodes.items[0].metadata.name: a node needs a name"),
    ({"Pod": POD, "Nodes": [1]}, "Nodes: expected an object, got list"),
    ({"Nodes": {"items": []}}, "Pod: expected an object, got NoneType"),
    ({"Pod": {"metadata": {}}, "Nodes": {"items": []}}, "Pod.metadata.name: a pod needs a name"),
])
def test_shape_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ProtocolError) as raised:
        ExtenderArgs.from_json(_body(**fields))
    assert str(raised.value) == message


@pytest.mark.parametrize(("body", "fragment"), [
    (b"{not json", "malformed JSON"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n"}}]}, "x": NaN}', ""),
])
def test_what_msgspec_will_not_scan_takes_the_full_decoder(body: bytes, fragment: str) -> None:
    if not fragment:  # Python's decoder takes NaN, as it did before the scan
        assert ExtenderArgs.from_json(body).node_names == ["n"]
        return
    with pytest.raises(ProtocolError, match=fragment):
        ExtenderArgs.from_json(body)


@pytest.mark.parametrize("body", [
    b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["n\xff"]}',
    b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"items": [{"metadata": {"name": "n"}, "x": "\xc3"}]}}',
])
def test_a_body_that_is_not_utf8_is_a_protocol_error(body: bytes) -> None:
    """Found before anything is decoded, even inside a node that would be read later."""
    with pytest.raises(ProtocolError, match="malformed JSON"):
        ExtenderArgs.from_json(body)


def test_names_with_a_null_nodes_field_as_kube_scheduler_sends_them() -> None:
    args = ExtenderArgs.from_json(b'{"Pod": {"metadata": {"name": "p"}}, "Nodes": null, "NodeNames": ["a", "b"]}')
    assert args.nodes is None and args.node_names == ["a", "b"]


@pytest.mark.parametrize("items", [{}, 0, False, ""])
def test_items_that_are_not_a_list_are_refused_by_both_decoders(items: Any) -> None:
    fields = {"Pod": POD, "Nodes": {"items": items}}
    for decode in (lambda: ExtenderArgs.from_json(_body(**fields)), lambda: ExtenderArgs.decode(fields)):
        with pytest.raises(ProtocolError, match="Nodes.items: expected a list of nodes"):
            decode()
