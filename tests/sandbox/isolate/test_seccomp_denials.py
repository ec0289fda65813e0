"""Every call the worker's filter refuses, made raw (``libc.syscall``) inside a real hardened worker.

One worker makes every call of :data:`PROBES` with every layer on; a second makes the same calls
with only the ``seccomp`` layer off (the control). A refused call must answer ``EPERM`` in the
first and anything else in the second — so each test fails if its rule is removed, and no call
passes for failing on its own. The arguments are ones the kernel rejects or that change nothing
(a pid of 0, a null pointer, a descriptor of -1, a signal 0, the parent's limit read, not set):
the filter answers before the kernel looks at them, so the control may run them unfiltered.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

import pytest

from rlm_compat.config import Limits
from rlm_compat.sandbox import recv_frame, send_frame, start_worker, syscall_number
from rlm_compat.sandbox.isolate import hardening, syscalls
from rlm_compat.tools.escape_assumed import HOOK_ENTRY

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or "seccomp" not in hardening.available_layers(),
    reason="needs the seccomp layer",
)

_CLONE_THREAD = 0x00010000
_NS_NAMES = {
    0x00020000: "NEWNS",
    0x02000000: "NEWCGROUP",
    0x04000000: "NEWUTS",
    0x08000000: "NEWIPC",
    0x10000000: "NEWUSER",
    0x20000000: "NEWPID",
    0x40000000: "NEWNET",
}

# name -> (system call, arguments); an argument that is a str is evaluated in the worker with
# me, ppid, own_pidfd, parent_pidfd, buf (4 KiB), iov (one 16-byte iovec into buf), page (an iovec
# of one page the parent has mapped), cwd (AT_FDCWD);
# the answers come back one character per call (the reply's message is short)
PROBES: dict[str, tuple[str, tuple[int | str, ...]]] = {
    "pidfd_open": ("pidfd_open", ("ppid", 0)),
    "process_madvise": ("process_madvise", ("parent_pidfd", "page", 1, 20, 0)),  # MADV_COLD
    "process_mrelease": ("process_mrelease", ("parent_pidfd", 0)),
    "pidfd_getfd": ("pidfd_getfd", ("own_pidfd", 0, 0)),
    "pidfd_send_signal": ("pidfd_send_signal", ("own_pidfd", 0, 0, 0)),
    "kcmp": ("kcmp", ("me", "me", 0, 0, 0)),
    "ptrace": ("ptrace", (2, "me", 0, 0)),  # PEEKDATA on an untraced process: ESRCH
    "process_vm_readv": ("process_vm_readv", ("me", "iov", 1, "iov", 1, 0)),
    "process_vm_writev": ("process_vm_writev", ("me", "iov", 1, "iov", 1, 0)),
    "move_pages": ("move_pages", (0, 0, 0, 0, 0, 0)),
    "migrate_pages": ("migrate_pages", (0, 0, 0, 0)),
    "get_robust_list": ("get_robust_list", (0, "buf", "buf + 8")),
    "setpriority": ("setpriority", (99, 0, 0)),
    "ioprio_set": ("ioprio_set", (99, 0, 0)),
    "sched_setscheduler": ("sched_setscheduler", (0, 99, "buf")),
    "sched_setparam": ("sched_setparam", (-1, "buf")),
    "sched_setattr": ("sched_setattr", (0, 0, 0)),
    "prlimit64 on another pid": ("prlimit64", ("ppid", 4, 0, "buf")),  # read the parent's RLIMIT_CORE
    "sched_setaffinity on another pid": ("sched_setaffinity", ("ppid", 0, 0)),
    "userfaultfd": ("userfaultfd", (1,)),  # UFFD_USER_MODE_ONLY
    "perf_event_open": ("perf_event_open", (0, 0, -1, -1, 0)),
    "bpf": ("bpf", (9999, 0, 0)),
    "io_uring_setup": ("io_uring_setup", (0, 0)),
    "io_uring_enter": ("io_uring_enter", (-1, 0, 0, 0, 0, 0)),
    "io_uring_register": ("io_uring_register", (-1, 0, 0, 0)),
    "keyctl": ("keyctl", (9999, 0, 0, 0, 0)),
    "add_key": ("add_key", (0, 0, 0, 0, 0)),
    "request_key": ("request_key", (0, 0, 0, 0)),
    "fanotify_init": ("fanotify_init", (0x200, 0)),  # FAN_REPORT_FID
    "inotify_init": ("inotify_init", ()),
    "inotify_init1": ("inotify_init1", (0,)),
    "memfd_secret": ("memfd_secret", (0,)),
    "modify_ldt": ("modify_ldt", (0, "buf", 0)),
    "iopl": ("iopl", (0,)),
    "ioperm": ("ioperm", (0, 0, 0)),
    "lookup_dcookie": ("lookup_dcookie", (0, 0, 0)),
    "uselib": ("uselib", (0,)),
    "execve": ("execve", (0, 0, 0)),
    "execveat": ("execveat", (-1, 0, 0, 0, 0)),
    "socket": ("socket", (-1, 0, 0)),
    "mount": ("mount", (0, 0, 0, 0, 0)),
    "umount2": ("umount2", (0, 0)),
    "move_mount": ("move_mount", (-1, 0, -1, 0, 0xFFFFFFFF)),
    "open_tree": ("open_tree", (-1, 0, 0xFFFFFFFF)),
    "open_tree_attr": ("open_tree_attr", (-1, 0, 0xFFFFFFFF, 0, 0)),
    "fsopen": ("fsopen", (0, 0xFFFFFFFF)),
    "fsmount": ("fsmount", (-1, 0xFFFFFFFF, 0)),
    "fsconfig": ("fsconfig", (-1, 0, 0, 0, 0)),
    "fspick": ("fspick", (-1, 0, 0xFFFFFFFF)),
    "mount_setattr": ("mount_setattr", (-1, 0, 0xFFFFFFFF, 0, 0)),
    "statmount": ("statmount", (0, 0, 0, 0)),
    "listmount": ("listmount", (0, 0, 0, 0)),
    "pivot_root": ("pivot_root", (0, 0)),
    "chroot": ("chroot", (0,)),
    "setns": ("setns", (-1, 0)),
    "unshare": ("unshare", (0,)),
    "open_by_handle_at": ("open_by_handle_at", (-1, 0, 0)),
    "name_to_handle_at": ("name_to_handle_at", ("cwd", 0, 0, 0, 0)),
    "kexec_load": ("kexec_load", (0, 0, 0, 0xFFFFFFFF)),
    "kexec_file_load": ("kexec_file_load", (-1, -1, 0, 0, 0xFFFFFFFF)),
    "init_module": ("init_module", (0, 0, 0)),
    "finit_module": ("finit_module", (-1, 0, 0)),
    "delete_module": ("delete_module", (0, 0)),
    "reboot": ("reboot", (0, 0, 0, 0)),  # no magic numbers: EINVAL
    "swapon": ("swapon", (0, 0)),
    "swapoff": ("swapoff", (0,)),
    "acct": ("acct", (1,)),  # a bad pointer, never NULL (that would switch accounting off)
    "quotactl": ("quotactl", (0, 0, 0, 0)),
    "quotactl_fd": ("quotactl_fd", (-1, 0, 0, 0)),
    "syslog": ("syslog", (99, 0, 0)),
    "personality": ("personality", (0xFFFFFFFF,)),  # only asks
    "sethostname": ("sethostname", (0, 99999)),
    "setdomainname": ("setdomainname", (0, 99999)),
    "settimeofday": ("settimeofday", (0, 0)),
    "clock_settime": ("clock_settime", (-1, "buf")),
    "clock_adjtime": ("clock_adjtime", (-1, "buf")),
    "adjtimex": ("adjtimex", (0,)),
    "vhangup": ("vhangup", ()),  # the worker has no terminal
    "chmod": ("chmod", (0, 0)),
    "fchmod": ("fchmod", (-1, 0)),
    "fchmodat": ("fchmodat", ("cwd", 0, 0)),
    "fchmodat2": ("fchmodat2", ("cwd", 0, 0, 0)),
    "chown": ("chown", (0, 0, 0)),
    "fchown": ("fchown", (-1, 0, 0)),
    "lchown": ("lchown", (0, 0, 0)),
    "fchownat": ("fchownat", ("cwd", 0, 0, 0, 0)),
    "setxattr": ("setxattr", (0, 0, 0, 0, 0)),
    "lsetxattr": ("lsetxattr", (0, 0, 0, 0, 0)),
    "fsetxattr": ("fsetxattr", (-1, 0, 0, 0, 0)),
    "setxattrat": ("setxattrat", (-1, 0, 0, 0, 0, 0)),
    "removexattr": ("removexattr", (0, 0)),
    "lremovexattr": ("lremovexattr", (0, 0)),
    "fremovexattr": ("fremovexattr", (-1, 0)),
    "removexattrat": ("removexattrat", (-1, 0, 0, 0)),
    "file_setattr": ("file_setattr", (-1, 0, 0, 0, 0)),
    "utime": ("utime", (0, 0)),
    "utimes": ("utimes", (0, 0)),
    "futimesat": ("futimesat", ("cwd", 0, 0)),
    "utimensat": ("utimensat", (-1, 0, 0, 0)),
    "shmget": ("shmget", (0, 0, 0)),
    "shmat": ("shmat", (-1, 0, 0)),
    "shmdt": ("shmdt", (0,)),
    "shmctl": ("shmctl", (-1, 2, 0)),
    "msgget": ("msgget", (0x7F5EC001, 0)),
    "msgsnd": ("msgsnd", (-1, 0, 0, 0)),
    "msgrcv": ("msgrcv", (-1, 0, 0, 0, 0)),
    "msgctl": ("msgctl", (-1, 2, 0)),
    "semget": ("semget", (0x7F5EC001, 0, 0)),
    "semop": ("semop", (-1, 0, 0)),
    "semtimedop": ("semtimedop", (-1, 0, 0, 0)),
    "semctl": ("semctl", (-1, 0, 2, 0)),
    "mq_open": ("mq_open", (0, 0, 0, 0)),
    "mq_unlink": ("mq_unlink", (0,)),
    "mq_timedsend": ("mq_timedsend", (-1, 0, 0, 0, 0)),
    "mq_timedreceive": ("mq_timedreceive", (-1, 0, 0, 0, 0)),
    "mq_notify": ("mq_notify", (-1, 0)),
    "mq_getsetattr": ("mq_getsetattr", (-1, 0, 0)),
    **{
        # a thread flag without CLONE_SIGHAND: the kernel says EINVAL before it makes anything
        f"clone with CLONE_{_NS_NAMES[flag]}": ("clone", (_CLONE_THREAD | flag, 0, 0, 0, 0))
        for flag in syscalls.CLONE_NAMESPACE_FLAGS
    },
    **{f"ioctl {request:#x}": ("ioctl", (-1, request, 0)) for request in syscalls.IOCTLS_DENIED},
}

ALLOWED: dict[str, tuple[str, tuple[int | str, ...]]] = {
    "prlimit64 on itself": ("prlimit64", (0, 4, 0, "buf")),
    "sched_getaffinity": ("sched_getaffinity", (0, 128, "buf")),
    "sched_setaffinity on itself": ("sched_setaffinity", (0, 128, "buf")),  # the mask just read
    "memfd_create": ("memfd_create", ("buf + 1024", 1)),  # MFD_CLOEXEC
    "ioctl FIONREAD": ("ioctl", (3, 0x541B, "buf")),  # on its channel
}
"""What the worker's own work uses stays allowed (its limits, its memory files, its threads)."""

OWN_RULES = {"fork", "vfork"}
"""Denied calls the escape-assumed corpus makes instead (a control would really fork)."""

_PROGRAM = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class iovec(ctypes.Structure):
    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]
buffer = ctypes.create_string_buffer(4096)
vector = iovec(ctypes.addressof(buffer), 16)
page = iovec(id(None) & ~0xFFF, 4096)  # forked from the parent: mapped there too
def call(number, *args):
    result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return result if result >= 0 else -ctypes.get_errno()
me, ppid = os.getpid(), os.getppid()
names = {
    'me': me, 'ppid': ppid, 'cwd': -100,
    'own_pidfd': call(PARAMS['pidfd_open'], me, 0),
    'parent_pidfd': call(PARAMS['pidfd_open'], ppid, 0),
    'buf': ctypes.addressof(buffer), 'iov': ctypes.addressof(vector), 'page': ctypes.addressof(page),
}
answers = []
for number, args in PARAMS['calls']:
    result = call(number, *(eval(a, names) if isinstance(a, str) else a for a in args))
    answers.append(chr(0x100 - min(result, 0)))
raise RuntimeError(''.join(answers))
"""


def _probe(calls: dict[str, tuple[str, tuple[int | str, ...]]], off: str) -> dict[str, int]:
    """Each call's answer in a fresh worker (0: it succeeded, else the errno), with ``off`` layers
    switched off; calls this architecture lacks are left out."""
    numbered = {name: (syscall_number(call), args) for name, (call, args) in calls.items()}
    present = {name: (number, args) for name, (number, args) in numbered.items() if number is not None}
    params: dict[str, Any] = {
        "pidfd_open": syscall_number("pidfd_open"),
        "calls": [[number, list(args)] for number, args in present.values()],
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(hardening.DISABLE_ENV, off)
        handle = start_worker(Limits(), "forkserver", HOOK_ENTRY)
    try:
        handle.sock.settimeout(60.0)
        send_frame(handle.sock, {"code": _PROGRAM, "params": params})
        reply, _ = recv_frame(handle.sock)
    finally:
        handle.close()
    assert reply.get("type") == "RuntimeError", reply
    answers = [ord(char) - 0x100 for char in str(reply["message"])]  # one character per call
    assert len(answers) == len(present), reply
    return dict(zip(present, answers, strict=True))


@pytest.fixture(scope="module")
def hardened() -> dict[str, int]:
    return _probe({**PROBES, **ALLOWED}, "")


@pytest.fixture(scope="module")
def control() -> dict[str, int]:
    return _probe(PROBES, "seccomp")


def _present(name: str, answers: dict[str, int]) -> int:
    if name not in answers:
        pytest.skip(f"no {PROBES.get(name, ALLOWED.get(name, (name,)))[0]} on this architecture")
    return answers[name]


@pytest.mark.parametrize("name", sorted(PROBES))
def test_the_filter_refuses_it(hardened: dict[str, int], name: str) -> None:
    assert _present(name, hardened) == errno.EPERM, os.strerror(hardened[name])


@pytest.mark.parametrize("name", sorted(PROBES))
def test_without_the_filter_it_is_not_refused(control: dict[str, int], name: str) -> None:
    """The control: the same call, same arguments, seccomp off (every other layer on)."""
    answer = _present(name, control)
    if answer == errno.EPERM and os.geteuid() != 0:
        pytest.skip("the kernel refuses it to a user without the filter too")
    assert answer != errno.EPERM, f"{name}: EPERM with the filter off — the test would prove nothing"


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_what_the_worker_uses_stays_allowed(hardened: dict[str, int], name: str) -> None:
    assert _present(name, hardened) == 0, os.strerror(hardened[name])


def test_the_attack_calls_work_without_the_filter(control: dict[str, int]) -> None:
    """The reported attack: a pidfd to the parent opens, its limits read (as root and as the same
    user alike) and, as root, one of its pages marked cold — when nothing but the filter is off."""
    assert control["pidfd_open"] == 0
    assert control["prlimit64 on another pid"] == 0
    if os.geteuid() == 0:
        assert control["process_madvise"] == 0


def test_every_denied_call_has_a_probe() -> None:
    probed = {call for call, _ in PROBES.values()}
    assert set(syscalls.DENIED) - probed == OWN_RULES
    assert set(syscalls.OTHER_PROCESS_ONLY) <= probed


def test_the_numbers_come_from_the_running_architecture() -> None:
    machine = os.uname().machine
    if machine not in ("x86_64", "aarch64"):
        pytest.skip(f"the numbers below are x86_64's and aarch64's, not {machine}'s")
    assert syscall_number("fchmodat") == syscall_number("fchmodat", machine)
    assert syscall_number("pidfd_open") == 434
    assert syscall_number("no_such_call") is None


@pytest.mark.parametrize(
    ("name", "x86_64", "aarch64"),
    [
        ("pidfd_open", 434, 434),
        ("process_madvise", 440, 440),
        ("process_mrelease", 448, 448),
        ("pidfd_getfd", 438, 438),
        ("process_vm_readv", 310, 270),
        ("ptrace", 101, 117),
        ("kcmp", 312, 272),
        ("prlimit64", 302, 261),
        ("fchmodat", 268, 53),
        ("shmget", 29, 194),
        ("chmod", 90, None),
        ("inotify_init", 253, None),
        ("iopl", 172, None),
        ("fchmodat2", 452, 452),
        ("setxattrat", 463, 463),
        ("file_setattr", 469, 469),
    ],
)
def test_the_filter_resolves_each_architecture(name: str, x86_64: int, aarch64: int | None) -> None:
    """The filter names calls; libseccomp gives each architecture's number (or none: aarch64 has
    no chmod, only fchmodat), and calls newer than libseccomp share one number on both."""
    assert syscall_number(name, "x86_64") == x86_64
    assert syscall_number(name, "aarch64") == aarch64


def test_on_aarch64_only_calls_it_lacks_are_left_out() -> None:
    missing = {name for name in syscalls.DENIED if syscall_number(name, "aarch64") is None}
    x86_only = {"fork", "vfork", "chmod", "chown", "lchown", "utime", "utimes", "futimesat"}
    x86_only |= {"inotify_init", "modify_ldt", "iopl", "ioperm", "uselib"}
    assert missing == x86_only
