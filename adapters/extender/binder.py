"""Creating a pod's Binding through the Kubernetes API, for pods no wasm plugin bound.

This module owns the one write the extender makes to a cluster: POST of a `v1.Binding`
to the pod's `binding` subresource, with the official `kubernetes` client configured
from in-cluster credentials, a kubeconfig, or an explicit API server URL (tests point it
at a local endpoint that records the request).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import structlog

log = structlog.get_logger("adapters.extender.binder")


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

    def __init__(self, api_server: str = "", kubeconfig: str = "", timeout_s: float = 10.0) -> None:
        from kubernetes import client, config

        if api_server:
            configuration = client.Configuration()
            configuration.host = api_server.rstrip("/")
            api_client = client.ApiClient(configuration)
        elif kubeconfig:
            api_client = config.new_client_from_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
            api_client = client.ApiClient()
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
            if status >= 300:
                return f"API server answered {status} to the binding of {namespace}/{name}"
        except Exception as exc:  # the client raises ApiException, urllib3 and socket errors alike
            log.warning("bind.api_failed", pod=f"{namespace}/{name}", node=node, error=str(exc))
            return f"binding {namespace}/{name} to {node} failed: {str(exc).splitlines()[0] if str(exc) else exc}"
        log.info("bind.api_created", pod=f"{namespace}/{name}", pod_uid=uid, node=node)
        return ""
