"""The extender's answers to an outside probe's findings, one section per finding:

1. each profile serves exactly the wasm plugins it enables, to its own pods; other pods pass through;
2. what the service and the plugins' wire caches keep is bounded by the pods in flight;
3. a node the node view lacks gets one answer in filter, prioritize, preempt and bind;
4. an idle keep-alive connection outlives Go's 90 s, apart from the read deadline of a request;
5. the signal handler takes no lock, and binds the shutdown overtakes answer a clean Error;
6. operator input: token files read like --config, time options and limits in range, TLS files named for what they are;
7. the verb paths are the operator's (kube-scheduler's filterVerb, ...).
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest
import structlog.testing
import yaml

from tests.conftest import EXAMPLES, GUESTS
from wasm_scheduler.actors.kube import wire_cache
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender, Signals, load_profiles
from wasm_scheduler.adapters.extender.nodes import NodeCache
from wasm_scheduler.adapters.extender.server import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_READ_TIMEOUT_S,
    ExtenderServer,
    ServerLimits,
    Verbs,
)
from wasm_scheduler.adapters.extender.service import ExtenderService, Footprint, ServedProfile, WeightedPlugin
from wasm_scheduler.adapters.framework.config import load_config
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig

ROOT = Path(__file__).resolve().parents[1]
PARITY = str(GUESTS / "parity.wat")
CHECKER = str(GUESTS / "checker.wat")
API = "kubescheduler.config.k8s.io/v1"


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}}


def pod(name: str, scheduler: str = "", note: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if note:
        meta["annotations"] = {"note": note}
    return {"metadata": meta, "spec": spec}


def whole(p: dict[str, Any], names: list[str]) -> protocol.ExtenderArgs:
    return protocol.ExtenderArgs.decode({"Pod": p, "Nodes": {"metadata": {}, "items": [node(n) for n in names]}})


def by_name(p: dict[str, Any], names: list[str]) -> protocol.ExtenderArgs:
    return protocol.ExtenderArgs.decode({"Pod": p, "NodeNames": names})


def binding(p: dict[str, Any], node_name: str) -> protocol.BindingArgs:
    meta = p["metadata"]
    return protocol.BindingArgs.decode({"PodName": meta["name"], "PodNamespace": meta["namespace"],
                                        "PodUID": meta["uid"], "Node": node_name})


class RecordingBinder:
    """Records the Bindings it is asked for; blocks on `gate` when one is given, then answers `error`."""

    def __init__(self, gate: threading.Event | None = None, error: str = "") -> None:
        self.bound: list[tuple[str, str]] = []
        self.gate = gate
        self.entered = threading.Event()
        self.error = error

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(20)
        self.bound.append((f"{namespace}/{name}", node))
        return self.error


def write_config(tmp_path: Path, profiles: list[dict[str, Any]]) -> Path:
    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": API, "kind": "KubeSchedulerConfiguration", "profiles": profiles}))
    return path


def close_all(profiles: list[ServedProfile]) -> None:
    for profile in profiles:
        for wp in profile.plugins:
            wp.plugin.close()


# 1. profiles and enablement ----------------------------------------------------------------

PROFILES = [
    # A wasm pluginConfig entry that this profile disables in multiPoint and score: not served,
    # so default-scheduler's pods pass through.
    {"schedulerName": "default-scheduler",
     "plugins": {"multiPoint": {"disabled": [{"name": "Parity"}]}, "score": {"disabled": [{"name": "Parity"}]}},
     "pluginConfig": [{"name": "Parity", "args": {"guestURL": PARITY}}]},
    # Both plugins everywhere they implement, except Checker at score.
    {"schedulerName": "wasm-scheduler",
     "plugins": {"multiPoint": {"enabled": [{"name": "Parity", "weight": 3}, {"name": "Checker"}]},
                 "score": {"disabled": [{"name": "Checker"}]}},
     "pluginConfig": [{"name": "Parity", "args": {"guestURL": PARITY}},
                      {"name": "Checker", "args": {"guestURL": CHECKER}}]},
    # Every filter plugin disabled with "*": Parity scores only.
    {"schedulerName": "score-only",
     "plugins": {"multiPoint": {"enabled": [{"name": "Parity"}]}, "filter": {"disabled": [{"name": "*"}]}},
     "pluginConfig": [{"name": "Parity", "args": {"guestURL": PARITY}}]},
]


@pytest.fixture
def profiles(tmp_path: Path, compiler: GuestCompiler) -> Iterator[list[ServedProfile]]:
    served = load_profiles(load_config(write_config(tmp_path, PROFILES)), compiler)
    yield served
    close_all(served)


def test_each_profile_serves_exactly_the_wasm_plugins_it_enables(profiles: list[ServedProfile]) -> None:
    served = {p.scheduler_name: p for p in profiles}
    assert sorted(served) == ["score-only", "wasm-scheduler"]  # default-scheduler enables no wasm plugin
    wasm = served["wasm-scheduler"].framework
    assert wasm.names("filter") == ["Parity", "Checker"] and wasm.names("score") == ["Parity"]
    assert wasm.score_weights == {"Parity": 3}
    score_only = served["score-only"].framework
    assert score_only.names("filter") == [] and score_only.names("score") == ["Parity"]
    # Each profile has its own instances, as kube-scheduler makes each profile's plugins.
    assert served["score-only"].plugins[0].plugin is not served["wasm-scheduler"].plugins[0].plugin


def test_pods_are_served_by_their_profile_and_other_pods_pass_through(profiles: list[ServedProfile]) -> None:
    binder = RecordingBinder()
    names = ["node-1", "node-2", "node-3", "node-4"]
    with ExtenderService(profiles, binder=binder) as service:
        mine, theirs, stranger = pod("w", "wasm-scheduler"), pod("d"), pod("s", "someone-else")
        assert service.filter(whole(mine, names))["Nodes"]["items"] == [node("node-2"), node("node-4")]
        # Parity alone scores (Checker is disabled at score): digit * 10 at weight 3 -> the digit.
        assert service.prioritize(whole(mine, ["node-2", "node-4"])) == [
            {"Host": "node-2", "Score": 2}, {"Host": "node-4", "Score": 4}]
        for other in (theirs, stranger):  # untouched: every node passes, every score is 0
            passed = service.filter(whole(other, names))
            assert passed["Nodes"]["items"] == [node(n) for n in names] and not passed["FailedNodes"]
            assert service.prioritize(whole(other, names)) == [{"Host": n, "Score": 0} for n in names]
            victims = protocol.PreemptionArgs.decode(
                {"Pod": other, "NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}}})
            assert service.preempt(victims) == {
                "NodeNameToMetaVictims": {"node-1": {"Pods": [{"UID": "v1"}], "NumPDBViolations": 1}}}
        # A passed-through pod's bind goes to the API (as DefaultBinder would), only to a node of its filter.
        assert service.bind(binding(theirs, "node-9"))["Error"]
        assert service.bind(binding(theirs, "node-3")) == {"Error": ""}
        assert service.bind(binding(mine, "node-4")) == {"Error": ""}
        assert binder.bound == [("ns/d", "node-3"), ("ns/w", "node-4")]
        # The score-only profile's Parity has no filter: its pods' odd nodes pass.
        only = pod("o", "score-only")
        assert service.filter(whole(only, names))["Nodes"]["items"] == [node(n) for n in names]


def test_the_extender_refuses_a_configuration_whose_profiles_enable_no_wasm_plugin(tmp_path: Path, capsys) -> None:
    path = write_config(tmp_path, PROFILES[:1])
    assert main(["extender", "--config", str(path), "--listen", "127.0.0.1:0", "--no-bind",
                 "--cluster", str(EXAMPLES / "cluster.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no profile enables a plugin whose pluginConfig args carry guestURL" in err and "\n" not in err


# 2. memory kept after release ---------------------------------------------------------------


@pytest.fixture
def plugins(compiler: GuestCompiler) -> Iterator[list[WasmPlugin]]:
    made = [WasmPlugin.load(PluginConfig("parity", PARITY), compiler),
            WasmPlugin.load(PluginConfig("checker", CHECKER), compiler)]  # checker reads every call's pod
    yield made
    for plugin in made:
        plugin.close()


def test_what_the_service_keeps_is_bounded_by_the_pods_in_flight(plugins: list[WasmPlugin]) -> None:
    now = [0.0]
    binder = RecordingBinder()
    empty = Footprint(held=0, binding=0, passed_through=0, slot=0, live_nodes=0)
    with ExtenderService([WeightedPlugin(p) for p in plugins], binder=binder, bind_timeout_s=30.0,
                         clock=lambda: now[0]) as service:
        for soak in range(3):  # every round brings new node names (the probe sent 50,000)
            names = [f"r{soak}-node-{i}" for i in range(400)]
            pods = [pod(f"r{soak}-p{i}", note="x" * 4096) for i in range(20)]
            for p in pods:
                assert service.filter(whole(p, names))["Error"] == ""
            other = pod(f"r{soak}-other", "someone-else")
            service.filter(whole(other, names))
            kept = service.footprint()
            assert (kept.held, kept.passed_through, kept.slot) == (20, 1, 0)
            assert kept.live_nodes == 200  # the even nodes the held pods may bind to, one object each
            assert all(p.wire_cache.sizes()[1] <= 20 for p in plugins)
            for p in pods[:10]:  # half are bound, the other half never hear of their bind
                assert service.bind(binding(p, names[0]))["Error"] == ""
            now[0] += 31.0
            service.reclaim_expired()
            service.trim_wire_caches()
            assert service.footprint() == empty, soak
            # The plugins keep no pod's bytes, and no node's, once the pods are gone.
            assert [p.wire_cache.sizes() for p in plugins] == [(0, 0, 0), (0, 0, 0)], soak


def test_a_cycle_left_in_the_slot_is_given_up_after_the_bind_timeout(plugins: list[WasmPlugin]) -> None:
    now = [0.0]
    with ExtenderService([WeightedPlugin(p) for p in plugins], bind_timeout_s=30.0, clock=lambda: now[0]) as service:
        lonely = pod("lonely")
        assert service.filter(whole(lonely, ["node-1", "node-3"]))["Nodes"]["items"] == []  # no node: not held
        assert service.footprint().slot == 1 and service.footprint().live_nodes == 2  # a preempt may follow
        now[0] += 31.0
        service.reclaim_expired()
        assert service.footprint() == Footprint(0, 0, 0, 0, 0)
        assert all(p.counts().balanced for p in plugins)


def test_the_wire_cache_forgets_a_pod_when_its_cycle_ends_and_nodes_no_longer_live() -> None:
    cache = wire_cache.WireCache()
    a, victim = pod("a"), pod("victim")
    cache.pod(a)
    cache.pod(victim, target=True)
    nodes = [node(f"n{i}") for i in range(3)]
    cache.node_list(nodes)
    assert cache.sizes() == (3, 1, 1)
    cache.forget_pod("uid-a")
    assert cache.sizes() == (3, 0, 0)  # the victims a cycle read go with it
    assert cache.retain_nodes(lambda name, obj: obj is nodes[0]) == 2
    assert cache.sizes() == (1, 0, 0) and cache._list is None


def test_an_instance_remembers_no_more_node_names_than_its_recent_batches(compiler: GuestCompiler) -> None:
    from tests.test_node_loop import NAMED_GUEST, POD
    from wasm_scheduler.actors.guest_instance import GuestInstance
    from wasm_scheduler.vocabulary import EmptyHandle

    guest = compiler.compile("named", "named.wat", NAMED_GUEST.encode())
    instance = GuestInstance(guest, PluginConfig("named", "named.wat"), "named-1")
    loop = instance._loop
    if loop is None:
        pytest.skip("the per-node loop is not available here")
    for batch in range(8):  # new node names every batch, as a cluster whose nodes come and go
        names = [f"o-{batch}-{i}" for i in range(2000)]
        assert len(instance.filter(POD, names, EmptyHandle()).statuses) == 2000
        assert len(loop._entries) <= 2 * 2000


# 3. a node the node view lacks ---------------------------------------------------------------


def test_a_node_the_node_view_lacks_gets_one_answer_in_every_verb(plugins: list[WasmPlugin]) -> None:
    cache = NodeCache(lambda: ([node("node-2"), node("node-4")], []))
    cache.refresh()
    with ExtenderService([WeightedPlugin(plugins[0])], cache) as service:
        p = pod("p")
        result = service.filter(by_name(p, ["node-2", "ghost-2"]))
        assert result["NodeNames"] == ["node-2"]
        assert result["FailedAndUnresolvableNodes"] == {"ghost-2": "node unknown to the extender's node view"}
        assert service.prioritize(by_name(p, ["node-2", "ghost-2"])) == [
            {"Host": "node-2", "Score": 2}, {"Host": "ghost-2", "Score": 0}]
        assert "did not pass" in service.bind(binding(p, "ghost-2"))["Error"]
        # A preempt (here the first call of its pod's cycle) approves no victim on it, where the
        # known node's victims are approved (parity passes every node while a victim is removed).
        q = pod("q")
        args = protocol.PreemptionArgs.decode({"Pod": q, "NodeNameToMetaVictims": {
            "ghost-2": {"Pods": [{"UID": "v1"}]}, "node-4": {"Pods": [{"UID": "v2"}]}}})
        assert list(service.preempt(args)["NodeNameToMetaVictims"]) == ["node-4"]


# 4. keep-alive --------------------------------------------------------------------------------


class QuickService:
    """Answers every verb at once."""

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        return {"NodeNames": list(args.node_names), "FailedNodes": {}, "Error": ""}

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        return [{"Host": n, "Score": 1} for n in args.node_names]

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        return {"Error": ""}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        return {"NodeNameToMetaVictims": {}}

    def close(self) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Callable[..., ExtenderServer]]:
    made: list[ExtenderServer] = []

    def make(service: Any = None, verbs: Verbs | None = None, **limits: Any) -> ExtenderServer:
        limits.setdefault("drain_s", 2.0)
        server = ExtenderServer(("127.0.0.1", 0), service or QuickService(), limits=ServerLimits(**limits),
                                verbs=verbs)
        made.append(server)
        return server.start_background()

    yield make
    for server in made:
        server.stop()


REQUEST = (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
           % (len(body := json.dumps({"Pod": pod("p"), "NodeNames": ["a"]}).encode()), body))


def read_answer(sock: socket.socket) -> bytes:
    """One HTTP answer (headers and a Content-Length body); b"" when the server closed the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lengths = [line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    length = int(lengths[0])
    while len(rest) < length:
        rest += sock.recv(65536)
    return head


def test_an_idle_connection_outlives_the_read_timeout_until_the_idle_timeout(serve) -> None:
    server = serve(read_timeout_s=0.3, idle_timeout_s=1.5)
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(REQUEST)
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(0.8)  # idle past the read timeout: still open
        sock.sendall(REQUEST)
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert sock.recv(1) == b""  # idle past the idle timeout: closed by the server
        assert 1.0 < time.monotonic() - started < 5


def test_a_request_begun_after_idling_still_has_only_the_read_timeout(serve) -> None:
    server = serve(read_timeout_s=0.3, idle_timeout_s=5.0)
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(REQUEST)
        assert read_answer(sock).startswith(b"HTTP/1.1 200")
        time.sleep(0.5)
        sock.sendall(REQUEST[:10])  # the next request's first bytes, then nothing
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - started < 2  # the read deadline, not the idle timeout


def test_the_idle_timeout_is_above_gos_90_seconds_and_apart_from_the_read_timeout(tmp_path: Path) -> None:
    assert DEFAULT_IDLE_TIMEOUT_S > 90 and DEFAULT_READ_TIMEOUT_S == 30
    limits = ExtenderOptions(tmp_path / "s.yaml").limits()
    assert limits.idle_timeout_s == 120 and limits.read_timeout_s == 30


# 5. shutdown ----------------------------------------------------------------------------------


def test_the_signal_handler_takes_no_lock_and_calls_nothing() -> None:
    signals = Signals()
    calls: list[tuple[str, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            calls.append((event, getattr(arg, "__qualname__", "") if event == "c_call" else frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        signals.on_signal(signal.SIGTERM, None)
    finally:
        sys.setprofile(None)
    assert calls[0] == ("call", "on_signal")
    assert [call for call in calls[1:] if call != ("c_call", "setprofile")] == []  # no lock, no function at all
    assert signals.count == 1 and not signals.hurry.is_set()
    signals.on_signal(signal.SIGTERM, None)
    assert signals.hurry.is_set()


def test_signals_stop_the_extender_and_a_second_one_cuts_the_drain_short(tmp_path: Path) -> None:
    config = write_config(tmp_path, [{"schedulerName": "default-scheduler",
                                      "plugins": {"multiPoint": {"enabled": [{"name": "Slow"}]}},
                                      "pluginConfig": [{"name": "Slow", "args": {
                                          "guestURL": str(GUESTS / "slow.wat"), "limits": {"callTimeoutMs": 60000}}}]}])
    process = subprocess.Popen(
        [sys.executable, "-m", "wasm_scheduler.adapters.cli", "--log-level", "info", "--log-format", "json", "extender",
         "--config", str(config), "--listen", "127.0.0.1:0", "--no-bind", "--drain-seconds", "60",
         "--cluster", str(EXAMPLES / "cluster.yaml")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stderr is not None
        url = process.stdout.readline().split(" at ", 1)[1].strip()
        host, port = url.removeprefix("http://").split(":")
        body = json.dumps({"Pod": pod("p"), "Nodes": {"items": [node(f"n{i}") for i in range(3000)]}})
        client = http.client.HTTPConnection(host, int(port), timeout=60)
        threading.Thread(target=lambda: client.request("POST", "/filter", body), daemon=True).start()
        for line in process.stderr:  # the filter is running on an instance
            if '"assignment.acquired"' in line:
                break
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)  # heard: the drain of up to 60 s ends now
        assert process.wait(timeout=30) == 0
        assert time.monotonic() - started < 25
        records = [json.loads(line) for line in process.stderr.read().splitlines() if line.startswith("{")]
        assert "extender.drain_incomplete" in [r["event"] for r in records]
        assert not [r for r in records if r.get("level") == "error" or "exc_info" in r or "exception" in r]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("api_error", ["", "the API server is unreachable"], ids=["bound", "api-failed"])
def test_a_bind_the_shutdown_overtakes_answers_without_a_traceback(plugins: list[WasmPlugin], api_error: str) -> None:
    gate = threading.Event()
    binder = RecordingBinder(gate, api_error)
    service = ExtenderService([WeightedPlugin(p) for p in plugins], binder=binder)
    server = ExtenderServer(("127.0.0.1", 0), service, limits=ServerLimits(drain_s=0.2)).start_background()
    host, port = server.server_address[:2]
    p = pod("p")
    answers: list[tuple[int, Any]] = []

    def call(verb: str, body: Any) -> None:
        connection = http.client.HTTPConnection(str(host), int(port), timeout=30)
        connection.request("POST", f"/{verb}", json.dumps(body))
        response = connection.getresponse()
        answers.append((response.status, json.loads(response.read())))

    call("filter", {"Pod": p, "NodeNames": None, "Nodes": {"items": [node("node-2")]}})
    bind = threading.Thread(target=call, args=("bind", {"PodName": "p", "PodNamespace": "ns", "PodUID": "uid-p",
                                                         "Node": "node-2"}))
    with structlog.testing.capture_logs() as logs:
        bind.start()
        assert binder.entered.wait(10)
        server.stop()  # the drain gives up after 0.2 s
        service.close()
        for plugin in plugins:
            plugin.close()
        gate.set()
        bind.join(20)
    assert not bind.is_alive()
    status, answer = answers[-1]
    assert status == 200
    if api_error:
        assert "the extender stopped before the bind finished" in answer["Error"]
        assert [line["event"] for line in logs if line["log_level"] == "warning"] == [
            "extender.drain_incomplete", "extender.stopped_mid_request"]
    else:
        assert answer == {"Error": ""}  # the Binding was made: the pod is bound
    assert not [line for line in logs if line["log_level"] == "error" or "exc_info" in line]


def test_a_request_the_shutdown_overtakes_is_a_503_with_a_warning(serve) -> None:
    class Overtaken(QuickService):
        entered, release = threading.Event(), threading.Event()

        def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
            self.entered.set()
            self.release.wait(10)
            raise pykka.ActorDeadError("the plugin stopped")

    service = Overtaken()
    server = serve(service, drain_s=0.1)
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=30)
    with structlog.testing.capture_logs() as logs:
        threading.Thread(target=connection.request,
                         args=("POST", "/filter", json.dumps({"Pod": pod("p"), "NodeNames": []}))).start()
        assert service.entered.wait(10)
        server.drain()
        service.release.set()
        response = connection.getresponse()
        assert response.status == 503 and "drain time ran out" in json.loads(response.read())["error"]
    assert [line["event"] for line in logs if line["log_level"] in ("warning", "error")] == [
        "extender.drain_incomplete", "extender.stopped_mid_request"]


# 6. operator input ----------------------------------------------------------------------------


def extender(*args: str) -> list[str]:
    return ["extender", "--config", str(EXAMPLES / "scheduler-config.yaml"), "--listen", "127.0.0.1:0",
            "--cluster", str(EXAMPLES / "cluster.yaml"), *args]


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str], *expected: str) -> str:
    outcome: list[int] = []
    thread = threading.Thread(target=lambda: outcome.append(main(argv)), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), f"{argv} hung"
    err = capsys.readouterr().err.strip()
    assert outcome == [2] and err.startswith("error: ") and "\n" not in err, err
    for text in expected:
        assert text in err, err
    return err


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_token_file_that_is_a_device_is_refused_without_reading_it(capsys) -> None:
    one_line_exit_2(extender("--token-file", "/dev/zero"), capsys, "--token-file /dev/zero", "a character device")


def test_a_token_file_that_is_a_fifo_does_not_hang(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    one_line_exit_2(extender("--token-file", str(fifo)), capsys, "--token-file", "a FIFO")


def test_a_huge_token_file_is_refused(tmp_path: Path, capsys) -> None:
    big = tmp_path / "token"
    big.write_bytes(b"t" * (1024 * 1024))
    one_line_exit_2(extender("--token-file", str(big)), capsys, "--token-file", "too large")


@pytest.mark.parametrize(("option", "value", "valid"), [
    ("--bind-timeout", "nan", "more than 0, at most 3600"),
    ("--bind-timeout", "0", "more than 0, at most 3600"),
    ("--drain-seconds", "inf", "from 0 to 3600"),
    ("--drain-seconds", "-1", "from 0 to 3600"),
    ("--read-timeout", "nan", "more than 0, at most 3600"),
    ("--idle-timeout", "1e9", "more than 0, at most 3600"),
    ("--snapshot-poll", "-inf", "more than 0, at most 3600"),
])
def test_time_options_out_of_range_are_one_line(capsys, option: str, value: str, valid: str) -> None:
    one_line_exit_2(extender(f"{option}={value}"), capsys,
                    f"error: {option} {float(value)}: expected a number of seconds", valid)


@pytest.mark.parametrize(("limits", "expected"), [
    ({"limits": {"memoryLimitMiB": 99999999999}}, "args.limits.memoryLimitMiB must be a whole number from 1 to 4096"),
    ({"limits": {"callTimeoutMs": 10**12}}, "args.limits.callTimeoutMs must be a whole number from 1 to 3600000"),
    ({"pool": {"idleSeconds": float("nan")}}, "args.pool.idleSeconds must be a number from 0 to 86400"),
    ({"pool": {"maxInstances": 10**9}}, "args.pool.maxInstances must be a number from 0 to 65536"),
])
def test_plugin_limits_out_of_range_are_one_line(tmp_path: Path, capsys, limits: dict[str, Any],
                                                 expected: str) -> None:
    config = write_config(tmp_path, [{"plugins": {"multiPoint": {"enabled": [{"name": "Parity"}]}},
                                      "pluginConfig": [{"name": "Parity", "args": {"guestURL": PARITY, **limits}}]}])
    one_line_exit_2(["extender", "--config", str(config), "--listen", "127.0.0.1:0", "--no-bind",
                     "--cluster", str(EXAMPLES / "cluster.yaml")], capsys, expected)


def test_tls_files_that_are_not_regular_files_say_what_they_are(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "cert.pem"
    os.mkfifo(fifo)
    key = tmp_path / "key.pem"
    key.write_text("not used\n")
    one_line_exit_2(extender("--tls-cert", str(fifo), "--tls-key", str(key)), capsys,
                    f"--tls-cert {fifo}: is a FIFO (named pipe), not a regular file")
    one_line_exit_2(extender("--tls-cert", str(tmp_path), "--tls-key", str(key)), capsys,
                    f"--tls-cert {tmp_path}: is a directory, not a regular file")
    one_line_exit_2(extender("--tls-cert", str(tmp_path / "none.pem"), "--tls-key", str(key)), capsys,
                    "none.pem: no such file")


# 7. verb paths ---------------------------------------------------------------------------------


def post(server: ExtenderServer, path: str, body: Any) -> tuple[int, Any]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
    connection.request("POST", path, json.dumps(body))
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def test_the_verbs_are_served_at_the_paths_the_operator_configures(serve) -> None:
    server = serve(verbs=Verbs(filter="wasm/filter", prioritize="score", bind="bind", preempt="preempt"))
    args = {"Pod": pod("p"), "NodeNames": ["a"]}
    assert post(server, "/wasm/filter", args)[0] == 200
    assert post(server, "/scheduler/wasm/filter", args)[0] == 200  # under a urlPrefix with a path
    assert post(server, "/scheduler/score", args) == (200, [{"Host": "a", "Score": 1}])
    status, answer = post(server, "/filter", args)
    assert status == 404 and "/wasm/filter, /score, /bind, /preempt" in answer["error"]


def test_the_verb_options_reach_the_server(capsys) -> None:
    running = RunningExtender(ExtenderOptions(EXAMPLES / "scheduler-config.yaml", "127.0.0.1:0",
                                              EXAMPLES / "cluster.yaml", expect_bind=False,
                                              verbs=Verbs(filter="wasm-filter")))
    try:
        running.server.start_background()
        status, answer = post(running.server, "/wasm-filter", {"Pod": pod("web-3"), "NodeNames": ["node-03"]})
        assert status == 200 and answer["NodeNames"] == ["node-03"]
        assert post(running.server, "/filter", {"Pod": pod("web-3"), "NodeNames": ["node-03"]})[0] == 404
    finally:
        running.close()
        running.compiler.close()
    for bad in (["--filter-verb", "a b"], ["--bind-verb", "filter"]):
        one_line_exit_2(extender(*bad), capsys, bad[0])
