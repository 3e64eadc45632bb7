"""Operator input: what the scheduler configuration, cluster and kubeconfig loaders do with
hostile or mistyped files (alias bombs, devices, FIFOs, wrong types): one short UserError
line naming the file, never a traceback, a hang or unbounded memory."""

from __future__ import annotations

import copy
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wasm_scheduler.adapters.cli import main
from wasm_scheduler.adapters.extender.binder import KubernetesBinder, NoBinder, check_kubeconfig, find_kubeconfig
from wasm_scheduler.adapters.extender.command import ExtenderOptions, make_binder
from wasm_scheduler.adapters.framework.cluster import (
    cluster_from_objects,
    load_cluster,
    parse_yaml_documents,
    read_regular_file,
    read_yaml_documents,
)
from wasm_scheduler.adapters.framework.config import config_from_dict, load_config
from wasm_scheduler.adapters.framework.errors import UserError, shown
from wasm_scheduler.registry.config import PluginConfig, PluginConfigError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: Nine levels of nine-fold aliases: 9**9 (387 million) leaves once expanded.
BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)


def _one_short_line(message: str, path: Path | str, limit: int = 400) -> None:
    assert "\n" not in message
    assert len(message) < limit, message
    assert str(path) in message


# --- 1. values echoed in errors are bounded ----------------------------------------------------


def test_shown_cuts_long_values_and_never_expands_shared_structures() -> None:
    bomb: Any = ["x"]
    for _ in range(40):  # 2**40 leaves if anything walked it all
        bomb = [bomb, bomb]
    assert len(shown(bomb)) <= 80 and shown(bomb).startswith("[[[")
    assert "..." in shown("y" * 1000) and len(shown("y" * 1000)) <= 80
    assert shown(5) == "5" and shown("abc") == "'abc'"


def test_alias_bomb_in_scheduler_config_gives_one_short_line(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sched.yaml"
    path.write_text(f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    f"leaderElection:\n  {BOMB.replace(chr(10), chr(10) + '  ')}\nparallelism: *a9\n")
    with pytest.raises(UserError) as err:
        load_config(path)
    _one_short_line(str(err.value), path)
    assert "parallelism" in str(err.value)
    assert main(["simulate", "--config", str(path), "--cpus", "all"]) == 2
    out = capsys.readouterr().err.strip()
    assert out.startswith("error: ") and "\n" not in out and len(out) < 400


def test_alias_bomb_in_plugin_args_gives_one_short_line() -> None:
    bomb = yaml.safe_load(BOMB)["a9"]
    with pytest.raises(PluginConfigError) as err:
        PluginConfig.from_args("P", {"guestURL": "x.wasm", "logSeverity": bomb})
    assert len(str(err.value)) < 300 and "logSeverity" in str(err.value)


@pytest.mark.parametrize("field", ["kind", "spec.priority", "spec.priorityClassName", "metadata.labels"])
def test_alias_bomb_in_cluster_file_gives_one_short_line(tmp_path: Path, field: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c"}]}}
    text = yaml.safe_dump(pod)
    section, _, key = field.partition(".")
    path = tmp_path / "cluster.yaml"
    if key:
        body = yaml.safe_load(text)
        body[section][key] = "BOMB_HERE"
        text = yaml.safe_dump(body)
    else:
        text = text.replace("kind: Pod", "kind: BOMB_HERE")
    indented = BOMB.replace("\n", "\n  ")
    # Anchors do not cross documents: the bomb sits in the pod's own document.
    path.write_text(f"bombs:\n  {indented}\n" + text.replace("BOMB_HERE", "*a9"))
    with pytest.raises(UserError) as err:
        load_cluster(path)
    _one_short_line(str(err.value), path)
    assert main(["simulate", "--cluster", str(path), "--cpus", "all"]) == 2
    out = capsys.readouterr().err.strip()
    assert out.startswith("error: ") and "\n" not in out and len(out) < 400


def test_long_names_are_cut_in_errors() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "n" * 10_000}, "spec": {"containers": [{}], "priority": "high"}}
    with pytest.raises(UserError) as err:
        cluster_from_objects([pod], "c.yaml")
    assert len(str(err.value)) < 300 and "spec.priority" in str(err.value)


# --- 2. only regular files, of bounded size --------------------------------------------------


def test_device_is_refused_without_reading(tmp_path: Path) -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    with pytest.raises(UserError, match="not a regular file") as err:
        load_cluster("/dev/zero")
    _one_short_line(str(err.value), "/dev/zero")
    with pytest.raises(UserError, match="not a regular file"):
        load_config("/dev/zero")


def test_fifo_is_refused_without_opening(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.fifo"
    os.mkfifo(fifo)
    errors: list[BaseException] = []

    def load() -> None:
        try:
            load_cluster(fifo)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "reading a FIFO blocked"
    assert len(errors) == 1 and isinstance(errors[0], UserError)
    assert "not a regular file" in str(errors[0]) and str(fifo) in str(errors[0])


def test_directory_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="is a directory"):
        load_cluster(tmp_path)
    with pytest.raises(UserError, match="no such cluster file"):
        load_cluster(tmp_path / "nope.yaml")


def test_file_size_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * 2048)
    assert read_regular_file(path, "cluster", max_bytes=4096) == b"#" * 2048
    with pytest.raises(UserError, match="too large .*is 2047 bytes"):
        read_regular_file(path, "cluster", max_bytes=2048 - 1)


def test_size_limit_is_named_in_mib(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with open(path, "wb") as file:
        file.truncate(3 * 1024 * 1024)  # sparse: no disk used
    with pytest.raises(UserError, match=r"largest cluster file read is 2 MiB"):
        read_regular_file(path, "cluster", max_bytes=2 * 1024 * 1024)


def test_bad_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"kind: \xff\xfe\n")
    with pytest.raises(UserError, match="not UTF-8"):
        read_yaml_documents(path, "cluster")


# --- 3. wrong types are one line, never a traceback --------------------------------------------


def _pod(**spec: Any) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def _node(**fields: Any) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n"}, **fields}


@pytest.mark.parametrize(("objects", "expected"), [
    ([{"kind": [1], "metadata": {"name": "p"}}], "kind: expected a string"),
    ([{"kind": 5, "metadata": {"name": "p"}}], "kind: expected a string"),
    ([{"kind": "List", "items": [{"kind": {"a": 1}}]}], "kind: expected a string"),
    ([_pod(priorityClassName={"a": 1})], "spec.priorityClassName: expected a string"),
    ([_pod(priorityClassName=[1])], "spec.priorityClassName: expected a string"),
    ([_pod(nodeName=["n"])], "spec.nodeName: expected a string"),
    ([_pod(nodeSelector=["a"])], "spec.nodeSelector: expected a mapping"),
    ([_pod(tolerations={"key": "a"})], "spec.tolerations: expected a list"),
    ([_pod(tolerations=["a"])], "spec.tolerations[0]: expected a mapping"),
    ([_pod(containers=["c"])], "spec.containers[0]: expected a mapping"),
    ([_pod(containers=[{"resources": ["cpu"]}])], "spec.containers[0].resources: expected a mapping"),
    ([{"kind": "Pod", "metadata": {"name": "p", "namespace": ["x"]}, "spec": {"containers": [{}]}}],
     "metadata.namespace: expected a string"),
    ([{"kind": "Pod", "metadata": {"name": "p", "labels": {"a": [1]}}, "spec": {"containers": [{}]}}],
     "metadata.labels.a: expected a string"),
    ([{"kind": "Pod", "metadata": {"name": {"x": 1}}}], "metadata.name: expected a string"),
    ([_node(spec={"taints": [{"key": 1}]})], "spec.taints[0].key: expected a string"),
    ([_node(spec={"taints": "NoSchedule"})], "spec.taints: expected a list"),
    ([_node(status=["x"])], "status: expected a mapping"),
    ([_node(status={"allocatable": ["cpu"]})], "status.allocatable: expected a mapping"),
    ([{"kind": "PriorityClass", "metadata": {"name": "hi"}, "value": [1]}], "value: expected an integer"),
])
def test_wrong_types_in_cluster_are_one_line(objects: list[Any], expected: str) -> None:
    with pytest.raises(UserError) as err:
        cluster_from_objects(objects, "cluster.yaml")
    assert expected in str(err.value)
    _one_short_line(str(err.value), "cluster.yaml")


def test_wrong_kind_in_cli_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: [1]\nmetadata: {name: x}\n")
    assert main(["simulate", "--cluster", str(path), "--cpus", "all"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}") and "kind: expected a string" in err and "\n" not in err


@pytest.mark.parametrize(("doc", "expected"), [
    ({"kind": [1]}, "kind: expected KubeSchedulerConfiguration"),
    ({"kind": 5}, "kind: expected KubeSchedulerConfiguration"),
    ({"profiles": [{"schedulerName": {"a": 1}}]}, "schedulerName: expected a string"),
    ({"profiles": [{"pluginConfig": [{"name": {"a": 1}}]}]}, "pluginConfig[0].name: expected a plugin name"),
    ({5: 1}, "5: unknown field"),
    ({"profiles": [{"plugins": {1: {}, "x": {}}}]}, "plugins.1: unknown extension point"),
])
def test_wrong_types_in_scheduler_config_are_one_line(doc: dict[Any, Any], expected: str) -> None:
    base: dict[Any, Any] = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    with pytest.raises(UserError) as err:
        config_from_dict({**base, **doc}, "sched.yaml")
    assert expected in str(err.value)
    _one_short_line(str(err.value), "sched.yaml")


_SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4) | st.sampled_from(
    ["Node", "Pod", "List", "PriorityClass", "KubeSchedulerConfiguration", "kubescheduler.config.k8s.io/v1"])
_KEYS = st.sampled_from(["kind", "apiVersion", "metadata", "name", "namespace", "uid", "labels", "spec", "status",
                         "containers", "resources", "requests", "limits", "cpu", "nodeName", "priority",
                         "priorityClassName", "taints", "tolerations", "items", "value", "profiles", "plugins",
                         "pluginConfig", "args", "enabled", "disabled", "weight", "schedulerName", "phase",
                         "allocatable", "multiPoint", "score", "parallelism", "x"]) | st.integers(0, 2)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner,
                                                                                             max_size=4),
                       max_leaves=20)


def _mutations(valid: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`valid` with the value at one path (existing or new) replaced by a random value."""

    def paths(value: Any, prefix: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        out = [prefix]
        if isinstance(value, dict):
            for key, inner in value.items():
                out += paths(inner, (*prefix, key))
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                out += paths(inner, (*prefix, i))
        return out

    def apply(path: tuple[Any, ...], new: Any) -> dict[str, Any]:
        doc = copy.deepcopy(valid)
        if not path:
            return doc
        target: Any = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = new
        return doc

    return st.builds(apply, st.sampled_from(paths(valid, ())[1:]), _VALUES)


_VALID_POD = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}},
              "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                       "nodeName": "n", "priorityClassName": "hi",
                       "tolerations": [{"key": "k", "operator": "Exists"}]},
              "status": {"phase": "Running"}}
_VALID_NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": {"zone": "a"}},
               "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
               "status": {"allocatable": {"cpu": "4", "memory": "1Gi"}}}
_VALID_CLASS = {"kind": "PriorityClass", "metadata": {"name": "hi"}, "value": 10}
_VALID_CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "parallelism": 4,
                 "profiles": [{"schedulerName": "s", "plugins": {"multiPoint": {"enabled": [{"name": "A",
                                                                                              "weight": 2}]},
                                                                 "score": {"disabled": [{"name": "*"}]}},
                               "pluginConfig": [{"name": "A", "args": {"guestURL": "a.wasm"}}]}]}


def _only_user_errors(call: Any) -> None:
    try:
        call()
    except UserError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600, str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pod=_mutations(_VALID_POD), node=_mutations(_VALID_NODE), cls=_mutations(_VALID_CLASS))
def test_cluster_loader_only_raises_user_errors(pod: dict[str, Any], node: dict[str, Any],
                                                cls: dict[str, Any]) -> None:
    _only_user_errors(lambda: cluster_from_objects([cls, node, pod], "c.yaml"))
    _only_user_errors(lambda: cluster_from_objects([{"kind": "List", "items": [cls, node, pod]}], "c.yaml"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(_VALUES, max_size=3))
def test_cluster_loader_only_raises_user_errors_on_random_documents(docs: list[Any]) -> None:
    _only_user_errors(lambda: cluster_from_objects(docs, "c.yaml"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_mutations(_VALID_CONFIG) | _VALUES)
def test_config_loader_only_raises_user_errors(doc: Any) -> None:
    _only_user_errors(lambda: config_from_dict(doc, "sched.yaml"))


# --- 4. the C YAML loader ---------------------------------------------------------------------


def test_c_and_python_yaml_loaders_give_the_same_data() -> None:
    if not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML without libyaml")
    for name in ("cluster.yaml", "scheduler-config.yaml"):
        text = (EXAMPLES / name).read_text()
        fast = parse_yaml_documents(text, name, yaml.CSafeLoader)
        pure = parse_yaml_documents(text, name, yaml.SafeLoader)
        assert fast == pure and fast
    with pytest.raises(UserError, match="invalid YAML at line 2"):
        parse_yaml_documents("a: 1\n b: [\n", "x.yaml", yaml.CSafeLoader)
    with pytest.raises(UserError, match="invalid YAML at line 2"):
        parse_yaml_documents("a: 1\n b: [\n", "x.yaml", yaml.SafeLoader)


# --- 5. kubeconfig ------------------------------------------------------------------------------

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


def _kubeconfig(tmp_path: Path, text: str = _KUBECONFIG, name: str = "config") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_good_kubeconfig_builds_a_binder(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path)
    check_kubeconfig(path)
    binder = make_binder(ExtenderOptions(Path("s.yaml"), kubeconfig=str(path)))
    assert isinstance(binder, KubernetesBinder)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda t: "a: [", "invalid YAML"),
    (lambda t: "- 1\n", "not a kubeconfig"),
    (lambda t: t.replace("current-context: dev\n", ""), "no current-context"),
    (lambda t: t.replace("current-context: dev", "current-context: prod"), "no context named 'prod'"),
    (lambda t: t.replace("cluster: c1, ", "cluster: c2, "), "no cluster named 'c2'"),
    (lambda t: t.replace("user: u1}", "user: u2}"), "no user named 'u2'"),
    (lambda t: t.replace("{cluster: c1, user: u1}", "{user: u1}"), "names no cluster"),
    (lambda t: t.replace('{server: "https://127.0.0.1:6443"}', "{}"), "has no server"),
    (lambda t: t.replace("{token: abc}", "{client-certificate: nope.crt, client-key: nope.key}"),
     "client-certificate"),
    (lambda t: t.replace('{server: "https://127.0.0.1:6443"}',
                         '{server: "https://x", certificate-authority: /nonexistent/ca.crt}'),
     "certificate-authority /nonexistent/ca.crt: cannot read it"),
])
def test_kubeconfig_mistakes_are_one_line(tmp_path: Path, change: Any, expected: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _kubeconfig(tmp_path, change(_KUBECONFIG))
    with pytest.raises(UserError) as err:
        make_binder(ExtenderOptions(Path("s.yaml"), kubeconfig=str(path)))
    assert expected in str(err.value)
    _one_short_line(str(err.value), path)


def test_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such kubeconfig file"):
        make_binder(ExtenderOptions(Path("s.yaml"), kubeconfig=str(tmp_path / "none")))


def test_relative_certificate_is_read_from_the_kubeconfig_directory(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("not checked here")
    text = _KUBECONFIG.replace('{server: "https://127.0.0.1:6443"}',
                               '{server: "https://x", certificate-authority: ca.crt}')
    check_kubeconfig(_kubeconfig(tmp_path, text))  # no error: ca.crt exists beside it


def test_kubeconfig_env_and_home_are_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(home))
    options = ExtenderOptions(Path("s.yaml"))
    assert find_kubeconfig({}, home) is None
    assert isinstance(make_binder(options), NoBinder)

    default = _kubeconfig(home / ".kube")
    assert find_kubeconfig({}, home) == default
    assert isinstance(make_binder(options), KubernetesBinder)

    first = _kubeconfig(tmp_path, name="first")
    second = _kubeconfig(tmp_path, _KUBECONFIG.replace("current-context: dev", "current-context: x"), "second")
    env = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing"), str(first), str(second)])}
    assert find_kubeconfig(env, home) == first
    env = {"KUBECONFIG": os.pathsep.join([str(second), str(first)])}
    assert find_kubeconfig(env, home) == second
    assert find_kubeconfig({"KUBECONFIG": str(tmp_path / "missing")}, home) is None

    monkeypatch.setenv("KUBECONFIG", str(second))  # the env wins over ~/.kube/config, and is checked
    with pytest.raises(UserError, match=f"{second}: no context named 'x'"):
        make_binder(options)


def test_in_cluster_env_comes_before_kubeconfig_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path)))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # No service account token here: in-cluster credentials were chosen, and fail in one line.
    with pytest.raises(UserError, match="in-cluster credentials"):
        make_binder(ExtenderOptions(Path("s.yaml")))
