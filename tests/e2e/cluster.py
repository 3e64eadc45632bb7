"""The real control plane of the end-to-end tests, and what a test does with it.

This module owns: building the binaries (`tests/e2e/build.sh`, cached by go.sum's
hash), `ControlPlane` (etcd and kube-apiserver on free 127.0.0.1 ports in a folder of
their own, with the certificates, service-account key and admin kubeconfig made here;
readiness awaited; the API server can be restarted), `Cluster` (Nodes with capacity,
allocatable, a Ready condition, labels, taints and images, but no kubelet; Pods;
PriorityClasses; waits for bindings), and the two processes a test starts beside it:
`wasm-scheduler extender` and an unmodified kube-scheduler whose
KubeSchedulerConfiguration points its `extenders:` entry at ours. Every process is
stopped by its PID and its log kept as a test artifact; every wait is bounded.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.pki import KeyPair, Pki
from tests.e2e.process import ManagedProcess, free_port, port_open, wait_for

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parents[1]
NODENUMBER_WASM = REPO / "examples" / "nodenumber" / "nodenumber.wasm"
GUESTS = REPO / "tests" / "guests"

#: Cold builds take minutes; a cached one answers at once.
BUILD_TIMEOUT_S = 3600.0
READY_TIMEOUT_S = 90.0

KubeObject = dict[str, Any]


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path


def build_binaries() -> Binaries:
    """Build (or find in the cache) etcd, kube-apiserver and kube-scheduler."""
    if shutil.which("go") is None and not os.environ.get("WASM_SCHEDULER_E2E_CACHE"):
        raise RuntimeError("the end-to-end tests build kube-apiserver and kube-scheduler with Go >= 1.24: "
                           "no `go` on PATH")
    done = subprocess.run(["bash", str(E2E_DIR / "build.sh")], stdout=subprocess.PIPE, stderr=sys.stderr,
                          text=True, timeout=BUILD_TIMEOUT_S, check=True)
    folder = Path(done.stdout.strip().splitlines()[-1])
    return Binaries(folder / "etcd", folder / "kube-apiserver", folder / "kube-scheduler")


def kubeconfig_text(server: str, ca: Path, client: KeyPair, user: str = "admin") -> str:
    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority-data": b64(ca)}}],
        "users": [{"name": user, "user": {"client-certificate-data": b64(client.cert),
                                          "client-key-data": b64(client.key)}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    })


class ControlPlane:
    """etcd and kube-apiserver in `folder`, on free ports of 127.0.0.1."""

    def __init__(self, binaries: Binaries, folder: Path) -> None:
        self.binaries = binaries
        self.folder = folder
        self.logs = folder / "logs"
        self.pki = Pki(folder / "pki")
        self.apiserver_cert = self.pki.issue("apiserver", "kube-apiserver",
                                             server_names=("127.0.0.1", "localhost", "kubernetes"))
        self.admin = self.pki.issue("admin", "e2e-admin", organizations=("system:masters",), client=True)
        self.sa_key = self.pki.service_account_key()
        self.etcd_port, self.etcd_peer_port, self.port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = folder / "admin.kubeconfig"
        self.kubeconfig.write_text(kubeconfig_text(self.url, self.pki.ca, self.admin))
        etcd_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{self.etcd_peer_port}"
        self.etcd = ManagedProcess("etcd", [
            str(binaries.etcd), "--name", "e2e", "--data-dir", str(folder / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"e2e={peer_url}", "--unsafe-no-fsync", "--log-level", "warn",
        ], self.logs / "etcd.log")
        self.apiserver = ManagedProcess("kube-apiserver", [
            str(binaries.kube_apiserver),
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(self.port),
            "--tls-cert-file", str(self.apiserver_cert.cert), "--tls-private-key-file", str(self.apiserver_cert.key),
            "--client-ca-file", str(self.pki.ca),
            "--service-account-key-file", str(self.sa_key), "--service-account-signing-key-file", str(self.sa_key),
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--api-audiences", "https://kubernetes.default.svc.cluster.local",
            "--authorization-mode", "Node,RBAC",
            "--service-cluster-ip-range", "10.96.0.0/16",
            # No controller-manager runs: nothing would create the `default` ServiceAccount a Pod
            # needs, nor lift the not-ready taint TaintNodesByCondition puts on a new Node.
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--cert-dir", str(folder / "apiserver-certs"),
            # The `kubernetes` Service's endpoints would be 127.0.0.1, which the API refuses.
            "--endpoint-reconciler-type", "none",
            "--profiling=false", "--v", "1",
        ], self.logs / "kube-apiserver.log")

    def start(self) -> ControlPlane:
        self.etcd.start()
        wait_for(lambda: port_open(self.etcd_port) or self.etcd.assert_running(), READY_TIMEOUT_S, "etcd listening")
        self.start_apiserver()
        return self

    def start_apiserver(self) -> None:
        self.apiserver.start()
        self.wait_ready()

    def restart_apiserver(self, down_s: float = 0.0) -> None:
        """Stop kube-apiserver (its watches and connections cut), stay down `down_s`, start it again."""
        self.apiserver.stop()
        time.sleep(down_s)
        self.start_apiserver()

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca))
        context.load_cert_chain(str(self.admin.cert), str(self.admin.key))
        return context

    def get(self, path: str, timeout_s: float = 5.0) -> bytes:
        with urllib.request.urlopen(self.url + path, context=self.ssl_context(), timeout=timeout_s) as answer:
            return bytes(answer.read())

    def wait_ready(self) -> None:
        def ready() -> bool:
            self.apiserver.assert_running()
            return self.get("/readyz") == b"ok"

        wait_for(ready, READY_TIMEOUT_S, "kube-apiserver /readyz", interval_s=0.5)
        # The bootstrap controller creates the namespaces tests put pods in.
        wait_for(lambda: self.get("/api/v1/namespaces/default"), READY_TIMEOUT_S, "namespace default")

    def stop(self) -> None:
        self.apiserver.stop()
        self.etcd.stop()


def node_object(name: str, *, cpu: str = "4", memory: str = "16Gi", pods: int = 110,
                labels: Mapping[str, str] | None = None, taints: Sequence[Mapping[str, str]] = (),
                images: Sequence[tuple[str, int]] = ()) -> KubeObject:
    """A Node as a kubelet would register it (no kubelet runs: the object is all there is)."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "kubernetes.io/arch": "amd64", **(labels or {})}},
        "spec": {"taints": [dict(t) for t in taints]} if taints else {},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "images": [{"names": [image], "sizeBytes": size} for image, size in images],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        },
    }


def pod_object(name: str, *, namespace: str = "default", cpu: str = "100m", memory: str = "64Mi",
               priority_class: str = "", node_name: str = "", scheduler_name: str = "default-scheduler",
               labels: Mapping[str, str] | None = None, image: str = "registry.k8s.io/pause:3.10",
               extra_spec: Mapping[str, Any] | None = None) -> KubeObject:
    """A Pod that requests `cpu` and `memory`; deleted at once when asked (grace period 0)."""
    spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": image,
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {"app": "e2e"})},
            "spec": spec}


class Cluster:
    """The test's view of the API server: objects made, listed and awaited through the official client."""

    def __init__(self, control_plane: ControlPlane) -> None:
        from kubernetes import client, config  # the [extender] extra, which [test] includes

        self.control_plane = control_plane
        configuration = client.Configuration()
        config.load_kube_config(str(control_plane.kubeconfig), client_configuration=configuration)
        configuration.retries = 3
        self.api_client = client.ApiClient(configuration)
        self.core = client.CoreV1Api(self.api_client)
        self.scheduling = client.SchedulingV1Api(self.api_client)
        self.rbac = client.RbacAuthorizationV1Api(self.api_client)

    # ---- objects ---------------------------------------------------------------------
    def create_nodes(self, nodes: Iterable[KubeObject]) -> list[str]:
        names = []
        for node in nodes:
            self.core.create_node(node)
            # Status is the kubelet's to write: set it through the status subresource.
            self.core.patch_node_status(node["metadata"]["name"], {"status": node["status"]})
            names.append(node["metadata"]["name"])
        return names

    def create_pods(self, pods: Iterable[KubeObject]) -> list[str]:
        names = []
        for pod in pods:
            self.core.create_namespaced_pod(pod["metadata"].get("namespace", "default"), pod)
            names.append(pod["metadata"]["name"])
        return names

    def create_priority_class(self, name: str, value: int) -> None:
        self.scheduling.create_priority_class({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                               "metadata": {"name": name}, "value": value})

    def pods(self, namespace: str = "default") -> list[KubeObject]:
        """Every pod of `namespace` as the API serves it (JSON, not the client's model objects)."""
        answer = self.core.list_namespaced_pod(namespace, _preload_content=False)
        return list(json.loads(answer.data)["items"])

    def pod(self, name: str, namespace: str = "default") -> KubeObject | None:
        from kubernetes.client.exceptions import ApiException

        try:
            answer = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(json.loads(answer.data))

    def events(self, namespace: str = "default") -> list[KubeObject]:
        answer = self.core.list_namespaced_event(namespace, _preload_content=False)
        return list(json.loads(answer.data)["items"])

    def placements(self, namespace: str = "default") -> dict[str, str]:
        """Pod name -> node name, for every pod of `namespace` bound so far."""
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in self.pods(namespace)
                if p["spec"].get("nodeName")}

    def wait_bound(self, names: Iterable[str], timeout_s: float, namespace: str = "default") -> dict[str, str]:
        wanted = set(names)

        def all_bound() -> dict[str, str] | None:
            bound = self.placements(namespace)
            return bound if wanted <= bound.keys() else None

        return wait_for(all_bound, timeout_s, f"{len(wanted)} pods bound", interval_s=0.5)

    def delete_all(self, namespace: str = "default") -> None:
        """Every pod (at once: grace period 0) and every node, so the next test starts empty."""
        self.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        self.core.delete_collection_node()
        wait_for(lambda: not self.pods(namespace), 60, "pods deleted")

    def close(self) -> None:
        self.api_client.close()


# ---- the processes a test starts beside the control plane ------------------------------

@dataclass
class ExtenderEntry:
    """kube-scheduler's `extenders:` entry for our extender (KubeSchedulerConfiguration v1)."""

    url_prefix: str
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    bind_verb: str = "bind"
    preempt_verb: str = "preempt"
    weight: int = 20
    node_cache_capable: bool = False
    ignorable: bool = False
    http_timeout: str = "10s"
    managed_resources: list[dict[str, Any]] = field(default_factory=list)
    tls: dict[str, str] | None = None

    def as_config(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"urlPrefix": self.url_prefix, "weight": self.weight,
                                 "nodeCacheCapable": self.node_cache_capable, "ignorable": self.ignorable,
                                 "httpTimeout": self.http_timeout, "enableHTTPS": self.tls is not None}
        for key, verb in (("filterVerb", self.filter_verb), ("prioritizeVerb", self.prioritize_verb),
                          ("bindVerb", self.bind_verb), ("preemptVerb", self.preempt_verb)):
            if verb:
                entry[key] = verb
        if self.managed_resources:
            entry["managedResources"] = self.managed_resources
        if self.tls is not None:
            entry["tlsConfig"] = self.tls
        return entry


def scheduler_config(kubeconfig: Path, extenders: Sequence[ExtenderEntry],
                     profiles: Sequence[Mapping[str, Any]] | None = None,
                     percentage_of_nodes_to_score: int | None = None) -> dict[str, Any]:
    """kube-scheduler's KubeSchedulerConfiguration: our extender, no leader election, and
    client QPS raised so the API client is not the bottleneck."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 5000, "burst": 5000},
        "leaderElection": {"leaderElect": False},
        "profiles": list(profiles or [{"schedulerName": "default-scheduler"}]),
        "extenders": [e.as_config() for e in extenders],
    }
    if percentage_of_nodes_to_score is not None:
        config["percentageOfNodesToScore"] = percentage_of_nodes_to_score
    return config


def wasm_plugin_config(plugins: Mapping[str, Path | str], scheduler_name: str = "default-scheduler",
                       weights: Mapping[str, int] | None = None,
                       extra_args: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The extender's own configuration: one profile enabling each wasm plugin through multiPoint."""
    weights = weights or {}
    extra_args = extra_args or {}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": scheduler_name,
            "plugins": {"multiPoint": {"enabled": [{"name": name, "weight": weights.get(name, 1)}
                                                   for name in plugins]}},
            "pluginConfig": [{"name": name, "args": {"guestURL": str(path), **extra_args.get(name, {})}}
                             for name, path in plugins.items()],
        }],
    }


class Harness:
    """One test's processes beside a shared control plane; `close()` stops them all."""

    def __init__(self, control_plane: ControlPlane, binaries: Binaries, folder: Path) -> None:
        self.control_plane = control_plane
        self.binaries = binaries
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.cluster = Cluster(control_plane)
        self.processes: list[ManagedProcess] = []

    def _process(self, name: str, argv: Sequence[str]) -> ManagedProcess:
        process = ManagedProcess(name, argv, self.folder / f"{name}.log")
        self.processes.append(process)
        return process

    def extender(self, config: Mapping[str, Any], *args: str, name: str = "extender",
                 port: int | None = None, scheme: str = "http") -> ExtenderProcess:
        """`wasm-scheduler extender` with `config` (a KubeSchedulerConfiguration), JSON logs at debug."""
        port = port or free_port()
        config_path = self.folder / f"{name}-config.yaml"
        config_path.write_text(yaml.safe_dump(dict(config)))
        argv = [sys.executable, "-m", "wasm_scheduler.adapters.cli", "--log-format", "json", "--log-level", "debug",
                "extender", "--config", str(config_path), "--listen", f"127.0.0.1:{port}",
                "--kubeconfig", str(self.control_plane.kubeconfig), "--no-cache", *args]
        return ExtenderProcess(self._process(name, argv), port, scheme)

    def kube_scheduler(self, extenders: Sequence[ExtenderEntry], name: str = "kube-scheduler",
                       profiles: Sequence[Mapping[str, Any]] | None = None,
                       percentage_of_nodes_to_score: int | None = None) -> ManagedProcess:
        config_path = self.folder / f"{name}-config.yaml"
        config_path.write_text(yaml.safe_dump(scheduler_config(self.control_plane.kubeconfig, extenders, profiles,
                                                               percentage_of_nodes_to_score)))
        return self._process(name, [
            str(self.binaries.kube_scheduler), "--config", str(config_path),
            # E2E_SCHEDULER_V=10 logs every plugin's score of every node (large logs).
            "--secure-port", "0", "--v", os.environ.get("E2E_SCHEDULER_V", "2"),
        ])

    def stop_processes(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    def tails(self, lines: int = 40) -> str:
        return "\n".join(f"---- {p.name} ({p.log_path}) ----\n{p.tail(lines)}" for p in self.processes)


@dataclass
class ExtenderProcess:
    process: ManagedProcess
    port: int
    scheme: str

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> ExtenderProcess:
        self.process.start()
        wait_for(lambda: port_open(self.port) or self.process.assert_running(), timeout_s,
                 f"extender listening on {self.port}")
        return self

    def log_records(self, last_start_only: bool = False) -> list[dict[str, Any]]:
        """Every JSON record of the extender's log so far (or of its last start only)."""
        records = []
        for line in self.log_lines(last_start_only):
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
        return records

    def log_lines(self, last_start_only: bool = False) -> list[str]:
        """The JSON lines of the log (a restarted extender appends to it after a `==== start` line)."""
        lines = self.process.log_path.read_text(errors="replace").splitlines()
        if last_start_only:
            starts = [i for i, line in enumerate(lines) if line.startswith("==== start")]
            lines = lines[starts[-1]:] if starts else lines
        return [line for line in lines if line.startswith("{")]
