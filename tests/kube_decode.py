"""Protobuf bytes of v1.Pod, v1.Node and v1.NodeList back to the kubectl JSON shape.

This module owns decoding, which only the tests need (the host encodes, and no guest
hands a Kubernetes object back): the round trips of ``actors.kube.codec`` and reading
what a guest received. Decoding gives back the shape the encoders take. Protobuf keeps
presence, so explicit zeros, ``false`` and empty objects survive a round trip; empty
lists and maps, and nulls, come back absent. An empty ``Time`` message (how Go writes a
null time) also decodes as absent. A bad message raises `KubeCodecError` whose message
starts with the dotted JSON path, like the encoders' errors; nothing else escapes.

The tables (field number -> JSON key and decoder) are built once at import from the
schema, ``actors.kube.schema``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from google.protobuf.message import Message

from wasm_scheduler.actors.kube import schema as ks
from wasm_scheduler.actors.kube.codec import KubeCodecError, _expected, _format_segments

__all__ = ["decode_node", "decode_node_list", "decode_pod"]

_EPOCH_ORDINAL: Final = _dt.date(1970, 1, 1).toordinal()

# ======================================================================================
# Protobuf value -> JSON value
# ======================================================================================


class _DecodeFailure(Exception):
    """Raised inside decoding; collects the path segments (innermost first) on its way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segments: list[Any] = []


def _from_str(value: Any) -> str:
    # proto2 strings are not UTF-8 checked on parse: upb hands out bytes for bad ones.
    if type(value) is str:
        return value
    raise _DecodeFailure("string field is not valid UTF-8")


def _from_str_list(values: Any) -> list[str]:
    out = list(values)
    for item in out:
        if type(item) is not str:
            raise _DecodeFailure("string field is not valid UTF-8")
    return out


def _from_bytes(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _format_time(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    try:
        date = _dt.date.fromordinal(days + _EPOCH_ORDINAL)
    except (ValueError, OverflowError):
        raise _DecodeFailure(f"time {seconds}s since the epoch is out of range") from None
    hour, rest = divmod(rest, 3600)
    minute, second = divmod(rest, 60)
    return f"{date.year:04d}-{date.month:02d}-{date.day:02d}T{hour:02d}:{minute:02d}:{second:02d}"


# A decoder's way to say "leave this key out": Go writes a null Time (or FieldsV1) as
# an empty message, and reads an empty message back as null.
_OMIT: Final = object()


def _from_time(value: Message) -> Any:
    if not value.ListFields():
        return _OMIT
    return _format_time(value.seconds) + "Z"


def _from_micro_time(value: Message) -> Any:
    if not value.ListFields():
        return _OMIT
    seconds, nanos = value.seconds, value.nanos
    seconds += nanos // 1_000_000_000
    nanos %= 1_000_000_000
    return f"{_format_time(seconds)}.{nanos // 1000:06d}Z"


def _from_quantity(value: Message) -> str:
    return _from_str(value.string)


def _from_int_or_string(value: Message) -> int | str:
    kind = value.type
    if kind == 0:
        return int(value.intVal)
    if kind == 1:
        return _from_str(value.strVal)
    raise _DecodeFailure(f"IntOrString type {kind} is neither 0 (int) nor 1 (string)")


def _from_fields_v1(value: Message) -> Any:
    raw = value.Raw
    if not raw:
        return _OMIT
    try:
        return json.loads(raw)
    except ValueError:
        raise _DecodeFailure("FieldsV1 does not hold JSON") from None


# ======================================================================================
# Per-message tables, built once at import
# ======================================================================================

_Decoder = Callable[[Any], Any] | None  # None: the protobuf value is already JSON
#: field number -> (JSON key, decoder, whether the field is a Go embedded struct)
_Table = dict[int, tuple[str, _Decoder, bool]]


def _decode_message(msg: Message, table: _Table) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        entry = table.get(fd.number)
        if entry is None:
            continue
        name, decode, inline = entry
        if decode is not None:
            try:
                value = decode(value)
            except _DecodeFailure as failure:
                if not inline:
                    failure.segments.append(name)
                raise
            except Exception as exc:
                wrapped = _DecodeFailure(f"{type(exc).__name__}: {exc}")
                if not inline:
                    wrapped.segments.append(name)
                raise wrapped from exc
            if value is _OMIT:
                continue
        if inline:
            out.update(value)
        else:
            out[name] = value
    return out


_SPECIAL_DECODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    ks.QUANTITY: _from_quantity,
    ks.TIME: _from_time,
    ks.MICRO_TIME: _from_micro_time,
    ks.INT_OR_STRING: _from_int_or_string,
    ks.FIELDS_V1: _from_fields_v1,
}


def _message_decoder(table: _Table) -> Callable[[Any], Any]:
    def decode(value: Message) -> dict[str, Any]:
        return _decode_message(value, table)

    return decode


def _repeated_message_decoder(table: _Table) -> Callable[[Any], Any]:
    def decode(values: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        try:
            for value in values:
                out.append(_decode_message(value, table))
        except _DecodeFailure as failure:
            failure.segments.append(len(out))
            raise
        return out

    return decode


def _string_map_decoder(values: Any) -> dict[str, str]:
    out = dict(values)
    for key, value in out.items():
        if type(key) is not str or type(value) is not str:
            raise _DecodeFailure("map entry is not valid UTF-8")
    return out


def _quantity_map_decoder(values: Any) -> dict[str, str]:
    out = {}
    for key, value in values.items():
        if type(key) is not str:
            raise _DecodeFailure("map key is not valid UTF-8")
        out[key] = _from_quantity(value)
    return out


def _field_decoder(field: ks.Field, tables: Mapping[str, _Table]) -> _Decoder:
    """The decoder of one (non-embedded) field."""
    ftype, label, type_name = field.type, field.label, field.type_name
    if ftype != ks.MESSAGE:
        if label == ks.MAP:
            return _string_map_decoder
        if label == ks.REPEATED:
            if ftype == ks.STRING:
                return _from_str_list
            if ftype == ks.BYTES:
                return lambda values: [_from_bytes(v) for v in values]
            return list
        return {ks.STRING: _from_str, ks.BYTES: _from_bytes}.get(ftype)
    assert type_name is not None
    if type_name in _SPECIAL_DECODERS:
        if label == ks.MAP:
            return _quantity_map_decoder
        return _SPECIAL_DECODERS[type_name]
    sub = tables[type_name]
    if label == ks.REPEATED:
        return _repeated_message_decoder(sub)
    return _message_decoder(sub)


def _build_tables() -> Mapping[str, _Table]:
    # Every table exists (empty) before any is filled: decoders hold their sub-table and
    # read it only when they run, after import.
    tables: dict[str, _Table] = {name: {} for name in ks.MESSAGE_FIELDS}
    for name, fields in ks.MESSAGE_FIELDS.items():
        table = tables[name]
        for field in fields:
            if field.label == ks.EMBED:
                assert field.type_name is not None
                table[field.number] = (field.name, _message_decoder(tables[field.type_name]), True)
            else:
                table[field.number] = (field.name, _field_decoder(field, tables), False)
    return tables


_TABLES: Final = _build_tables()


class _Kind:
    """One top-level message: its class and decoding table."""

    __slots__ = ("name", "cls", "dec")

    def __init__(self, name: str) -> None:
        self.name = name
        self.cls: type[Message] = ks.message_class(name)
        self.dec: _Table = _TABLES[name]


_POD: Final = _Kind(f"{ks.CORE_V1}.Pod")
_NODE: Final = _Kind(f"{ks.CORE_V1}.Node")
_NODE_LIST: Final = _Kind(f"{ks.CORE_V1}.NodeList")


# ======================================================================================
# Public API
# ======================================================================================


def _parse(spec: _Kind, data: Any) -> Message:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise _expected(None, "bytes", data)
    msg = spec.cls()
    try:
        msg.ParseFromString(bytes(data))
    except Exception as exc:  # DecodeError and friends
        kind = spec.name.rsplit(".", 1)[-1]
        raise KubeCodecError(f"<root>: not a valid {kind} message: {exc}") from exc
    return msg


def _decode(msg: Message, spec: _Kind) -> dict[str, Any]:
    try:
        return _decode_message(msg, spec.dec)
    except _DecodeFailure as failure:
        where = _format_segments(failure.segments[::-1])
        raise KubeCodecError(f"{where}: {failure.reason}") from failure
    except RecursionError as exc:  # not reachable with this schema; kept for the contract
        raise KubeCodecError(f"<root>: {exc}") from exc


def decode_pod(data: bytes) -> dict[str, Any]:
    """Protobuf bytes of a ``v1.Pod`` back to the kubectl JSON shape (no apiVersion/kind)."""
    return _decode(_parse(_POD, data), _POD)


def decode_node(data: bytes) -> dict[str, Any]:
    """Protobuf bytes of a ``v1.Node`` back to the kubectl JSON shape (no apiVersion/kind)."""
    return _decode(_parse(_NODE, data), _NODE)


def decode_node_list(data: bytes) -> list[dict[str, Any]]:
    """The items of a protobuf ``v1.NodeList``, each in the kubectl JSON shape."""
    decoded = _decode(_parse(_NODE_LIST, data), _NODE_LIST)
    items: list[dict[str, Any]] = decoded.get("items", [])
    return items
