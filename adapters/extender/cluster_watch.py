"""The extender's own view of the cluster, followed from the Kubernetes API by list and watch.

This module owns `ClusterWatch`, the `nodes.NodeSource` of node-cache-capable requests
when the extender has API credentials and no ``--cluster`` file. One daemon thread per
resource (Nodes; bound, running Pods) lists it, then watches from the list's
resourceVersion as client-go's reflector does: bounded watches opened again from the
last version, a fresh list after 410 Gone, an exponential backoff after any other
failure. Objects are kept as the API serves them (plain JSON dicts); readers get
consistent snapshots, never mutated once handed out. `docs/extender.md` ("The
extender's own view of the cluster") tells the story: which pods and why, sync at
start, and what a readiness probe reads.
"""

from __future__ import annotations

import contextlib
import functools
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from wasm_scheduler.adapters.extender.binder import new_api_client
from wasm_scheduler.adapters.framework.errors import clip
from wasm_scheduler.logger import get_logger
from wasm_scheduler.vocabulary import KubeObject

log = get_logger("adapters.extender.cluster_watch")

#: What a missing client is reported as needed for (`binder.import_kubernetes`).
NEEDED_FOR = "watching nodes and pods (node-cache-capable requests; --cluster FILE or --no-watch do without)"
#: HTTP statuses that more waiting will not cure: `wait_synced` stops waiting on them.
DENIED = frozenset({401, 403, 404})
#: How long `close()` waits for the watcher threads.
CLOSE_TIMEOUT_S = 2.0
#: A watch that ends sooner with no event counts as a failure (backed off), not as a normal end.
SHORT_WATCH_S = 1.0


@dataclass(frozen=True)
class Resource:
    """A resource the view follows: its REST name, kind, the server-side field selector, and how
    its objects are keyed (nodes by name, pods by UID, as `NodeSource` has them)."""

    name: str
    kind: str
    field_selector: str = ""
    keyed_by_uid: bool = False

    def key(self, obj: KubeObject) -> str:
        meta = obj.get("metadata")
        value = meta.get("uid" if self.keyed_by_uid else "name") if isinstance(meta, Mapping) else None
        return value if isinstance(value, str) else ""

    def keeps(self, obj: KubeObject) -> bool:
        """The field selector, checked here too (a server may ignore it; an update may leave it)."""
        if self.kind != "Pod":
            return True
        spec, status = obj.get("spec"), obj.get("status")
        bound = isinstance(spec, Mapping) and bool(spec.get("nodeName"))
        phase = status.get("phase") if isinstance(status, Mapping) else None
        return bound and phase not in ("Succeeded", "Failed")


NODES = Resource("nodes", "Node")
PODS = Resource("pods", "Pod", "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed", keyed_by_uid=True)


@dataclass(frozen=True)
class WatchEvent:
    """One line of a watch: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR, and its object."""

    type: str
    object: dict[str, Any]


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str


class ApiStatusError(Exception):
    """The API server answered an error status (HTTP, or an ERROR event's Status)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status


class Interrupter:
    """Lets `close()` cut a blocking read of a watcher thread: the thread attaches how to
    interrupt its response in flight; once interrupted, anything attached is cut at once.
    Attaching means the API server answered (a list page, a watch's headers): `on_attach`
    hears it (the watch is no longer failing, `ClusterWatch.failing_for`)."""

    def __init__(self, on_attach: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._current: Callable[[], None] | None = None
        self._interrupted = False
        self._on_attach = on_attach

    def attach(self, interrupt: Callable[[], None]) -> None:
        with self._lock:
            self._current = interrupt
            now = self._interrupted
        if now:
            interrupt()
        elif self._on_attach is not None:
            self._on_attach()

    def detach(self) -> None:
        with self._lock:
            self._current = None

    def interrupt(self) -> None:
        with self._lock:
            self._interrupted = True
            current = self._current
        if current is not None:
            current()


class ListWatch(Protocol):
    """The API calls the view makes (`KubeListWatch`; tests give a fake)."""

    def list(self, resource: Resource, interrupter: Interrupter) -> ListResult:
        """Every object of the resource, all pages; ApiStatusError for an error answer."""

    def watch(self, resource: Resource, resource_version: str, timeout_s: int,
              interrupter: Interrupter) -> Iterator[WatchEvent]:
        """The events after `resource_version` until the server ends the watch; ApiStatusError for
        an error answer (an ERROR event is yielded as it comes)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class BackoffPolicy:
    """Delays between restarts: `initial_s` times `factor` per failure in a row, at most `max_s`,
    each cut by up to `jitter` of itself at random; the count starts over after `reset_after_s`
    without a failure."""

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5
    reset_after_s: float = 60.0


class Backoff:
    """The failures in a row of one watcher, and the delay before its next attempt."""

    def __init__(self, policy: BackoffPolicy, rand: Callable[[], float] = random.random,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._rand = rand
        self._clock = clock
        self.failures = 0
        self._last: float | None = None

    def next_delay(self, first_is_free: bool = False) -> float:
        """Count a failure; the seconds to wait before trying again (0 for the first failure in
        a row when `first_is_free`: a 410 after a healthy while relists at once)."""
        p = self.policy
        now = self._clock()
        if self._last is not None and now - self._last > p.reset_after_s:
            self.failures = 0
        self._last = now
        self.failures += 1
        if first_is_free and self.failures == 1:
            return 0.0
        delay = min(p.max_s, p.initial_s * p.factor ** (self.failures - 1))
        return delay * (1.0 - p.jitter * self._rand())


@dataclass(frozen=True)
class WatchStats:
    """What a readiness probe or metrics read of the view."""

    synced: bool
    nodes: int
    pods: int
    #: Failures that restarted a list or watch, over both resources, since start.
    restarts: int
    #: Fresh lists after the first (after a 410 Gone).
    relists: int
    #: Seconds since the staler resource was confirmed current; None before the first sync.
    last_sync_age_s: float | None
    last_error: str


class _Store:
    """One resource's objects: written by its watcher thread under a lock; readers get a copy
    made on the first read after a change, never mutated after."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._work: dict[str, KubeObject] = {}
        self._view: dict[str, KubeObject] = {}
        self._stale = False

    def view(self) -> Mapping[str, KubeObject]:
        if self._stale:
            with self._lock:
                if self._stale:
                    self._view = dict(self._work)
                    self._stale = False
        return self._view

    def __len__(self) -> int:
        return len(self._work)

    def put(self, key: str, obj: KubeObject) -> None:
        with self._lock:
            self._work[key] = obj
            self._stale = True

    def remove(self, key: str) -> None:
        with self._lock:
            if self._work.pop(key, None) is not None:
                self._stale = True

    def replace(self, objects: dict[str, KubeObject]) -> None:
        with self._lock:
            self._work = objects
            self._stale = True


class _Gone(Exception):
    """410: the resourceVersion is too old to watch from; list afresh."""


@dataclass
class _Progress:
    """What one resource's watcher has done (guarded by `ClusterWatch._state`)."""

    listed: bool = False
    confirmed: float = 0.0
    denied: int | None = None
    #: The resourceVersion to watch from ("": list first). Its watcher's own: read and written there only.
    version: str = ""
    #: When its list or watch began failing, with no answer from the API server since (0.0: not failing).
    failing_since: float = 0.0


class ClusterWatch:
    """A `nodes.NodeSource` that follows Nodes and running bound Pods of the API server.

    Its threads start at once. Pods are those with ``spec.nodeName`` set and a phase
    neither Succeeded nor Failed (a server-side field selector, checked again here): the
    extender reads pods only as preemption victims. Every event moves the resourceVersion
    on (BOOKMARKs too); a watch ends after 30 to 60 s, at random, and is opened again; a
    410 Gone (an HTTP answer or an ERROR event) lists afresh and the new list replaces the
    old objects whole; any other failure (a cut connection, a timeout, an error status, a
    malformed answer, a watch that ends at once) resumes after an exponential backoff
    (0.5 s doubling to at most 30 s, with jitter, started over after a minute without
    failure). DELETED events remove objects.

    The watcher mutates a private dict under a lock; the first read after a change copies
    it, and later reads get that copy until the next change. `synced` is set once the
    first list of both resources is in (and stays set across relists); `last_sync_age()`
    is the seconds since the staler resource was last confirmed current, `failing_for()`
    how long a list or watch has been failing with no answer from the API server,
    `restarts` and `relists` count failures and fresh lists, and `stats()` has them all.
    `close()` sets a stop flag and shuts the socket of each open response, so the
    threads end within a couple of seconds even in the middle of a read."""

    def __init__(self, list_watch: ListWatch, *, server: str = "",
                 backoff: BackoffPolicy = BackoffPolicy(),
                 watch_timeout_s: tuple[int, int] = (30, 60),
                 resources: tuple[Resource, ...] = (NODES, PODS),
                 rand: Callable[[], float] = random.random) -> None:
        self.server = server
        self._list_watch = list_watch
        self._backoff = backoff
        self._watch_timeout_s = watch_timeout_s
        self._rand = rand
        self._stores = {r.name: _Store() for r in resources}
        self._progress = {r.name: _Progress() for r in resources}
        self._interrupters = {r.name: Interrupter(functools.partial(self._answered, r.name)) for r in resources}
        #: Guards the counters and `_progress`; notified on sync and on every failure.
        self._state = threading.Condition()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self.restarts = 0
        self.relists = 0
        self.last_error = ""
        self.started = time.monotonic()
        self._threads = [threading.Thread(target=self._run, args=(r,), name=f"cluster-watch {r.name}", daemon=True)
                         for r in resources]
        for thread in self._threads:
            thread.start()

    # --- NodeSource -------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, KubeObject]:
        return self._view_of(NODES.name)

    @property
    def pods(self) -> Mapping[str, KubeObject]:
        return self._view_of(PODS.name)

    def refresh(self) -> None:
        """Nothing to do: the watch brings changes as they happen (a request never waits on it)."""

    def close(self) -> None:
        """Stop the threads: the stop flag, then every response in flight cut; waits at most
        `CLOSE_TIMEOUT_S` (a thread still connecting ends by itself at its connect timeout). A
        second call does nothing."""
        if self._stop.is_set():
            return
        self._stop.set()
        for interrupter in self._interrupters.values():
            interrupter.interrupt()
        with self._state:
            self._state.notify_all()
        deadline = time.monotonic() + CLOSE_TIMEOUT_S
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        self._list_watch.close()

    stop = close

    # --- what readiness and metrics read ------------------------------------------------

    @property
    def synced(self) -> bool:
        """True once the first list of every resource is in (stays True across relists)."""
        return self._synced.is_set()

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    def wait_synced(self, timeout_s: float, give_up_when_denied: bool = True) -> bool:
        """Wait up to `timeout_s` for `synced`; False on timeout, on close, or (when
        `give_up_when_denied`) as soon as a list or watch was answered 401, 403 or 404, which more
        waiting will not cure (the threads go on trying in the background)."""
        deadline = time.monotonic() + timeout_s
        with self._state:
            while not self._synced.is_set():
                if self._stop.is_set():
                    return False
                if give_up_when_denied and any(p.denied is not None for p in self._progress.values()):
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._state.wait(left)
        return True

    def last_sync_age(self) -> float | None:
        """Seconds since the staler resource was last confirmed current; None before the first sync."""
        if not self._synced.is_set():
            return None
        with self._state:
            oldest = min(p.confirmed for p in self._progress.values())
        return max(0.0, time.monotonic() - oldest)

    def failing_for(self) -> float:
        """Seconds since a list or watch began failing without the API server answering it
        since (the longest over the resources); 0.0 while every one is answered. What readiness
        reads: a quiet cluster's view ages between events, a failing watch is broken."""
        with self._state:
            since = [p.failing_since for p in self._progress.values() if p.failing_since]
        return max(0.0, time.monotonic() - min(since)) if since else 0.0

    def stats(self) -> WatchStats:
        with self._state:
            restarts, relists, error = self.restarts, self.relists, self.last_error
        return WatchStats(self.synced, len(self._stores[NODES.name]) if NODES.name in self._stores else 0,
                          len(self._stores[PODS.name]) if PODS.name in self._stores else 0,
                          restarts, relists, self.last_sync_age(), error)

    # --- the watcher threads ------------------------------------------------------------

    def _view_of(self, name: str) -> Mapping[str, KubeObject]:
        store = self._stores.get(name)
        return store.view() if store is not None else {}

    def _run(self, resource: Resource) -> None:
        backoff = Backoff(self._backoff, self._rand)
        progress = self._progress[resource.name]
        while not self._stop.is_set():
            gone, status = False, 0
            try:
                if not progress.version:
                    progress.version = self._list(resource)
                self._follow(resource, progress)
                continue
            except _Gone as exc:
                gone, error = True, f"410 Gone: {exc}" if str(exc) else "410 Gone"
            except ApiStatusError as exc:
                gone, status, error = exc.status == 410, exc.status, str(exc)
            except Exception as exc:  # connection refused, cut or timed out; a malformed answer; a bug
                error = _describe(exc)
            if self._stop.is_set():
                return
            if gone:
                progress.version = ""
            delay = backoff.next_delay(first_is_free=gone)
            error = clip(" ".join(error.split()), 300)
            with self._state:
                self.restarts += 1
                self.last_error = f"{resource.name}: {error}"
                if not progress.failing_since:
                    progress.failing_since = time.monotonic()
                self._progress[resource.name].denied = status if status in DENIED else None
                restarts = self.restarts
                self._state.notify_all()
            (log.info if gone else log.warning)("extender.watch_restarted", resource=resource.name, error=error,
                                                 status=410 if gone else status, relist=not progress.version,
                                                 retry_in_s=round(delay, 3), restarts=restarts)
            self._stop.wait(delay)

    def _list(self, resource: Resource) -> str:
        started = time.monotonic()
        result = self._list_watch.list(resource, self._interrupters[resource.name])
        if not result.resource_version:
            raise ApiStatusError(0, f"the {resource.name} list has no metadata.resourceVersion")
        objects: dict[str, KubeObject] = {}
        for obj in result.items:
            obj.setdefault("kind", resource.kind)
            obj.setdefault("apiVersion", "v1")
            key = resource.key(obj)
            if key and resource.keeps(obj):
                objects[key] = obj
        if self._stop.is_set():
            return result.resource_version
        self._stores[resource.name].replace(objects)
        with self._state:
            progress = self._progress[resource.name]
            first = not progress.listed
            progress.listed, progress.denied = True, None
            progress.confirmed = time.monotonic()
            progress.failing_since = 0.0
            if not first:
                self.relists += 1
            synced_now = not self._synced.is_set() and all(p.listed for p in self._progress.values())
            if synced_now:
                self._synced.set()
            self._state.notify_all()
        log.info("extender.watch_listed", resource=resource.name, objects=len(objects),
                 resource_version=result.resource_version, reason="start" if first else "relist",
                 duration_ms=round((time.monotonic() - started) * 1000, 1))
        if synced_now:
            log.info("extender.view_synced", server=self.server, nodes=len(self._stores.get(NODES.name, ())),
                     pods=len(self._stores.get(PODS.name, ())),
                     duration_ms=round((time.monotonic() - self.started) * 1000, 1))
        return result.resource_version

    def _follow(self, resource: Resource, progress: _Progress) -> None:
        """One watch from `progress.version` until the server ends it, moving the version on with
        every event (so a failure midway resumes from the last one)."""
        low, high = self._watch_timeout_s
        timeout_s = low if high <= low else int(low + (high - low) * self._rand())
        store = self._stores[resource.name]
        began, seen_any = time.monotonic(), False
        events = self._list_watch.watch(resource, progress.version, timeout_s, self._interrupters[resource.name])
        try:
            for event in events:
                if self._stop.is_set():
                    return
                seen_any = True
                obj = event.object
                if event.type == "ERROR":
                    code = obj.get("code")
                    message = str(obj.get("message") or obj.get("reason") or "ERROR event")
                    if code == 410:
                        raise _Gone(message)
                    raise ApiStatusError(code if isinstance(code, int) else 0, message)
                if event.type in ("ADDED", "MODIFIED", "DELETED"):
                    key = resource.key(obj)
                    if key and event.type != "DELETED" and resource.keeps(obj):
                        store.put(key, obj)
                    elif key:
                        store.remove(key)
                meta = obj.get("metadata")
                seen = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
                if isinstance(seen, str) and seen:
                    progress.version = seen
                self._confirm(resource)
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if self._stop.is_set():
            return
        if not seen_any and time.monotonic() - began < SHORT_WATCH_S:
            # As client-go: a server (or proxy) that ends every watch at once must not be asked again at once.
            raise ApiStatusError(0, f"very short watch: it ended within {SHORT_WATCH_S:g} s with no event")
        self._confirm(resource)  # the watch ran to its end: nothing was missed up to now

    def _confirm(self, resource: Resource) -> None:
        with self._state:
            progress = self._progress[resource.name]
            progress.confirmed = time.monotonic()
            progress.failing_since = 0.0

    def _answered(self, name: str) -> None:
        """The API server answered a list or watch of `name` (`Interrupter.attach`)."""
        with self._state:
            self._progress[name].failing_since = 0.0


# --- the Kubernetes API through the official client -----------------------------------


@dataclass
class KubeListWatch:
    """`ListWatch` over the official client's CoreV1Api, every answer read as raw JSON
    (``_preload_content=False``); each response in flight is attached to the caller's
    `Interrupter`, so `close()` can cut it."""

    client: Any
    api_client: Any
    page_size: int = 500
    connect_timeout_s: float = 10.0
    list_read_timeout_s: float = 60.0
    #: The read timeout of a watch beyond its timeoutSeconds: a silent dead connection fails then.
    watch_read_margin_s: float = 30.0
    _core: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._core = self.client.CoreV1Api(self.api_client)

    @property
    def server(self) -> str:
        configuration = getattr(self.api_client, "configuration", None)
        return str(getattr(configuration, "host", "") or "")

    def list(self, resource: Resource, interrupter: Interrupter) -> ListResult:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            options: dict[str, Any] = {"limit": self.page_size}
            if token:
                options["_continue"] = token
            response = self._call(resource, (self.connect_timeout_s, self.list_read_timeout_s), **options)
            interrupter.attach(functools.partial(_interrupt, response))
            try:
                body = json.loads(response.data)
            finally:
                interrupter.detach()
                response.release_conn()
            if not isinstance(body, dict) or not isinstance(body.get("items") or [], list):
                raise ApiStatusError(0, f"the {resource.name} list is not a {resource.kind}List")
            items.extend(item for item in body.get("items") or [] if isinstance(item, dict))
            meta = body.get("metadata") or {}
            token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
            if not token:
                version = meta.get("resourceVersion") if isinstance(meta, dict) else None
                return ListResult(items, str(version or ""))

    def watch(self, resource: Resource, resource_version: str, timeout_s: int,
              interrupter: Interrupter) -> Iterator[WatchEvent]:
        response = self._call(resource, (self.connect_timeout_s, timeout_s + self.watch_read_margin_s),
                              watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                              timeout_seconds=timeout_s)
        interrupter.attach(functools.partial(_interrupt, response))
        try:
            for line in _lines(response):
                event = json.loads(line)
                if not isinstance(event, dict) or not isinstance(event.get("object"), dict):
                    raise ApiStatusError(0, f"a {resource.name} watch event is not an object with an object")
                yield WatchEvent(str(event.get("type", "")), event["object"])
        finally:
            interrupter.detach()
            response.close()

    def close(self) -> None:
        self.api_client.close()

    def _call(self, resource: Resource, request_timeout: tuple[float, float], **options: Any) -> Any:
        """The raw urllib3 response of a list or watch; ApiStatusError for an error answer."""
        method = self._core.list_node if resource.name == "nodes" else self._core.list_pod_for_all_namespaces
        if resource.field_selector:
            options["field_selector"] = resource.field_selector
        try:
            return method(_preload_content=False, _request_timeout=request_timeout, **options)
        except self.client.ApiException as exc:
            status = exc.status if isinstance(exc.status, int) else 0
            raise ApiStatusError(status, _message(exc)) from None


def _message(exc: Any) -> str:
    """The Status message of an ApiException's body, else its reason."""
    try:
        body = json.loads(exc.body)
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])
    except (TypeError, ValueError):
        pass
    return str(exc.reason or "").splitlines()[0] if exc.reason else type(exc).__name__


def _describe(exc: BaseException) -> str:
    """A failure in a line: urllib3's MaxRetryError by its cause (connection refused, ...)."""
    cause = getattr(exc, "reason", None)
    if isinstance(cause, BaseException):
        exc = cause
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _lines(response: Any) -> Iterator[bytes]:
    """The lines of a streamed (chunked) response, as they arrive."""
    pending = bytearray()
    for chunk in response.stream(amt=None, decode_content=True):
        pending += chunk
        if b"\n" not in chunk:
            continue
        *complete, rest = bytes(pending).split(b"\n")
        pending = bytearray(rest)
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield bytes(pending)


def _interrupt(response: Any) -> None:
    """Wake a thread blocked reading `response`: shut its socket's read side (urllib3 >= 2.3 has
    `shutdown()` for it; older ones, through the connection's socket). The reader closes it."""
    try:
        response.shutdown()
        return
    except Exception:  # AttributeError (urllib3 < 2.3), or ValueError/RuntimeError once released
        pass
    connection = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def watch_cluster(api_server: str = "", kubeconfig: str = "", requested_by: str = "",
                  backoff: BackoffPolicy = BackoffPolicy(),
                  watch_timeout_s: tuple[int, int] = (30, 60)) -> ClusterWatch:
    """A `ClusterWatch` of the API server these credentials reach (`binder.new_api_client`: an
    explicit URL, else a kubeconfig, else in-cluster). A missing client or bad credentials is a
    one-line UserError naming `requested_by`."""
    client, api_client = new_api_client(api_server, kubeconfig, requested_by, needed_for=NEEDED_FOR)
    list_watch = KubeListWatch(client, api_client)
    return ClusterWatch(list_watch, server=list_watch.server, backoff=backoff, watch_timeout_s=watch_timeout_s)
