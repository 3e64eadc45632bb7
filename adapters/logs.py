"""Logging set-up for the command line: structlog to stderr, console or JSON lines.

This module owns `configure_logging`, which the CLI calls once; library code only gets
loggers (``structlog.get_logger``) and never configures anything on import. The console
format is for people; ``json`` writes one object a line with ``event``, ``level``,
``timestamp`` and whatever the call site bound (``plugin``, ``instance``, ``pod``,
``pod_uid``, ``extension_point``, ``phase``, ``duration_ms``). The standard library's
logging (used by Pykka) goes to stderr at the same level.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("console", "json")


class _StderrLoggerFactory:
    """A PrintLogger on whatever sys.stderr is when a logger is made (tests swap it)."""

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        stream: TextIO = sys.stderr
        return structlog.PrintLogger(stream)


def configure_logging(level: str = "warning", fmt: str = "console") -> None:
    """Send every log line at or above `level` to stderr, as `fmt` ("console" or "json")."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, got {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    number = getattr(logging, level.upper())
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    if fmt == "json":
        processors += [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
    else:
        processors.append(structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()))
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(number),
        logger_factory=_StderrLoggerFactory(),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())  # every line of a JSON log is JSON
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=number, force=True, handlers=[handler])
    # Pykka's own lifecycle chatter (actor registered/started) is below our debug.
    logging.getLogger("pykka").setLevel(max(number, logging.INFO))


class _JsonFormatter(logging.Formatter):
    """Standard-library log records (Pykka's) as the same JSON objects structlog writes."""

    def format(self, record: logging.LogRecord) -> str:
        import datetime
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
