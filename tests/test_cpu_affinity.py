"""--cpus: every thread of the command on the CPUs asked for, and back afterwards."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from adapters import cpu_affinity
from adapters.cli import main
from adapters.cpu_affinity import Pinning, apply_cpus, current_cpu, parse_cpus
from adapters.framework.errors import UserError

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
    ("2-5", "CPU 4, 5 is not available"),
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

    def spy(cpus: frozenset[int]) -> int:
        seen.append(set(cpus))
        return original(cpus)

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
