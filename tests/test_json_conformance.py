"""The guest's JSON and text, read as the reference Go host reads them.

The reference host decodes `result.normalized_score_list` and
`handle.eventrecorder.eventf` with Go's `encoding/json`, and takes the other strings
(`result.status_reason`, `result.nominated_node_name`, `result.node_names`, klog, the
waiting-pod UIDs) as Go strings. Each test here is a case where Python's defaults
answer differently: the guest (the probe, tests/guests/probe.wat) must get what it
would get from the reference host. `docs/abi-notes.md` lists the rules.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from structlog.testing import capture_logs

from tests.conftest import GUESTS, wat_guest
from tests.probe import Script
from tests.test_host_imports import POD, RecordingHandle, call
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.framework_api import Code, NodeScore, Status
from wasm_scheduler.registry.compiler import GuestCompiler

SCORES = [NodeScore("node-1", 7), NodeScore("node-2", 3), NodeScore("node-3", 5)]
UNCHANGED = tuple(SCORES)
OK = Status(Code.SUCCESS, "", "probe")


@pytest.fixture
def h() -> RecordingHandle:
    return RecordingHandle()


@pytest.fixture
def inst(make_instance: Callable[..., GuestInstance]) -> GuestInstance:
    return make_instance()


@pytest.fixture
def verbose_logs(_quiet_logs_and_no_stray_actors: None) -> Iterator[list[Any]]:
    """Every structlog event at any level, captured. Instances must be made after this."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(0))
    with capture_logs() as entries:
        yield entries


def normalize(inst: GuestInstance, h: RecordingHandle, raw: bytes) -> Any:
    script = Script()
    script.op("normalized_score_list", *script.put(raw)).returns(0).load(inst)
    return inst.normalizescore(POD, SCORES, h)


# --- result.normalized_score_list: Go's json.Unmarshal into map[string]int ---------------

@pytest.mark.parametrize("raw", [b"null", b"{}", b" null\n", b"\t{ }\r\n"], ids=["null", "empty", "null-ws",
                                                                               "empty-ws"])
def test_a_nil_or_empty_score_map_keeps_the_scores(raw: bytes, inst: GuestInstance, h: RecordingHandle) -> None:
    """The SDK sends `null` when NormalizeScore returns a nil map: no error in Go."""
    res = normalize(inst, h, raw)
    assert res.status == OK
    assert res.scores == UNCHANGED


@pytest.mark.parametrize(("raw", "expected"), [
    (b' \n{"node-1": 100}\t ', {"node-1": 100}),                 # whitespace around the value
    (b'{"node-1": 1, "node-1": 90}', {"node-1": 90}),             # duplicate keys: the last wins
    (b'{"node-1": null}', {"node-1": 0}),                         # null member of map[string]int: 0
    (b'{"node-1": -0}', {"node-1": 0}),
    (b'{"node-1": 9223372036854775807}', {"node-1": 2**63 - 1}),  # int64 limits
    (b'{"node-1": -9223372036854775808}', {"node-1": -(2**63)}),
])
def test_score_maps_go_accepts(raw: bytes, expected: dict[str, int], inst: GuestInstance,
                               h: RecordingHandle) -> None:
    res = normalize(inst, h, raw)
    assert res.status == OK
    assert res.scores == tuple(NodeScore(s.name, expected.get(s.name, s.score)) for s in SCORES)


@pytest.mark.parametrize("raw", [
    b'{"node-1": 1.5}', b'{"node-1": 1.0}', b'{"node-1": 1e2}', b'{"node-1": 1E+2}',  # not integer literals
    b'{"node-1": 9223372036854775808}', b'{"node-1": -9223372036854775809}',       # out of int64
    b'{"node-1": "5"}', b'{"node-1": true}', b'{"node-1": 5, "other": {"a": [1]}}',
    b'{"node-1": NaN}', b'{"node-1": Infinity}',
    b"[]", b'"x"', b"5", b"", b" ",
    b'\xef\xbb\xbf{"node-1": 5}',                 # a BOM: Go's decoder refuses it
    '{"node-1": 5}'.encode("utf-16-le"),          # UTF-16: Python's bytes decoding would guess it
    b'{"node-1": 5} {}',                          # trailing data
    b"[" * 5000,                                  # deeper than Python's stack: an error, not a crash
])
def test_score_maps_go_refuses_are_an_error(raw: bytes, inst: GuestInstance, h: RecordingHandle) -> None:
    res = normalize(inst, h, raw)
    assert res.status.code == Code.ERROR
    assert res.status.reason.startswith("wasm plugin probe: normalizescore: malformed normalized score list: ")
    assert "\n" not in res.status.reason
    assert not inst.broken


def test_invalid_utf8_in_a_node_name_is_replaced_not_an_error(inst: GuestInstance, h: RecordingHandle,
                                                              verbose_logs: list[dict[str, Any]]) -> None:
    res = normalize(inst, h, b'{"node-1": 50, "node-\xff\xfe": 1}')
    assert res.status == OK
    assert res.scores == (NodeScore("node-1", 50), NodeScore("node-2", 3), NodeScore("node-3", 5))
    [ignored] = [e for e in verbose_logs if e["event"] == "guest.result_ignored"]
    assert "node-\ufffd\ufffd" in ignored["reason"]


def test_a_lone_surrogate_escape_becomes_u_fffd(inst: GuestInstance, h: RecordingHandle,
                                                verbose_logs: list[dict[str, Any]]) -> None:
    res = normalize(inst, h, b'{"\\ud800x": 1, "node-2": 4}')
    assert res.status == OK
    assert res.scores == (NodeScore("node-1", 7), NodeScore("node-2", 4), NodeScore("node-3", 5))
    [ignored] = [e for e in verbose_logs if e["event"] == "guest.result_ignored"]
    assert "\ufffdx" in ignored["reason"]


# --- handle.eventrecorder.eventf: Go's json.Unmarshal into EventMessage -----------------

EMPTY_REF = {"Kind": "", "APIVersion": "", "Name": "", "Namespace": "", "UID": "", "ResourceVersion": ""}


def event(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"RegardingReference": dict(EMPTY_REF), "RelatedReference": dict(EMPTY_REF),
                            "Eventtype": "", "Reason": "", "Action": "", "Note": ""}
    for name, value in fields.items():
        if isinstance(value, dict):
            base[name] = {**EMPTY_REF, **value}
        else:
            base[name] = value
    return base


def eventf(inst: GuestInstance, h: RecordingHandle, raw: bytes) -> list[Any]:
    script = Script()
    script.op("eventf", *script.put(raw)).returns(0).load(inst)
    assert call(inst, h, "filter") == OK
    assert not inst.broken
    return h.events


@pytest.mark.parametrize(("raw", "expected"), [
    (b'{"reason": "R", "NOTE": "n", "eventType": "Normal", "action": "A"}',
     event(Reason="R", Note="n", Eventtype="Normal", Action="A")),
    (b'{"regardingreference": {"kind": "Pod", "name": "p", "uid": "u-1", "apiversion": "v1"}}',
     event(RegardingReference={"Kind": "Pod", "Name": "p", "UID": "u-1", "APIVersion": "v1"})),
    ('{"RegardingReference": {"\u212aind": "Pod"}}'.encode(),  # KELVIN SIGN folds to K
     event(RegardingReference={"Kind": "Pod"})),
    ('{"Rea\u017fon": "long s"}'.encode(), event(Reason="long s")),          # LONG S folds to S
    ('{"Reason": "x", "Kınd": 1, "Note\u0130": 2}'.encode(), event(Reason="x")),  # no fold to ASCII: unknown
    (b'{"Reason": "first", "reason": "last"}', event(Reason="last")),           # duplicates: the last wins
    (b'{"Note": "kept", "note": null}', event(Note="kept")),                    # null leaves a field as it is
    (b'{"RegardingReference": {"Kind": "Pod"}, "regardingReference": {"Name": "p"}}',
     event(RegardingReference={"Kind": "Pod", "Name": "p"})),                   # a struct decoded twice merges
    (b'{"RelatedReference": null, "Reason": "r"}', event(Reason="r")),
    (b'{"Reason": "r", "Extra": {"deep": [1, {"x": null}]}, "Count": 3.5}', event(Reason="r")),  # unknown: ignored
    (b"null", event()),                                                         # null: the zero EventMessage
    (b' \r\n\t{"Reason": "ws"}\n', event(Reason="ws")),
    (b'{"Note": "caf\xe9 \xe2\x82!"}', event(Note="caf\ufffd \ufffd\ufffd!")),  # each invalid byte: one U+FFFD
    (b'{"Note": "\\ud83d\\ude00 \\udc00"}', event(Note="\U0001f600 \ufffd")),  # pair joined, lone one replaced
])
def test_events_go_accepts_are_recorded(raw: bytes, expected: dict[str, Any], inst: GuestInstance,
                                        h: RecordingHandle) -> None:
    assert eventf(inst, h, raw) == [expected]


def test_a_recorded_event_survives_encoding(inst: GuestInstance, h: RecordingHandle) -> None:
    """Strings the host keeps are valid Unicode: the recorded event encodes."""
    [recorded] = eventf(inst, h, b'{"Note": "\\udfff\xff", "Reason": "\\ud800"}')
    json.dumps(recorded, ensure_ascii=False).encode("utf-8")
    assert recorded["Note"] == "\ufffd\ufffd"


@pytest.mark.parametrize("raw", [
    b'{"Reason": 5}', b'{"Note": true}', b'{"RegardingReference": "Pod/p"}',
    b'{"RegardingReference": {"Kind": 1}}', b'[{"Reason": "r"}]', b'{"Reason": "r"', b'{"Reason": NaN}',
])
def test_events_go_refuses_are_not_recorded(raw: bytes, inst: GuestInstance, h: RecordingHandle,
                                            verbose_logs: list[dict[str, Any]]) -> None:
    assert eventf(inst, h, raw) == []
    assert [e["event"] for e in verbose_logs if e["event"].startswith("guest.event")] == ["guest.event_malformed"]


# --- result.node_names: the reference host's NUL-terminated list -----------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (b"", None),                            # no name: no subset, every node
    (b"\0\0", None),
    (b"node-1\0node-3", {"node-1"}),        # bytes after the last NUL are dropped
    (b"node-1\0\0node-3\0", {"node-1", "node-3"}),
    (b"\0node-2\0", {"node-2"}),
    (b"node-\xe2\x82\0", {"node-\ufffd\ufffd"}),
])
def test_node_names_as_the_reference_host_splits_them(raw: bytes, expected: set[str] | None,
                                                      inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("node_names", *script.put(raw)).returns(0).load(inst)
    res = inst.prefilter(POD, h)
    assert res.status == OK
    assert res.node_names == (frozenset(expected) if expected is not None else None)


# --- strings: status reason, nominated node, waiting-pod UIDs, klog ----------------------

def test_status_reason_replaces_each_invalid_byte(inst: GuestInstance, h: RecordingHandle) -> None:
    """A truncated 3-byte sequence is two U+FFFD in Go (Python's "replace" makes one)."""
    script = Script()
    script.op("status_reason", *script.put(b"a\xe2\x82b \xf0\x9f\x98")).returns(2).load(inst)
    assert call(inst, h, "reserve") == Status(Code.UNSCHEDULABLE, "a\ufffd\ufffdb \ufffd\ufffd\ufffd", "probe")


def test_nominated_node_name_replaces_each_invalid_byte(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("nominated_node_name", *script.put(b"node-\xed\xa0\x80")).returns(0).load(inst)
    res = inst.postfilter(POD, {"node-1": 2}, h)
    assert res.nominated_node_name == "node-\ufffd\ufffd\ufffd"


def test_waiting_pod_uid_replaces_each_invalid_byte(inst: GuestInstance, h: RecordingHandle) -> None:
    script = Script()
    script.op("reject_waiting_pod", *script.put(b"uid-\xe2\x82"), 0x10000, 8).load(inst)
    assert call(inst, h, "permit").code == Code.SUCCESS
    assert [uid for uid, _plugin, _reason in h.rejected] == ["uid-\ufffd\ufffd"]


def test_log_kvs_split_as_the_reference_host(make_instance: Callable[..., GuestInstance], h: RecordingHandle,
                                             verbose_logs: list[dict[str, Any]]) -> None:
    """Empty entries are skipped and text after the last NUL is dropped."""
    inst = make_instance()
    script = Script()
    script.op("logs", 1, *script.put(b"m\xc3"), *script.put(b"node\0\0node-1\0zone\0a\0tail"))
    script.load(inst)
    assert call(inst, h, "filter") == OK
    [entry] = [e for e in verbose_logs if e["event"] == "guest.log"]
    assert entry["message"] == "m\ufffd"
    assert (entry["node"], entry["zone"]) == ("node-1", "a")
    assert "tail" not in entry.values()
    assert "kv_unpaired" not in entry


# --- the SDK's cycle-state guest: NormalizeScore answers `null` ----------------------------

CYCLESTATE = GUESTS / "cyclestate.wat"


@pytest.fixture
def cyclestate(compiler: GuestCompiler, make_instance: Callable[..., GuestInstance]) -> GuestInstance:
    return make_instance(wat_guest(compiler, "cyclestate", CYCLESTATE.read_text()))


def test_cyclestate_guest_keeps_state_through_a_cycle(cyclestate: GuestInstance, h: RecordingHandle) -> None:
    nodes = ["node-1", "node-2", "node-3"]
    status = Status(Code.SUCCESS, "", "cyclestate")
    assert cyclestate.prefilter(POD, h).status == status
    assert [s for _n, s in cyclestate.filter(POD, nodes, h).statuses] == [status] * 3
    assert cyclestate.prescore(POD, nodes, h) == status
    scored = cyclestate.score(POD, nodes, h)
    assert (scored.status, scored.scores) == (status, tuple(NodeScore(n, 0) for n in nodes))
    res = cyclestate.normalizescore(POD, SCORES, h)
    assert (res.status, res.scores) == (status, UNCHANGED)  # `null`: the scores as they were
    assert cyclestate.reserve(POD, "node-2", h) == status
    assert cyclestate.prebind(POD, "node-2", h) == status
    assert cyclestate.bind(POD, "node-2", h) == status
    assert not cyclestate.broken


def test_cyclestate_guest_panics_without_prefilter(cyclestate: GuestInstance, h: RecordingHandle) -> None:
    """It does check: Filter before any PreFilter is the SDK guest's panic."""
    [(_node, status)] = cyclestate.filter(POD, ["node-1"], h).statuses
    assert status.code == Code.ERROR
    assert "didn't cache pod from pre-filter" in status.reason


def _simulate(capsys: pytest.CaptureFixture[str], config: Path) -> dict[str, dict[str, Any]]:
    assert main(["simulate", "--config", str(config), "--output", "json"]) == 0  # the embedded cluster
    out, _err = capsys.readouterr()
    return {f"{p['namespace']}/{p['name']}": p for p in json.loads(out)["pods"]}


def test_cyclestate_guest_in_a_simulation_schedules_what_the_defaults_schedule(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    header = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    plain = tmp_path / "defaults.yaml"
    plain.write_text(header)
    with_guest = tmp_path / "cyclestate.yaml"
    with_guest.write_text(header + yaml.safe_dump({"profiles": [{
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": "CycleState"}]}},
        "pluginConfig": [{"name": "CycleState", "args": {"guestURL": str(CYCLESTATE)}}],
    }]}))
    alone = _simulate(capsys, plain)
    guest = _simulate(capsys, with_guest)
    assert set(guest) == set(alone)
    assert [key for key, p in guest.items() if p["status"] == "Error"] == []
    scheduled = {key for key, p in alone.items() if p["status"] == "Scheduled"}
    assert scheduled  # the embedded cluster schedules most of its pods
    assert {key for key in scheduled if guest[key]["status"] != "Scheduled"} == set()
    # The guest took part: its Score (0 for every node) is in every scored pod's scores.
    assert any("CycleState" in guest[key]["scores"] for key in scheduled)
    assert all(guest[key]["scores"].get("CycleState", 0) == 0 for key in scheduled)
