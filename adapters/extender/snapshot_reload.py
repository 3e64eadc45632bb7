"""The extender's node cache from a ``--cluster`` snapshot file, reloaded in the background.

This module owns `SnapshotReloader`: the first load of the snapshot happens in the
constructor (a broken file at start-up is the user's `UserError`), then one daemon
thread polls the file's identity (mtime, size, inode) every `poll_s` seconds and
re-parses it when that changes. A request never parses: `refresh()` only wakes the
poller and returns with whatever is loaded. A broken new file keeps the last good
snapshot and logs one ``extender.snapshot_reload_failed`` warning (the path and the
one-line reason) per change of the file. `close()` stops and joins the thread.

See `docs/extender.md` ("The extender's own view of the cluster").
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wasm_scheduler.adapters.framework.cluster import load_cluster
from wasm_scheduler.adapters.framework.errors import UserError, clip
from wasm_scheduler.logger import get_logger

log = get_logger("adapters.extender.snapshot_reload")

#: Seconds between two looks at the snapshot file's mtime and size.
DEFAULT_POLL_S = 2.0

#: (mtime in ns, size, inode) of the file: a change of any means a new snapshot.
Signature = tuple[int, int, int]


@dataclass(frozen=True)
class LoadedSnapshot:
    """One parsed snapshot: node objects by name, pod objects by uid, and the file it came from."""

    nodes: dict[str, Any] = field(default_factory=dict)
    pods: dict[str, Any] = field(default_factory=dict)
    signature: Signature | None = None


def _signature(path: Path) -> Signature:
    st = os.stat(path)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def load_snapshot(path: Path) -> LoadedSnapshot:
    """Parse the snapshot file; UserError (naming the file) when it is missing or broken."""
    try:
        before = _signature(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot read the node snapshot: {exc.strerror or exc}") from None
    cluster = load_cluster(path)
    nodes = {n.name: n.node for n in cluster.nodes}
    pods = {p.uid: p.pod for p in (*cluster.running, *cluster.pending)}
    return LoadedSnapshot(nodes, pods, before)


class SnapshotReloader:
    """A `nodes.NodeSource` whose `nodes` and `pods` follow the snapshot file, swapped whole by a poller
    thread."""

    def __init__(self, path: Path, poll_s: float = DEFAULT_POLL_S) -> None:
        if poll_s <= 0:
            raise UserError(f"{path}: the snapshot poll interval must be positive, got {poll_s}")
        self.path = path
        self.poll_s = poll_s
        self._loaded = load_snapshot(path)  # at start-up a broken file is the user's error
        log.info("extender.nodes_loaded", path=str(path), nodes=len(self._loaded.nodes))
        #: The file signature whose failure was last logged (one warning per change).
        self._failed: Signature | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"snapshot-reload {clip(path.name, 40)}", daemon=True)
        self._thread.start()

    @property
    def nodes(self) -> dict[str, Any]:
        return self._loaded.nodes

    @property
    def pods(self) -> dict[str, Any]:
        return self._loaded.pods

    @property
    def loaded(self) -> LoadedSnapshot:
        """The snapshot in use now (nodes and pods from the same file version)."""
        return self._loaded

    def refresh(self) -> None:
        """Never parses: asks the poller to look at the file now and returns at once."""
        self._wake.set()

    def close(self) -> None:
        """Stop the poller and wait for it (a parse under way finishes first)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    stop = close

    def check_now(self) -> bool:
        """Reload if the file changed (the poller's step); True when a new snapshot was loaded."""
        try:
            signature = _signature(self.path)
        except OSError as exc:
            self._warn(None, f"cannot read the node snapshot: {exc.strerror or exc}")
            return False
        if signature == self._loaded.signature or signature == self._failed:
            return False
        try:
            loaded = load_snapshot(self.path)
        except UserError as exc:
            self._warn(signature, str(exc))
            return False
        except Exception as exc:  # a defect of the loader must not end the poller; the old snapshot stays
            self._warn(signature, f"{type(exc).__name__}: {clip(str(exc), 240)}")
            return False
        self._loaded = loaded
        self._failed = None
        log.info("extender.nodes_loaded", path=str(self.path), nodes=len(loaded.nodes))
        return True

    def _warn(self, signature: Signature | None, reason: str) -> None:
        key = signature if signature is not None else (-1, -1, -1)
        if key == self._failed:
            return
        self._failed = key
        log.warning("extender.snapshot_reload_failed", path=str(self.path), reason=reason,
                    nodes_kept=len(self._loaded.nodes))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.check_now()
