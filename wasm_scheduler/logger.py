"""The package's loggers: quiet until the program asks for log lines.

This module owns `get_logger`, which every module of the package calls instead of
``structlog.get_logger``. A library configures no logging when it is imported and
writes nothing unless asked, yet structlog left unconfigured prints every line, debug
included, to stdout. So a logger from here is structlog's own (lazy) logger once the
program has configured structlog (the CLI does, with
`wasm_scheduler.adapters.logs.configure_logging`; so may an embedding program or a
test suite), and until then a thin structlog wrapper over the standard library's
``logging.getLogger("wasm_scheduler.<name>")``. The ``wasm_scheduler`` logger has
only a ``NullHandler``, as a library's should: its lines reach whatever handlers the
program set up (``logging.basicConfig``, pytest's log capture, which shows a failing
test's warnings under "Captured log"), and nowhere at all otherwise.

The choice is made for each line (a module's logger follows a structlog configured
later), and once by `bind`: a bound logger keeps the choice made when it was bound,
as structlog's own bound loggers keep the configuration of their time.

It also owns `enabled`: a log line nobody will see costs nothing, not even its fields.

See `docs/logging.md` ("Used as a library").
"""

from __future__ import annotations

import functools
import logging
from collections.abc import MutableMapping
from typing import Any, NoReturn

import structlog

#: The standard library logger every line goes under while structlog is unconfigured.
ROOT_LOGGER = "wasm_scheduler"

#: The levels the hot paths ask `enabled` about (`logging` level numbers).
DEBUG = logging.DEBUG
INFO = logging.INFO

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


def logging_configured() -> bool:
    """Has the program configured structlog (the CLI does, with
    `adapters.logs.configure_logging`)? Until then lines go to the standard library."""
    return structlog.is_configured()


def get_logger(name: str) -> Any:
    """The logger of one part of the package (``"actors.guest"``, ``"registry"``, a module's ``__name__``)."""
    return PackageLogger(name)


def enabled(logger: Any, level: int) -> bool:
    """Would `logger` emit a line at `level` (a `logging` level number)? Asked before the
    line is built."""
    is_enabled_for = getattr(logger, "is_enabled_for", None)
    return is_enabled_for is None or bool(is_enabled_for(level))


class PackageLogger:
    """A module's logger: structlog's while structlog is configured, the standard library's before."""

    __slots__ = ("name", "_structlog")

    def __init__(self, name: str) -> None:
        self.name = name
        self._structlog = structlog.get_logger(name)

    def _target(self) -> Any:
        return self._structlog if logging_configured() else _standard(self.name)

    def bind(self, **values: Any) -> Any:
        """A logger carrying `values` on every line, resolved now (structlog's, or the standard library's)."""
        return self._target().bind(**values)

    def __getattr__(self, attribute: str) -> Any:  # info, warning, is_enabled_for, ...
        return getattr(self._target(), attribute)


class _StandardBoundLogger(structlog.stdlib.BoundLogger):
    """structlog's wrapper of a standard library logger, answering `is_enabled_for` as
    the filtering loggers do (`enabled` asks it)."""

    def is_enabled_for(self, level: int) -> bool:
        return bool(self._logger.isEnabledFor(level))


def _render(logger: Any, method: str, event: MutableMapping[str, Any]) -> tuple[tuple[str], dict[str, Any]]:
    """One line, ``event key=value ...``, as the standard library's message."""
    extra: dict[str, Any] = {}
    for key in ("exc_info", "stack_info"):
        if event.get(key):
            extra[key] = event.pop(key)
        else:
            event.pop(key, None)
    words = [str(event.pop("event", ""))]
    words += [f"{key}={_value(value)}" for key, value in event.items()]
    return (" ".join(words),), extra


def _value(value: Any) -> str:
    text = str(value)
    return repr(text) if not text or any(c.isspace() for c in text) else text


_STANDARD_PROCESSORS: list[Any] = [structlog.stdlib.filter_by_level, _render]
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "msg": logging.INFO, "warn": logging.WARNING,
           "warning": logging.WARNING, "error": logging.ERROR, "exception": logging.ERROR,
           "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def to_standard_logging(logger: Any, method: str, event: MutableMapping[str, Any]) -> NoReturn:
    """A structlog processor that hands the line to the standard library's ``wasm_scheduler``
    logger (as an unconfigured package does) and drops it from structlog's chain: for loggers
    bound while structlog was configured for a while (the ``wasm_logs`` fixture) that outlive it."""
    level = _LEVELS.get(method, logging.INFO)
    standard = logging.getLogger(ROOT_LOGGER)
    if standard.isEnabledFor(level):
        args, extra = _render(standard, method, event)
        standard.log(level, *args, **extra)
    raise structlog.DropEvent


@functools.cache
def _standard(name: str) -> _StandardBoundLogger:
    full = name if name == ROOT_LOGGER or name.startswith(ROOT_LOGGER + ".") else f"{ROOT_LOGGER}.{name}"
    return _StandardBoundLogger(logging.getLogger(full), _STANDARD_PROCESSORS, {})
