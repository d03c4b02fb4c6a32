"""The fork server's slots and the root-only layers they carry.

At most ``SLOTS_PER_BLOCK`` runs are in flight at once, one per slot. When the server runs
as root, it claims a block of sandbox uids (one per slot) and, where the kernel allows,
enters the filesystem view (:mod:`pettingllm_envs.sandbox.filesystem`), moves into an empty
network namespace and checks that PID and IPC namespaces work; then each slot owns

* a **uid** of its own, so what a run leaves behind can be found and killed by uid;
* a **working directory**: a tmpfs of its own inside the view, renewed whenever a program
  changed anything about it (without the view, a fresh temporary directory per run);
* an **empty network namespace**, made on the slot's first use, so that runs in different
  slots cannot reach each other (abstract Unix sockets and netlink are per namespace).

Without root none of this holds (a fresh temporary directory per run, the server's own uid,
the host's network); every result says which layers held.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import tempfile

from pettingllm_envs.sandbox.filesystem import DirectoryState, directory_state, enter_view, mount_workdir, remove_tree
from pettingllm_envs.sandbox.forkserver.reaper import proc_uid
from pettingllm_envs.sandbox.isolation import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWPID,
    IS_ROOT,
    SANDBOX_GID,
    SANDBOX_UID_BASE,
    SLOTS_PER_BLOCK,
    _libc,
    claim_uid_block,
    isolate_network,
    kill_uid_processes,
    namespace_works,
    uid_processes,
)


class Slots:
    """The free slots, and what each slot owns (see the module docstring)."""

    def __init__(self, preferred_block: int | None, packages: list[str]) -> None:
        self.free = list(range(SLOTS_PER_BLOCK - 1, -1, -1))  # popped from the end: slot 0 first
        # Slots whose working-directory tmpfs is mounted, with its state when it was new.
        self.mounted: dict[int, DirectoryState] = {}
        self.block: int | None = None
        self.block_lock = None  # held while the server lives: the block is this server's
        self.private = False  # the filesystem view (see the filesystem module)
        self.host_netns: int | None = None  # the host's network namespace, for runs that ask for it
        self.slot_netns: dict[int, int] = {}
        self.server_netns: int | None = None
        self.pid_namespaces = False
        self.ipc_namespaces = False
        if IS_ROOT:
            claimed = claim_uid_block(preferred_block)
            if claimed is None:
                raise RuntimeError("every block of sandbox uids is taken by other fork servers")
            self.block, self.block_lock = claimed
            self._sweep_block()
            self.private = enter_view(packages)
            self.host_netns = isolate_network()
            if self.host_netns is not None:
                self.server_netns = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            self.pid_namespaces = namespace_works(CLONE_NEWPID)
            self.ipc_namespaces = namespace_works(CLONE_NEWIPC)
        self.network = self.host_netns is not None
        """Runs can be given a network namespace (an empty one, or the host's on request)."""

    def uid(self, slot: int) -> int | None:
        """The slot's uid (None without root)."""
        if self.block is None:
            return None
        return SANDBOX_UID_BASE + self.block * SLOTS_PER_BLOCK + slot

    def _sweep_block(self) -> None:
        """Kill what an earlier owner of this uid block may have left (it was killed)."""
        first = self.uid(0)
        assert first is not None
        for pid_uid in {proc_uid(pid) for pid in uid_processes(range(first, first + SLOTS_PER_BLOCK))}:
            if pid_uid is not None:
                kill_uid_processes(pid_uid)

    def workdir(self, slot: int) -> str:
        """The working directory of the slot's next run, ready for its uid."""
        uid = self.uid(slot)
        if self.private and uid is not None:
            workdir = f"/tmp/slot-{slot}"
            if slot not in self.mounted:
                self.mounted[slot] = mount_workdir(workdir, uid, SANDBOX_GID)
            return workdir
        workdir = tempfile.mkdtemp(prefix="pettingllm-sandbox-")
        if uid is not None:  # root without the view: the slot's uid must be able to use it
            os.chown(workdir, uid, SANDBOX_GID)
        return workdir

    def network_namespace(self, slot: int, isolate: bool) -> int | None:
        """The network namespace a run in ``slot`` joins: the host's if it asked for no
        isolation, else the slot's own empty one (or, if one cannot be made, the server's
        empty one); None when the server has no network namespaces to give."""
        if self.host_netns is None or self.server_netns is None:
            return None
        if not isolate:
            return self.host_netns
        if slot not in self.slot_netns:
            if _libc().unshare(CLONE_NEWNET) != 0:
                return self.server_netns
            try:
                self.slot_netns[slot] = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            finally:
                if _libc().setns(self.server_netns, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "could not return to the server's network namespace")
        return self.slot_netns[slot]

    def reset_workdir(self, slot: int, workdir: str) -> bool:
        """Leave a run's working directory as new for the slot's next run, whatever the
        program did to it (a directory named like the source file, a tree deeper than any
        recursion, unreadable directories, FIFOs, links, changed permissions, timestamps or
        extended attributes...). Returns whether the slot can be used again; a slot whose
        directory could not be renewed is retired, and the server lives on with the others."""
        uid = self.uid(slot)
        if self.private and uid is not None:
            with contextlib.suppress(OSError):
                # Untouched (most runs, failed ones too: the source is never written there)?
                if directory_state(workdir) == self.mounted.get(slot):
                    return True
            try:  # a fresh tmpfs: quicker and surer than deleting whatever is there
                self.mounted[slot] = mount_workdir(workdir, uid, SANDBOX_GID)
            except OSError:
                self.mounted.pop(slot, None)
                return False
            return True
        # A fresh directory per run (the slot is reusable whatever happens to this one).
        with contextlib.suppress(OSError):
            remove_tree(workdir)
        return True
