"""A wasm plugin's configuration: what `pluginConfig[].args` of a scheduler profile says.

This module owns `PluginConfig` and its parsing from the args mapping of a
KubeSchedulerConfiguration `pluginConfig` entry (`guestURL`, `guestConfig`,
`logSeverity`, `args`, plus this runtime's pool settings). A mistake in it is the
user's, so it raises `PluginConfigError` with one line naming the plugin and the field.

See `docs/guest-authors.md` ("Configure it") and `docs/reliability.md`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from wasm_scheduler.registry.errors import clip, shown


class PluginConfigError(ValueError):
    """A wasm plugin's args are malformed."""


_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: The largest `limits.memoryLimitMiB`: a wasm32 linear memory holds at most 4 GiB.
MAX_MEMORY_LIMIT_MIB = 4096
#: The largest `limits.callTimeoutMs` and `limits.startTimeoutMs`: an hour.
MAX_TIMEOUT_MS = 3_600_000
#: The largest `limits.tableElementsLimit`.
MAX_TABLE_ELEMENTS = 10_000_000
#: The largest `pool.maxInstances` and `pool.minIdle` (every instance is a thread and a memory).
MAX_POOL_INSTANCES = 65536
#: The largest `pool.idleSeconds`: a day.
MAX_IDLE_SECONDS = 86400


@dataclass(frozen=True)
class PoolConfig:
    """How many instances of one plugin exist and for how long they stay idle."""

    #: Idle instances kept however long they sit idle.
    min_idle: int = 1
    #: Seconds an idle instance beyond `min_idle` lives before it is stopped.
    idle_seconds: float = 60.0
    #: Upper bound on live instances (0: no bound). Reaching it gives the pod an Error.
    #: Every instance maps its own stacks and linear memory, so an unbounded pool lets
    #: held pods (an extender waiting for binds) exhaust the process: the default keeps
    #: guest memory within 256 x `limits.memoryLimitMiB` and the actor threads bounded.
    max_instances: int = 256


@dataclass(frozen=True)
class LimitsConfig:
    """What one instance may use: time per call and memory."""

    #: Wall-clock deadline of one export call (one node of a Filter, say), in ms.
    call_timeout_ms: int = 1000
    #: Deadline of `_start` (the guest's main), in ms.
    start_timeout_ms: int = 10_000
    #: Upper bound of an instance's linear memory, in MiB.
    memory_limit_mib: int = 256
    #: Upper bound of the elements of each table of an instance.
    table_elements_limit: int = 100_000


@dataclass(frozen=True)
class PluginConfig:
    """One configured wasm plugin."""

    name: str
    guest_url: str
    guest_config: str = ""
    #: klog severity at or above which guest log lines are emitted (0 info .. 3 fatal).
    log_severity: int = 0
    #: The guest's argv, argv[0] included, exactly as configured.
    args: tuple[str, ...] = ()
    guest_sha256: str = ""
    pool: PoolConfig = field(default_factory=PoolConfig)
    limits: LimitsConfig = field(default_factory=LimitsConfig)
    #: Directory the configuration came from; a relative guestURL path is read from it.
    base_dir: str = ""

    @classmethod
    def from_args(cls, name: str, args: Mapping[str, Any], base_dir: str = "") -> PluginConfig:
        """Parse a `pluginConfig[].args` mapping (camelCase keys, as in YAML)."""

        def fail(what: str) -> PluginConfigError:
            return PluginConfigError(f"plugin {shown(name)}: {what}")

        if not isinstance(args, Mapping):
            raise fail(f"args must be a mapping, got {type(args).__name__}")
        # First, so a misspelt key (guestUrl) is named as such, not as the key it was meant to be missing.
        unknown = unknown_fields(args, ARGS_FIELDS, "args")
        if unknown:
            raise fail(unknown)
        url = args.get("guestURL")
        if not isinstance(url, str) or not url:
            raise fail("args.guestURL must be a non-empty string (a path, file:// or http(s):// URL)")
        guest_config = args.get("guestConfig", "")
        if not isinstance(guest_config, str):
            raise fail("args.guestConfig must be a string (the guest parses it itself)")
        severity = args.get("logSeverity", 0)
        if isinstance(severity, bool) or not isinstance(severity, int) or not 0 <= severity <= 3:
            raise fail(f"args.logSeverity must be 0 (info), 1 (warning), 2 (error) or 3 (fatal), got {shown(severity)}")
        argv = args.get("args", [])
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise fail("args.args must be a list of strings (the guest's argv, argv[0] included)")
        sha = args.get("guestSHA256", "")
        if isinstance(sha, (int, float)) and not isinstance(sha, bool):  # YAML reads 0123... or 12e4... as one
            raise fail("args.guestSHA256 was read as a number, not text (YAML reads a value of only digits as a "
                       "number): quote it, guestSHA256: \"<64 hexadecimal digits>\"")
        if not isinstance(sha, str) or (sha and not _SHA256.match(sha.lower())):
            raise fail(f"args.guestSHA256 must be 64 hexadecimal digits, got {shown(sha)}")
        pool_args = args.get("pool", {})
        if not isinstance(pool_args, Mapping):
            raise fail("args.pool must be a mapping")
        unknown = unknown_fields(pool_args, POOL_FIELDS, "args.pool")
        if unknown:
            raise fail(unknown)
        pool = PoolConfig(
            min_idle=_non_negative(pool_args, "minIdle", PoolConfig.min_idle, fail, int, MAX_POOL_INSTANCES),
            idle_seconds=_non_negative(pool_args, "idleSeconds", PoolConfig.idle_seconds, fail, float,
                                       MAX_IDLE_SECONDS),
            max_instances=_non_negative(pool_args, "maxInstances", PoolConfig.max_instances, fail, int,
                                        MAX_POOL_INSTANCES),
        )
        limit_args = args.get("limits", {})
        if not isinstance(limit_args, Mapping):
            raise fail("args.limits must be a mapping")
        unknown = unknown_fields(limit_args, LIMITS_FIELDS, "args.limits")
        if unknown:
            raise fail(unknown)
        limits = LimitsConfig(
            call_timeout_ms=_positive(limit_args, "callTimeoutMs", LimitsConfig.call_timeout_ms, fail, MAX_TIMEOUT_MS),
            start_timeout_ms=_positive(limit_args, "startTimeoutMs", LimitsConfig.start_timeout_ms, fail,
                                       MAX_TIMEOUT_MS),
            memory_limit_mib=_positive(limit_args, "memoryLimitMiB", LimitsConfig.memory_limit_mib, fail,
                                       MAX_MEMORY_LIMIT_MIB),
            table_elements_limit=_positive(limit_args, "tableElementsLimit",
                                           LimitsConfig.table_elements_limit, fail, MAX_TABLE_ELEMENTS),
        )
        return cls(
            name=name,
            guest_url=url,
            guest_config=guest_config,
            log_severity=severity,
            args=tuple(argv),
            guest_sha256=sha.lower(),
            pool=pool,
            limits=limits,
            base_dir=base_dir,
        )


#: The fields of a wasm plugin's args, of its `pool` and of its `limits`.
ARGS_FIELDS = ("guestURL", "guestConfig", "logSeverity", "args", "guestSHA256", "pool", "limits")
POOL_FIELDS = ("minIdle", "idleSeconds", "maxInstances")
LIMITS_FIELDS = ("callTimeoutMs", "startTimeoutMs", "memoryLimitMiB", "tableElementsLimit")
#: How alike (difflib's ratio, ignoring case) a misspelt field must be to a known one to be suggested.
_CLOSE = 0.75


def unknown_fields(fields: Mapping[Any, Any], known: Collection[str], where: str) -> str:
    """The problem of the fields of `fields` that are not `known` ("" if none): each named,
    with "did you mean" for a close one (``guestUrl``: guestURL; ``maxInstance``: maxInstances)."""
    unknown = [key for key in fields if key not in known]
    if not unknown:
        return ""
    named = []
    all_close = True
    for key in unknown[:5]:
        close = suggestion(key, known)
        all_close = all_close and bool(close)
        named.append(f"{shown(key, 40)} (did you mean {close}?)" if close else shown(key, 40))
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    known_list = "" if all_close and not more else f"; known: {', '.join(known)}"
    plural = "s" if len(unknown) > 1 else ""
    return clip(f"unknown {where} field{plural} {', '.join(named)}{more}{known_list}", 300)


def suggestion(key: object, known: Collection[str]) -> str:
    """The known field `key` was likely meant to be: the same but for case, or a close spelling; "" if none."""
    if not isinstance(key, str):
        return ""
    by_folded = {name.casefold(): name for name in known}
    if key.casefold() in by_folded:
        return by_folded[key.casefold()]
    close = difflib.get_close_matches(key.casefold(), list(by_folded), n=1, cutoff=_CLOSE)
    return by_folded[close[0]] if close else ""


def _non_negative(args: Mapping[str, Any], key: str, default: Any, fail: Any, kind: type, most: int) -> Any:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise fail(f"args.pool.{key} must be a non-negative number, got {shown(value)}")
    if not math.isfinite(value) or value > most:  # NaN, infinities, and sizes no machine has
        raise fail(f"args.pool.{key} must be a number from 0 to {most}, got {shown(value)}")
    if kind is int and value != int(value):
        raise fail(f"args.pool.{key} must be a whole number, got {shown(value)}")
    return kind(value)


def _positive(args: Mapping[str, Any], key: str, default: int, fail: Any, most: int) -> int:
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail(f"args.limits.{key} must be a positive whole number, got {shown(value)}")
    if value > most:
        raise fail(f"args.limits.{key} must be a whole number from 1 to {most}, got {shown(value)}")
    return value
