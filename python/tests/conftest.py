"""Fixtures: the repository's embedded census extract (the 1980 PUMS
fertility extract, 8 attributes) with its schema and 2-way marginal spec."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "fertility1980"
RECORDS = REPO / "datasets" / "fertility1980.csv.gz"


@pytest.fixture(scope="session")
def records() -> pd.DataFrame:
    """The records as strings, as the CSV holds them."""
    return pd.read_csv(RECORDS, dtype=str, keep_default_na=False)


@pytest.fixture(scope="session")
def spec_path() -> Path:
    return EXAMPLES / "spec.json"


@pytest.fixture(scope="session")
def schema_path() -> Path:
    return EXAMPLES / "schema.json"


@pytest.fixture(scope="session")
def xtask() -> Path:
    """The release build of `cargo xtask` (CI builds it for the regression
    gate first, and sets DPMM_REQUIRE_XTASK so that a missing one fails
    rather than skips)."""
    path = REPO / "target" / "release" / "xtask"
    if not path.exists():
        if os.environ.get("DPMM_REQUIRE_XTASK"):
            pytest.fail(f"{path} is missing (build it: cargo build --release -p xtask)")
        pytest.skip("no release build of xtask")
    return path


@pytest.fixture(scope="session")
def dpmm_command() -> Path:
    """The `dpmm` command: the release build (CI builds it) or else the
    debug one `cargo test` builds; a missing one fails under CI."""
    for build in ("release", "debug"):
        path = REPO / "target" / build / "dpmm"
        if path.exists():
            return path
    if os.environ.get("DPMM_REQUIRE_XTASK"):
        pytest.fail("no build of the dpmm command under target/")
    pytest.skip("no build of the dpmm command")


@pytest.fixture(scope="session")
def duckdb_module():
    if os.environ.get("DPMM_REQUIRE_XTASK"):
        import duckdb  # CI installs it: a missing one fails

        return duckdb
    return pytest.importorskip("duckdb")


def copy_to(tmp: Path, path: Path) -> Path:
    out = tmp / path.name
    shutil.copy(path, out)
    return out
