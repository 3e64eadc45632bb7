"""The distributions, and one path per module.

The package's parts are the checkout's top-level folders, which `package-dir` in
pyproject.toml maps beneath `wasm_scheduler` (`actors/` is `wasm_scheduler.actors`):
no symbolic link is committed, every package is listed, and the type check sees each
module once under its import name. The wheel holds one import package `wasm_scheduler`
with its data, and a lazily imported public API; the sdist carries the tests (guests,
data, end-to-end sources), the documents and CI. Both are built from a snapshot of the
checkout with the build backend of the running environment, without build isolation:
no network is needed.
"""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("actors", "adapters", "registry", "examples")
EMBEDDED_DEFAULT = ("scheduler-config.yaml", "cluster.yaml", "nodenumber/nodenumber.wasm")
SNAPSHOT_SKIPS = shutil.ignore_patterns(
    ".git", ".*_cache", ".hypothesis", ".benchmarks", "*.egg-info", "build", "dist", "tests", "__pycache__", "*.pyc",
)
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
#: What the sdist carries (MANIFEST.in): the package's folders, and these.
SDIST_FOLDERS = ("wasm_scheduler", *PARTS, "tests", "docs", ".ci")
SDIST_FILES = ("README.md", "CHANGELOG.md", "LICENSE", "MANIFEST.in", "pyproject.toml")
CACHES = shutil.ignore_patterns(".*_cache", ".hypothesis", ".benchmarks", ".e2e-artifacts", "__pycache__", "*.pyc")


# --- one path per module ----------------------------------------------------------------------------------------


def _tree(top: Path) -> list[Path]:
    """Every file and folder under `top`, links not followed, caches left out."""
    found: list[Path] = []
    for here, dirs, files in os.walk(top):
        dirs[:] = sorted(set(dirs) - set(CACHES(here, dirs)))
        found.extend(Path(here) / name for name in [*dirs, *sorted(set(files) - set(CACHES(here, files)))])
    return found


def test_no_symbolic_link_is_in_the_tree() -> None:
    """A link breaks in a clone without links (core.symlinks=false) and is left out of an sdist."""
    links = [path for folder in SDIST_FOLDERS for path in _tree(ROOT / folder) if path.is_symlink()]
    links += [ROOT / name for name in (*SDIST_FOLDERS, *SDIST_FILES) if (ROOT / name).is_symlink()]
    assert links == []
    # What a clone without links made of the links that once were here: 9-byte text files.
    assert [part for part in PARTS if os.path.lexists(ROOT / "wasm_scheduler" / part)] == []


def test_no_symbolic_link_is_committed() -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout (an sdist, say): test_no_symbolic_link_is_in_the_tree walks it")
    done = subprocess.run(["git", "-c", f"safe.directory={ROOT}", "ls-files", "-s"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [line.split("\t", 1)[1] for line in done.stdout.splitlines() if line.startswith("120000 ")] == []


def test_every_package_is_listed_and_mapped_to_its_folder() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"wasm_scheduler.{part}": part for part in PARTS}
    found = {"wasm_scheduler"} | {
        ".".join(("wasm_scheduler", *init.parent.relative_to(ROOT).parts))
        for part in PARTS for init in (ROOT / part).rglob("__init__.py")
    }
    assert sorted(setuptools["packages"]) == sorted(found), "list every package in pyproject.toml"
    assert sorted((ROOT / "wasm_scheduler").rglob("__init__.py")) == [ROOT / "wasm_scheduler" / "__init__.py"]


def _typecheck() -> ModuleType:
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / ".ci" / "typecheck.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_type_check_sees_every_module_once_under_its_import_name() -> None:
    modules: dict[str, Path] = _typecheck().modules(ROOT)
    files = sorted(path for top in ("wasm_scheduler", *PARTS) for path in (ROOT / top).rglob("*.py"))
    assert sorted(modules.values()) == files
    for name, path in modules.items():
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        assert name == ".".join(parts if parts[0] == "wasm_scheduler" else ["wasm_scheduler", *parts]), path
    assert modules["wasm_scheduler.actors.kube.wire_cache"] == ROOT / "actors" / "kube" / "wire_cache.py"
    # A part mypy cannot find must be an error, not a silent Any.
    assert {"module": ["wasm_scheduler", "wasm_scheduler.*"], "ignore_missing_imports": False} in (
        PYPROJECT["tool"]["mypy"]["overrides"])


# --- the sdist ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tarfile.TarInfo]]:
    """The snapshot the sdist is built from, and the sdist's members (without their top folder)."""
    work = tmp_path_factory.mktemp("sdist")
    source = work / "src"
    for folder in SDIST_FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, symlinks=True, ignore=CACHES)
    for name in SDIST_FILES:
        shutil.copy2(ROOT / name, source / name)
    done = subprocess.run([sys.executable, "-c", "import setuptools.build_meta as b; print(b.build_sdist('out'))"],
                          cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    with tarfile.open(source / "out" / done.stdout.strip().splitlines()[-1]) as archive:
        members = archive.getmembers()
    top = f"wasm_scheduler-{PYPROJECT['project']['version']}"
    assert all(member.name.split("/", 1)[0] == top for member in members), [member.name for member in members]
    return source, {member.name.removeprefix(f"{top}/"): member for member in members if member.name != top}


def test_the_sdist_carries_the_tests_the_docs_and_ci(sdist: tuple[Path, dict[str, tarfile.TarInfo]]) -> None:
    source, members = sdist
    files = {path.relative_to(source).as_posix() for folder in SDIST_FOLDERS for path in _tree(source / folder)
             if path.is_file()} | set(SDIST_FILES)
    missing = files - set(members)
    assert not missing, f"missing from the sdist (MANIFEST.in): {sorted(missing)}"
    for name in ("tests/e2e/go.mod", "tests/e2e/cmd/kube-scheduler/main.go", "tests/guests/probe.wat",
                 "tests/data/pod-real.yaml", "docs/packaging.md", "examples/kubernetes/Dockerfile", ".ci/run"):
        assert name in members, name
    assert members["LICENSE"].size == (ROOT / "LICENSE").stat().st_size
    assert members["tests/e2e/build.sh"].mode & 0o111, "build.sh lost its executable bit"
    assert not [name for name in members if "__pycache__" in name or name.endswith(".pyc")]


# --- the wheel --------------------------------------------------------------------------------------------------


class Wheel:
    """A built wheel and the checkout snapshot it was built from."""

    def __init__(self, path: Path, source: Path) -> None:
        self.path = path
        self.source = source
        with zipfile.ZipFile(path) as archive:
            self.names = archive.namelist()
            self.files = {name: archive.read(name) for name in self.names}
        dist_infos = {name.split("/", 1)[0] for name in self.names if name.split("/", 1)[0].endswith(".dist-info")}
        assert len(dist_infos) == 1, dist_infos
        self.dist_info = dist_infos.pop()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    setuptools = tuple(int(part) for part in version("setuptools").split(".")[:2])
    assert setuptools >= (70, 1), f"setuptools {version('setuptools')} cannot build a wheel: pip install -e '.[test]'"
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=SNAPSHOT_SKIPS)
    out = work / "dist"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300, cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    built = sorted(out.glob("wasm_scheduler-*.whl"))
    assert len(built) == 1, built
    return Wheel(built[0], source)


def test_the_embedded_default_is_package_data(wheel: Wheel) -> None:
    for name in EMBEDDED_DEFAULT:
        packed = wheel.files.get(f"wasm_scheduler/examples/{name}")
        assert packed is not None, f"{name} is missing from the wheel"
        assert packed == (wheel.source / "examples" / name).read_bytes(), name


def test_the_license_is_in_the_wheel(wheel: Wheel) -> None:
    licenses = [name for name in wheel.names
                if name.startswith(f"{wheel.dist_info}/") and name.rsplit("/", 1)[-1] == "LICENSE"]
    assert len(licenses) == 1, wheel.names
    assert wheel.files[licenses[0]] == (wheel.source / "LICENSE").read_bytes()


def test_the_package_is_marked_typed(wheel: Wheel) -> None:
    assert "wasm_scheduler/py.typed" in wheel.names


def test_everything_lies_under_the_one_import_package(wheel: Wheel) -> None:
    tops = {name.split("/", 1)[0] for name in wheel.names}
    assert tops == {"wasm_scheduler", wheel.dist_info}
    assert wheel.dist_info.startswith("wasm_scheduler-")
    top_level = wheel.files.get(f"{wheel.dist_info}/top_level.txt")
    if top_level is not None:
        assert top_level.decode().split() == ["wasm_scheduler"]


def test_every_module_of_every_part_is_in_the_wheel(wheel: Wheel) -> None:
    for part in PARTS:
        expected = {
            f"wasm_scheduler/{part}/{path.relative_to(wheel.source / part).as_posix()}"
            for path in (wheel.source / part).rglob("*.py")
        }
        assert f"wasm_scheduler/{part}/__init__.py" in expected
        missing = expected - set(wheel.names)
        assert not missing, f"modules of {part}/ missing from the wheel: {sorted(missing)}"
    assert "wasm_scheduler/__init__.py" in wheel.names


def test_the_console_script_is_the_cli(wheel: Wheel) -> None:
    entry_points = configparser.ConfigParser()
    entry_points.read_string(wheel.files[f"{wheel.dist_info}/entry_points.txt"].decode())
    assert dict(entry_points["console_scripts"]) == {"wasm-scheduler": "wasm_scheduler.adapters.cli:main"}


def _run_python(code: str) -> dict[str, object]:
    """Run `code` in a fresh interpreter outside the checkout; it prints one JSON object."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_importing_the_package_imports_nothing_heavy() -> None:
    result = _run_python(
        "import json, sys\n"
        "import wasm_scheduler\n"
        "print(json.dumps({'all': sorted(wasm_scheduler.__all__), 'loaded': sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('wasmtime', 'pykka', 'yaml', 'rich', 'google', 'kubernetes')\n"
        "    or m.startswith('wasm_scheduler.'))}))\n"
    )
    assert result["all"] == ["Code", "GuestCompiler", "PluginConfig", "Status", "WasmPlugin", "load_inputs", "simulate"]
    assert result["loaded"] == []


def test_every_public_name_resolves_on_first_use() -> None:
    result = _run_python(
        "import json, sys\n"
        "import wasm_scheduler\n"
        "from wasm_scheduler import framework_api\n"
        "from wasm_scheduler.adapters.framework import simulation\n"
        "resolved = {name: getattr(wasm_scheduler, name).__module__ for name in wasm_scheduler.__all__}\n"
        "try:\n"
        "    wasm_scheduler.NoSuchName\n"
        "    missing = 'resolved'\n"
        "except AttributeError as exc:\n"
        "    missing = str(exc)\n"
        "print(json.dumps({'resolved': resolved, 'wasmtime': 'wasmtime' in sys.modules, 'missing': missing,\n"
        "    'same': wasm_scheduler.Status is framework_api.Status\n"
        "            and wasm_scheduler.simulate is simulation.simulate}))\n"
    )
    assert result["resolved"] == {
        "Code": "wasm_scheduler.framework_api",
        "Status": "wasm_scheduler.framework_api",
        "GuestCompiler": "wasm_scheduler.registry.compiler",
        "PluginConfig": "wasm_scheduler.registry.config",
        "WasmPlugin": "wasm_scheduler.adapters.wasm_plugin",
        "load_inputs": "wasm_scheduler.adapters.framework.simulation",
        "simulate": "wasm_scheduler.adapters.framework.simulation",
    }
    assert result["same"] is True
    assert result["wasmtime"] is True
    assert result["missing"] == "module 'wasm_scheduler' has no attribute 'NoSuchName'"
