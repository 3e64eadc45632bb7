"""`logger.enabled`: asked before a hot path builds a log line."""

from __future__ import annotations

import logging

import structlog

from wasm_scheduler.logger import DEBUG, INFO, enabled


def test_a_filtering_logger_answers_for_its_level() -> None:
    at_warning = structlog.make_filtering_bound_logger(logging.WARNING)(structlog.PrintLogger(), [], {})
    assert not enabled(at_warning, DEBUG) and not enabled(at_warning, INFO)
    assert enabled(at_warning, logging.WARNING) and enabled(at_warning, logging.ERROR)
    at_debug = structlog.make_filtering_bound_logger(logging.DEBUG)(structlog.PrintLogger(), [], {})
    assert enabled(at_debug, DEBUG)


def test_a_logger_that_cannot_say_gets_every_line() -> None:
    class Plain:
        def debug(self, event: str, **fields: object) -> None: ...

    assert enabled(Plain(), DEBUG)
