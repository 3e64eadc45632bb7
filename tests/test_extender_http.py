"""The extender's HTTP server under hostile or unlucky clients, over real sockets on 127.0.0.1.

A stub service stands in for `ExtenderService` (answers at once, blocks on demand, or
fails like a bug would), so each test checks one property of the server: the listen
backlog, the read deadline, the connection cap, request framing (aiohttp's parser: a 4xx,
never a 500 or a hang), nesting, HEAD, 500 bodies, stderr, TLS and client certificates,
the bearer token, the drain, silent-connection floods (plain and TLS), slow clients, the
verbs' thread pool and extra GET routes. One test runs the real `extender` command with
a slow guest and sends it SIGTERM mid-request.
"""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog.testing
import yaml

from tests.conftest import GUESTS
from wasm_scheduler.adapters.extender import protocol
from wasm_scheduler.adapters.extender.command import ExtenderOptions
from wasm_scheduler.adapters.extender.server import (
    ExtenderServer,
    ServerLimits,
    ServerSecurity,
    read_token,
    tls_context,
)
from wasm_scheduler.adapters.framework.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
FILTER_BODY = json.dumps({"Pod": POD, "NodeNames": ["a", "b"]}).encode()


class StubService:
    """Answers filter at once; bind waits for `release`; prioritize fails like a bug."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def filter(self, args: protocol.ExtenderArgs) -> dict[str, Any]:
        return {"NodeNames": list(args.node_names or []), "FailedNodes": {}, "Error": ""}

    def prioritize(self, args: protocol.ExtenderArgs) -> list[dict[str, Any]]:
        raise RuntimeError("cannot open /etc/secret/weights.py")

    def bind(self, args: protocol.BindingArgs) -> dict[str, Any]:
        self.entered.set()
        self.release.wait(20)
        return {"Error": ""}

    def preempt(self, args: protocol.PreemptionArgs) -> dict[str, Any]:
        return {"NodeNameToMetaVictims": {}}

    def close(self) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Callable[..., ExtenderServer]]:
    made: list[tuple[ExtenderServer, StubService]] = []

    def make(start: bool = True, security: ServerSecurity | None = None, **limits: Any) -> ExtenderServer:
        service = StubService()
        limits.setdefault("drain_s", 5.0)
        server = ExtenderServer(("127.0.0.1", 0), service, limits=ServerLimits(**limits),  # type: ignore[arg-type]
                                security=security)
        made.append((server, service))
        return server.start_background() if start else server

    yield make
    for server, service in made:
        service.release.set()
        if server._thread is None:
            server.server_close()
        else:
            server.stop()


def stub(server: ExtenderServer) -> StubService:
    service = server.service
    assert isinstance(service, StubService)
    return service


def connect(server: ExtenderServer, timeout: float = 10) -> socket.socket:
    host, port = server.server_address[:2]
    return socket.create_connection((host, port), timeout=timeout)


def exchange(server: ExtenderServer, raw: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    with connect(server) as sock:
        sock.sendall(raw)
        return read_to_end(sock)


def read_to_end(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def post(server: ExtenderServer, verb: str, body: bytes, headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(f"{server.url}/{verb}", data=body, method="POST", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


# 1. backlog -------------------------------------------------------------------------


def _accept_queue(sock: socket.socket) -> tuple[int, int]:
    """(connections waiting to be accepted, the queue's length) of a listening socket (Linux TCP_INFO)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    unacked, sacked = struct.unpack_from("II", info, 24)
    return unacked, sacked


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the accept queue through TCP_INFO")
def test_the_listen_backlog_holds_hundreds_of_simultaneous_connects(serve) -> None:
    server = serve(start=False)
    assert _accept_queue(server.socket)[1] >= 128
    clients = [connect(server) for _ in range(200)]
    try:
        # Nothing accepts yet: every handshake completed into the kernel's queue, none was dropped.
        assert wait_for(lambda: _accept_queue(server.socket)[0] == 200, timeout=5), _accept_queue(server.socket)
        server.start_background()
        for sock in clients:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for sock in clients:
            assert read_to_end(sock).startswith(b"HTTP/1.1 200 ")
    finally:
        for sock in clients:
            sock.close()


# 2. read deadline, keep-alive ---------------------------------------------------------


def test_a_silent_client_is_dropped_after_the_read_timeout(serve) -> None:
    server = serve(read_timeout_s=0.3)
    with connect(server) as sock:
        assert read_to_end(sock) == b""  # closed by the server, no answer
    assert wait_for(lambda: server.open_connections == 0)


def test_a_half_sent_body_is_dropped_after_the_read_timeout(serve) -> None:
    server = serve(read_timeout_s=0.3)
    with connect(server) as sock:
        sock.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"Pod\":")
        assert read_to_end(sock) == b""


def test_a_trickling_client_is_dropped_at_the_deadline_even_while_it_sends(serve) -> None:
    server = serve(read_timeout_s=0.5)
    with connect(server) as sock:
        sent = 0
        with pytest.raises(OSError):  # the server closed: a send fails (reset or broken pipe)
            while sent < 100:  # 100 bytes at 0.05 s each would take 5 s: far past the 0.5 s deadline
                sock.sendall(b"X-Header-Byte: 1\r\n"[:1])
                sent += 1
                time.sleep(0.05)
        assert sent < 100


def test_keep_alive_serves_several_requests_on_one_connection(serve) -> None:
    server = serve(read_timeout_s=2)
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        sockets = []
        for _ in range(3):
            connection.request("POST", "/filter", body=FILTER_BODY)
            response = connection.getresponse()
            assert response.status == 200 and json.loads(response.read())["NodeNames"] == ["a", "b"]
            sockets.append(connection.sock)
            time.sleep(0.2)  # idle between requests, well inside the read timeout
        assert sockets[0] is not None and sockets.count(sockets[0]) == 3  # one connection served all three
    finally:
        connection.close()


# 3. connection cap --------------------------------------------------------------------


def test_connections_over_the_cap_get_a_quick_503_and_no_thread(serve) -> None:
    server = serve(max_connections=2)
    held = [connect(server), connect(server)]
    try:
        assert wait_for(lambda: server.open_connections == 2)
        threads = threading.active_count()
        with connect(server) as extra:
            answer = read_to_end(extra)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"too many connections" in answer
        assert threading.active_count() == threads and server.open_connections == 2
        held.pop().close()
        assert wait_for(lambda: server.open_connections == 1)
        assert post(server, "filter", FILTER_BODY)[0] == 200
    finally:
        for sock in held:
            sock.close()


# 4. framing ---------------------------------------------------------------------------


def _request(headers: str, body: bytes = b"") -> bytes:
    return f"POST /filter HTTP/1.1\r\nHost: x\r\n{headers}\r\n".encode() + body


@pytest.mark.parametrize(("raw", "fragment"), [
    (_request("Content-Length: -1\r\n"), b"Content-Length"),
    (_request("Content-Length: 1e3\r\n"), b"Content-Length"),
    (_request("Content-Length: \xb2\r\n"), b"Content-Length"),
    (_request("Content-Length: 5\r\nContent-Length: 6\r\n", b"{}    "), b"Duplicate Content-Length"),
    (b"GARBAGE /filter HTTP/1.1\r\nHost: x\r\n\r\n", b"method"),
    (b"POST /filter HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 70_000 + b"\r\n\r\n", b""),
], ids=["negative", "not-a-number", "unicode-digit", "two-lengths", "bad-method", "huge-header"])
def test_bad_framing_is_a_400_and_the_connection_closes(serve, raw: bytes, fragment: bytes) -> None:
    # aiohttp's own answer (its HTTP parser refuses the request): a 400, then the connection closes
    # (`exchange` reads until it does); never a 500, never a hang.
    server = serve()
    answer = exchange(server, raw)
    assert re.match(rb"HTTP/1\.[01] 400 ", answer) and fragment in answer, answer[:300]
    assert len(re.findall(rb"HTTP/1\.[01] \d{3} ", answer)) == 1
    assert post(server, "filter", FILTER_BODY)[0] == 200


def test_a_chunked_body_is_read_and_held_to_the_body_limit(serve) -> None:
    server = serve(max_body=1000)
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(FILTER_BODY), FILTER_BODY)
    answer = exchange(server, _request("Transfer-Encoding: chunked\r\nConnection: close\r\n", chunked))
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"NodeNames":["a","b"]' in answer
    big = b"[" + b"1," * 1000 + b"1]"
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (big[:1500], big[1500:])) + b"0\r\n\r\n"
    answer = exchange(server, _request("Transfer-Encoding: chunked\r\n", chunked))
    assert answer.startswith(b"HTTP/1.1 413 ") and b"over the limit of 1000" in answer


def test_content_length_with_transfer_encoding_is_refused_and_nothing_is_smuggled(serve) -> None:
    smuggled = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    body = b"0\r\n\r\n" + smuggled
    raw = _request(f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n", body)
    answer = exchange(serve(), raw)
    assert re.match(rb"HTTP/1\.[01] 400 ", answer)
    assert b"Transfer-Encoding can't be present with Content-Length" in answer
    assert len(re.findall(rb"HTTP/1\.[01] \d{3} ", answer)) == 1  # the request hidden in the body was never served


def test_a_body_cut_short_by_the_clients_close_gets_no_answer_and_no_hang(serve) -> None:
    server = serve(read_timeout_s=0.5)
    with connect(server) as sock:
        sock.sendall(_request("Content-Length: 50\r\n", b"{}"))
        sock.shutdown(socket.SHUT_WR)  # the rest of the body never comes: closed at the read deadline
        assert read_to_end(sock) == b""
    assert wait_for(lambda: server.open_connections == 0)
    assert post(server, "filter", FILTER_BODY)[0] == 200


def test_a_request_whole_before_the_clients_close_is_answered(serve) -> None:
    server = serve()
    with connect(server) as sock:
        sock.sendall(_request(f"Content-Length: {len(FILTER_BODY)}\r\n", FILTER_BODY))
        sock.shutdown(socket.SHUT_WR)  # a half-close (`nc -N`): the answer still comes
        answer = read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"NodeNames":["a","b"]' in answer


def test_a_body_over_the_limit_is_413_before_it_is_read(serve) -> None:
    server = serve(max_body=1000)
    with connect(server) as sock:
        sock.sendall(_request("Content-Length: 100000000\r\n", b"{"))
        answer = read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 413 ") and b"over the limit of 1000" in answer


# 5. nesting -----------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000,
                                  b'{"Pod":' * 50_000 + b"{}" + b"}" * 50_000], ids=["list", "object"])
def test_deeply_nested_json_is_400(serve, body: bytes) -> None:
    server = serve()
    status, answer = post(server, "filter", body)
    assert status == 400 and "nested too deeply" in answer["error"]
    assert post(server, "filter", FILTER_BODY)[0] == 200


# 6. HEAD -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/livez"])
def test_head_on_health_answers_200_with_headers_only(serve, path: str) -> None:
    server = serve()
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(host, port, timeout=10)
    try:
        connection.request("HEAD", path)
        response = connection.getresponse()
        assert response.status == 200 and int(response.headers["Content-Length"]) > 0
        assert response.read() == b""
        connection.request("GET", path)  # no stray body bytes were left on the connection
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read()) == {"status": "ok"}
        connection.request("HEAD", "/nothing")
        assert connection.getresponse().status == 404
    finally:
        connection.close()


# 7, 8. errors: generic 500 bodies, nothing raw on stderr ----------------------------------


def test_a_500_body_has_no_exception_text_and_its_error_id_is_logged(serve) -> None:
    server = serve()
    with structlog.testing.capture_logs() as logs:
        status, answer = post(server, "prioritize", FILTER_BODY)
    assert status == 500
    assert "/etc/secret" not in answer["error"] and "RuntimeError" not in answer["error"]
    error_id = answer["error"].rsplit(" ", 1)[-1].rstrip(")")
    logged = [entry for entry in logs if entry["event"] == "extender.internal_error"]
    assert len(logged) == 1 and logged[0]["error_id"] == error_id and len(error_id) == 12


def test_a_bug_in_a_get_route_is_a_500_with_an_error_id_only(serve, capfd, monkeypatch) -> None:
    from wasm_scheduler.adapters.extender import server as server_module

    async def broken(self: Any, path: str) -> Any:
        raise ValueError("a bug in /etc/secret/handler.py")

    monkeypatch.setattr(server_module.ExtenderServer, "_get", broken)
    server = serve()
    with structlog.testing.capture_logs() as logs:
        answer = exchange(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 500 ") and b"secret" not in answer and b"ValueError" not in answer
    failed = [entry for entry in logs if entry["event"] == "extender.internal_error"]
    assert len(failed) == 1 and isinstance(failed[0]["exc_info"], ValueError)
    assert failed[0]["error_id"].encode() in answer
    assert "Traceback" not in capfd.readouterr().err


def test_an_exception_escaping_to_the_http_library_is_logged_not_printed(serve, capfd, monkeypatch) -> None:
    from wasm_scheduler.adapters.extender import server as server_module

    def broken(self: Any) -> None:
        raise ValueError("a bug in /etc/secret/connection.py")

    monkeypatch.setattr(server_module._Connection, "request_started", broken)
    server = serve()
    with structlog.testing.capture_logs() as logs:
        answer = exchange(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert wait_for(lambda: server.open_connections == 0)
    assert answer.startswith(b"HTTP/1.1 500 ") and b"secret" not in answer and b"ValueError" not in answer
    failed = [entry for entry in logs if entry["event"] == "extender.connection_failed"]
    assert len(failed) == 1 and isinstance(failed[0]["exc_info"], ValueError)
    assert "Traceback" not in capfd.readouterr().err


# 9. TLS, client certificates, bearer token --------------------------------------------------


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    where = tmp_path_factory.mktemp("certs")
    files = {name: where / f"{name}.pem" for name in ("cert", "key", "client_cert", "client_key")}
    for cert, key, subject in (("cert", "key", "127.0.0.1"), ("client_cert", "client_key", "kube-scheduler")):
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-days", "1", "-subj", f"/CN={subject}", "-addext", "subjectAltName=IP:127.0.0.1",
                 "-keyout", str(files[key]), "-out", str(files[cert]))
    return files


def _client_context(certs: dict[str, Path], with_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs["cert"]))
    if with_cert:
        context.load_cert_chain(certs["client_cert"], certs["client_key"])
    return context


def test_https_serves_and_plain_http_gets_nothing(serve, certs) -> None:
    server = serve(security=ServerSecurity(tls=tls_context(certs["cert"], certs["key"])))
    assert server.url.startswith("https://127.0.0.1:")
    assert post(server, "filter", FILTER_BODY, context=_client_context(certs, False))[0] == 200
    try:
        answer = exchange(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    except ConnectionResetError:  # the server's TLS stack refused the plain bytes
        answer = b""
    assert b"200" not in answer and b"status" not in answer


def test_mutual_tls_refuses_a_client_without_a_certificate(serve, certs) -> None:
    tls = tls_context(certs["cert"], certs["key"], client_ca=certs["client_cert"])
    server = serve(security=ServerSecurity(tls=tls))
    assert post(server, "filter", FILTER_BODY, context=_client_context(certs, True))[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        post(server, "filter", FILTER_BODY, context=_client_context(certs, False))
    assert wait_for(lambda: server.open_connections == 0)


def test_a_bearer_token_guards_the_verbs_not_the_health_checks(serve) -> None:
    server = serve(security=ServerSecurity(token=b"s3cret-token"))
    status, answer = post(server, "filter", FILTER_BODY)
    assert status == 401 and "bearer token" in answer["error"]
    assert post(server, "filter", FILTER_BODY, {"Authorization": "Bearer wrong"})[0] == 401
    assert post(server, "filter", FILTER_BODY, {"Authorization": "Basic s3cret-token"})[0] == 401
    assert post(server, "filter", FILTER_BODY, {"Authorization": "Bearer s3cret-token"})[0] == 200
    with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as response:
        assert response.status == 200


def _one_line_user_error(call: Callable[[], object], *fragments: str) -> None:
    with pytest.raises(UserError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and all(fragment in message for fragment in fragments), message


def test_bad_security_files_are_one_line_user_errors(tmp_path: Path, certs) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    config = tmp_path / "sched.yaml"
    _one_line_user_error(lambda: tls_context(tmp_path / "nope.pem", certs["key"]), "--tls-cert", "nope.pem")
    _one_line_user_error(lambda: tls_context(garbage, certs["key"]), "garbage.pem", "cannot load")
    _one_line_user_error(lambda: tls_context(certs["cert"], certs["key"], garbage), "--client-ca", "garbage.pem")
    _one_line_user_error(lambda: read_token(tmp_path / "no-token"), "--token-file", "no-token")
    _one_line_user_error(lambda: read_token(empty), "empty-token", "empty")
    _one_line_user_error(lambda: ExtenderOptions(config, tls_cert=certs["cert"]).security(), "--tls-key")
    _one_line_user_error(lambda: ExtenderOptions(config, client_ca=certs["cert"]).security(), "--client-ca")
    _one_line_user_error(lambda: ExtenderOptions(config, max_connections=0).limits(), "--max-connections")
    _one_line_user_error(lambda: ExtenderOptions(config, read_timeout_s=0).limits(), "--read-timeout")


# 10. drain ---------------------------------------------------------------------------------------


BIND_BODY = json.dumps({"PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "a"}).encode()


def test_the_drain_finishes_requests_in_flight_and_refuses_new_connections(serve) -> None:
    server = serve()
    host, port = server.server_address[:2]
    idle = http.client.HTTPConnection(host, port, timeout=10)
    idle.request("GET", "/healthz")
    assert idle.getresponse().read()
    results: list[tuple[int, dict[str, Any]]] = []
    in_flight = threading.Thread(target=lambda: results.append(post(server, "bind", BIND_BODY)))
    in_flight.start()
    assert stub(server).entered.wait(10)
    stopping = threading.Thread(target=server.stop)
    stopping.start()

    def refused() -> bool:
        try:
            connect(server, timeout=1).close()
            return False
        except (ConnectionRefusedError, ConnectionResetError):  # reset: the listener closed mid-handshake
            return True

    assert wait_for(refused)
    assert idle.sock is not None and idle.sock.recv(1) == b""  # the idle keep-alive connection was closed
    idle.close()
    assert stopping.is_alive()  # still waiting for the bind
    stub(server).release.set()
    in_flight.join(10)
    stopping.join(10)
    assert results == [(200, {"Error": ""})] and not stopping.is_alive()


def test_the_drain_gives_up_after_its_bound(serve) -> None:
    server = serve()
    thread = threading.Thread(target=post, args=(server, "bind", BIND_BODY), daemon=True)
    thread.start()
    assert stub(server).entered.wait(10)
    assert server.drain(0.2) == 1
    stub(server).release.set()
    thread.join(10)


def _slow_extender_inputs(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "default-scheduler",
                            "plugins": {"multiPoint": {"enabled": [{"name": "Slow"}]}},
                            "pluginConfig": [{"name": "Slow", "args": {
                                "guestURL": str(GUESTS / "slow.wat"),
                                "limits": {"callTimeoutMs": 60000}}}]}]}
    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump(config))
    # Each node's filter spins for a few ms: hundreds of nodes keep the request busy for a second or more.
    names = [f"node-{i}" for i in range(500)]
    body = {"Pod": {"metadata": {"name": "p", "namespace": "default", "uid": "u"}},
            "Nodes": {"metadata": {}, "items": [{"metadata": {"name": n}} for n in names]}, "NodeNames": None}
    return path, body


def test_sigterm_drains_the_request_in_flight_then_exits_0(tmp_path: Path) -> None:
    config, body = _slow_extender_inputs(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "wasm_scheduler.adapters.cli", "--log-level", "info", "--log-format", "json", "extender",
         "--config", str(config), "--listen", "127.0.0.1:0", "--no-bind", "--drain-seconds", "30"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        assert line.startswith("serving Slow at http://127.0.0.1:"), (line, process.stderr.read())
        url = line.split(" at ", 1)[1].strip()
        results: list[Any] = []

        def call() -> None:
            request = urllib.request.Request(f"{url}/filter", data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=60) as response:
                results.append((response.status, json.loads(response.read())))

        client = threading.Thread(target=call)
        client.start()
        stderr_lines = []
        for text in process.stderr:  # the pod's cycle has started on an instance: the request is in flight
            stderr_lines.append(text)
            if '"assignment.acquired"' in text:
                break
        process.send_signal(signal.SIGTERM)
        client.join(60)
        assert process.wait(timeout=60) == 0
        assert len(results) == 1
        status, answer = results[0]
        assert status == 200 and not answer["Error"] and len(answer["Nodes"]["items"]) == 500
        stderr_lines += process.stderr.read().splitlines()
        events = [json.loads(text)["event"] for text in stderr_lines if text.strip()]  # every line is JSON
        assert "extender.stopping" in events and "pool.stopped" in events
        assert events.index("extender.stopping") < events.index("pool.stopped")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_the_command_reports_a_missing_certificate_in_one_line(tmp_path: Path, capsys) -> None:
    from tests.conftest import EXAMPLES
    from wasm_scheduler.adapters.cli import main

    code = main(["extender", "--config", str(EXAMPLES / "scheduler-config.yaml"), "--listen", "127.0.0.1:0",
                 "--tls-cert", str(tmp_path / "missing-cert.pem"), "--tls-key", str(tmp_path / "missing-key.pem")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: --tls-cert") and "missing-cert.pem" in err and "\n" not in err


# 11. one event loop: silent floods, slow clients, the verbs' thread pool, extra routes --------


def _flood(server: ExtenderServer, count: int) -> list[socket.socket]:
    """`count` TCP connections that send nothing (with TLS: not even a ClientHello)."""
    return [connect(server) for _ in range(count)]


@pytest.mark.parametrize("tls", [False, True], ids=["plain", "tls"])
def test_silent_connections_do_not_keep_a_real_request_waiting(serve, certs, tls: bool) -> None:
    security = ServerSecurity(tls=tls_context(certs["cert"], certs["key"])) if tls else None
    server = serve(security=security)  # the default read timeout (30 s): the flood outlives the test
    context = _client_context(certs, False) if tls else None
    flood = _flood(server, 300)
    try:
        if not tls:  # with TLS they are still in their handshake: not connections of the server yet
            assert wait_for(lambda: server.open_connections == 300)
        started = time.monotonic()
        status, answer = post(server, "filter", FILTER_BODY, context=context)
        assert status == 200 and answer["NodeNames"] == ["a", "b"]
        assert time.monotonic() - started < 10
    finally:
        for sock in flood:
            sock.close()


def test_a_client_sending_its_headers_byte_by_byte_is_cut_off_while_others_are_served(serve) -> None:
    server = serve(read_timeout_s=1.0)
    slow = connect(server)
    closed = threading.Event()

    def trickle() -> None:
        try:
            for byte in b"POST /filter HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 200:
                slow.sendall(bytes([byte]))
                time.sleep(0.1)  # 200 bytes at 0.1 s would take 20 s: far past the 1 s deadline
        except OSError:
            closed.set()

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    try:
        for _ in range(5):  # meanwhile, others are answered
            assert post(server, "filter", FILTER_BODY)[0] == 200
        assert closed.wait(10)
    finally:
        slow.close()
        thread.join(10)


def test_binds_run_in_parallel_on_the_pool_and_a_request_beyond_it_waits(serve) -> None:
    server = serve(workers=2)
    service = stub(server)
    entered: list[int] = []
    lock = threading.Lock()
    original = service.bind

    def bind(args: protocol.BindingArgs) -> dict[str, Any]:
        with lock:
            entered.append(1)
        return original(args)

    service.bind = bind  # type: ignore[method-assign]
    results: list[tuple[int, dict[str, Any]]] = []
    threads = [threading.Thread(target=lambda: results.append(post(server, "bind", BIND_BODY))) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert wait_for(lambda: len(entered) == 2)  # two at once on two workers
        time.sleep(0.3)
        assert len(entered) == 2 and not results  # the third waits for a worker: no 503
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=10) as response:  # not behind the pool
            assert response.status == 200
    finally:
        service.release.set()
        for thread in threads:
            thread.join(20)
    assert results == [(200, {"Error": ""})] * 3 and len(entered) == 3


def test_an_answer_the_client_does_not_read_is_dropped_after_the_read_timeout(serve) -> None:
    server = serve(read_timeout_s=0.5)
    names = [f"node-{i:07d}" for i in range(200_000)]  # an answer of ~3 MB
    body = json.dumps({"Pod": POD, "NodeNames": names}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.settimeout(10)
        sock.connect(server.server_address[:2])
        sock.sendall(_request(f"Content-Length: {len(body)}\r\n", body))
        assert wait_for(lambda: server.open_connections == 0)  # the client never reads: dropped
    finally:
        sock.close()
    assert post(server, "filter", FILTER_BODY)[0] == 200


def test_extra_get_routes_answer_beside_the_verbs(serve) -> None:
    calls: list[str] = []

    def metrics() -> tuple[int, bytes, str]:
        calls.append(threading.current_thread().name)
        return 200, b"# HELP up\nup 1\n", "text/plain; version=0.0.4; charset=utf-8"

    service = StubService()
    server = ExtenderServer(("127.0.0.1", 0), service, limits=ServerLimits(drain_s=1),  # type: ignore[arg-type]
                            extra_routes={"/metrics": metrics,
                                          "/readyz": lambda: (503, b'{"ready":false}', "application/json")})
    server.start_background()
    try:
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
            assert response.read() == b"# HELP up\nup 1\n"
            assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert calls and calls[0] != "extender-http"  # off the event loop
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{server.url}/readyz", timeout=10)
        assert caught.value.code == 503  # an extra route takes the place of the built-in probe
        host, port = server.server_address[:2]
        connection = http.client.HTTPConnection(host, port, timeout=10)
        connection.request("HEAD", "/metrics")
        response = connection.getresponse()
        assert response.status == 200 and response.read() == b""
        connection.close()
        with urllib.request.urlopen(f"{server.url}/livez", timeout=10) as response:
            assert response.status == 200
    finally:
        server.stop()
