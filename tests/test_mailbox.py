"""The actors' mailbox and reply primitives keep Pykka's semantics (actors/mailbox.py)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pykka
import pytest

from wasm_scheduler.actors.mailbox import MailboxActor, ReplyFuture


def test_a_value_set_on_another_thread_reaches_every_waiter_and_every_later_get() -> None:
    future: ReplyFuture[str] = ReplyFuture()
    got: list[str] = []

    def wait() -> None:
        got.append(future.get(timeout=5))

    waiters = [threading.Thread(target=wait) for _ in range(4)]
    for thread in waiters:
        thread.start()
    time.sleep(0.01)
    future.set("answer")
    for thread in waiters:
        thread.join(timeout=5)
    assert got == ["answer"] * 4
    assert future.get() == "answer"
    assert future.get(timeout=0) == "answer"


@pytest.mark.parametrize("timeout", [0, -1, 0.01])
def test_an_unset_future_times_out_with_pykka_timeout(timeout: float) -> None:
    future: ReplyFuture[int] = ReplyFuture()
    with pytest.raises(pykka.Timeout):
        future.get(timeout=timeout)
    future.set(3)  # the failed wait left it settable
    assert future.get(timeout=timeout) == 3


def test_a_future_is_set_once() -> None:
    future: ReplyFuture[int] = ReplyFuture()
    future.set(1)
    with pytest.raises(queue.Full):
        future.set(2)
    with pytest.raises(queue.Full):
        future.set_exception((ValueError, ValueError("late"), None))
    assert future.get() == 1


def test_an_exception_set_is_raised_by_every_get_with_its_traceback() -> None:
    future: ReplyFuture[int] = ReplyFuture()
    try:
        raise KeyError("inside the actor")
    except KeyError:
        future.set_exception()
    for _ in range(2):
        with pytest.raises(KeyError, match="inside the actor") as info:
            future.get(timeout=1)
        assert any(entry.name == "test_an_exception_set_is_raised_by_every_get_with_its_traceback"
                   for entry in info.traceback)
    empty: ReplyFuture[int] = ReplyFuture()
    empty.set_exception((RuntimeError, None, None))  # a class without an instance
    with pytest.raises(RuntimeError):
        empty.get()


def test_map_join_filter_and_reduce_go_through_the_get_hook() -> None:
    a: ReplyFuture[list[int]] = ReplyFuture()
    b: ReplyFuture[list[int]] = ReplyFuture()
    mapped = a.map(len)
    joined = a.join(b)
    filtered = a.filter(lambda n: n % 2 == 0)
    reduced = b.reduce(lambda total, n: total + n, 100)
    a.set([1, 2, 3, 4])
    b.set([10, 20])
    assert mapped.get(timeout=1) == 4
    assert joined.get(timeout=1) == [[1, 2, 3, 4], [10, 20]]
    assert list(filtered.get(timeout=1)) == [2, 4]
    assert reduced.get(timeout=1) == 130
    with pytest.raises(queue.Full):
        mapped.set(0)  # a future with a hook has its value from the hook


def test_a_hook_runs_once_for_every_waiter() -> None:
    calls: list[int] = []
    source: ReplyFuture[int] = ReplyFuture()

    def slow_double(value: int) -> list[int]:
        calls.append(value)
        time.sleep(0.05)  # long enough for the other waiters to arrive meanwhile
        return [value * 2]

    mapped = source.map(slow_double)
    source.set(21)
    got: list[list[int]] = []
    waiters = [threading.Thread(target=lambda: got.append(mapped.get(timeout=5))) for _ in range(3)]
    for thread in waiters:
        thread.start()
    for thread in waiters:
        thread.join(timeout=5)
    assert calls == [21]
    assert got == [[42]] * 3 and got[0] is got[1] is got[2]


def test_a_waiter_whose_turn_comes_late_gets_the_value_not_a_timeout() -> None:
    future: ReplyFuture[str] = ReplyFuture()

    class BusyLock:
        """Stands for the ready lock while another waiter holds it: the value is set
        during this waiter's wait, and its turn comes only after the deadline."""

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            future._value, future._done = "late but there", True
            return False

        def release(self) -> None:  # pragma: no cover - not reached
            raise AssertionError("not acquired")

    future._ready = BusyLock()  # type: ignore[assignment]
    assert future.get(timeout=0.01) == "late but there"


class Recorder(MailboxActor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if message == "boom":
            raise ValueError("boom in the actor")
        if message == "seen":
            return list(self.seen)
        if isinstance(message, tuple) and message[0] == "slow":
            time.sleep(message[1])
        self.seen.append(message)
        return message


def test_a_mailbox_actor_answers_asks_in_order_and_returns_its_errors() -> None:
    ref = Recorder.start()
    try:
        future = ref.ask(1, block=False)
        assert isinstance(future, ReplyFuture)
        assert future.get(timeout=5) == 1
        with pytest.raises(ValueError, match="boom in the actor"):
            ref.ask("boom", timeout=5)
        assert ref.ask(2, timeout=5) == 2  # the actor lives on after an error it answered
    finally:
        ref.stop()


def test_each_sender_s_messages_arrive_in_the_order_sent() -> None:
    ref = Recorder.start()
    senders = 4
    per_sender = 200

    def send(who: int) -> None:
        for n in range(per_sender):
            ref.tell((who, n))

    try:
        threads = [threading.Thread(target=send, args=(who,)) for who in range(senders)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=10)
        seen = ref.ask("seen", timeout=10)
        assert len(seen) == senders * per_sender
        for who in range(senders):
            assert [n for w, n in seen if w == who] == list(range(per_sender))
    finally:
        ref.stop()


def test_asks_left_in_the_mailbox_of_a_stopped_actor_fail_as_actor_dead() -> None:
    ref = Recorder.start()
    ref.tell(("slow", 0.2))
    pending = ref.ask(3, block=False)
    ref.stop(block=False)  # queued behind the slow message and the ask: answered first
    assert pending.get(timeout=5) == 3
    with pytest.raises(pykka.ActorDeadError):
        ref.tell(4)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(5, timeout=1)


def test_an_actor_dying_of_a_told_error_fails_the_asks_still_queued() -> None:
    failures: list[str] = []

    class DiesOnTell(MailboxActor):
        def on_receive(self, message: Any) -> Any:
            if message == "die":
                time.sleep(0.05)  # the ask below is queued meanwhile
                raise RuntimeError("unhandled in a told message")
            return message

        def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
            failures.append(str(exception_value))

    ref = DiesOnTell.start()
    ref.tell("die")
    queued = ref.ask("after", block=False)
    with pytest.raises(pykka.ActorDeadError):
        queued.get(timeout=5)
    assert failures == ["unhandled in a told message"]


def test_the_copies_of_a_call_keep_every_other_field() -> None:
    from dataclasses import fields

    from wasm_scheduler.actors.guest_actor import Invoke

    original = Invoke("score", ("pod", ["n1"], "handle"), "ns/pod", "uid-1", "binding", ReplyFuture(), "route-0")
    replying = original.replying(reply := ReplyFuture())
    routed = original.routed("route-1")
    for copy, changed, value in ((replying, "reply_to", reply), (routed, "route", "route-1")):
        for f in fields(Invoke):
            expected = value if f.name == changed else getattr(original, f.name)
            assert getattr(copy, f.name) is expected, f.name
