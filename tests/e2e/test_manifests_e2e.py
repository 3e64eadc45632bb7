"""The manifests of `examples/kubernetes/`, applied as written to a real API server and run.

What an operator does, step by step (docs/operating.md): the certificates are made by
`make-certs.sh` and put in the extender's Secret; every object of the numbered YAML files
(Namespace, ServiceAccount, ClusterRole, ClusterRoleBinding, ConfigMap, Service,
Deployment) is created through the API with strict field validation. No kubelet runs, so
the Deployment's pod never starts: the extender runs here as a subprocess instead, the way
the pod would run it: the container's own command line (its paths mapped to folders holding
what the API serves for its ConfigMap and Secret volumes), the ServiceAccount's token minted
with the TokenRequest API as its only credentials, the pod's probes run as written. An
unmodified kube-scheduler, with the extender entry of
`kube-scheduler/kube-scheduler-config.yaml` (nodeCacheCapable, mutual TLS with the
certificates of `make-certs.sh`), schedules pods through it and the extender binds them
under that ServiceAccount. Then the ClusterRole loses one rule at a time, and each
missing permission is reported in a line that names it.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.cluster import (
    REPO,
    Cluster,
    ControlPlane,
    ExtenderEntry,
    ExtenderProcess,
    Harness,
    node_object,
    pod_object,
)
from tests.e2e.process import ManagedProcess, free_port, wait_for
from tests.e2e.test_extender_e2e import digit_of

MANIFESTS = REPO / "examples" / "kubernetes"
KUBE_SCHEDULER_CONFIG = MANIFESTS / "kube-scheduler" / "kube-scheduler-config.yaml"
NODENUMBER_WASM = REPO / "examples" / "nodenumber" / "nodenumber.wasm"
#: The fields of kube-scheduler's extender entry that `ExtenderEntry` carries over.
ENTRY_FIELDS = {"urlPrefix", "filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb", "weight",
                "nodeCacheCapable", "ignorable", "httpTimeout", "enableHTTPS", "tlsConfig", "managedResources"}

KubeObject = dict[str, Any]


def manifest_objects() -> list[KubeObject]:
    """Every object of the folder's YAML files, in the order `kubectl apply -f` takes them."""
    objects: list[KubeObject] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return objects


@dataclass
class Applied:
    """The objects as created, the certificates' folder, and what reads them back."""

    objects: list[KubeObject]
    pki: Path
    cluster: Cluster
    secret: KubeObject = field(default_factory=dict)

    def one(self, kind: str) -> KubeObject:
        found = [o for o in self.objects if o["kind"] == kind]
        assert len(found) == 1, f"expected one {kind} in {MANIFESTS}, found {len(found)}"
        return found[0]

    @property
    def namespace(self) -> str:
        return str(self.one("Namespace")["metadata"]["name"])

    @property
    def service_account(self) -> str:
        return str(self.one("ServiceAccount")["metadata"]["name"])

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    @property
    def pod_spec(self) -> KubeObject:
        return dict(self.one("Deployment")["spec"]["template"]["spec"])

    @property
    def container(self) -> KubeObject:
        containers = self.pod_spec["containers"]
        assert len(containers) == 1
        return dict(containers[0])

    def rules(self) -> list[KubeObject]:
        return list(self.one("ClusterRole")["rules"])

    def set_rules(self, rules: list[KubeObject]) -> None:
        """Replace the ClusterRole's rules, and wait until the API's authorizer sees the change."""
        name = self.one("ClusterRole")["metadata"]["name"]
        rbac: Any = self.cluster.rbac
        role = rbac.read_cluster_role(name)
        role.rules = rules
        rbac.replace_cluster_role(name, role)
        for rule in self.rules():
            want = rule in rules
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    def settled(verb: str = verb, resource: str = resource, want: bool = want) -> bool | None:
                        return self.allowed(verb, resource) == want or None

                    wait_for(settled, 30, f"RBAC: {verb} {resource} {'allowed' if want else 'denied'}",
                             interval_s=0.2)

    def allowed(self, verb: str, resource: str) -> bool:
        """What the API server's authorizer answers for the ServiceAccount (a SubjectAccessReview)."""
        from kubernetes import client

        group, _, sub = resource.partition("/")
        attributes: dict[str, str] = {"verb": verb, "resource": group, "group": ""}
        if sub:
            attributes.update(subresource=sub, namespace="default")
        authorization: Any = client.AuthorizationV1Api(self.cluster.api_client)
        review = authorization.create_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": self.user, "groups": ["system:serviceaccounts",
                                                   f"system:serviceaccounts:{self.namespace}", "system:authenticated"],
                     "resourceAttributes": attributes}})
        return bool(review.status.allowed)


def run_make_certs(folder: Path) -> Path:
    """`make-certs.sh` as the operator runs it (no extra names: 127.0.0.1 is in by default)."""
    pki = folder / "pki"
    subprocess.run(["bash", str(MANIFESTS / "make-certs.sh"), str(pki)], check=True, timeout=60,
                   capture_output=True)
    return pki


def create(cluster: Cluster, obj: KubeObject, dry_run: bool = False) -> KubeObject:
    """Create `obj` through the dynamic client, with strict field validation (an unknown or
    misspelt field is an error, not a warning); the object as the API stored it."""
    from kubernetes.dynamic import DynamicClient

    dynamic: Any = DynamicClient(cluster.api_client)  # type: ignore[no-untyped-call]
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    query = [("fieldValidation", "Strict")] + ([("dryRun", "All")] if dry_run else [])
    created = resource.create(body=obj, namespace=obj["metadata"].get("namespace"), query_params=query)
    return dict(created.to_dict())


def delete(cluster: Cluster, obj: KubeObject) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic: Any = DynamicClient(cluster.api_client)  # type: ignore[no-untyped-call]
    resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    try:
        resource.delete(name=obj["metadata"]["name"], namespace=obj["metadata"].get("namespace"))
    except Exception as exc:  # noqa: BLE001 - cleanup goes on; the next session starts afresh anyway
        print(f"cleanup: {obj['kind']} {obj['metadata']['name']}: {exc!r}")


@pytest.fixture(scope="module")
def applied(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Applied]:
    """Certificates made, their Secret created, and every manifest applied, once for this module."""
    cluster = Cluster(control_plane)
    pki = run_make_certs(tmp_path_factory.mktemp("manifests"))
    objects = manifest_objects()
    done: list[KubeObject] = []
    state = Applied(objects, pki, cluster)
    try:
        for obj in objects:
            stored = create(cluster, obj)
            assert stored["metadata"]["name"] == obj["metadata"]["name"]
            done.append(obj)
            if obj["kind"] == "Namespace":  # as the operator runs make-certs.sh's command, once it exists
                volume = next(v for v in state.pod_spec["volumes"] if "secret" in v)
                secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                          "metadata": {"name": volume["secret"]["secretName"], "namespace": state.namespace},
                          "data": {key: base64.b64encode((pki / source).read_bytes()).decode() for key, source in
                                   (("tls.crt", "extender.crt"), ("tls.key", "extender.key"), ("ca.crt", "ca.crt"))}}
                create(cluster, secret)
                state.secret = secret
                done.append(secret)
        yield state
    finally:
        for obj in reversed(done):
            delete(cluster, obj)
        cluster.close()


@dataclass
class Extender:
    process: ExtenderProcess
    kubeconfig: Path

    def events(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.process.log_records() if r.get("event") == name]


@dataclass(frozen=True)
class Localiser:
    """The container's paths and port, mapped to this machine: each volume's mount path to the folder
    holding what the volume would, the listen address and the probes' port to the test's port."""

    folders: Mapping[str, Path]
    container_port: int
    port: int

    def __call__(self, text: str) -> str:
        # One pass, longest mount path first, and only where a path starts (not inside one):
        # the folders themselves may lie under a mount path such as /tmp.
        paths = sorted(self.folders, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(p) for p in paths) + r")(?![\w.-])")
        text = pattern.sub(lambda found: str(self.folders[found.group(1)]), text)
        return text.replace("0.0.0.0:", "127.0.0.1:").replace(f":{self.container_port}", f":{self.port}")


def service_account_kubeconfig(applied: Applied, harness: Harness, path: Path) -> Path:
    """A kubeconfig with nothing but the ServiceAccount's token (TokenRequest) and the cluster's CA."""
    core: Any = applied.cluster.core
    request = core.create_namespaced_service_account_token(
        applied.service_account, applied.namespace,
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    ca = base64.b64encode(harness.control_plane.pki.ca.read_bytes()).decode()
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": harness.control_plane.url,
                                                  "certificate-authority-data": ca}}],
        "users": [{"name": applied.service_account, "user": {"token": request.status.token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": applied.service_account}}],
        "current-context": "e2e",
    }))
    return path


def run_extender(applied: Applied, harness: Harness, name: str = "extender") -> tuple[Extender, Localiser]:
    """The Deployment's container as a subprocess: its command and arguments as written, each of its
    volume mounts a folder holding what the API serves for that volume (the ConfigMap's data and
    binaryData, the Secret's keys, or nothing), and in place of the pod's in-cluster credentials
    a kubeconfig with the ServiceAccount's token only."""
    pod_spec, container = applied.pod_spec, applied.container
    assert container["command"] == ["wasm-scheduler"]
    assert not any(arg.startswith("--kubeconfig") or arg.startswith("--api-server") for arg in container["args"])
    core: Any = applied.cluster.core
    base = harness.folder / name
    folders: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        volume = next(v for v in pod_spec["volumes"] if v["name"] == mount["name"])
        folder = base / mount["name"]
        folder.mkdir(parents=True, exist_ok=True)
        if "configMap" in volume:
            config_map = core.read_namespaced_config_map(volume["configMap"]["name"], applied.namespace)
            for key, text in (config_map.data or {}).items():
                (folder / key).write_text(text)
            for key, encoded in (config_map.binary_data or {}).items():
                (folder / key).write_bytes(base64.b64decode(encoded))
        elif "secret" in volume:
            secret = core.read_namespaced_secret(volume["secret"]["secretName"], applied.namespace)
            for key, encoded in (secret.data or {}).items():
                (folder / key).write_bytes(base64.b64decode(encoded))
                (folder / key).chmod(0o600)
        else:
            assert "emptyDir" in volume, volume
        folders[mount["mountPath"]] = folder
    kubeconfig = service_account_kubeconfig(applied, harness, base / "service-account.kubeconfig")
    localise = Localiser(folders, int(container["ports"][0]["containerPort"]), free_port())
    argv = [sys.executable, "-m", "wasm_scheduler.adapters.cli", *map(localise, container["args"]),
            "--kubeconfig", str(kubeconfig)]
    # Nothing else to find: no $KUBECONFIG, no ~/.kube/config, no in-cluster variables.
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(base)
    process = ManagedProcess(name, argv, harness.folder / f"{name}.log", env=env)
    harness.processes.append(process)
    extender = Extender(ExtenderProcess(process, localise.port, "https"), kubeconfig)
    extender.process.start(timeout_s=90)
    return extender, localise


def run_probe(applied: Applied, localise: Localiser, probe: str) -> subprocess.CompletedProcess[str]:
    """One of the container's exec probes, as the kubelet would run it inside the container."""
    command = applied.container[probe]["exec"]["command"]
    assert command[0] == "python"
    return subprocess.run([sys.executable, *map(localise, command[1:])], capture_output=True, text=True,
                          timeout=30)


def kube_scheduler_entry(applied: Applied, extender: Extender) -> tuple[ExtenderEntry, list[KubeObject]]:
    """kube-scheduler-config.yaml's extender entry and profiles, with the extender's local address
    and the certificates' folder in place of the control-plane node's."""
    config = yaml.safe_load(KUBE_SCHEDULER_CONFIG.read_text())
    assert config["kind"] == "KubeSchedulerConfiguration"
    (entry,) = config["extenders"]
    assert set(entry) <= ENTRY_FIELDS, set(entry) - ENTRY_FIELDS
    assert entry["enableHTTPS"] is True and entry["nodeCacheCapable"] is True
    tls = dict(entry["tlsConfig"])
    assert {"caFile", "certFile", "keyFile"} <= tls.keys()
    for key in ("caFile", "certFile", "keyFile"):
        tls[key] = str(applied.pki / Path(tls[key]).name)  # make-certs.sh's file names, where the pod mounts them
    return ExtenderEntry(
        url_prefix=extender.process.url, filter_verb=entry.get("filterVerb", ""),
        prioritize_verb=entry.get("prioritizeVerb", ""), bind_verb=entry.get("bindVerb", ""),
        preempt_verb=entry.get("preemptVerb", ""), weight=entry["weight"], node_cache_capable=True,
        ignorable=entry["ignorable"], http_timeout=entry["httpTimeout"],
        managed_resources=entry.get("managedResources", []), tls=tls), list(config["profiles"])


def test_the_manifests_apply_as_written_and_hang_together(applied: Applied) -> None:
    """Every object was accepted with strict field validation (the fixture); here: they name each
    other correctly, the role is exactly the three rules the code needs, the ConfigMap holds the
    NodeNumber guest byte for byte, and the pod template passes the restricted Pod Security
    admission of its namespace (a server-side dry run of a Pod made from it)."""
    kinds = [o["kind"] for o in applied.objects]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Service",
                     "Deployment"], kinds
    assert applied.rules() == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    ]
    binding = applied.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == applied.one("ClusterRole")["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": applied.service_account,
                                    "namespace": applied.namespace}]
    pod_spec, container = applied.pod_spec, applied.container
    assert pod_spec["serviceAccountName"] == applied.service_account
    deployment, service = applied.one("Deployment"), applied.one("Service")
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] in {p["name"] for p in container["ports"]}
    config = yaml.safe_load(KUBE_SCHEDULER_CONFIG.read_text())
    (entry,) = config["extenders"]
    assert entry["urlPrefix"] == (f"https://{service['metadata']['name']}.{applied.namespace}.svc:{port['port']}")
    assert entry["tlsConfig"]["serverName"] == f"{service['metadata']['name']}.{applied.namespace}.svc"
    assert {entry[k] for k in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb")} == \
        {"filter", "prioritize", "bind", "preempt"}  # the extender's defaults: the Deployment names no verb
    assert "/healthz" in container["livenessProbe"]["exec"]["command"]
    assert "/readyz" in container["readinessProbe"]["exec"]["command"]

    core: Any = applied.cluster.core
    config_map = core.read_namespaced_config_map(applied.one("ConfigMap")["metadata"]["name"],
                                                                 applied.namespace)
    assert base64.b64decode(config_map.binary_data["nodenumber.wasm"]) == NODENUMBER_WASM.read_bytes()
    from kubernetes import client

    apps: Any = client.AppsV1Api(applied.cluster.api_client)
    live = apps.read_namespaced_deployment(deployment["metadata"]["name"], applied.namespace)
    assert live.spec.template.spec.containers[0].args == container["args"]

    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "template-check", "namespace": applied.namespace, "labels": labels},
           "spec": pod_spec}
    create(applied.cluster, pod, dry_run=True)  # raises if Pod Security (restricted) or validation refuses it
    insecure = {**pod_spec, "containers": [{**container, "securityContext": {}}]}
    with pytest.raises(Exception, match="restricted"):
        create(applied.cluster, {**pod, "spec": insecure}, dry_run=True)


def test_pods_are_scheduled_through_the_extender_under_its_service_account(applied: Applied,
                                                                            harness: Harness) -> None:
    """The container's command line with the ServiceAccount's token only; its probes pass; kube-scheduler
    with the shipped extender entry (mutual TLS, nodeCacheCapable) places pods where NodeNumber says, and
    the extender creates every Binding."""
    cluster = harness.cluster
    cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, localise = run_extender(applied, harness)
    watching = extender.events("extender.view_watching")
    assert watching and watching[0]["credentials"] == f"--kubeconfig {extender.kubeconfig}", watching
    wait_for(lambda: extender.events("extender.view_synced") or None, 60, "extender.view_synced")
    listening = extender.events("extender.listening")
    assert listening and listening[0]["tls"] and listening[0]["client_certificates"], listening
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        result = run_probe(applied, localise, probe)
        assert result.returncode == 0, (probe, result.stderr[-2000:])

    entry, profiles = kube_scheduler_entry(applied, extender)
    harness.kube_scheduler([entry], profiles=profiles).start()
    names = cluster.create_pods(pod_object(f"op-pod-{i}") for i in range(20))
    bound = cluster.wait_bound(names, timeout_s=180)
    wrong = {pod: node for pod, node in bound.items() if digit_of(pod) != digit_of(node)}
    assert not wrong, f"placed against NodeNumber's score: {sorted(wrong.items())}"
    created = sorted(str(r.get("pod")) for r in extender.events("bind.api_created"))
    assert created == sorted(f"default/{n}" for n in names)
    assert not extender.events("bind.api_failed")
    assert not extender.events("extender.tls_refused")  # kube-scheduler's certificate, the probes' too
    # /metrics, as a scraper holding a certificate of the CA reads it (docs/operating.md).
    metrics = https_get(applied, localise.port, "/metrics")
    assert "wasm_scheduler_extender_bindings_total" in metrics, metrics[:2000]


def https_get(applied: Applied, port: int, path: str) -> str:
    """GET over mutual TLS with the extender's own certificate, as the pod's probes do."""
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=str(applied.pki / "ca.crt"))
    context.load_cert_chain(str(applied.pki / "extender.crt"), str(applied.pki / "extender.key"))
    with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=context, timeout=10) as answer:
        return str(answer.read().decode())


def test_a_permission_the_role_lacks_is_named_where_it_fails(applied: Applied, harness: Harness) -> None:
    """Without create on pods/binding, the extender's bind answers (and logs) an error that names the
    missing permission; kube-scheduler (ignorable entry) then binds the pod itself. Without list and
    watch on nodes, the watch logs the API's 403 naming the resource, the start says the view is not
    synced, and once the rule is back the view syncs without a restart."""
    cluster = harness.cluster
    rules = applied.rules()
    cluster.create_nodes(node_object(f"node-{i}") for i in range(10))
    extender, _localise = run_extender(applied, harness)
    wait_for(lambda: extender.events("extender.view_synced") or None, 60, "extender.view_synced")
    entry, profiles = kube_scheduler_entry(applied, extender)
    assert entry.ignorable, "the test below expects kube-scheduler to bind after the extender's bind fails"
    scheduler = harness.kube_scheduler([entry], profiles=profiles).start()
    try:
        # 1. No create on pods/binding.
        applied.set_rules([r for r in rules if r["resources"] != ["pods/binding"]])
        cluster.create_pods([pod_object("denied-3")])
        bound = cluster.wait_bound(["denied-3"], timeout_s=120)
        assert bound["denied-3"] == "node-3"  # NodeNumber's filter and score still ran; kube-scheduler bound it
        failed = wait_for(lambda: extender.events("bind.api_failed") or None, 30, "bind.api_failed")
        error = str(failed[0]["error"])
        assert error.startswith("forbidden: the extender's credentials (its ServiceAccount in a cluster) may not "
                                "create pods/binding (RBAC: grant the verb create on pods/binding): binding "
                                "default/denied-3 to node-3: "), error
        assert f'User "{applied.user}" cannot create resource "pods/binding"' in error, error
        assert not extender.events("bind.api_created")
        # The answer carried the same line to kube-scheduler, which logged it before binding the pod itself.
        wait_for(lambda: "may not create pods/binding (RBAC" in scheduler.log_path.read_text(errors="replace")
                 or None, 30, "the extender's answer in kube-scheduler's log")

        # 2. No list and watch on nodes: a new extender (the pod restarted, say) cannot build its view.
        applied.set_rules([r for r in rules if r["resources"] != ["nodes"]])
        started = time.monotonic()
        denied, denied_at = run_extender(applied, harness, name="extender-no-nodes")
        restarted = wait_for(lambda: [r for r in denied.events("extender.watch_restarted")
                                      if r.get("resource") == "nodes"] or None, 30, "a nodes watch_restarted")
        assert restarted[0]["status"] == 403 and restarted[0]["level"] == "warning", restarted[0]
        assert f'User "{applied.user}" cannot list resource "nodes"' in restarted[0]["error"], restarted[0]
        timeout = wait_for(lambda: denied.events("extender.view_sync_timeout") or None, 30, "view_sync_timeout")
        assert 'cannot list resource "nodes"' in str(timeout[0]["error"]), timeout[0]
        # A 403 does not hold the start for --sync-timeout (60 s): waiting would not cure it.
        assert time.monotonic() - started < 45
        assert not denied.events("extender.view_synced")
        # Not ready: the pod's readiness probe fails, so the Service sends kube-scheduler nowhere.
        probe = run_probe(applied, denied_at, "readinessProbe")
        assert probe.returncode != 0 and "503" in probe.stderr, (probe.returncode, probe.stderr[-1000:])
        not_ready = wait_for(lambda: denied.events("extender.not_ready") or None, 10, "extender.not_ready")
        assert 'cannot list resource "nodes"' in " ".join(map(str, not_ready[0]["reasons"])), not_ready[0]

        # The rule back: the watch, still retrying, syncs by itself, and the probe passes.
        applied.set_rules(rules)
        wait_for(lambda: denied.events("extender.view_synced") or None, 90, "view_synced once the rule is back")
        wait_for(lambda: run_probe(applied, denied_at, "readinessProbe").returncode == 0 or None, 30,
                 "the readiness probe passing once the view is synced")
    finally:
        applied.set_rules(rules)
