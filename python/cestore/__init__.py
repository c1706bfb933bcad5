"""cestore: a content-addressed snapshot store for pinned plugin releases.

The `cestore` binary is the engine; this package finds it (`find_binary`) and
drives it through its `--json` output (`Store`). `cestore.runtime_mounts` and
`cestore.task_assets` are drop-ins for the benchmark harness's modules of the
same names.
"""

import importlib as _importlib
from typing import Any as _Any

from ._errors import (
    Ambiguous,
    Conflict,
    Damaged,
    Error,
    NotFound,
    Rejected,
    RemoteError,
    StoreError,
    Untrusted,
    UsageError,
)
from ._find import BinaryNotFound, find_binary
from ._store import (
    ArmStage,
    Attestation,
    AuditInput,
    AuditReport,
    FieldCount,
    Claimed,
    DamagedObject,
    DigestAudit,
    MalformedLine,
    Place,
    RowProblem,
    Bounds,
    Change,
    Changes,
    FileEntry,
    GeneratedKey,
    HeldStage,
    IngestStats,
    LeftOut,
    SecretFound,
    Mount,
    Problem,
    Provenance,
    Repaired,
    SignedBy,
    SignReport,
    Snapshot,
    SnapshotInfo,
    SourceCheck,
    SourceEntry,
    SourceRecord,
    SourceSummary,
    Stage,
    Store,
    Verification,
    VerifyReport,
    View,
    ViewRecord,
)
from ._trees import (
    Dependency,
    DependenciesIngest,
    EnvironmentIngest,
    EnvironmentMember,
    HarnessDigests,
    Materialized,
    RuntimeComponent,
    RuntimeIngest,
    TaskIdentity,
    TaskIngest,
    TreeEntry,
    TreeIngest,
    TreeLimits,
    WritableCopy,
)

__all__ = [
    "Ambiguous",
    "ArmStage",
    "Attestation",
    "AuditInput",
    "AuditReport",
    "FieldCount",
    "BinaryNotFound",
    "Bounds",
    "Change",
    "Changes",
    "Claimed",
    "Conflict",
    "Damaged",
    "DamagedObject",
    "DependenciesIngest",
    "Dependency",
    "DigestAudit",
    "Error",
    "FileEntry",
    "GeneratedKey",
    "HarnessDigests",
    "HeldStage",
    "IngestStats",
    "LeftOut",
    "MalformedLine",
    "Materialized",
    "Mount",
    "NotFound",
    "Place",
    "Problem",
    "Provenance",
    "Rejected",
    "RemoteError",
    "Repaired",
    "RowProblem",
    "RuntimeComponent",
    "RuntimeIngest",
    "EnvironmentIngest",
    "EnvironmentMember",
    "SecretFound",
    "SignReport",
    "SignedBy",
    "Snapshot",
    "SnapshotInfo",
    "SourceCheck",
    "SourceEntry",
    "SourceRecord",
    "SourceSummary",
    "Stage",
    "Store",
    "StoreError",
    "TaskIdentity",
    "TaskIngest",
    "TreeEntry",
    "TreeIngest",
    "TreeLimits",
    "Untrusted",
    "UsageError",
    "Verification",
    "VerifyReport",
    "View",
    "ViewRecord",
    "WritableCopy",
    "find_binary",
]


def __getattr__(name: str) -> _Any:
    # `cestore.runtime_mounts` and `cestore.task_assets` without importing them first.
    if name in ("runtime_mounts", "task_assets"):
        return _importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # The public API only: not the private submodules or this module's own imports.
    return sorted([*__all__, "runtime_mounts", "task_assets"])
