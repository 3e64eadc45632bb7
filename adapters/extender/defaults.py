"""The extender's defaults, each written once.

This module owns the default of every `wasm-scheduler extender` option that the server,
the service and the command share: the command line (`adapters.cli`), `ExtenderOptions`,
`ServerLimits` and `ExtenderService` read them from here. It imports nothing, so the
command line can show them in its help without loading the HTTP server.
`docs/reliability.md` explains each limit.
"""

from __future__ import annotations

#: Where the extender listens (--listen): the loopback interface, kube-scheduler's own host.
DEFAULT_LISTEN = "127.0.0.1:8888"
#: Seconds a pod's instance is held for a bind that has not come (--bind-timeout).
DEFAULT_BIND_TIMEOUT_S = 30.0
#: Seconds the extender waits at start for the watched view's first list (--sync-timeout).
DEFAULT_SYNC_TIMEOUT_S = 60.0
#: Largest request body accepted, in bytes (a NodeList of thousands of nodes fits).
DEFAULT_MAX_BODY = 64 * 1024 * 1024
#: Seconds a connection may take to deliver a whole request (headers and body), counted from
#: its connect (a first request) or from the first byte of a request on a kept-alive connection.
DEFAULT_READ_TIMEOUT_S = 30.0
#: Seconds a kept-alive connection may sit idle between requests. Above the 90 s that Go's
#: HTTP client (kube-scheduler's) keeps an idle connection: the client closes it first, so it
#: never sends a request on a connection the server is closing (it does not retry a POST).
DEFAULT_IDLE_TIMEOUT_S = 120.0
#: Connections served at once; more are answered 503 and closed. A connection costs the event
#: loop a few KiB, not a thread: the cap bounds memory and file descriptors.
DEFAULT_MAX_CONNECTIONS = 4096
#: Threads that run the verbs (guest calls, binds); requests beyond them wait their turn.
DEFAULT_WORKERS = 32
#: Length of the kernel's queue of connections not yet accepted (capped by net.core.somaxconn).
DEFAULT_BACKLOG = 1024
#: Seconds the drain on shutdown waits for requests in flight.
DEFAULT_DRAIN_S = 10.0
