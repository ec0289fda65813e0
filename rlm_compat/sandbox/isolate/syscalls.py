"""What the worker's system-call filter refuses (:mod:`.hardening` builds it; the tests read it).

A worker is assumed to run as the host's user, possibly root, with RestrictedPython escaped. The
other layers do not cover everything the kernel offers such a process: Landlock does not look at
``chmod`` / ``chown`` / extended attributes / timestamps of files it can name, at limits,
priorities or memory advice aimed at other processes by pid or pidfd, at System V / POSIX IPC
objects, or at the host-wide settings root may change. So the filter refuses, with ``EPERM``:

- every call in :data:`DENIED` (the reason beside each one);
- :data:`OTHER_PROCESS_ONLY` when the pid argument is not 0 (the worker keeps its own limits and
  affinity; glibc passes 0 for the calling process);
- ``clone`` with a namespace flag (a thread is allowed, a thread in new namespaces is not);
- ``ioctl`` with a request in :data:`IOCTLS_DENIED` (inode flags: ``immutable``, ``append-only``).

Names are resolved by libseccomp for the running architecture, so the numbers are right on
x86_64 and aarch64 alike; a name an architecture lacks (``chmod``, ``iopl`` on aarch64) is
skipped. A call newer than the installed libseccomp is added by its number from
:data:`NEWER` — since Linux 5.1 new calls share one number on every architecture this applies to.
"""

from __future__ import annotations

__all__ = [
    "CLONE_NAMESPACE_FLAGS",
    "DENIED",
    "IOCTLS_DENIED",
    "NEWER",
    "NEWER_NUMBERING_ARCHES",
    "OTHER_PROCESS_ONLY",
]

_WAY_OUT = "a way out of the worker"
_OTHER_PROCESS = "reaches another process (the host, other sessions' workers)"
_KERNEL = "kernel attack surface no worker needs"
_HOST_STATE = "changes state shared with the host (root only, but a worker may run as root)"
_FILE_META = "changes a file's metadata outside the worker: Landlock does not check it"
_IPC = "System V / POSIX IPC objects are shared with the host and outlive the worker"
_SCHED = "changes scheduling: the host's (same user), or its own to real-time (root)"

DENIED: dict[str, str] = {
    "execve": _WAY_OUT,
    "execveat": _WAY_OUT,
    "fork": _WAY_OUT,
    "vfork": _WAY_OUT,
    "socket": _WAY_OUT,
    "ptrace": _OTHER_PROCESS,
    "process_vm_readv": _OTHER_PROCESS,
    "process_vm_writev": _OTHER_PROCESS,
    "pidfd_open": "a handle on any process: the door to process_madvise, process_mrelease, waitid",
    "pidfd_getfd": _OTHER_PROCESS,
    "pidfd_send_signal": _OTHER_PROCESS,
    "process_madvise": "pages out / frees another process's memory (the host's, by pidfd)",
    "process_mrelease": "frees a dying process's memory",
    "kcmp": _OTHER_PROCESS,
    "move_pages": "moves another process's pages between memory nodes",
    "migrate_pages": "moves another process's pages between memory nodes",
    "get_robust_list": "reads another thread's robust-futex list head (an address leak)",
    "setpriority": _SCHED,
    "ioprio_set": _SCHED,
    "sched_setscheduler": _SCHED,
    "sched_setparam": _SCHED,
    "sched_setattr": _SCHED,
    "mount": _WAY_OUT,
    "umount2": _WAY_OUT,
    "move_mount": _WAY_OUT,
    "open_tree": _WAY_OUT,
    "open_tree_attr": _WAY_OUT,
    "fsopen": _WAY_OUT,
    "fsmount": _WAY_OUT,
    "fsconfig": _WAY_OUT,
    "fspick": _WAY_OUT,
    "mount_setattr": _WAY_OUT,
    "statmount": "describes the host's mounts",
    "listmount": "describes the host's mounts",
    "pivot_root": _WAY_OUT,
    "chroot": _WAY_OUT,
    "setns": _WAY_OUT,
    "unshare": _WAY_OUT,
    "open_by_handle_at": "opens a file by handle, around Landlock's path rules",
    "name_to_handle_at": "the handle open_by_handle_at needs",
    "bpf": _KERNEL,
    "perf_event_open": _KERNEL,
    "userfaultfd": _KERNEL,
    "io_uring_setup": _KERNEL,
    "io_uring_enter": _KERNEL,
    "io_uring_register": _KERNEL,
    "keyctl": "keyrings are shared with the user's other processes",
    "add_key": "keyrings are shared with the user's other processes",
    "request_key": "keyrings are shared with the user's other processes",
    "fanotify_init": "as root: descriptors of the files other processes open, around Landlock",
    "inotify_init": "watches directories Landlock hides (who creates what in a home directory)",
    "inotify_init1": "watches directories Landlock hides (who creates what in a home directory)",
    "memfd_secret": "takes pages out of the kernel's direct map (host-wide cost); unused",
    "modify_ldt": _KERNEL,
    "iopl": "raw I/O port access (root)",
    "ioperm": "raw I/O port access (root)",
    "lookup_dcookie": _KERNEL,
    "uselib": _KERNEL,
    "kexec_load": _HOST_STATE,
    "kexec_file_load": _HOST_STATE,
    "init_module": _HOST_STATE,
    "finit_module": _HOST_STATE,
    "delete_module": _HOST_STATE,
    "reboot": _HOST_STATE,
    "swapon": _HOST_STATE,
    "swapoff": _HOST_STATE,
    "acct": _HOST_STATE,
    "quotactl": _HOST_STATE,
    "quotactl_fd": _HOST_STATE,
    "syslog": _HOST_STATE,
    "personality": _KERNEL,
    "sethostname": _HOST_STATE,
    "setdomainname": _HOST_STATE,
    "settimeofday": _HOST_STATE,
    "clock_settime": _HOST_STATE,
    "clock_adjtime": _HOST_STATE,
    "adjtimex": _HOST_STATE,
    "vhangup": _HOST_STATE,
    "chmod": _FILE_META,
    "fchmod": _FILE_META,
    "fchmodat": _FILE_META,
    "fchmodat2": _FILE_META,
    "chown": _FILE_META,
    "fchown": _FILE_META,
    "lchown": _FILE_META,
    "fchownat": _FILE_META,
    "setxattr": _FILE_META,
    "lsetxattr": _FILE_META,
    "fsetxattr": _FILE_META,
    "setxattrat": _FILE_META,
    "removexattr": _FILE_META,
    "lremovexattr": _FILE_META,
    "fremovexattr": _FILE_META,
    "removexattrat": _FILE_META,
    "file_setattr": _FILE_META,
    "utime": _FILE_META,
    "utimes": _FILE_META,
    "futimesat": _FILE_META,
    "utimensat": _FILE_META,
    "shmget": _IPC,
    "shmat": _IPC,
    "shmdt": _IPC,
    "shmctl": _IPC,
    "msgget": _IPC,
    "msgsnd": _IPC,
    "msgrcv": _IPC,
    "msgctl": _IPC,
    "semget": _IPC,
    "semop": _IPC,
    "semtimedop": _IPC,
    "semctl": _IPC,
    "mq_open": _IPC,
    "mq_unlink": _IPC,
    "mq_timedsend": _IPC,
    "mq_timedreceive": _IPC,
    "mq_notify": _IPC,
    "mq_getsetattr": _IPC,
}
"""Refused outright: nothing a worker does needs them."""

NEWER: dict[str, int] = {
    "pidfd_send_signal": 424,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_open": 434,
    "pidfd_getfd": 438,
    "process_madvise": 440,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "memfd_secret": 447,
    "process_mrelease": 448,
    "fchmodat2": 452,
    "statmount": 457,
    "listmount": 458,
    "setxattrat": 463,
    "removexattrat": 466,
    "open_tree_attr": 467,
    "file_setattr": 469,
}
"""The refused calls of the shared table (Linux 5.1 to 6.17), by number: used where the installed
libseccomp is older than the call (2.5.4 knows none from ``statmount`` on; older releases fewer)."""

NEWER_NUMBERING_ARCHES = ("x86_64", "aarch64", "riscv64")
"""Architectures on which :data:`NEWER`'s numbers hold (the shared table, no offset)."""

OTHER_PROCESS_ONLY = ("prlimit64", "sched_setaffinity")
"""Refused when aimed at another process (pid argument not 0): the host's ``RLIMIT_CPU`` /
``RLIMIT_AS`` (it would be killed) or its CPUs — the same user may, and Landlock does not ask."""

CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
"""``clone`` with any of these is refused, threads included (``CLONE_NEWTIME`` has no place in
``clone``'s flags: their low byte is the exit signal)."""

IOCTLS_DENIED = (
    0x40086602,  # FS_IOC_SETFLAGS: immutable / append-only on a file it may read
    0x401C5820,  # FS_IOC_FSSETXATTR
)
"""``ioctl`` requests refused (compared on the low 32 bits, the kernel's ``unsigned int``)."""
