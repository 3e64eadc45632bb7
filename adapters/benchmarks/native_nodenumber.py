"""NodeNumber as a native Python plugin: the `native` variant of `wasm-scheduler bench`.

This module owns a plugin with exactly the semantics of the NodeNumber wasm guest
(``examples/nodenumber/nodenumber.wat``), so the benchmark compares one plugin run
two ways: PreFilter starts a cycle with no state; PreScore keeps the last digit of the
pod's ``metadata.name`` in the `CycleState` (or "none" when the name does not end in a
digit); Score gives 100 to a node whose name ends in that digit and 0 to the others,
0 everywhere when the pod's name has no digit, and an Error when PreScore did not run
in this cycle. It reaches the framework through ``registry={NAME: NativeNodeNumber}``.

See `docs/performance.md` ("How to measure").
"""

from __future__ import annotations

from collections.abc import Sequence

from wasm_scheduler.adapters.framework.cycle_state import CycleState
from wasm_scheduler.adapters.framework.plugins.base import NativePlugin
from wasm_scheduler.adapters.framework.pods import KubeObject
from wasm_scheduler.adapters.framework.snapshot import NodeInfo
from wasm_scheduler.framework_api import MAX_NODE_SCORE, SUCCESS, Code, NodeScore, PreFilterResult, ScoreResult, Status

NAME = "NodeNumber"
#: The CycleState key PreScore writes and Score reads.
STATE_KEY = "PreScoreNodeNumber"
#: The guest's reason when Score runs without this cycle's PreScore.
NO_STATE = "NodeNumber: no cycle state (prescore did not run)"
#: Stored when the pod's name does not end in a digit (the guest's state 10).
NO_DIGIT = ""


def last_digit(name: str) -> str:
    """The name's last character when it is an ASCII digit, else `NO_DIGIT`."""
    return name[-1] if name and "0" <= name[-1] <= "9" else NO_DIGIT


class NativeNodeNumber(NativePlugin):
    """PreScore keeps the pod name's last digit; Score favours nodes ending in it."""

    NAME = NAME

    def pre_filter(self, state: CycleState, pod: KubeObject) -> PreFilterResult:
        # The guest resets its state here; a fresh CycleState per cycle already is one.
        return PreFilterResult(SUCCESS)

    def pre_score(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> Status:
        state.write(STATE_KEY, last_digit(str((pod.get("metadata") or {}).get("name", ""))))
        return SUCCESS

    def score_nodes(self, state: CycleState, pod: KubeObject, nodes: Sequence[NodeInfo]) -> ScoreResult:
        digit = state.get(STATE_KEY)
        if digit is None:
            return ScoreResult(Status(Code.ERROR, NO_STATE, self.name))
        if digit == NO_DIGIT:
            return ScoreResult(SUCCESS, tuple(NodeScore(node.name, 0) for node in nodes))
        return ScoreResult(SUCCESS, tuple(NodeScore(node.name, MAX_NODE_SCORE if node.name.endswith(digit) else 0)
                                          for node in nodes))
