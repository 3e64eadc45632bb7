"""What a failed Binding POST says: the API server's own message, and for a 403 the RBAC permission
the extender's credentials lack (`binder.binding_failure`), on one line, in the answer and the log."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from wasm_scheduler.adapters.extender.binder import KubernetesBinder, binding_failure

FORBIDDEN = ('pods "web-1" is forbidden: User "system:serviceaccount:wasm-scheduler:wasm-scheduler-extender" '
             'cannot create resource "pods/binding" in API group "" in the namespace "default"')


class _Answers(BaseHTTPRequestHandler):
    status = 403
    message = FORBIDDEN

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": self.message,
                           "reason": "Forbidden" if self.status == 403 else "Conflict", "code": self.status}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[str, type[_Answers]]]:
    handler = type("Answers", (_Answers,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_forbidden_names_the_missing_rbac_permission(api: tuple[str, type[_Answers]]) -> None:
    url, _handler = api
    error = KubernetesBinder(api_server=url).bind("default", "web-1", "uid-1", "node-1")
    assert error.startswith("forbidden: the extender's credentials (its ServiceAccount in a cluster) may not create "
                            "pods/binding (RBAC: grant the verb create on pods/binding)")
    assert "binding default/web-1 to node-1" in error and FORBIDDEN in error
    assert "\n" not in error and "HTTP response headers" not in error


def test_other_answers_carry_their_status_and_message(api: tuple[str, type[_Answers]]) -> None:
    url, handler = api
    handler.status, handler.message = 409, 'pods "web-1" is already assigned to node "node-2"'
    error = KubernetesBinder(api_server=url).bind("default", "web-1", "uid-1", "node-1")
    assert error == ('binding default/web-1 to node-1 failed: the API server answered 409: '
                     'pods "web-1" is already assigned to node "node-2"')


def test_a_connection_failure_is_its_first_line() -> None:
    error = binding_failure(ConnectionRefusedError(111, "Connection refused"), "ns", "p", "n")
    assert error == "binding ns/p to n failed: [Errno 111] Connection refused"
