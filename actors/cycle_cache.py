"""CycleCache: what a plugin facade remembers of its pods' cycles, so their calls skip the supervisor.

This module owns `CycleCache`, one per `WasmPlugin` (`adapters/wasm_plugin.py`), which
makes it and is the only caller of its methods. It decides nothing about who serves a
pod: that is `Assignments` (`actors/assignments.py`), applied by the supervisor. The
cache keeps the supervisor's answers for the rest of each pod's cycle, so the pod's
later calls go straight to its actor, and what a PreScore brought back for the Score
that follows; it forgets them when the pod's cycle ends:

| the facade's step                      | what the cache remembers or forgets                    |
|----------------------------------------|--------------------------------------------------------|
| `beginning(P)` (BeginCycle sent)       | P's early scores of a last cycle go                    |
| `began(P, answer)`                     | P's route for its scheduling cycle; the pod whose      |
|                                        | cycle the answer says it ended is forgotten            |
| `lost(P)` (BeginCycle: no actor)       | P's scheduling route is forgotten                      |
| `to_binding(P)` (ToBinding sent)       | P's scheduling route becomes its binding route         |
| `release(P)` (Release to send?)        | P's route is forgotten, the binding one first (as      |
|                                        | `Assignments.release`); False if there was none: then  |
|                                        | no Release is sent, there is nothing to give back      |
| `keep_scores(P)` / `take_scores(P)`    | PreScore's Score result, until Score asks for it       |
| `route(P, binding)`                    | the remembered route for that part of P's cycle        |

Where the cache learns what to forget: from the facade's own transitions (Release,
ToBinding, a BeginCycle that found no actor), and, for the one transition of a pod the
facade does not send itself, from the supervisor: another pod's PreFilter took over the
scheduling slot, which ends the cycle of the pod that held it (rejected before Permit,
or of a guest with no binding-cycle export). The supervisor names that pod in its
answer, `Began.ended_pod_uid`; the facade cannot work it out, as BeginCycles from
several threads reach the supervisor in an order only the supervisor sees. Forgetting
a pod (`_end`) drops its route and early scores together, and its encoded bytes
(`WireCache.forget_pod`) unless a binding cycle of it still reads them.

The cache keeps a route to an instance the supervisor discards (the one change it makes
on its own): the discard stops that actor, so a remembered call gets `ActorDeadError`,
which the facade answers as the discarded instance it is, never with a fresh instance
that lacks the cycle's state. The facade's threads call the methods without a lock:
each is a few dict reads and writes, each atomic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wasm_scheduler.actors.supervisor import Assigned, Began
from wasm_scheduler.framework_api import NamedNode, ScoreResult


@dataclass(frozen=True, slots=True)
class EarlyScores:
    """Score's result, computed in the same message as PreScore, until Score asks for it."""

    #: The nodes PreScore was given (Score over the same object, or the same names, takes it).
    nodes: Sequence[NamedNode | str]
    names: list[str]
    result: ScoreResult


class CycleCache:
    """One plugin's remembered routes (pod uid -> `Assigned`) and early scores, per pod."""

    def __init__(self, forget_pod: Callable[[str], None]) -> None:
        #: Told the uid of a pod whose encoded bytes may go (`WireCache.forget_pod`).
        self._forget_pod = forget_pod
        #: Routes for calls of a pod's scheduling cycle, from the supervisor's `Began`.
        self._scheduling: dict[str, Assigned] = {}
        #: Routes for calls of a pod's binding cycle, from the facade's ToBinding on.
        self._binding: dict[str, Assigned] = {}
        self._scores: dict[str, EarlyScores] = {}

    def route(self, uid: str, binding: bool) -> Assigned | None:
        """The route remembered for the pod's binding cycle (`binding`) or scheduling cycle."""
        return (self._binding if binding else self._scheduling).get(uid)

    def beginning(self, uid: str) -> None:
        """A BeginCycle of the pod was sent: a last cycle's early scores never answer this one."""
        self._scores.pop(uid, None)

    def began(self, uid: str, began: Began) -> None:
        """The supervisor's answer to the pod's BeginCycle: its route for this cycle, and the
        pod whose cycle that BeginCycle ended (`Began.ended_pod_uid`), forgotten."""
        if began.ended_pod_uid:
            self._end(began.ended_pod_uid)
        self._scheduling[uid] = began.assigned

    def lost(self, uid: str) -> None:
        """The pod's BeginCycle found no actor: its cycle has none to remember."""
        self._end(uid)

    def to_binding(self, uid: str) -> None:
        """The facade sent ToBinding: the route of the pod's cycle now serves its binding cycle."""
        route = self._scheduling.pop(uid, None)
        if route is not None:
            self._binding[uid] = route

    def release(self, uid: str) -> bool:
        """The facade ends the pod's cycle: its bytes go, and its route (the binding one first,
        the assignment `Assignments.release` gives back). False if none was remembered: the
        supervisor said another pod took over its slot (or gave it none), so there is
        nothing to release. A pod scheduled again while its last binding cycle ran keeps
        the route of its new cycle, whose own release comes in turn."""
        self._forget_pod(uid)  # re-encoded if a cycle of the pod still needs it
        if self._binding.pop(uid, None) is None and self._scheduling.pop(uid, None) is None:
            return False
        self._scores.pop(uid, None)
        return True

    def keep_scores(self, uid: str, scores: EarlyScores) -> None:
        """PreScore brought Score's result along: kept until Score asks, or the cycle ends."""
        self._scores[uid] = scores

    def take_scores(self, uid: str) -> EarlyScores | None:
        """The early scores of the pod's cycle, once (Score asks for them)."""
        return self._scores.pop(uid, None)

    def clear(self) -> None:
        """The plugin stops: nothing of any cycle is kept."""
        self._scheduling.clear()
        self._binding.clear()
        self._scores.clear()

    def _end(self, uid: str) -> None:
        """The pod's scheduling cycle is over: its route and early scores go, and its bytes
        unless a binding cycle of it still reads them."""
        self._scheduling.pop(uid, None)
        self._scores.pop(uid, None)
        if uid not in self._binding:
            self._forget_pod(uid)
