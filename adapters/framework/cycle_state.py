"""CycleState: what native plugins keep for one pod's scheduling cycle.

This module owns the per-cycle key/value store kube-scheduler passes to every
extension point (a plugin writes in PreFilter what its Filter reads), with `clone`
for preemption, which evaluates each candidate node on its own copy, and the sets of
plugins that asked to be skipped (PreFilter or PreScore returned Skip). Wasm plugins
keep their cycle state in their own instance memory; what they read of it is `handle`,
the framework handle of this cycle when it is not the plugin's own (the HTTP extender
gives each request a handle of the nodes that request carries).

See `docs/framework.md` ("What a scheduling attempt does").
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from wasm_scheduler.vocabulary import FrameworkHandle


class CycleState:
    """A thread-safe store of per-cycle data, keyed by string."""

    def __init__(self, handle: FrameworkHandle | None = None) -> None:
        #: The handle this cycle's calls read the cluster through; None: each plugin's own.
        self.handle = handle
        self._data: dict[str, Any] = {}
        self._lock = threading.Lock()
        #: Plugins whose Filter is skipped for this pod (their PreFilter returned Skip).
        self.skip_filter_plugins: set[str] = set()
        #: Plugins whose Score is skipped for this pod (their PreScore returned Skip).
        self.skip_score_plugins: set[str] = set()
        #: Plugins whose PreFilter never ran this cycle (an earlier one rejected the pod):
        #: their cycle did not begin, so no later point of it calls them.
        self.not_started: set[str] = set()

    def read(self, key: str) -> Any:
        """The value written under `key`; KeyError if none was."""
        with self._lock:
            return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        with self._lock:
            self._data[key] = value

    def delete(self, key: str) -> None:
        with self._lock:
            self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A copy whose values can change without touching this one (values with a
        ``clone()`` method are cloned by it, others are copied shallowly)."""
        other = CycleState(self.handle)
        with self._lock:
            for key, value in self._data.items():
                cloner = getattr(value, "clone", None)
                other._data[key] = cloner() if callable(cloner) else copy.copy(value)
        other.skip_filter_plugins = set(self.skip_filter_plugins)
        other.skip_score_plugins = set(self.skip_score_plugins)
        other.not_started = set(self.not_started)
        return other
