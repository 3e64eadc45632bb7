"""The guest ABI as behaviour: decoding the packed integers a guest returns.

This module owns how a guest's packed results are read (the status word and score of
Score, the nominating mode of PostFilter, the timeout of Permit, the scores of a batch
split in C). The ABI's tables (export and import signatures) live in
`registry.guest_abi`, below the loader; the framework's vocabulary (status codes,
`Status`, the results, cluster events, the extension points) lives in
`framework_api`.

See `docs/guest-authors.md` ("The raw guest interface").
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence

from wasm_scheduler.framework_api import NominatingMode

__all__ = ["decode_permit", "decode_postfilter", "decode_score", "high_words", "split_i64"]


def split_i64(value: int) -> tuple[int, int]:
    """(low 32 bits, high 32 bits) of a wasm i64 given as a Python int of either sign."""
    value &= 0xFFFF_FFFF_FFFF_FFFF
    return value & 0xFFFF_FFFF, value >> 32


def decode_score(packed: int) -> tuple[int, int]:
    """score: (status word from the low 32 bits, signed int32 score from the high 32)."""
    signed = packed - (1 << 64) if packed >= 1 << 63 else packed  # wasm gives a signed i64
    return packed & 0xFFFF_FFFF, signed >> 32  # an arithmetic shift keeps the score's sign


def decode_postfilter(packed: int) -> tuple[int, NominatingMode]:
    """postfilter: (status word from the low 32 bits, nominating mode from the high 32)."""
    low, high = split_i64(packed)
    return low, NominatingMode.OVERRIDE if high == NominatingMode.OVERRIDE else NominatingMode.NOOP


def decode_permit(packed: int) -> tuple[int, int]:
    """permit: (status word from the HIGH 32 bits, wait timeout in ms from the low 32, uint32)."""
    low, high = split_i64(packed)
    return high, low


#: Where the high 32 bits of an i64 sit among its two 32-bit halves in this host's order.
_HIGH_HALF = 1 if sys.byteorder == "little" else 0


def high_words(values: Sequence[int]) -> Sequence[int]:
    """The high, signed 32 bits of each i64 (the score of a packed Score result), split in
    C: the values as 32-bit halves, every other one."""
    packed = values if isinstance(values, array) else array("q", values)
    return array("i", packed.tobytes())[_HIGH_HALF::2]
