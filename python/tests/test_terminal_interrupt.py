"""Ctrl-C typed on a real terminal (a pty whose line discipline turns ^C
into SIGINT for the foreground process group, as a person's terminal
does), 3 s into a long plan and a long release (before its charge), in
Python and in the command: the call ends within 1.5 s of the keystroke,
with KeyboardInterrupt in Python, and the ledger is unchanged."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

import dpmatrix as dm

REPO = Path(__file__).resolve().parents[2]

# OPT_⊗ with p-Identity factors under pure ε: the 4096-value factor takes
# tens of seconds (its evaluations about a second each, an
# eigendecomposition of its 4096×4096 Gram for the bound).
SPEC = {
    "domain": [{"name": "a", "size": 4096}, {"name": "b", "size": 64}],
    "queries": [{"kron": {"a": "allrange", "b": "prefix"}}],
}
SCHEMA = {
    "domain": [
        {"name": "a", "column": "a", "bins": {"start": 0, "stop": 4096, "width": 1}},
        {"name": "b", "column": "b", "bins": {"start": 0, "stop": 64, "width": 1}},
    ]
}
AFTER = 3.0
WITHIN = 1.5


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    d = tmp_path_factory.mktemp("terminal")
    (d / "spec.json").write_text(json.dumps(SPEC))
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    (d / "records.csv").write_text("a,b\n" + "".join(f"{i * 37 % 4096},{i % 64}\n" for i in range(500)))
    return d


def _controlling_terminal():
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def ctrl_c_on_a_terminal(argv, cwd: Path) -> tuple[float, str]:
    """Runs ``argv`` with a pty as its controlling terminal, types ^C
    into it after ``AFTER`` seconds, and returns the seconds from the
    keystroke to the process's end, and what it wrote."""
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdin=secondary, stdout=secondary, stderr=secondary,
        preexec_fn=_controlling_terminal, close_fds=True,
    )
    os.close(secondary)
    time.sleep(AFTER)
    assert proc.poll() is None, "the call ended before it was interrupted: not a long one"
    os.write(primary, b"\x03")
    typed = time.monotonic()
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    seconds = time.monotonic() - typed
    seen = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(primary)
    return seconds, seen.decode("utf-8", "replace")


PYTHON_CALL = """
import sys, dpmatrix as dm
w = dm.Workload.from_json("spec.json")
try:
    if sys.argv[1] == "plan":
        dm.plan(w, epsilon=1.0)
    else:
        dm.release("records.csv", schema=dm.Schema.from_json("schema.json"), workload=w,
                   epsilon=1.0, ledger="ledger.jsonl", report="page.html")
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def _ledger(case: Path) -> bytes:
    for name in ("ledger.jsonl", "ledger.jsonl.head"):
        (case / name).unlink(missing_ok=True)
    dm.Ledger.create(case / "ledger.jsonl", total_epsilon=2.0)
    return (case / "ledger.jsonl").read_bytes()


@pytest.mark.parametrize("call", ["plan", "release"])
def test_ctrl_c_in_python(case, call):
    before = _ledger(case)
    seconds, seen = ctrl_c_on_a_terminal([sys.executable, "-c", PYTHON_CALL, call], case)
    assert "KeyboardInterrupt" in seen, seen
    assert seconds < WITHIN, seconds
    assert (case / "ledger.jsonl").read_bytes() == before
    assert not (case / "page.html").exists()


@pytest.mark.parametrize("call", ["plan", "release"])
def test_ctrl_c_in_the_command(case, call, dpmm_command):
    before = _ledger(case)
    args = {
        "plan": ["plan", "--workload", "spec.json", "--epsilon", "1", "--out", "plan.json"],
        "release": ["release", "--data", "records.csv", "--schema", "schema.json",
                    "--workload", "spec.json", "--epsilon", "1", "--ledger", "ledger.jsonl",
                    "--out", "answers.csv"],
    }[call]
    seconds, seen = ctrl_c_on_a_terminal([dpmm_command, *args], case)
    assert seconds < WITHIN, (seconds, seen)
    assert (case / "ledger.jsonl").read_bytes() == before
    assert not (case / "plan.json").exists() and not (case / "answers.csv").exists()


def test_the_command_shows_how_far_a_long_plan_has_come(case, dpmm_command):
    """Within 10 s of its start, `dpmm plan` on a terminal shows a
    fraction and a percentage (passes and iterations against their
    budgets)."""
    import re
    import select

    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        [dpmm_command, "plan", "--workload", "spec.json", "--epsilon", "1", "--out", "p.json"],
        cwd=case, stdin=secondary, stdout=secondary, stderr=secondary,
        preexec_fn=_controlling_terminal, close_fds=True,
    )
    os.close(secondary)
    seen, start = b"", time.monotonic()
    shown = None
    try:
        while time.monotonic() - start < 10 and shown is None:
            ready, _, _ = select.select([primary], [], [], 0.2)
            if ready:
                seen += os.read(primary, 65536)
            shown = re.search(r"iterations \d+/\d+ \(\d+\.\d%\)", seen.decode("utf-8", "replace"))
    finally:
        os.write(primary, b"\x03")
        proc.wait(timeout=60)
        os.close(primary)
    assert shown is not None, seen.decode("utf-8", "replace")[-500:]


def test_plan_calls_its_progress_callable_and_stops_when_it_raises(case):
    """``dm.plan(progress=f)`` hands ``f`` progress lines with fractions on
    the calling thread; an exception ``f`` raises stops the plan as
    Ctrl-C does, within a second of being raised."""
    import re

    w = dm.Workload.from_json(case / "spec.json")
    lines: list[str] = []
    start = time.monotonic()
    raised_at = []

    class Enough(Exception):
        pass

    def progress(line: str) -> None:
        lines.append(line)
        if time.monotonic() - start > 3.0:
            raised_at.append(time.monotonic())
            raise Enough

    with pytest.raises(Enough):
        dm.plan(w, epsilon=1.0, progress=progress)
    assert time.monotonic() - raised_at[0] < WITHIN
    assert any(re.fullmatch(r"passes \d+/\d+ › iterations \d+/\d+ \(\d+\.\d%\)", l) for l in lines), lines
    with pytest.raises(ValueError):
        dm.plan(w, epsilon=1.0, progress="yes")


# A progress line: stages joined by ' › ', each a count, a fraction or
# (the records read) a percentage alone, and the innermost fraction's
# percentage.
STAGE = r"[a-z' ]+ (\d+(/\d+)?|\d+\.\d%)"
LINE = rf"{STAGE}( › {STAGE})*( \(\d+\.\d%\))?"


def test_a_release_stopped_before_its_charge_spends_nothing_and_frees_its_ledger(case):
    """``dm.release(progress=f)``: ``f``'s exception during planning stops
    the release at once with nothing spent; the next release on the same
    ledger starts at once (the stopped worker is waited for, so its ledger
    lock is gone) and its progress lines show the records read as a
    percentage only."""
    import re

    before = _ledger(case)
    schema = dm.Schema.from_json(case / "schema.json")
    long = dm.Workload.from_json(case / "spec.json")
    start = time.monotonic()
    raised_at = []

    class Enough(Exception):
        pass

    def stop(line: str) -> None:
        assert re.fullmatch(LINE, line), line
        if time.monotonic() - start > 1.0:
            raised_at.append(time.monotonic())
            raise Enough

    with pytest.raises(Enough):
        dm.release(case / "records.csv", schema=schema, workload=long, epsilon=1.0,
                   ledger=case / "ledger.jsonl", progress=stop)
    assert time.monotonic() - raised_at[0] < 0.5
    assert (case / "ledger.jsonl").read_bytes() == before

    small = dm.Workload.from_dict({"domain": SPEC["domain"],
                                   "queries": [{"kron": {"a": "identity", "b": "total"}}]})
    lines: list[str] = []
    answers = dm.release(case / "records.csv", schema=schema, workload=small, epsilon=0.5,
                         ledger=case / "ledger.jsonl", progress=lines.append)
    assert len(answers) == 4096
    assert dm.Ledger(case / "ledger.jsonl").spent == pytest.approx(0.5)
    for line in lines:
        assert re.fullmatch(LINE, line), line
        assert not re.search(r"read \d+/", line), line
