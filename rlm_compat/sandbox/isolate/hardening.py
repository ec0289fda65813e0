"""OS-level hardening of a REPL worker: what model code could use if it escaped the interpreter.

RestrictedPython is one layer, and it has been escaped before. So a worker, after its fork and
before any model code, drops what an escaped interpreter would reach for (Linux; each layer only
where the kernel has it, and the worker says which it has)::

    ``no_new_privs``   no set-uid / file-capability gains, ever (and the precondition of the others)
    ``not_dumpable``   other processes of the user cannot ptrace it or read its ``/proc/<pid>/mem``
    ``landlock-fs``    no writes anywhere (but the worker's own directory when ``file_size_bytes`` allows
                       files); reads only beneath the Python installation, the loaded packages, the
                       shared libraries, time zones, its own directory and ``/proc/<pid>`` — never a
                       home directory, never ``/tmp`` as a whole
    ``landlock-net``   no TCP ``bind`` / ``connect`` (Landlock ABI 4)
    ``landlock-scope`` no signals to, and no abstract Unix sockets of, processes outside the worker
                       (its parent, the host, other sessions' workers: Landlock ABI 6)
    ``seccomp``        a system-call filter (libseccomp, through ``pyseccomp``): no ``execve``, no new
                       processes, no new sockets, nothing aimed at another process (``ptrace``,
                       ``process_vm_*``, pidfds, ``process_madvise``, limits, priorities), no
                       ``mount``, ``bpf``, ``kexec``, module loading, namespaces, ``io_uring``, keyrings,
                       ``perf_event_open``, IPC objects, file metadata (``chmod``, ``chown``, xattrs),
                       host-wide settings, no signals to the parent and grandparent, no way back to
                       dumpable (the list and the reasons: :mod:`.syscalls`)

The fork server stays unhardened (it must fork and read whatever a preload needs); each worker
hardens itself in :func:`~.workerinit.prepare`. :func:`available_layers` is what the parent
records as the layers of a run (the same kernel answers both); a layer the probe promised but the
worker cannot set up stops the worker (fail closed), so a record never claims more than ran.
``$RLM_COMPAT_HARDENING_OFF`` (a comma list of layer names, or ``all``) switches layers off for
ablation and for the escape-assumed tests' mutation checks; the record then names fewer layers.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from . import syscalls

__all__ = [
    "DISABLE_ENV",
    "LAYERS",
    "HardeningError",
    "active_layers",
    "available_layers",
    "describe_host",
    "harden",
    "landlock_abi",
    "prepare_plan",
    "prewarm",
    "syscall_number",
]

DISABLE_ENV = "RLM_COMPAT_HARDENING_OFF"
LAYERS = ("no_new_privs", "not_dumpable", "landlock-fs", "landlock-net", "landlock-scope", "seccomp")


class HardeningError(OSError):
    """A layer the host offers could not be set up in the worker (the worker must not run)."""


# --- Landlock (three system calls; their numbers are the same on every Linux architecture) --------

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_TRUNCATE = 1 << 14
_FS_ABI1_ALL = (1 << 13) - 1
_FS_BY_ABI = {1: _FS_ABI1_ALL, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_FS_ALL_LATEST = (1 << 16) - 1  # ABI 5 adds IOCTL_DEV
_FS_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | (1 << 15)
_NET_BIND_TCP = 1
_NET_CONNECT_TCP = 2
_SCOPE_ABSTRACT_UNIX = 1
_SCOPE_SIGNAL = 2

_READ = _FS_READ_FILE | _FS_READ_DIR
_WRITE = (
    _READ | _FS_WRITE_FILE | _FS_REMOVE_FILE | _FS_REMOVE_DIR | _FS_MAKE_DIR | _FS_MAKE_REG | _FS_TRUNCATE
)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _syscall(number: int, *args: Any) -> int:
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(ctypes.c_long(number), *args))
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def _prctl(option: int, arg: int = 0) -> None:
    if _libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: no Landlock, or not on Linux)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return _syscall(
            _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0


_LIBSECCOMP = "libseccomp.so.2"


@functools.lru_cache(maxsize=1)
def _seccomp_module() -> Any:
    """``pyseccomp`` (libseccomp through ctypes), or None where it or libseccomp is missing.

    pyseccomp looks its libraries up with ``ctypes.util.find_library``, which runs ``ldconfig``
    (~45 ms, on the fork server's start path): when libseccomp's soname loads, the lookup is
    answered with it (and libc with the process's own symbols) for the import's duration.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes.util

    try:
        ctypes.CDLL(_LIBSECCOMP)
    except OSError:
        known: dict[str, str | None] = {}  # not under its usual name: let pyseccomp search
    else:
        known = {"c": None, "seccomp": _LIBSECCOMP}
    real = ctypes.util.find_library
    ctypes.util.find_library = lambda name: known[name] if name in known else real(name)
    try:
        import pyseccomp
    except (ImportError, RuntimeError, OSError):  # RuntimeError: "Unable to find libseccomp"
        return None
    finally:
        ctypes.util.find_library = real
    return pyseccomp


def _disabled() -> frozenset[str]:
    raw = os.environ.get(DISABLE_ENV, "")
    names = {part.strip() for part in raw.split(",") if part.strip()}
    return frozenset(LAYERS) if "all" in names else frozenset(names)


def _host_layers() -> tuple[str, ...]:
    if not sys.platform.startswith("linux"):
        return ()
    layers = ["no_new_privs", "not_dumpable"]
    abi = landlock_abi()
    if abi >= 1:
        layers.append("landlock-fs")
    if abi >= 4:
        layers.append("landlock-net")
    if abi >= 6:
        layers.append("landlock-scope")
    if _kernel_has_seccomp() and _seccomp_module() is not None:
        layers.append("seccomp")
    return tuple(layers)


def _kernel_has_seccomp() -> bool:
    """Whether this kernel filters system calls (``PR_GET_SECCOMP`` answers, it is not EINVAL)."""
    libc = _libc()
    return int(libc.prctl(_PR_GET_SECCOMP, 0, 0, 0, 0)) >= 0


@functools.lru_cache(maxsize=1)
def _cached_host_layers() -> tuple[str, ...]:
    return _host_layers()


def available_layers() -> tuple[str, ...]:
    """The layers a worker started now gets: what this host offers, less those switched off."""
    off = _disabled()
    return tuple(layer for layer in _cached_host_layers() if layer not in off)


def describe_host() -> list[tuple[str, bool, str]]:
    """One ``(layer, active, why)`` per layer, for ``rlm-compat doctor``."""
    linux = sys.platform.startswith("linux")
    abi = landlock_abi()
    off = _disabled()
    have = _cached_host_layers()
    notes = {
        "no_new_privs": "prctl(PR_SET_NO_NEW_PRIVS)" if linux else "not Linux",
        "not_dumpable": "prctl(PR_SET_DUMPABLE, 0)" if linux else "not Linux",
        "landlock-fs": f"Landlock ABI {abi}" if abi >= 1 else "no Landlock in this kernel",
        "landlock-net": f"Landlock ABI {abi}" if abi >= 4 else f"needs Landlock ABI 4 (kernel has {abi})",
        "landlock-scope": f"Landlock ABI {abi}" if abi >= 6 else f"needs Landlock ABI 6 (kernel has {abi})",
        "seccomp": "libseccomp via pyseccomp"
        if "seccomp" in have
        else "no seccomp filters in this kernel, or pyseccomp / libseccomp (libseccomp2) missing",
    }
    rows = []
    for layer in LAYERS:
        active = layer in have and layer not in off
        why = notes[layer] + (f" (switched off by ${DISABLE_ENV})" if layer in have and layer in off else "")
        rows.append((layer, active, why))
    return rows


# --- what a worker may read ----------------------------------------------------------------------

_SYSTEM_READ = (
    "/lib",
    "/lib32",
    "/lib64",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/usr/share/zoneinfo",
)


_INSTALL_DIRS = ("site-packages", "dist-packages")


def _never_readable(path: str, homes: Sequence[str]) -> bool:
    """``/`` and any directory that holds a home directory (``/home``, ``/root``, ``~`` itself)."""
    if path == "/":
        return True
    return any(home == path or home.startswith(path.rstrip("/") + "/") for home in homes)


def _homes() -> list[str]:
    homes = {"/root", "/home"}
    for candidate in (os.environ.get("HOME"), os.path.expanduser("~")):
        if candidate and candidate.startswith("/"):
            homes.add(os.path.realpath(candidate))
    return sorted(homes)


def _module_roots() -> list[str]:
    """Where the modules loaded so far came from: a top-level package's directory, or a module's
    file (the fork server has loaded the sandbox and what it uses by now)."""
    roots = []
    for name, module in list(sys.modules.items()):
        if "." in name:
            continue
        where = getattr(module, "__file__", None)
        if not isinstance(where, str):
            continue
        if getattr(module, "__path__", None) is not None:
            where = os.path.dirname(where)
        roots.append(where)
    return roots


@functools.lru_cache(maxsize=1)
def prepare_plan() -> tuple[str, ...]:
    """The paths a worker may read beneath (computed once, in the fork server before it forks).

    The Python installation (prefixes: the standard library and site-packages, for the lazy
    imports of allowlisted modules), the packages and modules already loaded (this one,
    RestrictedPython...), the shared libraries extension modules load, time-zone data — not the
    import path as a whole (a script's directory, ``/tmp`` or the home directory would come with
    it). A path that is ``/`` or holds a home directory is always left out.
    """
    homes = _homes()
    seen: list[str] = []
    candidates: list[str] = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    if sys.executable:
        candidates.append(os.path.dirname(os.path.realpath(sys.executable)))
    candidates += _SYSTEM_READ
    candidates += _module_roots()
    # install directories on the import path (a user site, a second site-packages): libraries a
    # worker started by "spawn" has not imported yet when it hardens itself
    candidates += [
        entry
        for entry in sys.path
        if isinstance(entry, str) and os.path.basename(entry.rstrip("/")) in _INSTALL_DIRS
    ]
    for candidate in candidates:
        path = os.path.realpath(os.path.abspath(candidate))
        if not os.path.exists(path) or _never_readable(path, homes) or path in seen:
            continue
        seen.append(path)
    dirs = [path for path in seen if os.path.isdir(path)]
    return tuple(p for p in seen if not any(p != d and p.startswith(d.rstrip("/") + "/") for d in dirs))


def _add_path_rule(ruleset: int, path: str, access: int, handled_fs: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since the plan was made: nothing to allow
    try:
        if not os.path.isdir(path):
            access &= _FS_FILE_ONLY
        rule = _PathBeneathAttr(access & handled_fs, fd)
        _syscall(
            _SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0
        )
    finally:
        os.close(fd)


def _landlock(layers: Iterable[str], readable: Sequence[str], writable: str | None) -> None:
    layers = set(layers)
    abi = landlock_abi()
    handled_fs = _FS_BY_ABI.get(abi, _FS_ALL_LATEST) if "landlock-fs" in layers else 0
    handled_net = _NET_BIND_TCP | _NET_CONNECT_TCP if "landlock-net" in layers else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if "landlock-scope" in layers else 0
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    size = 24 if scoped else 16 if handled_net else 8
    ruleset = _syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    try:
        if handled_fs:
            for path in (*readable, f"/proc/{os.getpid()}"):
                _add_path_rule(ruleset, path, _READ, handled_fs)
            if writable is not None:
                _add_path_rule(ruleset, writable, _WRITE, handled_fs)
        _syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


# --- seccomp -------------------------------------------------------------------------------------

_CLONE_THREAD = 0x00010000
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_SECCOMP = 21
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_LOW32 = 0xFFFFFFFF


def _ancestors() -> list[int]:
    """The parent and its parent (the fork server and the host, or the host and its parent)."""
    pids = [os.getppid()]
    try:
        with open(f"/proc/{pids[0]}/stat", "rb") as f:
            pids.append(int(f.read().rsplit(b")", 1)[1].split()[1]))
    except (OSError, ValueError, IndexError):
        pass
    return [pid for pid in pids if pid > 1]


def _number(sc: Any, arch: Any, name: str) -> int | None:
    """``name``'s number on ``arch``: libseccomp's, else :data:`.syscalls.NEWER`'s where the shared
    numbering holds; None where the architecture has no such call (or it is unknown)."""
    try:
        number = int(sc.resolve_syscall(arch, name))
    except (OSError, ValueError):
        number = -1
    if number >= 0:
        return number
    names = {getattr(sc.Arch, upper, None): upper.lower() for upper in ("X86_64", "AARCH64", "RISCV64")}
    if names.get(arch) in syscalls.NEWER_NUMBERING_ARCHES and name in syscalls.NEWER:
        return syscalls.NEWER[name]
    return None


def syscall_number(name: str, arch: str | None = None) -> int | None:
    """The number of system call ``name`` as the filter resolves it on this machine, or on ``arch``
    (``"x86_64"``, ``"aarch64"``...): for tests that call it raw, and to check the table of an
    architecture the tests do not run on. None: the architecture has no such call, or libseccomp
    is missing."""
    sc = _seccomp_module()
    if sc is None:
        return None
    token = sc.system_arch() if arch is None else getattr(sc.Arch, arch.upper(), None)
    return None if token is None else _number(sc, token, name)


@functools.lru_cache(maxsize=4)
def _filter_program(ancestors: tuple[int, ...]) -> bytes:
    """The filter as a BPF program, built by libseccomp (cached: the fork server builds it once for
    its workers, whose ancestors it knows, and each worker only loads it)."""
    sc = _seccomp_module()
    if sc is None:
        raise HardeningError(errno.ENOSYS, "pyseccomp / libseccomp is not available")
    deny = sc.ERRNO(errno.EPERM)
    flt = sc.SyscallFilter(sc.ALLOW)
    arch = sc.system_arch()
    for name in syscalls.DENIED:
        number = _number(sc, arch, name)
        if number is not None:
            flt.add_rule(deny, number)
    # threads yes, processes no (CLONE_THREAD absent), and no thread in new namespaces; clone3
    # hides its flags in memory, so it answers ENOSYS and the C library falls back to clone
    flt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, _CLONE_THREAD, 0))
    for flag in syscalls.CLONE_NAMESPACE_FLAGS:
        flt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if _number(sc, arch, "clone3") is not None:
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    flt.add_rule(deny, "prctl", sc.Arg(0, sc.EQ, _PR_SET_DUMPABLE))
    for name in syscalls.OTHER_PROCESS_ONLY:
        flt.add_rule(deny, name, sc.Arg(0, sc.NE, 0))
    for request in syscalls.IOCTLS_DENIED:
        flt.add_rule(deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, request))
    targets = [*ancestors, _LOW32]  # _LOW32: pid -1, every process the user may signal
    for name in ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        for pid in targets:
            flt.add_rule(deny, name, sc.Arg(0, sc.MASKED_EQ, _LOW32, pid & _LOW32))
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(write_end, "wb", closefd=True) as sink:
            flt.export_bpf(sink)
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(read_end)
    return b"".join(chunks)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _seccomp(ancestors: Sequence[int]) -> None:
    program = _filter_program(tuple(ancestors))
    if not program or len(program) % 8:
        raise HardeningError(errno.EINVAL, "libseccomp exported no usable filter")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    _prctl_pointer(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog))


def _prctl_pointer(option: int, mode: int, pointer: Any) -> None:
    if _libc().prctl(option, ctypes.c_ulong(mode), pointer, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def prewarm() -> None:
    """In the fork server: what every worker it forks would compute the same way, computed once
    (the paths it may read, the host's layers, the filter for its children's ancestors)."""
    prepare_plan()
    if "seccomp" in _cached_host_layers():
        with contextlib.suppress(Exception):  # a worker that cannot build it fails closed itself
            _filter_program((os.getpid(), *([os.getppid()] if os.getppid() > 1 else [])))


# --- the worker's one call -----------------------------------------------------------------------

_ACTIVE: tuple[str, ...] = ()


def active_layers() -> tuple[str, ...]:
    """The layers :func:`harden` put in force in this process (empty before, and in the host)."""
    return _ACTIVE


def harden(
    *, workdir: str | None = None, writable: bool = False, layers: Sequence[str] | None = None
) -> tuple[str, ...]:
    """Harden this process (a freshly started worker); returns the layers now in force.

    ``workdir``: the worker's own directory, readable, and writable when ``writable``; no other
    place is writable. ``layers``: which to
    apply (default :func:`available_layers`). Raises :class:`HardeningError` when one of them
    cannot be applied: the caller must then not run model code.
    """
    global _ACTIVE
    wanted = available_layers() if layers is None else tuple(layers)
    if not wanted:
        return ()
    try:
        ancestors = _ancestors()
        readable = prepare_plan()
        if "no_new_privs" in wanted or any(layer.startswith(("landlock", "seccomp")) for layer in wanted):
            _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        if "not_dumpable" in wanted:
            _prctl(_PR_SET_DUMPABLE, 0)
        if any(layer.startswith("landlock") for layer in wanted):
            if workdir is not None and not writable:
                readable = (*readable, workdir)
            _landlock(wanted, readable, workdir if writable else None)
        if "seccomp" in wanted:
            _seccomp(ancestors)
    except HardeningError:
        raise
    except Exception as exc:
        raise HardeningError(errno.EPERM, f"worker hardening failed: {type(exc).__name__}: {exc}") from None
    _ACTIVE = wanted
    return wanted
