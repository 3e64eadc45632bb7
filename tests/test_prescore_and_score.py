"""PreScore and Score in one message to the pod's actor (adapters/wasm_plugin.py).

The facade sends PreScore with Score over the same nodes; Score then answers from what
PreScore brought back. The guest below counts its score calls in its result, so each
test can tell whether Score ran once, ran again, or never ran during PreScore.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.conftest import wat_guest
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code, NodeScore
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

#: prescore answers the status written as the first digit of its guestConfig; score
#: answers how many score calls this instance has run, including this one.
COUNTING_GUEST = """
(module
  (import "k8s.io/scheduler" "get_config" (func $config (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $scores (mut i32) (i32.const 0))
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "prescore") (result i32)
    (drop (call $config (i32.const 0) (i32.const 8)))
    (i32.sub (i32.load8_u (i32.const 0)) (i32.const 48)))
  (func (export "score") (result i64)
    (global.set $scores (i32.add (global.get $scores) (i32.const 1)))
    (i64.shl (i64.extend_i32_u (global.get $scores)) (i64.const 32))))
"""

NODES = ["node-1", "node-2", "node-3"]
POD = {"metadata": {"name": "web-1", "namespace": "default", "uid": "uid-web-1"}}


@pytest.fixture
def plugin(compiler: GuestCompiler) -> Iterator[Callable[[str], WasmPlugin]]:
    guest = wat_guest(compiler, "counting", COUNTING_GUEST)
    started: list[WasmPlugin] = []

    def make(prescore_status: str) -> WasmPlugin:
        made = WasmPlugin(guest, PluginConfig("counting", guest.url, guest_config=prescore_status))
        started.append(made)
        return made

    yield make
    for made in started:
        made.close()


def scores(first: int, nodes: list[str] = NODES) -> tuple[NodeScore, ...]:
    return tuple(NodeScore(name, first + i) for i, name in enumerate(nodes))


def test_score_comes_with_prescore_and_runs_once(plugin: Callable[[str], WasmPlugin]) -> None:
    p = plugin("0")
    assert p.pre_filter(None, POD).status.ok
    assert p.pre_score(None, POD, NODES).ok
    assert p.score_nodes(None, POD, NODES).scores == scores(1)
    # A second Score of the same cycle has nothing to take: it runs on the instance.
    assert p.score_nodes(None, POD, NODES).scores == scores(4)


def test_score_over_other_nodes_runs_afresh(plugin: Callable[[str], WasmPlugin]) -> None:
    p = plugin("0")
    p.pre_filter(None, POD)
    assert p.pre_score(None, POD, NODES).ok
    assert p.score_nodes(None, POD, NODES[:2]).scores == scores(4, NODES[:2])


@pytest.mark.parametrize(("digit", "code"), [("5", Code.SKIP), ("1", Code.ERROR), ("2", Code.UNSCHEDULABLE)])
def test_score_does_not_run_when_prescore_does_not_succeed(plugin: Callable[[str], WasmPlugin],
                                                           digit: str, code: Code) -> None:
    p = plugin(digit)
    p.pre_filter(None, POD)
    assert p.pre_score(None, POD, NODES).code == code
    assert p.score_nodes(None, POD, NODES).scores == scores(1)  # the first score calls ever


def test_a_new_cycle_drops_a_score_its_pod_never_took(plugin: Callable[[str], WasmPlugin]) -> None:
    p = plugin("0")
    p.pre_filter(None, POD)
    assert p.pre_score(None, POD, NODES).ok  # Score never called: another plugin failed
    other = {"metadata": {"name": "web-2", "namespace": "default", "uid": "uid-web-2"}}
    p.pre_filter(None, other)
    p.pre_filter(None, POD)  # the pod's next attempt
    assert p.score_nodes(None, POD, NODES).scores == scores(4)
