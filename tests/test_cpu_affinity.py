"""--cpus: every thread of the command on the CPUs asked for, and back afterwards."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from wasm_scheduler.adapters import cpu_affinity
from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.cpu_affinity import Pinning, apply_cpus, current_cpu, parse_cpus
from wasm_scheduler.adapters.framework.errors import UserError

pytestmark = pytest.mark.skipif(not cpu_affinity.supported(), reason="threads cannot be placed on this platform")

ALLOWED = frozenset({0, 1, 2, 3})


def test_lists_ranges_and_the_two_words_parse() -> None:
    assert parse_cpus("all", ALLOWED) is None
    assert parse_cpus(" ALL ", ALLOWED) is None
    assert parse_cpus("2", ALLOWED) == {2}
    assert parse_cpus("0,2", ALLOWED) == {0, 2}
    assert parse_cpus("1-3", ALLOWED) == {1, 2, 3}
    assert parse_cpus("0, 2-3", ALLOWED) == {0, 2, 3}
    auto = parse_cpus("auto", ALLOWED)
    assert auto is not None and len(auto) == 1 and auto <= ALLOWED


@pytest.mark.parametrize(("spec", "problem"), [
    ("x", "expected auto, all or CPU numbers"),
    ("1-", "expected auto, all or CPU numbers"),
    ("3-1", "'3-1' is not a CPU range"),
    ("-1", "expected auto, all or CPU numbers"),
    ("7", "CPU 7 is not available to this process (it may use 0-3)"),
    ("2-5", "CPU 4-5 is not available"),
    ("0-30000000", "CPU 0-30000000 is not available"),  # refused before it is expanded
])
def test_a_bad_list_is_one_line_naming_the_problem(spec: str, problem: str) -> None:
    with pytest.raises(UserError, match="--cpus") as info:
        parse_cpus(spec, ALLOWED)
    assert problem in str(info.value)
    assert "\n" not in str(info.value)


def test_auto_takes_the_cpu_the_thread_runs_on_when_the_process_may_use_it() -> None:
    here = current_cpu()
    assert here in os.sched_getaffinity(0)
    assert parse_cpus("auto", frozenset(os.sched_getaffinity(0))) == {here}
    assert parse_cpus("auto", frozenset({here + 1000, here + 1001})) == {here + 1000}


def _affinity(thread: threading.Thread) -> set[int]:
    assert thread.native_id is not None
    return set(os.sched_getaffinity(thread.native_id))


@pytest.fixture
def parked_thread() -> Iterator[threading.Thread]:
    """A thread that exists before the choice is applied."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, args=(10,), daemon=True)
    thread.start()
    yield thread
    release.set()
    thread.join(timeout=10)


def test_every_thread_moves_new_threads_inherit_and_restore_puts_them_back(parked_thread: threading.Thread) -> None:
    before = set(os.sched_getaffinity(0))
    target = min(before)
    pinning = apply_cpus(str(target))
    try:
        assert pinning.cpus == {target} and pinning.before == before
        assert set(os.sched_getaffinity(0)) == {target}
        assert _affinity(parked_thread) == {target}
        seen: list[set[int]] = []
        child = threading.Thread(target=lambda: seen.append(set(os.sched_getaffinity(0))))
        child.start()
        child.join(timeout=10)
        assert seen == [{target}]
    finally:
        pinning.restore()
    assert set(os.sched_getaffinity(0)) == before
    assert _affinity(parked_thread) == before


def test_each_thread_goes_back_to_its_own_cpus(parked_thread: threading.Thread) -> None:
    before = set(os.sched_getaffinity(0))
    if len(before) < 2:
        pytest.skip("needs two CPUs")
    assert parked_thread.native_id is not None
    os.sched_setaffinity(parked_thread.native_id, {max(before)})  # the embedding program's own choice
    pinning = apply_cpus(str(min(before)))
    try:
        assert _affinity(parked_thread) == {min(before)}
    finally:
        pinning.restore()
    assert _affinity(parked_thread) == {max(before)}
    assert set(os.sched_getaffinity(0)) == before


def test_a_choice_that_changes_nothing_moves_nothing(parked_thread: threading.Thread) -> None:
    before = frozenset(os.sched_getaffinity(0))
    assert parked_thread.native_id is not None
    own = {min(before)}
    os.sched_setaffinity(parked_thread.native_id, own)
    pinning = apply_cpus(",".join(map(str, sorted(before))))  # what the process has already
    assert pinning == Pinning(None, before)
    pinning.restore()
    assert _affinity(parked_thread) == own


def test_a_thread_the_system_will_not_move_is_left_alone(monkeypatch: pytest.MonkeyPatch,
                                                          parked_thread: threading.Thread) -> None:
    before = set(os.sched_getaffinity(0))
    real = os.sched_setaffinity

    def refuse_parked(tid: int, cpus: Any) -> None:
        if tid == parked_thread.native_id:
            raise OSError(22, "Invalid argument")  # e.g. a cpuset that shrank meanwhile
        real(tid, cpus)

    monkeypatch.setattr(os, "sched_setaffinity", refuse_parked)
    pinning = apply_cpus(str(min(before)))
    try:
        assert set(os.sched_getaffinity(0)) == {min(before)} or before == {min(before)}
        assert _affinity(parked_thread) == before
    finally:
        pinning.restore()
    assert set(os.sched_getaffinity(0)) == before


def test_all_leaves_placement_alone() -> None:
    before = set(os.sched_getaffinity(0))
    pinning = apply_cpus("all")
    assert pinning == Pinning(None, frozenset(before))
    assert pinning.describe() == "all"
    pinning.restore()
    assert set(os.sched_getaffinity(0)) == before


def test_the_command_pins_for_its_run_only(capsys: pytest.CaptureFixture[str],
                                           parked_thread: threading.Thread) -> None:
    before = set(os.sched_getaffinity(0))
    seen: list[set[int]] = []
    original = cpu_affinity._place_threads

    def spy(place: Callable[[int], frozenset[int]]) -> dict[int, frozenset[int]]:
        seen.append(set(place(os.getpid())))  # where the main thread goes
        return original(place)

    cpu_affinity._place_threads = spy  # type: ignore[assignment]
    try:
        assert main(["simulate", "--output", "json", "--cpus", str(min(before))]) == 0
    finally:
        cpu_affinity._place_threads = original  # type: ignore[assignment]
    assert '"pods"' in capsys.readouterr().out
    if len(before) > 1:
        assert seen == [{min(before)}, before]  # pinned for the run, then put back
    assert set(os.sched_getaffinity(0)) == before
    assert _affinity(parked_thread) == before


def test_a_cpu_the_process_cannot_use_is_a_user_error_of_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--cpus", "4096"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --cpus 4096: CPU 4096 is not available to this process")
    assert len(err.splitlines()) == 1


def test_the_commands_that_end_pin_by_default_the_server_does_not() -> None:
    from wasm_scheduler.adapters.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["simulate"]).cpus == "auto"
    assert parser.parse_args(["bench"]).cpus == "auto"
    assert parser.parse_args(["extender", "--config", "x.yaml"]).cpus == "all"
    assert parser.parse_args(["extender", "--config", "x.yaml", "--cpus", "auto"]).cpus == "auto"
