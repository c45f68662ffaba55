"""dpmatrix as a citizen of the Python runtime: Ctrl-C stops a long call
and raises KeyboardInterrupt (and the module works afterwards), other
Python threads run while it computes, and the spinner shows only on a
terminal."""

from __future__ import annotations

import _thread
import os
import pty
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import dpmatrix as dm

# COA on a dense 1024-cell workload: each Newton step is a few dense
# 1024³ products, and the run takes many of them (13–23 s on the 2-core
# machine this was written on), so an interrupt honoured only when the
# call returned would be seen as a run of that length.
LONG_N = 1024


def long_workload() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((LONG_N, LONG_N))


def test_ctrl_c_interrupts_a_long_optimization_and_the_module_still_works():
    w = long_workload()
    # A runner started as a background job without job control inherits
    # SIGINT ignored, and interrupt_main then does nothing: install
    # Python's own handler, as an interactive session has it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            dm.optimize(w, optimizer="coa", privacy="approx")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    # Far below the uninterrupted run: the interrupt stopped the solver.
    assert time.monotonic() - start < 6.0
    small = dm.optimize(dm.workloads.prefix(16), optimizer="coa", privacy="approx")
    assert small.termination.startswith("converged")


def test_other_python_threads_run_while_an_optimization_computes():
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        start = time.monotonic()
        dm.optimize(dm.workloads.all_range(256), optimizer="coa", privacy="approx")
        elapsed = time.monotonic() - start
    finally:
        stop.set()
        thread.join()
    # With the GIL held for the call the ticker would stall for its whole
    # length; released, it ticks throughout. The bounds follow the call's
    # own length (about 1 s here), not a machine's speed.
    gaps = np.diff(ticks)
    during = [t for t in ticks if start <= t <= start + elapsed]
    assert gaps.max() < max(0.5, elapsed / 4)
    assert len(during) >= elapsed / 0.05


SCRIPT = """
import dpmatrix as dm
r = dm.optimize(dm.workloads.all_range(256), optimizer="coa", privacy="approx")
print("objective", r.objective)
"""


def run_with_stderr_on_a_terminal() -> tuple[str, str]:
    """Runs SCRIPT with its stderr on a pseudo-terminal; what it wrote to
    stdout and to the terminal."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT],
        stdout=subprocess.PIPE,
        stderr=secondary,
        text=True,
    )
    os.close(secondary)
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal closed: the child is done
            break
        if not chunk:
            break
        seen += chunk
    out, _ = proc.communicate(timeout=120)
    os.close(primary)
    assert proc.returncode == 0
    return out, seen.decode("utf-8", "replace")


def test_a_spinner_shows_on_a_terminal():
    out, terminal = run_with_stderr_on_a_terminal()
    assert out.startswith("objective")
    assert "optimizing" in terminal and "Ctrl-C stops" in terminal


def test_nothing_is_written_to_stderr_off_a_terminal(capfd):
    dm.optimize(dm.workloads.all_range(256), optimizer="coa", privacy="approx")
    assert capfd.readouterr().err == ""
