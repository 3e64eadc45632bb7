"""What a new user met first: each rough edge, now a clear line, a right exit status or a quiet library.

Broken pipes, a full disk, a snapshot without nodes, misspelt plugin args, warnings ahead
of an error, messages that pointed the wrong way, a WAT syntax error without its place,
log lines on stdout from the library and the pytest plugin, --help naming files a wheel
lacks, the README's quick start and extras, the LICENSE, and the raw guest interface in
docs/guest-authors.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_cli_exit import WAIT_S, command, finish
from wasm_scheduler.adapters.cli import EXIT_BROKEN_PIPE, EXIT_OUTPUT_ERROR, EXIT_USER_ERROR, build_parser, main
from wasm_scheduler.adapters.framework.cluster import cluster_from_objects
from wasm_scheduler.adapters.framework.errors import UserError
from wasm_scheduler.adapters.report import counted
from wasm_scheduler.framework_api import Code
from wasm_scheduler.registry.compiler import GuestCompiler
from wasm_scheduler.registry.config import PluginConfig, PluginConfigError
from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import EXPORT_RESULTS, HOST_IMPORTS
from wasm_scheduler.testing import node, pod, run_cycle

pytest_plugins = ["wasm_scheduler.testing"]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NODENUMBER = EXAMPLES / "nodenumber" / "nodenumber.wasm"


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    return lines[0]


def write_config(tmp_path: Path, args: dict[str, Any], name: str = "Guest") -> Path:
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler",
                      "plugins": {"multiPoint": {"enabled": [{"name": name}]}},
                      "pluginConfig": [{"name": name, "args": args}]}],
    }
    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def k8s_node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}}


def k8s_pod(name: str, node_name: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}], **spec}
    if node_name:
        body["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team"}, "spec": body}


def snapshot(tmp_path: Path, *objects: dict[str, Any], name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(objects)}))
    return path


# --- 1. the output's reader goes away, the output cannot be written -----------------------------------------------

def test_a_table_whose_reader_goes_away_exits_141_quietly() -> None:
    # wasm-scheduler simulate | head -1: rich's own Console exited 1 here.
    process = subprocess.Popen(command("simulate"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert finish(process) == EXIT_BROKEN_PIPE
    assert err == "", err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", [("simulate",), ("simulate", "--output", "json")], ids=["table", "json"])
def test_an_output_that_cannot_be_written_is_one_line(args: tuple[str, ...]) -> None:
    # wasm-scheduler simulate > /dev/full
    with open("/dev/full", "w") as full:
        done = subprocess.run(command(*args), cwd=ROOT, stdout=full, stderr=subprocess.PIPE, timeout=WAIT_S)
    err = done.stderr.decode()
    assert done.returncode == EXIT_OUTPUT_ERROR
    assert one_error_line(err) == "error: cannot write the output to stdout: No space left on device"


# --- 2. a snapshot without nodes ----------------------------------------------------------------------------------

def test_a_pods_only_snapshot_is_one_line_naming_the_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # kubectl get pods -A -o yaml: the nodes forgotten; the running pods used to give a warning each.
    objects = [k8s_pod(f"running-{i}", node_name=f"node-{i % 3}") for i in range(30)] + [k8s_pod("pending")]
    path = snapshot(tmp_path, *objects)
    assert main(["simulate", "--cluster", str(path)]) == EXIT_USER_ERROR
    out, err = capsys.readouterr()
    assert out == ""
    line = one_error_line(err)
    assert line.startswith(f"error: {path}: 31 Pods but no Node objects")
    assert "kubectl get nodes,pods -A -o yaml" in line
    with pytest.raises(UserError, match="1 Pod but no Node objects"):
        cluster_from_objects([k8s_pod("pending")], "pending.yaml")


def test_pods_on_unknown_nodes_are_one_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    objects = [k8s_node("node-0"), *(k8s_pod(f"running-{i}", node_name=f"gone-{i}") for i in range(12))]
    path = snapshot(tmp_path, *objects, k8s_pod("pending"))
    assert main(["simulate", "--cluster", str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("cluster.pods_on_unknown_nodes") == 1 and "count=12" in err, err
    assert len(err.strip().splitlines()) == 1, err


# --- 3. pool keys are checked like limits keys --------------------------------------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    ({"pool": {"maxInstance": 3}}, "unknown args.pool field 'maxInstance' (did you mean maxInstances?)"),
    ({"pool": {"minidle": 1}}, "unknown args.pool field 'minidle' (did you mean minIdle?)"),
    ({"pool": {"replicas": 3}}, "unknown args.pool field 'replicas'; known: minIdle, idleSeconds, maxInstances"),
    ({"limits": {"memoryLimitMib": 64}}, "unknown args.limits field 'memoryLimitMib' (did you mean memoryLimitMiB?)"),
    ({"guestUrl": "x.wasm"}, "unknown args field 'guestUrl' (did you mean guestURL?)"),
    ({"guestURL": "x.wasm", "logseverity": 1}, "unknown args field 'logseverity' (did you mean logSeverity?)"),
])
def test_unknown_plugin_arg_fields_are_named_with_a_suggestion(args: dict[str, Any], expected: str) -> None:
    with pytest.raises(PluginConfigError) as raised:
        PluginConfig.from_args("my-plugin", {"guestURL": "x.wasm", **args} if "guestUrl" not in args else args)
    assert str(raised.value) == f"plugin 'my-plugin': {expected}"


def test_a_misspelt_pool_key_in_a_configuration_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = write_config(tmp_path, {"guestURL": str(NODENUMBER), "pool": {"maxInstance": 3}})
    assert main(["simulate", "--config", str(config)]) == EXIT_USER_ERROR
    line = one_error_line(capsys.readouterr().err)
    assert line.endswith("unknown args.pool field 'maxInstance' (did you mean maxInstances?)"), line


# --- 4. no warning before a fatal error ---------------------------------------------------------------------------

def test_a_bad_guest_after_cluster_warnings_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    claim = {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}
    cluster = snapshot(tmp_path, k8s_node("node-0"), k8s_pod("db", **claim), k8s_pod("lost", node_name="gone"),
                       {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}})
    config = write_config(tmp_path, {"guestURL": "missing.wasm"})
    assert main(["simulate", "--cluster", str(cluster), "--config", str(config)]) == EXIT_USER_ERROR
    line = one_error_line(capsys.readouterr().err)
    assert "missing.wasm" in line and "no such file" in line
    # The same snapshot with a mistake of the command line: still one line.
    assert main(["simulate", "--cluster", str(cluster), "--explain", "nobody"]) == EXIT_USER_ERROR
    assert "--explain nobody" in one_error_line(capsys.readouterr().err)
    # And without a mistake the warnings are all there.
    assert main(["simulate", "--cluster", str(cluster)]) == 0
    err = capsys.readouterr().err
    for event in ("cluster.objects_skipped", "cluster.pods_on_unknown_nodes", "pods.constraints_ignored"):
        assert event in err, err


def test_a_bad_pod_after_skipped_objects_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = k8s_pod("bad")
    bad["spec"]["priority"] = "high"
    cluster = snapshot(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}},
                       k8s_node("node-0"), k8s_pod("lost", node_name="gone"), bad)
    assert main(["--log-level", "info", "simulate", "--cluster", str(cluster)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "warning" not in err and err.strip().splitlines()[-1].startswith(f"error: {cluster}: Pod team/bad"), err


def test_held_log_lines_keep_their_order_and_lose_only_warnings_on_a_mistake(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import logging

    from wasm_scheduler.adapters.logs import LogSink

    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    sink = LogSink()
    sink.hold()
    sink.write_line("one", logging.INFO)
    sink.write_line("a warning", logging.WARNING)
    sink.write_line("two", logging.DEBUG)
    assert stream.getvalue() == ""
    sink.release(drop_from=logging.WARNING)
    sink.write_line("three", logging.ERROR)  # written at once again
    sink.release()  # nothing held: nothing happens
    assert stream.getvalue().splitlines() == ["one", "two", "three"]


# --- 5. messages that pointed the wrong way -----------------------------------------------------------------------

def test_an_all_digit_sha256_read_as_a_number_says_to_quote_it(capsys: pytest.CaptureFixture[str],
                                                                tmp_path: Path) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(write_config(tmp_path, {"guestURL": str(NODENUMBER), "guestSHA256": "SHA"}).read_text()
                      .replace("guestSHA256: SHA", "guestSHA256: " + "1234567890" * 6 + "1234"))
    assert isinstance(yaml.safe_load(config.read_text())["profiles"][0]["pluginConfig"][0]["args"]["guestSHA256"], int)
    assert main(["simulate", "--config", str(config)]) == EXIT_USER_ERROR
    line = one_error_line(capsys.readouterr().err)
    assert "args.guestSHA256 was read as a number" in line and "quote it" in line, line
    assert "must be 64 hexadecimal digits" not in line


def test_guest_url_in_the_wrong_case_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Not "unknown plugin": the entry is a wasm plugin whose guestURL is misspelt.
    config = write_config(tmp_path, {"guestUrl": str(NODENUMBER)})
    assert main(["simulate", "--config", str(config)]) == EXIT_USER_ERROR
    line = one_error_line(capsys.readouterr().err)
    assert line.endswith("unknown args field 'guestUrl' (did you mean guestURL?)"), line


def test_a_listen_port_out_of_range_names_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    config = str(EXAMPLES / "scheduler-config.yaml")
    assert main(["extender", "--config", config, "--listen", "127.0.0.1:99999"]) == EXIT_USER_ERROR
    line = one_error_line(capsys.readouterr().err)
    assert line == "error: --listen 127.0.0.1:99999: port 99999 is outside the port range 0..65535"
    assert main(["extender", "--config", config, "--listen", "nope"]) == EXIT_USER_ERROR
    assert "expected HOST:PORT" in one_error_line(capsys.readouterr().err)


# --- 6. a WAT syntax error keeps its place ------------------------------------------------------------------------

def test_a_wat_syntax_error_names_file_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "broken.wat").write_text(textwrap.dedent("""\
        (module
          (memory (export "memory") 1)
          (func (export "filter") (result i32)
            i32.const
          )
        )
    """))
    with GuestCompiler(cache_dir=None) as compiler, pytest.raises(GuestLoadError) as raised:
        compiler.load(PluginConfig.from_args("Broken", {"guestURL": "broken.wat"}, base_dir=str(tmp_path)))
    message = str(raised.value)
    assert "\n" not in message
    assert message == "wasm guest 'Broken' (broken.wat): invalid WebAssembly text: broken.wat:5:3: expected a i32"


# --- 7. the library and the pytest plugin write nothing unless asked ----------------------------------------------

LIBRARY_RUN = """
import logging, sys
if sys.argv[1:] == ["configured"]:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
from wasm_scheduler import GuestCompiler, PluginConfig, WasmPlugin
from wasm_scheduler.testing import node, pod, run_cycle
config = PluginConfig.from_args("NodeNumber", {"guestURL": GUEST, "args": ["nodenumber"]})
with GuestCompiler(cache_dir=None) as compiler, WasmPlugin.load(config, compiler) as plugin:
    assert run_cycle(plugin, pod("web-3"), [node("node-1"), node("node-3")]).node == "node-3"
"""


def test_the_library_writes_nothing_unless_logging_is_configured() -> None:
    code = LIBRARY_RUN.replace("GUEST", repr(str(NODENUMBER)))
    quiet = subprocess.run([sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=WAIT_S)
    assert quiet.returncode == 0, quiet.stderr
    assert (quiet.stdout, quiet.stderr) == ("", "")
    asked = subprocess.run([sys.executable, "-c", code, "configured"], cwd="/", capture_output=True, text=True,
                           timeout=WAIT_S)
    assert asked.returncode == 0 and asked.stdout == "", asked.stderr
    assert "INFO wasm_scheduler.registry: guest.loaded plugin=NodeNumber" in asked.stderr
    assert "wasm_scheduler.guest: guest.log" in asked.stderr and "message='NodeNumber: pod name" in asked.stderr


def test_every_module_logs_through_the_packages_loggers() -> None:
    # structlog.get_logger in a module would print to stdout while structlog is unconfigured.
    sources = [*(ROOT / "wasm_scheduler").glob("*.py"),
               *(path for folder in ("actors", "adapters", "registry") for path in (ROOT / folder).rglob("*.py"))]
    direct = sorted(str(path.relative_to(ROOT)) for path in sources
                    if path.name != "logger.py" and "structlog.get_logger(" in path.read_text(encoding="utf-8"))
    assert direct == [], "use wasm_scheduler.logger.get_logger"


def test_a_guest_authors_pytest_output_stays_clean(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "main.wasm").write_bytes(NODENUMBER.read_bytes())
    (tmp_path / "test_guest.py").write_text(textwrap.dedent("""\
        from wasm_scheduler.testing import node, pod, run_cycle


        def test_with_the_logs(wasm_guest, wasm_logs):
            plugin = wasm_guest("main.wasm", args=["nodenumber"])
            assert run_cycle(plugin, pod("web-3"), [node("node-3")]).node == "node-3"
            assert any(event["event"] == "guest.log" for event in wasm_logs)


        def test_after_the_logs(wasm_guest):
            plugin = wasm_guest("main.wasm", args=["nodenumber"])
            assert run_cycle(plugin, pod("web-3"), [node("node-3")]).node == "node-3"
    """))
    # -s: nothing captured, so anything the package printed would be in the output.
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "wasm_scheduler.testing", "-p", "no:cacheprovider",
                           "-q", "-s", "test_guest.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for event in ("guest.loaded", "instance.started", "guest.log", "assignment."):
        assert event not in done.stdout + done.stderr, done.stdout + done.stderr


# --- 8. --help and grammar ----------------------------------------------------------------------------------------

def test_help_names_no_file_an_installed_wheel_lacks(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {"wasm-scheduler": build_parser().format_help()}
    for name in ("simulate", "extender", "trace", "bench"):
        assert main([name, "--help"]) == 0
        helps[name] = capsys.readouterr().out
    for name, text in helps.items():
        flat = " ".join(text.split())
        assert not re.search(r"\bdocs/|(?<![\w/])examples/|\.md\b", flat), (name, flat)
    extender = " ".join(helps["extender"].split())
    named = re.search(r"\(see (\S+extender-scheduler-config\.yaml)\)", extender)
    assert named is not None and Path(named.group(1)).is_file(), extender


def test_counts_agree_with_their_nouns(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert [counted(n, "pending pod") for n in (0, 1, 2)] == ["0 pending pods", "1 pending pod", "2 pending pods"]
    path = snapshot(tmp_path, k8s_node("node-0"), k8s_pod("only"))
    assert main(["simulate", "--cluster", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "0 errors (1 pending pod) in" in out, out


# --- 9. the README's quick start and extras -----------------------------------------------------------------------

def _quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_quick_start_is_two_commands_and_simulate_needs_no_extra() -> None:
    first, second = _quick_start()
    assert "pip install -e . &&" in first and first.endswith("wasm-scheduler simulate"), first
    assert "[" not in first  # no extra just to run simulate
    assert "pip install -e '.[test]'" in second and second.endswith("python -m pytest"), second


def test_the_readme_says_what_each_extra_is_for() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) == {"extender", "test", "dev"}
    for extra, requirements in extras.items():
        row = re.search(rf"^\| `{extra}` \|(.*)$", readme, re.MULTILINE)
        assert row is not None, f"no row for the {extra} extra"
        for requirement in requirements:
            name = re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0]
            shown_as = requirement.split("[", 1)[1].rstrip("]") if name == "wasm-scheduler" else name
            assert shown_as.lower() in row.group(1).lower(), (extra, shown_as, row.group(0))


# --- 10. the LICENSE ----------------------------------------------------------------------------------------------

def test_the_license_is_the_apache_license_the_metadata_declares() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    words = " ".join(text.split())
    assert words.startswith("Apache License Version 2.0, January 2004 http://www.apache.org/licenses/")
    for part in ("TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
                 "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS",
                 "APPENDIX: How to apply the Apache License to your work."):
        assert part in words, part
    assert len(text.splitlines()) >= 200
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}


# --- 11. the raw guest interface in docs/guest-authors.md ---------------------------------------------------------

GUIDE = ROOT / "docs" / "guest-authors.md"


def _raw_interface() -> str:
    return GUIDE.read_text(encoding="utf-8").split("## 7. The raw guest interface", 1)[1]


def test_the_guide_lists_every_export_import_and_status_code() -> None:
    text = _raw_interface()
    for export, results in EXPORT_RESULTS.items():
        signature = f"`() -> {'i64' if results == ('i64',) else 'i32' if results else '()'}`"
        assert re.search(rf"^\| `{export}` \| {re.escape(signature)} \|", text, re.MULTILINE), export
    for (module, name), (params, results) in HOST_IMPORTS.items():
        row = re.search(rf"^\| `{re.escape(module)}` `{re.escape(name)}` \| `\(([^)]*)\) -> ([^`]*)` \|", text,
                        re.MULTILINE)
        assert row is not None, f"{module} {name}"
        assert len([p for p in row.group(1).split(",") if p.strip()]) == len(params), name
        assert row.group(2) == ("i32" if results else "()"), name
    for code in Code:
        assert re.search(rf"^\| {code.value} \| `Code\.{code.name}` \| {code.label}\b", text, re.MULTILINE), code
    for words in ("buffer protocol", "grows the buffer", "`memory`", "`_start: () -> ()`"):
        assert words in text, words


def test_the_guides_wat_guest_does_what_it_says(wasm_guest: Any, tmp_path: Path) -> None:
    wat = re.search(r"```wat\n(.*?)```", _raw_interface(), re.DOTALL)
    assert wat is not None
    (tmp_path / "guest.wat").write_text(wat.group(1))
    result = run_cycle(wasm_guest(tmp_path / "guest.wat", name="NoGpu"), pod("web-1"), [node("a"), node("b")])
    assert {name: (status.code, status.reason) for name, status in result.filter.items()} == {
        "a": (Code.UNSCHEDULABLE, "no GPU on this node"), "b": (Code.UNSCHEDULABLE, "no GPU on this node")}
    # Without its Filter, its Score gives every node 10.
    (tmp_path / "scorer.wat").write_text(re.sub(r'\(func \(export "filter"\).*?;; Unschedulable\n', "", wat.group(1),
                                                flags=re.DOTALL))
    scored = run_cycle(wasm_guest(tmp_path / "scorer.wat", name="Ten"), pod("web-1"), [node("a"), node("b")])
    assert scored.raw_scores == {"a": 10, "b": 10}
