"""The extender runs its wasm plugins through a Framework, with kube-scheduler's rules.

Each test pins one rule the extender used to re-implement differently: a Skip at
PreFilter spares that plugin's Filter for the whole cycle (preempt included), a failed
Reserve runs every Reserve plugin's Unreserve (so no plugin keeps the pod's instance),
scores outside 0..100 are an error instead of being clamped, and preempt runs Filter
on plugins that have no AddPod/RemovePod. The guests are small WAT modules whose
answers make a rule's breach visible (a trap, a held instance, a score).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import wat_guest
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.service import ExtenderCallError, ExtenderService, NodeCache, WeightedPlugin
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

NODES = ["node-0", "node-1", "node-2"]

#: PreFilter answers Skip; Filter traps, so a Filter call shows as an Error status.
SKIPPER = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 5))
  (func (export "filter") (result i32) unreachable))
"""

#: Reserve rejects the pod (Unschedulable); everything else passes.
REJECTS_RESERVE = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "reserve") (result i32) (i32.const 2))
  (func (export "unreserve")))
"""

#: Passes everything, and keeps the pod's instance through its binding cycle (it binds
#: with Skip, so it takes part in the binding cycle).
BINDS_WITH_SKIP = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0))
  (func (export "reserve") (result i32) (i32.const 0))
  (func (export "bind") (result i32) (i32.const 5))
  (func (export "unreserve")))
"""

#: Scores every node 200: outside kube-scheduler's 0..100.
SCORES_200 = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "score") (result i64) (i64.shl (i64.const 200) (i64.const 32))))
"""

#: Filter rejects every node; there is no AddPod or RemovePod.
REJECTS_ALL = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 2)))
"""


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"}, "spec": {}}


def args(p: dict[str, Any]) -> protocol.ExtenderArgs:
    return protocol.ExtenderArgs.decode({"Pod": p, "NodeNames": NODES})


@pytest.fixture
def service(compiler: GuestCompiler) -> Iterator[Callable[..., tuple[ExtenderService, list[WasmPlugin]]]]:
    made: list[tuple[ExtenderService, list[WasmPlugin]]] = []

    def make(*wats: tuple[str, str]) -> tuple[ExtenderService, list[WasmPlugin]]:
        plugins = [WasmPlugin(wat_guest(compiler, name, wat), PluginConfig(name, f"{name}.wat"))
                   for name, wat in wats]
        cache = NodeCache(lambda: ([node(n) for n in NODES], []))
        cache.refresh()
        made.append((ExtenderService([WeightedPlugin(p) for p in plugins], cache), plugins))
        return made[-1]

    yield make
    for svc, plugins in made:
        svc.close()
        for plugin in plugins:
            plugin.stop()


def test_a_skip_at_prefilter_spares_that_plugins_filter_for_the_whole_cycle(service) -> None:
    svc, _ = service(("skipper", SKIPPER))
    p = pod("a")
    result = svc.filter(args(p))
    assert result["Error"] == "" and result["NodeNames"] == NODES
    preempted = svc.preempt(protocol.PreemptionArgs.decode(
        {"Pod": p, "NodeNameToVictims": {"node-1": {"Pods": [pod("victim")], "NumPDBViolations": 0}}}))
    assert set(preempted["NodeNameToMetaVictims"]) == {"node-1"}  # Filter was not called: it would trap


def test_a_failed_reserve_runs_every_reserve_plugins_unreserve(service) -> None:
    svc, (rejects, keeps) = service(("rejects", REJECTS_RESERVE), ("keeps", BINDS_WITH_SKIP))
    p = pod("a")
    assert svc.filter(args(p))["NodeNames"] == NODES
    assert keeps.counts().binding == 1 and rejects.counts().binding == 1  # both hold the pod for its bind
    answer = svc.bind(protocol.BindingArgs.decode(
        {"PodName": "a", "PodNamespace": "ns", "PodUID": "uid-a", "Node": "node-0"}))
    assert answer["Error"]
    # The second plugin's Reserve never ran, yet its Unreserve did: its instance is back.
    for plugin in (rejects, keeps):
        counts = plugin.counts()
        assert (counts.binding, counts.scheduling, counts.idle) == (0, 0, 1), (plugin.name, counts)


def test_a_score_outside_0_to_100_fails_prioritize_instead_of_being_clamped(service) -> None:
    svc, _ = service(("big", SCORES_200))
    p = pod("a")
    svc.filter(args(p))
    with pytest.raises(ExtenderCallError, match="invalid score 200"):
        svc.prioritize(args(p))


def test_preempt_runs_filter_on_a_plugin_without_addpod_or_removepod(service) -> None:
    svc, _ = service(("rejects-all", REJECTS_ALL))
    p = pod("a")
    assert svc.filter(args(p))["NodeNames"] == []
    preempted = svc.preempt(protocol.PreemptionArgs.decode(
        {"Pod": p, "NodeNameToVictims": {"node-1": {"Pods": [pod("victim")], "NumPDBViolations": 0}}}))
    assert preempted["NodeNameToMetaVictims"] == {}  # removing the victim does not make the node fit


def test_node_infos_are_made_once_per_node_object_of_the_node_cache(service) -> None:
    svc, _ = service(("rejects-all", REJECTS_ALL))
    first = svc._nodes_for(args(pod("a")))
    again = svc._nodes_for(args(pod("b")))
    assert [i.name for i in first] == NODES and all(x is y for x, y in zip(first, again, strict=True))
    changed = {**svc.node_cache.nodes, "node-1": {"metadata": {"name": "node-1", "labels": {"new": "yes"}}}}
    svc.node_cache.nodes = changed  # swapped whole, as a reload does
    after = svc._nodes_for(args(pod("c")))
    assert after[1].node is changed["node-1"] and after[1] is not first[1]
    changed["node-2"] = {"metadata": {"name": "node-2", "labels": {"edited": "in place"}}}
    assert svc._nodes_for(args(pod("d")))[2].node is changed["node-2"]
