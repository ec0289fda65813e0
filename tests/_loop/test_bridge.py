"""The sync/async bridge: Ctrl-C stops a run that waits, whichever thread the kernel hands it to."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from locations import ROOT

_CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, threading, time
    from rlm_compat._loop.bridge import run_sync

    # as a foreground command: a background job of a non-interactive shell (how CI may start the
    # suite) inherits SIGINT ignored, and Python keeps it so
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def helper():
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)  # only this thread takes it: the main thread blocks it
        time.sleep(60)

    threading.Thread(target=helper, daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    async def waiting():
        await asyncio.Event().wait()  # a provider that never answers

    started = time.monotonic()
    try:
        run_sync(waiting())
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - started:.1f} s")
    """
)


def test_ctrl_c_taken_by_another_thread_still_stops_a_waiting_run() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("interrupted after "), (done.stdout, done.stderr[-2000:])
