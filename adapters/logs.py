"""Logging set-up for the command line: structlog to stderr, console or JSON lines.

This module owns `configure_logging`, which the CLI calls once; library code only gets
loggers (``structlog.get_logger``) and never configures anything on import. The console
format is for people; ``json`` writes one object a line with ``event``, ``level``,
``timestamp`` and whatever the call site bound (``plugin``, ``instance``, ``pod``,
``pod_uid``, ``extension_point``, ``phase``, ``duration_ms``). The standard library's
logging (used by Pykka) goes to stderr at the same level, through the same `LogSink`.

When the reader of stderr goes away (``wasm-scheduler ... 2>&1 | head``), the sink drops
every later line instead of raising in whichever thread logged (an actor's thread would
otherwise die mid-message), and calls the ``on_broken_pipe`` callback once so the
command can stop and exit.

While a command checks its inputs it may `LogSink.hold` the lines: they are written, in
order, when it releases them, and a mistake found meanwhile releases them without the
warnings, so the user's mistake is one line (``error: ...``) with no warning before it.

See `docs/logging.md`.
"""

from __future__ import annotations

import datetime
import logging
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("console", "json")
#: What a command logs when not told (--log-level, --log-format).
DEFAULT_LEVEL = "warning"
DEFAULT_FORMAT = "console"


@dataclass
class LogSink:
    """Writes whole log lines to whatever sys.stderr is at the time (tests swap it).

    A write that finds the reader gone (BrokenPipeError) marks the sink `broken`: that
    line and every later one are dropped, and `on_broken_pipe` is called once, from the
    thread that noticed.
    """

    on_broken_pipe: Callable[[], None] | None = None
    broken: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: (level, line) of the lines held back (`hold`), None when lines are written at once.
    _held: list[tuple[int, str]] | None = field(default=None, repr=False)

    def write_line(self, line: str, level: int = logging.INFO) -> None:
        if self.broken:
            return
        with self._lock:  # one line at a time from every thread
            if self._held is not None:
                self._held.append((level, line))
                return
            notify = self._write(line)
        if notify and self.on_broken_pipe is not None:
            self.on_broken_pipe()

    def _write(self, line: str) -> bool:
        """Write one line (the lock held); True when this write found the reader gone."""
        if self.broken:
            return False
        try:
            stream = sys.stderr
            stream.write(line + "\n")
            stream.flush()
        except BrokenPipeError:
            self.broken = True
            return True
        return False

    def hold(self) -> None:
        """Keep every later line back until `release`."""
        with self._lock:
            if self._held is None:
                self._held = []

    def release(self, drop_from: int | None = None) -> None:
        """Write the held lines in order, but those at level `drop_from` or above, and
        write lines at once again. Nothing happens when nothing is held."""
        if self._held is None:
            return
        notify = False
        with self._lock:
            held, self._held = self._held or [], None
            for level, line in held:
                if drop_from is None or level < drop_from:
                    notify = self._write(line) or notify
        if notify and self.on_broken_pipe is not None:
            self.on_broken_pipe()


def _writes_at(level: int) -> Callable[[_SinkLogger, str], None]:
    def write(self: _SinkLogger, message: str) -> None:
        self._sink.write_line(message, level)

    return write


class _SinkLogger:
    """structlog's logger interface (every level method writes the rendered line) over a LogSink."""

    def __init__(self, sink: LogSink) -> None:
        self._sink = sink

    debug = _writes_at(logging.DEBUG)
    msg = log = info = _writes_at(logging.INFO)
    warn = warning = _writes_at(logging.WARNING)
    err = error = exception = failure = _writes_at(logging.ERROR)
    critical = fatal = _writes_at(logging.CRITICAL)


class _SinkLoggerFactory:
    def __init__(self, sink: LogSink) -> None:
        self._sink = sink

    def __call__(self, *args: Any) -> _SinkLogger:
        return _SinkLogger(self._sink)


class _SinkHandler(logging.Handler):
    """Standard-library records (Pykka's) through the same sink, so they share its lock and pipe handling."""

    def __init__(self, sink: LogSink) -> None:
        super().__init__()
        self._sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # a record that cannot be formatted: report it as logging does
            self.handleError(record)
            return
        self._sink.write_line(line, record.levelno)


def configure_logging(level: str = DEFAULT_LEVEL, fmt: str = DEFAULT_FORMAT,
                      on_broken_pipe: Callable[[], None] | None = None) -> LogSink:
    """Send every log line at or above `level` to stderr, as `fmt` ("console" or "json").

    Returns the sink the lines go through; `on_broken_pipe` is called once if stderr's
    reader goes away (later lines are dropped).
    """
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    number = getattr(logging, level.upper())
    sink = LogSink(on_broken_pipe)
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
                      structlog.processors.format_exc_info, JsonLine()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=_SinkLoggerFactory(sink),
        cache_logger_on_first_use=False,
    )
    handler = _SinkHandler(sink)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())  # every line of a JSON log is JSON
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=number, force=True, handlers=[handler])
    # Pykka's own lifecycle chatter (actor registered/started) is below our debug.
    logging.getLogger("pykka").setLevel(max(number, logging.INFO))
    return sink


def _unknown_value(value: object) -> str:
    """What JSON cannot carry, as structlog's JSONRenderer writes it: its repr."""
    structlog_text = getattr(value, "__structlog__", None)
    return str(structlog_text()) if callable(structlog_text) else repr(value)


class JsonLine:
    """The last processor of the JSON format: the event dict with its timestamp, as one
    JSON line. What structlog's TimeStamper(fmt="iso", utc=True) and JSONRenderer write,
    made in one step with msgspec's encoder and a timestamp whose seconds are formatted
    once a second: a guest that logs on every node writes a line in a few microseconds
    (docs/performance.md)."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder(enc_hook=_unknown_value)
        #: (whole second, its ISO text up to the seconds), swapped whole.
        self._second: tuple[int, str] = (-1, "")

    def _timestamp(self) -> str:
        now = time.time()
        second = int(now)
        cached_second, text = self._second
        if second != cached_second:
            text = datetime.datetime.fromtimestamp(second, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = (second, text)
        return f"{text}.{int((now - second) * 1_000_000):06d}Z"

    def __call__(self, _logger: object, _method: str, event_dict: MutableMapping[str, Any]) -> str:
        event_dict["timestamp"] = self._timestamp()
        return self._encoder.encode(event_dict).decode()


class _JsonFormatter(logging.Formatter):
    """Standard-library log records (Pykka's) as the same JSON objects structlog writes."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        line: dict[str, Any] = {
            "event": record.getMessage(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "timestamp": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line)
