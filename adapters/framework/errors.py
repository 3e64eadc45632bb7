"""The error a user causes: a bad file, a bad field, an unknown plugin.

This module owns `UserError`, the one exception the framework raises for mistakes in
what the user gave it (a scheduler configuration, a cluster snapshot, a plugin's
args, a guest that does not load). Its message is one line naming the file, the
object and the field; the CLI prints it as ``error: <message>`` and exits with 2.
Everything else that escapes the framework is a bug. `shown` and `clip` (from
`registry.errors`) bound the user's values its messages echo.

See `docs/framework.md`.
"""

from __future__ import annotations

from wasm_scheduler.registry.errors import SHOWN_LIMIT, clip, shown


class UserError(Exception):
    """A mistake in the user's input; the message is one line that says where and what."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()) if "\n" in message else message)


def where(source: str, obj: str = "", field: str = "") -> str:
    """``file: object: field`` with the empty parts left out."""
    return ": ".join(part for part in (source, obj, field) if part)


__all__ = ["SHOWN_LIMIT", "UserError", "clip", "shown", "where"]
