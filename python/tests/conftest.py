"""Shared fixtures: a store per test, release trees, and the reference's harness package."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CESTORE_SHARED", REPO.parent / "shared"))
REFERENCE = SHARED / "reference" / "workflow_bench"

# The whole runtime_mounts.py a harness keeps, as docs/python.md gives it.
BOUND_MODULE = '''\
"""Trusted runtime views for isolated workflow-benchmark sessions (cestore-backed)."""

from pathlib import Path

from cestore.runtime_mounts import bind

from .proposer_sandbox import SANDBOX_GITNEXUS, SANDBOX_GITNEXUS_SHARED, ReadOnlyMount, SandboxError

bind(
    globals(),
    sandbox_error=SandboxError,
    read_only_mount=ReadOnlyMount,
    sandbox_gitnexus=SANDBOX_GITNEXUS,
    sandbox_gitnexus_shared=SANDBOX_GITNEXUS_SHARED,
    harness_root=Path(__file__).resolve().parents[2],
)
'''

# The same file for a harness at upstream's current revision, as docs/python.md gives it.
BOUND_MODULE_UPSTREAM = BOUND_MODULE.replace("    globals(),\n", "    globals(),\n    revision=\"upstream\",\n")
BOUND_MODULES = {"seed": BOUND_MODULE, "upstream": BOUND_MODULE_UPSTREAM}

# A harness's proposer_sandbox, as the drop-in needs it: the names it imports.
STAND_IN_SANDBOX = '''\
from dataclasses import dataclass
from pathlib import Path

SANDBOX_GITNEXUS = "/opt/gitnexus"
SANDBOX_GITNEXUS_SHARED = "/opt/gitnexus-shared"


class SandboxError(RuntimeError):
    pass


@dataclass(frozen=True)
class ReadOnlyMount:
    source: Path
    target: str
'''


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh store, also the CLI's default for the test."""
    path = tmp_path / "store"
    monkeypatch.setenv("CESTORE_DIR", str(path))
    return path


def write_release(root: Path, version: str = "1.2.3", extra: dict[str, bytes] | None = None) -> Path:
    """A minimal valid release at `root`, plus `extra` files (relative path -> bytes)."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / ".claude-plugin" / "plugin.json").write_text(
        f'{{"name": "compound-engineering", "version": "{version}"}}'
    )
    for skill in ("ce-plan", "ce-work", "ce-code-review"):
        (root / "skills" / skill).mkdir(parents=True)
        (root / "skills" / skill / "SKILL.md").write_text(f"# {skill}\n")
    for rel, data in (extra or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def harness_packages(base: Path) -> tuple[object, object]:
    """Two harness packages: the reference's own module, and the same harness bound to cestore."""
    if not REFERENCE.is_dir():
        pytest.skip(f"the reference is absent: {REFERENCE} (set CESTORE_SHARED)")
    seed_pkg = base / "seedpkg" / "seed_bench"
    shutil.copytree(REFERENCE, seed_pkg)
    drop_pkg = base / "droppkg" / "drop_bench"
    drop_pkg.mkdir(parents=True)
    (drop_pkg / "__init__.py").write_text("")
    shutil.copy(REFERENCE / "proposer_sandbox.py", drop_pkg / "proposer_sandbox.py")
    (drop_pkg / "runtime_mounts.py").write_text(BOUND_MODULE)
    sys.path[:0] = [str(base / "seedpkg"), str(base / "droppkg")]
    try:
        for name in [m for m in sys.modules if m.split(".")[0] in ("seed_bench", "drop_bench")]:
            del sys.modules[name]
        seed = importlib.import_module("seed_bench.runtime_mounts")
        drop = importlib.import_module("drop_bench.runtime_mounts")
    finally:
        del sys.path[:2]
    return seed, drop


@pytest.fixture
def harnesses(tmp_path: Path, store_dir: Path) -> tuple[object, object]:
    """(the reference's runtime_mounts, the bound drop-in), each in its own harness package."""
    return harness_packages(tmp_path / "harness")


def bound_harness(base: Path, revision: str) -> object:
    """A harness package whose runtime_mounts.py is the drop-in bound at `revision`,
    beside a stand-in proposer_sandbox; returns that runtime_mounts module."""
    name = f"bench_{revision}_{abs(hash(str(base)))}"
    pkg = base / f"pkg_{revision}" / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "proposer_sandbox.py").write_text(STAND_IN_SANDBOX)
    (pkg / "runtime_mounts.py").write_text(BOUND_MODULES[revision])
    sys.path.insert(0, str(pkg.parent))
    try:
        return importlib.import_module(f"{name}.runtime_mounts")
    finally:
        sys.path.remove(str(pkg.parent))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Appends `skipping TEST: REASON` to $CESTORE_SKIP_LOG for each skipped test (scripts/test lists them)."""
    log = os.environ.get("CESTORE_SKIP_LOG")
    if not log or not report.skipped:
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"skipping {report.nodeid}: {reason}\n")
