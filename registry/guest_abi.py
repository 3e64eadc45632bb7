"""The guest ABI's signatures: what a compiled guest may export and import.

This module owns the wire-level tables both the loader (`registry.validation`) and the
guest host (`actors`) check a module against: each extension-point export with its
result types, the exports that need another one, the host functions of the ABI with
their signatures, and the wasi_snapshot_preview1 functions (all of them by name, and
the signatures of those the host implements). Data only; it imports nothing of the
project.

See `docs/guest-authors.md` ("The raw guest interface").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal, TypeGuard, get_args

# --- exports -------------------------------------------------------------------------

I32: Final = "i32"
I64: Final = "i64"

#: An extension-point export: its name in the guest module, which is also the name an
#: actor message runs and the `extension_point` of the call's log lines.
Export = Literal[
    "enqueue", "prefilter", "filter", "postfilter", "prescore", "score", "normalizescore", "reserve",
    "unreserve", "permit", "prebind", "bind", "postbind", "addpod", "removepod",
]

#: Every extension-point export, with its result types (all take no parameters).
EXPORT_RESULTS: Final[dict[Export, tuple[str, ...]]] = {
    "enqueue": (),
    "prefilter": (I32,),
    "filter": (I32,),
    "postfilter": (I64,),
    "prescore": (I32,),
    "score": (I64,),
    "normalizescore": (I32,),
    "reserve": (I32,),
    "unreserve": (),
    "permit": (I64,),
    "prebind": (I32,),
    "bind": (I32,),
    "postbind": (),
    "addpod": (I32,),
    "removepod": (I32,),
}

assert set(EXPORT_RESULTS) == set(get_args(Export)), "every export has its results"

#: Exports that make no sense without another one.
COUPLED_EXPORTS: Final[dict[Export, Export]] = {"prescore": "score", "normalizescore": "score"}


def is_export(name: str) -> TypeGuard[Export]:
    """Is `name` an extension-point export of the ABI?"""
    return name in EXPORT_RESULTS


# --- imports -------------------------------------------------------------------------

WASI: Final = "wasi_snapshot_preview1"
K8S_API: Final = "k8s.io/api"
K8S_SCHEDULER: Final = "k8s.io/scheduler"
K8S_KLOG: Final = "k8s.io/klog"

#: (module, name) -> (params, results) of every host function the ABI defines.
HOST_IMPORTS: Final[dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]]] = {
    (K8S_API, "node"): ((I32,) * 4, (I32,)),
    (K8S_API, "nodeList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "currentPod"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "targetPod"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "currentNodeName"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "filteredNodeList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeToStatusMap"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeScoreList"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "nodeImageStates"): ((I32,) * 4, (I32,)),
    (K8S_SCHEDULER, "get_config"): ((I32,) * 2, (I32,)),
    (K8S_SCHEDULER, "result.status_reason"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.node_names"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.nominated_node_name"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.normalized_score_list"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "result.cluster_events"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "handle.eventrecorder.eventf"): ((I32,) * 2, ()),
    (K8S_SCHEDULER, "handle.reject_waiting_pod"): ((I32,) * 4, ()),
    (K8S_SCHEDULER, "handle.get_waiting_pod"): ((I32,) * 4, ()),
    (K8S_KLOG, "severity"): ((), (I32,)),
    (K8S_KLOG, "log"): ((I32,) * 3, ()),
    (K8S_KLOG, "logs"): ((I32,) * 5, ()),
}


# --- wasi_snapshot_preview1 -----------------------------------------------------------

#: Every function of wasi_snapshot_preview1, so an unknown name is told from a typo.
PREVIEW1_NAMES: Final = frozenset(
    [
        "args_get", "args_sizes_get", "environ_get", "environ_sizes_get", "clock_res_get",
        "clock_time_get", "fd_advise", "fd_allocate", "fd_close", "fd_datasync", "fd_fdstat_get",
        "fd_fdstat_set_flags", "fd_fdstat_set_rights", "fd_filestat_get", "fd_filestat_set_size",
        "fd_filestat_set_times", "fd_pread", "fd_prestat_get", "fd_prestat_dir_name", "fd_pwrite",
        "fd_read", "fd_readdir", "fd_renumber", "fd_seek", "fd_sync", "fd_tell", "fd_write",
        "path_create_directory", "path_filestat_get", "path_filestat_set_times", "path_link",
        "path_open", "path_readlink", "path_remove_directory", "path_rename", "path_symlink",
        "path_unlink_file", "poll_oneoff", "proc_exit", "proc_raise", "sched_yield", "random_get",
        "sock_accept", "sock_recv", "sock_send", "sock_shutdown"
    ]
)

#: (params, results) letters ('i' i32, 'I' i64) of each WASI function the host implements.
WASI_SIGNATURES: Final[Mapping[str, tuple[str, str]]] = {
    "args_sizes_get": ("ii", "i"),
    "args_get": ("ii", "i"),
    "environ_sizes_get": ("ii", "i"),
    "environ_get": ("ii", "i"),
    "clock_time_get": ("iIi", "i"),
    "clock_res_get": ("ii", "i"),
    "random_get": ("ii", "i"),
    "fd_write": ("iiii", "i"),
    "fd_close": ("i", "i"),
    "fd_fdstat_get": ("ii", "i"),
    "fd_prestat_get": ("ii", "i"),
    "sched_yield": ("", "i"),
    "proc_exit": ("i", ""),
}
