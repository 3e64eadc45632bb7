"""Arbitrary input against the host functions and the extender's JSON decoding.

A guest can pass any (ptr, len, buf, limit) to any host import: the call either
succeeds or becomes an Error status, and the host never raises. Any JSON body (and any
bytes) sent to the extender decodes or raises ProtocolError, nothing else.
"""

from __future__ import annotations

import json

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from tests.conftest import GUESTS
from tests.probe import OPS, ExportInputs, Script, status_of
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.vocabulary import EmptyHandle

COMPILER = GuestCompiler()
PROBE = COMPILER.compile("probe", "probe.wat", (GUESTS / "probe.wat").read_bytes())
HOST_OPS = [name for name in OPS if name not in ("trap", "proc_exit", "store", "memory_grow")]
EXPORTS = ["prefilter", "filter", "score", "reserve", "permit", "postfilter", "normalizescore", "enqueue",
           "addpod", "prebind", "bind", "postbind", "unreserve", "prescore", "removepod"]
POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}

word = st.one_of(
    st.integers(0, 0xFFFF_FFFF),
    st.sampled_from([0, 1, 8, 0x1000, 0x1_0000, 0x1_FFF8, 0x2_0000, 0x7FFF_FFFF, 0xFFFF_FFFF]),
)


class NodesHandle(EmptyHandle):
    def get_node(self, name: str):
        return {"metadata": {"name": name or "n"}}

    def list_nodes(self):
        return [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]

    def image_states(self, node_name: str):
        return {"busybox": {"Size": 1, "NumNodes": 2}}

    def get_waiting_pod(self, uid: str):
        return POD


#: Every export's inputs: the nodes the handle serves, the pod as its own target.
INPUTS = ExportInputs(POD, POD, node="a", nodes=["a", "b"], filtered=["a"], statuses={"a": 2}, scores=())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(st.tuples(st.sampled_from(HOST_OPS), word, word, word, word, word), min_size=1, max_size=4),
       export=st.sampled_from(EXPORTS))
def test_any_host_call_is_a_status_never_an_exception(ops, export) -> None:
    inst = GuestInstance(PROBE, PluginConfig("probe", "probe.wat"), "probe-prop")
    script = Script()
    for name, *args in ops:
        script.op(name, *args)
    script.load(inst)
    status = status_of(INPUTS.call(inst, export, NodesHandle()))
    assert status.code in set(Code)
    if status.code == Code.ERROR and "trap in" in status.reason:
        assert inst.broken, "a failed call must break the instance"
        assert status_of(INPUTS.call(inst, "reserve", NodesHandle())).code == Code.ERROR


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
shaped = st.fixed_dictionaries({}, optional={
    "Pod": json_values | st.just({"metadata": {"name": "p"}}),
    "Nodes": json_values | st.just({"items": [{"metadata": {"name": "n"}}, 3]}),
    "NodeNames": json_values | st.just(["a", "b"]),
    "nodenames": json_values,
    "PodName": json_values, "PodNamespace": json_values, "PodUID": json_values, "Node": json_values,
    "NodeNameToVictims": json_values | st.just({"n": {"Pods": [{"metadata": {}}], "NumPDBViolations": "x"}}),
    "NodeNameToMetaVictims": json_values | st.just({"n": {"Pods": [{"UID": 3}]}}),
})


@settings(max_examples=400, deadline=None)
@given(body=shaped | json_values)
def test_extender_decoding_raises_only_protocol_errors(body) -> None:
    raw = json.dumps(body).encode()
    for decode in (protocol.ExtenderArgs.decode, protocol.BindingArgs.decode, protocol.PreemptionArgs.decode):
        try:
            decode(protocol.parse_json(raw))
        except protocol.ProtocolError as exc:
            assert str(exc)


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=64))
def test_any_bytes_are_json_or_a_protocol_error(raw) -> None:
    try:
        protocol.parse_json(raw)
    except protocol.ProtocolError as exc:
        assert str(exc)
