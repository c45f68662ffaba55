"""Type stubs of the native module (crates/dpmm-py)."""

from typing import Any, Callable, Optional

import numpy as np

class Workload:
    @staticmethod
    def from_path(path: str) -> Workload: ...
    @staticmethod
    def from_text(text: str, name: str, base: str) -> Workload: ...
    @property
    def spec_json(self) -> str: ...
    @property
    def queries(self) -> float: ...
    @property
    def domain(self) -> list[tuple[str, int]]: ...
    @property
    def groups(self) -> list[tuple[str, float, float]]: ...

class Schema:
    @staticmethod
    def from_path(path: str) -> Schema: ...
    @staticmethod
    def from_text(text: str, name: str) -> Schema: ...
    @property
    def domain(self) -> list[tuple[str, int]]: ...
    @property
    def columns_read(self) -> list[str]: ...

class Plan:
    @staticmethod
    def load(path: str, max_memory: Optional[int] = None) -> Plan: ...
    @property
    def privacy(self) -> str: ...
    @property
    def objective_name(self) -> str: ...
    @property
    def objective(self) -> Optional[float]: ...
    @property
    def lower_bound(self) -> Optional[float]: ...
    @property
    def duality_gap(self) -> Optional[float]: ...
    @property
    def epsilon(self) -> float: ...
    @property
    def delta(self) -> Optional[float]: ...
    @property
    def groups(self) -> list[tuple[str, int, float]]: ...
    def report_json(self) -> Optional[str]: ...
    def to_json(self) -> str: ...
    def report_html(self) -> str: ...
    def save(self, path: str) -> None: ...

def plan(
    workload: Workload,
    epsilon: float,
    delta: Optional[float] = None,
    objective: str = "total",
    max_memory: Optional[int] = None,
    progress: Optional[Callable[[str], Any]] = None,
    spinner: bool = True,
) -> Plan: ...
def ledger_create(path: str, total_epsilon: float, total_delta: Optional[float] = None) -> str: ...
def ledger_status(path: str) -> tuple[str, float, float, float, int]: ...
def release(
    schema: Schema,
    ledger: str,
    epsilon: float,
    delta: Optional[float] = None,
    workload: Optional[Workload] = None,
    plan: Optional[Plan] = None,
    path: Optional[str] = None,
    stream: Any = None,
    counts: bool = False,
    max_memory: Optional[int] = None,
    report: Optional[str] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    measurements: Optional[str] = None,
    progress: Optional[Callable[[str], Any]] = None,
    spinner: bool = True,
) -> tuple[
    list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, list[str], Optional[np.ndarray]
]: ...

class Measurements:
    @staticmethod
    def load(path: str) -> Measurements: ...
    def answer(
        self,
        workload: Workload,
        nonneg: bool = False,
        max_memory: Optional[int] = None,
        out: Optional[str] = None,
        report: Optional[str] = None,
        progress: Optional[Callable[[str], Any]] = None,
        spinner: bool = True,
    ) -> tuple[
        list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, list[str], Optional[np.ndarray]
    ]: ...
    def estimable(self) -> list[list[str]]: ...
    def __len__(self) -> int: ...
    @property
    def budget(self) -> tuple[float, Optional[float]]: ...
    @property
    def domain(self) -> list[tuple[str, int]]: ...

def check(
    schema: Schema,
    path: Optional[str] = None,
    stream: Any = None,
    counts: bool = False,
    workload: Optional[Workload] = None,
    time_column: Optional[str] = None,
    steps: Optional[int] = None,
    start: Optional[str] = None,
    step: Optional[str] = None,
    timezone: Optional[str] = None,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    max_steps_per_unit: Optional[int] = None,
    min_separation: Optional[int] = None,
) -> str: ...
def stream(
    schema: Schema,
    workload: Workload,
    ledger: str,
    epsilon: float,
    out: str,
    time_column: str,
    steps: int,
    delta: Optional[float] = None,
    path: Optional[str] = None,
    stream: Any = None,
    start: Optional[str] = None,
    step: Optional[str] = None,
    timezone: Optional[str] = None,
    bands: Optional[int] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    max_steps_per_unit: Optional[int] = None,
    min_separation: Optional[int] = None,
    report: Optional[str] = None,
    progress: Optional[Callable[[str], Any]] = None,
    spinner: bool = True,
) -> tuple[str, bool]: ...
def optimize(
    w: np.ndarray,
    optimizer: str,
    privacy: str,
    branching: Optional[int] = None,
    effort: Optional[float] = None,
) -> dict[str, Any]: ...
def error(
    w: np.ndarray, a: np.ndarray, epsilon: float, delta: Optional[float] = None
) -> dict[str, Any]: ...
def optimizers() -> list[tuple[str, str, list[str]]]: ...
def workload_matrix(name: str, n: int) -> np.ndarray: ...
def factorize(
    steps: int,
    family: str,
    workload: str = "prefix",
    bands: Optional[int] = None,
    buffers: Optional[int] = None,
    participations: Optional[int] = None,
    separation: Optional[int] = None,
    objective: str = "total",
) -> dict[str, Any]: ...

class DpFtrl:
    def __init__(
        self,
        ledger: str,
        epsilon: float,
        delta: float,
        steps: int,
        dimension: int,
        clip_norm: float,
        bands: Optional[int] = None,
        participations: int = 1,
        separation: int = 1,
        objective: str = "max",
        coefficients: Optional[list[float]] = None,
    ) -> None: ...
    def next(self, rows: Optional[np.ndarray] = None) -> np.ndarray: ...
    @property
    def step(self) -> int: ...
    @property
    def steps(self) -> int: ...
    @property
    def dimension(self) -> int: ...
    @property
    def figures(self) -> tuple[float, float, float, int, bool]: ...
    @property
    def coefficients(self) -> list[float]: ...
    @property
    def variances(self) -> tuple[float, float]: ...
    @property
    def ledger_entry(self) -> int: ...

class SparkRelease:
    def spec(self) -> bytes: ...
    def columns(self) -> list[str]: ...
    def bounds_units(self) -> bool: ...
    def close(self) -> None: ...
    def encoded_ddl(self) -> str: ...
    def finish(
        self, partitions: Optional[int], stream: Any
    ) -> tuple[
        list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, str, list[str], Optional[np.ndarray]
    ]: ...

def spark_prepare(
    schema: Schema,
    ledger: str,
    epsilon: float,
    columns: Any,
    delta: Optional[float] = None,
    workload: Optional[Workload] = None,
    plan: Optional[Plan] = None,
    max_memory: Optional[int] = None,
    report: Optional[str] = None,
    nonneg: bool = False,
    privacy_unit: Optional[str] = None,
    max_records_per_unit: Optional[int] = None,
    weight: Optional[str] = None,
    max_weight: Optional[float] = None,
    measurements: Optional[str] = None,
) -> SparkRelease: ...
def spark_partial_ddl() -> str: ...
def spark_count(spec: bytes, partition: int, stream: Any) -> Any: ...
def spark_encode(spec: bytes, stream: Any) -> Any: ...
def spark_bound(
    spec: bytes, partition: int, stream: Any, memory: int = ..., spill_dir: Optional[str] = None
) -> Any: ...
def _join_workers() -> None: ...
