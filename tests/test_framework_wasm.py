"""Wasm plugins in the framework: NodeNumber's cycle state, several guests in one profile."""

from __future__ import annotations

from pathlib import Path

import pytest
import wasmtime

from tests.framework_support import cluster, config, node, pod, run
from wasm_scheduler.adapters.framework import Scheduler, UserError
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.handle import SchedulerHandle
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.results import PodStatus
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.config import PluginConfig

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "nodenumber"


def nodenumber(name: str) -> dict:
    return {"name": name, "args": {"guestURL": str(EXAMPLE / "nodenumber.wasm")}}


def identical_nodes(count: int) -> list[dict]:
    return [node(f"node-{i}", cpu="8", memory="16Gi") for i in range(count)]


def test_the_committed_module_is_built_from_the_committed_text():
    wat = (EXAMPLE / "nodenumber.wat").read_text(encoding="utf-8")
    assert wasmtime.wat2wasm(wat) == (EXAMPLE / "nodenumber.wasm").read_bytes()


def test_nodenumber_keeps_cycle_state_from_prescore_to_score(compiler):
    cl = cluster(node("node-1"))
    with WasmPlugin.load(PluginConfig.from_args("NodeNumber", nodenumber("NodeNumber")["args"]), compiler,
                         SchedulerHandle(cl.snapshot())) as plugin:
        p = pod("web-7")
        names = ["node-6", "node-7", "node-17"]
        state = CycleState()
        assert plugin.pre_filter(state, p).status.ok
        assert plugin.pre_score(state, p, names).ok
        result = plugin.score_nodes(state, p, names)
        assert result.status.ok
        assert [(s.name, s.score) for s in result.scores] == [("node-6", 0), ("node-7", 100), ("node-17", 100)]
        # The framework's NodeInfos, names, or a mix of both: the same nodes, the same scores.
        infos = [NodeInfo({"metadata": {"name": n}}, Resources()) for n in names]
        for nodes in (infos, [infos[0], "node-7", infos[2]]):
            again = CycleState()
            assert plugin.pre_filter(again, p).status.ok and plugin.pre_score(again, p, nodes).ok
            assert plugin.score_nodes(again, p, nodes).scores == result.scores
        # A new cycle (PreFilter) forgets the pod: Score without PreScore has no state.
        assert plugin.pre_filter(CycleState(), p).status.ok
        failed = plugin.score_nodes(CycleState(), p, names)
        assert failed.status.code == Code.ERROR
        assert "NodeNumber: no cycle state (prescore did not run)" in failed.status.reason
        # A pod name without a final digit scores 0 everywhere.
        q = pod("web")
        assert plugin.pre_filter(CycleState(), q).status.ok and plugin.pre_score(CycleState(), q, names).ok
        assert {s.score for s in plugin.score_nodes(CycleState(), q, names).scores} == {0}


def test_nodenumber_decides_between_otherwise_equal_nodes(compiler):
    cfg = config(("NodeNumber", 1), plugin_config=[nodenumber("NodeNumber")])
    pods = [pod(f"app-{i}") for i in (3, 7, 0, 9)]
    report = run(cfg, cluster(*identical_nodes(10), *pods), compiler)
    assert {o.name: o.node for o in report.pods} == {"app-3": "node-3", "app-7": "node-7", "app-0": "node-0",
                                                   "app-9": "node-9"}
    assert report.outcome("default/app-3").scores["NodeNumber"] == 100


def test_two_wasm_plugins_in_one_profile_each_keep_their_own_state_and_weight(compiler):
    cfg = config(("Lucky", 1), ("Luckier", 3), plugin_config=[nodenumber("Lucky"), nodenumber("Luckier")])
    pods = [pod(f"svc-{i}") for i in range(6)]
    with Scheduler(cfg, cluster(*identical_nodes(6), *pods), compiler) as scheduler:
        framework = scheduler.frameworks["default-scheduler"]
        lucky, luckier = framework.plugins["Lucky"], framework.plugins["Luckier"]
        assert isinstance(lucky, WasmPlugin) and isinstance(luckier, WasmPlugin)
        assert lucky.supervisor is not luckier.supervisor
        assert framework.score_weights["Lucky"] == 1 and framework.score_weights["Luckier"] == 3
        assert framework.names("pre_score")[-2:] == ["Lucky", "Luckier"]
        report = scheduler.run()
        counts = [lucky.counts(), luckier.counts()]
    for i in range(6):
        outcome = report.outcome(f"default/svc-{i}")
        assert outcome.status == PodStatus.SCHEDULED and outcome.node == f"node-{i}"
        assert outcome.scores["Lucky"] == 100 and outcome.scores["Luckier"] == 300
    for c in counts:  # every pod's instance went back to the pool
        assert c.scheduling == 0 and c.binding == 0 and c.balanced


def test_a_guest_that_does_not_load_is_a_user_error_and_nothing_keeps_running(compiler, tmp_path):
    bad = tmp_path / "broken.wasm"
    bad.write_bytes(b"\0asm\x01\0\0\0garbage")
    cfg = config("Good", "Broken", plugin_config=[nodenumber("Good"), {"name": "Broken",
                                                                      "args": {"guestURL": str(bad)}}])
    with pytest.raises(UserError) as info:
        run(cfg, cluster(node("n1"), pod("p")), compiler)
    message = str(info.value)
    assert message.startswith("test-config.yaml: profiles[0] (default-scheduler): pluginConfig[1] (Broken)")
    assert "invalid WebAssembly" in message and "\n" not in message


def test_bad_wasm_plugin_args_are_a_user_error(compiler):
    cfg = config("Odd", plugin_config=[{"name": "Odd", "args": {"guestURL": "x.wasm", "logSeverity": 9}}])
    with pytest.raises(UserError, match=r"pluginConfig\[0\] \(Odd\): plugin 'Odd': args.logSeverity"):
        run(cfg, cluster(node("n1"), pod("p")), compiler)
