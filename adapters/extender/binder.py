"""Creating a pod's Binding through the Kubernetes API, for pods no wasm plugin bound.

This module owns the one write the extender makes to a cluster: POST of a `v1.Binding`
to the pod's `binding` subresource, with the official `kubernetes` client configured
from in-cluster credentials, a kubeconfig, or an explicit API server URL (tests point it
at a local endpoint that records the request). Turning those credentials into a client
(`new_api_client`) is here too, for the binder and for the watched view of the cluster
(`cluster_watch`) alike.

The client is an optional dependency (``pip install 'wasm-scheduler[extender]'``): it is
imported only when a binder is built, and its absence then is one clear `UserError`
naming the option that asked for the API.

See `docs/extender.md` ("The binding cycle") and `docs/operating.md` for its RBAC.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from wasm_scheduler.adapters.framework.cluster import parse_yaml_documents, read_regular_file
from wasm_scheduler.adapters.framework.errors import UserError, clip
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.extender.binder")

#: How to install the optional Kubernetes client.
INSTALL_HINT = "pip install 'wasm-scheduler[extender]'"


def import_kubernetes(requested_by: str, needed_for: str = "creating Bindings") -> tuple[Any, Any]:
    """The `kubernetes.client` and `kubernetes.config` modules; a UserError naming `requested_by`
    (the option or setting that asked for the API) and what it is `needed_for` when the optional
    client is not installed."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise UserError(f"{requested_by}: {needed_for} needs the Kubernetes API client, which is not "
                        f"installed: {INSTALL_HINT}") from None
    return client, config


def credentials_origin(api_server: str = "", kubeconfig: str = "") -> str:
    """How a UserError names the credentials: the option, or in-cluster when neither is given."""
    return (f"--api-server {api_server}" if api_server else f"--kubeconfig {kubeconfig}"
            if kubeconfig else "in-cluster credentials (KUBERNETES_SERVICE_HOST is set)")


#: HTTPS connections to the API server each client keeps open for reuse: above the
#: extender's default worker threads (the client's own default is 5 per CPU).
API_CONNECTIONS = 64


def new_api_client(api_server: str = "", kubeconfig: str = "", requested_by: str = "",
                   needed_for: str = "creating Bindings") -> tuple[Any, Any]:
    """The `kubernetes.client` module and an `ApiClient` for an explicit API server URL, else a
    kubeconfig, else in-cluster credentials: the one place the extender's API credentials are
    turned into a client (the binder and the cluster watch both use it). A missing client, a bad
    kubeconfig or missing in-cluster credentials is a one-line UserError naming `requested_by`."""
    requested_by = requested_by or credentials_origin(api_server, kubeconfig)
    client, config = import_kubernetes(requested_by, needed_for)
    configuration = client.Configuration()
    if api_server:
        configuration.host = api_server.rstrip("/")
    elif kubeconfig:
        check_kubeconfig(Path(kubeconfig))
        try:
            config.load_kube_config(config_file=kubeconfig, client_configuration=configuration,
                                    persist_config=False)
        except Exception as exc:  # ConfigException, OSError, ValueError from the client's loader
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UserError(f"{kubeconfig}: kubeconfig: {clip(first, 240)}") from None
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except Exception as exc:  # ConfigException: the service account's token or CA is missing
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise UserError(f"in-cluster credentials: {clip(first, 240)}") from None
    # Binds run on many threads at once (kube-scheduler binds pods in parallel): a pool smaller
    # than that opens, and drops, a new TLS connection for every bind beyond it.
    configuration.connection_pool_maxsize = API_CONNECTIONS
    return client, client.ApiClient(configuration)


class Binder(Protocol):
    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind the pod; "" on success, else the error message."""


@dataclass
class NoBinder:
    """For a server that has no cluster credentials: bind requests fail clearly."""

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        return ("no Kubernetes API configured to create the Binding (start the extender with "
                "--kubeconfig, --api-server, or inside a cluster)")


class KubernetesBinder:
    """Binds through the API server with the official client."""

    def __init__(self, api_server: str = "", kubeconfig: str = "", timeout_s: float = 10.0,
                 requested_by: str = "") -> None:
        client, api_client = new_api_client(api_server, kubeconfig, requested_by)
        self._api = client.CoreV1Api(api_client)
        self._client = client
        self._timeout = timeout_s

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        client = self._client
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            response = self._api.create_namespaced_pod_binding(
                name, namespace, body, _preload_content=False, _request_timeout=self._timeout
            )
            status = getattr(response, "status", 201)
            # Read the (small) answer and give the connection back: unread, urllib3 keeps it out of
            # the pool, and every bind opened a new TLS connection to the API server.
            with contextlib.suppress(Exception):
                response.read()
                response.release_conn()
            if status >= 300:
                return f"API server answered {status} to the binding of {namespace}/{name}"
        except Exception as exc:  # the client raises ApiException, urllib3 and socket errors alike
            error = binding_failure(exc, namespace, name, node)
            log.warning("bind.api_failed", pod=f"{namespace}/{name}", node=node, error=error)
            return error
        log.info("bind.api_created", pod=f"{namespace}/{name}", pod_uid=uid, node=node)
        return ""


def binding_failure(exc: BaseException, namespace: str, name: str, node: str) -> str:
    """One line for a failed Binding POST: an error answer of the API server by its status and the
    message of its Status body, a 403 said as the missing RBAC permission (the extender's credentials,
    its ServiceAccount in a cluster, may not create ``pods/binding``); any other failure (connection
    refused, a timeout) by its first line."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:  # an ApiException: the server answered
        message = api_message(exc)
        if status == 403:
            return (f"forbidden: the extender's credentials (its ServiceAccount in a cluster) may not create "
                    f"pods/binding (RBAC: grant the verb create on pods/binding): binding {namespace}/{name} to "
                    f"{node}: {message}")
        return f"binding {namespace}/{name} to {node} failed: the API server answered {status}: {message}"
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"binding {namespace}/{name} to {node} failed: {clip(first, 300)}"


def api_message(exc: BaseException) -> str:
    """The ``message`` of an ApiException's Status body, else its reason, on one line."""
    body = getattr(exc, "body", None)
    try:
        decoded = json.loads(body) if isinstance(body, str | bytes) else None
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("message"), str) and decoded["message"]:
        text = decoded["message"]
    else:
        text = str(getattr(exc, "reason", "") or type(exc).__name__)
    return clip(" ".join(text.split()), 300)


def find_kubeconfig(environ: Mapping[str, str], home: Path) -> Path | None:
    """The kubeconfig kubectl would read without --kubeconfig: the first existing file of
    ``$KUBECONFIG`` (a list separated by the path separator), else ``~/.kube/config``; None if none exists.

    kubectl merges every file of ``$KUBECONFIG``; this reads the first existing one, which
    is where kubectl takes the current context from when the files do not conflict.
    """
    listed = environ.get("KUBECONFIG", "")
    if listed:
        for entry in listed.split(os.pathsep):
            if entry and Path(entry).expanduser().exists():
                return Path(entry).expanduser()
        return None
    default = home / ".kube" / "config"
    return default if default.exists() else None


def check_kubeconfig(path: Path) -> None:
    """UserError naming `path` and the problem unless it is a kubeconfig whose current
    context names a cluster (with a server) and, when it names one, a user, and every
    certificate or key file it names is readable."""
    docs = parse_yaml_documents(_text(path), str(path))
    doc = docs[0] if len(docs) == 1 else None
    if not isinstance(doc, Mapping):
        raise UserError(f"{path}: not a kubeconfig (expected one mapping with clusters, contexts and users)")
    current = doc.get("current-context")
    if not isinstance(current, str) or not current:
        raise UserError(f"{path}: no current-context (set one with `kubectl config use-context`)")
    context = _entry(doc, "contexts", "context", current, path)
    cluster_name = context.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise UserError(f"{path}: context {clip(current)!r} names no cluster")
    cluster = _entry(doc, "clusters", "cluster", cluster_name, path)
    if not isinstance(cluster.get("server"), str) or not cluster.get("server"):
        raise UserError(f"{path}: cluster {clip(cluster_name)!r} has no server")
    files = [("certificate-authority", cluster.get("certificate-authority"))]
    user_name = context.get("user")
    if user_name is not None:
        if not isinstance(user_name, str):
            raise UserError(f"{path}: context {clip(current)!r}: user: expected a name")
        if user_name:
            user = _entry(doc, "users", "user", user_name, path)
            files += [("client-certificate", user.get("client-certificate")), ("client-key", user.get("client-key")),
                      ("tokenFile", user.get("tokenFile"))]
    for field, name in files:
        if name is None or name == "":
            continue
        if not isinstance(name, str):
            raise UserError(f"{path}: {field}: expected a file name")
        target = Path(name).expanduser()
        if not target.is_absolute():
            target = path.parent / target  # kubectl resolves it against the kubeconfig's directory
        try:
            with open(target, "rb") as file:
                file.read(1)
        except OSError as exc:
            raise UserError(f"{path}: {field} {clip(str(target))}: cannot read it: {exc.strerror or exc}") from None


def _text(path: Path) -> str:
    try:
        return read_regular_file(path, "kubeconfig").decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: cannot read the kubeconfig file: not UTF-8 text") from None


def _entry(doc: Mapping[str, Any], section: str, key: str, name: str, path: Path) -> Mapping[str, Any]:
    """The `key` mapping of the entry `name` of a kubeconfig list (contexts, clusters, users)."""
    entries = doc.get(section)
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and entry.get("name") == name:
            body = entry.get(key) or {}
            if not isinstance(body, Mapping):
                raise UserError(f"{path}: {section[:-1]} {clip(name)!r}: {key}: expected a mapping")
            return body
    singular = section[:-1]
    raise UserError(f"{path}: no {singular} named {clip(name)!r} in {section}")
