"""The extender's watched view of the cluster (`adapters/extender/cluster_watch.py`), without a real API server.

The bookkeeping runs against `FakeListWatch` (scripted lists and watch events): first sync, events,
bound-pod filtering, 410 relists, backoff, consistent snapshots, close(). The official client's
side (`KubeListWatch`: raw JSON pages, the watch's query, a chunked stream split mid-line, an
HTTP 410, a 403, a stream cut by close()) runs against `FakeApiServer`, a local HTTP server that
answers as kube-apiserver does. Then the command's wiring: which option picks which source, and
an extender whose names-only requests are served from a watched view.
"""

from __future__ import annotations

import copy
import json
import logging
import queue
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import structlog

from tests.conftest import EXAMPLES
from tests.test_binder_extra import no_cluster_env  # noqa: F401 - a fixture
from wasm_scheduler.adapters.extender.binder import new_api_client
from wasm_scheduler.adapters.extender.cluster_watch import (
    CLOSE_TIMEOUT_S,
    NODES,
    PODS,
    ApiStatusError,
    Backoff,
    BackoffPolicy,
    ClusterWatch,
    Interrupter,
    KubeListWatch,
    ListResult,
    Resource,
    WatchEvent,
    watch_cluster,
)
from wasm_scheduler.adapters.extender.command import (
    ExtenderOptions,
    RunningExtender,
    await_view,
    node_source_for,
)
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.snapshot_reload import SnapshotReloader
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.registry.compiler import GuestCompiler

FAST = BackoffPolicy(initial_s=0.01, max_s=0.05)


def go_bool(value: str) -> bool:
    """A query flag as kube-apiserver reads it (Go's strconv.ParseBool): the client sends
    `true` from kubernetes 30 on and `True` before."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def eventually(check: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "status": {"allocatable": {"pods": "110"}}}


def pod(name: str, uid: str, node_name: str = "", phase: str = "Running") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"nodeName": node_name} if node_name else {}, "status": {"phase": phase}}


@pytest.fixture
def logs() -> Iterator[list[dict[str, Any]]]:
    """Every structlog event at any level (the suite's default drops info)."""
    capture = structlog.testing.LogCapture()
    structlog.configure(processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
                        cache_logger_on_first_use=False)
    yield capture.entries


# --- a scripted ListWatch --------------------------------------------------------------------------

_END = object()


class FakeListWatch:
    """Lists the current objects; each watch plays what `emit` and `end`/`fail` queue for its
    resource, and blocks (until interrupted) when nothing is queued."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, dict[str, Any]]] = {"nodes": {}, "pods": {}}
        self.version = 10
        self.events: dict[str, queue.Queue[object]] = {"nodes": queue.Queue(), "pods": queue.Queue()}
        self.list_calls: dict[str, int] = {"nodes": 0, "pods": 0}
        self.watched: dict[str, list[tuple[str, int, float]]] = {"nodes": [], "pods": []}
        self.list_gates: dict[str, threading.Event] = {"nodes": threading.Event(), "pods": threading.Event()}
        for gate in self.list_gates.values():
            gate.set()
        self.list_errors: dict[str, list[Exception]] = {"nodes": [], "pods": []}
        self.watch_errors: dict[str, list[Exception]] = {"nodes": [], "pods": []}
        self.ignore_interrupts = False
        self.closed = False

    # scripting
    def add(self, resource: Resource, obj: dict[str, Any]) -> None:
        self.objects[resource.name][resource.key(obj)] = obj

    def emit(self, resource: Resource, kind: str, obj: dict[str, Any]) -> str:
        """Queue an event (the object gets the next resourceVersion); the state lists follow it."""
        self.version += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.version)
        if kind == "DELETED":
            self.objects[resource.name].pop(resource.key(obj), None)
        elif kind in ("ADDED", "MODIFIED"):
            self.objects[resource.name][resource.key(obj)] = obj
        self.events[resource.name].put(WatchEvent(kind, obj))
        return str(self.version)

    def end(self, resource: Resource) -> None:
        self.events[resource.name].put(_END)

    def fail(self, resource: Resource, exc: Exception) -> None:
        self.events[resource.name].put(exc)

    # ListWatch
    def list(self, resource: Resource, interrupter: Interrupter) -> ListResult:
        self.list_calls[resource.name] += 1
        self.list_gates[resource.name].wait(10)
        if self.list_errors[resource.name]:
            raise self.list_errors[resource.name].pop(0)
        items = [copy.deepcopy(o) for o in self.objects[resource.name].values()]
        for item in items:
            item["metadata"].pop("resourceVersion", None)
        return ListResult(items, str(self.version))

    def watch(self, resource: Resource, resource_version: str, timeout_s: int,
              interrupter: Interrupter) -> Iterator[WatchEvent]:
        self.watched[resource.name].append((resource_version, timeout_s, time.monotonic()))
        if self.watch_errors[resource.name]:
            raise self.watch_errors[resource.name].pop(0)
        cut = threading.Event()
        if not self.ignore_interrupts:
            interrupter.attach(cut.set)
        try:
            while True:
                if cut.is_set():
                    raise ConnectionResetError("cut by close()")
                try:
                    item = self.events[resource.name].get(timeout=0.01)
                except queue.Empty:
                    continue
                if item is _END:
                    return
                if isinstance(item, Exception):
                    raise item
                assert isinstance(item, WatchEvent)
                yield item
        finally:
            interrupter.detach()

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def api() -> FakeListWatch:
    return FakeListWatch()


@pytest.fixture
def started(api: FakeListWatch) -> Iterator[Callable[..., ClusterWatch]]:
    watches: list[ClusterWatch] = []

    def start(**options: Any) -> ClusterWatch:
        options.setdefault("backoff", FAST)
        watch = ClusterWatch(api, **options)
        watches.append(watch)
        return watch

    yield start
    for watch in watches:
        watch.close()


# --- first sync ------------------------------------------------------------------------------------


def test_synced_only_once_both_first_lists_are_in(api: FakeListWatch, started: Callable[..., ClusterWatch],
                                                  logs: list[dict[str, Any]]) -> None:
    api.add(NODES, node("n1"))
    api.add(PODS, pod("p1", "u1", "n1"))
    api.list_gates["pods"].clear()
    watch = started()
    eventually(lambda: "n1" in watch.nodes, what="the node list")
    assert not watch.synced and watch.last_sync_age() is None
    assert not watch.wait_synced(0.05)
    api.list_gates["pods"].set()
    assert watch.wait_synced(5)
    assert watch.synced
    assert set(watch.pods) == {"u1"}
    # List items look like watch events' objects: kind and apiVersion included, JSON dicts as served.
    assert watch.nodes["n1"]["kind"] == "Node" and watch.nodes["n1"]["apiVersion"] == "v1"
    assert type(watch.nodes["n1"]) is dict and watch.pods["u1"]["kind"] == "Pod"
    age = watch.last_sync_age()
    assert age is not None and 0 <= age < 5
    synced = [e for e in logs if e["event"] == "extender.view_synced"]
    assert len(synced) == 1 and synced[0]["nodes"] == 1 and synced[0]["pods"] == 1
    assert {e["resource"] for e in logs if e["event"] == "extender.watch_listed"} == {"nodes", "pods"}
    stats = watch.stats()
    assert (stats.synced, stats.nodes, stats.pods, stats.restarts, stats.relists) == (True, 1, 1, 0, 0)


def test_the_watch_starts_from_the_list_version_with_a_bounded_timeout(api: FakeListWatch,
                                                                       started: Callable[..., ClusterWatch]) -> None:
    watch = started(watch_timeout_s=(30, 60))
    assert watch.wait_synced(5)
    eventually(lambda: bool(api.watched["nodes"]), what="a watch")
    version, timeout_s, _ = api.watched["nodes"][0]
    assert version == "10" and 30 <= timeout_s <= 60


# --- events --------------------------------------------------------------------------------------


def test_events_add_relabel_and_delete_nodes(api: FakeListWatch, started: Callable[..., ClusterWatch]) -> None:
    api.add(NODES, node("n1"))
    watch = started()
    assert watch.wait_synced(5)
    api.emit(NODES, "ADDED", node("n2"))
    api.emit(NODES, "MODIFIED", node("n1", {"zone": "b"}))
    eventually(lambda: "n2" in watch.nodes and watch.nodes["n1"]["metadata"]["labels"] == {"zone": "b"})
    api.emit(NODES, "DELETED", node("n2"))
    eventually(lambda: "n2" not in watch.nodes, what="the deletion")
    assert set(watch.nodes) == {"n1"}


def test_every_event_and_bookmark_moves_the_version_on(api: FakeListWatch,
                                                       started: Callable[..., ClusterWatch]) -> None:
    watch = started()
    assert watch.wait_synced(5)
    api.emit(NODES, "ADDED", node("n1"))
    api.version += 5
    api.events["nodes"].put(WatchEvent("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": "16"}}))
    api.end(NODES)  # the server's timeoutSeconds ran out: a new watch from the last version
    eventually(lambda: len(api.watched["nodes"]) >= 2, what="the second watch")
    assert [w[0] for w in api.watched["nodes"][:2]] == ["10", "16"]
    assert api.list_calls["nodes"] == 1  # a watch that ends is opened again, not relisted
    assert watch.restarts == 0 and set(watch.nodes) == {"n1"}  # the bookmark's object is no node


def test_only_bound_running_pods_are_kept(api: FakeListWatch, started: Callable[..., ClusterWatch]) -> None:
    api.add(PODS, pod("bound", "u1", "n1"))
    api.add(PODS, pod("pending", "u2"))
    api.add(PODS, pod("done", "u3", "n1", phase="Succeeded"))
    watch = started()
    assert watch.wait_synced(5)
    assert set(watch.pods) == {"u1"}
    api.emit(PODS, "MODIFIED", pod("pending", "u2", "n2"))  # bound now
    api.emit(PODS, "ADDED", pod("new", "u4", "n1"))
    eventually(lambda: set(watch.pods) == {"u1", "u2", "u4"}, what="the bound pods")
    api.emit(PODS, "MODIFIED", pod("bound", "u1", "n1", phase="Failed"))  # finished: no victim any more
    api.emit(PODS, "DELETED", pod("new", "u4", "n1"))
    eventually(lambda: set(watch.pods) == {"u2"}, what="the finished and deleted pods gone")
    assert watch.pods["u2"]["spec"]["nodeName"] == "n2"


def test_pods_are_watched_with_the_bound_and_running_field_selector() -> None:
    assert PODS.field_selector == "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    assert NODES.field_selector == ""


def test_readers_get_snapshots_that_never_change(api: FakeListWatch, started: Callable[..., ClusterWatch]) -> None:
    api.add(NODES, node("n1"))
    watch = started()
    assert watch.wait_synced(5)
    before = watch.nodes
    assert watch.nodes is before  # no change, no copy
    api.emit(NODES, "ADDED", node("n2"))
    api.emit(NODES, "DELETED", node("n1"))
    eventually(lambda: set(watch.nodes) == {"n2"})
    assert set(before) == {"n1"}  # the reader's map is as it was
    after = watch.nodes
    assert watch.nodes is after


def test_concurrent_readers_can_iterate_while_events_flow(api: FakeListWatch,
                                                         started: Callable[..., ClusterWatch]) -> None:
    watch = started()
    assert watch.wait_synced(5)
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                view = watch.nodes
                assert all(name in view for name in list(view))
                sum(1 for _ in view.values())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    for i in range(300):
        api.emit(NODES, "ADDED", node(f"n{i}"))
        if i % 3 == 0:
            api.emit(NODES, "DELETED", node(f"n{i}"))
    eventually(lambda: len(watch.nodes) == 200, what="every event applied")
    done.set()
    for reader in readers:
        reader.join()
    assert not errors


# --- 410 Gone, failures, backoff ---------------------------------------------------------------


def test_an_error_event_410_relists_and_the_list_replaces_the_view(api: FakeListWatch,
                                                                   started: Callable[..., ClusterWatch],
                                                                   logs: list[dict[str, Any]]) -> None:
    api.add(NODES, node("n1"))
    api.add(NODES, node("n2"))
    watch = started()
    assert watch.wait_synced(5)
    # Missed while the watch was away: n2 deleted, n3 added. Only a fresh list can tell.
    del api.objects["nodes"]["n2"]
    api.add(NODES, node("n3"))
    api.version = 50
    api.events["nodes"].put(WatchEvent("ERROR", {"kind": "Status", "code": 410, "reason": "Expired",
                                                 "message": "too old resource version: 10 (40)"}))
    eventually(lambda: set(watch.nodes) == {"n1", "n3"}, what="the relist")
    assert api.list_calls["nodes"] == 2
    eventually(lambda: len(api.watched["nodes"]) == 2)
    assert api.watched["nodes"][1][0] == "50"
    assert (watch.restarts, watch.relists) == (1, 1)
    assert "410" in watch.last_error and watch.synced
    restarted = [e for e in logs if e["event"] == "extender.watch_restarted"]
    assert restarted[0]["status"] == 410 and restarted[0]["relist"] is True
    assert restarted[0]["retry_in_s"] == 0  # the first relist after a healthy while does not wait
    assert restarted[0]["log_level"] == "info"  # routine, not a warning


def test_an_http_410_on_the_watch_relists_too(api: FakeListWatch, started: Callable[..., ClusterWatch]) -> None:
    api.watch_errors["nodes"].append(ApiStatusError(410, "Expired"))
    watch = started()
    assert watch.wait_synced(5)
    eventually(lambda: api.list_calls["nodes"] == 2 and watch.relists == 1, what="the relist")


def test_connection_errors_restart_from_the_same_version_with_growing_delays(
        api: FakeListWatch, started: Callable[..., ClusterWatch], logs: list[dict[str, Any]]) -> None:
    api.watch_errors["nodes"] = [ConnectionRefusedError("refused") for _ in range(5)]
    policy = BackoffPolicy(initial_s=0.04, max_s=0.16, jitter=0.0)
    watch = started(backoff=policy)
    eventually(lambda: len(api.watched["nodes"]) >= 6, timeout_s=10, what="six watch attempts")
    times = [w[2] for w in api.watched["nodes"][:6]]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    for gap, expected in zip(gaps, [0.04, 0.08, 0.16, 0.16, 0.16], strict=True):
        assert gap >= expected * 0.9, gaps  # waited (bounded by max_s)
    assert max(gaps) < 2.0, gaps
    assert {w[0] for w in api.watched["nodes"]} == {"10"}  # resumed where it was: no relist
    assert api.list_calls["nodes"] == 1 and watch.restarts == 5 and watch.relists == 0
    warned = [e for e in logs if e["event"] == "extender.watch_restarted"]
    assert len(warned) == 5 and all(e["log_level"] == "warning" for e in warned)
    assert warned[0]["error"] == "ConnectionRefusedError: refused" and warned[0]["relist"] is False
    api.emit(NODES, "ADDED", node("n1"))
    eventually(lambda: "n1" in watch.nodes, what="the watch working again")


def test_a_cut_stream_and_other_error_events_restart_the_watch(api: FakeListWatch,
                                                               started: Callable[..., ClusterWatch]) -> None:
    watch = started()
    assert watch.wait_synced(5)
    version = api.emit(NODES, "ADDED", node("n1"))
    api.fail(NODES, ConnectionResetError("peer reset"))
    eventually(lambda: len(api.watched["nodes"]) >= 2, what="the second watch")
    api.events["nodes"].put(WatchEvent("ERROR", {"kind": "Status", "code": 500, "message": "internal"}))
    eventually(lambda: len(api.watched["nodes"]) >= 3, what="the third watch")
    assert [w[0] for w in api.watched["nodes"][1:3]] == [version, version]
    assert watch.restarts == 2 and watch.relists == 0 and "500: internal" in watch.last_error
    assert "n1" in watch.nodes


def test_a_watch_that_ends_at_once_is_backed_off_not_hammered(api: FakeListWatch,
                                                              started: Callable[..., ClusterWatch]) -> None:
    for _ in range(4):
        api.end(NODES)  # four watches in a row end at once with nothing
    watch = started(backoff=BackoffPolicy(initial_s=0.05, max_s=0.05, jitter=0.0))
    eventually(lambda: len(api.watched["nodes"]) >= 5, what="five watches")
    times = [w[2] for w in api.watched["nodes"][:5]]
    assert all(b - a >= 0.045 for a, b in zip(times, times[1:], strict=False))
    assert watch.restarts == 4 and "very short watch" in watch.last_error and api.list_calls["nodes"] == 1


def test_backoff_doubles_to_its_cap_with_jitter_and_starts_over() -> None:
    now = [0.0]
    rand = [0.0]
    backoff = Backoff(BackoffPolicy(initial_s=0.5, max_s=30.0, jitter=0.5, reset_after_s=60.0),
                      rand=lambda: rand[0], clock=lambda: now[0])
    delays = []
    for _ in range(9):
        delays.append(backoff.next_delay())
        now[0] += 1
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    rand[0] = 1.0
    assert backoff.next_delay() == 15.0  # jitter cuts up to half
    rand[0] = 0.5
    assert backoff.next_delay() == 22.5
    now[0] += 61  # a minute without failure: the count starts over
    assert backoff.next_delay() == 0.375
    now[0] += 61
    assert backoff.next_delay(first_is_free=True) == 0.0  # a 410 after a healthy while
    assert backoff.next_delay(first_is_free=True) == 0.75  # ... but not twice in a row


def test_wait_synced_gives_up_at_once_when_denied(api: FakeListWatch, started: Callable[..., ClusterWatch]) -> None:
    api.list_errors["pods"] = [ApiStatusError(403, 'pods is forbidden: cannot list resource "pods"')
                               for _ in range(1000)]
    watch = started(backoff=BackoffPolicy(initial_s=0.2, max_s=0.2))
    began = time.monotonic()
    assert not watch.wait_synced(10)
    assert time.monotonic() - began < 3
    assert "forbidden" in watch.last_error
    assert not watch.wait_synced(0.2, give_up_when_denied=False)  # a plain wait runs to its timeout
    api.list_errors["pods"].clear()  # RBAC fixed: the watch gets there by itself
    assert watch.wait_synced(5, give_up_when_denied=False)


# --- close() ---------------------------------------------------------------------------------------


def test_close_cuts_blocked_watches_promptly(api: FakeListWatch) -> None:
    watch = ClusterWatch(api, backoff=FAST)
    assert watch.wait_synced(5)
    eventually(lambda: bool(api.watched["nodes"]) and bool(api.watched["pods"]), what="both watches open")
    began = time.monotonic()
    watch.close()
    assert time.monotonic() - began < 1.9  # the threads were cut, not waited for (CLOSE_TIMEOUT_S)
    assert not [t for t in watch._threads if t.is_alive()]
    assert api.closed and watch.closed
    api.closed = False
    watch.close()  # again: nothing more to do
    assert not api.closed
    assert not watch.wait_synced(1) or watch.synced


def test_close_is_bounded_even_when_a_read_cannot_be_cut(api: FakeListWatch) -> None:
    api.ignore_interrupts = True  # (a thread still connecting, say)
    watch = ClusterWatch(api, backoff=FAST)
    assert watch.wait_synced(5)
    eventually(lambda: bool(api.watched["nodes"]), what="the watch open")
    began = time.monotonic()
    watch.close()
    assert time.monotonic() - began < CLOSE_TIMEOUT_S + 1.0
    api.end(NODES)  # the read ends by itself (its timeout): the thread sees the stop flag
    api.end(PODS)
    eventually(lambda: not [t for t in watch._threads if t.is_alive()], what="the threads to end by themselves")


def test_close_during_backoff_does_not_wait_for_it(api: FakeListWatch) -> None:
    api.watch_errors["nodes"] = [ConnectionRefusedError("refused")]
    watch = ClusterWatch(api, backoff=BackoffPolicy(initial_s=30.0, max_s=30.0))
    eventually(lambda: watch.restarts == 1, what="the first failure")
    began = time.monotonic()
    watch.close()
    assert time.monotonic() - began < 1.9  # the 30 s backoff was cut, not waited for
    assert not [t for t in watch._threads if t.is_alive()]


# --- the official client against an HTTP server that answers as kube-apiserver does ------------------


class FakeApiServer:
    """/api/v1/nodes and /api/v1/pods: lists (paged by limit/continue) of `objects`, and watches
    that play the next script queued for the resource (chunks of bytes, an int HTTP status, or
    "hold": keep the stream open until the server stops)."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {"nodes": [], "pods": []}
        self.version = "100"
        self.list_status: dict[str, int] = {}
        self.scripts: dict[str, queue.Queue[list[object]]] = {"nodes": queue.Queue(), "pods": queue.Queue()}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
                server.requests.append((url.path, query))
                resource = {"/api/v1/nodes": "nodes", "/api/v1/pods": "pods"}.get(url.path)
                if resource is None:
                    self._json(404, {"kind": "Status", "code": 404, "message": "not found"})
                elif go_bool(query.get("watch", "")):
                    self._watch(resource)
                elif resource in server.list_status:
                    code = server.list_status[resource]
                    self._json(code, {"kind": "Status", "code": code,
                                      "message": f"{resource} is forbidden: cannot list resource"})
                else:
                    self._list(resource, int(query.get("limit") or 0), int(query.get("continue") or 0))

            def _json(self, code: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _list(self, resource: str, limit: int, start: int) -> None:
                items = server.objects[resource]
                end = start + limit if limit else len(items)
                meta = {"resourceVersion": server.version}
                if end < len(items):
                    meta["continue"] = str(end)
                kind = "NodeList" if resource == "nodes" else "PodList"
                self._json(200, {"kind": kind, "apiVersion": "v1", "metadata": meta, "items": items[start:end]})

            def _watch(self, resource: str) -> None:
                try:
                    script = server.scripts[resource].get(timeout=0.5)
                except queue.Empty:
                    script = ["hold"]
                if script and isinstance(script[0], int):
                    self._json(script[0], {"kind": "Status", "code": script[0], "message": "too old resource version"})
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for step in script:
                    if step == "hold":
                        server.stopping.wait(30)
                        return
                    assert isinstance(step, bytes)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(step), step))
                    self.wfile.flush()
                    time.sleep(0.01)
                self.wfile.write(b"0\r\n\r\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def queries(self, path: str) -> list[dict[str, str]]:
        return [q for p, q in self.requests if p == path]

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    server = FakeApiServer()
    yield server
    server.stop()


def _event(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def test_kube_list_watch_pages_raw_json_and_streams_split_lines(apiserver: FakeApiServer) -> None:
    apiserver.objects["nodes"] = [node(f"n{i}") for i in range(5)]
    apiserver.objects["pods"] = [pod("p1", "u1", "n1"), pod("p2", "u2")]  # the fake ignores the selector
    added = _event("ADDED", {"kind": "Node", "apiVersion": "v1",
                             "metadata": {"name": "n9", "resourceVersion": "101"}})
    bookmark = _event("BOOKMARK", {"kind": "Node", "metadata": {"resourceVersion": "105"}})
    apiserver.scripts["nodes"].put([added[:20], added[20:] + bookmark[:7], bookmark[7:]])
    client, api_client = new_api_client(api_server=apiserver.url)
    watch = ClusterWatch(KubeListWatch(client, api_client, page_size=2), backoff=FAST, watch_timeout_s=(30, 60))
    try:
        assert watch.wait_synced(10)
        assert set(watch.nodes) == {f"n{i}" for i in range(5)}
        assert set(watch.pods) == {"u1"}  # the pending pod is dropped here too
        assert type(watch.nodes["n0"]) is dict and watch.nodes["n0"]["kind"] == "Node"
        lists = [q for q in apiserver.queries("/api/v1/nodes") if "watch" not in q]
        assert [q.get("continue") for q in lists] == [None, "2", "4"] and lists[0]["limit"] == "2"
        pod_list = [q for q in apiserver.queries("/api/v1/pods") if "watch" not in q][0]
        assert pod_list["fieldSelector"] == PODS.field_selector
        eventually(lambda: "n9" in watch.nodes, what="the streamed event")
        watches = [q for q in apiserver.queries("/api/v1/nodes") if go_bool(q.get("watch", ""))]
        first = watches[0]
        assert first["resourceVersion"] == "100" and go_bool(first["allowWatchBookmarks"])
        assert 30 <= int(first["timeoutSeconds"]) <= 60
        # The stream ended after the bookmark: the next watch starts from its version.
        eventually(lambda: len([q for q in apiserver.queries("/api/v1/nodes") if q.get("watch")]) >= 2)
        second = [q for q in apiserver.queries("/api/v1/nodes") if go_bool(q.get("watch", ""))][1]
        assert second["resourceVersion"] == "105"
        assert watch.restarts == 0
    finally:
        watch.close()


def test_kube_list_watch_relists_on_410_answer_and_event(apiserver: FakeApiServer) -> None:
    apiserver.objects["nodes"] = [node("n1")]
    apiserver.scripts["nodes"].put([410])  # the watch request itself answered 410
    expired = _event("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                               "reason": "Expired", "message": "too old resource version: 100 (200)"})
    apiserver.scripts["nodes"].put([expired])
    watch = watch_cluster(api_server=apiserver.url, backoff=FAST)
    try:
        assert watch.wait_synced(10)
        eventually(lambda: watch.relists == 2, timeout_s=10, what="two relists")
        lists = [q for q in apiserver.queries("/api/v1/nodes") if "watch" not in q]
        assert len(lists) == 3 and "too old resource version" in watch.last_error
        assert set(watch.nodes) == {"n1"}
    finally:
        watch.close()


@pytest.mark.parametrize("urllib3_shutdown", [True, False], ids=["response.shutdown", "socket.shutdown"])
def test_close_cuts_a_real_http_stream_in_flight(apiserver: FakeApiServer, urllib3_shutdown: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if not urllib3_shutdown:  # urllib3 before 2.3: the connection's socket is shut instead
        import urllib3

        monkeypatch.delattr(urllib3.HTTPResponse, "shutdown")
    watch = watch_cluster(api_server=apiserver.url, backoff=FAST)
    assert watch.wait_synced(10)
    eventually(lambda: len([q for p, q in apiserver.requests if q.get("watch")]) >= 2, what="both watches open")
    time.sleep(0.6)  # past the fake's wait for a script: both streams are held open, sending nothing
    began = time.monotonic()
    watch.close()
    assert time.monotonic() - began < 1.9
    assert not [t for t in watch._threads if t.is_alive()]


def test_a_denied_list_ends_the_wait_with_the_servers_message(apiserver: FakeApiServer) -> None:
    apiserver.list_status["pods"] = 403
    watch = watch_cluster(api_server=apiserver.url, backoff=BackoffPolicy(initial_s=0.5, max_s=0.5))
    try:
        began = time.monotonic()
        assert not watch.wait_synced(20)
        assert time.monotonic() - began < 5
        assert "403" in watch.last_error and "pods is forbidden" in watch.last_error
    finally:
        watch.close()


# --- the command's wiring --------------------------------------------------------------------------


@pytest.mark.usefixtures("no_cluster_env")
def test_which_source_each_option_picks(apiserver: FakeApiServer, logs: list[dict[str, Any]]) -> None:
    config = Path("s.yaml")
    assert isinstance(node_source_for(ExtenderOptions(config)), NodeCache)  # no credentials: no view
    assert isinstance(node_source_for(ExtenderOptions(config, api_server=apiserver.url, watch=False)), NodeCache)
    reloader = node_source_for(ExtenderOptions(config, cluster=EXAMPLES / "cluster.yaml", api_server=apiserver.url))
    assert isinstance(reloader, SnapshotReloader)
    reloader.close()
    for expect_bind in (True, False):  # --no-bind or not: the view needs the API either way
        source = node_source_for(ExtenderOptions(config, api_server=apiserver.url, expect_bind=expect_bind))
        try:
            assert isinstance(source, ClusterWatch) and source.server == apiserver.url
            assert await_view(source, 10)
        finally:
            source.close()
    watching = [e for e in logs if e["event"] == "extender.view_watching"]
    assert watching[0]["credentials"] == f"--api-server {apiserver.url}"
    with pytest.raises(UserError, match="--sync-timeout -1"):
        node_source_for(ExtenderOptions(config, api_server=apiserver.url, sync_timeout_s=-1))


@pytest.fixture
def without_kubernetes(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import kubernetes` fails, as when the optional client is not installed."""
    for name in [n for n in sys.modules if n == "kubernetes" or n.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes", None)


@pytest.mark.usefixtures("no_cluster_env", "without_kubernetes")
def test_without_the_client_given_credentials_stop_the_start_and_found_ones_warn(
        monkeypatch: pytest.MonkeyPatch, logs: list[dict[str, Any]]) -> None:
    with pytest.raises(UserError) as exc:  # --api-server asked for the API: one line naming it and the need
        node_source_for(ExtenderOptions(Path("s.yaml"), api_server="http://127.0.0.1:1", expect_bind=False))
    text = str(exc.value)
    assert text.startswith("--api-server http://127.0.0.1:1: watching nodes and pods") and "\n" not in text
    assert "--no-watch" in text and "pip install 'wasm-scheduler[extender]'" in text
    # In a pod (KUBERNETES_SERVICE_HOST set) with --no-bind: no API needed before, none needed now.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert isinstance(node_source_for(ExtenderOptions(Path("s.yaml"), expect_bind=False)), NodeCache)
    warned = [e for e in logs if e["event"] == "extender.view_unavailable"]
    assert len(warned) == 1 and warned[0]["credentials"].startswith("in-cluster credentials")
    assert "not installed" in warned[0]["error"]


def _post(url: str, verb: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(f"{url}/{verb}", data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.usefixtures("no_cluster_env")
def test_names_only_requests_are_served_from_the_watched_view(apiserver: FakeApiServer, compiler: GuestCompiler,
                                                              logs: list[dict[str, Any]]) -> None:
    apiserver.objects["nodes"] = [node("node-03"), node("node-04")]
    added = _event("ADDED", {"kind": "Node", "apiVersion": "v1",
                             "metadata": {"name": "node-13", "resourceVersion": "101"}})
    running = RunningExtender(ExtenderOptions(EXAMPLES / "scheduler-config.yaml", "127.0.0.1:0",
                                              api_server=apiserver.url, expect_bind=False), compiler)
    try:
        assert isinstance(running.service.node_cache, ClusterWatch) and running.service.node_cache.synced
        running.server.start_background()
        pod_body = {"metadata": {"name": "web-3", "namespace": "default", "uid": "u"}}
        scores = _post(running.server.url, "prioritize", {"Pod": pod_body, "NodeNames": ["node-03", "node-04"]})
        assert scores == [{"Host": "node-03", "Score": 10}, {"Host": "node-04", "Score": 0}]
        apiserver.scripts["nodes"].put([added])  # a node joins while the extender runs
        eventually(lambda: "node-13" in running.service.node_cache.nodes, what="the new node")
        scores = _post(running.server.url, "prioritize", {"Pod": pod_body, "NodeNames": ["node-04", "node-13"]})
        assert scores == [{"Host": "node-04", "Score": 0}, {"Host": "node-13", "Score": 10}]
    finally:
        running.close()
    assert [e["event"] for e in logs if e["event"].startswith("extender.view_")][:2] == [
        "extender.view_watching", "extender.view_synced"]
    assert not [e for e in logs if e["event"] == "extender.view_sync_timeout"]


@pytest.mark.usefixtures("no_cluster_env")
def test_an_unsynced_view_is_a_warning_not_a_failed_start(apiserver: FakeApiServer, compiler: GuestCompiler,
                                                          logs: list[dict[str, Any]]) -> None:
    apiserver.list_status["nodes"] = 403
    began = time.monotonic()
    running = RunningExtender(ExtenderOptions(EXAMPLES / "scheduler-config.yaml", "127.0.0.1:0",
                                              api_server=apiserver.url, expect_bind=False, sync_timeout_s=30),
                              compiler)
    try:
        assert time.monotonic() - began < 20  # denied: no point waiting the whole 30 s
        assert not running.service.node_cache.nodes
    finally:
        running.close()
    warned = [e for e in logs if e["event"] == "extender.view_sync_timeout"]
    assert len(warned) == 1 and warned[0]["log_level"] == "warning" and "403" in warned[0]["error"]
