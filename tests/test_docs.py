"""The project's documents speak to a user and point at things that exist.

This module owns four checks over README.md, CHANGELOG.md and docs/*.md:

- no document mentions an issue number or a "round" of the project's history; the
  word "round" is allowed only in the bench's sense (`--rounds`, "rounds of every
  variant", "round by round", "each round", the JSON key `rounds`: the small
  allow-list below), or in "round trip" and "round-robin";
- every ``python -m MODULE`` and ``from X import Y`` in the code of docs/performance.md,
  README.md and CHANGELOG.md names an importable module (and Y exists in it);
- every relative link, and every backticked repository path (`adapters/cli.py`,
  `docs/extender.md`, `CHANGELOG.md`), names a file or folder of this repository;
- every backticked dotted name under `wasm_scheduler.` resolves, and none uses the
  module paths from before the one package (`adapters.cli` instead of
  `wasm_scheduler.adapters.cli`).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
#: The documents whose code must run with the current code.
RUNNABLE_DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "docs" / "performance.md"]
#: The top-level folders that were packages before `wasm_scheduler` held them.
OLD_PACKAGES = ("actors", "adapters", "registry", "examples")

#: "issue 7", "Issue #12", "issues 3 and 4", or a bare "#7" (GitHub's reference).
ISSUE = re.compile(r"\bissues?\s*#?\s*\d+|(?<![\w&#/])#\d+\b", re.IGNORECASE)
#: The word "round" or "rounds", except in "round trip" and "round-robin".
ROUND = re.compile(r"\brounds?\b(?![ -](?:trips?|robin)\b)", re.IGNORECASE)
#: The bench's own sense of the word; everything else is the project's history.
ROUND_ALLOWED = (
    re.compile(r"--rounds\b"),
    re.compile(r"`rounds`"),  # the key of bench's JSON document
    re.compile(r"\brounds of every variant\b", re.IGNORECASE),
    re.compile(r"\bround (?:by|to) round\b", re.IGNORECASE),
    re.compile(r"\b(?:each|every|best|same) round(?:'s)?\b", re.IGNORECASE),
)

FENCE = re.compile(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`([^`]+)`")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PYTHON_M = re.compile(r"\bpython3?(?:\.\d+)?\s+-m\s+([A-Za-z_][\w.]*)")
FROM_IMPORT = re.compile(r"\bfrom\s+([A-Za-z_][\w.]*)\s+import\s+([\w\s,]+?)\s*(?:;|$|\n|')", re.MULTILINE)
PATH = re.compile(r"(?:\.\./)*[\w.-]+(?:/[\w.-]+)*/?")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


def _words(text: str) -> str:
    """The text with every run of whitespace made one space (phrases may break lines)."""
    return re.sub(r"\s+", " ", text)


def _code(text: str) -> Iterator[str]:
    """Each fenced block and each inline code span of a Markdown text."""
    yield from (m.group(0) for m in FENCE.finditer(text))
    yield from (m.group(1) for m in INLINE_CODE.finditer(FENCE.sub("", text)))


def _repository_entries() -> set[str]:
    return {p.name for p in ROOT.iterdir() if not p.name.startswith(".") and not p.name.endswith(".egg-info")}


# --- the checks, as functions of a text, so the tests can feed them bad text too ---------------------------------


def history_wording(text: str) -> list[str]:
    """Every issue reference and every "round" that is not the bench's, with its context."""
    words = _words(text)
    found = [m.group(0) for m in ISSUE.finditer(words)]
    allowed = [range(m.start(), m.end()) for pattern in ROUND_ALLOWED for m in pattern.finditer(words)]
    for m in ROUND.finditer(words):
        if not any(m.start() in span for span in allowed):
            found.append(words[max(0, m.start() - 30):m.end() + 30])
    return found


def _importable(module: str) -> bool:
    """Importable under its own name (the old top-level names may import from a checkout's root, never installed)."""
    return module.split(".", 1)[0] not in OLD_PACKAGES and _spec_exists(module)


def _spec_exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _has_name(module: ModuleType, name: str) -> bool:
    return hasattr(module, name) or _spec_exists(f"{module.__name__}.{name}")


def unimportable(text: str) -> list[str]:
    """Every `python -m MODULE` and `from X import Y` in the text's code that does not import."""
    problems: list[str] = []
    for code in _code(text):
        for m in PYTHON_M.finditer(code):
            if not _importable(m.group(1)):
                problems.append(f"python -m {m.group(1)}")
        for m in FROM_IMPORT.finditer(code):
            module_name = m.group(1)
            if not _importable(module_name):
                problems.append(f"from {module_name} import")
                continue
            module = importlib.import_module(module_name)
            for item in m.group(2).split(","):
                name = item.split(" as ")[0].strip()
                if name and not _has_name(module, name):
                    problems.append(f"from {module_name} import {name}")
    return problems


def missing_paths(text: str, doc_dir: Path) -> list[str]:
    """Relative links and backticked repository paths that name nothing in the repository."""
    entries = _repository_entries()
    problems: list[str] = []
    for m in LINK.finditer(FENCE.sub("", text)):
        target = m.group(1).split("#", 1)[0]
        if not target or "://" in target or target.startswith(("mailto:", "/")):
            continue
        resolved = (doc_dir / target).resolve()
        if not resolved.is_relative_to(ROOT) or not resolved.exists():
            problems.append(f"link {m.group(1)}")
    for span in INLINE_CODE.finditer(FENCE.sub("", text)):
        candidate = span.group(1).strip()
        if not PATH.fullmatch(candidate):
            continue
        if candidate.startswith("../"):
            problems.append(f"`{candidate}` (outside the repository)")
        elif "/" in candidate:
            if candidate.split("/", 1)[0] in entries and not (ROOT / candidate).exists():
                problems.append(f"`{candidate}`")
        elif candidate.endswith(".md") and not (ROOT / candidate).exists() and not (doc_dir / candidate).exists():
            problems.append(f"`{candidate}`")
    return problems


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        if _spec_exists(module_name):
            value: object = importlib.import_module(module_name)
            for attribute in parts[cut:]:
                if not hasattr(value, attribute):
                    return False
                value = getattr(value, attribute)
            return True
    return False


def stale_module_names(text: str) -> list[str]:
    """Backticked dotted names of the old top-level packages, and `wasm_scheduler.` names that do not resolve."""
    problems: list[str] = []
    for span in INLINE_CODE.finditer(FENCE.sub("", text)):
        candidate = span.group(1).strip()
        if not DOTTED.fullmatch(candidate):
            continue
        top = candidate.split(".", 1)[0]
        if top in OLD_PACKAGES and _spec_exists(f"wasm_scheduler.{candidate.split('.')[0]}"):
            problems.append(f"`{candidate}` (now `wasm_scheduler.{candidate}`)")
        elif top == "wasm_scheduler" and not _resolves(candidate):
            problems.append(f"`{candidate}`")
    return problems


# --- the documents ---------------------------------------------------------------------------------------------


def _rel(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def test_the_documents_exist() -> None:
    assert (ROOT / "CHANGELOG.md").is_file()
    assert len(DOCS) >= 5


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_no_issue_numbers_or_rounds_of_the_project_history(doc: Path) -> None:
    assert history_wording(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", RUNNABLE_DOCS, ids=_rel)
def test_every_module_in_the_code_imports(doc: Path) -> None:
    assert unimportable(doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_repository_path_and_relative_link_exists(doc: Path) -> None:
    assert missing_paths(doc.read_text(encoding="utf-8"), doc.parent) == []


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_module_names_are_the_packages_names(doc: Path) -> None:
    assert stale_module_names(doc.read_text(encoding="utf-8")) == []


def test_performance_page_runs_the_extender_benchmark_as_a_module() -> None:
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    modules = {m.group(1) for code in _code(text) for m in PYTHON_M.finditer(code)}
    assert "wasm_scheduler.adapters.benchmarks.extender_nodes" in modules
    assert "wasm_scheduler.adapters.cli" in modules


# --- the checks themselves find what they must ----------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "This was done for issue 7.",
    "See Issue #12 for the details.",
    "fixed in #31",
    "the third round of work",
    "After the seventh\nround, every target is met.",
    "This round made Filter faster.",
    "Rounds 1 to 3 of the optimisation.",
    "the fourth round's figures",
])
def test_history_wording_is_found(text: str) -> None:
    assert history_wording(text) != []


@pytest.mark.parametrize("text", [
    "`wasm-scheduler bench --rounds 3`, its JSON's `rounds` key",
    "alternating round by round (`--rounds` rounds of\nevery variant)",
    "its best round; each round's time against the same round's baseline, in every round",
    "a host function round trip, round-robin placement, two actor round trips",
    "differs from round to round; the issues of a guest; `&#39;`; step 2",
])
def test_the_benchs_sense_of_round_is_allowed(text: str) -> None:
    assert history_wording(text) == []


def test_unimportable_code_is_found() -> None:
    text = (
        "```sh\npython -m adapters.cli bench\n"
        "python -c 'from wasm_scheduler.registry.compiler import GuestCompiler, NoSuchThing'\n```\n"
        "```python\nfrom registry.compiler import GuestCompiler\n```\n"
    )
    assert unimportable(text) == [
        "python -m adapters.cli",
        "from wasm_scheduler.registry.compiler import NoSuchThing",
        "from registry.compiler import",
    ]
    good = "```sh\npython -m wasm_scheduler.adapters.cli\n```\n`from wasm_scheduler.adapters import benchmarks`"
    assert unimportable(good) == []


def test_missing_paths_are_found() -> None:
    text = (
        "See `adapters/extender/service.py`, `adapters/extender/nothing.py`, `docs/missing.md`, "
        "`../shared/ABI.md`, `NOTES.md`, [the page](docs/nowhere.md), [ok](docs/extender.md#call-order), "
        "`pkg/scheduler/extender.go`, `/healthz`, [site](https://example.com/x)."
    )
    assert missing_paths(text, ROOT) == [
        "link docs/nowhere.md",
        "`adapters/extender/nothing.py`",
        "`docs/missing.md`",
        "`../shared/ABI.md` (outside the repository)",
        "`NOTES.md`",
    ]


def test_stale_module_names_are_found() -> None:
    text = ("`adapters.extender.server.DEFAULT_MAX_BODY`, `wasm_scheduler.actors.wasi.NO_SUCH_LIMIT`, "
            "`wasm_scheduler.actors.wasi.MAX_IOVECS`, `net.core.somaxconn`, `Framework.observer`")
    assert stale_module_names(text) == [
        "`adapters.extender.server.DEFAULT_MAX_BODY` (now `wasm_scheduler.adapters.extender.server.DEFAULT_MAX_BODY`)",
        "`wasm_scheduler.actors.wasi.NO_SUCH_LIMIT`",
    ]
