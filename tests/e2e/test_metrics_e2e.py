"""The extender's /metrics and /readyz, after a real kube-scheduler ran pods through it.

The numbers scraped are checked against what happened: the pods the API server shows
bound, the Bindings the extender's log says it created, the traps its log recorded (the
checker guest traps in Filter on a node whose name starts with 'x'). Readiness is
checked across a real outage: kube-apiserver stopped for a while, then started again.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.cluster import NODENUMBER_WASM, ExtenderProcess, Harness, node_object, pod_object, wasm_plugin_config
from tests.e2e.process import wait_for
from tests.e2e.test_extender_e2e import start

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def scrape(extender: ExtenderProcess) -> Samples:
    status, body = get(f"{extender.url}/metrics")
    assert status == 200, body[:500]
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def events(extender: ExtenderProcess, event: str, **fields: Any) -> list[dict[str, Any]]:
    return [r for r in extender.log_records()
            if r.get("event") == event and all(r.get(k) == v for k, v in fields.items())]


def settled(extender: ExtenderProcess, event: str, quiet_s: float = 4.0, timeout_s: float = 60.0) -> int:
    """How many `event` lines the log has once none came for `quiet_s`."""
    deadline = time.monotonic() + timeout_s
    count, since = len(events(extender, event)), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = len(events(extender, event))
        if now != count:
            count, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return count
    raise AssertionError(f"{event} lines kept coming for {timeout_s} s")


def test_metrics_count_what_kube_scheduler_made_the_extender_do(harness: Harness) -> None:
    """Pods bound == bindings created; traps in the log == the trap counter; the request and
    guest call histograms saw every verb; nothing is held for binding at the end."""
    cluster = harness.cluster
    cluster.create_nodes([*(node_object(f"node-{i}", labels={"pool": "main"}) for i in range(5)),
                          node_object("xnode-7", labels={"pool": "x"})])
    extender, _entry = start(harness, ["--ready-max-view-age", "30"])
    wait_for(lambda: get(f"{extender.url}/readyz")[0] == 200 or None, 60, "/readyz 200")
    names = cluster.create_pods(pod_object(f"metrics-{i}", extra_spec={"nodeSelector": {"pool": "main"}})
                                for i in range(30))
    # Pods that can only go to the 'x' node: the checker traps on each of their filters.
    trapping = cluster.create_pods(pod_object(f"trap-{i}", extra_spec={"nodeSelector": {"pool": "x"}})
                                   for i in range(2))
    bound = cluster.wait_bound(names, timeout_s=180)
    wait_for(lambda: len(events(extender, "call.trapped")) >= 2 or None, 60, "the checker's traps")
    for name in trapping:  # no retry of theirs traps again once they are gone
        cluster.core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    wait_for(lambda: not any(cluster.pod(n) for n in trapping) or None, 60, "the trapping pods gone")
    traps = settled(extender, "call.trapped")
    samples = scrape(extender)

    # Bindings: what the API server shows bound is what the extender counted as created.
    created = events(extender, "bind.api_created")
    assert len(bound) == len(names) == len(created)
    assert value(samples, "wasm_scheduler_extender_bindings_total", outcome="created") == len(bound)
    assert value(samples, "wasm_scheduler_extender_bindings_total", outcome="failed") == 0
    # A bind answers 200 whatever its outcome (an Error field says a failure): every bind is a success here.
    binds = sum(value(samples, "wasm_scheduler_extender_bindings_total", outcome=outcome)
                for outcome in ("created", "failed", "refused"))
    assert value(samples, "wasm_scheduler_extender_request_duration_seconds_count", verb="bind",
                 outcome="success") == binds == len(events(extender, "extender.request", verb="bind"))

    # Traps: the log's call.trapped lines, all the checker's, all in Filter.
    trapped = events(extender, "call.trapped")
    assert traps == len(trapped) >= 2
    assert {(r.get("plugin"), r.get("extension_point")) for r in trapped} == {("Checker", "filter")}
    assert value(samples, "wasm_scheduler_plugin_traps_total", plugin="Checker") == traps
    assert value(samples, "wasm_scheduler_plugin_traps_total", plugin="NodeNumber") == 0
    assert value(samples, "wasm_scheduler_plugin_instances_discarded_total", plugin="Checker") == \
        len(events(extender, "instance.discarded", plugin="Checker")) >= traps
    duration = "scheduler_plugin_execution_duration_seconds_count"
    assert value(samples, duration, plugin="Checker", extension_point="Filter", status="Error") == traps
    assert value(samples, duration, plugin="Checker", extension_point="PreBind", status="Success") == len(bound)
    assert value(samples, duration, plugin="NodeNumber", extension_point="PreFilter", status="Success") >= \
        len(names) + traps

    # Every filter request was timed, under the verb and outcome the log's lines give.
    requests = events(extender, "extender.request", verb="filter")
    timed = sum(value(samples, "wasm_scheduler_extender_request_duration_seconds_count", verb="filter",
                      outcome=outcome) for outcome in ("success", "error", "refused"))
    assert timed == len(requests) >= len(names) + traps

    # Nothing held once every pod is bound; the view is watched and fresh.
    assert value(samples, "wasm_scheduler_plugin_instances_binding", plugin="Checker") == 0
    assert value(samples, "wasm_scheduler_plugin_instances_live", plugin="Checker") >= 1
    assert value(samples, "wasm_scheduler_extender_refused_requests_total", reason="pool_full") == 0
    assert value(samples, "wasm_scheduler_extender_watch_failing_seconds") == 0
    assert 0 <= value(samples, "wasm_scheduler_extender_node_view_age_seconds") < 120
    assert get(f"{extender.url}/readyz")[0] == 200


def test_readyz_fails_while_the_api_server_is_down_and_recovers(harness: Harness) -> None:
    """kube-apiserver stopped, then down 15 s: with --ready-max-view-age 3, /readyz answers 503
    while it is down (naming the failing watch) and 200 again once the watch is answered."""
    extender = harness.extender(wasm_plugin_config({"NodeNumber": NODENUMBER_WASM}),
                                "--ready-max-view-age", "3").start()
    wait_for(lambda: get(f"{extender.url}/readyz")[0] == 200 or None, 60, "/readyz 200 at start")
    assert get(f"{extender.url}/healthz")[0] == 200
    restarts = value(scrape(extender), "wasm_scheduler_extender_watch_restarts_total")

    # kube-apiserver's graceful stop takes a while (its watches are cut at its end), then it stays
    # down 15 s: the watch fails from the cut on, and /readyz answers 503 three seconds later.
    outage = threading.Thread(target=harness.control_plane.restart_apiserver, kwargs={"down_s": 15.0})
    outage.start()
    try:
        status, body = wait_for(lambda: (answer := get(f"{extender.url}/readyz"))[0] == 503 and answer or None,
                                60, "/readyz 503 while kube-apiserver is down", interval_s=0.25)
        assert outage.is_alive(), "/readyz went 503 only after kube-apiserver was back"
        reasons = json.loads(body)["reasons"]
        assert any("node view: the watch of" in r and "has failed for" in r for r in reasons), reasons
        assert get(f"{extender.url}/healthz")[0] == 200  # alive all along
        samples = scrape(extender)
        assert value(samples, "wasm_scheduler_extender_watch_failing_seconds") > 3
        assert value(samples, "wasm_scheduler_extender_watch_restarts_total") > restarts
    finally:
        outage.join()
    # The watch retries with a backoff of at most 30 s: ready again within that, and then some.
    wait_for(lambda: get(f"{extender.url}/readyz")[0] == 200 or None, 90, "/readyz 200 after the restart",
             interval_s=0.5)
    assert value(scrape(extender), "wasm_scheduler_extender_watch_failing_seconds") == 0
    records = extender.log_records()
    changes = [r["event"] for r in records if r.get("event") in ("extender.ready", "extender.not_ready")]
    # Logged once a change: ready at start, not ready in the outage, ready after it.
    assert changes[0] == changes[-1] == "extender.ready" and "extender.not_ready" in changes, changes
    assert all(a != b for a, b in zip(changes, changes[1:], strict=False)), changes
