"""The extender as kube-scheduler really calls it: scheduleOne played by `KubeSchedulerDriver`.

The extender serves two wasm plugins over real HTTP on loopback: `parity` (filter passes
even node digits, fails odd ones, marks 9 unresolvable; score is digit * 10; bind
skips) and `checker` (traps, and so discards its instance, if any call of a pod's
cycle reaches an instance that did not run that pod's prefilter). Bindings the guests
leave to the API go to a recording binder. The guest's calls are observed through the
`call.finished` debug log events, which name the instance and the extension point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import LogCapture

from tests.conftest import GUESTS
from tests.kube_scheduler_driver import ExtenderConfig, KubeSchedulerDriver
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.server import ExtenderServer
from wasm_scheduler.adapters.extender.service import ExtenderService, WeightedPlugin
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

NS = "ns"
#: Generous for a loaded 2-core machine; kube-scheduler's default is 5 s.
HTTP_TIMEOUT_S = 30.0
BINDING_CYCLE = ["reserve", "permit", "prebind", "bind", "postbind"]


def node(name: str, pods: int = 110) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"pods": str(pods)}}}


def pod(name: str, *, priority: int = 0, nominated: str = "", gpu: bool = False,
        node_name: str = "") -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if gpu:
        container["resources"] = {"limits": {"example.com/gpu": "1"}}
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
                           "spec": {"containers": [container], "priority": priority}, "status": {}}
    if nominated:
        obj["status"]["nominatedNodeName"] = nominated
    if node_name:
        obj["spec"]["nodeName"] = node_name
    return obj


@dataclass
class RecordingBinder:
    """The API server's binding subresource: records every Binding and succeeds."""

    calls: list[tuple[str, str, str, str]] = field(default_factory=list)

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        self.calls.append((namespace, name, uid, node))
        return ""


@dataclass
class Extender:
    server: ExtenderServer
    service: ExtenderService
    plugins: list[WasmPlugin]
    binder: RecordingBinder
    stopped: bool = False

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def checker_counts(self) -> Any:
        return self.plugins[1].counts()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.server.stop()
        self.service.close()
        for plugin in self.plugins:
            plugin.close()


@pytest.fixture
def logs() -> LogCapture:
    """Every log event from now on, debug included (set before any actor binds its logger)."""
    capture = LogCapture()
    structlog.configure(processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    return capture


@pytest.fixture
def start_extender(compiler: GuestCompiler, logs: LogCapture) -> Iterator[Callable[..., Extender]]:
    started: list[Extender] = []

    def start(nodes: list[dict[str, Any]], *, running: tuple[dict[str, Any], ...] = (), port: int = 0,
              checker_path: Path = GUESTS / "checker.wat") -> Extender:
        parity = WasmPlugin.load(PluginConfig("parity", str(GUESTS / "parity.wat")), compiler)
        checker = WasmPlugin.load(PluginConfig("checker", str(checker_path)), compiler)
        cache = NodeCache(lambda: (nodes, list(running)))
        cache.refresh()
        binder = RecordingBinder()
        service = ExtenderService([WeightedPlugin(parity, 2), WeightedPlugin(checker, 1)], cache, binder)
        server = ExtenderServer(("127.0.0.1", port), service).start_background()
        started.append(Extender(server, service, [parity, checker], binder))
        return started[-1]

    yield start
    for ext in started:
        ext.stop()


def config(ext: Extender, **options: Any) -> ExtenderConfig:
    return ExtenderConfig(ext.url, http_timeout_s=HTTP_TIMEOUT_S, **options)


def checker_calls(logs: LogCapture, uid: str) -> list[tuple[str, str]]:
    """(instance, extension point) of every checker call for the pod, in order."""
    return [(e["instance"], e["extension_point"]) for e in logs.entries
            if e.get("event") == "call.finished" and e.get("plugin") == "checker" and e.get("pod_uid") == uid]


def assert_clean(ext: Extender) -> None:
    """No call reached another pod's instance, and nothing is left held."""
    counts = ext.checker_counts()
    assert counts.discarded == 0, "a call of a pod's cycle reached another pod's instance"
    assert counts.binding == 0 and counts.balanced, counts
    assert ext.service.awaiting_bind() == 0


# --- (a) many pods, binds interleaved with the next pods' filters ----------------------------------


@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["nodes", "node-names"])
def test_many_pods_with_interleaved_binds_all_bind_on_their_own_instances(start_extender, node_cache_capable) -> None:
    nodes = [node(f"node-{i}", pods=6) for i in range(10)]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=node_cache_capable)],
                                 hold_binds_until_next_filter=True)
    pods = [pod(f"p{i:02d}") for i in range(24)]
    results = driver.run(pods)

    assert all(r.bound_by == ext.url and r.attempts == 1 and not r.failures for r in results.values()), results
    # The extender's scores fill node-8, then 6, 4, 2 (the in-tree filter sees assumed pods).
    placed = [results[f"{NS}/{p['metadata']['name']}"].node for p in pods]
    assert placed == ["node-8"] * 6 + ["node-6"] * 6 + ["node-4"] * 6 + ["node-2"] * 6
    seq = {(c.pod, c.verb): c.seq for c in driver.calls}
    for earlier, later in zip(pods, pods[1:], strict=False):
        assert seq[(f"{NS}/{later['metadata']['name']}", "filter")] < seq[(f"{NS}/{earlier['metadata']['name']}",
                                                                           "bind")]
    assert sorted(ext.binder.calls) == sorted((NS, p["metadata"]["name"], p["metadata"]["uid"], n)
                                              for p, n in zip(pods, placed, strict=True))
    assert_clean(ext)


# --- (b) one feasible node: no prioritize, and the bind runs on the pod's own instance ----------------


def test_a_single_feasible_node_skips_prioritize_and_binds_on_the_pods_own_instance(start_extender, logs) -> None:
    nodes = [node("node-1"), node("node-2"), node("node-3")]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=True)], hold_binds_until_next_filter=True)
    results = driver.run([pod("a"), pod("b")])

    # b's filter comes before a's bind; once released, the two binds run concurrently.
    assert [(c.verb, c.pod) for c in driver.calls[:2]] == [("filter", f"{NS}/a"), ("filter", f"{NS}/b")]
    assert sorted((c.verb, c.pod) for c in driver.calls[2:]) == [("bind", f"{NS}/a"), ("bind", f"{NS}/b")]
    for name in ("a", "b"):
        assert results[f"{NS}/{name}"].node == "node-2" and results[f"{NS}/{name}"].bound_by == ext.url
        bind = driver.calls_of(name)[-1]
        assert (bind.verb, bind.status, bind.answer, bind.error) == ("bind", 200, {"Error": ""}, "")
        calls = checker_calls(logs, f"uid-{name}")
        assert [point for _, point in calls] == ["prefilter", "filter", *BINDING_CYCLE], calls
        assert len({instance for instance, _ in calls}) == 1, f"{name}'s cycle spread over instances: {calls}"
    assert sorted(ext.binder.calls) == [(NS, "a", "uid-a", "node-2"), (NS, "b", "uid-b", "node-2")]
    assert_clean(ext)


# --- (c) a bind for a pod this extender never saw (it restarted) ------------------------------------


def test_a_bind_after_an_extender_restart_is_an_error_and_the_pod_is_retried(start_extender) -> None:
    nodes = [node("node-0"), node("node-2")]
    first = start_extender(nodes)
    restarted: list[Extender] = []

    def restart_before_the_first_bind(_pod: Mapping[str, Any], _node: str, attempt: int) -> None:
        if attempt == 1:
            port = first.port
            first.stop()
            restarted.append(start_extender(nodes, port=port))  # same URL, no memory of the pod

    driver = KubeSchedulerDriver(nodes, [config(first)], before_bind=restart_before_the_first_bind)
    results = driver.run([pod("a")])

    assert driver.verbs_of("a") == ["filter", "prioritize", "bind", "filter", "prioritize", "bind"]
    refused = driver.calls_of("a")[2]
    assert refused.status == 200 and refused.error and refused.answer["Error"] == refused.error
    retried = driver.calls_of("a")[5]
    assert retried.attempt == 2 and retried.error == ""
    assert first.binder.calls == []
    assert restarted[0].binder.calls == [(NS, "a", "uid-a", "node-2")], "bound behind the guests' back"
    assert results[f"{NS}/a"].node == "node-2" and results[f"{NS}/a"].attempts == 2
    assert_clean(restarted[0])


# --- (d) a nominated node first, then the full evaluation in the same cycle -------------------------


def test_a_failing_nominated_node_is_followed_by_the_full_evaluation_in_the_same_cycle(start_extender) -> None:
    nodes = [node(f"node-{i}") for i in range(5)]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=True)])
    results = driver.run([pod("a", nominated="node-1")])  # node-1 is odd: the extender fails it

    calls = driver.calls_of("a")
    assert [(c.verb, c.nodes, c.attempt) for c in calls] == [
        ("filter", ("node-1",), 1),
        ("filter", ("node-0", "node-1", "node-2", "node-3", "node-4"), 1),
        ("prioritize", ("node-0", "node-2", "node-4"), 1),
        ("bind", ("node-4",), 1),
    ]
    assert calls[0].answer["NodeNames"] == [] and "node-1" in calls[0].answer["FailedNodes"]
    assert results[f"{NS}/a"].node == "node-4" and results[f"{NS}/a"].attempts == 1
    assert ext.binder.calls == [(NS, "a", "uid-a", "node-4")]
    assert_clean(ext)


def test_a_passing_nominated_node_is_the_only_feasible_node(start_extender) -> None:
    nodes = [node(f"node-{i}") for i in range(5)]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=True)])
    results = driver.run([pod("a", nominated="node-2")])
    assert [(c.verb, c.nodes) for c in driver.calls] == [("filter", ("node-2",)), ("bind", ("node-2",))]
    assert results[f"{NS}/a"].node == "node-2"
    assert_clean(ext)


def test_a_nominated_node_the_in_tree_filter_rejects_never_reaches_the_extender(start_extender) -> None:
    nodes = [node("node-0"), node("node-2", pods=1), node("node-4")]
    running = (pod("resident", node_name="node-2"),)
    ext = start_extender(nodes, running=running)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=True)], running=running)
    results = driver.run([pod("a", nominated="node-2")])
    assert [(c.verb, c.nodes) for c in driver.calls] == [
        ("filter", ("node-0", "node-4")), ("prioritize", ("node-0", "node-4")), ("bind", ("node-4",))]
    assert results[f"{NS}/a"].node == "node-4"
    assert_clean(ext)


# --- (e) prioritize errors are ignored ----------------------------------------------------------------


def test_a_prioritize_error_refuses_the_bind_so_the_pod_is_retried(start_extender, tmp_path: Path, logs) -> None:
    """kube-scheduler ignores a failed prioritize and binds without the extender's scores
    (seen through the real scheduler, docs/extender.md); in-process a Score error fails the
    cycle. The extender refuses that bind, so the pod is retried, never bound unscored."""
    score_line = '(func (export "score") (result i64) (call $check) (call $fault_on_x_node) (i64.const 0x100000000))'
    checker = (GUESTS / "checker.wat").read_text()
    assert score_line in checker
    failing = tmp_path / "checker-score-error.wat"  # Score answers Error (code 1) without trapping
    failing.write_text(checker.replace(score_line, '(func (export "score") (result i64) (call $check) (i64.const 1))'))
    nodes = [node("node-0"), node("node-2"), node("node-4")]
    ext = start_extender(nodes, checker_path=failing)
    driver = KubeSchedulerDriver(nodes, [config(ext)])
    results = driver.run([pod("a")])

    filtered, prioritized, bind = driver.calls_of("a")[:3]
    assert filtered.error == "" and prioritized.verb == "prioritize"
    assert prioritized.status == 500 and prioritized.error
    # The driver, as kube-scheduler, binds anyway: the extender refuses.
    assert bind.verb == "bind" and "prioritize of pod" in bind.error
    assert results[f"{NS}/a"].node == "" and results[f"{NS}/a"].attempts == driver.max_attempts
    assert ext.binder.calls == []
    assert [p for _, p in checker_calls(logs, "uid-a")][:4] == ["prefilter", "filter", "prescore", "score"]
    assert_clean(ext)


def test_without_a_prioritize_verb_the_bind_follows_the_filter(start_extender) -> None:
    nodes = [node("node-0"), node("node-2"), node("node-4")]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, prioritize_verb="")])
    results = driver.run([pod("a"), pod("b")])
    assert driver.verbs_of("a") == driver.verbs_of("b") == ["filter", "bind"]
    assert results[f"{NS}/a"].node == results[f"{NS}/b"].node == "node-0"
    assert_clean(ext)


def test_a_bind_verb_without_a_filter_verb_is_named_as_the_mistake(start_extender, logs) -> None:
    # One feasible node and no filter verb: kube-scheduler skips prioritize, so the pod's bind is
    # the first call the extender sees and no cycle can run. Every refusal says why; the log once.
    nodes = [node("node-2")]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, filter_verb="")])
    results = driver.run([pod("a")])
    assert results[f"{NS}/a"].node == "" and set(driver.verbs_of("a")) == {"bind"}
    answers = [c.answer["Error"] for c in driver.calls if c.verb == "bind"]
    assert answers and all("needs a filterVerb" in a for a in answers)
    assert [e["event"] for e in logs.entries].count("extender.bind_without_filter") == 1
    assert ext.binder.calls == []


# --- (f) a pod the extender is not interested in ------------------------------------------------------


def test_a_pod_without_managed_resources_never_reaches_the_extender(start_extender, logs) -> None:
    nodes = [node("node-0"), node("node-2")]
    ext = start_extender(nodes)
    driver = KubeSchedulerDriver(nodes, [config(ext, managed_resources=frozenset({"example.com/gpu"}))],
                                 hold_binds_until_next_filter=True)
    results = driver.run([pod("plain"), pod("gpu", gpu=True), pod("plain-2")])

    assert driver.calls_of("plain") == [] and driver.calls_of("plain-2") == []
    assert driver.verbs_of("gpu") == ["filter", "prioritize", "bind"]
    assert results[f"{NS}/plain"].bound_by == results[f"{NS}/plain-2"].bound_by == "DefaultBinder"
    assert results[f"{NS}/gpu"].bound_by == ext.url and results[f"{NS}/gpu"].node == "node-2"
    assert sorted(driver.default_bindings) == [(f"{NS}/plain", "node-0"), (f"{NS}/plain-2", "node-0")]
    assert ext.binder.calls == [(NS, "gpu", "uid-gpu", "node-2")]
    assert checker_calls(logs, "uid-plain") == [] and checker_calls(logs, "uid-plain-2") == []
    assert_clean(ext)


# --- (g) a bind whose namespace/name does not match the UID the extender saw --------------------------


@pytest.mark.parametrize("forged", [
    {"name": "someone-else"},
    {"namespace": "other"},
    {"uid": "uid-recreated"},  # the same name under a new UID: a pod deleted and created again
], ids=["name", "namespace", "uid"])
def test_a_bind_not_matching_the_pod_the_extender_saw_is_an_error(start_extender, forged) -> None:
    nodes = [node("node-0"), node("node-2")]
    ext = start_extender(nodes)
    cfg = config(ext)
    driver = KubeSchedulerDriver(nodes, [cfg])
    forged_calls = []

    def forge_first(p: Mapping[str, Any], node_name: str, attempt: int) -> None:
        meta = p["metadata"]
        forged_calls.append(driver.send_bind(cfg, forged.get("name", meta["name"]),
                                             forged.get("namespace", meta["namespace"]),
                                             forged.get("uid", meta["uid"]), node_name))

    driver.before_bind = forge_first
    results = driver.run([pod("a")])

    (refused,) = forged_calls
    assert refused.status == 200 and refused.error and refused.answer["Error"] == refused.error
    # The real bind, after the forged one, still finds the pod held and binds it.
    assert results[f"{NS}/a"].node == "node-2" and results[f"{NS}/a"].attempts == 1
    assert ext.binder.calls == [(NS, "a", "uid-a", "node-2")]
    assert_clean(ext)


# --- preemption: after a failed filter, then the nominated node first ---------------------------------


@pytest.mark.parametrize("node_cache_capable", [False, True], ids=["victims", "meta-victims"])
def test_preemption_nominates_a_node_and_the_next_attempt_tries_it_first(start_extender, node_cache_capable) -> None:
    nodes = [node("node-0", pods=1), node("node-2", pods=1)]
    running = (pod("low-0", priority=1, node_name="node-0"), pod("low-2", priority=1, node_name="node-2"))
    ext = start_extender(nodes, running=running)
    driver = KubeSchedulerDriver(nodes, [config(ext, node_cache_capable=node_cache_capable, preempt_verb="preempt")],
                                 running=running, preemption=True)
    results = driver.run([pod("high", priority=100)])

    calls = driver.calls_of("high")
    assert [(c.verb, c.nodes, c.attempt) for c in calls] == [
        ("preempt", ("node-0", "node-2"), 1),  # no node passed the in-tree filter: no extender filter
        ("filter", ("node-0",), 2),
        ("bind", ("node-0",), 2),
    ]
    victims = calls[0].answer["NodeNameToMetaVictims"]
    assert victims == {"node-0": {"Pods": [{"UID": "uid-low-0"}], "NumPDBViolations": 0},
                       "node-2": {"Pods": [{"UID": "uid-low-2"}], "NumPDBViolations": 0}}
    assert driver.preempted == [(f"{NS}/low-0", "node-0", f"{NS}/high")]
    assert results[f"{NS}/high"].node == "node-0" and results[f"{NS}/high"].nominated_node == "node-0"
    assert ext.binder.calls == [(NS, "high", "uid-high", "node-0")]
    assert_clean(ext)
