"""A native plugin that reaches a scheduler extender over HTTP: the `extender` variant.

This module owns what kube-scheduler does with an ``extenders:`` entry that has a
``prioritizeVerb``, reduced to what `wasm-scheduler bench` needs: for every pod with
more than one feasible node, one ``POST <urlPrefix>/prioritize`` with the pod and the
feasible nodes (names only when ``nodeCacheCapable``, as a ``v1.NodeList`` otherwise)
over one keep-alive HTTP/1.1 connection, and the answer's 0..10 scores mapped back to
0..100 (kube-scheduler multiplies extender scores by MaxNodeScore/MaxExtenderPriority
and by the extender's weight; here the weight is this plugin's score weight in the
profile). There is no ``filterVerb`` (NodeNumber does not filter) and no
``bindVerb`` (the extender runs with ``expect_bind=False``, kube-scheduler binds).
A failed request is an Error status, as a non-ignorable extender's would be.

See `docs/performance.md` ("How to measure").
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from wasm_scheduler.adapters.extender.protocol import MAX_EXTENDER_PRIORITY
from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin, PluginContext
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, Code, NodeScore, ScoreResult, Status

NAME = "ExtenderClient"


class ExtenderClient(NativePlugin):
    """Score through an HTTP extender's prioritize verb."""

    NAME = NAME

    def __init__(self, ctx: PluginContext | None = None, url: str = "", node_cache_capable: bool | None = None,
                 timeout_s: float | None = None) -> None:
        super().__init__(ctx)
        args = ctx.args if ctx is not None else {}
        url = url or str(args.get("urlPrefix", ""))
        if not url and ctx is not None:
            raise ctx.fail("urlPrefix", "the extender's URL is required")
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            problem = f"expected http://HOST:PORT, got {url!r}"
            if ctx is not None:
                raise ctx.fail("urlPrefix", problem)
            raise ValueError(problem)
        self.url = url
        self.path = parts.path.rstrip("/") + "/prioritize"
        # kube-scheduler's default: without nodeCacheCapable the extender gets whole nodes.
        self.node_cache_capable = bool(args.get("nodeCacheCapable", False)) if node_cache_capable is None \
            else node_cache_capable
        timeout = float(args.get("httpTimeoutSeconds", 5.0)) if timeout_s is None else timeout_s
        self._connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
        self._lock = threading.Lock()  # one request at a time on the one connection
        self.requests = 0

    def _post(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._connection.request("POST", self.path, data, headers)
                    response = self._connection.getresponse()
                    payload = response.read()
                    break
                except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                    # The server closed an idle keep-alive connection: reconnect once.
                    self._connection.close()
                    if attempt == 2:
                        raise
            self.requests += 1
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {payload[:200].decode('utf-8', 'replace')}")
        return json.loads(payload)

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        body: dict[str, Any] = {"Pod": pod}
        if self.node_cache_capable:
            body["NodeNames"] = [node.name for node in nodes]
        else:
            body["Nodes"] = {"metadata": {}, "items": [node.node for node in nodes]}
        try:
            answer = self._post(body)
        except (OSError, ValueError, RuntimeError, http.client.HTTPException) as exc:
            return ScoreResult(Status(Code.ERROR, f"extender {self.url}: prioritize: {exc}", self.name))
        by_host: dict[str, int] = {}
        for entry in answer if isinstance(answer, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("Host"), str):
                by_host[entry["Host"]] = int(entry.get("Score") or 0)
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        return ScoreResult(SUCCESS, tuple(NodeScore(node.name, by_host.get(node.name, 0) * scale) for node in nodes))

    def close(self) -> None:
        with self._lock:
            self._connection.close()
