"""The HTTP extender, spoken to over real HTTP on loopback.

Two wasm plugins are served: `parity` (decisions that follow the node name's last
digit) and `checker` (traps if any call of a pod's cycle reaches an instance that did
not run that pod's prefilter). A local HTTP endpoint stands in for the API server's
binding subresource and records what it receives.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import structlog
import structlog.testing

from tests.conftest import GUESTS
from wasm_scheduler.adapters.extender.binder import KubernetesBinder
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.server import ExtenderServer
from wasm_scheduler.adapters.extender.service import ExtenderService, WeightedPlugin
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PoolConfig

NODE_NAMES = ["node-0", "node-1", "node-2", "node-4", "node-9"]


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"images": [{"names": ["busybox:latest"], "sizeBytes": 1000}]}}


def pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


class ApiServer:
    """Records POSTs to .../pods/NAME/binding and answers 201."""

    def __init__(self) -> None:
        self.bindings: list[tuple[str, dict[str, Any]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.bindings.append((self.path, body))
                data = json.dumps({"kind": "Status", "status": "Success"}).encode()
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()


class Extender:
    def __init__(self, server: ExtenderServer, service: ExtenderService, plugins: list[WasmPlugin],
                 api: ApiServer) -> None:
        self.server, self.service, self.plugins, self.api = server, service, plugins, api

    def post(self, verb: str, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.server.url}/{verb}", data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def counts(self) -> dict[str, Any]:
        return {p.name: p.counts() for p in self.plugins}


@pytest.fixture
def extender(compiler: GuestCompiler) -> Iterator[Callable[..., Extender]]:
    made: list[Extender] = []

    def make(parity_config: str = "", expect_bind: bool = True, bind_timeout_s: float = 30.0,
             max_body: int = 1 << 20, max_instances: int = PoolConfig.max_instances,
             node_names: list[str] = NODE_NAMES) -> Extender:
        pool = PoolConfig(max_instances=max_instances)
        parity = WasmPlugin.load(PluginConfig("parity", str(GUESTS / "parity.wat"), guest_config=parity_config,
                                              pool=pool), compiler)
        checker = WasmPlugin.load(PluginConfig("checker", str(GUESTS / "checker.wat"), pool=pool), compiler)
        cache = NodeCache(lambda: ([node(n) for n in node_names], [pod("victim")]))
        cache.refresh()
        api = ApiServer()
        service = ExtenderService([WeightedPlugin(parity, 2), WeightedPlugin(checker, 1)], cache,
                                  KubernetesBinder(api_server=api.url), expect_bind, bind_timeout_s)
        server = ExtenderServer(("127.0.0.1", 0), service, max_body=max_body).start_background()
        made.append(Extender(server, service, [parity, checker], api))
        return made[-1]

    yield make
    for ext in made:
        ext.server.stop()
        ext.service.close()
        ext.api.stop()
        for plugin in ext.plugins:
            plugin.close()


def args_with_nodes(p: dict[str, Any], names: list[str] = NODE_NAMES) -> dict[str, Any]:
    return {"Pod": p, "Nodes": {"metadata": {}, "items": [node(n) for n in names]}, "NodeNames": None}


def args_with_names(p: dict[str, Any], names: list[str] = NODE_NAMES) -> dict[str, Any]:
    return {"pod": p, "nodenames": names}  # lower-case keys: matched as Go's encoding/json does


def binding(p: dict[str, Any], node_name: str) -> dict[str, Any]:
    meta = p["metadata"]
    return {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node_name}


def test_filter_with_node_objects(extender) -> None:
    ext = extender()
    status, result = ext.post("filter", args_with_nodes(pod("a")))
    assert status == 200 and result["Error"] == ""
    assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == ["node-0", "node-2", "node-4"]
    assert result["NodeNames"] is None
    assert result["FailedNodes"] == {"node-1": "odd node"}
    assert result["FailedAndUnresolvableNodes"] == {"node-9": "node ends in 9"}


def test_filter_with_node_names_when_node_cache_capable(extender) -> None:
    ext = extender()
    status, result = ext.post("filter", args_with_names(pod("a"), NODE_NAMES + ["node-unknown"]))
    assert status == 200
    assert result["NodeNames"] == ["node-0", "node-2", "node-4"] and result["Nodes"] is None
    assert result["FailedNodes"] == {"node-1": "odd node"}
    # A node the node view lacks: unresolvable (preemption cannot help there either).
    assert result["FailedAndUnresolvableNodes"]["node-unknown"] == "node unknown to the extender's node view"


def test_prioritize_runs_on_the_pinned_instance_and_scales_to_0_10(extender) -> None:
    ext = extender()
    names = ["node-0", "node-2", "node-4"]
    ext.post("filter", args_with_names(pod("a"), names))
    status, result = ext.post("prioritize", args_with_names(pod("a"), names))
    assert status == 200
    # parity (weight 2) scores digit*10, checker (weight 1) scores 1 everywhere.
    expected = {n: (2 * int(n[-1]) * 10 + 1) * 10 // 300 for n in names}
    assert {h["Host"]: h["Score"] for h in result} == pytest.approx(expected, abs=1)
    assert all(0 <= h["Score"] <= 10 for h in result)
    assert ext.counts()["checker"].discarded == 0


def test_bind_through_the_kubernetes_api_when_no_guest_binds(extender) -> None:
    ext = extender()
    a = pod("a")
    ext.post("filter", args_with_names(a))
    ext.post("prioritize", args_with_names(a, ["node-2"]))
    status, result = ext.post("bind", binding(a, "node-2"))
    assert (status, result) == (200, {"Error": ""})
    assert len(ext.api.bindings) == 1
    path, body = ext.api.bindings[0]
    assert path == "/api/v1/namespaces/ns/pods/a/binding"
    assert body["target"]["name"] == "node-2" and body["target"]["kind"] == "Node"
    assert body["metadata"]["name"] == "a" and body["metadata"]["uid"] == "uid-a"
    for counts in ext.counts().values():
        assert counts.binding == 0 and counts.discarded == 0 and counts.balanced


def test_a_guest_that_binds_needs_no_api_call(extender) -> None:
    ext = extender(parity_config="bind")
    a = pod("a")
    ext.post("filter", args_with_names(a))
    ext.post("prioritize", args_with_names(a))
    assert ext.post("bind", binding(a, "node-4")) == (200, {"Error": ""})
    assert ext.api.bindings == []


def test_bind_of_a_pod_the_extender_never_saw_is_an_error_and_binds_nothing(extender) -> None:
    ext = extender()  # after a restart, kube-scheduler's binds arrive for pods this process never saw
    status, result = ext.post("bind", binding(pod("stranger"), "node-0"))
    assert status == 200 and "no scheduling cycle in this extender" in result["Error"]
    assert ext.api.bindings == [], "bound behind the guests' back"


def test_a_bind_without_prioritize_runs_the_binding_cycle_on_the_pods_own_instance(extender) -> None:
    # One feasible node: kube-scheduler skips prioritize and binds; the next pod's filter comes first.
    ext = extender(parity_config="bind")
    a, b = pod("a"), pod("b")
    assert ext.post("filter", args_with_names(a, ["node-2"]))[1]["NodeNames"] == ["node-2"]
    assert ext.post("filter", args_with_names(b, ["node-4"]))[1]["NodeNames"] == ["node-4"]
    assert ext.service.awaiting_bind() == 2
    assert ext.post("bind", binding(a, "node-2")) == (200, {"Error": ""})
    assert ext.post("bind", binding(b, "node-4")) == (200, {"Error": ""})
    assert ext.api.bindings == [], "the guest's Bind was skipped"
    counts = ext.counts()["checker"]
    assert counts.discarded == 0, "a binding call reached another pod's instance"
    assert counts.binding == 0 and counts.balanced


def test_a_bind_whose_pod_still_has_the_slot_is_served_there(extender) -> None:
    ext = extender(parity_config="bind", expect_bind=False)  # nothing held at filter
    a = pod("a")
    ext.post("filter", args_with_names(a, ["node-2"]))
    assert ext.post("bind", binding(a, "node-2")) == (200, {"Error": ""})
    assert ext.api.bindings == []
    counts = ext.counts()["checker"]
    assert counts.discarded == 0 and counts.binding == 0 and counts.balanced


def test_a_bind_naming_another_pod_under_a_held_uid_is_refused(extender) -> None:
    ext = extender()
    a = pod("a")
    ext.post("filter", args_with_names(a))
    forged = {**binding(a, "node-2"), "PodName": "someone-else"}
    status, result = ext.post("bind", forged)
    assert status == 200 and "which this extender scheduled as ns/a" in result["Error"]
    assert ext.api.bindings == [] and ext.service.awaiting_bind() == 1  # the real bind still works
    assert ext.post("bind", binding(a, "node-2")) == (200, {"Error": ""})
    assert [path for path, _ in ext.api.bindings] == ["/api/v1/namespaces/ns/pods/a/binding"]


def test_held_pods_count_against_max_instances_and_a_full_pool_is_a_clear_error(extender) -> None:
    ext = extender(max_instances=2)
    held = [pod("p0"), pod("p1")]
    for p in held:
        assert ext.post("filter", args_with_names(p))[1]["Error"] == ""
    status, result = ext.post("filter", args_with_names(pod("p2")))
    assert status == 200 and "maxInstances" in result["Error"] and result["NodeNames"] == []
    for counts in ext.counts().values():
        assert counts.live <= 2
    assert ext.post("bind", binding(held[0], "node-0")) == (200, {"Error": ""})  # gives one back
    assert ext.post("filter", args_with_names(pod("p2")))[1]["Error"] == ""


def test_filter_of_thousands_of_node_names_answers_each_node(extender) -> None:
    names = [f"node-{i}" for i in range(5000)]
    ext = extender(expect_bind=False, node_names=names)
    asked = [*names, "ghost-1", "ghost-2"]
    status, result = ext.post("filter", args_with_names(pod("a"), asked))
    assert status == 200 and result["Error"] == ""
    assert sorted(result["NodeNames"] + list(result["FailedNodes"]) + list(result["FailedAndUnresolvableNodes"])) \
        == sorted(asked)
    assert result["FailedAndUnresolvableNodes"]["ghost-1"] == "node unknown to the extender's node view"


def test_next_pods_filter_comes_before_the_previous_pods_bind(extender) -> None:
    ext = extender()
    pods = [pod(f"p{i}") for i in range(4)]
    for p in pods:  # kube-scheduler: the next scheduling cycle runs before the last binding
        assert ext.post("filter", args_with_names(p))[0] == 200
        assert ext.post("prioritize", args_with_names(p, ["node-0", "node-2"]))[0] == 200
    assert ext.service.awaiting_bind() == 4
    for p in reversed(pods):
        assert ext.post("bind", binding(p, "node-2")) == (200, {"Error": ""})
    counts = ext.counts()["checker"]
    assert counts.discarded == 0, "a binding call reached another pod's instance"
    assert counts.binding == 0 and counts.balanced


def test_an_assignment_whose_bind_never_comes_is_reclaimed(extender) -> None:
    ext = extender(bind_timeout_s=0.05)
    a = pod("a")
    with structlog.testing.capture_logs() as logs:
        ext.post("filter", args_with_names(a))
        ext.post("prioritize", args_with_names(a))
        assert ext.counts()["checker"].binding == 1
        deadline = threading.Event()
        for _ in range(100):
            if ext.service.awaiting_bind() == 0 and ext.counts()["checker"].binding == 0:
                break
            deadline.wait(0.02)
    hints = [line for line in logs if line["event"] == "extender.no_bind_seen"]
    assert len(hints) == 1 and "--no-bind" in hints[0]["reason"]  # no bind ever came: said once
    counts = ext.counts()["checker"]
    assert counts.binding == 0 and counts.idle == 1 and counts.balanced
    status, result = ext.post("bind", binding(a, "node-0"))  # too late: its state is gone
    assert status == 200 and "no scheduling cycle" in result["Error"] and ext.api.bindings == []


def test_without_bind_the_instance_stays_in_the_slot_until_the_next_filter(extender) -> None:
    ext = extender(expect_bind=False)
    for name in ("a", "b"):
        ext.post("filter", args_with_names(pod(name)))
        ext.post("prioritize", args_with_names(pod(name)))
    counts = ext.counts()["checker"]
    assert (counts.scheduling, counts.binding, counts.started) == (1, 0, 1)
    assert ext.service.awaiting_bind() == 0


def test_preempt_keeps_nodes_where_removing_victims_makes_room(extender) -> None:
    ext = extender()
    preemptor, victim = pod("preemptor"), pod("victim")
    ext.post("filter", args_with_names(preemptor))
    body = {"Pod": preemptor, "NodeNameToVictims": {
        "node-1": {"Pods": [victim], "NumPDBViolations": 0},
        "node-3": {"Pods": [], "NumPDBViolations": 1},
    }}
    status, result = ext.post("preempt", body)
    assert status == 200
    assert result == {"NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "uid-victim"}], "NumPDBViolations": 0}}}
    meta = {"Pod": preemptor, "NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "uid-victim"}]}}}
    status, result = ext.post("preempt", meta)
    assert status == 200 and list(result["NodeNameToMetaVictims"]) == ["node-1"]
    assert ext.counts()["checker"].discarded == 0


@pytest.mark.parametrize(("verb", "raw", "code", "fragment"), [
    ("filter", b"{not json", 400, "malformed JSON"),
    ("filter", b"[1, 2]", 400, "expected a JSON object"),
    ("filter", json.dumps({"Nodes": {"items": []}}).encode(), 400, "Pod"),
    ("filter", json.dumps({"Pod": {"metadata": {"name": "a"}}}).encode(), 400, "neither Nodes nor NodeNames"),
    ("prioritize", json.dumps({"Pod": {"metadata": {"name": "a"}}, "NodeNames": [1]}).encode(), 400, "NodeNames"),
    ("bind", json.dumps({"PodName": "a"}).encode(), 400, "PodNamespace"),
    ("preempt", json.dumps({"Pod": {"metadata": {"name": "a"}},
                            "NodeNameToVictims": {"n": {"Pods": "x"}}}).encode(), 400, "Pods"),
    ("nosuchverb", b"{}", 404, "no such verb"),
])
def test_bad_requests_get_clear_errors_and_the_server_stays_up(extender, verb, raw, code, fragment) -> None:
    ext = extender()
    status, body = ext.post(verb, None, raw=raw)
    assert status == code and fragment in body["error"]
    with urllib.request.urlopen(f"{ext.server.url}/healthz", timeout=10) as response:
        assert response.status == 200 and json.loads(response.read()) == {"status": "ok"}


def test_a_body_over_the_limit_is_413(extender) -> None:
    ext = extender(max_body=1000)
    status, body = ext.post("filter", args_with_nodes(pod("big"), [f"node-{i}" for i in range(100)]))
    assert status == 413 and "over the limit" in body["error"]
    assert ext.post("filter", args_with_names(pod("small")))[0] == 200


def test_binding_cycles_are_served_concurrently_while_pods_are_scheduled(extender) -> None:
    ext = extender()
    pods = [pod(f"p{i}") for i in range(40)]
    results: list[tuple[int, Any]] = []

    with ThreadPoolExecutor(8) as pool:
        futures = []
        for p in pods:  # one scheduling loop, as kube-scheduler has
            assert ext.post("filter", args_with_names(p))[0] == 200
            assert ext.post("prioritize", args_with_names(p, ["node-0", "node-2", "node-4"]))[0] == 200
            futures.append(pool.submit(ext.post, "bind", binding(p, "node-4")))
        results = [f.result() for f in futures]
    assert results == [(200, {"Error": ""})] * len(pods)
    assert len(ext.api.bindings) == len(pods)
    for name, counts in ext.counts().items():
        assert counts.binding == 0 and counts.discarded == 0 and counts.balanced, (name, counts)


class _HeldBinder:
    """Blocks every bind until released (an API server that is slow to answer)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.entered, self.released = inner, threading.Event(), threading.Event()

    def bind(self, namespace: str, name: str, uid: str, node_name: str) -> str:
        self.entered.set()
        assert self.released.wait(10), "the test never released the bind"
        error: str = self.inner.bind(namespace, name, uid, node_name)
        return error


def _bind_held_in_the_binder(ext: Extender, p: dict[str, Any], pool: ThreadPoolExecutor) -> tuple[_HeldBinder, Any]:
    """`p` scheduled and its bind started, held in the binder: (the binder, the bind's future)."""
    binder = ext.service.binder = _HeldBinder(ext.service.binder)
    assert ext.post("filter", args_with_names(p))[0] == 200
    assert ext.post("prioritize", args_with_names(p))[0] == 200
    first_bind = pool.submit(ext.post, "bind", binding(p, "node-2"))
    assert binder.entered.wait(10)
    return binder, first_bind


def test_no_cycle_of_a_pod_starts_while_its_last_bind_runs(extender) -> None:
    # kube-scheduler gave up on the bind (its HTTP call timed out) and schedules the pod
    # again while the extender's bind still runs: every verb that would start a new cycle
    # of the pod is refused at once (the scheduler retries with backoff), so each cycle's
    # calls reach its own instance (the checker traps otherwise).
    ext = extender()
    p = pod("again")
    with ThreadPoolExecutor(1) as pool:
        binder, first_bind = _bind_held_in_the_binder(ext, p, pool)
        status, result = ext.post("filter", args_with_names(p))
        assert status == 200 and "still running" in result["Error"], result
        status, result = ext.post("prioritize", args_with_names(p))
        assert status == 500 and "still running" in result["error"], result
        victims = {"Pod": p, "NodeNameToVictims": {"node-1": {"Pods": [pod("victim")]}}}
        status, result = ext.post("preempt", victims)
        assert status == 500 and "still running" in result["error"], result
        binder.released.set()
        assert first_bind.result() == (200, {"Error": ""})
    status, result = ext.post("filter", args_with_names(p))  # the retry, after the old bind
    assert status == 200 and not result.get("Error"), result
    assert ext.post("prioritize", args_with_names(p))[0] == 200
    assert ext.post("bind", binding(p, "node-2")) == (200, {"Error": ""})
    for name, counts in ext.counts().items():
        assert counts.binding == 0 and counts.discarded == 0 and counts.balanced, (name, counts)


def test_a_host_error_in_a_guest_call_reaches_the_client_as_an_error_id_only(extender, monkeypatch) -> None:
    from wasm_scheduler.actors.guest_instance import GuestInstance

    def broken_score(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("cannot open /var/lib/secret/token.txt")

    monkeypatch.setattr(GuestInstance, "score", broken_score)
    ext = extender()
    a = pod("a")
    ext.post("filter", args_with_names(a))
    with structlog.testing.capture_logs() as logs:
        status, body = ext.post("prioritize", args_with_names(a))
    assert status == 500 and "/var/lib" not in json.dumps(body) and "RuntimeError" not in json.dumps(body)
    error_id = body["error"].rsplit("error id ", 1)[1].rstrip(")")
    bugs = [line for line in logs if line["event"] == "instance.host_bug"]
    # The details are in the log, under that id (each plugin's Score met the bug: PreScore of
    # every plugin runs before Score, and a guest's PreScore brings its Score along).
    [bug] = [line for line in bugs if line["error_id"] == error_id]
    assert "cannot open /var/lib/secret/token.txt" in str(bug["exc_info"])


def test_a_forged_bind_while_the_pod_has_the_slot_leaves_its_cycle_alone(extender) -> None:
    ext = extender(expect_bind=False)  # nothing held at filter: the pod's cycle stays in the slot
    a = pod("a")
    ext.post("filter", args_with_names(a, ["node-2"]))
    forged = {**binding(a, "node-2"), "PodNamespace": "other"}
    status, result = ext.post("bind", forged)
    assert status == 200 and "which this extender schedules as ns/a" in result["Error"]
    assert ext.service.awaiting_bind() == 0 and ext.api.bindings == []
    assert ext.post("bind", binding(a, "node-2")) == (200, {"Error": ""})  # the real bind still runs
    assert [path for path, _ in ext.api.bindings] == ["/api/v1/namespaces/ns/pods/a/binding"]


def test_held_pods_keep_no_node_list_and_the_binding_cycle_reads_the_latest_nodes(extender) -> None:
    ext = extender()
    pods = [pod(f"p{i}") for i in range(3)]
    for p in pods:  # node objects in every request: each request parses its own copies
        assert ext.post("filter", args_with_nodes(p))[1]["Error"] == ""
    assert ext.service.awaiting_bind() == 3
    # One object a node, not one list a pod: the latest of each node a held pod may bind to.
    ledger = ext.service.ledger
    assert ledger.live.names() <= set(NODE_NAMES) and len(ledger.live) <= len(NODE_NAMES)
    held = [ledger.cycle_of(p["metadata"]["uid"]) for p in pods]
    assert all(cycle is not None and not any(isinstance(v, list) for v in vars(cycle).values()) for cycle in held)
    for p in pods:
        assert ext.post("bind", binding(p, "node-2")) == (200, {"Error": ""})
    counts = ext.counts()["checker"]
    assert counts.discarded == 0 and counts.binding == 0 and counts.balanced
