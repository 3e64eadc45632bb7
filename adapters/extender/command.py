"""`wasm-scheduler extender`: load the configured wasm plugins and serve them over HTTP.

This module owns turning the command's options into a running extender: the wasm
plugins each profile of a KubeSchedulerConfiguration enables (a plugin whose
`pluginConfig` args carry `guestURL`, placed at the points and with the score weight
the profile gives it; `ServedProfile`), the node cache from a snapshot
file (reloaded when the file changes) or else watched from the API server
(`cluster_watch`, awaited at start up to ``--sync-timeout``), the API credentials both
the watch and the binder use (an explicit API server, a kubeconfig, in-cluster
credentials, the kubeconfig kubectl would read, or none), the binder, the server's limits and security (TLS, client
certificates, a bearer token) from the options, the GET routes beside the verbs (`/healthz`, `/readyz`:
`probes`; `/metrics` unless --no-metrics: `metrics`, whose timing hooks go into each profile's
framework and the server), and a server that runs until SIGINT or
SIGTERM, then drains (requests in flight get their answers, within `--drain-seconds`)
and stops every plugin. A second signal cuts the drain short. The signal handler only
counts the signal (no lock, no I/O: it runs on the main thread, between any two of its
steps); the main thread polls the count.

See `docs/operating.md` and `docs/reliability.md` for the options.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from wasm_scheduler.adapters.extender.binder import (
    Binder,
    KubernetesBinder,
    NoBinder,
    credentials_origin,
    find_kubeconfig,
)
from wasm_scheduler.adapters.extender.cluster_watch import ClusterWatch, watch_cluster
from wasm_scheduler.adapters.extender.defaults import (
    DEFAULT_BACKLOG,
    DEFAULT_BIND_TIMEOUT_S,
    DEFAULT_DRAIN_S,
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_LISTEN,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SYNC_TIMEOUT_S,
    DEFAULT_WORKERS,
)
from wasm_scheduler.adapters.extender.metrics import ExtenderMetrics
from wasm_scheduler.adapters.extender.nodes import NodeCache, NodeSource, RequestNode
from wasm_scheduler.adapters.extender.probes import DEFAULT_READY_MAX_VIEW_AGE_S, Answer, Readiness, healthz
from wasm_scheduler.adapters.extender.server import (
    ExtenderServer,
    Flag,
    ServerLimits,
    ServerSecurity,
    Verbs,
    read_token,
    tls_context,
)
from wasm_scheduler.adapters.extender.service import ExtenderService, ServedProfile, WeightedPlugin
from wasm_scheduler.adapters.extender.snapshot_reload import DEFAULT_POLL_S, SnapshotReloader
from wasm_scheduler.adapters.framework.config import SchedulerConfig, load_config
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.framework import Framework
from wasm_scheduler.adapters.framework.profile import enabled_wasm_plugins, load_wasm_plugin, profile_framework_of
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import GuestCompiler

log = get_logger("adapters.extender")

#: The longest any time option may be, in seconds (an hour: longer is a mistake, not a setting).
MAX_SECONDS = 3600.0


def check_seconds(option: str, value: float, zero_allowed: bool = False, most: float = MAX_SECONDS) -> float:
    """`value`, or a UserError naming the option and its valid range (NaN and infinities are refused)."""
    low_ok = value >= 0 if zero_allowed else value > 0
    if not (math.isfinite(value) and low_ok and value <= most):
        valid = f"from 0 to {most:g}" if zero_allowed else f"more than 0, at most {most:g}"
        raise UserError(f"{option} {value}: expected a number of seconds {valid}")
    return value


@dataclass(frozen=True)
class ExtenderOptions:
    config: Path
    listen: str = DEFAULT_LISTEN
    cluster: Path | None = None
    bind_timeout_s: float = DEFAULT_BIND_TIMEOUT_S
    expect_bind: bool = True
    kubeconfig: str = ""
    api_server: str = ""
    max_body: int = DEFAULT_MAX_BODY
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: Threads that run the verbs at once (--workers); more requests wait for one.
    workers: int = DEFAULT_WORKERS
    drain_s: float = DEFAULT_DRAIN_S
    tls_cert: Path | None = None
    tls_key: Path | None = None
    client_ca: Path | None = None
    token_file: Path | None = None
    snapshot_poll_s: float = DEFAULT_POLL_S
    #: Folder of compiled guests shared between runs (`GuestCompiler`); None compiles every time.
    cache_dir: Path | None = None
    #: Without --cluster, watch nodes and pods from the API server when credentials are found (--no-watch: not).
    watch: bool = True
    #: At start, how long to wait for the watch's first list of nodes and pods (--sync-timeout; 0: not at all).
    sync_timeout_s: float = DEFAULT_SYNC_TIMEOUT_S
    #: How long a kept-alive connection may sit idle (above the 90 s of Go's HTTP client).
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    #: The path of each verb (kube-scheduler's filterVerb, prioritizeVerb, bindVerb, preemptVerb).
    verbs: Verbs = Verbs()
    #: Serve /metrics and time requests and guest calls for it (--no-metrics: not).
    metrics: bool = True
    #: /readyz answers 503 once the watch has failed this long (--ready-max-view-age).
    ready_max_view_age_s: float = DEFAULT_READY_MAX_VIEW_AGE_S

    def limits(self) -> ServerLimits:
        """The server's limits; a value out of range (every time option is checked here) is a
        UserError naming its option and the valid range."""
        check_seconds("--read-timeout", self.read_timeout_s)
        check_seconds("--idle-timeout", self.idle_timeout_s)
        check_seconds("--drain-seconds", self.drain_s, zero_allowed=True)
        check_seconds("--bind-timeout", self.bind_timeout_s)
        check_seconds("--snapshot-poll", self.snapshot_poll_s)
        check_seconds("--sync-timeout", self.sync_timeout_s, zero_allowed=True)
        check_seconds("--ready-max-view-age", self.ready_max_view_age_s, zero_allowed=True)
        if self.max_connections < 1:
            raise UserError(f"--max-connections {self.max_connections}: must be at least 1")
        if not 1 <= self.workers <= 1024:
            raise UserError(f"--workers {self.workers}: expected a number of threads from 1 to 1024")
        self.verbs.checked()
        return ServerLimits(self.max_body, self.read_timeout_s, self.max_connections, DEFAULT_BACKLOG, self.drain_s,
                            self.idle_timeout_s, self.workers)

    def security(self) -> ServerSecurity:
        """TLS and the bearer token, their files read now (a missing or bad file is a UserError)."""
        if (self.tls_cert is None) != (self.tls_key is None):
            raise UserError("--tls-cert and --tls-key go together: give both or neither")
        if self.client_ca is not None and self.tls_cert is None:
            raise UserError(f"--client-ca {self.client_ca}: needs --tls-cert and --tls-key (client certificates "
                            "are checked in the TLS handshake)")
        tls = None
        if self.tls_cert is not None and self.tls_key is not None:
            tls = tls_context(self.tls_cert, self.tls_key, self.client_ca)
        token = read_token(self.token_file) if self.token_file is not None else None
        return ServerSecurity(tls, token)


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(f"--listen {listen}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    if not 0 <= int(port) <= 65535:
        raise UserError(f"--listen {listen}: port {int(port)} is outside the port range 0..65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def load_profiles(config: SchedulerConfig, compiler: GuestCompiler) -> list[ServedProfile]:
    """The wasm plugins each profile enables (`enabled_wasm_plugins`: with kube-scheduler's
    enable and disable rules, multiPoint and ``disabled: [{name: "*"}]`` included), loaded and
    placed at the profile's points (`profile_framework_of`); a profile that enables none is not
    served. Each profile gets its own instances of its plugins, as kube-scheduler makes each
    profile's plugins. A UserError when no profile enables a wasm plugin."""
    served: list[ServedProfile] = []
    loaded: list[WasmPlugin] = []
    try:
        for profile in config.profiles:
            plugins: dict[str, WasmPlugin] = {}
            for ref in enabled_wasm_plugins(profile):
                plugin = load_wasm_plugin(ref.name, profile.plugin_args[ref.name], config, compiler, None)
                loaded.append(plugin)
                plugins[ref.name] = plugin
            if not plugins:
                continue
            framework: Framework[RequestNode] = profile_framework_of(profile, plugins)
            weighted = tuple(WeightedPlugin(p, framework.score_weights.get(name, 1)) for name, p in plugins.items())
            served.append(ServedProfile(profile.scheduler_name, weighted, framework))
    except BaseException:
        for plugin in loaded:
            plugin.close()
        raise
    if not served:
        configured = any(entry.is_wasm for profile in config.profiles for entry in profile.plugin_args.values())
        why = ("no profile enables a plugin whose pluginConfig args carry guestURL (enable it in the profile's "
               "plugins, multiPoint or per point)" if configured else "no pluginConfig entry has args.guestURL")
        raise UserError(f"{config.source}: {why}: there is no wasm plugin to serve")
    return served


def node_cache_from(path: Path | None, poll_s: float = DEFAULT_POLL_S) -> NodeSource:
    """Node objects for node-cache-capable mode: loaded now (a broken file is a UserError), then
    reloaded by a background thread when the file changes (`SnapshotReloader`; close() stops it)."""
    if path is None:
        return NodeCache()
    return SnapshotReloader(path, poll_s)


@dataclass(frozen=True)
class ApiCredentials:
    """Which API server the extender talks to: an explicit URL, a kubeconfig, or (both empty)
    in-cluster credentials; `requested_by` names them in errors ("" : the option itself)."""

    api_server: str = ""
    kubeconfig: str = ""
    requested_by: str = ""
    #: The kubeconfig was found ($KUBECONFIG, ~/.kube/config), not given.
    found: bool = False

    @property
    def origin(self) -> str:
        return self.requested_by or credentials_origin(self.api_server, self.kubeconfig)

    @property
    def explicit(self) -> bool:
        """Given as --api-server or --kubeconfig (not in-cluster, not a found kubeconfig)."""
        return bool(self.api_server or self.kubeconfig) and not self.found


def api_credentials(options: ExtenderOptions, explicit_only: bool = False) -> ApiCredentials | None:
    """--api-server, else --kubeconfig, else in-cluster credentials, else the kubeconfig kubectl
    would use ($KUBECONFIG, ~/.kube/config), else None; only the first two when `explicit_only`."""
    if options.api_server or options.kubeconfig:
        return ApiCredentials(options.api_server, options.kubeconfig)
    if explicit_only:
        return None
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return ApiCredentials()
    found = find_kubeconfig(os.environ, Path.home())
    if found is None:
        return None
    origin = "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "the default kubeconfig"
    return ApiCredentials(kubeconfig=str(found), requested_by=f"{found} ({origin})", found=True)


def make_binder(options: ExtenderOptions) -> Binder:
    """--api-server, else --kubeconfig, else in-cluster credentials, else the kubeconfig kubectl
    would use ($KUBECONFIG, ~/.kube/config), else none (binds fail with a clear message).

    With --no-bind only an explicit --api-server or --kubeconfig builds a binder. Every binder
    but NoBinder needs the optional Kubernetes client; without it this is a UserError naming
    what asked for the API and how to install the client."""
    # --no-bind: kube-scheduler binds, found credentials are not needed.
    credentials = api_credentials(options, explicit_only=not options.expect_bind)
    if credentials is None:
        return NoBinder()
    if credentials.found:
        log.info("extender.kubeconfig", path=credentials.kubeconfig)
    return KubernetesBinder(api_server=credentials.api_server, kubeconfig=credentials.kubeconfig,
                            requested_by=credentials.requested_by)


def node_source_for(options: ExtenderOptions) -> NodeSource:
    """Where node-cache-capable requests find nodes and pods: the --cluster file; else, unless
    --no-watch, the API server of `api_credentials` (found ones too, --no-bind or not), listed and
    watched (`ClusterWatch`, its threads started now so the first list runs while the guests
    compile); else none (only requests that carry whole nodes find them).

    Credentials given as options that cannot be used (no client installed, a bad kubeconfig) are
    a UserError; found ones (in-cluster, $KUBECONFIG, ~/.kube/config) only a warning and no view,
    so an extender that needs no API (--no-bind) starts without the client as it always did."""
    check_seconds("--sync-timeout", options.sync_timeout_s, zero_allowed=True)
    if options.cluster is not None or not options.watch:
        return node_cache_from(options.cluster, options.snapshot_poll_s)
    credentials = api_credentials(options)
    if credentials is None:
        return NodeCache()
    try:
        source = watch_cluster(credentials.api_server, credentials.kubeconfig, credentials.requested_by)
    except UserError as exc:
        if credentials.explicit:
            raise
        log.warning("extender.view_unavailable", credentials=credentials.origin, error=str(exc),
                    reason="node-cache-capable requests will find no node (give --cluster FILE, or install the "
                           "client; --no-watch silences this)")
        return NodeCache()
    log.info("extender.view_watching", server=source.server, credentials=credentials.origin,
             sync_timeout_s=options.sync_timeout_s)
    return source


def await_view(source: NodeSource, timeout_s: float) -> bool:
    """Wait up to `timeout_s` for a watched view's first sync (the watch logs
    ``extender.view_synced``); True when synced or not watched.

    A view not synced in time (or denied: 401, 403, 404) is a warning, not a failed start: the
    extender cannot tell whether kube-scheduler will send node names only (requests that carry
    whole nodes need no view), the watch keeps trying in the background, and until it syncs a
    request naming an unknown node fails just that node (kube-scheduler retries the pod). A
    sidecar that exited instead would take every pod's scheduling down with it while, say, its
    RBAC is fixed. `ClusterWatch.synced` is there for a readiness probe."""
    if not isinstance(source, ClusterWatch):
        return True
    if source.wait_synced(timeout_s):
        return True
    if timeout_s > 0:
        log.warning("extender.view_sync_timeout", server=source.server, timeout_s=timeout_s,
                    error=source.last_error or "no answer yet",
                    reason="serving anyway: a request naming a node the view does not know yet fails that node; "
                           "the watch keeps trying")
    return False


class RunningExtender:
    """The plugins, service and server of one `extender` run; `close()` ends them all."""

    def __init__(self, options: ExtenderOptions, compiler: GuestCompiler | None = None) -> None:
        host, port = parse_listen(options.listen)
        limits, security = options.limits(), options.security()
        config = load_config(options.config)
        binder = make_binder(options)  # before the view: a missing client is reported as the binder's, as ever
        cache = node_source_for(options)
        try:
            self.compiler = compiler or GuestCompiler(cache_dir=options.cache_dir)
            self.profiles = load_profiles(config, self.compiler)
            #: Every plugin of every served profile.
            self.plugins = [wp for profile in self.profiles for wp in profile.plugins]
        except BaseException:
            cache.close()  # its poller thread ends with the failed start
            raise
        try:
            await_view(cache, options.sync_timeout_s)
            self.service = ExtenderService(self.profiles, cache, binder, options.expect_bind,
                                           options.bind_timeout_s)
            watch = cache if isinstance(cache, ClusterWatch) else None
            served = [wp.plugin for wp in self.plugins]
            #: /metrics (None with --no-metrics: nothing is timed for it).
            self.metrics = ExtenderMetrics(served, self.service, watch) if options.metrics else None
            if self.metrics is not None:
                self.metrics.calls.attach(profile.framework for profile in self.profiles)
            self.readiness = Readiness(served, watch, options.ready_max_view_age_s)
            try:
                self.server = ExtenderServer((host, port), self.service, limits=limits, security=security,
                                             verbs=options.verbs, extra_routes=self.routes(),
                                             on_request=self.metrics.request_done if self.metrics else None)
            except OSError as exc:
                self.service.close()
                raise UserError(f"--listen {options.listen}: cannot listen: {exc.strerror or exc}") from None
        except BaseException:
            cache.close()
            for wp in self.plugins:
                wp.plugin.close()
            raise
        log.info("extender.listening", url=self.server.url, plugins=[wp.plugin.name for wp in self.plugins],
                 profiles={p.scheduler_name: [wp.plugin.name for wp in p.plugins] for p in self.profiles},
                 verbs=self.server.verbs.paths(), tls=security.tls is not None,
                 client_certificates=options.client_ca is not None, token=security.token is not None)

    def routes(self) -> dict[str, Callable[[], Answer]]:
        """The GET routes beside the verbs: the probes, and /metrics unless --no-metrics."""
        routes: dict[str, Callable[[], Answer]] = {"/healthz": healthz, "/livez": healthz,
                                                   "/readyz": self.readiness.readyz}
        if self.metrics is not None:
            routes["/metrics"] = self.metrics.exposition
        return routes

    def close(self, hurry: Flag | None = None) -> None:
        """Drain the server (requests in flight finish, up to the drain time or until `hurry` is set),
        then close the service and every plugin."""
        self.server.stop(hurry=hurry)
        self.service.close()
        for wp in self.plugins:
            wp.plugin.close()


#: How often the main thread looks at the signals counted (and the `stop` event), in seconds.
POLL_S = 0.1


class Signals:
    """SIGINT and SIGTERM, counted by a handler that takes no lock and does no I/O: a handler
    runs on the main thread between any two of its steps, perhaps while that thread holds a
    lock (an Event's, a logger's) that the handler would then wait for forever. The main
    thread polls `count`; `hurry` (a second signal) is what the drain asks."""

    def __init__(self) -> None:
        self.count = 0

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1  # an int attribute: no lock, no allocation worth the name

    @property
    def hurry(self) -> Flag:
        return _SecondSignal(self)


@dataclass(frozen=True)
class _SecondSignal:
    signals: Signals

    def is_set(self) -> bool:
        return self.signals.count >= 2


def serve(options: ExtenderOptions, ready: threading.Event | None = None,
          stop: threading.Event | None = None) -> int:
    """Serve until SIGINT or SIGTERM (or until `stop` is set), then drain and stop; a second
    signal cuts the drain short."""
    running = RunningExtender(options)
    signals = Signals()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, signals.on_signal)
    running.server.start_background()
    print(f"serving {', '.join(dict.fromkeys(wp.plugin.name for wp in running.plugins))} at {running.server.url}",
          flush=True)
    if ready is not None:
        ready.set()
    try:
        while not signals.count and not (stop is not None and stop.is_set()):
            time.sleep(POLL_S)  # a signal's handler runs here at once; the loop sees it within POLL_S
    finally:
        log.info("extender.stopping", drain_s=options.drain_s)
        running.close(signals.hurry)
        running.compiler.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
