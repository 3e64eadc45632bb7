"""GuestActor: one Pykka actor owning one wasm instance.

This module owns the rule "one call at a time per instance, no lock": the actor
creates its `GuestInstance` on its own thread (`on_start`), so the wasmtime Store never
leaves that thread, and runs each `Invoke` message to completion before the next.
Extension points over many nodes (filter, score) are one message carrying the node
list. When a call breaks the instance (a trap, a host error; or the instance never
started), the actor tells its supervisor (`InstanceBroken`), which discards it; calls
that still arrive are answered with an Error status.

See `docs/reliability.md` ("Bad guest behaviour").
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Generic, Literal, TypeVar, cast

import pykka

from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.kube.wire_cache import WireCache
from wasm_scheduler.actors.mailbox import Ask, MailboxActor
from wasm_scheduler.framework_api import (
    DEFAULT_CLUSTER_EVENTS,
    ClusterEvent,
    Code,
    FilterResult,
    NormalizeScoreResult,
    PermitResult,
    Phase,
    PostFilterResult,
    PreFilterResult,
    PreScoreAndScore,
    ScoreResult,
    Status,
)
from wasm_scheduler.logger import DEBUG, enabled, get_logger
from wasm_scheduler.registry.compiler import CompiledGuest
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import EXPORT_RESULTS, Export

if TYPE_CHECKING:  # the supervisor starts guest actors: it imports this module
    from wasm_scheduler.actors.supervisor import SupervisorActor

log = get_logger("actors.guest")

#: The message that runs PreScore and then Score (`framework_api.PreScoreAndScore`).
PRESCORE_AND_SCORE: Final = "prescore_and_score"

#: What an `Invoke` runs: one extension-point export (a `GuestInstance` method of that
#: name), or PreScore and then Score.
Point = Export | Literal["prescore_and_score"]

#: GuestInstance methods a message may invoke: the ABI's extension-point exports.
EXTENSION_POINTS: Final[frozenset[str]] = frozenset(EXPORT_RESULTS)

#: What an `Invoke` answers: the result of the point it ran (shaped as that point's
#: result, with an Error status, when the call could not run). EventsToRegister answers
#: the events and the status.
GuestResult = (Status | PreFilterResult | FilterResult | PostFilterResult | PreScoreAndScore | ScoreResult
               | NormalizeScoreResult | PermitResult | tuple[tuple[ClusterEvent, ...], Status])

#: The route a forwarded `Invoke` took, handed back with its result (the supervisor's answer).
R = TypeVar("R")


@dataclass(slots=True)
class Invoke(Ask[GuestResult], Generic[R]):
    """Run one extension-point phase: `GuestInstance.<point>(*args)`.

    Asked, the answer is the point's result. Told with `reply_to` (the cycle's first
    call, forwarded by the supervisor), the actor sets `reply_to` to a `Replied` carrying
    `route` and the result, so the caller waits on one future for both. The actor empties
    `args` once the call is done: pykka's loop keeps an actor's last message until the
    next one comes, and an idle actor must not keep its last request's pod and nodes."""

    point: Point
    #: The `GuestInstance` method's arguments (each point has its own; the pod comes first except for enqueue).
    args: tuple[object, ...]
    pod: str = ""
    pod_uid: str = ""
    phase: Phase = "scheduling"
    reply_to: pykka.Future[Replied[R]] | None = None
    route: R | None = None

    def replying(self, future: pykka.Future[Replied[R]]) -> Invoke[R]:
        """This call, answered on `future` (a direct copy: `dataclasses.replace` costs more)."""
        return Invoke(self.point, self.args, self.pod, self.pod_uid, self.phase, future, self.route)

    def routed(self, route: R) -> Invoke[R]:
        """This call, carrying the route the supervisor gave it."""
        return Invoke(self.point, self.args, self.pod, self.pod_uid, self.phase, self.reply_to, route)


@dataclass(frozen=True, slots=True)
class Replied(Generic[R]):
    """The answer to a forwarded `Invoke`: the route it took (the supervisor's `Began`,
    or its `Lost` when no actor could take the call, which then has no result) and the
    point's result."""

    route: R | None
    result: GuestResult | None = None


@dataclass(frozen=True, slots=True)
class Describe(Ask["InstanceInfo"]):
    """Ask for the actor's `InstanceInfo`."""


@dataclass(frozen=True, slots=True)
class InstanceInfo:
    instance_id: str
    exports: frozenset[Export]
    calls: int
    linear_memory_bytes: int
    #: Why the instance is broken ("" while it is not); a failed start is said here too.
    broken: str
    load_failed: bool


@dataclass(frozen=True, slots=True)
class InstanceBroken:
    """Told to the supervisor by a guest actor whose instance just broke (or, by the
    facade, about an actor that died or answered with a host error)."""

    instance_id: str
    reason: str
    #: The instance broke by trapping in a guest call (counted as a trap, `PoolCounts.trapped`).
    trapped: bool = False


class GuestActor(MailboxActor):
    """The mailbox in front of one `GuestInstance`."""

    def __init__(
        self,
        guest: CompiledGuest,
        config: PluginConfig,
        instance_id: str,
        wire_cache: WireCache,
        supervisor: pykka.ActorRef[SupervisorActor] | None = None,
    ) -> None:
        super().__init__()
        self.guest = guest
        self.config = config
        self.instance_id = instance_id
        self.wire_cache = wire_cache
        self.supervisor = supervisor
        self.instance: GuestInstance | None = None
        self.load_error = ""
        self._reported = False
        self.log = log.bind(plugin=config.name, instance=instance_id)

    def on_start(self) -> None:
        started = time.perf_counter()
        try:
            self.instance = GuestInstance(
                self.guest, self.config, self.instance_id, self.wire_cache
            )
        except GuestLoadError as exc:
            self.load_error = str(exc)
            # Kept alive so a caller can ask why (Describe); the first call reports it
            # broken to the supervisor, which discards it.
            self.log.error("instance.start_failed", error=self.load_error)
            return
        self.log.info(
            "instance.started",
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
            linear_memory_bytes=self.instance.linear_memory_bytes,
        )

    def on_stop(self) -> None:
        calls = self.instance.calls if self.instance else 0
        self.log.info("instance.stopped", calls=calls)
        self.instance = None

    def on_receive(self, message: object) -> GuestResult | InstanceInfo | None:
        if isinstance(message, Invoke):
            try:
                if message.reply_to is None:
                    return self._invoke(message)
                try:
                    message.reply_to.set(Replied(message.route, self._invoke(message)))
                except BaseException as exc:
                    # Reported before the caller wakes, as a trap is: the caller's next message
                    # to the supervisor then comes after this one and never gets this actor.
                    self._report_broken(f"host error: {type(exc).__name__}")
                    message.reply_to.set_exception()
                    raise
                return None
            finally:
                message.args = ()
        if isinstance(message, Describe):
            inst = self.instance
            return InstanceInfo(
                self.instance_id,
                inst.exports if inst else frozenset(),
                inst.calls if inst else 0,
                inst.linear_memory_bytes if inst else 0,
                (inst.broken if inst else self.load_error),
                inst is None,
            )
        raise TypeError(f"GuestActor got an unknown message {message!r}")

    def _invoke(self, message: Invoke[R], point: Point | None = None) -> GuestResult:
        """Run `point` (the message's own when None) with the message's arguments."""
        point = point or message.point
        if point == PRESCORE_AND_SCORE:
            # PreScore, then Score over the same nodes (kube-scheduler scores exactly the
            # nodes PreScore was given) unless PreScore failed or said Skip: the calls and
            # logs two messages would make, for one hand-off.
            status = self._invoke(message, "prescore")
            assert isinstance(status, Status)
            if not status.ok:
                return PreScoreAndScore(status)
            score = self._invoke(message, "score")
            assert isinstance(score, ScoreResult)
            return PreScoreAndScore(status, score)
        if point not in EXTENSION_POINTS:
            raise ValueError(f"unknown extension point {point!r}")
        inst = self.instance
        if inst is None:
            if not self._reported:
                self._reported = True
                self._report_broken(self.load_error)
            return _error_answer(point, message.args, self.config.name, self.load_error)
        was_broken = bool(inst.broken)
        inst.phase = message.phase
        started = time.perf_counter()
        try:
            result: GuestResult = getattr(inst, point)(*message.args)
        except Exception as exc:  # a bug of the host, not the guest: loud, but never a crash
            # The details (they may name files) go to the log; the status, which can travel
            # to an extender's client, carries only the id that finds them there.
            error_id = secrets.token_hex(6)
            self.log.error("instance.host_bug", extension_point=point, pod=message.pod, error_id=error_id,
                           exc_info=exc)
            inst.broken = inst.broken or f"host error in {point} (error id {error_id})"
            result = _error_answer(point, message.args, self.config.name, inst.broken)
        if enabled(self.log, DEBUG):
            self.log.debug(
                "call.finished",
                extension_point=point,
                pod=message.pod,
                pod_uid=message.pod_uid,
                phase=message.phase,
                duration_ms=round((time.perf_counter() - started) * 1000, 3),
            )
        if inst.broken and not was_broken:
            self._report_broken(inst.broken, inst.trapped)
        return result

    def on_failure(self, exception_type: type[BaseException] | None, exception_value: BaseException | None,
                   traceback: TracebackType | None) -> None:
        """The actor is dying of an unhandled error: tell the supervisor so the pool recovers."""
        self._report_broken(f"actor failed: {exception_value!r}")

    def _report_broken(self, reason: str, trapped: bool = False) -> None:
        if self.supervisor is not None:
            self.supervisor.tell(InstanceBroken(self.instance_id, reason, trapped))


def _error_answer(point: Export, args: tuple[object, ...], plugin: str, why: str) -> GuestResult:
    """The answer to a call no instance could run (it never started, or a host error broke
    it): an Error status, shaped like the point's result."""
    status = Status(Code.ERROR, f"wasm plugin {plugin}: no instance to run {point}: {why}", plugin)
    shaped: dict[str, GuestResult] = {
        "prefilter": PreFilterResult(status),
        "postfilter": PostFilterResult(status),
        "score": ScoreResult(status),
        "normalizescore": NormalizeScoreResult(status),
        "permit": PermitResult(status),
        "enqueue": (DEFAULT_CLUSTER_EVENTS, status),
    }
    if point == "filter":  # its arguments: the pod, the node names, the handle
        return FilterResult(tuple((name, status) for name in cast("Sequence[str]", args[1])))
    return shaped.get(point, status)


__all__ = ["GuestActor", "GuestResult", "Invoke", "Replied", "Describe", "InstanceInfo", "InstanceBroken",
           "ClusterEvent"]
