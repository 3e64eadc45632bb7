"""`wasm-scheduler extender`: load the configured wasm plugins and serve them over HTTP.

This module owns turning the command's options into a running extender: the wasm
plugins of a KubeSchedulerConfiguration (every `pluginConfig` entry whose args carry
`guestURL`, with its score weight from the profile), the node cache from a snapshot
file (reloaded when the file changes), the binder (kubeconfig, an explicit API server,
in-cluster credentials, or none), the server's limits and security (TLS, client
certificates, a bearer token) from the options, and a server that runs until SIGINT or
SIGTERM, then drains (requests in flight get their answers, within `--drain-seconds`)
and stops every plugin. A second signal cuts the drain short.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import structlog

from wasm_scheduler.adapters.extender.binder import Binder, KubernetesBinder, NoBinder, find_kubeconfig
from wasm_scheduler.adapters.extender.nodes import NodeCache, NodeSource
from wasm_scheduler.adapters.extender.server import (
    DEFAULT_BACKLOG,
    DEFAULT_DRAIN_S,
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_READ_TIMEOUT_S,
    ExtenderServer,
    ServerLimits,
    ServerSecurity,
    read_token,
    tls_context,
)
from wasm_scheduler.adapters.extender.service import ExtenderService, WeightedPlugin
from wasm_scheduler.adapters.extender.snapshot_reload import DEFAULT_POLL_S, SnapshotReloader
from wasm_scheduler.adapters.framework.config import SchedulerConfig, load_config
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.framework.profile import load_wasm_plugin
from wasm_scheduler.registry.compiler import GuestCompiler

log = structlog.get_logger("adapters.extender")


@dataclass(frozen=True)
class ExtenderOptions:
    config: Path
    listen: str = "127.0.0.1:8888"
    cluster: Path | None = None
    bind_timeout_s: float = 30.0
    expect_bind: bool = True
    kubeconfig: str = ""
    api_server: str = ""
    max_body: int = DEFAULT_MAX_BODY
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    drain_s: float = DEFAULT_DRAIN_S
    tls_cert: Path | None = None
    tls_key: Path | None = None
    client_ca: Path | None = None
    token_file: Path | None = None
    snapshot_poll_s: float = DEFAULT_POLL_S
    #: Folder of compiled guests shared between runs (`GuestCompiler`); None compiles every time.
    cache_dir: Path | None = None

    def limits(self) -> ServerLimits:
        """The server's limits; a value out of range is a UserError naming its option."""
        if not self.read_timeout_s > 0:
            raise UserError(f"--read-timeout {self.read_timeout_s}: must be positive")
        if self.max_connections < 1:
            raise UserError(f"--max-connections {self.max_connections}: must be at least 1")
        if not self.drain_s >= 0:
            raise UserError(f"--drain-seconds {self.drain_s}: must not be negative")
        return ServerLimits(self.max_body, self.read_timeout_s, self.max_connections, DEFAULT_BACKLOG, self.drain_s)

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
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UserError(f"--listen {listen}: expected HOST:PORT, e.g. 127.0.0.1:8888")
    return host.strip("[]") or "0.0.0.0", int(port)


def load_plugins(config: SchedulerConfig, compiler: GuestCompiler) -> list[WeightedPlugin]:
    """Every wasm plugin of the configuration (first profile that names it wins)."""
    plugins: dict[str, WeightedPlugin] = {}
    try:
        for profile in config.profiles:
            weights = {ref.name: ref.weight for point in ("multiPoint", "score")
                       for ref in profile.plugins[point].enabled if ref.weight}
            for name, entry in profile.plugin_args.items():
                if entry.is_wasm and name not in plugins:
                    plugin = load_wasm_plugin(name, entry, config, compiler, None)
                    plugins[name] = WeightedPlugin(plugin, weights.get(name, 1))
    except BaseException:
        for wp in plugins.values():
            wp.plugin.stop()
        raise
    if not plugins:
        raise UserError(f"{config.source}: no pluginConfig entry has args.guestURL: there is no wasm plugin to serve")
    return list(plugins.values())


def node_cache_from(path: Path | None, poll_s: float = DEFAULT_POLL_S) -> NodeSource:
    """Node objects for node-cache-capable mode: loaded now (a broken file is a UserError), then
    reloaded by a background thread when the file changes (`SnapshotReloader`; close() stops it)."""
    if path is None:
        return NodeCache()
    return SnapshotReloader(path, poll_s)


def make_binder(options: ExtenderOptions) -> Binder:
    """--api-server, else --kubeconfig, else in-cluster credentials, else the kubeconfig kubectl
    would use ($KUBECONFIG, ~/.kube/config), else none (binds fail with a clear message).

    With --no-bind only an explicit --api-server or --kubeconfig builds a binder. Every binder
    but NoBinder needs the optional Kubernetes client; without it this is a UserError naming
    what asked for the API and how to install the client."""
    if options.api_server or options.kubeconfig:
        return KubernetesBinder(api_server=options.api_server, kubeconfig=options.kubeconfig)
    if not options.expect_bind:
        return NoBinder()  # --no-bind: kube-scheduler binds, found credentials are not needed
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return KubernetesBinder()
    found = find_kubeconfig(os.environ, Path.home())
    if found is not None:
        log.info("extender.kubeconfig", path=str(found))
        origin = "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "the default kubeconfig"
        return KubernetesBinder(kubeconfig=str(found), requested_by=f"{found} ({origin})")
    return NoBinder()


class RunningExtender:
    """The plugins, service and server of one `extender` run; `stop()` ends them all."""

    def __init__(self, options: ExtenderOptions, compiler: GuestCompiler | None = None) -> None:
        host, port = parse_listen(options.listen)
        limits, security = options.limits(), options.security()
        config = load_config(options.config)
        cache = node_cache_from(options.cluster, options.snapshot_poll_s)
        try:
            self.compiler = compiler or GuestCompiler(cache_dir=options.cache_dir)
            self.plugins = load_plugins(config, self.compiler)
        except BaseException:
            cache.close()  # its poller thread ends with the failed start
            raise
        try:
            self.service = ExtenderService(self.plugins, cache, make_binder(options), options.expect_bind,
                                           options.bind_timeout_s)
            try:
                self.server = ExtenderServer((host, port), self.service, limits=limits, security=security)
            except OSError as exc:
                self.service.close()
                raise UserError(f"--listen {options.listen}: cannot listen: {exc.strerror or exc}") from None
        except BaseException:
            cache.close()
            for wp in self.plugins:
                wp.plugin.stop()
            raise
        log.info("extender.listening", url=self.server.url, plugins=[wp.plugin.name for wp in self.plugins],
                 tls=security.tls is not None, client_certificates=options.client_ca is not None,
                 token=security.token is not None)

    def stop(self, hurry: threading.Event | None = None) -> None:
        """Drain the server (requests in flight finish, up to the drain time or until `hurry` is set),
        then stop the service and every plugin."""
        self.server.stop(hurry=hurry)
        self.service.close()
        for wp in self.plugins:
            wp.plugin.stop()


def serve(options: ExtenderOptions, ready: threading.Event | None = None,
          stop: threading.Event | None = None) -> int:
    """Serve until SIGINT or SIGTERM (or until `stop` is set), then drain and stop; a second
    signal cuts the drain short."""
    running = RunningExtender(options)
    stop = stop or threading.Event()
    hurry = threading.Event()
    previous = {}

    def on_signal(signum: int, frame: object) -> None:
        if stop.is_set():
            hurry.set()
        stop.set()

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    running.server.start_background()
    print(f"serving {', '.join(wp.plugin.name for wp in running.plugins)} at {running.server.url}", flush=True)
    if ready is not None:
        ready.set()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        log.info("extender.stopping", drain_s=options.drain_s)
        running.stop(hurry)
        running.compiler.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
