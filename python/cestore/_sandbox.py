"""The sandbox's two names both drop-ins use when no harness binds its own.

A harness defines `SandboxError` and `ReadOnlyMount` once (in its
`proposer_sandbox`) and binds them into `runtime_mounts` and `task_assets`
alike; used as they are, the two drop-ins share these.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ._store import Store


class SandboxError(RuntimeError):
    """A sandbox's inputs could not be captured, checked or staged safely."""


@dataclass(frozen=True)
class ReadOnlyMount:
    """One read-only bind mount: a host path and where the sandbox sees it."""

    source: Path
    target: str


def namespace_store(ns: Mapping[str, Any]) -> Callable[[], Store]:
    """The `Store` a bound namespace's `CESTORE_STORE` names, as a function.

    The store last made is kept for as long as what decides it stays the
    same (the namespace's `CESTORE_STORE`, `$CESTORE_BIN`, `$PATH`) and its
    binary is still there: looking the binary up costs some 0.3 ms a call.
    """
    last: dict[tuple[Optional[Path], Optional[str], Optional[str]], Store] = {}

    def store() -> Store:
        location = ns.get("CESTORE_STORE")
        path = Path(location).absolute() if location is not None else None
        key = (path, os.environ.get("CESTORE_BIN"), os.environ.get("PATH"))
        made = last.get(key)
        if made is None or not os.access(made.binary, os.X_OK):
            last.clear()
            made = last[key] = Store(path)
        return made

    return store
