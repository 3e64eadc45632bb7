"""A stand-in for kube-scheduler that calls HTTP extenders the way kube-scheduler does.

`KubeSchedulerDriver` plays kube-scheduler's scheduleOne against extenders over real
HTTP, following the call sequence written down in `docs/extender.md`:

- findNodesThatFitPod: a nominated node (`status.nominatedNodeName`) is evaluated on its
  own first, in-tree filter then extenders, and if it passes it is the only feasible
  node; otherwise every node is evaluated in the same cycle. The in-tree filter is one
  rule: a node holds at most `status.allocatable.pods` pods (running, assumed or bound).
- findNodesThatPassExtenders: only while some node is feasible, only extenders
  interested in the pod (`managedResources`), each one's filter gets what the previous
  one left; an ignorable extender's error is skipped, any other fails the cycle.
- prioritizeNodes: only with more than one feasible node; each interested extender's
  scores count `score * weight * 10`; an extender's prioritize error is ignored. There
  are no in-tree score plugins here, so in-tree scores are 0. The highest total wins;
  ties go to the node listed first in the driver's node list (kube-scheduler breaks
  ties at random), so a run is deterministic.
- the pod is assumed on its node and its binding cycle runs in a thread of its own
  (the binding goroutine): the next pod's cycle, filter included, can start before it.
  With `hold_binds_until_next_filter`, each bind waits until the next scheduling
  cycle's first extender filter has been answered (or that cycle ended without one, or
  nothing is left to schedule), which makes that interleaving certain.
- bind: the first extender with a bind verb that is interested in the pod binds it,
  else the in-tree DefaultBinder does (recorded in `default_bindings`, no HTTP). A
  failed bind forgets the assumed pod and requeues it; its next attempt starts again
  with filter. Attempts are bounded by `max_attempts`.
- preemption (with `preemption=True`): when no node fits, lower-priority pods are
  chosen as victims on nodes that failed as Unschedulable (in-tree only, as
  SelectVictimsOnNode does), every interested extender with a preempt verb may narrow
  them (`NodeNameToVictims`, or `NodeNameToMetaVictims` when node-cache-capable), the
  victims of the chosen node are deleted and the pod is nominated to it and requeued.

Every HTTP call is recorded as a `Call` (verb, pod, nodes, HTTP status, answer, and the
error kube-scheduler takes from it), in the order the answers came.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: framework.MaxNodeScore and extenderv1.MaxExtenderPriority.
MAX_NODE_SCORE = 100
MAX_EXTENDER_PRIORITY = 10
#: kube-scheduler's DefaultExtenderTimeout (pkg/scheduler/extender.go), used when httpTimeout is 0.
DEFAULT_HTTP_TIMEOUT_S = 5.0
#: kube-scheduler's minFeasibleNodesToFind: below it every node is examined.
MIN_FEASIBLE_NODES_TO_FIND = 100
#: The kubelet's default pod capacity, for a node without status.allocatable.pods.
DEFAULT_POD_CAPACITY = 110

Obj = dict[str, Any]
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"


@dataclass(frozen=True)
class ExtenderConfig:
    """One entry of KubeSchedulerConfiguration's `extenders:`; an empty verb is not configured."""

    url_prefix: str
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = "bind"
    preempt_verb: str = ""
    weight: int = 1
    node_cache_capable: bool = False
    managed_resources: frozenset[str] = frozenset()
    ignorable: bool = False
    http_timeout_s: float = DEFAULT_HTTP_TIMEOUT_S

    def is_interested(self, pod: Mapping[str, Any]) -> bool:
        """HTTPExtender.IsInterested: no managed resources, or a container (or init
        container) requests or limits one of them."""
        if not self.managed_resources:
            return True
        spec = pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            resources = container.get("resources") or {}
            for kind in ("requests", "limits"):
                if self.managed_resources & set(resources.get(kind) or {}):
                    return True
        return False


@dataclass(frozen=True)
class Call:
    """One HTTP call to an extender, as kube-scheduler saw it."""

    seq: int
    #: "scheduling" (the scheduleOne loop) or "binding" (a binding goroutine).
    loop: str
    #: The pod's scheduling attempt (1 for its first cycle).
    attempt: int
    verb: str
    extender: str
    pod: str  # namespace/name
    uid: str
    nodes: tuple[str, ...]
    #: HTTP status; 0 when no answer came (connection refused, timeout).
    status: int
    answer: Any
    #: What kube-scheduler makes of the answer: "" for success, else the error.
    error: str


@dataclass
class PodResult:
    """What became of one pod."""

    pod: str
    uid: str
    node: str = ""
    #: The extender's URL prefix, "DefaultBinder", or "" when never bound.
    bound_by: str = ""
    attempts: int = 0
    #: One line per failed attempt (scheduling or binding).
    failures: list[str] = field(default_factory=list)
    nominated_node: str = ""


@dataclass
class _Queued:
    pod: Obj
    attempt: int


class ExtenderError(Exception):
    """An extender call kube-scheduler counts as failed."""


class KubeSchedulerDriver:
    """kube-scheduler's scheduleOne with extenders, over real HTTP (see the module docstring)."""

    def __init__(
        self,
        nodes: Sequence[Mapping[str, Any]],
        extenders: Sequence[ExtenderConfig],
        *,
        running: Iterable[Mapping[str, Any]] = (),
        max_attempts: int = 3,
        hold_binds_until_next_filter: bool = False,
        preemption: bool = False,
        before_bind: Callable[[Mapping[str, Any], str, int], None] | None = None,
        wait_timeout_s: float = 60.0,
    ) -> None:
        self.nodes: dict[str, Obj] = {n["metadata"]["name"]: copy.deepcopy(dict(n)) for n in nodes}
        # buildExtenders (pkg/scheduler/scheduler.go) puts ignorable extenders last.
        self.extenders = [e for e in extenders if not e.ignorable] + [e for e in extenders if e.ignorable]
        self.max_attempts = max_attempts
        self.hold_binds = hold_binds_until_next_filter
        self.preemption = preemption
        self.before_bind = before_bind
        self.wait_timeout_s = wait_timeout_s
        self.calls: list[Call] = []
        self.results: dict[str, PodResult] = {}
        #: (namespace/name, node) of every bind the in-tree DefaultBinder made.
        self.default_bindings: list[tuple[str, str]] = []
        #: (victim namespace/name, node, preemptor namespace/name) of every pod preempted.
        self.preempted: list[tuple[str, str, str]] = []
        self._cond = threading.Condition()  # guards everything below and the lists above
        self._seq = 0
        self._queue: deque[_Queued] = deque()
        self._in_flight = 0
        self._threads: list[threading.Thread] = []
        #: node -> uid -> pod: running, assumed and bound pods (the scheduler cache).
        self._pods_on: dict[str, dict[str, Obj]] = {name: {} for name in self.nodes}
        for pod in running:
            node = pod["spec"]["nodeName"]
            self._pods_on[node][_uid(pod)] = copy.deepcopy(dict(pod))
        #: Gates of binds waiting for the next cycle's filter answer.
        self._held: list[threading.Event] = []
        self._releasing: list[threading.Event] = []

    # --- the scheduling queue and loop ---------------------------------------------------

    def run(self, pods: Iterable[Mapping[str, Any]]) -> dict[str, PodResult]:
        """Schedule the pods in order (requeued ones go to the back) until none is left."""
        with self._cond:
            for pod in pods:
                queued = _Queued(copy.deepcopy(dict(pod)), 1)
                self._queue.append(queued)
                self.results[_key(queued.pod)] = PodResult(_key(queued.pod), _uid(queued.pod))
        deadline = time.monotonic() + self.wait_timeout_s
        while True:
            with self._cond:
                while not self._queue and self._in_flight:
                    self._release(self._held)  # nothing else to schedule: binds go now
                    self._held = []
                    if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                        raise TimeoutError(f"{self._in_flight} binding cycle(s) still running")
                if not self._queue:
                    break
                item = self._queue.popleft()
            self._schedule_one(item)
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        return self.results

    def _schedule_one(self, item: _Queued) -> None:
        """One scheduling cycle (schedulingCycle of scheduleOne), then the binding goroutine."""
        result = self.results[_key(item.pod)]
        result.attempts = item.attempt
        with self._cond:
            # Binds of earlier pods held until this cycle's first filter answer.
            self._releasing, self._held = self._held, []
        try:
            try:
                feasible, statuses = self._find_nodes_that_fit(item)
            except ExtenderError as exc:  # an error, not a FitError: requeued with backoff
                result.failures.append(f"attempt {item.attempt}: {exc}")
                self._requeue(item)
                return
            if not feasible:
                result.failures.append(f"attempt {item.attempt}: no node fits: {_describe(statuses)}")
                nominated = self._preempt(item, statuses) if self.preemption else ""
                if nominated:
                    item.pod.setdefault("status", {})["nominatedNodeName"] = nominated
                    result.nominated_node = nominated
                    self._requeue(item)
                return
            node = feasible[0] if len(feasible) == 1 else self._select_host(self._prioritize(item, feasible))
            self._start_binding(item, node)
        finally:
            self._release(self._releasing)
            self._releasing = []

    def _requeue(self, item: _Queued) -> None:
        if item.attempt >= self.max_attempts:
            return
        with self._cond:
            self._queue.append(_Queued(item.pod, item.attempt + 1))
            self._cond.notify_all()

    @staticmethod
    def _release(gates: list[threading.Event]) -> None:
        for gate in gates:
            gate.set()

    # --- findNodesThatFitPod ----------------------------------------------------------------

    def _find_nodes_that_fit(self, item: _Queued) -> tuple[list[str], dict[str, tuple[str, str]]]:
        statuses: dict[str, tuple[str, str]] = {}
        nominated = str((item.pod.get("status") or {}).get("nominatedNodeName") or "")
        if nominated in self.nodes:  # evaluateNominatedNode: that node alone, first
            try:
                feasible = self._pass_extenders(item, self._pass_filters(item.pod, [nominated], statuses), statuses)
            except ExtenderError:
                feasible = []  # logged by kube-scheduler; the full evaluation follows
            if feasible:
                return feasible, statuses
        feasible = self._pass_filters(item.pod, list(self.nodes), statuses)
        if not self._has_extender_filters() and not self._has_scoring():
            feasible = feasible[:1]  # numNodesToFind is 1 when nothing would compare nodes
        return self._pass_extenders(item, feasible, statuses), statuses

    def _has_extender_filters(self) -> bool:
        return any(e.filter_verb for e in self.extenders)

    def _has_scoring(self) -> bool:
        return any(e.prioritize_verb for e in self.extenders)  # no in-tree score plugins here

    def _pass_filters(self, pod: Obj, names: list[str], statuses: dict[str, tuple[str, str]]) -> list[str]:
        """The in-tree filter: room for one more pod on the node."""
        feasible = []
        with self._cond:
            for name in names:
                if len(self._pods_on[name]) < _pod_capacity(self.nodes[name]):
                    feasible.append(name)
                else:
                    statuses[name] = (UNSCHEDULABLE, "Too many pods")
        return feasible

    def _pass_extenders(self, item: _Queued, feasible: list[str],
                        statuses: dict[str, tuple[str, str]]) -> list[str]:
        for ext in self.extenders:
            if not feasible:
                break
            if not ext.is_interested(item.pod):
                continue
            if not ext.filter_verb:
                continue  # HTTPExtender.Filter hands the nodes back without a call
            try:
                kept, failed, unresolvable = self._filter(ext, item, feasible)
            except ExtenderError:
                if ext.ignorable:
                    continue
                raise
            for name, message in unresolvable.items():
                statuses[name] = (UNRESOLVABLE, message)
            for name, message in failed.items():
                if name not in unresolvable:
                    statuses[name] = (UNSCHEDULABLE, message)
            feasible = kept
        return feasible

    def _node_args(self, ext: ExtenderConfig, pod: Obj, names: Sequence[str]) -> Obj:
        if ext.node_cache_capable:
            return {"Pod": pod, "Nodes": None, "NodeNames": list(names)}
        return {"Pod": pod, "Nodes": {"metadata": {}, "items": [self.nodes[n] for n in names]}, "NodeNames": None}

    def _filter(self, ext: ExtenderConfig, item: _Queued,
                names: list[str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
        answer = self._send(ext, ext.filter_verb, self._node_args(ext, item.pod, names), item, names,
                            check=_filter_error, loop="scheduling")
        # The first filter answer of a cycle lets the earlier pods' held binds go.
        self._release(self._releasing)
        returned_names = _field(answer, "NodeNames")
        returned_nodes = _field(answer, "Nodes")
        if ext.node_cache_capable and returned_names is not None:
            kept = list(returned_names)
        elif returned_nodes is not None:
            kept = [n["metadata"]["name"] for n in (returned_nodes.get("items") or [])]
        else:
            kept = []
        return kept, dict(_field(answer, "FailedNodes") or {}), dict(_field(answer, "FailedAndUnresolvableNodes") or {})

    # --- prioritizeNodes ------------------------------------------------------------------

    def _prioritize(self, item: _Queued, feasible: list[str]) -> dict[str, int]:
        if not self.extenders:
            return dict.fromkeys(feasible, 1)  # no score plugins and no extenders: all 1
        totals = dict.fromkeys(feasible, 0)  # in-tree score plugins: none
        for ext in self.extenders:
            if not ext.is_interested(item.pod) or not ext.prioritize_verb:
                continue  # no prioritize verb: zero scores, weight 0, no call
            try:
                answer = self._send(ext, ext.prioritize_verb, self._node_args(ext, item.pod, feasible), item,
                                    feasible, check=_priority_list_error, loop="scheduling")
            except ExtenderError:
                continue  # ignored: no score from this extender
            for host in answer:
                if host["Host"] in totals:
                    totals[host["Host"]] += int(host["Score"]) * ext.weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)
        return totals

    def _select_host(self, totals: Mapping[str, int]) -> str:
        order = {name: i for i, name in enumerate(self.nodes)}
        return min(totals, key=lambda name: (-totals[name], order[name]))

    # --- the binding goroutine ------------------------------------------------------------

    def _start_binding(self, item: _Queued, node: str) -> None:
        gate = threading.Event()
        with self._cond:
            self._pods_on[node][_uid(item.pod)] = item.pod  # assume
            self._in_flight += 1
            if self.hold_binds:
                self._held.append(gate)
            else:
                gate.set()
        thread = threading.Thread(target=self._binding_cycle, args=(item, node, gate),
                                  name=f"binding-{_key(item.pod)}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _binding_cycle(self, item: _Queued, node: str, gate: threading.Event) -> None:
        result = self.results[_key(item.pod)]
        try:
            if not gate.wait(self.wait_timeout_s):
                raise TimeoutError("a held bind was never released")
            if self.before_bind is not None:
                self.before_bind(item.pod, node, item.attempt)
            try:
                bound_by = self._bind(item, node)
            except ExtenderError as exc:
                with self._cond:
                    self._pods_on[node].pop(_uid(item.pod), None)  # Unreserve, ForgetPod
                result.failures.append(f"attempt {item.attempt}: bind to {node} failed: {exc}")
                self._requeue(item)
                return
            with self._cond:
                result.node, result.bound_by = node, bound_by
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def _bind(self, item: _Queued, node: str) -> str:
        """extendersBinding, then the bind plugins (DefaultBinder) when no extender bound."""
        pod = item.pod
        for ext in self.extenders:
            if not ext.bind_verb or not ext.is_interested(pod):
                continue
            meta = pod["metadata"]
            body = {"PodName": meta["name"], "PodNamespace": meta.get("namespace") or "default",
                    "PodUID": _uid(pod), "Node": node}
            try:
                self._send(ext, ext.bind_verb, body, item, [node], check=_error_field, loop="binding")
            except ExtenderError:
                if ext.ignorable:
                    continue
                raise
            return ext.url_prefix
        with self._cond:
            self.default_bindings.append((_key(pod), node))
        return "DefaultBinder"

    def send_bind(self, ext: ExtenderConfig, name: str, namespace: str, uid: str, node: str) -> Call:
        """One bind call made outside any cycle (a test forging a binding); recorded like the rest."""
        item = _Queued({"metadata": {"name": name, "namespace": namespace, "uid": uid}}, 0)
        body = {"PodName": name, "PodNamespace": namespace, "PodUID": uid, "Node": node}
        return self._post(ext, ext.bind_verb, body, item, [node], check=_error_field, loop="binding")

    # --- preemption (DefaultPreemption's PostFilter) ---------------------------------------

    def _preempt(self, item: _Queued, statuses: Mapping[str, tuple[str, str]]) -> str:
        """Evaluator.Preempt: candidates, callExtenders, SelectCandidate, prepareCandidate."""
        pod = item.pod
        if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
            return ""
        candidates: dict[str, list[Obj]] = {}
        for name in self.nodes:
            if statuses.get(name, (UNRESOLVABLE, ""))[0] != UNSCHEDULABLE:
                continue  # only nodes that failed as Unschedulable may be helped
            victims = self._select_victims(pod, name)
            if victims:
                candidates[name] = victims
        for ext in self.extenders:
            if not candidates:
                break
            if not ext.preempt_verb or not ext.is_interested(pod):
                continue
            try:
                candidates = self._process_preemption(ext, item, candidates)
            except ExtenderError:
                if ext.ignorable:
                    continue
                return ""
        if not candidates:
            return ""
        order = {name: i for i, name in enumerate(self.nodes)}
        chosen = min(candidates, key=lambda n: (max(_priority(v) for v in candidates[n]),
                                                len(candidates[n]), order[n]))
        with self._cond:
            for victim in candidates[chosen]:
                self._pods_on[chosen].pop(_uid(victim), None)
                self.preempted.append((_key(victim), chosen, _key(pod)))
        return chosen

    def _select_victims(self, pod: Obj, node: str) -> list[Obj]:
        """SelectVictimsOnNode: remove every lower-priority pod, check the in-tree filter,
        then reprieve as many as fit, highest priority first."""
        with self._cond:
            on_node = list(self._pods_on[node].values())
        lower = sorted((p for p in on_node if _priority(p) < _priority(pod)), key=_priority, reverse=True)
        capacity = _pod_capacity(self.nodes[node])
        remaining = len(on_node) - len(lower)
        if remaining >= capacity:
            return []
        room = capacity - remaining - 1  # one place for the preemptor
        return lower[room:]

    def _process_preemption(self, ext: ExtenderConfig, item: _Queued,
                            candidates: Mapping[str, list[Obj]]) -> dict[str, list[Obj]]:
        if ext.node_cache_capable:
            victims: Obj = {"NodeNameToMetaVictims": {
                n: {"Pods": [{"UID": _uid(v)} for v in vs], "NumPDBViolations": 0} for n, vs in candidates.items()}}
        else:
            victims = {"NodeNameToVictims": {n: {"Pods": vs, "NumPDBViolations": 0} for n, vs in candidates.items()}}
        answer = self._send(ext, ext.preempt_verb, {"Pod": item.pod, **victims}, item, list(candidates),
                            check=_mapping_error, loop="scheduling")
        kept: dict[str, list[Obj]] = {}
        with self._cond:
            for node, meta in (_field(answer, "NodeNameToMetaVictims") or {}).items():
                if node not in self._pods_on:
                    raise ExtenderError(f"extender named unknown node {node}")
                pods = []
                for meta_pod in _field(meta, "Pods") or []:
                    found = self._pods_on[node].get(str(_field(meta_pod, "UID")))
                    if found is None:
                        raise ExtenderError(f"victim {meta_pod} not found on node {node}")
                    pods.append(found)
                if not pods:
                    if ext.ignorable:
                        continue
                    raise ExtenderError(f"expected at least one victim pod on node {node}")
                kept[node] = pods
        return kept

    # --- HTTP -------------------------------------------------------------------------------

    def _send(self, ext: ExtenderConfig, verb: str, body: Any, item: _Queued, nodes: Sequence[str],
              check: Callable[[Any], str], loop: str) -> Any:
        """POST url_prefix/verb as HTTPExtender.send does; the answer, or ExtenderError."""
        call = self._post(ext, verb, body, item, nodes, check, loop)
        if call.error:
            raise ExtenderError(call.error)
        return call.answer

    def _post(self, ext: ExtenderConfig, verb: str, body: Any, item: _Queued, nodes: Sequence[str],
              check: Callable[[Any], str], loop: str) -> Call:
        """One call, recorded; `check` says what kube-scheduler makes of a 200 answer."""
        url = ext.url_prefix.rstrip("/") + "/" + verb
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        status, answer, error = 0, None, ""
        try:
            with urllib.request.urlopen(request, timeout=ext.http_timeout_s) as response:
                status = response.status
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            status = exc.code
            raw = exc.read()
            try:
                answer = json.loads(raw) if raw else None
            except ValueError:
                answer = raw.decode(errors="replace")
        except (OSError, ValueError) as exc:  # refused, reset, timed out, undecodable
            error = f"{verb} to {url}: {exc}"
        if not error and status != 200:
            error = f"failed {verb} with extender at URL {url}, code {status}"
        if not error:
            error = check(answer)
        with self._cond:
            self._seq += 1
            call = Call(self._seq, loop, item.attempt, verb, ext.url_prefix, _key(item.pod), _uid(item.pod),
                        tuple(nodes), status, answer, error)
            self.calls.append(call)
        return call

    # --- reading the record -----------------------------------------------------------------

    def calls_of(self, pod_name: str, namespace: str = "") -> list[Call]:
        """The calls made for one pod (by name, or namespace/name), in order."""
        with self._cond:
            return [c for c in self.calls
                    if c.pod == pod_name or (not namespace and c.pod.split("/", 1)[-1] == pod_name)
                    or c.pod == f"{namespace}/{pod_name}"]

    def verbs_of(self, pod_name: str) -> list[str]:
        return [c.verb for c in self.calls_of(pod_name)]


# --- answers, as Go's encoding/json reads them (field names match case-insensitively) ----------


def _field(obj: Any, name: str) -> Any:
    if not isinstance(obj, Mapping):
        return None
    if name in obj:
        return obj[name]
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == name.lower():
            return value
    return None


def _error_field(answer: Any) -> str:
    if not isinstance(answer, Mapping):
        return f"undecodable answer {answer!r}"
    return str(_field(answer, "Error") or "")


def _filter_error(answer: Any) -> str:
    return _error_field(answer)


def _priority_list_error(answer: Any) -> str:
    if not isinstance(answer, list) or not all(isinstance(h, Mapping) and "Host" in h and "Score" in h
                                               for h in answer):
        return f"undecodable host priority list {answer!r}"
    return ""


def _mapping_error(answer: Any) -> str:
    return "" if isinstance(answer, Mapping) else f"undecodable answer {answer!r}"


# --- pods and nodes ------------------------------------------------------------------------------


def _key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def _uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _priority(pod: Mapping[str, Any]) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _pod_capacity(node: Mapping[str, Any]) -> int:
    return int(((node.get("status") or {}).get("allocatable") or {}).get("pods", DEFAULT_POD_CAPACITY))


def _describe(statuses: Mapping[str, tuple[str, str]]) -> str:
    return ", ".join(f"{node}: {reason}" for node, (_code, reason) in sorted(statuses.items())) or "no nodes"


__all__ = ["KubeSchedulerDriver", "ExtenderConfig", "Call", "PodResult", "ExtenderError"]
