"""Checking a compiled module against the guest ABI before any instance runs.

This module owns the load-time rules of `ABI.md`: a `memory` export, the exact
signature of every extension-point export, coupled exports, at least one plugin
export, and only known imports with their exact signatures. The result, `GuestShape`,
says which extension points the guest implements and which WASI functions it links.

See `docs/guest-authors.md` ("The raw guest interface").
"""

from __future__ import annotations

from dataclasses import dataclass

import wasmtime

from wasm_scheduler.registry.errors import GuestLoadError
from wasm_scheduler.registry.guest_abi import (
    COUPLED_EXPORTS,
    EXPORT_RESULTS,
    HOST_IMPORTS,
    K8S_API,
    K8S_KLOG,
    K8S_SCHEDULER,
    PREVIEW1_NAMES,
    WASI,
    WASI_SIGNATURES,
    Export,
    is_export,
)

_LETTER = {"i32": "i", "i64": "I"}


@dataclass(frozen=True)
class GuestShape:
    """What a valid guest exports and imports."""

    exports: frozenset[Export]
    has_start: bool
    #: (name, type) of each wasi_snapshot_preview1 function the guest imports.
    wasi_imports: tuple[tuple[str, wasmtime.FuncType], ...]
    #: (module, name) of each ABI host function the guest imports.
    host_imports: frozenset[tuple[str, str]]


def _types(values: list[wasmtime.ValType]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


def _signature(params: tuple[str, ...], results: tuple[str, ...]) -> str:
    return f"({', '.join(params)}) -> ({', '.join(results)})"


def validate(guest: str, module: wasmtime.Module) -> GuestShape:
    """The guest's shape, or a GuestLoadError naming the first rule it breaks."""
    exports: set[Export] = set()
    has_memory = False
    has_start = False
    for export in module.exports:
        kind = export.type
        if export.name == "memory":
            if not isinstance(kind, wasmtime.MemoryType):
                raise GuestLoadError(guest, "export 'memory' is not a memory")
            has_memory = True
        elif export.name == "_start":
            if not isinstance(kind, wasmtime.FuncType) or kind.params or kind.results:
                raise GuestLoadError(guest, "export '_start' must be a function () -> ()")
            has_start = True
        elif is_export(export.name):
            expected = EXPORT_RESULTS[export.name]
            if not isinstance(kind, wasmtime.FuncType):
                raise GuestLoadError(guest, f"export {export.name!r} is not a function")
            actual = (_types(kind.params), _types(kind.results))
            if actual != ((), expected):
                raise GuestLoadError(
                    guest,
                    f"export {export.name!r} has signature {_signature(*actual)}, "
                    f"expected {_signature((), expected)}",
                )
            exports.add(export.name)
    if not has_memory:
        raise GuestLoadError(guest, "the module exports no memory named 'memory'")
    if not exports:
        raise GuestLoadError(
            guest, f"the module exports none of the plugin functions ({', '.join(EXPORT_RESULTS)})"
        )
    for export_name, needs in COUPLED_EXPORTS.items():
        if export_name in exports and needs not in exports:
            raise GuestLoadError(guest, f"export {export_name!r} requires export {needs!r}, which is missing")

    wasi_imports: list[tuple[str, wasmtime.FuncType]] = []
    host_imports: set[tuple[str, str]] = set()
    for imp in module.imports:
        where = f"import {imp.module}.{imp.name}"
        kind = imp.type
        if imp.module not in (WASI, K8S_API, K8S_SCHEDULER, K8S_KLOG):
            raise GuestLoadError(guest, f"{where}: unknown module {imp.module!r}")
        if not isinstance(kind, wasmtime.FuncType):
            raise GuestLoadError(guest, f"{where}: only functions may be imported")
        actual = (_types(kind.params), _types(kind.results))
        if imp.module == WASI:
            if imp.name not in PREVIEW1_NAMES:
                raise GuestLoadError(guest, f"{where}: not a wasi_snapshot_preview1 function")
            implemented = WASI_SIGNATURES.get(imp.name)
            if implemented is not None:
                params = "".join(_LETTER.get(p, "?") for p in actual[0])
                results = "".join(_LETTER.get(r, "?") for r in actual[1])
                if (params, results) != implemented:
                    raise GuestLoadError(guest, f"{where}: wrong signature {_signature(*actual)}")
            elif actual[1] not in ((), ("i32",)):
                raise GuestLoadError(guest, f"{where}: wrong signature {_signature(*actual)}")
            wasi_imports.append((imp.name or "", kind))
            continue
        key = (imp.module, imp.name or "")
        if key not in HOST_IMPORTS:
            raise GuestLoadError(guest, f"{where}: the ABI defines no such host function")
        expected_sig = HOST_IMPORTS[key]
        if actual != expected_sig:
            raise GuestLoadError(
                guest, f"{where} has signature {_signature(*actual)}, expected {_signature(*expected_sig)}"
            )
        host_imports.add(key)
    return GuestShape(frozenset(exports), has_start, tuple(wasi_imports), frozenset(host_imports))
