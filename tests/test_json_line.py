"""The JSON log format's last processor writes what structlog's TimeStamper and JSONRenderer did."""

from __future__ import annotations

import datetime
import json
import time
from pathlib import Path
from typing import Any

import structlog

from wasm_scheduler.adapters.logs import JsonLine


class _Named:
    def __structlog__(self) -> str:
        return "named-by-structlog"


def test_a_line_is_what_structlogs_renderer_writes_with_its_timestamp() -> None:
    event: dict[str, Any] = {"event": "guest.log", "message": "caf\u00e9 \u2713", "severity": 0, "n": 1.5,
                             "path": Path("/x"), "error": ValueError("bad"), "named": _Named(), "none": None,
                             "nested": {"a": [1, "b"]}}
    before = datetime.datetime.now(datetime.UTC)
    line = JsonLine()(None, "info", dict(event))
    after = datetime.datetime.now(datetime.UTC)
    ours = json.loads(line)
    theirs = json.loads(structlog.processors.JSONRenderer()(None, "info", dict(event)))
    stamp = ours.pop("timestamp")
    assert ours == theirs
    when = datetime.datetime.fromisoformat(stamp)
    assert when.utcoffset() == datetime.timedelta(0)
    assert before - datetime.timedelta(microseconds=1) <= when <= after
    theirs_stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "info", {})["timestamp"]
    assert stamp.endswith("Z") and theirs_stamp.endswith("Z") and len(stamp) == len(theirs_stamp) == 27


def test_the_seconds_text_follows_the_clock() -> None:
    line = JsonLine()
    first = json.loads(line(None, "info", {"event": "a"}))["timestamp"]
    time.sleep(1.05)
    second = json.loads(line(None, "info", {"event": "b"}))["timestamp"]
    assert datetime.datetime.fromisoformat(second) - datetime.datetime.fromisoformat(first) >= datetime.timedelta(
        seconds=1)
