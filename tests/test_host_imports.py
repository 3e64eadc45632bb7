"""Every host import of the guest ABI, seen from the guest: the exact bytes it receives.

The probe guest (guests/probe.wat) calls one host import per script op; these tests
check, for each import, the buffer protocol's three cases (empty value, value larger
than the buffer, value that fits), the result functions' effect on the decoded
results, the handle functions, klog, WASI, and that a pointer outside guest memory
traps the call without harming the host.
"""

from __future__ import annotations

import copy
import json
import logging
import struct
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from structlog.testing import capture_logs

from tests.kube_decode import decode_node_list, decode_pod
from tests.probe import CALLS, EXPORT_IDS, LAST_EXPORT, ExportInputs, Script, read, results, status_of, word
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.guest_memory import GuestMemory
from wasm_scheduler.actors.kube.codec import encode_node, encode_node_list, encode_pod
from wasm_scheduler.framework_api import ClusterEvent, Code, NodeScore, NominatingMode, Status
from wasm_scheduler.vocabulary import EmptyHandle, FrameworkHandle

DATA = Path(__file__).parent / "data"

#: Where the host writes values for these tests: the probe's second page, far from its
#: script, results and inputs.
OUT = 0x10000
#: The probe's memory is two pages.
MEMORY_END = 0x20000
#: A pointer far outside the probe's memory.
BAD = 0xFFFF0000
SENTINEL = 0xA5


def _node(name: str, zone: str) -> dict[str, Any]:
    node = copy.deepcopy(yaml.safe_load((DATA / "node-real.yaml").read_text()))
    node["metadata"]["name"] = name
    node["metadata"]["labels"]["kubernetes.io/hostname"] = name
    node["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
    return node


NODES = [_node("node-1", "zone-a"), _node("node-2", "zone-b"), _node("node-3", "zone-c")]
POD: dict[str, Any] = yaml.safe_load((DATA / "pod-real.yaml").read_text())
POD_NAME = f"{POD['metadata']['namespace']}/{POD['metadata']['name']}"
TARGET = {
    "metadata": {"name": "victim", "namespace": "team-a", "uid": "uid-victim", "labels": {"app": "db"}},
    "spec": {"containers": [{"name": "db", "image": "postgres:16"}], "nodeName": "node-2",
             "priority": 10},
}
#: Ordinary inputs of every export: PreScore's filtered nodes, PostFilter's statuses and
#: NormalizeScore's scores are what the tests of those imports read back.
INPUTS = ExportInputs(POD, TARGET, node="node-2", filtered=["node-1", "node-3"], statuses={"node-1": 2, "node-2": 3},
                      scores=[NodeScore("node-1", 10), NodeScore("node-2", -3)])
WAITING = {
    "metadata": {"name": "waiter", "namespace": "default", "uid": "uid-waiting"},
    "spec": {"containers": [{"name": "c", "image": "nginx:1.25"}], "schedulerName": "wasm"},
}
IMAGES = {
    "node-1": {
        "docker.io/library/nginx:1.25": {"Size": 187_000_000, "NumNodes": 2},
        "registry.k8s.io/pause:3.9": {"Size": 744_000, "NumNodes": 3},
    },
    "node-2": {"registry.k8s.io/pause:3.9": {"Size": 744_000, "NumNodes": 3}},
}
GUEST_CONFIG = '{"weight": 3, "zone": "東京"}'


class RecordingHandle:
    """A FrameworkHandle with three nodes, image states, one waiting pod and event lists."""

    def __init__(self, nodes: Sequence[Mapping[str, Any]] = NODES) -> None:
        self.nodes = list(nodes)
        self.waiting: dict[str, Mapping[str, Any]] = {"uid-waiting": WAITING}
        self.events: list[Mapping[str, Any]] = []
        self.rejected: list[tuple[str, str, str]] = []

    def get_node(self, name: str) -> Mapping[str, Any] | None:
        return next((n for n in self.nodes if n["metadata"]["name"] == name), None)

    def list_nodes(self) -> Sequence[Mapping[str, Any]]:
        return self.nodes

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        return IMAGES.get(node_name, {})

    def record_event(self, event: Mapping[str, Any]) -> None:
        self.events.append(event)

    def get_waiting_pod(self, uid: str) -> Mapping[str, Any] | None:
        return self.waiting.get(uid)

    def reject_waiting_pod(self, uid: str, plugin: str, reason: str) -> bool:
        self.rejected.append((uid, plugin, reason))
        return self.waiting.pop(uid, None) is not None


def test_recording_handle_is_a_framework_handle() -> None:
    handle: FrameworkHandle = RecordingHandle()  # the protocol's methods, statically checked
    assert handle.get_node("node-2") is NODES[1]


@pytest.fixture
def h() -> RecordingHandle:
    return RecordingHandle()


@pytest.fixture
def inst(make_instance: Callable[..., GuestInstance]) -> GuestInstance:
    return make_instance(guest_config=GUEST_CONFIG)


# --- calling any export ------------------------------------------------------------------

def call(inst: GuestInstance, h: FrameworkHandle, export: str, node: str = "node-2") -> Status:
    """Run `export` of the probe with ordinary inputs; its status."""
    return status_of(replace(INPUTS, node=node).call(inst, export, h))


def run(inst: GuestInstance, h: FrameworkHandle, export: str, script: Script,
        fill: int = 64, at: int = OUT) -> list[int]:
    """Load `script`, fill `fill` bytes at `at` with the sentinel, run `export`: op results."""
    script.load(inst)
    inst.memory.write(at, bytes([SENTINEL]) * fill)
    status = call(inst, h, export)
    assert not inst.broken, inst.broken
    assert status.code == Code.SUCCESS, status
    return results(inst, len(script.ops))


def untouched(n: int) -> bytes:
    return bytes([SENTINEL]) * n


# --- the buffer protocol ---------------------------------------------------------------

def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# id -> (op, name argument or None, export, expected bytes)
GIVE: dict[str, tuple[str, str | None, str, Callable[[], bytes]]] = {
    "node": ("node", "node-2", "filter", lambda: encode_node(NODES[1])),
    "nodeList": ("nodeList", None, "filter", lambda: encode_node_list(NODES)),
    "currentPod": ("currentPod", None, "prefilter", lambda: encode_pod(POD)),
    "targetPod": ("targetPod", None, "addpod", lambda: encode_pod(TARGET)),
    "currentNodeName": ("currentNodeName", None, "filter", lambda: b"node-2"),
    "filteredNodeList": ("filteredNodeList", None, "prescore", lambda: b'["node-1","node-3"]'),
    "nodeToStatusMap": ("nodeToStatusMap", None, "postfilter", lambda: b'{"node-1":2,"node-2":3}'),
    "nodeScoreList": ("nodeScoreList", None, "normalizescore", lambda: b'{"node-1":10,"node-2":-3}'),
    "nodeImageStates": ("nodeImageStates", "node-1", "score", lambda: _json(IMAGES["node-1"])),
    "get_config": ("get_config", None, "filter", lambda: GUEST_CONFIG.encode()),
}


def ask(inst: GuestInstance, h: FrameworkHandle, op: str, name: str | None, export: str,
        limit: int, fill: int) -> tuple[int, bytes]:
    """One call of a buffer-protocol import into OUT: (its return value, the bytes at OUT)."""
    script = Script()
    args = list(script.put(name.encode())) if name is not None else []
    script.op(op, *args, OUT, limit)
    [ret] = run(inst, h, export, script, fill)
    return ret, read(inst, OUT, fill)


@pytest.mark.parametrize("case", GIVE)
def test_value_that_fits_is_written_exactly(case: str, inst: GuestInstance, h: RecordingHandle) -> None:
    op, name, export, expected = GIVE[case]
    value = expected()
    n = len(value)
    for limit in (n, n + 100):
        ret, got = ask(inst, h, op, name, export, limit, n + 16)
        assert ret == n
        assert got == value + untouched(16)


@pytest.mark.parametrize("case", GIVE)
def test_value_larger_than_buffer_returns_size_and_writes_nothing(
    case: str, inst: GuestInstance, h: RecordingHandle
) -> None:
    op, name, export, expected = GIVE[case]
    n = len(expected())
    for limit in (0, 1, n - 1):
        ret, got = ask(inst, h, op, name, export, limit, n + 16)
        assert ret == n
        assert got == untouched(n + 16)


def test_grow_and_ask_again(inst: GuestInstance, h: RecordingHandle) -> None:
    """What a TinyGo guest does: ask with a small buffer, then with one of the size returned."""
    script = Script().op("currentPod", OUT, 16).op("currentPod", OUT + 16, 0x8000)
    first, second = run(inst, h, "prefilter", script, 0x2000)
    pod = encode_pod(POD)
    assert first == second == len(pod)
    assert read(inst, OUT, 16) == untouched(16)
    assert read(inst, OUT + 16, len(pod)) == pod
    assert decode_pod(read(inst, OUT + 16, len(pod)))["metadata"]["uid"] == POD["metadata"]["uid"]


def test_node_list_is_the_nodelist_message_of_every_node(inst: GuestInstance, h: RecordingHandle) -> None:
    data = encode_node_list(NODES)
    [n] = run(inst, h, "filter", Script().op("nodeList", OUT, len(data)), len(data))
    assert n == len(data)
    assert [node["metadata"]["name"] for node in decode_node_list(read(inst, OUT, n))] == [
        "node-1", "node-2", "node-3"]


def test_node_follows_a_changed_snapshot(inst: GuestInstance, h: RecordingHandle) -> None:
    """A node replaced in the snapshot is seen as the new object, not a cached encoding."""
    script = Script()
    script.op("node", *script.put(b"node-2"), OUT, 0x8000)
    [before] = run(inst, h, "filter", script, 16)
    changed = copy.deepcopy(NODES[1])
    changed["metadata"]["labels"]["extra"] = "yes"
    h.nodes[1] = changed
    [after] = run(inst, h, "filter", script, 16)
    assert after == len(encode_node(changed)) > before
    assert read(inst, OUT, after) == encode_node(changed)


# id -> (op, name argument or None, export, handle factory, instance config)
EMPTY: dict[str, tuple[str, str | None, str, Callable[[], FrameworkHandle]]] = {
    "node (unknown name)": ("node", "node-9", "filter", RecordingHandle),
    "node (empty name)": ("node", "", "filter", RecordingHandle),
    "nodeList (no nodes)": ("nodeList", None, "filter", EmptyHandle),
    "currentPod (enqueue has no pod)": ("currentPod", None, "enqueue", RecordingHandle),
    "targetPod (outside addpod/removepod)": ("targetPod", None, "filter", RecordingHandle),
    "currentNodeName (prefilter has no node)": ("currentNodeName", None, "prefilter", RecordingHandle),
    "nodeImageStates (node without images)": ("nodeImageStates", "node-3", "filter", RecordingHandle),
    "nodeImageStates (unknown node)": ("nodeImageStates", "node-9", "filter", RecordingHandle),
}


@pytest.mark.parametrize("case", EMPTY)
def test_empty_value_returns_zero_and_writes_nothing(
    case: str, make_instance: Callable[..., GuestInstance]
) -> None:
    op, name, export, handle = EMPTY[case]
    inst = make_instance(guest_config=GUEST_CONFIG)
    ret, got = ask(inst, handle(), op, name, export, 4096, 64)
    assert ret == 0
    assert got == untouched(64)


def test_get_config_empty_returns_zero_and_writes_nothing(
    make_instance: Callable[..., GuestInstance], h: RecordingHandle
) -> None:
    inst = make_instance()  # no guestConfig
    ret, got = ask(inst, h, "get_config", None, "filter", 4096, 64)
    assert (ret, got) == (0, untouched(64))


def test_get_config_is_available_in_every_export(inst: GuestInstance, h: RecordingHandle) -> None:
    value = GUEST_CONFIG.encode()
    for export in EXPORT_IDS:
        [n] = run(inst, h, export, Script().op("get_config", OUT, 100), len(value) + 8)
        assert n == len(value)
        assert read(inst, OUT, n + 8) == value + untouched(8)


@pytest.mark.parametrize(("op", "export", "expected"), [
    ("filteredNodeList", "prescore", b"[]"),
    ("nodeToStatusMap", "postfilter", b"{}"),
    ("nodeScoreList", "normalizescore", b"{}"),
])
def test_empty_json_collections_are_valid_json(
    op: str, export: str, expected: bytes, inst: GuestInstance, h: RecordingHandle
) -> None:
    """A JSON list/map input with no entries is the empty JSON value, never 0 bytes."""
    Script().op(op, OUT, 100).load(inst)
    inst.memory.write(OUT, untouched(16))
    if export == "prescore":
        status = inst.prescore(POD, [], h)
    elif export == "postfilter":
        status = inst.postfilter(POD, {}, h).status
    else:
        status = inst.normalizescore(POD, [], h).status
    assert status.code == Code.SUCCESS
    assert results(inst, 1) == [len(expected)]
    assert read(inst, OUT, 16) == expected + untouched(16 - len(expected))


def test_current_node_name_follows_each_node_of_a_filter(inst: GuestInstance, h: RecordingHandle) -> None:
    Script().op("currentNodeName", OUT, 64).op("node_digit", OUT + 64).load(inst)
    names = ["node-1", "node-2", "node-3"]
    res = inst.filter(POD, names, h)
    assert [name for name, _ in res.statuses] == names
    # the last call leaves its node's name and digit
    assert read(inst, OUT, 6) == b"node-3"
    assert word(inst, OUT + 64) == 3


def test_current_node_name_is_utf8(inst: GuestInstance, h: RecordingHandle) -> None:
    Script().op("currentNodeName", OUT, 64).load(inst)
    inst.memory.write(OUT, untouched(32))
    name = "nœud-été"
    inst.reserve(POD, name, h)
    n = len(name.encode())
    assert results(inst, 1) == [n]
    assert read(inst, OUT, n + 4) == name.encode() + untouched(4)


# --- result functions ------------------------------------------------------------------

def test_status_reason_sets_the_reason_of_a_non_success_status(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("status_reason", *script.put("node(s) didn't match affinity ✗".encode())).returns(2)
    script.load(inst)
    [(name, status)] = inst.filter(POD, ["node-1"], h).statuses
    assert name == "node-1"
    assert status == Status(Code.UNSCHEDULABLE, "node(s) didn't match affinity ✗", "probe")


def test_status_reason_last_call_wins_and_success_has_no_reason(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("status_reason", *script.put(b"first")).op("status_reason", *script.put(b"second"))
    script.returns(3).load(inst)
    assert inst.reserve(POD, "node-1", h) == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "second", "probe")
    script = Script()
    script.op("status_reason", *script.put(b"ignored")).returns(0).load(inst)
    assert inst.reserve(POD, "node-1", h) == Status(Code.SUCCESS, "", "probe")


def test_status_reason_does_not_leak_into_the_next_call(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("status_reason", *script.put(b"stale")).returns(2).load(inst)
    assert inst.prebind(POD, "node-1", h).reason == "stale"
    Script().returns(2).load(inst)
    assert inst.prebind(POD, "node-1", h) == Status(Code.UNSCHEDULABLE, "", "probe")


def test_status_reason_with_invalid_utf8_is_replaced(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("status_reason", *script.put(b"bad \xff byte")).returns(1).load(inst)
    assert inst.bind(POD, "node-1", h) == Status(Code.ERROR, "bad \ufffd byte", "probe")


@pytest.mark.parametrize(("raw", "expected"), [
    (b"node-1\0node-3\0", {"node-1", "node-3"}),
    (b"node-2\0", {"node-2"}),
    (b"node-1\0\0node-3\0", {"node-1", "node-3"}),  # empty entries are skipped, as the reference host does
])
def test_node_names_give_the_prefilter_subset(raw: bytes, expected: set[str], inst: GuestInstance,
                                              h: RecordingHandle) -> None:
    script = Script()
    script.op("node_names", *script.put(raw)).returns(0).load(inst)
    res = inst.prefilter(POD, h)
    assert res.status == Status(Code.SUCCESS, "", "probe")
    assert res.node_names == frozenset(expected)


def test_prefilter_without_node_names_means_all_nodes(inst: GuestInstance, h: RecordingHandle) -> None:
    Script().returns(0).load(inst)
    assert inst.prefilter(POD, h).node_names is None


def test_node_names_of_a_failed_prefilter_are_dropped(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("node_names", *script.put(b"node-1\0")).op("status_reason", *script.put(b"no"))
    script.returns(2).load(inst)
    res = inst.prefilter(POD, h)
    assert res.status == Status(Code.UNSCHEDULABLE, "no", "probe")
    assert res.node_names is None


def test_nominated_node_name_and_mode(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("nominated_node_name", *script.put(b"node-2")).returns(0, 1).load(inst)
    res = inst.postfilter(POD, {"node-1": 2, "node-2": 2}, h)
    assert res.status == Status(Code.SUCCESS, "", "probe")
    assert res.nominated_node_name == "node-2"
    assert res.mode == NominatingMode.OVERRIDE


def test_normalized_score_list_replaces_scores(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("normalized_score_list", *script.put(b'{"node-1": 100, "node-2": 0}')).returns(0).load(inst)
    res = inst.normalizescore(POD, [NodeScore("node-1", 7), NodeScore("node-2", 3), NodeScore("node-3", 5)], h)
    assert res.status == Status(Code.SUCCESS, "", "probe")
    assert res.scores == (NodeScore("node-1", 100), NodeScore("node-2", 0), NodeScore("node-3", 5))


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'{"node-1": "high"}', b'{"node-1": 1.5}',
                                 b'{"node-1": true}'])
def test_malformed_normalized_score_list_is_an_error(raw: bytes, inst: GuestInstance,
                                                      h: RecordingHandle) -> None:
    script = Script()
    script.op("normalized_score_list", *script.put(raw)).returns(0).load(inst)
    res = inst.normalizescore(POD, [NodeScore("node-1", 7)], h)
    assert res.status.code == Code.ERROR
    assert res.status.reason.startswith("wasm plugin probe: normalizescore: malformed normalized score list")
    assert res.scores == ()
    assert not inst.broken  # a bad result is the call's error, not a trap


def test_cluster_events_are_decoded_8_bytes_each(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    raw = struct.pack("<6I", 1, 1 | 4, 0, 63, 7, 2)
    script.op("cluster_events", *script.put(raw)).load(inst)
    events, status = inst.enqueue(h)
    assert status == Status(Code.SUCCESS, "", "probe")
    assert events == (ClusterEvent(1, 5), ClusterEvent(0, 63), ClusterEvent(7, 2))


@pytest.mark.parametrize("size", [1, 4, 12, 15])
def test_cluster_events_not_a_multiple_of_8_is_an_error(size: int, inst: GuestInstance,
                                                         h: RecordingHandle) -> None:
    script = Script()
    script.op("cluster_events", *script.put(bytes(range(size)))).load(inst)
    _events, status = inst.enqueue(h)
    assert status.code == Code.ERROR
    assert status.reason == (f"wasm plugin probe: enqueue: cluster events: {size} bytes is not a whole "
                             "number of 8-byte events")


@pytest.mark.parametrize(("function", "export", "payload"), [
    ("node_names", "filter", b"node-1\0"),
    ("node_names", "score", b"node-1\0"),
    ("nominated_node_name", "prefilter", b"node-1"),
    ("nominated_node_name", "score", b"node-1"),
    ("normalized_score_list", "prefilter", b"{broken"),
    ("normalized_score_list", "score", b'{"node-1": 1}'),
    ("cluster_events", "filter", b"\x01\x02\x03"),
    ("cluster_events", "prefilter", bytes(8)),
])
def test_result_function_from_the_wrong_extension_point_is_ignored(
    function: str, export: str, payload: bytes, make_instance: Callable[..., GuestInstance],
    h: RecordingHandle, verbose_logs: list[dict[str, Any]],
) -> None:
    inst = make_instance()
    script = Script()
    script.op(function, *script.put(payload)).returns(0).load(inst)
    if export == "prefilter":
        res = inst.prefilter(POD, h)
        assert res.status == Status(Code.SUCCESS, "", "probe")
        assert res.node_names is None
    elif export == "score":
        assert inst.score(POD, ["node-1"], h).scores == (NodeScore("node-1", 0),)
    else:
        assert call(inst, h, export) == Status(Code.SUCCESS, "", "probe")
    assert not inst.broken
    ignored = [e for e in verbose_logs if e["event"] == "guest.result_ignored"]
    assert len(ignored) == 1
    assert ignored[0]["function"] == f"result.{function}"
    assert ignored[0]["extension_point"] == export
    assert ignored[0]["log_level"] == "warning"


# --- handle functions ------------------------------------------------------------------

EVENT = {
    "RegardingReference": {"Kind": "Pod", "APIVersion": "v1", "Name": "p", "Namespace": "ns",
                           "UID": "uid-p", "ResourceVersion": "7"},
    "RelatedReference": {"Kind": "Node", "APIVersion": "v1", "Name": "node-1", "Namespace": "",
                         "UID": "uid-n", "ResourceVersion": "9"},
    "Eventtype": "Warning",
    "Reason": "FailedScheduling",
    "Action": "Scheduling",
    "Note": "0/3 nodes are available: 3 Insufficient cpu. ✓",
}


def test_eventf_records_the_decoded_event(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("eventf", *script.put(json.dumps(EVENT).encode())).returns(0).load(inst)
    assert call(inst, h, "filter") == Status(Code.SUCCESS, "", "probe")
    assert h.events == [EVENT]


@pytest.mark.parametrize("raw", [b"{oops", b"[1, 2]", b'"just a string"', b"", b"\xff\xfe"])
def test_malformed_eventf_is_ignored(raw: bytes, inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("eventf", *script.put(raw)).returns(2).load(inst)
    assert call(inst, h, "reserve") == Status(Code.UNSCHEDULABLE, "", "probe")
    assert h.events == []
    assert not inst.broken


def test_reject_waiting_pod_writes_1_then_0(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    uid = script.put(b"uid-waiting")
    script.op("reject_waiting_pod", *uid, OUT, 8)
    script.load(inst)
    inst.memory.write(OUT, untouched(16))
    assert call(inst, h, "permit").code == Code.SUCCESS
    assert read(inst, OUT, 16) == struct.pack("<Q", 1) + untouched(8)
    assert h.rejected == [("uid-waiting", "probe", "rejected by wasm plugin probe")]
    # no longer waiting
    run(inst, h, "permit", script, 16)
    assert read(inst, OUT, 16) == struct.pack("<Q", 0) + untouched(8)
    assert len(h.rejected) == 2


def test_reject_unknown_pod_writes_0(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("reject_waiting_pod", *script.put(b"uid-nobody"), OUT, 64)
    run(inst, h, "filter", script, 16)
    assert read(inst, OUT, 16) == bytes(8) + untouched(8)
    assert h.waiting == {"uid-waiting": WAITING}


def test_reject_waiting_pod_with_a_too_small_out_writes_nothing(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("reject_waiting_pod", *script.put(b"uid-waiting"), OUT, 4)
    run(inst, h, "filter", script, 16)
    assert read(inst, OUT, 16) == untouched(16)
    assert h.rejected == [("uid-waiting", "probe", "rejected by wasm plugin probe")]


def test_get_waiting_pod_writes_the_pod_when_it_fits(inst: GuestInstance, h: RecordingHandle) -> None:
    pod = encode_pod(WAITING)
    for limit in (len(pod), len(pod) + 50):
        script = Script()
        script.op("get_waiting_pod", *script.put(b"uid-waiting"), OUT, limit)
        run(inst, h, "permit", script, len(pod) + 8)
        assert read(inst, OUT, len(pod) + 8) == pod + untouched(8)
        assert decode_pod(pod)["metadata"]["name"] == "waiter"


@pytest.mark.parametrize(("uid", "short"), [(b"uid-waiting", True), (b"uid-nobody", False), (b"", False)])
def test_get_waiting_pod_writes_nothing_otherwise(uid: bytes, short: bool, inst: GuestInstance,
                                                  h: RecordingHandle) -> None:
    limit = len(encode_pod(WAITING)) - 1 if short else 4096
    script = Script()
    script.op("get_waiting_pod", *script.put(uid), OUT, limit)
    n = len(encode_pod(WAITING)) + 8
    run(inst, h, "permit", script, n)
    assert read(inst, OUT, n) == untouched(n)


# --- klog ------------------------------------------------------------------------------

@pytest.fixture
def verbose_logs(_quiet_logs_and_no_stray_actors: None) -> Iterator[list[Any]]:
    """Every structlog event at any level, captured. Instances must be made after this."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(0))
    with capture_logs() as entries:
        yield entries


@pytest.mark.parametrize("severity", [0, 1, 2, 3])
def test_severity_is_the_configured_log_severity(severity: int, make_instance: Callable[..., GuestInstance],
                                                 h: RecordingHandle, verbose_logs: list[dict[str, Any]]) -> None:
    """With every level of the runtime's log on, `severity` is the plugin's logSeverity."""
    inst = make_instance(log_severity=severity)
    assert run(inst, h, "filter", Script().op("severity")) == [severity]


def test_severity_is_the_log_severity_while_the_log_is_not_configured(
        make_instance: Callable[..., GuestInstance], h: RecordingHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library user may set the standard library's levels after instances start."""
    monkeypatch.setattr(structlog, "is_configured", lambda: False)
    inst = make_instance(log_severity=0)
    assert run(inst, h, "filter", Script().op("severity")) == [0]


@pytest.mark.parametrize(("log_level", "log_severity", "expected"), [
    (logging.WARNING, 0, 1),   # info lines would be dropped: the guest need not format them
    (logging.WARNING, 2, 2),   # logSeverity above the log's level wins
    (logging.ERROR, 0, 2),
    (logging.CRITICAL, 1, 3),
    (logging.CRITICAL, 5, 5),  # a logSeverity above fatal stays as configured
    (logging.INFO, 0, 0),
])
def test_severity_is_raised_to_what_the_log_writes(log_level: int, log_severity: int, expected: int,
                                                   make_instance: Callable[..., GuestInstance],
                                                   h: RecordingHandle) -> None:
    """A guest SDK reads `severity` once and skips formatting lines below it, so the host
    answers the least severity it would really write (docs/abi-notes.md)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(log_level))
    inst = make_instance(log_severity=log_severity)
    assert run(inst, h, "filter", Script().op("severity")) == [expected]


def _guest_logs(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e["event"] == "guest.log"]


def test_log_levels_follow_severity(make_instance: Callable[..., GuestInstance], h: RecordingHandle,
                                    verbose_logs: list[dict[str, Any]]) -> None:
    inst = make_instance()
    script = Script()
    for severity in range(4):
        script.op("log", severity, *script.put(f"message {severity} ✓".encode()))
    run(inst, h, "filter", script)
    logs = _guest_logs(verbose_logs)
    assert [(e["log_level"], e["message"], e["severity"]) for e in logs] == [
        ("info", "message 0 ✓", 0), ("warning", "message 1 ✓", 1),
        ("error", "message 2 ✓", 2), ("critical", "message 3 ✓", 3),
    ]
    for e in logs:
        assert e["plugin"] == "probe"
        assert e["instance"] == "probe-test"
        assert e["extension_point"] == "filter"
        assert e["pod"] == POD_NAME


def test_a_line_the_log_level_drops_is_not_read(make_instance: Callable[..., GuestInstance], h: RecordingHandle,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """At the suite's level (warning), an info line goes nowhere: the host checks its
    ranges (a bad one traps, see the out-of-memory cases) but reads none of it; a
    warning line is read and logged."""
    read: list[str] = []
    original = GuestMemory.read

    def recording_read(self: GuestMemory, ptr: int, length: int, what: str = "read") -> bytes:
        read.append(what)
        return original(self, ptr, length, what)

    monkeypatch.setattr(GuestMemory, "read", recording_read)
    with capture_logs() as entries:
        inst = make_instance(log_severity=0)
        script = Script()
        script.op("log", 0, *script.put(b"dropped"))
        script.op("logs", 0, *script.put(b"dropped too"), *script.put(b"k\0v\0"))
        script.op("log", 1, *script.put(b"kept"))
        run(inst, h, "filter", script)  # asserts the call succeeded and left the instance whole
    assert [(e["log_level"], e["message"]) for e in _guest_logs(entries)] == [("warning", "kept")]
    assert [what for what in read if "log" in what] == ["log message"], read


@pytest.mark.parametrize("severity", [0, 3], ids=["dropped", "logged"])
def test_an_empty_log_line_is_never_checked_whether_dropped_or_logged(
    severity: int, make_instance: Callable[..., GuestInstance], h: RecordingHandle
) -> None:
    """A zero length reads nothing, so its pointer does not matter: the level must not
    decide whether a guest call traps."""
    inst = make_instance(log_severity=0)
    script = Script()
    script.op("log", severity, BAD, 0)
    script.op("logs", severity, BAD, 0, BAD, 0)
    run(inst, h, "filter", script)  # asserts Success and an instance still whole


def test_logs_carry_key_value_pairs(make_instance: Callable[..., GuestInstance], h: RecordingHandle,
                                    verbose_logs: list[dict[str, Any]]) -> None:
    inst = make_instance()
    script = Script()
    msg = script.put(b"scored node")
    kvs = script.put(b"node\0node-1\0score\x0042\0note\0caf\xc3\xa9\0")
    script.op("logs", 1, *msg, *kvs)
    run(inst, h, "score", script)
    [entry] = _guest_logs(verbose_logs)
    assert entry["message"] == "scored node"
    assert entry["log_level"] == "warning"
    assert entry["node"] == "node-1"
    assert entry["score"] == "42"
    assert entry["note"] == "café"
    assert entry["extension_point"] == "score"


def test_logs_cannot_overwrite_reserved_fields(make_instance: Callable[..., GuestInstance],
                                               h: RecordingHandle, verbose_logs: list[dict[str, Any]]) -> None:
    inst = make_instance()
    script = Script()
    script.op("logs", 0, *script.put(b"real"), *script.put(b"message\0fake\0plugin\0other\0lonely\0"))
    run(inst, h, "filter", script)
    [entry] = _guest_logs(verbose_logs)
    assert entry["message"] == "real"
    assert entry["plugin"] == "probe"
    assert entry["kv_message"] == "fake"
    assert entry["kv_plugin"] == "other"
    assert entry["kv_unpaired"] == "lonely"


def test_messages_below_log_severity_are_not_emitted(make_instance: Callable[..., GuestInstance],
                                                     h: RecordingHandle,
                                                     verbose_logs: list[dict[str, Any]]) -> None:
    inst = make_instance(log_severity=2)
    script = Script()
    for severity in range(4):
        script.op("log", severity, *script.put(f"log {severity}".encode()))
        script.op("logs", severity, *script.put(f"logs {severity}".encode()), *script.put(b"k\0v\0"))
    run(inst, h, "filter", script)
    logs = _guest_logs(verbose_logs)
    assert [(e["message"], e["log_level"]) for e in logs] == [
        ("log 2", "error"), ("logs 2", "error"), ("log 3", "critical"), ("logs 3", "critical")]


# --- WASI ------------------------------------------------------------------------------

def test_argv_exactly_as_configured(make_instance: Callable[..., GuestInstance], h: RecordingHandle) -> None:
    argv = ("my-plugin", "--weight=3", "", "zone=東京")
    inst = make_instance(args=argv)
    encoded = b"".join(a.encode() + b"\0" for a in argv)
    ptrs, strs = OUT + 16, OUT + 64
    script = Script().op("args_sizes_get", OUT, OUT + 4).op("args_get", ptrs, strs)
    assert run(inst, h, "filter", script, 64 + len(encoded) + 8) == [0, 0]
    assert struct.unpack("<II", read(inst, OUT, 8)) == (4, len(encoded))
    offsets = [strs]
    for a in argv[:-1]:
        offsets.append(offsets[-1] + len(a.encode()) + 1)
    assert list(struct.unpack("<4I", read(inst, ptrs, 16))) == offsets
    assert read(inst, ptrs + 16, 4) == untouched(4)
    assert read(inst, strs, len(encoded) + 8) == encoded + untouched(8)


def test_environment_is_empty(inst: GuestInstance, h: RecordingHandle) -> None:
    assert run(inst, h, "filter", Script().op("environ_sizes_get", OUT, OUT + 4), 16) == [0]
    assert read(inst, OUT, 16) == bytes(8) + untouched(8)


@pytest.mark.parametrize(("clock", "now"), [(0, time.time_ns), (1, time.monotonic_ns)])
def test_clock_time_get(clock: int, now: Callable[[], int], inst: GuestInstance, h: RecordingHandle) -> None:
    before = now()
    assert run(inst, h, "filter", Script().op("clock_time_get", clock, OUT), 16) == [0]
    after = now()
    value = struct.unpack("<Q", read(inst, OUT, 8))[0]
    assert before <= value <= after
    assert read(inst, OUT + 8, 8) == untouched(8)


def test_clock_time_get_thread_cputime(inst: GuestInstance, h: RecordingHandle) -> None:
    before = time.thread_time_ns()  # the guest runs on the calling thread
    assert run(inst, h, "filter", Script().op("clock_time_get", 3, OUT), 16) == [0]
    after = time.thread_time_ns()
    assert before <= struct.unpack("<Q", read(inst, OUT, 8))[0] <= after


def test_clock_time_get_process_cputime(inst: GuestInstance, h: RecordingHandle) -> None:
    """PROCESS_CPUTIME_ID is the process's CPU time, not the calling thread's (was a bug)."""
    import threading

    def burn() -> None:  # CPU time on another thread of this process
        end = time.thread_time_ns() + 30_000_000
        while time.thread_time_ns() < end:
            pass

    worker = threading.Thread(target=burn)
    worker.start()
    worker.join()
    before = time.process_time_ns()
    assert run(inst, h, "filter", Script().op("clock_time_get", 2, OUT), 16) == [0]
    after = time.process_time_ns()
    assert before <= struct.unpack("<Q", read(inst, OUT, 8))[0] <= after


def test_clock_time_get_unknown_clock_is_einval(inst: GuestInstance, h: RecordingHandle) -> None:
    assert run(inst, h, "filter", Script().op("clock_time_get", 9, OUT), 16) == [28]
    assert read(inst, OUT, 16) == untouched(16)


def test_random_get(inst: GuestInstance, h: RecordingHandle) -> None:
    assert run(inst, h, "filter", Script().op("random_get", OUT, 32), 40) == [0]
    first = read(inst, OUT, 40)
    assert first[32:] == untouched(8)
    assert first[:32] != untouched(32)
    run(inst, h, "filter", Script().op("random_get", OUT, 32), 40)
    assert read(inst, OUT, 32) != first[:32]
    assert run(inst, h, "filter", Script().op("random_get", OUT, 0), 8) == [0]
    assert read(inst, OUT, 8) == untouched(8)


def _fd_write(script: Script, fd: int, *chunks: bytes, nwritten: int = OUT) -> Script:
    iovs = b"".join(struct.pack("<II", *script.put(chunk)) for chunk in chunks)
    ptr, _ = script.put(iovs)
    return script.op("fd_write", fd, ptr, len(chunks), nwritten)


def test_fd_write_is_captured_and_logged_after_the_call(
    make_instance: Callable[..., GuestInstance], h: RecordingHandle, verbose_logs: list[dict[str, Any]]
) -> None:
    inst = make_instance()
    script = Script()
    _fd_write(script, 1, b"hello ", b"world\nsecond line\n")
    _fd_write(script, 2, b"warning: low memory\n", nwritten=OUT + 8)
    assert run(inst, h, "filter", script, 16) == [0, 0]
    assert struct.unpack("<I", read(inst, OUT, 4)) == (24,)
    assert struct.unpack("<I", read(inst, OUT + 8, 4)) == (20,)
    # cleared after the call
    assert inst.output.stdout == bytearray() and inst.output.stderr == bytearray()
    lines = [(e["stream"], e["line"], e["extension_point"]) for e in verbose_logs
             if e["event"] == "guest.output"]
    assert lines == [("stdout", "hello world", "filter"), ("stdout", "second line", "filter"),
                     ("stderr", "warning: low memory", "filter")]


def test_fd_write_to_another_fd_is_ebadf(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    _fd_write(script, 3, b"nope")
    _fd_write(script, 0, b"nope")
    assert run(inst, h, "filter", script, 16) == [8, 8]
    assert read(inst, OUT, 16) == untouched(16)
    assert inst.output.stdout == bytearray() and inst.output.stderr == bytearray()


def test_fd_write_is_shown_on_trap(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    _fd_write(script, 2, b"panic: runtime error: index out of range [3] with length 3\n")
    script.op("trap").load(inst)
    status = call(inst, h, "filter")
    assert status.code == Code.ERROR
    assert status.reason.startswith("wasm plugin probe: trap in filter: ")
    assert status.reason.endswith("; stderr: panic: runtime error: index out of range [3] with length 3")


def test_output_is_cleared_after_each_call(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    _fd_write(script, 2, b"first-call\n")
    run(inst, h, "filter", script, 8)
    script = Script()
    _fd_write(script, 2, b"second-call\n")
    script.op("trap").load(inst)
    status = call(inst, h, "filter")
    assert "stderr: second-call" in status.reason
    assert "first-call" not in status.reason


@pytest.mark.parametrize("code", [0, 3])
def test_proc_exit_during_an_export_is_an_error(code: int, inst: GuestInstance, h: RecordingHandle) -> None:
    Script().op("proc_exit", code).returns(0).load(inst)
    status = call(inst, h, "reserve")
    assert status == Status(Code.ERROR, f"wasm plugin probe: trap in reserve: guest exited with code {code}",
                            "probe")
    assert inst.broken == status.reason


# --- pointers outside guest memory -------------------------------------------------------

def _with_name(op: str, name: bytes, *rest: int) -> Callable[[Script], Script]:
    return lambda s: s.op(op, *s.put(name), *rest)


def _fd_write_bad_data(s: Script) -> Script:
    ptr, _ = s.put(struct.pack("<II", BAD, 4))
    return s.op("fd_write", 1, ptr, 1, OUT)


# id -> (export, script builder, text the reason names)
OOB: dict[str, tuple[str, Callable[[Script], Script], str]] = {
    "node name": ("filter", lambda s: s.op("node", BAD, 6, OUT, 0x8000), "node name"),
    "node buf": ("filter", _with_name("node", b"node-1", BAD, 0x100000), "node"),
    "nodeList buf": ("filter", lambda s: s.op("nodeList", BAD, 0x100000), "nodeList"),
    "currentPod buf": ("prefilter", lambda s: s.op("currentPod", BAD, 0x100000), "currentPod"),
    "targetPod buf": ("addpod", lambda s: s.op("targetPod", BAD, 0x100000), "targetPod"),
    "currentNodeName buf": ("filter", lambda s: s.op("currentNodeName", BAD, 64), "currentNodeName"),
    "currentNodeName straddling the end": (
        "filter", lambda s: s.op("currentNodeName", MEMORY_END - 3, 64), "currentNodeName"),
    "filteredNodeList buf": ("prescore", lambda s: s.op("filteredNodeList", BAD, 4096), "filteredNodeList"),
    "nodeToStatusMap buf": ("postfilter", lambda s: s.op("nodeToStatusMap", BAD, 4096), "nodeToStatusMap"),
    "nodeScoreList buf": ("normalizescore", lambda s: s.op("nodeScoreList", BAD, 4096), "nodeScoreList"),
    "nodeImageStates name": ("filter", lambda s: s.op("nodeImageStates", BAD, 6, OUT, 4096),
                             "nodeImageStates name"),
    "nodeImageStates buf": ("filter", _with_name("nodeImageStates", b"node-1", BAD, 4096), "nodeImageStates"),
    "get_config buf": ("filter", lambda s: s.op("get_config", BAD, 4096), "get_config"),
    "status_reason": ("filter", lambda s: s.op("status_reason", BAD, 4), "status_reason"),
    "status_reason straddling": ("filter", lambda s: s.op("status_reason", MEMORY_END - 2, 4), "status_reason"),
    "node_names": ("prefilter", lambda s: s.op("node_names", BAD, 4), "result.node_names"),
    "node_names over the size limit": ("prefilter", lambda s: s.op("node_names", OUT, 0x7FFFFFFF),
                                       "over the 16777216-byte limit"),
    "nominated_node_name": ("postfilter", lambda s: s.op("nominated_node_name", BAD, 4),
                            "result.nominated_node_name"),
    "normalized_score_list": ("normalizescore", lambda s: s.op("normalized_score_list", BAD, 4),
                              "result.normalized_score_list"),
    "cluster_events": ("enqueue", lambda s: s.op("cluster_events", BAD, 8), "result.cluster_events"),
    "eventf": ("filter", lambda s: s.op("eventf", BAD, 4), "handle.eventrecorder.eventf"),
    "reject_waiting_pod uid": ("permit", lambda s: s.op("reject_waiting_pod", BAD, 4, OUT, 8),
                               "reject_waiting_pod uid"),
    "reject_waiting_pod out": ("permit", _with_name("reject_waiting_pod", b"uid-waiting", BAD, 8),
                               "reject_waiting_pod out"),
    "get_waiting_pod uid": ("permit", lambda s: s.op("get_waiting_pod", BAD, 4, OUT, 4096),
                            "get_waiting_pod uid"),
    "get_waiting_pod out": ("permit", _with_name("get_waiting_pod", b"uid-waiting", BAD, 4096),
                            "get_waiting_pod out"),
    "log message": ("filter", lambda s: s.op("log", 3, BAD, 4), "log message"),
    "logs message": ("filter", lambda s: s.op("logs", 3, BAD, 4, OUT, 0), "logs message"),
    "logs kvs": ("filter", lambda s: s.op("logs", 3, *s.put(b"msg"), BAD, 4), "logs kvs"),
    # A line the log level drops (the suite logs at warning, so severity 0 is dropped:
    # see test_a_line_the_log_level_drops_is_not_read) is not read, but its ranges are
    # still checked.
    "dropped log message": ("filter", lambda s: s.op("log", 0, BAD, 4), "log message"),
    "dropped logs message": ("filter", lambda s: s.op("logs", 0, BAD, 4, OUT, 0), "logs message"),
    "dropped logs kvs": ("filter", lambda s: s.op("logs", 0, *s.put(b"msg"), BAD, 4), "logs kvs"),
    "args_sizes_get": ("filter", lambda s: s.op("args_sizes_get", BAD, OUT), "args_sizes_get"),
    "args_get argv": ("filter", lambda s: s.op("args_get", BAD, OUT), "args_get"),
    "args_get buf": ("filter", lambda s: s.op("args_get", OUT, BAD), "args_get"),
    "environ_sizes_get": ("filter", lambda s: s.op("environ_sizes_get", OUT, BAD), "environ_sizes_get"),
    "clock_time_get": ("filter", lambda s: s.op("clock_time_get", 0, BAD), "clock_time_get"),
    "random_get": ("filter", lambda s: s.op("random_get", BAD, 16), "random_get"),
    "fd_write iovs": ("filter", lambda s: s.op("fd_write", 1, BAD, 1, OUT), "fd_write iovec"),
    "fd_write data": ("filter", _fd_write_bad_data, "fd_write data"),
    "fd_write nwritten": ("filter", lambda s: _fd_write(s, 2, b"x", nwritten=BAD), "fd_write"),
}


@pytest.mark.parametrize("case", OOB)
def test_pointer_outside_guest_memory_traps_the_call(
    case: str, make_instance: Callable[..., GuestInstance], h: RecordingHandle
) -> None:
    export, build, names = OOB[case]
    inst = make_instance(guest_config=GUEST_CONFIG, log_severity=0)
    build(Script()).returns(0).load(inst)
    status = call(inst, h, export)
    assert status.code == Code.ERROR
    assert status.plugin == "probe"
    assert status.reason.startswith(f"wasm plugin probe: trap in {export}: ")
    assert names in status.reason
    if "limit" not in case:
        assert "is outside guest memory of 131072 bytes" in status.reason
    assert inst.broken == status.reason
    assert word(inst, LAST_EXPORT) == EXPORT_IDS[export]
    # the instance is discarded: later calls answer Error without running guest code
    runs, calls = word(inst, CALLS), inst.calls
    Script().returns(0).load(inst)
    later = call(inst, h, "filter")
    assert later.code == Code.ERROR
    assert later.reason.startswith("wasm plugin probe: instance probe-test is discarded (cannot run filter): ")
    assert (word(inst, CALLS), inst.calls) == (runs, calls)
    # nothing was recorded on the host's side, and the host still runs guests
    assert h.events == []
    if case != "reject_waiting_pod out":  # that one rejects first, then traps writing `out`
        assert h.waiting == {"uid-waiting": WAITING}
    fresh = make_instance()
    Script().returns(2).load(fresh)
    assert call(fresh, h, "filter") == Status(Code.UNSCHEDULABLE, "", "probe")


def test_every_host_import_is_covered() -> None:
    from wasm_scheduler.registry.guest_abi import HOST_IMPORTS

    covered = {OOB[c][1](Script()).ops[0][0] for c in OOB}
    from tests.probe import OPS

    names = {name for _module, name in HOST_IMPORTS}
    # severity and proc_exit take no pointer; every other import is checked above
    wanted = {OPS[n.removeprefix("result.").removeprefix("handle.eventrecorder.").removeprefix("handle.")]
              for n in names if n != "severity"} | {OPS[n] for n in (
                  "args_sizes_get", "args_get", "environ_sizes_get", "clock_time_get", "random_get",
                  "fd_write")}
    assert wanted - covered == set()
    assert set(GIVE) == {"node", "nodeList", "currentPod", "targetPod", "currentNodeName",
                         "filteredNodeList", "nodeToStatusMap", "nodeScoreList", "nodeImageStates",
                         "get_config"}


# --- regressions of defects found while writing these tests -----------------------------

def test_stdout_before_a_trap_is_not_lost(make_instance: Callable[..., GuestInstance], h: RecordingHandle,
                                          verbose_logs: list[dict[str, Any]]) -> None:
    inst = make_instance()
    script = Script()
    _fd_write(script, 1, b"step 3 of 5: scoring node-2\n")
    script.op("trap").load(inst)
    status = call(inst, h, "filter")
    assert status.code == Code.ERROR
    logged = [e["line"] for e in verbose_logs if e["event"] == "guest.output"]
    assert "step 3 of 5: scoring node-2" in status.reason or logged == ["step 3 of 5: scoring node-2"]


class ReadOnlyImagesHandle(RecordingHandle):
    """Image states as read-only mappings: still `Mapping[str, Mapping[str, int]]`."""

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        from types import MappingProxyType

        return MappingProxyType({k: MappingProxyType(dict(v)) for k, v in IMAGES.get(node_name, {}).items()})


def test_image_states_from_any_mapping(inst: GuestInstance) -> None:
    handle = ReadOnlyImagesHandle()
    expected = _json(IMAGES["node-1"])
    script = Script()
    script.op("nodeImageStates", *script.put(b"node-1"), OUT, 4096).returns(0).load(inst)
    status = call(inst, handle, "filter")
    assert status == Status(Code.SUCCESS, "", "probe")
    assert read(inst, OUT, len(expected)) == expected


def test_random_get_checks_the_range_before_allocating(
    inst: GuestInstance, h: RecordingHandle, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import types

    from wasm_scheduler.actors import wasi

    requested: list[int] = []

    def urandom(n: int) -> bytes:
        requested.append(n)
        return os.urandom(min(n, 1 << 20))

    monkeypatch.setattr(wasi, "os", types.SimpleNamespace(urandom=urandom))
    Script().op("random_get", OUT, 0x0400_0000).load(inst)  # 64 MiB, memory is 128 KiB
    status = call(inst, h, "filter")
    assert status.code == Code.ERROR
    assert "trap in filter: random_get: range [65536, " in status.reason
    assert "is outside guest memory of 131072 bytes" in status.reason
    assert all(n <= MEMORY_END for n in requested), requested
