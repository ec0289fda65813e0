"""What a round trip between two processes costs when they share a CPU, and when they do not.

    python benchmarks/cpu_placement.py [--rounds 40] [--batch 200]

No rlm_compat in it: two forked peers echo 64-byte messages over socketpairs, one pinned to the
parent's CPU, the other to another CPU, measured in alternating batches as CPU time (the
parent's thread plus the peer's ``/proc/<pid>/schedstat``). On the 2-vCPU development VM the
peer on the other CPU costs ~4x the CPU per round trip (~45 against ~10 us): waking a process on
another virtual CPU goes through the hypervisor. That, not the size of the context, is what made
the 100 MB session of ``isolation_bench.py``'s row 4 look 1.4-2.5x dearer than the 1 MB one when
the scheduler had left its worker on the other CPU (see docs/performance.md). Linux only.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

MESSAGE = b"x" * 64


def _echo(sock: socket.socket) -> None:
    while True:
        data = sock.recv(4096)
        if not data:
            os._exit(0)
        sock.sendall(data)


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def _peer(cpu: int, others: list[socket.socket]) -> tuple[int, socket.socket]:
    mine, theirs = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        for sock in (mine, *others):  # or an earlier peer would never see its channel close
            sock.close()
        _echo(theirs)
    theirs.close()
    os.sched_setaffinity(pid, {cpu})
    return pid, mine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, default=200)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("needs two CPUs")
    os.sched_setaffinity(0, {cpus[0]})
    first = _peer(cpus[0], [])
    peers = {"same CPU": first, "other CPU": _peer(cpus[1], [first[1]])}
    spent: dict[str, list[float]] = {name: [] for name in peers}
    names = list(peers)
    for i in range(args.rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            pid, sock = peers[name]
            peer0, self0 = _cpu_ns(pid), time.thread_time_ns()
            for _ in range(args.batch):
                sock.sendall(MESSAGE)
                sock.recv(4096)
            total = time.thread_time_ns() - self0 + _cpu_ns(pid) - peer0
            spent[name].append(total / args.batch / 1000)
    for pid, sock in peers.values():
        sock.close()
        os.waitpid(pid, 0)
    print(f"load average {os.getloadavg()[0]:.2f}; CPU per round trip, both processes:")
    for name, values in spent.items():
        median, floor = statistics.median(values), min(values)
        print(f"  peer on the {name:9s}: median {median:5.1f} us, floor {floor:5.1f} us")
    same, other = spent["same CPU"], spent["other CPU"]
    print(
        f"  other / same: median {statistics.median(other) / statistics.median(same):.2f} x, "
        f"floor {min(other) / min(same):.2f} x"
    )


if __name__ == "__main__":
    main()
