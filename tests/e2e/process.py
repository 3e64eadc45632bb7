"""Subprocesses of the end-to-end tests: started with their output in a log file the
test keeps as an artifact, stopped by PID (SIGTERM, then SIGKILL after a bounded
wait), and every wait bounded.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A bounded wait ran out: names what was awaited and the last thing seen."""


def wait_for(check: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.2) -> T:
    """Call `check` until it returns something other than None or False, at most `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = check()
            if value is not None and value is not False:
                return value
        except Exception as exc:  # noqa: BLE001 - the last one is reported if the wait runs out
            last_error = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error!r})" if last_error is not None else ""
            raise WaitTimeout(f"{what}: not after {timeout_s:.0f} s{detail}")
        time.sleep(interval_s)


def free_port() -> int:
    """A TCP port on 127.0.0.1 free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class ManagedProcess:
    """One subprocess, its log file, and its stop."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path,
                 env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> ManagedProcess:
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the process's life
        self._log.write(f"==== start {self.starts + 1}: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        # Its own session, so a stop reaches the whole group and the test's terminal does not.
        self._popen = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=self.env, cwd=self.cwd,
                                       start_new_session=True)
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self._popen is not None, f"{self.name} was never started"
        return self._popen.pid

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def signal(self, signum: int) -> None:
        if self.running:
            os.killpg(self.pid, signum)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it has not ended within `timeout_s`; the exit status."""
        popen = self._popen
        if popen is None:
            return None
        if popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self._closed()

    def kill(self) -> int | None:
        """SIGKILL at once (a crash, as far as its clients can tell)."""
        popen = self._popen
        if popen is None:
            return None
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)
            popen.wait(10)
        return self._closed()

    def _closed(self) -> int | None:
        code = self._popen.poll() if self._popen is not None else None
        if self._log is not None:
            self._log.write(f"==== ended: exit status {code}\n".encode())
            self._log.close()
            self._log = None
        return code

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def assert_running(self) -> None:
        if not self.running:
            raise AssertionError(f"{self.name} exited with status {self.returncode}:\n{self.tail()}")
