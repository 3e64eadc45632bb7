"""One wasm instance of a guest and the typed calls of every extension point.

This module owns a single instance: its store, its WASI and host functions, running
`_start`, calling each export with the right inputs in its `CallContext`, and decoding
the results exactly as the ABI packs them (score, postfilter and permit differ). A trap,
a fault in a host call or a `proc_exit` during an export turns into an Error status
naming the export and carrying the guest's stderr; the instance is then broken: its
memory is undefined, so every later call answers Error without running guest code.

A `GuestInstance` is not thread-safe and is not meant to be: exactly one `GuestActor`
owns it, and its mailbox serializes every call (`actors.guest_actor`).

See `docs/reliability.md` for its limits and `docs/guest-authors.md` for the ABI.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

import wasmtime

from wasm_scheduler.actors.abi import decode_permit, decode_postfilter, decode_score, high_words
from wasm_scheduler.actors.fast_call import (
    DeadlineExceeded,
    EpochDeadline,
    ExportCaller,
    HostFault,
    HostFunctionDefiner,
    PerNode,
    make_export_caller,
)
from wasm_scheduler.actors.guest_memory import GuestFault, GuestMemory
from wasm_scheduler.actors.host_functions import CallContext, HostFunctions
from wasm_scheduler.actors.kube.codec import KubeCodecError
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.actors.node_loop import PER_NODE_SLOTS, NodeLoop
from wasm_scheduler.actors.wasi import CapturedOutput, GuestExit, Wasi
from wasm_scheduler.actors.wasmtime_internals import internals
from wasm_scheduler.framework_api import (
    DEFAULT_CLUSTER_EVENTS,
    ClusterEvent,
    Code,
    FilterResult,
    NodeScore,
    NormalizeScoreResult,
    PermitResult,
    Phase,
    PostFilterResult,
    PreFilterResult,
    ScoreResult,
    Status,
)
from wasm_scheduler.logger import get_logger
from wasm_scheduler.registry.compiler import CompiledGuest, deadline_ticks
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import EXPORT_RESULTS, Export
from wasm_scheduler.vocabulary import FrameworkHandle, KubeObject

log = get_logger("actors.instance")

#: Exceptions a guest can cause during a call. Anything else is a bug of the host.
GUEST_FAULTS: tuple[type[BaseException], ...] = (
    wasmtime.Trap,
    wasmtime.WasmtimeError,
    GuestFault,
    GuestExit,
    KubeCodecError,
    DeadlineExceeded,
)

_NODE_NAME_IMPORT = ("k8s.io/scheduler", "currentNodeName")

_STDERR_IN_REASON = 2000


class GuestBroken(Exception):
    """Raised inside the instance when a call failed; carries the Error status."""


class GuestInstance:
    """A started instance of one guest."""

    def __init__(
        self,
        guest: CompiledGuest,
        config: PluginConfig,
        instance_id: str,
        wire_cache: WireCache | None = None,
    ) -> None:
        self.plugin = config.name
        #: This plugin's Success (a Status is immutable: one serves every call).
        self._success = Status(plugin=self.plugin)
        self.instance_id = instance_id
        self.exports = guest.exports
        self.broken: str = ""
        #: Set with `broken` when a call trapped (`call.trapped`), not for other breakage: the
        #: supervisor counts traps (`PoolCounts.trapped`).
        self.trapped = False
        #: Set by the owning actor for each message, for logs.
        self.phase: Phase = "scheduling"
        self.calls = 0
        self.output = CapturedOutput()
        self.log = log.bind(plugin=self.plugin, instance=instance_id)
        self._store = wasmtime.Store(guest.engine)
        limits = config.limits
        self._store.set_limits(
            memory_size=limits.memory_limit_mib * 1024 * 1024,
            table_elements=limits.table_elements_limit,
        )
        self._call_ticks = deadline_ticks(limits.call_timeout_ms)
        self._call_timeout_ms = limits.call_timeout_ms
        self._store.set_epoch_deadline(deadline_ticks(limits.start_timeout_ms))
        linker = wasmtime.Linker(guest.engine)
        self._wasi = Wasi(config.args or (config.name,), self.output)
        self._fault = HostFault()
        self._definer = HostFunctionDefiner(linker, self._fault, guest.compiler.fast_calls)
        self._wasi.define(self._definer, guest.shape.wasi_imports)
        self._host = HostFunctions(
            self.plugin,
            instance_id,
            config.guest_config,
            config.log_severity,
            wire_cache or WireCache(),
        )
        fast = guest.compiler.fast_calls and internals() is not None
        #: The store's shared deadline and its callback (fast path only).
        self._deadline = EpochDeadline(self._store, self._fault, self._call_ticks) if fast else None
        host_imports = guest.shape.host_imports
        per_node = sorted(guest.exports & PER_NODE_SLOTS.keys())
        #: Filter and Score over many nodes in one call into wasm (fast path only).
        self._loop: NodeLoop | None = None
        if self._deadline is not None and per_node:
            self._loop = NodeLoop(
                self._store, linker, guest.compiler.helper_module,
                lambda module, name: self._host.define_as(self._definer, "k8s.io/scheduler", name, module),
                _NODE_NAME_IMPORT in host_imports,
            )
            host_imports = host_imports - {_NODE_NAME_IMPORT}
        self._host.define(self._definer, host_imports)
        where = f"{config.name!r} ({guest.url})"
        try:
            instance = linker.instantiate(self._store, guest.module)
        except GUEST_FAULTS as exc:
            raise GuestLoadError(where, f"instantiation failed: {self._describe(exc)}") from None
        exports = instance.exports(self._store)
        memory = exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        self.memory = GuestMemory(memory, self._store, guest.compiler.fast_calls)
        self._wasi.memory = self._host.memory = self.memory
        if self._loop is not None and self._deadline is not None:
            try:
                self._loop.attach(exports, memory, per_node, self._fault, self._deadline)
            except wasmtime.WasmtimeError as exc:  # e.g. a memory the driver cannot import
                self.log.info("node_loop.unavailable", reason=self._describe(exc))
                self._loop.detach(linker)
                self._loop = None
        #: export name -> caller taking the deadline in epoch ticks
        self._funcs: dict[str, ExportCaller] = {}
        for name in guest.exports:
            func = exports[name]
            assert isinstance(func, wasmtime.Func)
            results = EXPORT_RESULTS[name]
            self._funcs[name] = make_export_caller(
                self._store, func, results[0] if results else None, self._fault, self._deadline
            )
        if guest.shape.has_start:
            start = exports["_start"]
            assert isinstance(start, wasmtime.Func)
            self._store.set_epoch_deadline(deadline_ticks(limits.start_timeout_ms))
            try:
                try:
                    start(self._store)
                except BaseException:
                    error = self._fault.take()
                    if error is not None:
                        raise error from None
                    raise
            except GuestExit as exc:
                if exc.code != 0:
                    raise GuestLoadError(
                        where, f"_start exited with code {exc.code}{self._output_suffix()}"
                    ) from None
            except GUEST_FAULTS as exc:
                why = self._describe(exc, limits.start_timeout_ms).replace(
                    "callTimeoutMs", "startTimeoutMs"
                )
                raise GuestLoadError(
                    where, f"_start failed: {why}{self._output_suffix()}"
                ) from None
            self._flush_output("_start")

    # --- the call machinery --------------------------------------------------------------

    @property
    def linear_memory_bytes(self) -> int:
        return self.memory.size

    def _describe(self, exc: BaseException, timeout_ms: int | None = None) -> str:
        """One line for a failure: a trap's cause (not its backtrace), or the exception's text."""
        if isinstance(exc, DeadlineExceeded) or (
            isinstance(exc, wasmtime.Trap) and exc.trap_code == wasmtime.TrapCode.INTERRUPT
        ):
            limit = self._call_timeout_ms if timeout_ms is None else timeout_ms
            return f"deadline exceeded: the call ran longer than {limit} ms (limits.callTimeoutMs)"
        text = exc.message if isinstance(exc, wasmtime.Trap) else (str(exc) or type(exc).__name__)
        if "Caused by:" in text:
            text = text.split("Caused by:", 1)[1]
        # wasmtime before 42 appends a Rust backtrace when RUST_BACKTRACE is set: not the guest's.
        text = text.split("Stack backtrace:", 1)[0]
        causes = [re.sub(r"^\d+:\s*", "", line.strip()) for line in text.strip().splitlines()]
        return "; ".join(c for c in causes if c) or type(exc).__name__

    def _output_suffix(self) -> str:
        """The guest's captured output for an error message (stderr first), then cleared."""
        out, err = self.output.take()
        parts = []
        for stream, text in (("stderr", err.strip()), ("stdout", out.strip())):
            if len(text) > _STDERR_IN_REASON:
                text = "..." + text[-_STDERR_IN_REASON:]
            if text:
                parts.append(f"; {stream}: {text}")
        return "".join(parts)

    def _flush_output(self, export: str, ctx: CallContext | None = None) -> None:
        if not self.output.stdout and not self.output.stderr:
            return
        out, err = self.output.take()
        pod = ctx.pod_name if ctx else ""
        for stream, text in (("stdout", out), ("stderr", err)):
            for line in text.splitlines():
                self.log.info(
                    "guest.output", stream=stream, line=line, extension_point=export, pod=pod
                )

    def _fail(self, export: Export, exc: BaseException) -> Status:
        """Break the instance after a failed call and say why, as an Error status."""
        if isinstance(exc, GUEST_FAULTS):
            detail = self._describe(exc)
        else:  # our own bug: its text (it may name files) stays in the log, found by its id
            error_id = secrets.token_hex(6)
            self.log.error("instance.host_bug", extension_point=export, error_id=error_id, exc_info=exc)
            detail = f"host error (error id {error_id})"
        reason = f"wasm plugin {self.plugin}: trap in {export}: {detail}{self._output_suffix()}"
        self.broken = reason
        self.trapped = True
        self._funcs = {}
        self.log.warning("call.trapped", extension_point=export, phase=self.phase, trap=reason)
        return Status(Code.ERROR, reason, self.plugin)

    def _broken_status(self, export: Export) -> Status:
        """The answer of every call once the instance is broken: Error, without running guest code."""
        return Status(
            Code.ERROR,
            f"wasm plugin {self.plugin}: instance {self.instance_id} is discarded "
            f"(cannot run {export}): {self.broken}",
            self.plugin,
        )

    def _status(self, code: int, ctx: CallContext) -> Status:
        if ctx.result_error:
            return Status(
                Code.ERROR,
                f"wasm plugin {self.plugin}: {ctx.export}: {ctx.result_error}",
                self.plugin,
            )
        if code == 0:
            return self._success
        status_code = Code.from_wire(code)
        if status_code.value != code:
            return Status(
                Code.ERROR,
                f"wasm plugin {self.plugin}: {ctx.export} returned unknown status code {code}",
                self.plugin,
            )
        return Status(status_code, ctx.reason, self.plugin)

    def _call(self, ctx: CallContext) -> Any:
        """Run one export with `ctx` as the call's context; raise GuestBroken on failure."""
        call = self._funcs[ctx.export]
        self._host.context = ctx
        self.calls += 1
        try:
            return call(self._call_ticks)
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            raise GuestBroken(self._fail(ctx.export, exc)) from None
        finally:
            self._host.context = None
            if self.output.stdout or self.output.stderr:
                self._flush_output(ctx.export, ctx)

    # --- extension points ---------------------------------------------------------------

    def prefilter(self, pod: KubeObject, handle: FrameworkHandle) -> PreFilterResult:
        if self.broken:
            return PreFilterResult(self._broken_status("prefilter"))
        if "prefilter" not in self.exports:
            return PreFilterResult(self._success)
        ctx = CallContext("prefilter", handle, phase=self.phase, pod=pod)
        try:
            code = self._call(ctx)
        except GuestBroken as exc:
            return PreFilterResult(exc.args[0])
        status = self._status(code, ctx)
        names = frozenset(ctx.node_names) if ctx.node_names is not None and status.ok else None
        return PreFilterResult(status, names)

    def filter(
        self, pod: KubeObject, node_names: Sequence[str], handle: FrameworkHandle
    ) -> FilterResult:
        return FilterResult(tuple(self._per_node("filter", pod, node_names, handle)))

    def _per_node(
        self,
        export: Export,
        pod: KubeObject,
        node_names: Sequence[str],
        handle: FrameworkHandle,
        target_pod: KubeObject | None = None,
    ) -> list[tuple[str, Status]]:
        if self.broken:
            broken = self._broken_status(export)
            return [(name, broken) for name in node_names]
        ok = self._success
        if export not in self.exports:
            return [(name, ok) for name in node_names]
        ctx = CallContext(export, handle, phase=self.phase, pod=pod, target_pod=target_pod)
        run, failed = self._run_per_node(ctx, node_names)
        codes = run.values
        if not any(codes):
            results = list(zip(node_names, repeat(ok, len(codes)), strict=False))  # the common case, at C speed
        else:
            results = []
            for i, (name, code) in enumerate(zip(node_names, codes, strict=False)):
                if code == 0:
                    results.append((name, ok))
                else:
                    ctx.reason = run.reasons.get(i, "")
                    results.append((name, self._status(code, ctx)))
        if failed is not None:
            results.extend((rest, failed) for rest in node_names[len(codes):])
        return results

    def _run_per_node(
        self, ctx: CallContext, names: Sequence[str], stop_mask: int = 0
    ) -> tuple[PerNode, Status | None]:
        """Call ctx.export once per node (one tight loop); the Error status if it broke."""
        self._host.context = ctx
        try:
            run = self._loop.run(ctx, names, stop_mask) if self._loop is not None else None
            if run is None:
                run = self._funcs[ctx.export].per_node(ctx, names, self._call_ticks, stop_mask)
        finally:
            self._host.context = None
        self.calls += len(run.values) + (run.error is not None)
        # A failure takes the captured output into its reason; what is left is logged.
        failed = None if run.error is None else self._fail(ctx.export, run.error)
        if self.output.stdout or self.output.stderr:
            self._flush_output(ctx.export, ctx)
        return run, failed

    def postfilter(
        self, pod: KubeObject, node_to_status: Mapping[str, int], handle: FrameworkHandle
    ) -> PostFilterResult:
        if self.broken:
            return PostFilterResult(self._broken_status("postfilter"))
        if "postfilter" not in self.exports:
            return PostFilterResult(Status(Code.UNSCHEDULABLE, "", self.plugin))
        ctx = CallContext("postfilter", handle, phase=self.phase, pod=pod, node_to_status=node_to_status)
        try:
            packed = self._call(ctx)
        except GuestBroken as exc:
            return PostFilterResult(exc.args[0])
        status_word, mode = decode_postfilter(packed)
        return PostFilterResult(
            self._status(status_word, ctx), ctx.nominated_node_name, mode
        )

    def prescore(
        self, pod: KubeObject, node_names: Sequence[str], handle: FrameworkHandle
    ) -> Status:
        if self.broken:
            return self._broken_status("prescore")
        if "prescore" not in self.exports:
            return self._success
        ctx = CallContext("prescore", handle, phase=self.phase, pod=pod, filtered_node_names=node_names)
        try:
            return self._status(self._call(ctx), ctx)
        except GuestBroken as exc:
            broken: Status = exc.args[0]
            return broken

    def score(
        self, pod: KubeObject, node_names: Sequence[str], handle: FrameworkHandle
    ) -> ScoreResult:
        if self.broken:
            return ScoreResult(self._broken_status("score"))
        if "score" not in self.exports:
            return ScoreResult.from_columns(self._success, node_names, (0,) * len(node_names), copy=False)
        ctx = CallContext("score", handle, phase=self.phase, pod=pod)
        run, failed = self._run_per_node(ctx, node_names, stop_mask=0xFFFF_FFFF)
        values = run.values
        if failed is None and len(values) == len(node_names) and not (values and values[-1] & 0xFFFF_FFFF):
            # The common case: the loop stops at the first status that is not Success, so
            # every node ran and succeeded: each score is the high, signed half of its i64.
            return ScoreResult.from_columns(self._success, node_names, high_words(values), copy=False)
        scores: list[NodeScore] = []
        for i, (name, packed) in enumerate(zip(node_names, values, strict=False)):
            low, score = decode_score(packed)
            if low != Code.SUCCESS:
                ctx.reason = run.reasons.get(i, "")
                status = self._status(low, ctx)
                return ScoreResult(Status(status.code, f"node {name}: {status.reason}", self.plugin))
            scores.append(NodeScore(name, score))
        if failed is not None:
            return ScoreResult(failed)
        return ScoreResult(self._success, tuple(scores))

    def normalizescore(
        self, pod: KubeObject, scores: Sequence[NodeScore], handle: FrameworkHandle
    ) -> NormalizeScoreResult:
        if self.broken:
            return NormalizeScoreResult(self._broken_status("normalizescore"))
        if "normalizescore" not in self.exports:
            return NormalizeScoreResult(self._success, tuple(scores))
        ctx = CallContext(
            "normalizescore", handle, phase=self.phase, pod=pod, node_scores={s.name: s.score for s in scores}
        )
        try:
            code = self._call(ctx)
        except GuestBroken as exc:
            return NormalizeScoreResult(exc.args[0])
        status = self._status(code, ctx)
        if not status.ok:
            return NormalizeScoreResult(status)
        if ctx.normalized_scores is None:
            return NormalizeScoreResult(status, tuple(scores))
        given = ctx.normalized_scores
        unknown = sorted(set(given) - {s.name for s in scores})
        if unknown:
            self.log.warning(
                "guest.result_ignored",
                function="result.normalized_score_list",
                extension_point="normalizescore",
                pod=ctx.pod_name,
                reason=f"scores for unknown nodes {unknown[:5]}",
            )
        return NormalizeScoreResult(
            status, tuple(NodeScore(s.name, given.get(s.name, s.score)) for s in scores)
        )

    def _node_call(
        self,
        export: Export,
        pod: KubeObject,
        node_name: str,
        handle: FrameworkHandle,
        absent: Status | None = None,
    ) -> tuple[Status, int | None]:
        if self.broken:
            return self._broken_status(export), None
        if export not in self.exports:
            return absent or self._success, None
        ctx = CallContext(export, handle, phase=self.phase, pod=pod, node_name=node_name)
        try:
            raw = self._call(ctx)
        except GuestBroken as exc:
            return exc.args[0], None
        if raw is None:
            return self._status(0, ctx), None
        if export == "permit":
            status_word, timeout = decode_permit(raw)
            return self._status(status_word, ctx), timeout
        return self._status(raw, ctx), None

    def reserve(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> Status:
        return self._node_call("reserve", pod, node_name, handle)[0]

    def unreserve(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> Status:
        return self._node_call("unreserve", pod, node_name, handle)[0]

    def permit(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> PermitResult:
        status, timeout = self._node_call("permit", pod, node_name, handle)
        return PermitResult(status, timeout or 0)

    def prebind(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> Status:
        return self._node_call("prebind", pod, node_name, handle)[0]

    def bind(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> Status:
        return self._node_call(
            "bind", pod, node_name, handle, absent=Status(Code.SKIP, "", self.plugin)
        )[0]

    def postbind(self, pod: KubeObject, node_name: str, handle: FrameworkHandle) -> Status:
        return self._node_call("postbind", pod, node_name, handle)[0]

    def addpod(
        self, pod: KubeObject, target_pod: KubeObject, node_name: str, handle: FrameworkHandle
    ) -> Status:
        return self._per_node("addpod", pod, [node_name], handle, target_pod)[0][1]

    def removepod(
        self, pod: KubeObject, target_pod: KubeObject, node_name: str, handle: FrameworkHandle
    ) -> Status:
        return self._per_node("removepod", pod, [node_name], handle, target_pod)[0][1]

    def enqueue(self, handle: FrameworkHandle) -> tuple[tuple[ClusterEvent, ...], Status]:
        if self.broken:
            return DEFAULT_CLUSTER_EVENTS, self._broken_status("enqueue")
        if "enqueue" not in self.exports:
            return DEFAULT_CLUSTER_EVENTS, self._success
        ctx = CallContext("enqueue", handle, phase=self.phase)
        try:
            self._call(ctx)
        except GuestBroken as exc:
            return DEFAULT_CLUSTER_EVENTS, exc.args[0]
        status = self._status(0, ctx)
        return (tuple(ctx.cluster_events) or DEFAULT_CLUSTER_EVENTS), status

