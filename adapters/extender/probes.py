"""What a running extender answers at ``/healthz`` and ``/readyz``.

This module owns the rules of both probes (`docs/reliability.md`, "Probes"); the HTTP
server serves them as extra GET routes, each a plain function answering (status, body,
content type):

- ``/healthz`` (and ``/livez``): 200 whenever the process can answer at all;
- ``/readyz``: 200 once every served plugin's guest is compiled and its pool holds at
  least ``pool.minIdle`` live instances (the supervisor's own count), and, when the node
  view is watched from the API server, once its first list is in and while its list or
  watch has not been failing (no answer from the API server) for longer than
  ``--ready-max-view-age``. Otherwise 503, with the reasons. A quiet cluster's view ages
  between events without being broken, so the age alone (a metric) does not decide.

A change of readiness is logged (``extender.ready`` / ``extender.not_ready``), once per
change, when a probe sees it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pykka

from wasm_scheduler.logger import get_logger

if TYPE_CHECKING:
    from wasm_scheduler.adapters.extender.cluster_watch import ClusterWatch
    from wasm_scheduler.adapters.wasm_plugin import WasmPlugin

log = get_logger("adapters.extender.probes")

#: What a route answers: HTTP status, body, content type.
Answer = tuple[int, bytes, str]

#: Seconds the watch may fail before /readyz answers 503 (--ready-max-view-age).
DEFAULT_READY_MAX_VIEW_AGE_S = 120.0

_JSON = "application/json"


def _json(status: int, body: object) -> Answer:
    return status, json.dumps(body, separators=(",", ":")).encode(), _JSON


def healthz() -> Answer:
    """The process serves."""
    return _json(200, {"status": "ok"})


class Readiness:
    """The rules of /readyz over the plugins served and the watched node view (if any)."""

    def __init__(self, plugins: Sequence[WasmPlugin], watch: ClusterWatch | None = None,
                 max_view_age_s: float = DEFAULT_READY_MAX_VIEW_AGE_S) -> None:
        self.plugins = list(plugins)
        self.watch = watch
        self.max_view_age_s = max_view_age_s
        self._lock = threading.Lock()
        self._last: bool | None = None

    def problems(self) -> list[str]:
        """Why the extender is not ready; empty when it is."""
        found: list[str] = []
        for plugin in self.plugins:
            pool = plugin.config.pool
            wanted = min(pool.min_idle, pool.max_instances) if pool.max_instances else pool.min_idle
            try:
                live = plugin.counts().live
            except pykka.ActorDeadError:
                found.append(f"wasm plugin {plugin.name}: stopped")
                continue
            if live < wanted:
                found.append(f"wasm plugin {plugin.name}: {live} of pool.minIdle {wanted} instances started")
        watch = self.watch
        if watch is not None:
            if watch.closed:
                found.append("node view: the watch is stopped")
            elif not watch.synced:
                found.append(f"node view: not synced from {watch.server or 'the API server'} yet"
                             + (f" ({watch.last_error})" if watch.last_error else ""))
            else:
                failing = watch.failing_for()
                if failing > self.max_view_age_s:
                    found.append(f"node view: the watch of {watch.server or 'the API server'} has failed for "
                                 f"{failing:.0f} s (--ready-max-view-age {self.max_view_age_s:g}): "
                                 f"{watch.last_error or 'no answer'}")
        return found

    def readyz(self) -> Answer:
        """The /readyz route."""
        problems = self.problems()
        ready = not problems
        with self._lock:
            changed, self._last = ready != self._last, ready
        if changed and ready:
            log.info("extender.ready")
        elif changed:
            log.warning("extender.not_ready", reasons=problems)
        if ready:
            return _json(200, {"status": "ready"})
        return _json(503, {"status": "not ready", "reasons": problems})


__all__ = ["Readiness", "healthz", "Answer", "DEFAULT_READY_MAX_VIEW_AGE_S"]
