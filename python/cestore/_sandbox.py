"""The sandbox's two names both drop-ins use when no harness binds its own.

A harness defines `SandboxError` and `ReadOnlyMount` once (in its
`proposer_sandbox`) and binds them into `runtime_mounts` and `task_assets`
alike; used as they are, the two drop-ins share these.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class SandboxError(RuntimeError):
    """A sandbox's inputs could not be captured, checked or staged safely."""


@dataclass(frozen=True)
class ReadOnlyMount:
    """One read-only bind mount: a host path and where the sandbox sees it."""

    source: Path
    target: str
