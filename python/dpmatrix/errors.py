"""The exceptions dpmatrix raises for its own reasons, one class per kind
of failure, all under :class:`DpmmError`. A class whose input is at fault
is also a ``ValueError`` (so ``except ValueError`` still catches bad
input); an internal failure is also a ``RuntimeError``; a cancelled call
is also a ``KeyboardInterrupt``. Each message is the ``dpmm`` command's
one line. Nothing is spent on any of them raised before a release's
charge, and every refusal comes before it."""

from __future__ import annotations

__all__ = [
    "DpmmError",
    "InputError",
    "SchemaError",
    "WorkloadError",
    "DataError",
    "ParameterError",
    "LedgerError",
    "BudgetExceeded",
    "InternalError",
    "Cancelled",
]


class DpmmError(Exception):
    """Every exception dpmatrix raises for its own reasons."""


class InputError(DpmmError, ValueError):
    """An input is wrong that has no class of its own: a plan or
    measurement file, an output path, a memory limit."""


class SchemaError(InputError):
    """The schema is wrong: its JSON, a column, a domain, a policy."""


class WorkloadError(InputError):
    """The workload spec is wrong, or does not fit the schema's domain."""


class DataError(InputError):
    """The records or counts cannot be read as the schema says: a missing
    column, a file that cannot be parsed, a malformed record under the
    ``error`` policy."""


class ParameterError(InputError):
    """ε, δ or an option is out of its range."""


class LedgerError(InputError):
    """The ledger cannot be created, opened, verified or written."""


class BudgetExceeded(DpmmError):
    """A release would spend more privacy than the ledger has left; it was
    refused before any noise was drawn, and nothing was spent."""


class InternalError(DpmmError, RuntimeError):
    """dpmatrix failed on valid input (a solver that did not converge, no
    operating-system entropy, a bug)."""


class Cancelled(DpmmError, KeyboardInterrupt):
    """The call was interrupted before anything was charged: nothing was
    spent."""
