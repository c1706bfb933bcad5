"""What both drop-ins share: the sandbox's two names, the store, and what this process staged.

A harness defines `SandboxError` and `ReadOnlyMount` once (in its
`proposer_sandbox`) and binds them into `runtime_mounts` and `task_assets`
alike; used as they are, the two drop-ins share these. Each snapshot either
drop-in stages is noted here (`note_staged`), so that `record_environment`
can record the process's whole environment as one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ._store import Store
from ._trees import EnvironmentIngest


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


#: The environment variable naming the private key that signs each staged snapshot.
SIGNING_KEY_ENV = "CESTORE_SIGNING_KEY"


def signing_key() -> Optional[Path]:
    """The private key file `CESTORE_SIGNING_KEY` names, read at each staging; None when unset or empty."""
    value = os.environ.get(SIGNING_KEY_ENV, "")
    return Path(value).expanduser().absolute() if value else None


#: The (role, digest) pairs this process's drop-ins staged, by store, in the order first staged.
_STAGED: dict[tuple[Optional[Path], Optional[str], str], dict[tuple[str, str], None]] = {}


def _staged_key(store: Store) -> tuple[Optional[Path], Optional[str], str]:
    """Which store a staging went to: its location (or the default's), and the binary."""
    return (store.location, os.environ.get("CESTORE_DIR"), store.binary)


def note_staged(store: Store, role: str, digest: str) -> None:
    """Notes that this process staged `digest` in `store`, filling the results-row field `role`."""
    _STAGED.setdefault(_staged_key(store), {})[(role, digest)] = None


def environment_recorder(store: Callable[[], Store]) -> Callable[[str], EnvironmentIngest]:
    """`record_environment(name)` for a bound namespace whose store `store()` gives."""

    def record_environment(name: str) -> EnvironmentIngest:
        """Records every snapshot this process staged in the store as one environment named `name`.

        The CE plugin (`ce_plugin_mounts_for_arm`'s release, as
        `ce_plugin_manifest_digest`), the GitNexus runtime
        (`gitnexus_runtime_manifest_digest`) and each task's snapshot
        (`task_asset_snapshot_digest`), as either drop-in staged them; its
        `manifest_digest` is a row's `environment_digest`. The same set again
        records nothing new. A ValueError when nothing was staged yet.
        """
        current = store()
        staged = list(_STAGED.get(_staged_key(current), {}))
        if not staged:
            raise ValueError("no snapshot was staged in this process yet: nothing to record as an environment")
        return current.ingest_environment(staged, name=name, sign_with=signing_key())

    return record_environment
