"""Reading a guest's text and JSON by the rules of Go's strings and `encoding/json`.

This module owns how the host decodes what a guest hands over (status reasons, node
names, score maps, events): as the reference host, whose values pass through Go's
`json.Unmarshal` and Go strings, would see them. Invalid UTF-8 becomes U+FFFD byte by
byte, `null` is no error, struct field names match case-insensitively, unknown fields
are ignored, duplicate keys keep the last value, and an integer field takes only an
integer literal in int64 range. `docs/abi-notes.md` lists each import and each rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def go_text(data: bytes) -> str:
    """Bytes as Go turns them into text: valid UTF-8 as is, each byte of an invalid
    sequence one U+FFFD (as `encoding/json` and a `range` over a string do)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # surrogateescape maps each undecodable byte to one lone surrogate, which valid
        # UTF-8 never yields: turn exactly those into U+FFFD.
        return _ESCAPED_BYTE.sub("\ufffd", data.decode("utf-8", "surrogateescape"))


class GoJSONError(ValueError):
    """Input Go's `json.Unmarshal` would refuse for the target type."""


class _Pairs(list[tuple[str, Any]]):
    """A JSON object's members in order, duplicates kept (Go assigns each in turn)."""


class _Fraction(str):
    """A JSON number with a fraction or an exponent (Go refuses it for an integer)."""


def _reject_constant(name: str) -> Any:
    raise GoJSONError(f"invalid character {name[0]!r} looking for beginning of value")


def go_json(data: bytes) -> Any:
    """Parse JSON as Go's decoder sees it: objects as `_Pairs`, numbers with a fraction
    or exponent as `_Fraction`, strings with invalid UTF-8 or lone surrogate escapes
    repaired to U+FFFD; NaN and Infinity refused. Raises `GoJSONError`."""
    try:
        return json.loads(
            go_text(data),
            object_pairs_hook=_Pairs,
            parse_float=_Fraction,
            parse_constant=_reject_constant,
        )
    except GoJSONError:
        raise
    except RecursionError:
        raise GoJSONError("nested too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError, or an integer of too many digits
        raise GoJSONError(str(exc).splitlines()[0] if str(exc) else "invalid JSON") from None


def _go_string(value: str) -> str:
    return _SURROGATE.sub("\ufffd", value)


def _go_int64(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | _Fraction):
        raise GoJSONError(f"cannot unmarshal {_json_kind(value)} into {where} of type int")
    if isinstance(value, _Fraction) or not _INT64_MIN <= value <= _INT64_MAX:
        digits = str(value)
        shown = digits if len(digits) <= 40 else f"{digits[:20]}...{digits[-8:]}"
        raise GoJSONError(f"cannot unmarshal number {shown} into {where} of type int")
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, _Pairs):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str) and not isinstance(value, _Fraction):
        return "string"
    return "number"


def go_score_map(data: bytes) -> dict[str, int] | None:
    """A Go `map[string]int` from JSON: None for `null` (a nil map); a `null` member is 0."""
    value = go_json(data)
    if value is None:
        return None
    if not isinstance(value, _Pairs):
        raise GoJSONError(f"cannot unmarshal {_json_kind(value)} into Go value of type map[string]int")
    scores: dict[str, int] = {}
    for key, score in value:
        scores[_go_string(key)] = 0 if score is None else _go_int64(score, f"map value {key!r}")
    return scores


#: Go's case folding for matching a member to a field: ASCII letters, and the two
#: non-ASCII letters whose fold orbit holds an ASCII one (KELVIN SIGN, LONG S).
_FOLD = MappingProxyType(
    {**{c: c - 32 for c in range(ord("a"), ord("z") + 1)}, 0x212A: ord("K"), 0x017F: ord("S")}
)


def _fold(name: str) -> str:
    return name.translate(_FOLD)


#: eventf's ObjectReference and EventMessage, Go field names in order.
_REFERENCE_FIELDS = ("Kind", "APIVersion", "Name", "Namespace", "UID", "ResourceVersion")
_EVENT_STRINGS = ("Eventtype", "Reason", "Action", "Note")
_EVENT_REFERENCES = ("RegardingReference", "RelatedReference")


def _go_struct(value: Any, into: dict[str, Any], fields: Mapping[str, str], what: str,
               nested: Mapping[str, Callable[[Any, dict[str, Any]], None]]) -> None:
    """Decode a JSON object into `into` as Go decodes into a struct: `null` leaves it as
    it is, members match fields case-insensitively in order (the last of duplicates
    wins), unknown members are ignored, a string field takes a string or null."""
    if value is None:
        return
    if not isinstance(value, _Pairs):
        raise GoJSONError(f"cannot unmarshal {_json_kind(value)} into Go value of type {what}")
    for key, member in value:
        field_name = fields.get(_fold(_go_string(key)))
        if field_name is None:
            continue
        if field_name in nested:
            nested[field_name](member, into[field_name])
        elif member is None:
            continue
        elif isinstance(member, str) and not isinstance(member, _Fraction):
            into[field_name] = _go_string(member)
        else:
            raise GoJSONError(
                f"cannot unmarshal {_json_kind(member)} into Go struct field {what}.{field_name} of type string"
            )


_REFERENCE_BY_FOLD = {_fold(name): name for name in _REFERENCE_FIELDS}
_EVENT_BY_FOLD = {_fold(name): name for name in (*_EVENT_REFERENCES, *_EVENT_STRINGS)}


def _decode_reference(value: Any, into: dict[str, Any]) -> None:
    _go_struct(value, into, _REFERENCE_BY_FOLD, "ObjectReference", {})


def go_event(data: bytes) -> dict[str, Any]:
    """eventf's JSON as the reference host's `EventMessage`: every field present, ""
    where the guest gave none."""
    event: dict[str, Any] = {name: dict.fromkeys(_REFERENCE_FIELDS, "") for name in _EVENT_REFERENCES}
    event.update(dict.fromkeys(_EVENT_STRINGS, ""))
    nested = dict.fromkeys(_EVENT_REFERENCES, _decode_reference)
    _go_struct(go_json(data), event, _EVENT_BY_FOLD, "EventMessage", nested)
    return event


def go_cstrings(data: bytes) -> list[str]:
    """NUL-terminated strings as the reference host splits them: empty entries are
    skipped and bytes after the last NUL are dropped."""
    entries = data.split(b"\0")
    entries.pop()  # after the last NUL: unterminated (or nothing)
    return [go_text(entry) for entry in entries if entry]
