"""Prometheus metrics of the extender, and the counts `simulate --output json` reports.

This module owns every metric the extender exposes at ``/metrics`` (Prometheus text
format, through `prometheus_client`): its name, type, labels, buckets, and where its
value comes from. Nothing here is global: each `ExtenderMetrics` owns its
`CollectorRegistry`, and `PluginCallMetrics` can be made on its own. Nothing is counted
on a hot path twice: a guest call's duration comes from the `Framework.recorder` hook,
a request's from the HTTP server once it answered, and everything else (pools, binds,
the node view) is read at scrape time. `docs/reliability.md` ("Metrics") has the table.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pykka
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from wasm_scheduler.framework_api import Code, Status

if TYPE_CHECKING:  # the extender's parts import nothing of this module at run time but the service's type
    from wasm_scheduler.adapters.extender.cluster_watch import ClusterWatch
    from wasm_scheduler.adapters.extender.service import ExtenderService
    from wasm_scheduler.adapters.framework.framework import Framework
    from wasm_scheduler.adapters.wasm_plugin import WasmPlugin

#: kube-scheduler's histogram of plugin durations (pkg/scheduler/metrics): same name, labels and
#: buckets, so its dashboards read the guests' calls.
PLUGIN_DURATION = "scheduler_plugin_execution_duration_seconds"
#: kube-scheduler's `metrics.ExponentialBuckets(0.00001, 1.5, 20)`: 10 us to about 22 ms.
KUBE_PLUGIN_BUCKETS: tuple[float, ...] = tuple(0.00001 * 1.5 ** i for i in range(20))
#: The framework's extension point -> kube-scheduler's label value where they differ.
KUBE_POINT_LABELS: Mapping[str, str] = {
    "AddPod": "PreFilterExtensionAddPod",
    "RemovePod": "PreFilterExtensionRemovePod",
    "NormalizeScore": "ScoreExtensionNormalize",
}

#: The classic text format (0.0.4), which every Prometheus reads: what `generate_latest` writes for
#: names like these (newer clients name it 1.0.0 by default, which older servers do not know).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REQUEST_DURATION = "wasm_scheduler_extender_request_duration_seconds"
#: Half a millisecond (a names-only filter on loopback) to 10 s (above kube-scheduler's 5 s timeout).
REQUEST_BUCKETS: tuple[float, ...] = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                                      5.0, 10.0)
#: A request's `outcome` label: answered without error, answered with one (a 5xx, or a 200 whose
#: `Error` says the verb failed: a failed bind, a guest's error), or refused (a 4xx).
OUTCOMES = ("success", "error", "refused")
#: The verbs a request's `verb` label names; "unknown" for a path that is none of them.
VERBS = ("filter", "prioritize", "bind", "preempt", "unknown")

#: Why a request was refused (`wasm_scheduler_extender_refused_requests_total{reason}`): a pool
#: had no instance left (each plugin whose pool was full counts), no or a wrong bearer token,
#: a request that is not one (framing, size, JSON, shape), a path that is no verb, a
#: connection turned away (at --max-connections, or draining).
REFUSAL_REASONS = ("pool_full", "auth", "bad_input", "unknown_path", "unavailable")
_REFUSAL_BY_STATUS: Mapping[int, str] = {401: "auth", 404: "unknown_path", 405: "unknown_path",
                                         501: "unknown_path", 503: "unavailable"}


def status_label(result: Any) -> str:
    """kube-scheduler's `status` label of a plugin call's result: its code's name
    ("Success", "Unschedulable" ...). Filter answers a status per node (one call here for
    all of them): the label is the gravest of them, Error before UnschedulableAndUnresolvable
    before Unschedulable. A call that returns nothing (Unreserve, PostBind) is "Success"."""
    if result is None:
        return "Success"
    status = result if isinstance(result, Status) else getattr(result, "status", None)
    if isinstance(status, Status):
        return status.code.label
    if isinstance(result, Mapping):
        codes = {s.code for s in result.values() if isinstance(s, Status)}
        for code in (Code.ERROR, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.UNSCHEDULABLE):
            if code in codes:
                return code.label
    return "Success"


def outcome_of(status: int, failed: bool = False) -> str:
    """A request's `outcome` label from its HTTP status (and whether a 200's answer carries an Error)."""
    if status >= 500:
        return "error"
    if status >= 400:
        return "refused"
    return "error" if failed else "success"


def refusal_of(status: int) -> str:
    """The refusal reason of an HTTP status ("" for none): 401 auth, 404 unknown path, 503 unavailable,
    any other 4xx bad input."""
    reason = _REFUSAL_BY_STATUS.get(status, "")
    if not reason and 400 <= status < 500:
        return "bad_input"
    return reason


class PluginCallMetrics:
    """`scheduler_plugin_execution_duration_seconds{plugin, extension_point, status}` of the
    plugins named (all when `only` is None), observed through `Framework.recorder`."""

    def __init__(self, registry: CollectorRegistry | None = None, only: Iterable[str] | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.histogram = Histogram(PLUGIN_DURATION, "Duration for running a plugin at a specific extension point.",
                                   ("plugin", "extension_point", "status"), buckets=KUBE_PLUGIN_BUCKETS,
                                   registry=registry)
        self._only = frozenset(only) if only is not None else None
        #: (plugin, the framework's point, status) -> its child's observe: a dict read a call, no
        #: label lookup (a dict store is atomic: two threads may both make a child, harmlessly).
        self._observe: dict[tuple[str, str, str], Callable[[float], None]] = {}

    def record(self, point: str, plugin: str, seconds: float, result: Any) -> None:
        """The `Framework.recorder` hook: one observation of one plugin call."""
        if self._only is not None and plugin not in self._only:
            return
        key = (plugin, point, status_label(result))
        observe = self._observe.get(key)
        if observe is None:
            observe = self._observe[key] = self.histogram.labels(
                plugin, KUBE_POINT_LABELS.get(point, point), key[2]).observe
        observe(seconds)

    def attach(self, frameworks: Iterable[Framework[Any]]) -> None:
        """Observe every plugin call of these frameworks."""
        for framework in frameworks:
            framework.recorder = self.record

    def totals(self) -> dict[str, dict[str, dict[str, float]]]:
        """plugin -> extension point (kube-scheduler's name) -> {"count", "sum_seconds"} over
        every status: what `simulate --output json` reports."""
        found: dict[str, dict[str, dict[str, float]]] = {}
        for metric in self.histogram.collect():
            for sample in metric.samples:
                kind = {"_count": "count", "_sum": "sum_seconds"}.get(sample.name[len(PLUGIN_DURATION):])
                if kind is None:
                    continue
                point = found.setdefault(sample.labels["plugin"], {}).setdefault(
                    sample.labels["extension_point"], {"count": 0, "sum_seconds": 0.0})
                point[kind] += sample.value
        for points in found.values():
            for figures in points.values():
                figures["count"] = int(figures["count"])
                figures["sum_seconds"] = round(figures["sum_seconds"], 6)
        return found


def pool_totals(plugins: Iterable[WasmPlugin]) -> dict[str, dict[str, int]]:
    """plugin name -> its pool's counts (`WasmPlugin.counts()`), summed over the plugins of that
    name (each profile has its own); a plugin already stopped is left out."""
    totals: dict[str, dict[str, int]] = {}
    for plugin in plugins:
        try:
            counts = plugin.counts()
        except pykka.ActorDeadError:
            continue
        mine = totals.setdefault(plugin.name, dict.fromkeys(
            ("live", "idle", "binding", "started", "discarded", "trapped", "exhausted"), 0))
        for key, value in (("live", counts.live), ("idle", counts.idle), ("binding", counts.binding),
                           ("started", counts.started), ("discarded", counts.discarded),
                           ("trapped", counts.trapped), ("exhausted", counts.exhausted)):
            mine[key] += value
    return totals


def simulation_metrics(plugins: Iterable[WasmPlugin], calls: PluginCallMetrics) -> dict[str, Any]:
    """`simulate --output json`'s `summary.metrics`: per wasm plugin its traps, discarded
    instances and guest calls per extension point (count, sum of seconds)."""
    durations = calls.totals()
    return {name: {"traps": pool["trapped"], "instances_discarded": pool["discarded"],
                   "calls": durations.get(name, {})}
            for name, pool in sorted(pool_totals(plugins).items())}


class _ScrapeCollector:
    """The metrics read at scrape time from the state that already counts them."""

    def __init__(self, metrics: ExtenderMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        pools = pool_totals(metrics.plugins)
        families = (
            (GaugeMetricFamily, "wasm_scheduler_plugin_instances_live",
             "Guest instances alive (idle, serving a cycle, held for binding or lent).", "live"),
            (GaugeMetricFamily, "wasm_scheduler_plugin_instances_idle", "Guest instances idle in the pool.", "idle"),
            (GaugeMetricFamily, "wasm_scheduler_plugin_instances_binding",
             "Guest instances held for a pod's binding cycle (until its bind or the bind timeout).", "binding"),
            (CounterMetricFamily, "wasm_scheduler_plugin_instances_started",
             "Guest instances started.", "started"),
            (CounterMetricFamily, "wasm_scheduler_plugin_instances_discarded",
             "Guest instances discarded (a trap, a host error, an actor that died).", "discarded"),
            (CounterMetricFamily, "wasm_scheduler_plugin_traps", "Guest calls that trapped (call.trapped).",
             "trapped"),
        )
        for kind, name, documentation, key in families:
            family = kind(name, documentation, labels=("plugin",))
            for plugin, counts in sorted(pools.items()):
                family.add_metric((plugin,), counts[key])
            yield family
        refused = CounterMetricFamily("wasm_scheduler_extender_refused_requests",
                                      "Requests (or cycles) refused, by reason.", labels=("reason",))
        tallies = metrics.refusals()
        tallies["pool_full"] += sum(counts["exhausted"] for counts in pools.values())
        for reason in REFUSAL_REASONS:
            refused.add_metric((reason,), tallies[reason])
        yield refused
        if metrics.service is not None:
            binds = CounterMetricFamily("wasm_scheduler_extender_bindings",
                                        "Binds answered: created, failed (a plugin or the API said no), refused "
                                        "(no cycle of the pod here, or a node its filter did not pass).",
                                        labels=("outcome",))
            for outcome, count in metrics.service.bind_counts().items():
                binds.add_metric((outcome,), count)
            yield binds
        watch = metrics.watch
        if watch is not None:
            age = watch.last_sync_age()
            yield GaugeMetricFamily("wasm_scheduler_extender_node_view_age_seconds",
                                    "Seconds since the watched node view was last confirmed current (NaN before "
                                    "its first sync).", value=float("nan") if age is None else age)
            yield GaugeMetricFamily("wasm_scheduler_extender_watch_failing_seconds",
                                    "Seconds the watch has been failing without an answer from the API server "
                                    "(0 while answered).", value=watch.failing_for())
            yield CounterMetricFamily("wasm_scheduler_extender_watch_restarts",
                                      "Lists and watches of the API server that failed and were restarted.",
                                      value=watch.restarts)


class ExtenderMetrics:
    """Every metric of one running extender, in its own registry; `exposition()` is ``/metrics``."""

    def __init__(self, plugins: Sequence[WasmPlugin], service: ExtenderService | None = None,
                 watch: ClusterWatch | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.plugins = list(plugins)
        self.service = service
        self.watch = watch
        self.calls = PluginCallMetrics(self.registry)
        self.requests = Histogram(REQUEST_DURATION, "Time to answer an extender request, by verb and outcome.",
                                  ("verb", "outcome"), buckets=REQUEST_BUCKETS, registry=self.registry)
        self._observe: dict[tuple[str, str], Callable[[float], None]] = {}
        self._lock = threading.Lock()
        self._refused = dict.fromkeys(REFUSAL_REASONS, 0)
        self.registry.register(_ScrapeCollector(self))

    def request_done(self, verb: str, status: int, seconds: float, failed: bool = False) -> None:
        """One request answered: `verb` ("filter" ..., "" or "unknown" for no verb), its HTTP
        status, how long it took, and whether a 200's answer carries an Error."""
        key = (verb if verb in VERBS else "unknown", outcome_of(status, failed))
        observe = self._observe.get(key)
        if observe is None:
            observe = self._observe[key] = self.requests.labels(*key).observe
        observe(seconds)
        if status >= 400:
            reason = refusal_of(status)
            if reason:
                self.refuse(reason)

    def refuse(self, reason: str) -> None:
        """Count a refusal the server makes without a request (`unavailable`: a connection turned away)."""
        with self._lock:
            self._refused[reason] = self._refused.get(reason, 0) + 1

    def refusals(self) -> dict[str, int]:
        """The refusals counted here (not `pool_full`, read from the pools at scrape time)."""
        with self._lock:
            return dict(self._refused)

    def exposition(self) -> tuple[int, bytes, str]:
        """The ``/metrics`` route: (status, body, content type)."""
        return 200, generate_latest(self.registry), CONTENT_TYPE


__all__ = ["ExtenderMetrics", "PluginCallMetrics", "simulation_metrics", "pool_totals", "status_label",
           "outcome_of", "refusal_of", "KUBE_PLUGIN_BUCKETS", "PLUGIN_DURATION", "REQUEST_DURATION"]
