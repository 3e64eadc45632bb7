"""Whether a structlog logger would emit a line at a level, asked before the line is built.

This module owns one rule of the hot paths: a log line nobody will see costs nothing,
not even its fields. structlog's filtering loggers (the ones `adapters.logs` configures)
answer `is_enabled_for`; any other logger an embedding program configures is assumed
to want every line, so nothing is lost.
"""

from __future__ import annotations

import logging
from typing import Any

DEBUG = logging.DEBUG
INFO = logging.INFO


def enabled(logger: Any, level: int) -> bool:
    """Would `logger` emit a line at `level` (a `logging` level number)?"""
    is_enabled_for = getattr(logger, "is_enabled_for", None)
    return is_enabled_for is None or bool(is_enabled_for(level))
