"""Kubernetes resource quantities and what a pod requests.

This module owns the arithmetic kube-scheduler does on resources: parsing quantity
text ("250m", "1.5Gi", "2e3") into integers (CPU in millicores, everything else in
whole units, rounded up as Kubernetes rounds), the `Resources` a node offers or a pod
asks for, and a pod's request the way `resourcehelper.PodRequests` computes it
(containers summed, init containers as a running maximum, sidecars kept, overhead
added), both as asked and with kube-scheduler's non-zero defaults for scoring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Final

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"

#: kube-scheduler's defaults for a container that requests nothing (scoring only).
DEFAULT_MILLI_CPU_REQUEST: Final = 100
DEFAULT_MEMORY_REQUEST: Final = 200 * 1024 * 1024

_SUFFIXES: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
    "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))([eE][+-]?\d+|[a-zA-Z]*)$")


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


def parse_quantity(value: Any) -> Decimal:
    """The exact value of a quantity given as text or a YAML number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"expected a quantity such as '500m' or '2Gi', got {type(value).__name__}")
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (such as '500m', '1.5', '2Gi' or '1e3')")
    number, suffix = match.groups()
    try:
        base = Decimal(number)
        if suffix[:1] in ("e", "E"):
            return base * (Decimal(10) ** int(suffix[1:]))
        if suffix not in _SUFFIXES:
            raise QuantityError(f"{text!r} has an unknown suffix {suffix!r} "
                                f"(known: {', '.join(s for s in _SUFFIXES if s)})")
        return base * _SUFFIXES[suffix]
    except InvalidOperation:
        raise QuantityError(f"{text!r} is not a quantity") from None


def quantity_value(name: str, value: Any) -> int:
    """A resource's value as kube-scheduler counts it: millicores for cpu, else units (rounded up)."""
    amount = parse_quantity(value)
    if name == CPU:
        amount *= 1000
    return math.ceil(amount)


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of every resource: cpu in millicores, memory and storage in bytes."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pods: int = 0
    #: Extended and other scalar resources (``nvidia.com/gpu``, ``hugepages-2Mi``...).
    scalar: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_list(cls, values: Mapping[str, Any] | None) -> Resources:
        """From a ResourceList (``{"cpu": "2", "memory": "4Gi"}``); QuantityError names the key."""
        if not values:
            return cls()
        if not isinstance(values, Mapping):
            raise QuantityError(f"expected a mapping of resource name to quantity, got {type(values).__name__}")
        cpu = memory = storage = pods = 0
        scalar: dict[str, int] = {}
        for name, raw in values.items():
            try:
                amount = quantity_value(str(name), raw)
            except QuantityError as exc:
                raise QuantityError(f"{name}: {exc}") from None
            if name == CPU:
                cpu = amount
            elif name == MEMORY:
                memory = amount
            elif name == EPHEMERAL_STORAGE:
                storage = amount
            elif name == PODS:
                pods = amount
            else:
                scalar[str(name)] = amount
        return cls(cpu, memory, storage, pods, scalar)

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pods
        return self.scalar.get(name, 0)

    def __add__(self, other: Resources) -> Resources:
        return self._combine(other, lambda a, b: a + b)

    def __sub__(self, other: Resources) -> Resources:
        return self._combine(other, lambda a, b: a - b)

    def max(self, other: Resources) -> Resources:
        return self._combine(other, max)

    def _combine(self, other: Resources, op: Any) -> Resources:
        scalar = dict(self.scalar)
        for name, value in other.scalar.items():
            scalar[name] = op(scalar.get(name, 0), value)
        for name in self.scalar.keys() - other.scalar.keys():
            scalar[name] = op(self.scalar[name], 0)
        return Resources(
            op(self.milli_cpu, other.milli_cpu), op(self.memory, other.memory),
            op(self.ephemeral_storage, other.ephemeral_storage), op(self.allowed_pods, other.allowed_pods),
            {k: v for k, v in scalar.items() if v},
        )

    @property
    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or any(self.scalar.values()))


ZERO: Final = Resources()


@dataclass(frozen=True, slots=True)
class PodRequests:
    """What a pod asks for, as the filter counts it and as scoring counts it."""

    requested: Resources
    #: The same with kube-scheduler's non-zero defaults for cpu and memory (scoring).
    non_zero: Resources


def _container_requests(container: Mapping[str, Any], non_zero: bool) -> Resources:
    resources = container.get("resources") or {}
    # The API server defaults a request to its limit when only the limit is given.
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    amount = Resources.from_list(merged)
    if non_zero:
        cpu = amount.milli_cpu if CPU in merged else DEFAULT_MILLI_CPU_REQUEST
        memory = amount.memory if MEMORY in merged else DEFAULT_MEMORY_REQUEST
        amount = Resources(cpu, memory, amount.ephemeral_storage, 0, amount.scalar)
    return amount


def _sum_requests(spec: Mapping[str, Any], non_zero: bool) -> Resources:
    total = ZERO
    for container in spec.get("containers") or ():
        total = total + _container_requests(container, non_zero)
    # Init containers run one at a time before the app containers, sidecars (restartable
    # init containers) keep running: the pod needs the larger of the two phases.
    sidecars = ZERO
    init_peak = ZERO
    for container in spec.get("initContainers") or ():
        amount = _container_requests(container, non_zero)
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + amount
            init_peak = init_peak.max(sidecars)
        else:
            init_peak = init_peak.max(sidecars + amount)
    total = (total + sidecars).max(init_peak)
    overhead = spec.get("overhead")
    if overhead:
        total = total + Resources.from_list(overhead)
    return total


def pod_requests(pod: Mapping[str, Any]) -> PodRequests:
    """The pod's request; QuantityError (naming the container) if a quantity is malformed."""
    spec = pod.get("spec") or {}
    for kind in ("containers", "initContainers"):
        for i, container in enumerate(spec.get(kind) or ()):
            try:
                _container_requests(container, False)
            except QuantityError as exc:
                raise QuantityError(f"spec.{kind}[{i}].resources: {exc}") from None
    try:
        return PodRequests(_sum_requests(spec, False), _sum_requests(spec, True))
    except QuantityError as exc:
        raise QuantityError(f"spec.overhead: {exc}") from None
