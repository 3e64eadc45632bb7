"""The Kubernetes client is an optional extra (``wasm-scheduler[extender]``).

With the client hidden (``sys.modules['kubernetes'] = None``, as if it were not installed),
every way of asking for the API makes the extender stop at start with one line naming
what asked and how to install the client, and everything that needs no binder works.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.extender.binder import INSTALL_HINT, KubernetesBinder, NoBinder
from wasm_scheduler.adapters.extender.command import ExtenderOptions, RunningExtender, make_binder
from wasm_scheduler.adapters.framework.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

_KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c1, user: u1}
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u1
  user: {token: abc}
"""


@pytest.fixture
def no_cluster_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No in-cluster variables, no $KUBECONFIG, and an empty home: nothing asks for the API."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def without_kubernetes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import kubernetes` fail as it does when the package is not installed."""
    for name in [n for n in sys.modules if n == "kubernetes" or n.startswith("kubernetes.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kubernetes", None)
    with pytest.raises(ImportError):
        import kubernetes  # noqa: F401


def _kubeconfig(folder: Path, name: str = "config") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(_KUBECONFIG)
    return path


def _one_line_naming(exc: pytest.ExceptionInfo[UserError], asked_by: str) -> None:
    text = str(exc.value)
    assert "\n" not in text
    assert text.startswith(asked_by)
    assert INSTALL_HINT in text and INSTALL_HINT == "pip install 'wasm-scheduler[extender]'"


# --- the package metadata --------------------------------------------------------------------------


def test_kubernetes_is_an_extra_that_the_test_extra_pulls_in() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.lower().startswith("kubernetes")]
    assert [d for d in project["optional-dependencies"]["extender"] if d.startswith("kubernetes")]
    assert "wasm-scheduler[extender]" in project["optional-dependencies"]["test"]


# --- asking for the API without the client ---------------------------------------------------------


@pytest.mark.usefixtures("without_kubernetes", "no_cluster_env")
def test_kubeconfig_option_without_the_client(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path)
    with pytest.raises(UserError) as exc:
        make_binder(ExtenderOptions(Path("s.yaml"), kubeconfig=str(path)))
    _one_line_naming(exc, f"--kubeconfig {path}:")


@pytest.mark.usefixtures("without_kubernetes", "no_cluster_env")
def test_api_server_option_without_the_client() -> None:
    with pytest.raises(UserError) as exc:
        make_binder(ExtenderOptions(Path("s.yaml"), api_server="http://127.0.0.1:1"))
    _one_line_naming(exc, "--api-server http://127.0.0.1:1:")


@pytest.mark.usefixtures("without_kubernetes", "no_cluster_env")
def test_in_cluster_credentials_without_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with pytest.raises(UserError) as exc:
        make_binder(ExtenderOptions(Path("s.yaml")))
    _one_line_naming(exc, "in-cluster credentials (KUBERNETES_SERVICE_HOST is set):")


@pytest.mark.usefixtures("without_kubernetes")
def test_found_kubeconfig_files_without_the_client(no_cluster_env: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    default = _kubeconfig(no_cluster_env / ".kube")
    with pytest.raises(UserError) as exc:
        make_binder(ExtenderOptions(Path("s.yaml")))
    _one_line_naming(exc, f"{default} (the default kubeconfig):")

    listed = _kubeconfig(tmp_path / "elsewhere")
    monkeypatch.setenv("KUBECONFIG", str(listed))
    with pytest.raises(UserError) as exc:
        make_binder(ExtenderOptions(Path("s.yaml")))
    _one_line_naming(exc, f"{listed} ($KUBECONFIG):")


@pytest.mark.usefixtures("without_kubernetes", "no_cluster_env")
def test_the_extender_command_stops_at_start_with_one_line(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _kubeconfig(tmp_path)
    code = main(["extender", "--config", str(EXAMPLES / "scheduler-config.yaml"), "--listen", "127.0.0.1:0",
                 "--kubeconfig", str(path), "--no-cache"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [f"error: --kubeconfig {path}: creating Bindings needs the Kubernetes API client, "
                                f"which is not installed: {INSTALL_HINT}"]
    assert out == ""


# --- no binder needed: no client needed ------------------------------------------------------------


@pytest.mark.usefixtures("without_kubernetes")
def test_no_binder_needed_works_without_the_client(no_cluster_env: Path) -> None:
    assert isinstance(make_binder(ExtenderOptions(Path("s.yaml"))), NoBinder)
    # --no-bind: kube-scheduler binds, so a kubeconfig lying in the home folder is not needed.
    _kubeconfig(no_cluster_env / ".kube")
    assert isinstance(make_binder(ExtenderOptions(Path("s.yaml"), expect_bind=False)), NoBinder)
    running = RunningExtender(ExtenderOptions(EXAMPLES / "scheduler-config.yaml", listen="127.0.0.1:0",
                                              expect_bind=False))
    try:
        assert isinstance(running.service.binder, NoBinder)
        assert [wp.plugin.name for wp in running.plugins] == ["NodeNumber"]
    finally:
        running.close()
        running.compiler.close()


def test_the_client_is_used_when_installed(no_cluster_env: Path, tmp_path: Path) -> None:
    binder = make_binder(ExtenderOptions(Path("s.yaml"), kubeconfig=str(_kubeconfig(tmp_path))))
    assert isinstance(binder, KubernetesBinder)
    assert "kubernetes" in sys.modules and sys.modules["kubernetes"] is not None


_BLOCKED = textwrap.dedent("""
    import importlib.abc, sys

    class NoKubernetes(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "kubernetes" or name.startswith("kubernetes."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, NoKubernetes())
    from wasm_scheduler.adapters.cli import main
    code = main(["simulate", "--output", "json", "--no-cache"])
    assert not [n for n in sys.modules if n.startswith("kubernetes")], "kubernetes was imported"
    sys.exit(code)
""")


def test_simulate_runs_in_a_process_that_cannot_import_kubernetes(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _BLOCKED], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"pods"' in done.stdout
