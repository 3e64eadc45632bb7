"""Kubernetes objects from the host's dict shape to the protobuf wire a guest reads.

This module owns the encoding of v1.Pod, v1.Node and v1.NodeList from the shape
``kubectl get -o yaml`` prints (camelCase keys, RFC 3339 times, quantities as text) to
the plain protobuf encoding of the ``k8s.io.api.core.v1`` messages that
``actors.kube.schema`` defines (no ``k8s\0`` envelope, no TypeMeta). Its one user is
the guest's host functions; the host never decodes these bytes. Encoding is
deterministic (map entries sorted by key, as Go's marshallers do), unknown keys are
ignored and logged at debug level, and a value of the wrong type raises
`KubeCodecError` naming its dotted JSON path. Each message type gets its table at
import (JSON key -> field encoder), so a call only walks the data; a `PodPartCache`
lets pods that share their spec or status share those fields' bytes.
`docs/abi-notes.md` ("The objects a guest reads") has the JSON conventions followed.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as _dt
import json
import marshal
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from google.protobuf.message import Message

from wasm_scheduler.actors.kube import schema as ks
from wasm_scheduler.logger import get_logger

__all__ = [
    "KubeCodecError",
    "PodPartCache",
    "encode_node",
    "encode_node_list",
    "encode_pod",
]

log = get_logger(__name__)


class KubeCodecError(ValueError):
    """A Kubernetes object could not be converted; the message names the path."""


# ======================================================================================
# Paths and errors
# ======================================================================================

# A JSON path as a linked list: (parent, segment), None at the root. Segments are str
# (object keys) or int (list indices). Building one costs a tuple; formatting happens
# only when an error or an unknown key is reported.
_Path = tuple[Any, Any] | None

_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")


def _format_segments(segments: Sequence[Any]) -> str:
    parts: list[str] = []
    for seg in segments:
        if type(seg) is int:
            parts.append(f"[{seg}]")
        elif _PLAIN_KEY.match(seg):
            parts.append(f".{seg}" if parts else seg)
        else:
            parts.append(f"[{json.dumps(seg, ensure_ascii=False)}]")
    return "".join(parts) or "<root>"


def _fmt_path(path: _Path) -> str:
    segments = []
    while path is not None:
        path, seg = path
        segments.append(seg)
    segments.reverse()
    return _format_segments(segments)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"bool {value}"
    if isinstance(value, Mapping):
        return "dict"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"str {text!r}"
    if isinstance(value, int | float):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


def _expected(path: _Path, what: str, value: Any) -> KubeCodecError:
    return KubeCodecError(f"{_fmt_path(path)}: expected {what}, got {_describe(value)}")


def _key(key: Any) -> str:
    return key if type(key) is str else repr(key)


# ======================================================================================
# JSON value -> protobuf value converters: conv(value, path) -> value
# ======================================================================================

_Conv = Callable[[Any, _Path], Any]


def _to_str(value: Any, path: _Path) -> str:
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    raise _expected(path, "a string", value)


def _to_bool(value: Any, path: _Path) -> bool:
    if value is True or value is False:
        return value
    raise _expected(path, "a boolean", value)


_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+\Z")


def _as_int(value: Any, path: _Path, kind: str) -> int:
    """An int from an int subclass, a decimal string or an integral float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and _INT_TEXT.match(value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _expected(path, kind, value)


def _int_converter(bits: int) -> _Conv:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    kind = f"an integer (int{bits})"

    def convert(value: Any, path: _Path) -> int:
        number: int = value if type(value) is int else _as_int(value, path, kind)
        if low <= number <= high:
            return number
        raise KubeCodecError(f"{_fmt_path(path)}: {value} is out of range for int{bits}")

    return convert


def _to_bytes(value: Any, path: _Path) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _expected(path, "base64 text", value) from None
    raise _expected(path, "base64 text", value)


# Kubernetes' quantity grammar: signed decimal number, then a binary-SI suffix, a
# decimal-SI suffix or a decimal exponent.
_QUANTITY: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?\Z")


def _to_quantity(value: Any, path: _Path) -> str:
    if isinstance(value, str):
        text = str(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        text = str(int(value))
    elif isinstance(value, float) and math.isfinite(value):
        text = str(value)
    else:
        raise _expected(path, "a quantity", value)
    if _QUANTITY.match(text):
        return text
    raise KubeCodecError(f"{_fmt_path(path)}: {text!r} is not a quantity")


_TIMESTAMP: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:[Zz]|([+-])([0-9]{2}):([0-9]{2}))\Z"
)
_EPOCH_ORDINAL: Final = _dt.date(1970, 1, 1).toordinal()
_EPOCH: Final = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _to_instant(value: Any, path: _Path) -> tuple[int, int]:
    """(seconds since the epoch, nanoseconds) of an RFC 3339 string or a datetime."""
    if isinstance(value, str):
        m = _TIMESTAMP.match(value)
        if m is None:
            raise _expected(path, "an RFC 3339 timestamp", value)
        year, month, day, hour, minute, second, frac, sign, off_h, off_m = m.groups()
        h, mi, s = int(hour), int(minute), int(second)
        try:
            ordinal = _dt.date(int(year), int(month), int(day)).toordinal()
        except ValueError:
            ordinal = -1
        if ordinal < 0 or h > 23 or mi > 59 or s > 59:
            raise _expected(path, "an RFC 3339 timestamp", value)
        seconds = (ordinal - _EPOCH_ORDINAL) * 86400 + h * 3600 + mi * 60 + s
        if sign is not None:
            oh, om = int(off_h), int(off_m)
            if oh > 23 or om > 59:
                raise _expected(path, "an RFC 3339 timestamp", value)
            offset = oh * 3600 + om * 60
            seconds -= offset if sign == "+" else -offset
        nanos = int(frac[:9].ljust(9, "0")) if frac else 0
        return seconds, nanos
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        delta = value - _EPOCH
        return delta.days * 86400 + delta.seconds, delta.microseconds * 1000
    raise _expected(path, "an RFC 3339 timestamp", value)


_SCALAR_CONVERTERS: Final[Mapping[str, _Conv]] = {
    ks.STRING: _to_str,
    ks.INT32: _int_converter(32),
    ks.INT64: _int_converter(64),
    ks.BOOL: _to_bool,
    ks.BYTES: _to_bytes,
}
_to_int32: Final = _SCALAR_CONVERTERS[ks.INT32]


# ======================================================================================
# Per-message tables, built once at import
# ======================================================================================

_Encoder = Callable[[Message, Any, _Path, list[str]], None]


class _Spec:
    """The codec's view of one message type: JSON key -> encoder."""

    __slots__ = ("name", "cls", "enc")

    def __init__(self, name: str) -> None:
        self.name = name
        self.cls: type[Message] = ks.message_class(name)
        self.enc: dict[str, _Encoder] = {}


def _encode_into(
    msg: Message,
    obj: Mapping[Any, Any],
    table: Mapping[str, _Encoder],
    path: _Path,
    unknown: list[str],
) -> None:
    """Fill ``msg`` from the JSON object ``obj``, whose path is ``path``."""
    for key, value in obj.items():
        if value is None:
            continue
        encode = table.get(key)
        if encode is None:
            unknown.append(_fmt_path((path, _key(key))))
            continue
        try:
            encode(msg, value, (path, key), unknown)
        except KubeCodecError:
            raise
        except Exception as exc:  # protobuf's own checks, surrogates, JSON dumping, ...
            raise KubeCodecError(f"{_fmt_path((path, key))}: {exc}") from exc


def _scalar_encoder(name: str, convert: _Conv) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        setattr(msg, name, convert(value, path))

    return encode


def _repeated_scalar_encoder(name: str, convert: _Conv) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        if not isinstance(value, list | tuple):
            raise _expected(path, "a list", value)
        getattr(msg, name).extend([convert(item, (path, i)) for i, item in enumerate(value)])

    return encode


def _check_map(value: Any, path: _Path) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise _expected(path, "an object", value)
    return value


def _bad_key(path: _Path, key: Any) -> KubeCodecError:
    return KubeCodecError(f"{_fmt_path((path, _key(key)))}: map keys must be strings")


def _string_map_encoder(name: str, convert: _Conv) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        target = getattr(msg, name)
        for key, item in _check_map(value, path).items():
            if type(key) is not str:
                raise _bad_key(path, key)
            target[key] = item if type(item) is str else convert(item, (path, key))

    return encode


def _quantity_map_encoder(name: str) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        target = getattr(msg, name)
        for key, item in _check_map(value, path).items():
            if type(key) is not str:
                raise _bad_key(path, key)
            target[key].string = _to_quantity(item, (path, key))

    return encode


def _message_encoder(name: str, table: Mapping[str, _Encoder]) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        if not isinstance(value, Mapping):
            raise _expected(path, "an object", value)
        sub = getattr(msg, name)
        sub.SetInParent()
        if value:
            _encode_into(sub, value, table, path, unknown)

    return encode


def _repeated_message_encoder(name: str, table: Mapping[str, _Encoder]) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        if not isinstance(value, list | tuple):
            raise _expected(path, "a list", value)
        target = getattr(msg, name)
        for i, item in enumerate(value):
            sub = target.add()
            if item is None:  # Go decodes a null element to the zero struct
                continue
            if not isinstance(item, Mapping):
                raise _expected((path, i), "an object", item)
            _encode_into(sub, item, table, (path, i), unknown)

    return encode


def _embedded_encoder(name: str, inner: _Encoder) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        inner(getattr(msg, name), value, path, unknown)

    return encode


def _quantity_encoder(name: str) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        getattr(msg, name).string = _to_quantity(value, path)

    return encode


def _time_encoder(name: str, keep_nanos: bool) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        seconds, nanos = _to_instant(value, path)
        target = getattr(msg, name)
        target.seconds = seconds
        target.nanos = nanos if keep_nanos else 0  # metav1.Time is whole seconds on the wire

    return encode


def _int_or_string_encoder(name: str) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        target = getattr(msg, name)
        if isinstance(value, str):
            target.type = 1
            target.intVal = 0
            target.strVal = value
        elif isinstance(value, int) and not isinstance(value, bool):
            target.intVal = _to_int32(value, path)
            target.type = 0
            target.strVal = ""
        else:
            raise _expected(path, "an integer or a string", value)

    return encode


def _fields_v1_encoder(name: str) -> _Encoder:
    def encode(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        if not isinstance(value, Mapping):
            raise _expected(path, "an object", value)
        raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        getattr(msg, name).Raw = raw.encode("utf-8")

    return encode


_SPECIAL_ENCODERS: Final[Mapping[str, Callable[[str], _Encoder]]] = {
    ks.QUANTITY: _quantity_encoder,
    ks.TIME: lambda name: _time_encoder(name, keep_nanos=False),
    ks.MICRO_TIME: lambda name: _time_encoder(name, keep_nanos=True),
    ks.INT_OR_STRING: _int_or_string_encoder,
    ks.FIELDS_V1: _fields_v1_encoder,
}
def _field_encoder(field: ks.Field, specs: Mapping[str, _Spec]) -> _Encoder:
    """The encoder of one (non-embedded) field."""
    name, ftype, label, type_name = field.name, field.type, field.label, field.type_name
    if ftype != ks.MESSAGE:
        convert = _SCALAR_CONVERTERS[ftype]
        if label == ks.MAP:
            if ftype != ks.STRING:
                raise AssertionError(f"{name}: only map<string, string> scalar maps")
            return _string_map_encoder(name, convert)
        if label == ks.REPEATED:
            return _repeated_scalar_encoder(name, convert)
        return _scalar_encoder(name, convert)
    assert type_name is not None
    if type_name in _SPECIAL_ENCODERS:
        if label == ks.MAP and type_name == ks.QUANTITY:
            return _quantity_map_encoder(name)
        if label != ks.OPTIONAL:
            raise AssertionError(f"{name}: {type_name} only as a singular field or quantity map")
        return _SPECIAL_ENCODERS[type_name](name)
    if label == ks.MAP:
        raise AssertionError(f"{name}: maps of {type_name} are not supported")
    sub = specs[type_name]
    if label == ks.REPEATED:
        return _repeated_message_encoder(name, sub.enc)
    return _message_encoder(name, sub.enc)


def _build_specs() -> Mapping[str, _Spec]:
    specs = {name: _Spec(name) for name in ks.MESSAGE_FIELDS}
    done: set[str] = set()

    def fill(spec: _Spec) -> None:
        if spec.name in done:
            return
        done.add(spec.name)
        for field in ks.MESSAGE_FIELDS[spec.name]:
            if field.label == ks.EMBED:
                assert field.type_name is not None
                inner = specs[field.type_name]
                fill(inner)  # its JSON keys must be known before they are copied here
                for key, encoder in inner.enc.items():
                    if key in spec.enc:
                        raise AssertionError(f"{spec.name}: embedded key {key!r} collides")
                    spec.enc[key] = _embedded_encoder(field.name, encoder)
                continue
            if field.name in spec.enc:
                raise AssertionError(f"{spec.name}: key {field.name!r} collides")
            spec.enc[field.name] = _field_encoder(field, specs)

    for spec in specs.values():
        fill(spec)
    return specs


_SPECS: Final = _build_specs()
_POD: Final = _SPECS[f"{ks.CORE_V1}.Pod"]
_NODE: Final = _SPECS[f"{ks.CORE_V1}.Node"]
_NODE_LIST: Final = _SPECS[f"{ks.CORE_V1}.NodeList"]


def _top_level_table(spec: _Spec, kind: str) -> dict[str, _Encoder]:
    """A kind's top-level keys: its message's fields plus TypeMeta (not on the wire)."""

    def check_kind(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        if value != kind:
            raise _expected(path, repr(kind), value)

    def ignore(msg: Message, value: Any, path: _Path, unknown: list[str]) -> None:
        return None

    return {**spec.enc, "apiVersion": ignore, "kind": check_kind}


_POD_TOP: Final = _top_level_table(_POD, "Pod")
_NODE_TOP: Final = _top_level_table(_NODE, "Node")


# ======================================================================================
# Public API
# ======================================================================================


def _encode_object(msg: Message, obj: Any, table: Mapping[str, _Encoder], path: _Path, unknown: list[str]) -> None:
    if not isinstance(obj, Mapping):
        raise _expected(path, "an object", obj)
    _encode_into(msg, obj, table, path, unknown)


def _finish(msg: Message, what: str, unknown: list[str], sink: list[str] | None) -> bytes:
    if unknown:
        log.debug("kube_codec.unknown_fields_ignored", object=what, paths=unknown)
        if sink is not None:
            sink.extend(unknown)
    return _serialise(msg, f"<root>: cannot serialise the {what}")


def _serialise(msg: Message, failure: str) -> bytes:
    """The message's deterministic bytes; `failure` starts the error's message."""
    try:
        data: bytes = msg.SerializeToString(deterministic=True)
        return data
    except Exception as exc:  # not expected: every field was checked on the way in
        raise KubeCodecError(f"{failure}: {exc}") from exc


def encode_pod(pod: Mapping[str, Any], *, unknown_fields: list[str] | None = None,
               parts: PodPartCache | None = None) -> bytes:
    """A v1.Pod dict (kubectl JSON shape) as protobuf bytes of ``k8s.io.api.core.v1.Pod``.

    Keys the schema does not know are skipped; their paths are appended to
    ``unknown_fields`` if given. Raises `KubeCodecError` on a value of the wrong type.
    With ``parts``, the pod's spec and status are taken from (and added to) that cache:
    the same bytes, made once for pods that share them.
    """
    unknown: list[str] = []
    msg = _POD.cls()
    if parts is None or not isinstance(pod, Mapping):
        _encode_object(msg, pod, _POD_TOP, None, unknown)
        return _finish(msg, "Pod", unknown, unknown_fields)
    tail: dict[str, bytes] = {}
    for key, value in pod.items():
        if key in _POD_PARTS and value is not None:
            tail[key] = parts.encoded(key, value, unknown)
        else:
            _encode_into(msg, {key: value}, _POD_TOP, None, unknown)
    head = _finish(msg, "Pod", unknown, unknown_fields)
    # A message's fields serialise in field-number order: metadata (1) is in `head`.
    return head + b"".join(tail[key] for key in _POD_PARTS if key in tail)


#: The v1.Pod fields a `PodPartCache` keeps, in field-number order (spec 2, status 3).
_POD_PARTS: Final = ("spec", "status")


class PodPartCache:
    """The encoded spec and status of recent pods, each found again by its exact content.

    Pods made from one template (a ReplicaSet's, a Job's, a benchmark's) differ in their
    metadata and often share spec and status: those are encoded once here, and a pod's
    bytes are its metadata's, encoded every time, followed by the cached parts (each
    with its field tag, as a v1.Pod carries them). The output equals `encode_pod`'s
    without a cache, byte for byte.

    The key of a value is `marshal.dumps` of it: the same key only for values of the
    same types in the same order (``1``, ``1.0`` and ``True`` differ, though Python
    calls them equal, and so would their encodings), written in C at about a tenth of
    the cost of encoding. A value marshal cannot write (a ``datetime`` from YAML, a
    ``str`` subclass) is encoded every time. Bounded: `ENTRIES` values a field, keys
    up to `MAX_KEY` bytes. After `MISSES_TO_REST` misses in a row a field rests for
    `REST` pods (no key is made), so pods that never repeat pay almost nothing.

    One limit: marshal writes every bytes-like object as bytes, so a dict key that is not
    text (``b"k"``, ``bytearray(b"k")``) is told apart from another only by its value.
    The bytes are still right (such a key is never a schema field); the unknown-field
    path reported on a hit names the key as the first pod's was written. A pod read
    from YAML or JSON has text keys only.

    One cache serves a plugin's threads: dict reads and writes are atomic, entries are
    immutable tuples, and a race costs at most a duplicate encoding or a miscount.
    """

    ENTRIES: Final = 32
    MAX_KEY: Final = 64 * 1024
    MISSES_TO_REST: Final = 16
    REST: Final = 256

    def __init__(self) -> None:
        self._entries: dict[str, dict[bytes, tuple[bytes, tuple[str, ...]]]] = {k: {} for k in _POD_PARTS}
        self._misses: dict[str, int] = dict.fromkeys(_POD_PARTS, 0)
        self._resting: dict[str, int] = dict.fromkeys(_POD_PARTS, 0)
        self.hits = 0

    def encoded(self, key: str, value: Any, unknown: list[str]) -> bytes:
        """The v1.Pod field `key` (tag included) holding `value`; its unknown paths go to `unknown`."""
        content = self._key(key, value)
        entries = self._entries[key]
        if content is not None:
            hit = entries.get(content)
            if hit is not None:
                self.hits += 1
                self._misses[key] = 0
                unknown.extend(hit[1])
                return hit[0]
        own: list[str] = []
        msg = _POD.cls()
        _encode_into(msg, {key: value}, _POD_TOP, None, own)
        data = _serialise(msg, f"{key}: cannot serialise")
        unknown.extend(own)
        if content is not None:
            if len(entries) >= self.ENTRIES:
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread took it
                    del entries[next(iter(entries))]
            entries[content] = (data, tuple(own))
            misses = self._misses[key] = self._misses[key] + 1
            if misses >= self.MISSES_TO_REST:
                self._misses[key] = 0
                self._resting[key] = self.REST
        return data

    def _key(self, key: str, value: Any) -> bytes | None:
        if self._resting[key] > 0:  # two threads may both count one down: never below zero for long
            self._resting[key] -= 1
            return None
        try:
            content = marshal.dumps(value, 2)  # version 2: no back-references, so sharing does not matter
        except ValueError:  # a type marshal does not write
            return None
        return content if len(content) <= self.MAX_KEY else None


def encode_node(node: Mapping[str, Any], *, unknown_fields: list[str] | None = None) -> bytes:
    """A v1.Node dict as protobuf bytes of ``k8s.io.api.core.v1.Node`` (see `encode_pod`)."""
    unknown: list[str] = []
    msg = _NODE.cls()
    _encode_object(msg, node, _NODE_TOP, None, unknown)
    return _finish(msg, "Node", unknown, unknown_fields)


def encode_node_list(nodes: Sequence[Mapping[str, Any]], *, unknown_fields: list[str] | None = None) -> bytes:
    """A ``v1.NodeList`` whose items are ``nodes`` (ListMeta left empty), as protobuf bytes.

    The result equals the concatenation, for each node, of the ``items`` tag, the length
    and `encode_node`'s bytes. Error paths read ``items[i]....``.
    """
    if isinstance(nodes, str | bytes | Mapping) or not isinstance(nodes, Sequence):
        raise _expected(None, "a list of nodes", nodes)
    unknown: list[str] = []
    msg = _NODE_LIST.cls()
    items = msg.items
    root: _Path = (None, "items")
    for i, node in enumerate(nodes):
        _encode_object(items.add(), node, _NODE_TOP, (root, i), unknown)
    return _finish(msg, "NodeList", unknown, unknown_fields)

