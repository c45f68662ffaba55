"""The README's Python block, run exactly as written from the repository root."""

from __future__ import annotations

import os
import re

from conftest import REPO


def test_the_readme_python_example_runs(capsys):
    text = (REPO / "README.md").read_text()
    section = text.split("## A five-minute tour: Python", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        exec(compile(block, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    out = capsys.readouterr().out
    assert "morekids = no & gender1 = male" in out
    assert out.strip().splitlines()[-1] == "0.0"
