"""docs/logging.md and the code agree on the event vocabulary, both ways.

Every event name the runtime logs (found by reading the sources of actors/, registry/
and adapters/ with `ast`: ``log.info("event.name", ...)``, ``self.log.warning(...)``,
bound loggers, ``getattr(log, level)("event.name")``, ``log.log(level, "event.name")``,
``(log.info if loud else log.debug)("event.name")``)
is documented in the Events section of docs/logging.md, and every name documented
there is logged somewhere.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("actors", "registry", "adapters")
DOC = ROOT / "docs" / "logging.md"

#: Methods of a structlog (or standard-library) logger that write a line.
LEVEL_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "fatal", "msg",
                           "log", "failure", "err"})
#: Event names are dotted lowercase words: area.what_happened.
EVENT = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+")
#: A receiver that is a logger: log, self.log, self._logger, get_logger(...), anything .bind(...).
LOGGER = re.compile(r"(?:^|[._])_?log(?:ger)?$|get_logger\(|\.bind\(|\.new\(")


def _is_logger(expr: ast.expr) -> bool:
    return bool(LOGGER.search(ast.unparse(expr)))


def _logging_method(func: ast.expr) -> tuple[bool, bool] | None:
    """For a call's callee: None if it does not log, else (surely a logger, is ``.log(level, ...)``)."""
    if isinstance(func, ast.Attribute) and func.attr in LEVEL_METHODS:
        surely = _is_logger(func.value)
        return surely, surely and func.attr == "log"
    if (isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "getattr"
            and func.args and _is_logger(func.args[0])):  # getattr(log, level)("event", ...)
        return True, False
    if isinstance(func, ast.IfExp):  # (log.info if loud else log.debug)("event", ...)
        branches = [_logging_method(func.body), _logging_method(func.orelse)]
        found = [b for b in branches if b is not None]
        if found:
            return any(b[0] for b in found), all(b[1] for b in found)
    return None


def log_calls(tree: ast.AST) -> Iterator[tuple[int, ast.expr | None, bool]]:
    """(line, the event argument or None, whether the callee is surely a logger) of every logging call."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        method = _logging_method(node.func)
        if method is None:
            continue
        surely, level_first = method
        args = list(node.args)[1:] if level_first else list(node.args)
        yield node.lineno, (args[0] if args else None), surely


def logged_events(sources: dict[str, str]) -> tuple[dict[str, list[str]], list[str]]:
    """Event name -> where it is logged; and logger calls whose event is not a literal name."""
    events: dict[str, list[str]] = {}
    unnamed: list[str] = []
    for where, text in sources.items():
        for line, arg, surely in log_calls(ast.parse(text, filename=where)):
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and EVENT.fullmatch(arg.value):
                events.setdefault(arg.value, []).append(f"{where}:{line}")
            elif surely:
                unnamed.append(f"{where}:{line}")
    return events, unnamed


def source_files() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
            for folder in SOURCES for path in sorted((ROOT / folder).rglob("*.py"))}


def documented_events(markdown: str) -> dict[str, int]:
    """Event name -> line in docs/logging.md, from the first cell of the tables of its Events section."""
    names: dict[str, int] = {}
    in_events = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if line.startswith("## "):
            in_events = line.strip() == "## Events"
            continue
        if not in_events or not line.startswith("|"):
            continue
        first_cell = line.strip("|").split("|", 1)[0]
        for name in re.findall(r"`([^`]+)`", first_cell):
            names.setdefault(name, number)
    return names


def test_the_scanner_finds_every_way_of_logging_an_event() -> None:
    code = '''
log = structlog.get_logger("x")
class A:
    def f(self, level, method, name):
        log.info("plain.event", a=1)
        self.log.warning("bound.event")
        self._logger.error("private.event")
        structlog.get_logger().bind(pod="p").debug("chained.event")
        getattr(self.log, method)("dynamic.level", message="m")
        log.log(level, "explicit.level")
        log.exception("with.traceback")
        (log.info if name else log.debug)(
            "conditional.level", name=name)
        logging.getLogger("pykka").info("%s started", name)
        print("not.an.event")
        log.info(name)
'''
    events, unnamed = logged_events({"example.py": code})
    assert set(events) == {"plain.event", "bound.event", "private.event", "chained.event", "dynamic.level",
                           "explicit.level", "with.traceback", "conditional.level"}
    assert unnamed == [f"example.py:{code.splitlines().index('        log.info(name)') + 1}"]


def test_the_docs_list_every_event_the_code_logs_and_no_other() -> None:
    events, unnamed = logged_events(source_files())
    assert len(events) > 40, "the scanner found too few events: has the logging style changed?"
    assert not unnamed, ("log calls whose event is not a literal name (docs/logging.md cannot list them): "
                         + ", ".join(unnamed))
    documented = documented_events(DOC.read_text(encoding="utf-8"))
    undocumented = {name: where for name, where in events.items() if name not in documented}
    assert not undocumented, "events logged but not in docs/logging.md: " + "; ".join(
        f"{name} ({', '.join(where[:2])})" for name, where in sorted(undocumented.items()))
    stale = {name: line for name, line in documented.items() if name not in events}
    assert not stale, "events in docs/logging.md that no code logs: " + ", ".join(
        f"{name} (line {line})" for name, line in sorted(stale.items()))
    malformed = [name for name in documented if not EVENT.fullmatch(name)]
    assert not malformed, f"not event names, in the Events tables of docs/logging.md: {malformed}"


def test_no_log_call_passes_event_as_a_field() -> None:
    # structlog takes the event name as the `event` argument: a field of that name is a
    # TypeError when the line is written, or even when it is filtered out.
    clashing = []
    for where, text in source_files().items():
        for node in ast.walk(ast.parse(text, filename=where)):
            if (isinstance(node, ast.Call) and _logging_method(node.func) is not None
                    and any(k.arg == "event" for k in node.keywords)):
                clashing.append(f"{where}:{node.lineno}")
    assert clashing == []
