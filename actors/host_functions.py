"""The ABI's host functions (`k8s.io/api`, `k8s.io/scheduler`, `k8s.io/klog`).

This module owns what a guest can ask of the host during a call. Each function reads
its inputs from the instance's current `CallContext` (set by the guest instance for
the length of one export call; never a global), answers through the buffer protocol
of `GuestMemory`, and records results the guest reports (status reason, node subset,
nominated node, normalized scores, cluster events) on the same context. A result
given from the wrong extension point, or malformed, is ignored with a warning or
turned into an Error status; it never raises into the host. A pointer outside guest
memory raises `GuestFault`, which traps the guest's call.

Text and JSON from the guest are read by the rules of Go's `encoding/json` and Go
strings, as the reference host reads them (`docs/abi-notes.md` lists each import):
invalid UTF-8 becomes U+FFFD byte by byte, `null` is no error, struct field names
match case-insensitively, unknown fields are ignored, duplicate keys keep the last
value, and an integer field takes only an integer literal in int64 range.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wasm_scheduler.actors.go_json import GoJSONError, go_cstrings, go_event, go_score_map, go_text
from wasm_scheduler.actors.guest_memory import GuestFault, GuestMemory
from wasm_scheduler.actors.kube.codec import encode_pod
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.framework_api import ClusterEvent, Phase
from wasm_scheduler.logger import enabled, get_logger, logging_configured
from wasm_scheduler.registry.guest_abi import HOST_IMPORTS, Export
from wasm_scheduler.vocabulary import FrameworkHandle, KubeObject, pod_name, pod_uid

#: Largest result a guest may hand over in one call (a node-name list, a score map...).
MAX_RESULT_BYTES = 16 * 1024 * 1024

#: klog severity -> structlog method, and its logging level number.
_KLOG_LEVELS = ("info", "warning", "error", "critical")
_KLOG_LEVEL_NUMBERS = (logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)


@dataclass(slots=True)
class CallContext:
    """Inputs of the export call in progress and what the guest reported during it."""

    export: Export
    handle: FrameworkHandle
    pod: KubeObject | None = None
    phase: Phase = "scheduling"
    node_name: str = ""
    target_pod: KubeObject | None = None
    filtered_node_names: Sequence[str] = ()
    node_to_status: Mapping[str, int] = field(default_factory=dict)
    node_scores: Mapping[str, int] = field(default_factory=dict)
    # --- reported by the guest -------------------------------------------------------
    reason: str = ""
    node_names: list[str] | None = None
    nominated_node_name: str = ""
    normalized_scores: dict[str, int] | None = None
    cluster_events: list[ClusterEvent] = field(default_factory=list)
    #: A result the guest gave that the host could not accept; the call becomes Error.
    result_error: str = ""
    # --- during a batch of per-node calls run in wasm (actors.node_loop) ---------------
    #: The batch's node names, and how to read the index of the node in progress.
    batch_names: Sequence[str] | None = None
    node_index: Callable[[], int] | None = None
    #: Status reasons the guest set, by node index.
    batch_reasons: dict[int, str] | None = None

    #: `log_fields`, made on first use (a guest that logs per node asks once per node).
    _log_fields: dict[str, str] | None = None

    @property
    def log_fields(self) -> dict[str, str]:
        """The context every log line of this call carries (callers copy it, never edit it)."""
        fields = self._log_fields
        if fields is None:
            uid = pod_uid(self.pod) if self.pod is not None else ""
            fields = {"extension_point": self.export, "pod": self.pod_name, "pod_uid": uid, "phase": self.phase}
            self._log_fields = fields
        return fields

    @property
    def pod_name(self) -> str:
        return pod_name(self.pod) if self.pod is not None else ""


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class HostFunctions:
    """The ABI host functions of one instance."""

    def __init__(
        self,
        plugin: str,
        instance_id: str,
        guest_config: str,
        log_severity: int,
        wire_cache: WireCache,
    ) -> None:
        self.plugin = plugin
        self.instance_id = instance_id
        self.guest_config = guest_config.encode()
        self.log_severity = log_severity
        #: The plugin's encoded nodes and pods (a preemption victim is encoded once for
        #: RemovePod and AddPod, as the pod being scheduled is once per cycle).
        self.wire_cache = wire_cache
        self.memory: GuestMemory | None = None
        self.context: CallContext | None = None
        self.log = get_logger("guest").bind(plugin=plugin, instance=instance_id)

    # --- plumbing ----------------------------------------------------------------------

    def _mem(self) -> GuestMemory:
        if self.memory is None:
            raise GuestFault("host function called before the instance's memory exists")
        return self.memory

    def _ctx(self, function: str) -> CallContext:
        if self.context is None:
            raise GuestFault(f"{function} called outside any extension point (during _start?)")
        return self.context

    def _reject_result(self, function: str, allowed: tuple[str, ...]) -> bool:
        """True (and a warning) when `function` is called from an export it is not for."""
        ctx = self._ctx(function)
        if ctx.export in allowed:
            return False
        self.log.warning(
            "guest.result_ignored",
            function=function,
            **ctx.log_fields,
            reason=f"only valid in {', '.join(allowed)}",
        )
        return True

    def _result_bytes(self, ptr: int, length: int, function: str) -> bytes:
        if (length & 0xFFFF_FFFF) > MAX_RESULT_BYTES:
            raise GuestFault(
                f"{function}: {length} bytes is over the {MAX_RESULT_BYTES}-byte limit"
            )
        return self._mem().read(ptr, length, function)

    def define(self, define: Callable[..., None], imports: frozenset[tuple[str, str]]) -> None:
        """Define every ABI host function the guest imports.

        `define(module, name, params, results, func)` registers one host function
        (actors.fast_call.HostFunctionDefiner)."""
        for module, name in imports:
            self.define_as(define, module, name, module)

    def define_as(self, define: Callable[..., None], module: str, name: str, as_module: str) -> None:
        """Define the ABI host function `module`.`name` under the module name `as_module`."""
        params, results = HOST_IMPORTS[(module, name)]
        define(as_module, name, params, results, getattr(self, ABI_METHODS[name]))

    # --- k8s.io/api --------------------------------------------------------------------

    def node(self, name_ptr: int, name_len: int, buf: int, buf_limit: int) -> int:
        mem = self._mem()
        ctx = self._ctx("node")
        name = go_text(mem.read(name_ptr, name_len, "node name"))
        node = ctx.handle.get_node(name)
        if node is None:
            return 0
        return mem.give(self.wire_cache.node(node), buf, buf_limit, "node")

    def node_list(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("nodeList")
        data = self.wire_cache.node_list(ctx.handle.list_nodes())
        return self._mem().give(data, buf, buf_limit, "nodeList")

    # --- k8s.io/scheduler: inputs -------------------------------------------------------

    def current_pod(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("currentPod")
        data = self.wire_cache.pod(ctx.pod) if ctx.pod is not None else b""
        return self._mem().give(data, buf, buf_limit, "currentPod")

    def target_pod(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("targetPod")
        data = self.wire_cache.pod(ctx.target_pod, target=True) if ctx.target_pod is not None else b""
        return self._mem().give(data, buf, buf_limit, "targetPod")

    def current_node_name(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("currentNodeName")
        name = ctx.node_name if ctx.node_index is None or ctx.batch_names is None else (
            ctx.batch_names[ctx.node_index()])
        return self._mem().give(name.encode(), buf, buf_limit, "currentNodeName")

    def filtered_node_list(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("filteredNodeList")
        if ctx.export != "prescore":
            return 0  # only PreScore has a filtered node list (as in the reference host)
        return self._mem().give(
            _json(list(ctx.filtered_node_names)), buf, buf_limit, "filteredNodeList"
        )

    def node_to_status_map(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("nodeToStatusMap")
        if ctx.export != "postfilter":
            return 0
        return self._mem().give(
            _json({k: int(v) for k, v in ctx.node_to_status.items()}),
            buf,
            buf_limit,
            "nodeToStatusMap",
        )

    def node_score_list(self, buf: int, buf_limit: int) -> int:
        ctx = self._ctx("nodeScoreList")
        if ctx.export != "normalizescore":
            return 0
        return self._mem().give(_json(dict(ctx.node_scores)), buf, buf_limit, "nodeScoreList")

    def node_image_states(self, name_ptr: int, name_len: int, buf: int, buf_limit: int) -> int:
        mem = self._mem()
        ctx = self._ctx("nodeImageStates")
        name = go_text(mem.read(name_ptr, name_len, "nodeImageStates name"))
        states = {str(image): dict(state) for image, state in ctx.handle.image_states(name).items()}
        return mem.give(_json(states) if states else b"", buf, buf_limit, "nodeImageStates")

    def get_config(self, buf: int, buf_limit: int) -> int:
        return self._mem().give(self.guest_config, buf, buf_limit, "get_config")

    # --- k8s.io/scheduler: results ------------------------------------------------------

    def status_reason(self, ptr: int, length: int) -> None:
        ctx = self._ctx("result.status_reason")
        ctx.reason = go_text(self._result_bytes(ptr, length, "result.status_reason"))
        if ctx.batch_reasons is not None and ctx.node_index is not None:
            ctx.batch_reasons[ctx.node_index()] = ctx.reason

    def node_names(self, ptr: int, length: int) -> None:
        data = self._result_bytes(ptr, length, "result.node_names")
        if self._reject_result("result.node_names", ("prefilter",)):
            return
        # As the reference host: empty entries and bytes after the last NUL are dropped,
        # and no name at all is no subset (every node), not an empty one.
        names = go_cstrings(data)
        self._ctx("result.node_names").node_names = names or None

    def nominated_node_name(self, ptr: int, length: int) -> None:
        data = self._result_bytes(ptr, length, "result.nominated_node_name")
        if self._reject_result("result.nominated_node_name", ("postfilter",)):
            return
        self._ctx("result.nominated_node_name").nominated_node_name = go_text(data)

    def normalized_score_list(self, ptr: int, length: int) -> None:
        data = self._result_bytes(ptr, length, "result.normalized_score_list")
        if self._reject_result("result.normalized_score_list", ("normalizescore",)):
            return
        ctx = self._ctx("result.normalized_score_list")
        try:
            scores = go_score_map(data)
        except GoJSONError as exc:
            ctx.result_error = f"malformed normalized score list: {exc}"
            return
        # `null` (the SDK's nil map) and `{}` both leave every score as it was.
        ctx.normalized_scores = scores or None

    def cluster_events(self, ptr: int, length: int) -> None:
        data = self._result_bytes(ptr, length, "result.cluster_events")
        if self._reject_result("result.cluster_events", ("enqueue",)):
            return
        ctx = self._ctx("result.cluster_events")
        if len(data) % 8:
            ctx.result_error = (
                f"cluster events: {len(data)} bytes is not a whole number of 8-byte events"
            )
            return
        ctx.cluster_events = [
            ClusterEvent(
                int.from_bytes(data[i : i + 4], "little"),
                int.from_bytes(data[i + 4 : i + 8], "little"),
            )
            for i in range(0, len(data), 8)
        ]

    # --- k8s.io/scheduler: handle -------------------------------------------------------

    def eventf(self, ptr: int, length: int) -> None:
        data = self._result_bytes(ptr, length, "handle.eventrecorder.eventf")
        ctx = self._ctx("handle.eventrecorder.eventf")
        try:
            event = go_event(data)
        except GoJSONError as exc:
            self.log.warning(
                "guest.event_malformed",
                **ctx.log_fields,
                error=str(exc),
            )
            return
        self.log.info(
            "guest.event",
            **ctx.log_fields,
            reason=event.get("Reason"),
            note=event.get("Note"),
            eventtype=event.get("Eventtype"),
        )
        ctx.handle.record_event(event)

    def reject_waiting_pod(self, uid_ptr: int, uid_len: int, out: int, out_limit: int) -> None:
        mem = self._mem()
        ctx = self._ctx("handle.reject_waiting_pod")
        uid = go_text(mem.read(uid_ptr, uid_len, "reject_waiting_pod uid"))
        if (out_limit & 0xFFFF_FFFF) >= 8:
            mem.check(out, 8, "reject_waiting_pod out")  # before the side effect
        rejected = ctx.handle.reject_waiting_pod(
            uid, self.plugin, f"rejected by wasm plugin {self.plugin}"
        )
        if (out_limit & 0xFFFF_FFFF) >= 8:
            mem.write_u64(out, 1 if rejected else 0, "reject_waiting_pod out")

    def get_waiting_pod(self, uid_ptr: int, uid_len: int, out: int, out_limit: int) -> None:
        mem = self._mem()
        ctx = self._ctx("handle.get_waiting_pod")
        uid = go_text(mem.read(uid_ptr, uid_len, "get_waiting_pod uid"))
        pod = ctx.handle.get_waiting_pod(uid)
        if pod is not None:
            mem.give(encode_pod(pod), out, out_limit, "get_waiting_pod out")

    # --- k8s.io/klog -------------------------------------------------------------------

    def severity(self) -> int:
        """The least severity a line must have to be written: the plugin's `logSeverity`,
        raised, once the program has configured the runtime's log (the CLI does), to the
        least klog severity that log lets through. The SDKs read it once, when the instance
        starts, and skip formatting a line below it, so a line nobody would see costs the
        guest nothing (docs/abi-notes.md). A program that has not configured the log may
        still change its levels later: it gets `logSeverity` alone."""
        if not logging_configured():
            return self.log_severity
        for severity in range(max(self.log_severity, 0), len(_KLOG_LEVEL_NUMBERS)):
            if enabled(self.log, _KLOG_LEVEL_NUMBERS[severity]):
                return severity
        return max(self.log_severity, len(_KLOG_LEVEL_NUMBERS) - 1)

    def _dropped(self, severity: int) -> bool:
        """Would a line of this severity go nowhere? Then the guest's text is only checked
        to lie in its memory (the ABI traps a bad range), not read or decoded: a guest that
        logs on every call costs a few microseconds less a call."""
        if severity < self.log_severity:
            return True  # below logSeverity: not emitted (the reference host compares the wrong way)
        return not enabled(self.log, _KLOG_LEVEL_NUMBERS[min(max(severity, 0), 3)])

    def klog(self, severity: int, msg_ptr: int, msg_len: int) -> None:
        if self._dropped(severity):
            self._mem().check_read(msg_ptr, msg_len, "log message")
            return
        message = go_text(self._mem().read(msg_ptr, msg_len, "log message"))
        self._emit(severity, message, {})

    def klogs(self, severity: int, msg_ptr: int, msg_len: int, kvs_ptr: int, kvs_len: int) -> None:
        mem = self._mem()
        if self._dropped(severity):
            mem.check_read(msg_ptr, msg_len, "logs message")
            mem.check_read(kvs_ptr, kvs_len, "logs kvs")
            return
        message = go_text(mem.read(msg_ptr, msg_len, "logs message"))
        parts = go_cstrings(mem.read(kvs_ptr, kvs_len, "logs kvs"))
        fields: dict[str, str] = {}
        for i in range(0, len(parts) - 1, 2):
            fields[f"kv_{parts[i]}" if parts[i] in _RESERVED else parts[i]] = parts[i + 1]
        if len(parts) % 2:
            fields["kv_unpaired"] = parts[-1]
        self._emit(severity, message, fields)

    def _emit(self, severity: int, message: str, fields: dict[str, str]) -> None:
        level = _KLOG_LEVELS[min(max(severity, 0), 3)]
        ctx = self.context
        context = ctx.log_fields if ctx else {"extension_point": "_start"}
        getattr(self.log, level)(
            "guest.log", message=message, severity=severity, **context, **fields
        )


#: Keys a guest's key/value pairs may not overwrite in a log line.
_RESERVED = frozenset(
    {
        "event",
        "message",
        "severity",
        "plugin",
        "instance",
        "pod",
        "pod_uid",
        "phase",
        "extension_point",
        "level",
        "timestamp",
        "logger",
    }
)

#: ABI name -> method of HostFunctions.
ABI_METHODS: dict[str, str] = {
    "node": "node",
    "nodeList": "node_list",
    "currentPod": "current_pod",
    "targetPod": "target_pod",
    "currentNodeName": "current_node_name",
    "filteredNodeList": "filtered_node_list",
    "nodeToStatusMap": "node_to_status_map",
    "nodeScoreList": "node_score_list",
    "nodeImageStates": "node_image_states",
    "get_config": "get_config",
    "result.status_reason": "status_reason",
    "result.node_names": "node_names",
    "result.nominated_node_name": "nominated_node_name",
    "result.normalized_score_list": "normalized_score_list",
    "result.cluster_events": "cluster_events",
    "handle.eventrecorder.eventf": "eventf",
    "handle.reject_waiting_pod": "reject_waiting_pod",
    "handle.get_waiting_pod": "get_waiting_pod",
    "severity": "severity",
    "log": "klog",
    "logs": "klogs",
}
assert set(ABI_METHODS) == {name for _module, name in HOST_IMPORTS}
