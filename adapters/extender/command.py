"""`wasm-scheduler extender`: load the configured wasm plugins and serve them over HTTP.

This module owns turning the command's options into a running extender: the wasm
plugins of a KubeSchedulerConfiguration (every `pluginConfig` entry whose args carry
`guestURL`, with its score weight from the profile), the node cache from a snapshot
file (reloaded when the file changes), the binder (kubeconfig, an explicit API server,
in-cluster credentials, or none), and a server that runs until SIGINT or SIGTERM and
then stops every plugin.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from adapters.extender.binder import Binder, KubernetesBinder, NoBinder
from adapters.extender.server import DEFAULT_MAX_BODY, ExtenderServer
from adapters.extender.service import ExtenderService, NodeCache, WeightedPlugin
from adapters.framework.cluster import load_cluster
from adapters.framework.config import SchedulerConfig, load_config
from adapters.framework.errors import UserError
from adapters.framework.profile import load_wasm_plugin
from registry.compiler import GuestCompiler

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


def node_cache_from(path: Path | None) -> NodeCache:
    """Node objects for node-cache-capable mode, reloaded whenever the file changes."""
    if path is None:
        return NodeCache()
    state: dict[str, Any] = {"mtime": None, "loaded": ((), ())}

    def load() -> tuple[Sequence[Any], Sequence[Any]]:
        try:
            mtime = path.stat().st_mtime_ns
        except OSError as exc:
            raise UserError(f"{path}: cannot read the node snapshot: {exc.strerror or exc}") from None
        if mtime != state["mtime"]:
            cluster = load_cluster(path)
            state["loaded"] = ([n.node for n in cluster.nodes],
                               [p.pod for p in (*cluster.running, *cluster.pending)])
            state["mtime"] = mtime
            log.info("extender.nodes_loaded", path=str(path), nodes=len(state["loaded"][0]))
        loaded: tuple[Sequence[Any], Sequence[Any]] = state["loaded"]
        return loaded

    cache = NodeCache(load)
    cache.refresh()
    return cache


def make_binder(options: ExtenderOptions) -> Binder:
    if options.api_server or options.kubeconfig:
        return KubernetesBinder(api_server=options.api_server, kubeconfig=options.kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return KubernetesBinder()
    return NoBinder()


class RunningExtender:
    """The plugins, service and server of one `extender` run; `stop()` ends them all."""

    def __init__(self, options: ExtenderOptions, compiler: GuestCompiler | None = None) -> None:
        host, port = parse_listen(options.listen)
        config = load_config(options.config)
        cache = node_cache_from(options.cluster)
        self.compiler = compiler or GuestCompiler()
        self.plugins = load_plugins(config, self.compiler)
        try:
            self.service = ExtenderService(self.plugins, cache, make_binder(options), options.expect_bind,
                                           options.bind_timeout_s)
            try:
                self.server = ExtenderServer((host, port), self.service, options.max_body)
            except OSError as exc:
                self.service.close()
                raise UserError(f"--listen {options.listen}: cannot listen: {exc.strerror or exc}") from None
        except BaseException:
            for wp in self.plugins:
                wp.plugin.stop()
            raise
        log.info("extender.listening", url=self.server.url, plugins=[wp.plugin.name for wp in self.plugins])

    def stop(self) -> None:
        self.server.stop()
        self.service.close()
        for wp in self.plugins:
            wp.plugin.stop()


def serve(options: ExtenderOptions, ready: threading.Event | None = None) -> int:
    """Serve until SIGINT or SIGTERM (or `ready`'s owner stops the process)."""
    running = RunningExtender(options)
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    running.server.start_background()
    print(f"serving {', '.join(wp.plugin.name for wp in running.plugins)} at {running.server.url}", flush=True)
    if ready is not None:
        ready.set()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        running.stop()
        running.compiler.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
