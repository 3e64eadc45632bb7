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
from wasm_scheduler.adapters.extender.nodes import NodeCache, RequestHandle
from wasm_scheduler.adapters.extender.service import ExtenderCallError, ExtenderService, WeightedPlugin
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

#: PreFilter rejects the pod (Unschedulable); Filter passes.
REJECTS_AT_PREFILTER = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 2))
  (func (export "filter") (result i32) (i32.const 0)))
"""

#: PreFilter rejects the pod for good (UnschedulableAndUnresolvable); Filter passes.
NEVER_AT_PREFILTER = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 3))
  (func (export "filter") (result i32) (i32.const 0)))
"""

#: PreFilter and Filter pass.
PASSES = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0)))
"""

#: PreFilter answers Error.
ERRS_AT_PREFILTER = """
(module
  (memory (export "memory") 1)
  (func (export "prefilter") (result i32) (i32.const 1)))
"""

#: PreFilter allows node-0 only; Filter passes.
ONLY_NODE_0 = """
(module
  (import "k8s.io/scheduler" "result.node_names" (func $names (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "node-0\\00")
  (func (export "prefilter") (result i32) (call $names (i32.const 0) (i32.const 7)) (i32.const 0))
  (func (export "filter") (result i32) (i32.const 0)))
"""

#: Filter passes a node only when the guest can read its object through the handle.
READS_NODE = """
(module
  (import "k8s.io/scheduler" "currentNodeName" (func $current (param i32 i32) (result i32)))
  (import "k8s.io/api" "node" (func $node (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "prefilter") (result i32) (i32.const 0))
  (func (export "filter") (result i32)
    (local $n i32)
    (local.set $n (call $current (i32.const 0) (i32.const 256)))
    (if (result i32) (i32.eqz (call $node (i32.const 0) (local.get $n) (i32.const 1024) (i32.const 60000)))
      (then (i32.const 3)) (else (i32.const 0)))))
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


def preempt(p: dict[str, Any], *nodes: str) -> protocol.PreemptionArgs:
    return protocol.PreemptionArgs.decode(
        {"Pod": p, "NodeNameToVictims": {n: {"Pods": [pod(f"victim-{n}")], "NumPDBViolations": 0} for n in nodes}})


def binding(name: str, node_name: str = "node-0") -> protocol.BindingArgs:
    return protocol.BindingArgs.decode({"PodName": name, "PodNamespace": "ns", "PodUID": f"uid-{name}",
                                        "Node": node_name})


class Binder:
    """Records the Bindings it is asked for (or raises, to stand for a bug)."""

    def __init__(self, raises: bool = False) -> None:
        self.calls: list[str] = []
        self.raises = raises

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        if self.raises:
            raise ConnectionError("the API server went away")
        self.calls.append(f"{namespace}/{name} -> {node_name}")
        return ""


@pytest.fixture
def service(compiler: GuestCompiler) -> Iterator[Callable[..., tuple[ExtenderService, list[WasmPlugin]]]]:
    made: list[tuple[ExtenderService, list[WasmPlugin]]] = []

    def make(*wats: tuple[str, str], cache: bool = True,
             **options: Any) -> tuple[ExtenderService, list[WasmPlugin]]:
        plugins = [WasmPlugin(wat_guest(compiler, name, wat), PluginConfig(name, f"{name}.wat"))
                   for name, wat in wats]
        nodes = None
        if cache:
            nodes = NodeCache(lambda: ([node(n) for n in NODES], []))
            nodes.refresh()
        made.append((ExtenderService([WeightedPlugin(p) for p in plugins], nodes, **options), plugins))
        return made[-1]

    yield make
    for svc, plugins in made:
        svc.close()
        for plugin in plugins:
            plugin.close()


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


def test_preempt_after_an_unschedulable_prefilter_runs_every_filter_plugin(service) -> None:
    # kube-scheduler (1.28 on) runs every PreFilter after an Unschedulable one, so its
    # preemption can run every Filter plugin: each decides the node.
    plugins = (("rejects", REJECTS_AT_PREFILTER), ("rejects-all", REJECTS_ALL))
    svc, _ = service(*plugins)
    p = pod("a")
    result = svc.filter(args(p))
    assert result["NodeNames"] == [] and set(result["FailedNodes"]) == set(NODES)
    assert svc.preempt(preempt(p, "node-1"))["NodeNameToMetaVictims"] == {}  # rejects-all's Filter says no
    first, _ = service(*plugins)
    assert first.preempt(preempt(pod("b"), "node-1"))["NodeNameToMetaVictims"] == {}  # preempt begins the cycle
    passes, _ = service(("rejects", REJECTS_AT_PREFILTER), ("passes", PASSES))
    assert list(passes.preempt(preempt(pod("c"), "node-1"))["NodeNameToMetaVictims"]) == ["node-1"]


def test_after_an_unresolvable_prefilter_preempt_keeps_no_node(service) -> None:
    # Preemption cannot help such a pod (kube-scheduler does not even try); a preempt
    # that comes anyway keeps no node.
    svc, _ = service(("never", NEVER_AT_PREFILTER), ("passes", PASSES))
    assert svc.preempt(preempt(pod("a"), "node-1"))["NodeNameToMetaVictims"] == {}


def test_preempt_that_begins_a_cycle_heeds_its_prefilter(service) -> None:
    errs, _ = service(("errs", ERRS_AT_PREFILTER))
    with pytest.raises(ExtenderCallError, match="PreFilter"):
        errs.preempt(preempt(pod("a"), "node-1"))
    subset, _ = service(("only-node-0", ONLY_NODE_0))
    kept = subset.preempt(preempt(pod("b"), "node-0", "node-1", "node-2"))["NodeNameToMetaVictims"]
    assert list(kept) == ["node-0"]


def test_a_bind_goes_only_to_a_node_that_passed_the_filter(service) -> None:
    binder = Binder()
    svc, _ = service(("rejects-all", REJECTS_ALL), binder=binder)
    assert svc.filter(args(pod("a")))["NodeNames"] == []
    answer = svc.bind(binding("a", "node-1"))  # the cycle still has the slot, but no node passed
    assert "did not pass this extender's filter" in answer["Error"]
    ok, _ = service(("only-node-0", ONLY_NODE_0), binder=binder)
    assert ok.filter(args(pod("b")))["NodeNames"] == ["node-0"]
    assert "node node-2 did not pass" in ok.bind(binding("b", "node-2"))["Error"]
    assert ok.bind(binding("b", "node-0")) == {"Error": ""}  # the refusal left the pod held
    assert binder.calls == ["ns/b -> node-0"]


def test_without_a_filter_verb_a_pod_its_prefilter_rejects_is_never_bound(service) -> None:
    binder = Binder()
    svc, (plugin,) = service(("rejects", REJECTS_AT_PREFILTER), binder=binder)
    with pytest.raises(ExtenderCallError, match="PreFilter of rejects"):
        svc.prioritize(args(pod("a")))  # the cycle begins here; kube-scheduler ignores the error
    answer = svc.bind(binding("a"))
    assert "PreFilter of rejects" in answer["Error"] and binder.calls == []
    assert svc.awaiting_bind() == 0 and plugin.counts().binding == 0


def test_a_prioritize_after_its_pods_cycle_ended_begins_no_cycle(service) -> None:
    svc, (plugin,) = service(("binds-with-skip", BINDS_WITH_SKIP), binder=Binder())
    a = pod("a")
    svc.filter(args(a))
    assert svc.bind(binding("a")) == {"Error": ""}
    with pytest.raises(ExtenderCallError, match="no scheduling cycle"):
        svc.prioritize(args(a))  # late: kube-scheduler's call timed out, the pod is bound
    assert svc.awaiting_bind() == 0 and plugin.counts().binding == 0


def test_preempt_without_a_node_cache_shows_guests_the_nodes_requests_carried(service) -> None:
    svc, _ = service(("reads-node", READS_NODE), cache=False)
    p = pod("a")
    svc.filter(protocol.ExtenderArgs.decode({"Pod": p, "Nodes": {"items": [node(n) for n in NODES]}}))
    kept = svc.preempt(preempt(p, "node-1"))["NodeNameToMetaVictims"]
    assert list(kept) == ["node-1"]  # the guest read node-1's object: it came with the filter


def test_an_exception_in_the_binding_cycle_releases_every_instance(service) -> None:
    svc, plugins = service(("rejects-nothing", BINDS_WITH_SKIP), ("keeps", BINDS_WITH_SKIP),
                           binder=Binder(raises=True))
    svc.filter(args(pod("a")))
    answer = svc.bind(binding("a"))
    assert answer["Error"].startswith("internal error (error id ")
    for plugin in plugins:
        counts = plugin.counts()
        assert (counts.binding, counts.idle) == (0, 1), (plugin.name, counts)


def test_a_request_handle_finds_a_node_without_building_the_snapshot_view() -> None:
    nodes = {f"n-{i}": node(f"n-{i}") for i in range(1000)}
    handle = RequestHandle(nodes)
    assert handle.get_node("n-7") is nodes["n-7"] and handle._view is None
    assert handle.image_states("n-7") == {} and handle._view is not None


#: Binds with Skip (the API binds) and exports PostBind.
POSTBINDS = BINDS_WITH_SKIP.replace('(func (export "unreserve")))',
                                    '(func (export "unreserve"))\n  (func (export "postbind")))')


def test_a_postbind_bug_after_the_binding_leaves_the_pod_bound(service, monkeypatch) -> None:
    binder = Binder()
    svc, (plugin,) = service(("postbinds", POSTBINDS), binder=binder)
    unreserved: list[str] = []
    real_unreserve = plugin.unreserve
    monkeypatch.setattr(plugin, "unreserve", lambda *a: (unreserved.append("unreserve"), real_unreserve(*a))[1])
    real_post_bind = plugin.post_bind

    def post_bind_with_a_bug(*a: Any) -> None:
        real_post_bind(*a)
        raise RuntimeError("a bug in PostBind")

    monkeypatch.setattr(plugin, "post_bind", post_bind_with_a_bug)
    svc.filter(args(pod("a")))
    assert svc.bind(binding("a")) == {"Error": ""}  # kube-scheduler must not retry a bound pod
    assert binder.calls == ["ns/a -> node-0"] and unreserved == []
    counts = plugin.counts()
    assert (counts.binding, counts.idle) == (0, 1)


def test_without_a_filter_verb_a_cycle_preempt_began_is_not_the_next_cycles(service) -> None:
    svc, _ = service(("passes", PASSES), binder=Binder())
    a = pod("a")
    svc.preempt(preempt(a, "node-1"))  # cycle 1: the in-tree filters left no node
    svc.prioritize(args(a))  # cycle 2, the retry: no filter verb, so it begins here
    assert svc.bind(binding("a", "node-1")) == {"Error": ""}


def test_a_failed_prioritize_refuses_the_bind_and_gives_the_instance_back(service) -> None:
    """kube-scheduler ignores a failed prioritize and binds the pod anyway (seen through the
    real scheduler: tests/e2e/test_faults_e2e.py); in-process a Score error fails the cycle.
    The extender refuses that bind, so the pod is retried, and its instances go back at once."""
    binder = Binder()
    svc, (plugin,) = service(("big", SCORES_200), binder=binder)
    p = pod("a")
    assert svc.filter(args(p))["NodeNames"] == NODES
    with pytest.raises(ExtenderCallError, match="invalid score 200"):
        svc.prioritize(args(p))
    answer = svc.bind(binding("a", "node-0"))
    assert "prioritize of pod ns/a failed" in answer["Error"] and binder.calls == []
    counts = plugin.counts()
    assert (counts.binding, counts.scheduling, svc.awaiting_bind()) == (0, 0, 0), counts
    # The retry is a new cycle: its filter and bind go through.
    assert svc.filter(args(p))["NodeNames"] == NODES
    assert svc.bind(binding("a", "node-0")) == {"Error": ""}
    assert binder.calls == ["ns/a -> node-0"]


def test_the_binding_cycle_is_handed_the_assumed_pod(service, monkeypatch) -> None:
    """kube-scheduler runs Reserve, Permit and the binding cycle with the assumed pod, a copy
    whose spec.nodeName is the chosen node; the SIG project's host hands guests that pod, and
    so does the extender (docs/abi-notes.md)."""
    from wasm_scheduler.adapters.framework.framework import Framework

    seen: list[tuple[str, str]] = []
    reserve = Framework.run_reserve

    def spy(self: Framework[Any], state: Any, pod: Any, node: str) -> Any:
        seen.append((pod["spec"].get("nodeName", ""), node))
        return reserve(self, state, pod, node)

    monkeypatch.setattr(Framework, "run_reserve", spy)
    binder = Binder()
    svc, _ = service(("keeps", BINDS_WITH_SKIP), binder=binder)
    p = pod("a")
    assert svc.filter(args(p))["NodeNames"] == NODES
    assert svc.bind(binding("a", "node-1")) == {"Error": ""}
    assert seen == [("node-1", "node-1")]
    assert "nodeName" not in p.get("spec", {})  # the request's pod is left as it came
