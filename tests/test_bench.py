"""`wasm-scheduler bench`: a tiny run through the CLI gives one complete JSON document.

No assertion here is about speed: the benchmark reports, it never fails the suite.
"""

from __future__ import annotations

import json

import pytest

from wasm_scheduler.adapters.benchmarks.native_nodenumber import NativeNodeNumber, last_digit
from wasm_scheduler.adapters.benchmarks.throughput import VARIANTS, targets
from wasm_scheduler.adapters.benchmarks.workload import Workload, documents, objects
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.framework.cluster import cluster_from_objects
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.resources import Resources
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import Code, NodeScore

TOP_KEYS = {"throughput", "ratios", "extension_points", "call_overhead_us", "memory_per_instance_mib", "load_ms",
            "targets", "checks"}


def positive(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def run_tiny(capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    code = main(["bench", "--nodes", "20", "--init-pods", "20", "--pods", "30", "--rounds", "1", "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)  # exactly one JSON document: json.loads rejects anything after it
    assert isinstance(doc, dict)
    assert "bench [" in err, "progress goes to stderr"
    return doc


def test_tiny_bench_reports_every_figure_as_one_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_tiny(capsys)
    assert set(doc) >= TOP_KEYS
    assert set(doc["throughput"]) == set(VARIANTS)
    assert all(positive(doc["throughput"][v]) for v in VARIANTS)
    assert set(doc["ratios"]) == {"wasm/native", "wasm/extender", "wasm/extender-names", "added_cost_wasm/native",
                                  "baseline/extender"}
    assert doc["targets"]["throughput wasm/extender"]["ceiling"] == doc["ratios"]["baseline/extender"]
    assert all(positive(v) for v in doc["ratios"].values())
    for variant in VARIANTS[1:]:  # the scheduling thread's CPU inside a call never exceeds the call's time
        assert 0 < doc["plugin_cpu_us_per_pod"][variant] <= doc["plugin_us_per_pod"][variant] * 1.01 + 1, variant
    assert positive(doc["call_overhead_us"]["host"]) and positive(doc["call_overhead_us"]["floor"])
    assert positive(doc["host_function_round_trip_us"])
    memory = doc["memory_per_instance_mib"]
    assert positive(memory["linear_memory"]) and isinstance(memory["rss_per_instance"], (int, float))
    assert memory["instances"] > 0, "the memory figure must measure instances the pool started for it"
    assert positive(doc["load_ms"]["cold"]) and positive(doc["load_ms"]["cached"])
    for variant in VARIANTS:
        points = doc["extension_points"][variant]
        for point in ("PreFilter", "Filter", "Score"):
            assert positive(points[point]["p50_us"]) and positive(points[point]["p99_us"]), (variant, point)
            assert points[point]["p99_us"] >= points[point]["p50_us"]
    assert "Permit" in doc["custom_plugin_points"]["wasm"], "the wasm plugin takes part in its lifecycle points"
    for name, target in doc["targets"].items():
        assert set(target) >= {"value", "target", "met"}, name
        assert isinstance(target["met"], bool)
    # Every pod is scheduled, and the wasm, native and extender NodeNumber place them alike.
    assert all(doc["checks"]["all_scheduled"].values())
    assert doc["checks"]["placements_identical"] == {"wasm/native": True, "extender/native": True,
                                                     "extender-names/native": True, "rounds/native": True}


def test_bench_table_output_shows_targets(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--nodes", "8", "--init-pods", "0", "--pods", "10", "--rounds", "1"])
    out, _err = capsys.readouterr()
    assert code == 0
    assert "Targets" in out and "pods/s" in out and ("met" in out or "missed" in out)
    assert "wasm/extender-names" in out, "both extender configurations are compared"
    assert "each round against its own baseline" in out


def test_bench_rejects_empty_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--nodes", "0"]) == 2
    assert "error: bench" in capsys.readouterr().err


def test_workload_is_deterministic_and_shaped_like_scheduler_perf() -> None:
    workload = Workload(nodes=12, init_pods=30, pods=25)
    assert objects(workload) == objects(workload)
    cluster = cluster_from_objects(documents(workload), "bench")
    assert len(cluster.nodes) == 12 and len(cluster.running) == 30 and len(cluster.pending) == 25
    node = cluster.nodes[0].node
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "32Gi", "pods": "110"}
    assert all(info.name[-1].isdigit() for info in cluster.nodes)
    assert all(info.key[-1].isdigit() for info in cluster.pending)
    assert {len(info.pods) for info in cluster.nodes} <= {2, 3}, "init pods are spread round-robin"


def test_native_nodenumber_matches_the_guest_semantics() -> None:
    plugin = NativeNodeNumber()
    nodes = [NodeInfo({"metadata": {"name": n}}, Resources()) for n in ("node-3", "node-13", "node-4", "")]
    pod = {"metadata": {"name": "web-3"}}
    state = CycleState()
    assert plugin.pre_filter(state, pod).status.ok
    missing = plugin.score_nodes(state, pod, nodes)
    assert missing.status.code == Code.ERROR and "prescore did not run" in missing.status.reason
    assert plugin.pre_score(state, pod, nodes).ok
    assert plugin.score_nodes(state, pod, nodes).scores == (
        NodeScore("node-3", 100), NodeScore("node-13", 100), NodeScore("node-4", 0), NodeScore("", 0))
    no_digit = CycleState()
    plugin.pre_score(no_digit, {"metadata": {"name": "web"}}, nodes)
    assert [s.score for s in plugin.score_nodes(no_digit, pod, nodes).scores] == [0, 0, 0, 0]
    assert last_digit("a7") == "7" and last_digit("a") == "" and last_digit("") == ""


def test_targets_are_judged_on_their_bounds() -> None:
    doc = {"ratios": {"wasm/native": 0.8, "wasm/extender": 4.9, "added_cost_wasm/native": 3.1},
           "call_overhead_us": {"ratio": 1.5}, "memory_per_instance_mib": {"rss_per_instance": 2.0,
                                                                           "linear_memory": 0.125},
           "load_ms": {"cached": 50.0}}
    met = {name: t["met"] for name, t in targets(doc).items()}
    assert met == {"throughput wasm/native": True, "throughput wasm/extender": False,
                   "added time per pod wasm/native": False, "export call host/floor": True,
                   "RSS per idle instance (MiB)": False, "plugin load, warm cache (ms)": True}



@pytest.mark.parametrize(("variant", "sends"), [("extender", "Nodes"), ("extender-names", "NodeNames")])
def test_extender_variants_send_what_their_configuration_says(variant: str, sends: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`extender` is configured like the SIG project's scheduler_perf comparison
    (nodeCacheCapable false: whole v1.Node objects); `extender-names` sends names only."""
    from wasm_scheduler.adapters.benchmarks.extender_client import ExtenderClient
    from wasm_scheduler.adapters.benchmarks.throughput import variant_config
    from wasm_scheduler.adapters.framework.plugins.base import PluginContext

    args = variant_config(variant, "http://127.0.0.1:1").profiles[0].plugin_args[ExtenderClient.NAME].args
    # The way the framework makes it: from the profile's pluginConfig args.
    client = ExtenderClient(PluginContext(ExtenderClient.NAME, args, None, None))  # type: ignore[arg-type]
    bodies: list[dict] = []  # type: ignore[type-arg]
    monkeypatch.setattr(client, "_post", lambda body: bodies.append(body) or [{"Host": "node-3", "Score": 10}])
    nodes = [NodeInfo({"metadata": {"name": n}, "status": {"allocatable": {"cpu": "4"}}}, Resources())
             for n in ("node-3", "node-4")]
    result = client.score_nodes(CycleState(), {"metadata": {"name": "web-3"}}, nodes)
    assert [s.score for s in result.scores] == [100, 0]
    (body,) = bodies
    assert set(body) == {"Pod", sends}
    if sends == "Nodes":
        assert body["Nodes"]["items"] == [info.node for info in nodes], "the whole objects, as kube-scheduler sends"
    else:
        assert body["NodeNames"] == ["node-3", "node-4"]
    client.close()


def test_an_extender_without_node_cache_capable_gets_whole_nodes_as_kube_scheduler_sends_them() -> None:
    from wasm_scheduler.adapters.benchmarks.extender_client import ExtenderClient
    from wasm_scheduler.adapters.framework.plugins.base import PluginContext

    client = ExtenderClient(PluginContext(ExtenderClient.NAME, {"urlPrefix": "http://127.0.0.1:1"}, None, None))  # type: ignore[arg-type]
    assert client.node_cache_capable is False
    client.close()


def test_added_time_is_floored_by_the_plugin_s_cpu_on_the_scheduling_thread_not_its_wall_time() -> None:
    """A difference under the noise is raised to the plugin's own CPU time; a plugin whose
    calls wait for other threads (wasm) keeps its measured difference even when its wall
    time in the calls is longer (other threads ran baseline's work meanwhile)."""
    from wasm_scheduler.adapters.benchmarks.throughput import Round, throughput_figures

    def round_of(variant: str, seconds: float, wall_per_pod: float = 0.0, cpu_per_pod: float = 0.0) -> Round:
        placements = {f"ns/p{i}": "node-1" for i in range(1000)}
        custom = {"Score": [wall_per_pod] * 1000} if wall_per_pod else {}
        return Round(variant, seconds, 1000, 1000, placements, {}, custom, cpu_per_pod * 1000)

    results = {
        "baseline": [round_of("baseline", 1.000)],
        "native": [round_of("native", 1.020, wall_per_pod=70e-6, cpu_per_pod=70e-6)],
        "wasm": [round_of("wasm", 1.400, wall_per_pod=460e-6, cpu_per_pod=100e-6)],
        "extender": [round_of("extender", 5.0, wall_per_pod=4000e-6, cpu_per_pod=300e-6)],
        "extender-names": [round_of("extender-names", 3.0, wall_per_pod=2000e-6, cpu_per_pod=200e-6)],
    }
    doc = throughput_figures(results)
    assert doc["added_us_per_pod"]["native"] == pytest.approx(70.0)  # 20 us measured, under its CPU
    assert doc["added_us_per_pod"]["wasm"] == pytest.approx(400.0)  # not its 460 us of wall time
    assert doc["plugin_us_per_pod"]["wasm"] == pytest.approx(460.0)
    assert doc["plugin_cpu_us_per_pod"]["wasm"] == pytest.approx(100.0)
    assert doc["ratios"]["added_cost_wasm/native"] == pytest.approx(400 / 70, abs=0.01)
    # Each round against its own baseline, unfloored: the spread a reader can pool.
    assert doc["added_us_per_pod_rounds"]["native"] == [pytest.approx(20.0)]
    assert doc["added_us_per_pod_rounds"]["wasm"] == [pytest.approx(400.0)]


def test_the_extender_node_scaling_benchmark_asks_in_kube_schedulers_order() -> None:
    # Each pod's filter, then its prioritize: a prioritize out of its pod's cycle is refused.
    from wasm_scheduler.adapters.benchmarks import extender_nodes

    figures = extender_nodes.measure([20, 40], repeats=2)
    assert sorted({(f.nodes, f.verb, f.body) for f in figures}) == [
        (n, verb, body) for n in (20, 40) for verb in ("filter", "prioritize") for body in ("names", "objects")]
    assert all(f.seconds > 0 for f in figures)
    assert "x smallest" in extender_nodes.render(figures)
