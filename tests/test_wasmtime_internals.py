"""wasmtime-py's private API: used in one module, checked once, never needed for correctness.

Every use of a name wasmtime-py does not publish lives in `actors/wasmtime_internals.py`
(the sources are read with `ast` to hold that); its one check, `internals()`, passes
with the installed wasmtime; and when it reports a piece missing, guests run through
wasmtime-py's public API with the same results as on the fast path.
"""

from __future__ import annotations

import ast
import functools
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import wasmtime

from tests.conftest import EXAMPLES, GUESTS
from tests.probe import Script
from wasm_scheduler.actors import fast_call, wasmtime_internals
from wasm_scheduler.actors.fast_call import ExportCaller
from wasm_scheduler.actors.guest_instance import GuestInstance
from wasm_scheduler.actors.wasmtime_internals import Internals, internals, probe
from wasm_scheduler.adapters.wasm_plugin import WasmPlugin
from wasm_scheduler.framework_api import Code, Status
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig
from wasm_scheduler.testing import node, pod, run_cycle
from wasm_scheduler.vocabulary import EmptyHandle

ROOT = Path(__file__).resolve().parents[1]
OWNER = ROOT / "actors" / "wasmtime_internals.py"
#: The package's folders (pyproject.toml maps the first four beneath wasm_scheduler).
FOLDERS = ("actors", "adapters", "registry", "examples", "wasm_scheduler")
NODENUMBER = EXAMPLES / "nodenumber" / "nodenumber.wasm"
POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}}


# --- the sources: no private name of wasmtime-py outside its module -------------------

def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package_sources() -> list[Path]:
    """Every .py file of the package, each once."""
    found: list[Path] = []
    for folder in FOLDERS:
        for here, dirs, files in os.walk(ROOT / folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            found.extend(Path(here) / name for name in sorted(files) if name.endswith(".py"))
    return sorted(found)


def _private_names_defined(trees: Iterable[ast.AST]) -> set[str]:
    """The private names the sources define: functions, classes, attributes assigned."""
    names: set[str] = set()
    for tree in trees:
        for item in ast.walk(tree):
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(item.name):
                names.add(item.name)
            elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store) and _private(item.attr):
                names.add(item.attr)
            elif isinstance(item, ast.Constant) and isinstance(item.value, str) and _private(item.value):
                names.add(item.value)  # __slots__ entries
            elif isinstance(item, (ast.AnnAssign, ast.Assign)):
                for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                    if isinstance(target, ast.Name) and _private(target.id):
                        names.add(target.id)  # class attributes, dataclass fields
    return names


def _dotted(expr: ast.expr) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr}" if base else None
    return None


def _chain(expr: ast.expr) -> Iterator[ast.expr]:
    """`expr` and what it is taken from: `a.b(c)[0].d`, `a.b(c)[0]`, `a.b(c)`, `a.b`, `a`."""
    while True:
        yield expr
        if isinstance(expr, ast.Call):
            expr = expr.func
        elif isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        else:
            return


class _Module:
    """One module's names bound from wasmtime and the values it types as wasmtime objects."""

    def __init__(self, tree: ast.Module, typed_attributes: set[str]) -> None:
        self.tree = tree
        #: Attribute names the package assigns wasmtime objects to (`self._store = wasmtime.Store(e)`
        #: makes `_store` one), shared by every module.
        self.typed_attributes = typed_attributes
        self.bound: set[str] = set()  # names bound from wasmtime imports
        self.typed: set[str] = set()  # dotted names this module types as wasmtime objects
        for item in ast.walk(tree):
            if isinstance(item, ast.Import):
                for alias in item.names:
                    if alias.name.split(".")[0] == "wasmtime":
                        self.bound.add(alias.asname or "wasmtime")
            elif (isinstance(item, ast.ImportFrom) and item.level == 0
                  and (item.module or "").split(".")[0] == "wasmtime"):
                self.bound.update(alias.asname or alias.name for alias in item.names)

    def mentions_wasmtime(self, expr: ast.expr | None) -> bool:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):  # a quoted annotation
            try:
                expr = ast.parse(expr.value, mode="eval").body
            except SyntaxError:
                return False
        return expr is not None and any(isinstance(n, ast.Name) and n.id in self.bound for n in ast.walk(expr))

    def is_wasmtime(self, expr: ast.expr) -> bool:
        """Whether `expr` is (taken from) a wasmtime object or module, as far as the sources say."""
        for part in _chain(expr):
            if isinstance(part, ast.Name) and part.id in self.bound:
                return True
            if isinstance(part, ast.Attribute) and part.attr in self.typed_attributes:
                return True
            if not isinstance(part, ast.Call) and _dotted(part) in self.typed:
                return True
        return False

    def _type(self, target: ast.expr) -> None:
        name = _dotted(target)
        if name:
            self.typed.add(name)
        if isinstance(target, ast.Attribute):
            self.typed_attributes.add(target.attr)

    def learn(self) -> None:
        """Type what annotations, assignments and isinstance checks make wasmtime objects."""
        for item in ast.walk(self.tree):
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = item.args
                for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
                    if arg is not None and self.mentions_wasmtime(arg.annotation):
                        self.typed.add(arg.arg)
            elif isinstance(item, ast.AnnAssign):
                if self.mentions_wasmtime(item.annotation) or (item.value and self.is_wasmtime(item.value)):
                    self._type(item.target)
            elif isinstance(item, ast.Assign) and self.is_wasmtime(item.value):
                for target in item.targets:
                    self._type(target)
            elif (isinstance(item, ast.Call) and isinstance(item.func, ast.Name) and item.func.id == "isinstance"
                  and len(item.args) == 2 and self.mentions_wasmtime(item.args[1])):
                self._type(item.args[0])


class _Uses(ast.NodeVisitor):
    """The private wasmtime-py names one module uses, as "line: code" strings.

    A use is: importing a private module or name of wasmtime (`from wasmtime import _ffi`,
    `import wasmtime._bindings`); a private attribute (or `getattr`/`hasattr` of one) on a
    wasmtime object or module, as the package's sources type them (a name bound from
    wasmtime, an annotation, a constructor call, an `isinstance` check, an attribute the
    package assigns such a value to: `store: wasmtime.Store` ... `store._context()`,
    `inst._store._context()`); or one of wasmtime-py's own private member names that the
    package never defines itself, on anything (`trap._consume()`). Our own private names
    (`self._x`, `inst._funcs`) are never uses.
    """

    def __init__(self, module: _Module, theirs_only: frozenset[str]) -> None:
        self.module = module
        self.theirs_only = theirs_only
        self.found: list[str] = []
        self.visit(module.tree)

    def _report(self, item: ast.AST) -> None:
        self.found.append(f"{getattr(item, 'lineno', '?')}: {ast.unparse(item)}")

    def visit_Import(self, item: ast.Import) -> None:
        if any(alias.name.split(".")[0] == "wasmtime" and any(map(_private, alias.name.split(".")))
               for alias in item.names):
            self._report(item)

    def visit_ImportFrom(self, item: ast.ImportFrom) -> None:
        parts = (item.module or "").split(".")
        if item.level == 0 and parts[0] == "wasmtime" and (
            any(map(_private, parts)) or any(_private(alias.name) for alias in item.names)
        ):
            self._report(item)

    def _private_use(self, receiver: ast.expr, name: str) -> bool:
        return _private(name) and (name in self.theirs_only or self.module.is_wasmtime(receiver))

    def visit_Attribute(self, item: ast.Attribute) -> None:
        if self._private_use(item.value, item.attr):
            self._report(item)
        self.generic_visit(item)

    def visit_Call(self, item: ast.Call) -> None:
        if (isinstance(item.func, ast.Name) and item.func.id in ("getattr", "hasattr", "setattr", "delattr")
                and len(item.args) >= 2 and isinstance(item.args[1], ast.Constant)
                and isinstance(item.args[1].value, str) and self._private_use(item.args[0], item.args[1].value)):
            self._report(item)
        self.generic_visit(item)


@dataclass(frozen=True)
class _Package:
    """The package's sources, read once for every test below."""

    sources: list[Path]
    trees: dict[Path, ast.Module]
    #: wasmtime-py's private member names (of the installed version) that the package
    #: never defines itself: such a name is theirs, whatever it is taken from.
    theirs_only: frozenset[str]
    typed_attributes: frozenset[str]
    uses: dict[Path, list[str]]


def _scan(trees: list[ast.Module], typed_attributes: set[str], theirs_only: frozenset[str]) -> list[list[str]]:
    """The private wasmtime-py uses of each module, typed together (a module's attribute
    may be typed by another's assignment); `typed_attributes` grows with what they type."""
    modules = [_Module(tree, typed_attributes) for tree in trees]
    while True:  # a value typed through another typed value, maybe in another module
        before = (len(typed_attributes), sum(len(module.typed) for module in modules))
        for module in modules:
            module.learn()
        if (len(typed_attributes), sum(len(module.typed) for module in modules)) == before:
            break
    return [_Uses(module, theirs_only).found for module in modules]


@functools.cache
def _package() -> _Package:
    sources = _package_sources()
    trees = {path: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in sources}
    wasmtime_trees = [ast.parse(path.read_text(encoding="utf-8"))
                      for path in Path(wasmtime.__file__).parent.rglob("*.py")]
    theirs_only = frozenset(_private_names_defined(wasmtime_trees) - _private_names_defined(trees.values()))
    typed_attributes: set[str] = set()
    uses = dict(zip(trees, _scan(list(trees.values()), typed_attributes, theirs_only), strict=True))
    return _Package(sources, trees, theirs_only, frozenset(typed_attributes), uses)


def private_wasmtime_uses(source: str) -> list[str]:
    """The uses in `source`, read as one more module of the package."""
    package = _package()
    return _scan([ast.parse(source)], set(package.typed_attributes), package.theirs_only)[0]


def test_the_walk_finds_the_package_once() -> None:
    sources = _package().sources
    relative = {path.relative_to(ROOT).as_posix() for path in sources}
    assert {"actors/fast_call.py", "actors/guest_memory.py", "adapters/benchmarks/micro.py",
            "wasm_scheduler/framework_api.py", "actors/wasmtime_internals.py"} <= relative
    assert not any(path.startswith(("wasm_scheduler/actors/", "wasm_scheduler/adapters/")) for path in relative)
    assert len(relative) == len(sources)


def test_only_wasmtime_internals_touches_wasmtime_private_names() -> None:
    found = _package().uses
    offenders = {path.relative_to(ROOT).as_posix(): uses for path, uses in found.items() if uses and path != OWNER}
    assert offenders == {}, "use actors/wasmtime_internals.py's accessors instead"
    assert found[OWNER], "the check finds nothing in the module that owns them: is it broken?"


@pytest.mark.parametrize("source", [
    "from wasmtime import _ffi",
    "from wasmtime import _func as f",
    "from wasmtime._trap import Trap",
    "import wasmtime._bindings",
    "import wasmtime\nwasmtime._ffi.dll",
    "import wasmtime\nraise wasmtime.WasmtimeError._from_ptr(p)",
    "import wasmtime as wt\nwt.Store(e)._context()",
    "from wasmtime import Trap\nTrap._from_ptr(p)",
    "import wasmtime\ndef f(store: wasmtime.Store):\n    return store._context()",
    "import wasmtime\ndef f(memory: 'wasmtime.Memory | None'):\n    return memory._memory",
    "import wasmtime\ndef f(x):\n    assert isinstance(x, wasmtime.Memory)\n    return x._something_new",
    "import wasmtime\nclass A:\n    def __init__(self, e):\n        self._engine = wasmtime.Engine()\n"
    "    def f(self):\n        return self._engine._new_private",
    # typed by the package's own modules: GuestInstance._store, ExportCaller.func
    "def f(inst):\n    store = inst._store\n    return ctypes.cast(store._context(), vp).value",
    "def f(inst):\n    return ctypes.addressof(inst._funcs['filter'].func._func)",
    "def f(trap):\n    return trap._consume()",  # a name only wasmtime-py defines
    "import wasmtime\nhasattr(wasmtime.Store, '_context')",
    "import wasmtime\ndef f(memory: wasmtime.Memory):\n    return getattr(memory, '_memory', None)",
])
def test_the_check_finds_private_uses(source: str) -> None:
    assert private_wasmtime_uses(source)


@pytest.mark.parametrize("source", [
    "import wasmtime\nclass A:\n    def f(self, store: wasmtime.Store):\n"
    "        self._memory = self._context = self._func = None\n        return self._store, store.ptr()",
    "import wasmtime\nwasmtime.__version__, wasmtime.Store.__init__",
    "def f(inst, caller):\n    return inst._funcs, inst._store, caller._call._args, caller._deadline._arm",
    "def f(inst):\n    return inst.memory._fast, inst._loop._memory, inst._funcs['filter']._call",
    "from wasm_scheduler.actors.wasmtime_internals import internals\nfound = internals()\n"
    "found.context_address(store)",
    "import ctypes\nctypes._memmove_addr",  # CPython's, not wasmtime-py's
])
def test_the_check_leaves_our_own_private_names_alone(source: str) -> None:
    assert private_wasmtime_uses(source) == []


# --- the one check ----------------------------------------------------------------------

def test_the_check_passes_with_the_installed_wasmtime() -> None:
    found = probe()  # raises what is missing or wrong
    assert isinstance(found, Internals)
    assert isinstance(internals(), Internals)
    assert fast_call.FAST_PATH_AVAILABLE


def test_importing_the_package_runs_no_check() -> None:
    """The check makes an engine; made at import, before a later fatal-signal handler (pytest's
    faulthandler), wasm traps would crash the process."""
    code = (
        "import wasm_scheduler.actors.guest_instance, wasm_scheduler.actors.node_loop\n"
        "import wasm_scheduler.adapters.benchmarks.micro, wasm_scheduler.adapters.cli\n"
        "from wasm_scheduler.actors.wasmtime_internals import internals\n"
        "assert internals.cache_info().currsize == 0, 'checked at import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/", timeout=60)


@pytest.fixture
def internals_missing(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """For one test, the check reports a private name of wasmtime-py missing."""

    def missing() -> Internals:
        raise AttributeError("module 'wasmtime' has no attribute '_ffi' (the test says so)")

    with monkeypatch.context() as patch:
        patch.setattr(wasmtime_internals, "probe", missing)
        internals.cache_clear()
        assert internals() is None and not fast_call.FAST_PATH_AVAILABLE
        yield
        internals.cache_clear()
    internals.cache_clear()  # the next call checks the real wasmtime again


# --- without the private API: the public one, the same results --------------------------

def _nodenumber_answers(compiler: GuestCompiler) -> tuple[GuestInstance, list[object]]:
    config = PluginConfig("NodeNumber", str(NODENUMBER))
    inst = GuestInstance(compiler.load(config), config, "nodenumber-1")
    handle = EmptyHandle()
    names = [f"node-{i}" for i in range(300)]  # enough for the fast path's batch in wasm
    answers: list[object] = []
    for name in ("web-3", "web-7", "web"):
        p = {"metadata": {"name": name, "namespace": "default", "uid": name}}
        answers.append(inst.prefilter(p, handle))
        answers.append(inst.prescore(p, names, handle))
        answers.append(inst.score(p, names, handle))
        answers.append(inst.score(p, names[:3], handle))
    return inst, answers


def test_nodenumber_gives_the_same_answers_without_the_private_api(compiler: GuestCompiler,
                                                                    request: pytest.FixtureRequest) -> None:
    fast, expected = _nodenumber_answers(compiler)
    assert type(fast._funcs["score"]) is not ExportCaller and fast._loop is not None  # the fast path ran
    request.getfixturevalue("internals_missing")
    public, answers = _nodenumber_answers(compiler)
    # ... and this one did not: every piece took wasmtime-py's public API.
    assert type(public._funcs["score"]) is ExportCaller
    assert public._deadline is None and public._loop is None and not public._definer.fast
    assert not public.memory._fast
    assert answers == expected
    web_3 = answers[2]
    assert {s.name for s in web_3.scores if s.score == 100} == {f"node-{i}" for i in range(3, 300, 10)}


def _cycles(compiler: GuestCompiler) -> list[tuple[object, ...]]:
    config = PluginConfig.from_args("NodeNumber", {"guestURL": str(NODENUMBER)})
    with WasmPlugin.load(config, compiler) as plugin:
        nodes = [node(f"node-{i}") for i in range(12)]
        outcomes = []
        for name in ("web-3", "web-7", "api-0", "web"):
            result = run_cycle(plugin, pod(name), nodes)
            outcomes.append((result.node, dict(result.scores), result.bound, result.failures))
        return outcomes


def test_a_plugin_schedules_the_same_without_the_private_api(compiler: GuestCompiler,
                                                             request: pytest.FixtureRequest) -> None:
    expected = _cycles(compiler)
    assert [outcome[0] for outcome in expected[:3]] == ["node-3", "node-7", "node-0"]
    request.getfixturevalue("internals_missing")
    assert _cycles(compiler) == expected


def _failures(compiler: GuestCompiler) -> list[Status]:
    """A trap, a host function's fault and an exit, each in a fresh instance."""
    guest = compiler.compile("probe", "probe.wat", (GUESTS / "probe.wat").read_bytes())
    handle = EmptyHandle()
    statuses = []
    for script, expected in (
        (Script().op("trap"), "unreachable"),
        (Script().op("currentPod", 0x7FFF_FFF0, 1 << 20), "outside guest memory"),
        (Script().op("proc_exit", 3), "exited with code 3"),
    ):
        inst = GuestInstance(guest, PluginConfig("probe", "probe.wat"), "probe-1")
        script.load(inst)
        status = inst.reserve(POD, "n", handle)
        assert status.code == Code.ERROR and expected in status.reason
        statuses.append(status)
    return statuses


def test_guest_faults_come_out_the_same_without_the_private_api(compiler: GuestCompiler,
                                                               request: pytest.FixtureRequest) -> None:
    expected = _failures(compiler)
    request.getfixturevalue("internals_missing")
    assert _failures(compiler) == expected
