"""The extender's metrics (`adapters/extender/metrics.py`) and probes (`adapters/extender/probes.py`).

The metrics are scraped as Prometheus would (the text format, parsed back with
`prometheus_client`'s parser) after real guest calls through the service: traps,
discarded instances, binds and plugin durations come out as what happened. Readiness is
checked on stand-ins for the plugins and the watch, and `ClusterWatch.failing_for`, which
it reads, on the scripted API of `test_cluster_watch`.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import prometheus_client
import pykka
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import EXAMPLES, GUESTS
from tests.test_cluster_watch import FAST, FakeListWatch, eventually
from wasm_scheduler.actors.supervisor import PoolCounts
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.cluster_watch import NODES, ClusterWatch
from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender
from wasm_scheduler.adapters.extender.metrics import (
    KUBE_PLUGIN_BUCKETS,
    PLUGIN_DURATION,
    ExtenderMetrics,
    PluginCallMetrics,
    outcome_of,
    refusal_of,
    status_label,
)
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.probes import Readiness, healthz
from wasm_scheduler.adapters.extender.service import ExtenderService, WeightedPlugin
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code, PreFilterResult, ScoreResult, Status
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PoolConfig

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(metrics: ExtenderMetrics) -> Samples:
    status, body, content_type = metrics.exposition()
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


# --- the pieces ---------------------------------------------------------------------------------


def test_the_plugin_histogram_has_kube_schedulers_name_labels_and_buckets() -> None:
    assert len(KUBE_PLUGIN_BUCKETS) == 20
    assert KUBE_PLUGIN_BUCKETS[0] == pytest.approx(0.00001)
    pairs = zip(KUBE_PLUGIN_BUCKETS[:-1], KUBE_PLUGIN_BUCKETS[1:], strict=True)
    assert all(b / a == pytest.approx(1.5) for a, b in pairs)
    assert KUBE_PLUGIN_BUCKETS[-1] == pytest.approx(0.0221683, rel=1e-5)  # kube: "the last bucket [~22ms, Inf)"
    calls = PluginCallMetrics()
    calls.record("AddPod", "P", 0.001, Status())
    calls.record("NormalizeScore", "P", 0.002, Status(Code.ERROR))
    calls.record("Filter", "P", 0.003, {"n1": Status(), "n2": Status(Code.UNSCHEDULABLE)})
    [family] = calls.histogram.collect()
    assert family.name == PLUGIN_DURATION
    counts = {(s.labels["extension_point"], s.labels["status"]): s.value for s in family.samples
              if s.name == PLUGIN_DURATION + "_count"}
    assert counts == {("PreFilterExtensionAddPod", "Success"): 1, ("ScoreExtensionNormalize", "Error"): 1,
                      ("Filter", "Unschedulable"): 1}
    les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")][:21]
    assert les[0] == "1e-05" and les[-1] == "+Inf"
    assert calls.totals()["P"]["Filter"] == {"count": 1, "sum_seconds": 0.003}


def test_status_label_is_kube_schedulers_code_name_and_the_gravest_of_a_filter() -> None:
    assert status_label(None) == "Success"
    assert status_label(Status(Code.SKIP)) == "Skip"
    assert status_label(PreFilterResult(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE))) == "UnschedulableAndUnresolvable"
    assert status_label(ScoreResult(Status(Code.ERROR))) == "Error"
    assert status_label({"a": Status(), "b": Status()}) == "Success"
    assert status_label({"a": Status(Code.UNSCHEDULABLE), "b": Status(Code.ERROR)}) == "Error"
    assert status_label({}) == "Success"


def test_outcomes_and_refusals_follow_the_http_status() -> None:
    assert [outcome_of(s) for s in (200, 400, 401, 404, 413, 500, 503)] == [
        "success", "refused", "refused", "refused", "refused", "error", "error"]
    assert outcome_of(200, failed=True) == "error"
    assert {s: refusal_of(s) for s in (200, 400, 401, 404, 411, 413, 500, 503)} == {
        200: "", 400: "bad_input", 401: "auth", 404: "unknown_path", 411: "bad_input", 413: "bad_input", 500: "",
        503: "unavailable"}


def test_requests_are_timed_by_verb_and_outcome_and_refusals_counted_by_reason() -> None:
    metrics = ExtenderMetrics([])
    metrics.request_done("filter", 200, 0.002)
    metrics.request_done("filter", 200, 0.004)
    metrics.request_done("bind", 401, 0.0001)
    metrics.request_done("", 404, 0.0001)
    metrics.request_done("nonsense", 400, 0.0001)
    metrics.request_done("prioritize", 500, 0.3)
    samples = scrape(metrics)
    name = "wasm_scheduler_extender_request_duration_seconds"
    assert value(samples, f"{name}_count", verb="filter", outcome="success") == 2
    assert value(samples, f"{name}_sum", verb="filter", outcome="success") == pytest.approx(0.006)
    assert value(samples, f"{name}_count", verb="bind", outcome="refused") == 1
    assert value(samples, f"{name}_count", verb="unknown", outcome="refused") == 2
    assert value(samples, f"{name}_count", verb="prioritize", outcome="error") == 1
    refused = "wasm_scheduler_extender_refused_requests_total"
    assert {r: value(samples, refused, reason=r) for r in ("auth", "unknown_path", "bad_input", "pool_full",
                                                          "unavailable")} == {
        "auth": 1, "unknown_path": 1, "bad_input": 1, "pool_full": 0, "unavailable": 0}


def test_each_extender_has_its_own_registry_and_the_global_one_is_untouched() -> None:
    first, second = ExtenderMetrics([]), ExtenderMetrics([])  # the same names twice: no clash
    first.request_done("filter", 200, 0.001)
    assert value(scrape(second), "wasm_scheduler_extender_request_duration_seconds_count", verb="filter",
                 outcome="success") == 0
    assert prometheus_client.REGISTRY.get_sample_value(
        "wasm_scheduler_extender_request_duration_seconds_count", {"verb": "filter", "outcome": "success"}) is None


# --- through the service: what happened is what is counted ----------------------------------------


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}


class RecordingBinder:
    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        self.bound.append((f"{namespace}/{name}", node))
        return ""


@pytest.fixture
def served(compiler: GuestCompiler) -> Iterator[tuple[ExtenderService, ExtenderMetrics, RecordingBinder]]:
    pool = PoolConfig(max_instances=2)
    cache = NodeCache(lambda: ([node(n) for n in ("node-1", "node-2", "xnode")], []))
    cache.refresh()
    binder = RecordingBinder()
    with (WasmPlugin.load(PluginConfig("checker", str(GUESTS / "checker.wat"), pool=pool), compiler) as checker,
          ExtenderService([WeightedPlugin(checker)], cache, binder) as service):
        metrics = ExtenderMetrics([checker], service)
        metrics.calls.attach(profile.framework for profile in service.profiles.values())
        yield service, metrics, binder


def filter_args(name: str, nodes: list[str]) -> protocol.ExtenderArgs:
    return protocol.ExtenderArgs.decode({"Pod": pod(name), "NodeNames": nodes})


def bind_args(name: str, node_name: str) -> protocol.BindingArgs:
    return protocol.BindingArgs.decode({"PodName": name, "PodNamespace": "ns", "PodUID": f"uid-{name}",
                                        "Node": node_name})


def test_traps_discards_binds_and_durations_are_what_happened(served: tuple[ExtenderService, ExtenderMetrics,
                                                                             RecordingBinder]) -> None:
    service, metrics, binder = served
    for name in ("a", "b"):
        assert service.filter(filter_args(name, ["node-1", "node-2"]))["NodeNames"] == ["node-1", "node-2"]
        assert service.bind(bind_args(name, "node-1")) == {"Error": ""}
    trapped = service.filter(filter_args("c", ["node-1", "xnode"]))  # checker traps on a node named x...
    assert "trap" in json.dumps(trapped)
    assert service.bind(bind_args("never-filtered", "node-1"))["Error"]
    assert len(binder.bound) == 2

    samples = scrape(metrics)
    assert value(samples, "wasm_scheduler_plugin_traps_total", plugin="checker") == 1
    assert value(samples, "wasm_scheduler_plugin_instances_discarded_total", plugin="checker") == 1
    assert value(samples, "wasm_scheduler_extender_bindings_total", outcome="created") == 2
    assert value(samples, "wasm_scheduler_extender_bindings_total", outcome="refused") == 1
    assert value(samples, "wasm_scheduler_extender_bindings_total", outcome="failed") == 0
    counts = metrics.plugins[0].counts()
    assert value(samples, "wasm_scheduler_plugin_instances_live", plugin="checker") == counts.live >= 1
    assert value(samples, "wasm_scheduler_plugin_instances_idle", plugin="checker") == counts.idle
    assert value(samples, "wasm_scheduler_plugin_instances_binding", plugin="checker") == 0
    duration = f"{PLUGIN_DURATION}_count"
    assert value(samples, duration, plugin="checker", extension_point="PreFilter", status="Success") == 3
    assert value(samples, duration, plugin="checker", extension_point="Filter", status="Success") == 2
    assert value(samples, duration, plugin="checker", extension_point="Filter", status="Error") == 1
    assert value(samples, duration, plugin="checker", extension_point="PreBind", status="Success") == 2
    assert value(samples, duration, plugin="checker", extension_point="Bind", status="Skip") == 2  # the API binds
    assert value(samples, f"{PLUGIN_DURATION}_sum", plugin="checker", extension_point="Filter",
                 status="Success") > 0
    # No watch, no watch metrics.
    assert not any(name.startswith("wasm_scheduler_extender_watch") for name, _labels in samples)


def test_held_instances_and_a_full_pool_are_read_from_the_supervisor(
        served: tuple[ExtenderService, ExtenderMetrics, RecordingBinder]) -> None:
    service, metrics, _binder = served
    for name in ("a", "b"):  # held for their binds: the pool's two instances
        service.filter(filter_args(name, ["node-1"]))
    assert service.filter(filter_args("c", ["node-1"]))["Error"]  # pool.maxInstances reached
    samples = scrape(metrics)
    assert value(samples, "wasm_scheduler_plugin_instances_binding", plugin="checker") == 2
    assert value(samples, "wasm_scheduler_plugin_instances_live", plugin="checker") == 2
    assert value(samples, "wasm_scheduler_extender_refused_requests_total", reason="pool_full") == 1


def test_a_stopped_plugin_is_left_out_of_a_scrape(compiler: GuestCompiler) -> None:
    plugin = WasmPlugin.load(PluginConfig("checker", str(GUESTS / "checker.wat")), compiler)
    metrics = ExtenderMetrics([plugin])
    plugin.close()
    assert value(scrape(metrics), "wasm_scheduler_plugin_instances_live", plugin="checker") == 0


# --- the watch: age, restarts, failing time ----------------------------------------------------------


@pytest.fixture
def api() -> FakeListWatch:
    return FakeListWatch()


def test_the_watch_metrics_and_failing_for(api: FakeListWatch) -> None:
    api.list_errors["nodes"] = [ConnectionRefusedError("refused"), ConnectionRefusedError("refused")]
    watch = ClusterWatch(api, backoff=FAST)
    try:
        metrics = ExtenderMetrics([], watch=watch)
        eventually(lambda: watch.restarts >= 1, what="a failed list")
        samples = scrape(metrics)
        assert math.isnan(value(samples, "wasm_scheduler_extender_node_view_age_seconds"))
        assert value(samples, "wasm_scheduler_extender_watch_restarts_total") >= 1
        eventually(lambda: watch.synced, what="the first sync")
        assert watch.failing_for() == 0.0
        samples = scrape(metrics)
        assert 0 <= value(samples, "wasm_scheduler_extender_node_view_age_seconds") < 5
        assert value(samples, "wasm_scheduler_extender_watch_failing_seconds") == 0
        assert value(samples, "wasm_scheduler_extender_watch_restarts_total") == 2

        # A watch cut, then refused: failing until the API server answers again.
        api.watch_errors["nodes"] = [ConnectionRefusedError("down")] * 1000
        api.fail(NODES, ConnectionResetError("cut"))
        eventually(lambda: watch.failing_for() > 0.05, what="the watch failing")
        assert value(scrape(metrics), "wasm_scheduler_extender_watch_failing_seconds") > 0.05
        api.watch_errors["nodes"] = []
        eventually(lambda: watch.failing_for() == 0.0, what="the watch answered again")
    finally:
        watch.close()


# --- readiness ----------------------------------------------------------------------------------------


@dataclass
class StandInPlugin:
    name: str
    live: int = 1
    min_idle: int = 1
    max_instances: int = 256
    stopped: bool = False
    config: Any = field(init=False)

    def __post_init__(self) -> None:
        self.config = PluginConfig(self.name, "x.wasm", pool=PoolConfig(min_idle=self.min_idle,
                                                                         max_instances=self.max_instances))

    def counts(self) -> PoolCounts:
        if self.stopped:
            raise pykka.ActorDeadError("stopped")
        return PoolCounts(self.live, 0, 0, 0, self.live, 0, 0)


@dataclass
class StandInWatch:
    synced: bool = True
    failing: float = 0.0
    closed: bool = False
    server: str = "https://api:6443"
    last_error: str = ""

    def failing_for(self) -> float:
        return self.failing


def readiness(*plugins: StandInPlugin, watch: StandInWatch | None = None, max_age: float = 10.0) -> Readiness:
    return Readiness(plugins, watch, max_age)  # type: ignore[arg-type]


def test_ready_once_every_pool_holds_min_idle_and_the_view_is_synced() -> None:
    assert readiness(StandInPlugin("a"), watch=StandInWatch()).readyz() == (
        200, b'{"status":"ready"}', "application/json")
    assert readiness(StandInPlugin("a", live=0, min_idle=0)).problems() == []
    assert readiness(StandInPlugin("a", live=1, min_idle=3, max_instances=1)).problems() == []  # capped


def test_not_ready_says_why() -> None:
    status, body, _type = readiness(StandInPlugin("a", live=1, min_idle=2), StandInPlugin("b", stopped=True),
                                    watch=StandInWatch(synced=False, last_error="nodes: refused")).readyz()
    assert status == 503
    assert json.loads(body) == {"status": "not ready", "reasons": [
        "wasm plugin a: 1 of pool.minIdle 2 instances started", "wasm plugin b: stopped",
        "node view: not synced from https://api:6443 yet (nodes: refused)"]}
    assert readiness(watch=StandInWatch(closed=True)).problems() == ["node view: the watch is stopped"]


def test_a_failing_watch_fails_readiness_only_beyond_the_threshold() -> None:
    watch = StandInWatch(failing=9.9, last_error="nodes: refused")
    probe = readiness(StandInPlugin("a"), watch=watch, max_age=10.0)
    assert probe.readyz()[0] == 200
    watch.failing = 10.5
    status, body, _type = probe.readyz()
    assert status == 503 and "has failed for 10 s (--ready-max-view-age 10): nodes: refused" in body.decode()
    watch.failing = 0.0
    assert probe.readyz()[0] == 200


def test_readiness_changes_are_logged_once(wasm_logs: list[dict[str, Any]]) -> None:
    watch = StandInWatch(failing=20)
    probe = readiness(StandInPlugin("a"), watch=watch)
    for _ in range(3):
        probe.readyz()
    watch.failing = 0
    probe.readyz()
    probe.readyz()
    events = [e["event"] for e in wasm_logs if e["event"].startswith("extender.")]
    assert events == ["extender.not_ready", "extender.ready"]


def test_healthz_always_answers() -> None:
    assert healthz() == (200, b'{"status":"ok"}', "application/json")


# --- the command: routes, options, simulate's summary ----------------------------------------------------


def get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read(), answer.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


@pytest.fixture
def running(tmp_path: Path, compiler: GuestCompiler) -> Iterator[Callable[..., RunningExtender]]:
    made: list[RunningExtender] = []

    def start(**options: Any) -> RunningExtender:
        extender = RunningExtender(ExtenderOptions(EXAMPLES / "scheduler-config.yaml", "127.0.0.1:0",
                                                   EXAMPLES / "cluster.yaml", expect_bind=False, **options), compiler)
        made.append(extender)
        extender.server.start_background()
        return extender

    yield start
    for extender in made:
        extender.close()


def test_the_running_extender_serves_metrics_and_probes(running: Callable[..., RunningExtender]) -> None:
    extender = running()
    url = extender.server.url
    assert get(f"{url}/healthz")[0] == 200
    assert get(f"{url}/readyz")[:2] == (200, b'{"status":"ready"}')
    args = {"Pod": pod("web-3"), "NodeNames": ["node-1", "node-3"]}
    request = urllib.request.Request(f"{url}/filter", data=json.dumps(args).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200
    status, body, content_type = get(f"{url}/metrics")
    assert status == 200 and content_type.startswith("text/plain")
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(body.decode()) for s in family.samples}
    assert value(samples, "wasm_scheduler_extender_request_duration_seconds_count", verb="filter",
                 outcome="success") == 1
    assert value(samples, f"{PLUGIN_DURATION}_count", plugin="NodeNumber", extension_point="PreFilter",
                 status="Success") == 1
    assert value(samples, "wasm_scheduler_plugin_instances_live", plugin="NodeNumber") >= 1


def test_no_metrics_serves_no_metrics_and_times_nothing(running: Callable[..., RunningExtender]) -> None:
    extender = running(metrics=False)
    assert extender.metrics is None
    assert all(profile.framework.recorder is None for profile in extender.profiles)
    assert get(f"{extender.server.url}/metrics")[0] == 404
    assert get(f"{extender.server.url}/readyz")[0] == 200


def test_ready_max_view_age_is_checked(tmp_path: Path) -> None:
    assert main(["extender", "--config", str(EXAMPLES / "scheduler-config.yaml"), "--no-watch",
                 "--ready-max-view-age", "-1"]) == 2


def test_simulate_json_summary_has_each_wasm_plugins_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--output", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    metrics = summary["metrics"]
    assert set(metrics) == {"NodeNumber"}  # wasm plugins only
    node_number = metrics["NodeNumber"]
    assert node_number["traps"] == 0 and node_number["instances_discarded"] == 0
    assert node_number["calls"]["PreFilter"]["count"] >= summary["scheduled"]
    assert node_number["calls"]["Score"]["sum_seconds"] > 0


def test_simulate_table_measures_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate"]) == 0
    assert "metrics" not in capsys.readouterr().out


def test_a_scrape_is_cheap_enough_to_repeat(served: tuple[ExtenderService, ExtenderMetrics, RecordingBinder]) -> None:
    _service, metrics, _binder = served
    started = time.perf_counter()
    for _ in range(20):
        metrics.exposition()
    assert time.perf_counter() - started < 5


def test_bench_compares_the_extender_with_metrics_on_and_off(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--nodes", "20", "--init-pods", "20", "--pods", "30", "--rounds", "1", "--compare-metrics",
                 "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["workload"]["extender_metrics"] == "on and off"
    for variant in ("extender", "extender-names", "extender-no-metrics", "extender-names-no-metrics"):
        assert doc["throughput"][variant] > 0, variant
        assert doc["checks"]["all_scheduled"][variant], variant
    assert doc["checks"]["placements_identical"]["extender-no-metrics/native"]
    assert "extender-names-no-metrics" in doc["added_us_per_pod"]
