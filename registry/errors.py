"""The error a user sees when a guest cannot be loaded."""

from __future__ import annotations


class GuestLoadError(Exception):
    """A guest could not be fetched, compiled, validated or started.

    The message is one line that names the guest (plugin name and where it came
    from) and the problem.
    """

    def __init__(self, guest: str, problem: str) -> None:
        super().__init__(f"wasm guest {guest}: {problem}")
        self.guest = guest
        self.problem = problem
