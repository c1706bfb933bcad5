"""cestore: a content-addressed snapshot store for pinned plugin releases.

The `cestore` binary is the engine; this package finds it (`find_binary`) and
drives it through its `--json` output (`Store`). `cestore.runtime_mounts` is a
drop-in for the benchmark harness's module of the same name.
"""

from __future__ import annotations

from ._errors import (
    Ambiguous,
    Conflict,
    Damaged,
    Error,
    NotFound,
    Rejected,
    RemoteError,
    StoreError,
    UsageError,
)
from ._find import BinaryNotFound, find_binary
from ._store import (
    ArmStage,
    AuditInput,
    AuditReport,
    Claimed,
    DamagedObject,
    DigestAudit,
    MalformedLine,
    Place,
    RowProblem,
    Bounds,
    Change,
    FileEntry,
    HeldStage,
    IngestStats,
    Mount,
    Provenance,
    Snapshot,
    SnapshotInfo,
    Stage,
    Store,
    VerifyReport,
    View,
)

__all__ = [
    "Ambiguous",
    "ArmStage",
    "AuditInput",
    "AuditReport",
    "BinaryNotFound",
    "Bounds",
    "Change",
    "Claimed",
    "Conflict",
    "Damaged",
    "DamagedObject",
    "DigestAudit",
    "Error",
    "FileEntry",
    "HeldStage",
    "IngestStats",
    "MalformedLine",
    "Mount",
    "NotFound",
    "Place",
    "Provenance",
    "Rejected",
    "RemoteError",
    "RowProblem",
    "Snapshot",
    "SnapshotInfo",
    "Stage",
    "Store",
    "StoreError",
    "UsageError",
    "VerifyReport",
    "View",
    "find_binary",
]
