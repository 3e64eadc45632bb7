"""The error a user sees when a guest cannot be loaded, and how errors echo user values.

This module owns `GuestLoadError`, and `shown`/`clip`: the bounded repr and the cut
every error message of the project (the registry's and the adapters') uses to echo a
user's value, so a huge or self-referencing value (a YAML alias bomb) still gives one
short line. It sits at the bottom of the layers, so both can use it.

See `docs/guest-authors.md` ("Configure it").
"""

from __future__ import annotations

import reprlib

#: How many characters of a user's value an error message echoes at most.
SHOWN_LIMIT = 80


def shown(value: object, limit: int = SHOWN_LIMIT) -> str:
    """The repr of a user's value for an error message, at most `limit` characters ("..." marks a cut).

    The repr is bounded as it is built (`reprlib`): it never walks more of a value than it
    prints, so a YAML alias bomb (a small file whose shared references expand to
    gigabytes) still gives a short line.
    """
    bounded = reprlib.Repr()
    bounded.maxlevel = 3
    bounded.maxtuple = bounded.maxlist = bounded.maxarray = bounded.maxdict = 4
    bounded.maxset = bounded.maxfrozenset = bounded.maxdeque = 4
    bounded.maxstring = bounded.maxother = limit
    bounded.maxlong = 40
    return clip(bounded.repr(value), limit)


def clip(text: str, limit: int = SHOWN_LIMIT) -> str:
    """A user's text (a name, a message that echoes one) cut to `limit` characters, "..." marking the cut."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class GuestLoadError(Exception):
    """A guest could not be fetched, compiled, validated or started.

    The message is one line that names the guest (plugin name and where it came
    from) and the problem.
    """

    def __init__(self, guest: str, problem: str) -> None:
        super().__init__(f"wasm guest {guest}: {problem}")
        self.guest = guest
        self.problem = problem
