"""Pytest fixtures and helpers for testing a wasm scheduler plugin (a guest).

This module owns the project's pytest plugin: what a guest author needs to load a
guest in a test and drive one pod's whole cycle through it, without YAML or a cluster.
Installing wasm-scheduler registers it with pytest (entry point ``pytest11``); without
the installed entry point, load it with ``-p wasm_scheduler.testing`` or a
``pytest_plugins = ["wasm_scheduler.testing"]`` line in the test module.

A guest author's whole test (the NodeNumber guest: the pod ``web-3`` prefers nodes
whose name ends in 3)::

    from wasm_scheduler.testing import node, pod, run_cycle


    def test_web_3_lands_on_a_node_ending_in_3(wasm_guest):
        plugin = wasm_guest("main.wasm", args=["nodenumber"])
        nodes = [node("node-1"), node("node-3"), node("node-7")]
        result = run_cycle(plugin, pod("web-3"), nodes)
        assert result.scores == {"node-1": 0, "node-3": 100, "node-7": 0}
        assert result.node == "node-3"
        assert result.bound, result.failures

Fixtures:

- ``wasm_compiler``: one `GuestCompiler` for the test session (each guest is compiled
  once), closed at the end of the session;
- ``wasm_guest``: a factory, ``wasm_guest(path, **plugin_args)``, that loads a guest as a
  `WasmPlugin` and stops it when the test ends; a relative path is read from the test
  module's folder, and the keyword arguments are a ``pluginConfig`` entry's ``args``
  (``guestConfig``, ``args``, ``logSeverity``, ``guestSHA256``, ``pool``, ``limits``);
- ``wasm_logs``: the list of log events (dicts) emitted while the test runs, such as
  the guest's own ``guest.log`` lines and its captured output, ``guest.output``.

Helpers: `pod` and `node` build the Kubernetes objects a guest reads; `run_cycle` runs
one pod's scheduling and binding cycle over a list of nodes, through the scheduler's own
framework (`adapters.framework.framework`), and returns a `CycleResult`
with every status, the scores, the chosen node and whether the pod was bound. A guest's
failure (a rejection, an error, a trap or panic) comes back as a status in the result;
`run_cycle` never raises for it. A guest that cannot be loaded raises `GuestLoadError`
(one line naming the guest and the problem) from ``wasm_guest``; malformed plugin
arguments raise `PluginConfigError` (one line naming the field).

Importing this module is cheap (pytest imports it at every start once the package is
installed): the runtime itself is imported when a fixture or helper first needs it.
See `docs/guest-authors.md` ("Test it with pytest").
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from wasm_scheduler.vocabulary import EmptyHandle, KubeObject

if TYPE_CHECKING:
    from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
    from wasm_scheduler.framework_api import Status
    from wasm_scheduler.registry.compiler import GuestCompiler
    from wasm_scheduler.vocabulary import FrameworkHandle

__all__ = [
    "CycleResult",
    "GuestLoader",
    "NodesHandle",
    "node",
    "pod",
    "run_cycle",
    "wasm_compiler",
    "wasm_guest",
    "wasm_logs",
]


#: What `node` gives a node when no capacity is named.
DEFAULT_CAPACITY: Mapping[str, str] = {"cpu": "4", "memory": "8Gi", "pods": "110"}


# --- objects ---------------------------------------------------------------------------

def pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    requests: Mapping[str, str | int] | None = None,
    node_selector: Mapping[str, str] | None = None,
    image: str = "registry.k8s.io/pause:3.9",
    priority: int | None = None,
) -> dict[str, Any]:
    """A pending pod with one container, in the shape ``kubectl get pod -o yaml`` prints.

    `requests` are the container's resource requests (``{"cpu": "500m", "memory": "1Gi"}``);
    the uid is ``uid-<namespace>-<name>`` unless given (a pod's cycle is keyed by its uid).
    """
    container: dict[str, Any] = {"name": "app", "image": image}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    spec: dict[str, Any] = {"containers": [container], "schedulerName": "default-scheduler"}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if priority is not None:
        spec["priority"] = priority
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}"}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


def node(
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    capacity: Mapping[str, str | int] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    images: Mapping[str, int] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A ready node, in the shape ``kubectl get node -o yaml`` prints.

    `capacity` (also its allocatable) defaults to 4 CPUs, 8Gi of memory and 110 pods;
    `labels` are added to ``kubernetes.io/hostname``; `taints` are given as Kubernetes
    writes them (``{"key": "gpu", "value": "true", "effect": "NoSchedule"}``); `images`
    maps an image name to its size in bytes (what ``nodeImageStates`` reports).
    """
    resources = {key: str(value) for key, value in (capacity or DEFAULT_CAPACITY).items()}
    metadata = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(taint) for taint in taints]
    if unschedulable:
        spec["unschedulable"] = True
    status: dict[str, Any] = {
        "capacity": resources,
        "allocatable": dict(resources),
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    if images:
        status["images"] = [{"names": [image], "sizeBytes": size} for image, size in images.items()]
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "spec": spec, "status": status}


def _name_of(obj: KubeObject) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


class NodesHandle(EmptyHandle):
    """The framework handle of a test: serves the given nodes to the guest
    (``k8s.io/api.node``, ``nodeList``, ``nodeImageStates``), keeps the events the guest
    records (``events``: ``handle.eventrecorder.eventf``, decoded), and has no waiting pods."""

    def __init__(self, nodes: Sequence[KubeObject]) -> None:
        super().__init__()
        self.nodes: tuple[KubeObject, ...] = tuple(nodes)
        self._by_name = {_name_of(n): n for n in self.nodes}

    def get_node(self, name: str) -> KubeObject | None:
        return self._by_name.get(name)

    def list_nodes(self) -> Sequence[KubeObject]:
        return self.nodes

    def image_states(self, node_name: str) -> Mapping[str, Mapping[str, int]]:
        found = self._by_name.get(node_name)
        if found is None:
            return {}
        counts: dict[str, int] = {}
        for other in self.nodes:
            for image in _images(other):
                counts[image] = counts.get(image, 0) + 1
        return {image: {"Size": size, "NumNodes": counts[image]} for image, size in _images(found).items()}


def _images(node_obj: KubeObject) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for image in (node_obj.get("status") or {}).get("images") or ():
        size = image.get("sizeBytes") or 0
        for name in image.get("names") or ():
            sizes[str(name)] = size if isinstance(size, int) else 0
    return sizes


# --- one pod's cycle -------------------------------------------------------------------

@dataclass(frozen=True)
class CycleResult:
    """What a guest answered at every extension point of one pod's cycle.

    A point that did not run (the guest does not export it, or the cycle ended before
    it) is None. `failures` lists every status that was not Success, one line each: a
    ready message for an assertion (``assert result.bound, result.failures``).
    """

    #: ``namespace/name`` of the pod.
    pod: str
    #: The nodes the cycle was run over, by name, in the order given.
    nodes: tuple[str, ...]
    pre_filter: Status
    #: The nodes PreFilter limited the cycle to (None: all of them).
    node_subset: frozenset[str] | None = None
    #: Filter's status for every node it ran on.
    filter: Mapping[str, Status] = field(default_factory=dict)
    #: PostFilter, run only when no node passed Filter.
    post_filter: Status | None = None
    nominated_node: str = ""
    pre_score: Status | None = None
    score: Status | None = None
    #: The nodes' scores after NormalizeScore (as Score gave them if it is not exported).
    scores: Mapping[str, int] = field(default_factory=dict)
    #: The scores as Score gave them, before NormalizeScore.
    raw_scores: Mapping[str, int] = field(default_factory=dict)
    normalize_score: Status | None = None
    #: The node chosen: the highest score, ties to the first name in sorted order.
    node: str | None = None
    reserve: Status | None = None
    permit: Status | None = None
    permit_timeout_ms: int = 0
    pre_bind: Status | None = None
    #: The guest's Bind: Success (it bound the pod) or Skip (it left it to another
    #: binder); None when the guest does not export bind.
    bind: Status | None = None
    #: The binding cycle went through: PreBind passed, the pod was bound (by the guest or,
    #: after a Skip or without a bind export, by the default binder), PostBind ran.
    bound: bool = False
    #: Unreserve ran (a failure after Reserve, or a Permit that said Wait).
    unreserved: bool = False
    #: Events the guest recorded through the handle.
    events: tuple[Mapping[str, Any], ...] = ()

    @property
    def feasible(self) -> list[str]:
        """The nodes that passed Filter (every node of the cycle when Filter did not run)."""
        if self.filter:
            return [name for name, status in self.filter.items() if status.ok]
        if not self.pre_filter.ok and not _is_skip(self.pre_filter):
            return []
        return [name for name in self.nodes if self.node_subset is None or name in self.node_subset]

    @property
    def statuses(self) -> dict[str, Status]:
        """Every status of the cycle in the order the points ran, keyed by the point's
        name (``"Filter node-1"`` for a node's Filter)."""
        out: dict[str, Status] = {"PreFilter": self.pre_filter}
        out.update((f"Filter {name}", status) for name, status in self.filter.items())
        for point, status in (("PostFilter", self.post_filter), ("PreScore", self.pre_score),
                              ("Score", self.score), ("NormalizeScore", self.normalize_score),
                              ("Reserve", self.reserve), ("Permit", self.permit),
                              ("PreBind", self.pre_bind), ("Bind", self.bind)):
            if status is not None:
                out[point] = status
        return out

    @property
    def failures(self) -> list[str]:
        """One line per status that was not Success: ``"Filter node-2: Error (Plugin): ..."``."""
        return [f"{point}: {status}" for point, status in self.statuses.items() if not status.ok]

    def __repr__(self) -> str:
        failed = "; ".join(self.failures)
        return (f"CycleResult(pod={self.pod!r}, node={self.node!r}, bound={self.bound}, "
                f"scores={dict(self.scores)!r}, failures=[{failed}])")


def _is_skip(status: Status) -> bool:
    from wasm_scheduler.framework_api import Code

    return status.code == Code.SKIP


def run_cycle(
    plugin: WasmPlugin,
    pod: KubeObject,
    nodes: Sequence[KubeObject | str],
    *,
    handle: FrameworkHandle | None = None,
) -> CycleResult:
    """Run one pod's scheduling and binding cycle through `plugin` over `nodes`.

    The points run through the scheduler's own framework (`Framework.run_*`, a framework
    of this plugin alone, as the HTTP extender builds one), with kube-scheduler's rules:
    PreFilter, Filter on the nodes PreFilter allows, PostFilter when none passes;
    PreScore, Score and NormalizeScore over the nodes that passed (a score outside
    0..100 fails the cycle); then, on the node with the highest score (ties: the first
    name in sorted order), Reserve, Permit, PreBind, Bind and PostBind, with the pod as
    the scheduler hands it to them (``spec.nodeName`` set). A failure after Reserve runs
    Unreserve and ends the cycle; so does a Permit that says Wait (nothing here allows a
    waiting pod, so it ends as its timeout would). A rejection or Skip at PreFilter skips
    Filter, a Skip at PreScore skips Score, a Skip at Bind leaves the pod to the default
    binder, and an Error at any point ends the cycle (a pod whose cycle ends before
    Reserve keeps its instance until the next pod's PreFilter takes it over, as under
    kube-scheduler). Unlike kube-scheduler, which does not score when only one node
    passes Filter, this scores even one node, so a test of Score needs only one.

    `nodes` are node objects (see `node`) or bare names; the guest reads them through
    `handle` (by default a `NodesHandle` of `nodes`). Nothing here raises for what the
    guest answers: every status is in the result.
    """
    from wasm_scheduler.adapters.extender.nodes import RequestNode
    from wasm_scheduler.adapters.framework.cycle_state import CycleState
    from wasm_scheduler.adapters.framework.pods import pod_name, with_changes
    from wasm_scheduler.adapters.framework.profile import framework_of
    from wasm_scheduler.framework_api import Code, Status

    node_objs = [node(n) if isinstance(n, str) else n for n in nodes]
    named = [RequestNode(_name_of(n), n) for n in node_objs]
    names = tuple(n.name for n in named)
    served = handle if handle is not None else NodesHandle(node_objs)
    state = CycleState(served)  # it carries the handle the guest reads
    framework = framework_of(plugin.name, [(plugin, 1)])
    #: What the guest answered at each point (the framework's statuses say where it failed).
    answers: dict[str, Any] = {}
    framework.recorder = lambda point, _plugin, _seconds, result: answers.__setitem__(point, result)
    record: dict[str, Any] = {"pod": pod_name(pod), "nodes": names}

    def done(**more: Any) -> CycleResult:
        record.update(more)
        return CycleResult(events=tuple(getattr(served, "events", ())), **record)

    # --- scheduling cycle: which nodes fit ---
    subset, status = framework.run_pre_filter(state, pod)
    pre = answers["PreFilter"]
    record.update(pre_filter=pre.status, node_subset=pre.node_names)
    if status.code == Code.ERROR:
        return done()
    feasible: list[RequestNode] = []
    rejected: dict[str, Status] = {}
    if not status.ok:  # PreFilter rejected the pod: on every node
        rejected = dict.fromkeys(names, status)
    else:
        candidates = [n for n in named if subset is None or n.name in subset]
        statuses, status = framework.run_filter(state, pod, candidates)
        if "Filter" in answers:
            record["filter"] = answers["Filter"]
        if not status.ok:
            return done()
        feasible = [n for n in candidates if statuses[n.name].ok]
        rejected = {name: s for name, s in statuses.items() if not s.ok}
    if not feasible:
        outside = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node is filtered out by the prefilter result")
        for name in names:
            rejected.setdefault(name, outside)
        if framework.has("post_filter"):
            framework.run_post_filter(state, pod, rejected)
            post = answers["PostFilter"]
            record.update(post_filter=post.status, nominated_node=post.nominated_node_name)
        return done()

    # --- scheduling cycle: which node is best ---
    status = framework.run_pre_score(state, pod, feasible)
    if "PreScore" in answers:
        record["pre_score"] = answers["PreScore"]
    if not status.ok:
        return done()
    table, status = framework.run_score(state, pod, feasible)
    scored, normalized = answers.get("Score"), answers.get("NormalizeScore")
    if scored is not None:
        record["score"] = scored.status
        if scored.status.ok:
            record["raw_scores"] = {s.name: s.score for s in scored.scores}
    if normalized is not None:
        record["normalize_score"] = normalized.status
    if not status.ok:
        if normalized is not None and not normalized.status.ok:
            return done(scores=record["raw_scores"])
        if scored is not None and scored.status.ok:
            record["score"] = status  # the guest answered, the framework refused its scores
        return done()
    column = table.columns.get(plugin.name, ())
    scores = dict(zip(table.names, column, strict=True)) if column else {}
    record["scores"] = scores
    chosen = min((n.name for n in feasible), key=lambda n: (-scores.get(n, 0), n))
    record["node"] = chosen

    # --- Reserve and Permit, then the binding cycle, with the assumed pod ---
    assumed = with_changes(pod, node_name=chosen)

    def unreserve() -> CycleResult:
        framework.run_unreserve(state, assumed, chosen)
        return done(unreserved=True)

    status = framework.run_reserve(state, assumed, chosen)
    record["reserve"] = answers.get("Reserve")
    if not status.ok:
        return unreserve()
    status, _timeouts = framework.run_permit(state, assumed, chosen)
    permit = answers.get("Permit")
    if permit is not None:
        record.update(permit=permit.status, permit_timeout_ms=permit.timeout_ms)
    if not status.ok:
        return unreserve()
    status = framework.run_pre_bind(state, assumed, chosen)
    if "PreBind" in answers:
        record["pre_bind"] = answers["PreBind"]
    if not status.ok:
        return unreserve()
    status = framework.run_bind(state, assumed, chosen)
    if "Bind" in answers:
        record["bind"] = answers["Bind"]
    if not status.ok and status.code != Code.SKIP:
        return unreserve()
    framework.run_post_bind(state, assumed, chosen)
    return done(bound=True)


# --- fixtures --------------------------------------------------------------------------

class GuestLoader:
    """What the ``wasm_guest`` fixture gives: call it to load a guest; every plugin it
    loaded is stopped when the test ends."""

    def __init__(self, compiler: GuestCompiler, base_dir: Path) -> None:
        self.compiler = compiler
        #: Where a relative guest path is read from: the test module's folder.
        self.base_dir = base_dir
        self.loaded: list[WasmPlugin] = []

    def __call__(self, guest: str | os.PathLike[str], *, name: str | None = None,
                 handle: FrameworkHandle | None = None, **plugin_args: Any) -> WasmPlugin:
        """Load `guest` (a path, ``file://`` or ``http(s)://`` URL, or a ``.wat`` text
        file) as a plugin named `name` (by default the file's name without its
        extension, or its folder's name for ``main.wasm``). `plugin_args` are those of a
        ``pluginConfig`` entry, camelCase as in YAML: ``guestConfig``, ``args``,
        ``logSeverity``, ``guestSHA256``, ``pool``, ``limits``. `handle` is the plugin's
        own handle, used outside `run_cycle` (by ``events_to_register``, say)."""
        from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
        from wasm_scheduler.registry.config import PluginConfig, PluginConfigError
        from wasm_scheduler.registry.errors import GuestLoadError

        __tracebackhide__ = True  # a failing test shows its own line and the one-line error
        url = os.fspath(guest)
        if "://" not in url:
            path = Path(url)
            url = str(path if path.is_absolute() else self.base_dir / path)
        if name is None:
            stem = Path(url.rsplit("/", 1)[-1]).stem or "guest"
            parent = Path(url).parent.name
            name = parent if stem == "main" and parent else stem
        try:
            config = PluginConfig.from_args(name, {"guestURL": url, **plugin_args}, base_dir=str(self.base_dir))
            plugin = WasmPlugin.load(config, self.compiler, handle)
        except (GuestLoadError, PluginConfigError) as exc:
            raise exc.with_traceback(None) from None  # the runtime's frames say nothing more
        self.loaded.append(plugin)
        return plugin

    def __repr__(self) -> str:
        return f"GuestLoader(base_dir={str(self.base_dir)!r}, loaded={[p.name for p in self.loaded]!r})"

    def close(self) -> None:
        """Close every plugin loaded through this loader."""
        loaded, self.loaded = self.loaded, []
        for plugin in reversed(loaded):
            plugin.close()


@pytest.fixture(scope="session")
def wasm_compiler() -> Iterator[GuestCompiler]:
    """One `GuestCompiler` for the test session: each guest is compiled once and shared
    by every test; closed when the session ends."""
    from wasm_scheduler.registry.compiler import GuestCompiler

    with GuestCompiler() as compiler:
        yield compiler


@pytest.fixture
def wasm_guest(wasm_compiler: GuestCompiler, request: pytest.FixtureRequest) -> Iterator[GuestLoader]:
    """A factory: ``wasm_guest("main.wasm", guestConfig=..., args=[...])`` loads a guest
    and returns its `WasmPlugin`, stopped when the test ends. A relative path is read
    from the test module's folder. A guest that cannot be loaded raises
    `GuestLoadError`, whose one-line message names the guest and the problem."""
    loader = GuestLoader(wasm_compiler, Path(request.path).parent)
    try:
        yield loader
    finally:
        loader.close()


@pytest.fixture
def wasm_logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """The log events emitted while the test runs, as dicts (``event``, ``plugin``, the
    event's fields): a guest's klog lines are ``guest.log`` events (``message``,
    ``severity``), its stdout and stderr ``guest.output`` events (``stream``, ``line``).
    Every level is captured, debug included, whatever level logging is configured to; a
    logger bound before the fixture started (a plugin loaded by an earlier fixture)
    keeps where and at which level it was configured to log. Afterwards structlog is as
    it was: unconfigured again if it was (so the package writes nothing to stdout)."""
    import structlog
    from structlog.testing import capture_logs

    from wasm_scheduler.logger import to_standard_logging

    configured = structlog.is_configured()
    wrapper_class = structlog.get_config()["wrapper_class"]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(0))
    try:
        with capture_logs() as events:
            yield events
    finally:
        if configured:
            structlog.configure(wrapper_class=wrapper_class)
        else:
            # Loggers bound meanwhile (a plugin's, stopped after this fixture) share this list of
            # processors: their lines go where the package's go while structlog is unconfigured.
            processors = structlog.get_config()["processors"]
            processors[:] = [to_standard_logging]
            structlog.reset_defaults()  # a new list for the defaults: this one stays with those loggers

