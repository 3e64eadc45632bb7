"""mypy over the package, each module once, under its import name: `python .ci/typecheck.py`.

The package's parts are the checkout's top-level folders (`actors/` is
`wasm_scheduler.actors`, and so on: `package-dir` in pyproject.toml). mypy cannot
be told that mapping, nor does it follow the import hook of an editable install, so
`mypy -p wasm_scheduler` from the checkout finds `wasm_scheduler/` alone. This runs
mypy with every module of every package that pyproject.toml lists, named as setuptools
installs it and read from its one file (errors name `actors/abi.py`). The options are
mypy's own, from pyproject.toml; extra options (`--no-incremental`, a report) pass
through, and targets are refused: the package is the target.
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Each package of the distribution -> its folder, as setuptools maps it."""
    setuptools = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped: dict[str, str] = setuptools.get("package-dir", {})
    folders: dict[str, Path] = {}
    for package in setuptools["packages"]:
        parent = max((name for name in mapped if package == name or package.startswith(f"{name}.")),
                     key=len, default=None)
        if parent is None:
            folders[package] = root / mapped.get("", ".") / package.replace(".", "/")
        else:
            rest = package[len(parent) + 1:].replace(".", "/")
            folders[package] = root / mapped[parent] / rest
    return folders


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> its file, for every module of every package."""
    found: dict[str, Path] = {}
    for package, folder in package_dirs(root).items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def main(argv: list[str]) -> int:
    from mypy import build, util
    from mypy.errors import CompileError
    from mypy.fscache import FileSystemCache
    from mypy.main import process_options
    from mypy.modulefinder import BuildSource

    fscache = FileSystemCache()
    targets, options = process_options(argv, require_targets=False, fscache=fscache)
    if targets:
        sys.stderr.write("usage: python .ci/typecheck.py [MYPY OPTION ...]: the package is the target\n")
        return 2
    sources = [BuildSource(str(path.relative_to(ROOT)), name) for name, path in modules().items()]
    try:
        messages = build.build(sources, options, fscache=fscache, stdout=sys.stdout, stderr=sys.stderr).errors
        blockers = False
    except CompileError as error:
        messages, blockers = error.messages, True
    formatter = util.FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    for message in messages:
        sys.stdout.write((formatter.colorize(message) if options.color_output else message) + "\n")
    n_errors, n_notes, n_files = util.count_stats(messages)
    if n_errors:
        sys.stdout.write(formatter.format_error(n_errors, n_files, len(sources), blockers=blockers,
                                                use_color=options.color_output) + "\n")
        return 2 if blockers else 1
    sys.stdout.write(formatter.format_success(len(sources), options.color_output) + "\n")
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)  # mypy reads pyproject.toml, and names files, from here
    sys.exit(main(sys.argv[1:]))
