"""MailboxActor and ReplyFuture: Pykka's threading actor with a cheaper mailbox and reply.

This module owns the primitives a message travels through. Every hand-off between the
scheduler's threads and an actor is one put, one wake and one get, paid several times a
pod; Pykka's own inbox (`queue.Queue`) and futures (`threading.Condition`) are written
in Python. Here, through the hooks Pykka gives every actor class, the inbox is a
`queue.SimpleQueue` and a reply a `ReplyFuture`: a lock held from creation and released
by `set`, so a waiter sleeps in one C-level acquire. Semantics are Pykka's: `get`
returns the value or raises what was set, raises `pykka.Timeout` when time runs out and
can be called again; a second `set` raises `queue.Full`. `docs/performance.md` ("Why
each fast path exists") has the figures. A message that is asked says what it
answers: an `Ask[R]`, and `ask` gives its answer typed as `R`.
"""

from __future__ import annotations

import _thread
import queue
import sys
from typing import Any, Generic, TypeVar

import pykka
from pykka._types import OptExcInfo

T = TypeVar("T")
R = TypeVar("R")
A = TypeVar("A", bound=pykka.Actor)


class Ask(Generic[R]):
    """A message whose answer, when it is asked, is an `R`."""

    __slots__ = ()


def ask(actor: pykka.ActorRef[A], message: Ask[R]) -> R:
    """Ask `actor` and wait for the answer to `message`."""
    answer: R = actor.ask(message, block=True)
    return answer


class ReplyFuture(pykka.Future[T]):
    """A one-shot answer: set once by the replying thread, read by any number of waiters."""

    def __init__(self) -> None:
        super().__init__()
        self._ready = _thread.allocate_lock()
        self._ready.acquire()
        self._setting = _thread.allocate_lock()
        self._hook_lock: Any = None  # made with the hook: most futures never get one
        self._done = False
        self._value: Any = None
        self._exc_info: OptExcInfo | None = None

    def __repr__(self) -> str:
        return f"<ReplyFuture {'done' if self._done else 'pending'}>"

    def get(self, *, timeout: float | None = None) -> T:
        if self._get_hook is not None:
            with self._hook_lock:  # the hook runs once, whoever asks first
                return super().get(timeout=timeout)
        if not self._done:
            if timeout is None:
                acquired = self._ready.acquire()
            elif timeout <= 0:
                acquired = self._ready.acquire(False)
            else:
                acquired = self._ready.acquire(True, timeout)
            if acquired:
                self._ready.release()  # every other waiter (and a later get) passes too
            elif not self._done:  # not merely another waiter holding the lock a moment
                raise pykka.Timeout(f"{timeout} seconds")
        if self._exc_info is not None:
            exc_type, exc_value, exc_traceback = self._exc_info
            assert exc_type is not None
            if exc_value is None:
                exc_value = exc_type()
            if exc_value.__traceback__ is not exc_traceback:
                raise exc_value.with_traceback(exc_traceback)
            raise exc_value
        value: T = self._value
        return value

    def _settle(self, value: Any, exc_info: OptExcInfo | None) -> None:
        with self._setting:
            if self._done or self._get_hook is not None:
                raise queue.Full
            self._value = value
            self._exc_info = exc_info
            self._done = True
        self._ready.release()

    def set(self, value: Any | None = None) -> None:
        self._settle(value, None)

    def set_exception(self, exc_info: OptExcInfo | None = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        self._settle(None, exc_info if exc_info is not None else sys.exc_info())

    def set_get_hook(self, func: Any) -> None:
        with self._setting:
            if self._done:
                raise queue.Full
            self._hook_lock = _thread.RLock()
            super().set_get_hook(func)


class MailboxActor(pykka.ThreadingActor):
    """A Pykka threading actor whose inbox and replies are the C primitives above."""

    @staticmethod
    def _create_actor_inbox() -> Any:
        return queue.SimpleQueue()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return ReplyFuture()


__all__ = ["Ask", "MailboxActor", "ReplyFuture", "ask"]
