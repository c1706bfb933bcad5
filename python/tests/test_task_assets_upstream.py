"""The harness's own tests of its task assets, restated against the drop-in, and the committed answers.

The harness (`abhigyanpatwari/GitNexus`) tests its `eval/workflow_bench/task_assets.py` in
`eval/tests/test_task_assets.py`. Each test here restates one of those, scenario for scenario and
assertion for assertion, run against `cestore.task_assets` bound into a stand-in harness package
whose `task_assets.py` is the file docs/python.md gives. Where the harness's test reaches inside its
module (a monkeypatched reflink or read), the same scenario is made real instead, and the comment
says how. The last tests run every fixture of tests/data/task-assets through the drop-in and compare
with the harness's committed answers.

They need a `cestore` binary with `ingest --profile task` and `materialize`; without one they are
skipped, with the reason printed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib
import json
import os
import re
import stat
import subprocess
import sys
import threading
from pathlib import Path, PurePosixPath
from typing import Any, Iterator

import pytest

import cestore

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs" / "python.md"
DATA = REPO_ROOT / "tests" / "data" / "task-assets"
FIXTURES = json.loads((DATA / "fixtures.json").read_text(encoding="utf-8"))
ANSWERS = json.loads((DATA / "answers.json").read_text(encoding="utf-8"))
SHA = "a" * 40

# The stand-in for the harness's proposer_sandbox: the names its task_assets.py imports, written here.
STAND_IN_SANDBOX = '''\
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

SANDBOX_WORKSPACE = "/workspace"
VITE_TEMP_DIR = ".vite-temp"
DEPENDENCY_MOUNT_BASENAME = "node_modules"


class SandboxError(RuntimeError):
    pass


@dataclass(frozen=True)
class ReadOnlyMount:
    source: Path
    target: str


def real_directory(path, *, label):
    absolute = Path(path).expanduser().absolute()
    try:
        st = absolute.lstat()
        real = absolute.resolve(strict=True)
    except OSError as exc:
        raise SandboxError(f"{label} must be a real directory: {absolute}: {exc}") from exc
    if not stat.S_ISDIR(st.st_mode):
        raise SandboxError(f"{label} must be a real directory: {absolute}")
    if real != absolute:
        raise SandboxError(f"{label} must not traverse symlinks: {absolute}")
    return absolute


def _prepare_clone_target(clone, relative, *, directory, label):
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open(clone, flags)
    try:
        for part in relative.parts[:-1]:
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                raise SandboxError(f"{label} target has a non-directory or symlink parent: {relative}") from exc
            os.close(fd)
            fd = inner
        name = relative.parts[-1]
        try:
            mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            raise SandboxError(f"{label} target cannot be a symlink: {relative}")
        if directory:
            if mode is None:
                os.mkdir(name, 0o700, dir_fd=fd)
            elif not stat.S_ISDIR(mode):
                raise SandboxError(f"{label} directory target has the wrong type: {relative}")
        elif directory is False:
            if mode is None:
                os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd))
            elif not stat.S_ISREG(mode):
                raise SandboxError(f"{label} file target has the wrong type: {relative}")
    finally:
        os.close(fd)
    return Path(clone, *relative.parts)
'''

# The stand-in for the harness's runtime_mounts: task_assets reads only HARNESS_ROOT.
STAND_IN_RUNTIME_MOUNTS = '''\
from pathlib import Path

HARNESS_ROOT = Path(__file__).resolve().parents[2]
'''


def docs_task_assets() -> str:
    """The harness's whole task_assets.py, as docs/python.md prints it."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.S)
    found = [block for block in blocks if "from cestore.task_assets import bind" in block]
    assert len(found) == 1, "docs/python.md prints one task_assets.py"
    return found[0]


def _binary_support() -> str | None:
    """Why the binary cannot run these tests, or None when it can."""
    try:
        binary = cestore.find_binary()
    except cestore.BinaryNotFound as exc:
        return str(exc)
    ingest = subprocess.run([binary, "ingest", "--profile", "task", "--help"], capture_output=True, text=True, check=False)
    if ingest.returncode != 0 or "--resolved-sha" not in ingest.stdout:
        return f"{binary} has no `ingest --profile task` (tree snapshots)"
    materialize = subprocess.run([binary, "materialize", "--help"], capture_output=True, text=True, check=False)
    if materialize.returncode != 0:
        return f"{binary} has no `materialize`"
    return None


@pytest.fixture(scope="session")
def tree_binary() -> None:
    reason = _binary_support()
    if reason is not None:
        print(f"SKIP: {reason}")
        pytest.skip(reason)


class Harness:
    """The stand-in harness package: its proposer_sandbox, runtime_mounts and the bound task_assets."""

    def __init__(self, sandbox: Any, runtime_mounts: Any, task_assets: Any) -> None:
        self.sandbox = sandbox
        self.runtime_mounts = runtime_mounts
        self.task_assets = task_assets


def make_harness(base: Path) -> Harness:
    name = f"wfbench_{hashlib.sha256(str(base).encode()).hexdigest()[:12]}"
    package = base / "harness-package" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "proposer_sandbox.py").write_text(STAND_IN_SANDBOX)
    (package / "runtime_mounts.py").write_text(STAND_IN_RUNTIME_MOUNTS)
    (package / "task_assets.py").write_text(docs_task_assets())
    sys.path.insert(0, str(package.parent))
    try:
        return Harness(
            importlib.import_module(f"{name}.proposer_sandbox"),
            importlib.import_module(f"{name}.runtime_mounts"),
            importlib.import_module(f"{name}.task_assets"),
        )
    finally:
        sys.path.remove(str(package.parent))


@pytest.fixture
def harness(tree_binary: None, tmp_path: Path, store_dir: Path) -> Harness:
    return make_harness(tmp_path)


def _repo_and_task(tmp_path: Path, files: dict[str, bytes]) -> tuple[Path, dict[str, Any]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    for relative, payload in files.items():
        target = repo / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(payload)
    return repo, {"sandbox_copy": sorted(files), "sandbox_dependencies": []}


def _reflinks(directory: Path) -> bool:
    """Whether the filesystem of `directory` clones a file (FICLONE)."""
    source, dest = directory / ".reflink-probe-a", directory / ".reflink-probe-b"
    source.write_bytes(b"probe")
    try:
        with source.open("rb") as src, dest.open("wb") as dst:
            try:
                fcntl.ioctl(dst.fileno(), 0x40049409, src.fileno())
                return True
            except OSError as exc:
                if exc.errno in (errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EOPNOTSUPP, errno.ENOSYS):
                    return False
                raise
    finally:
        source.unlink()
        dest.unlink(missing_ok=True)


def _read_only(path: Path) -> bool:
    return stat.S_IMODE(path.lstat().st_mode) & 0o222 == 0


# --- the harness's tests, restated --------------------------------------------------------------


def test_snapshot_is_reused_frozen_and_isolates_arm_writes(harness: Harness, tmp_path: Path) -> None:
    # The harness counts its reflink calls through a monkeypatched `_try_reflink`; here each
    # materialize's report says how each file came: reflinked or, where the filesystem cannot
    # clone, copied, one file either way.
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"assets/index": b"original"})
    clone_a, clone_b, clone_c = tmp_path / "clone-a", tmp_path / "clone-b", tmp_path / "clone-c"
    for clone in (clone_a, clone_b, clone_c):
        clone.mkdir()

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        assert cache.prepare(task, repo=repo, resolved_sha=SHA) is snapshot
        snapshot_file = snapshot.root / "sandbox-copy" / "assets" / "index"
        assert stat.S_ISDIR(snapshot.root.lstat().st_mode) and _read_only(snapshot.root)
        assert stat.S_ISREG(snapshot_file.lstat().st_mode) and _read_only(snapshot_file)

        ta.stage_task_assets(task, repo=repo, clone=clone_a, snapshot=snapshot)
        ta.stage_task_assets(task, repo=repo, clone=clone_b, snapshot=snapshot)
        (clone_a / "assets" / "index").write_bytes(b"arm-a")

        assert snapshot_file.read_bytes() == b"original"
        assert (clone_b / "assets" / "index").read_bytes() == b"original"
        assert (clone_a / "assets" / "index").stat().st_ino != snapshot_file.stat().st_ino
        assert (clone_b / "assets" / "index").stat().st_ino != snapshot_file.stat().st_ino
        report = snapshot.materialize(clone_c)
        assert report["reflinked"] + report["copied"] == 1


@pytest.fixture
def xfs(tmp_path: Path) -> Iterator[Path]:
    """A loop-mounted XFS with reflinks (root only), unmounted afterwards; skipped, saying why, where none can be."""
    image, mount = tmp_path / "xfs.img", tmp_path / "xfs"
    mount.mkdir()
    with image.open("wb") as made:
        made.truncate(300 << 20)
    for argv in (["mkfs.xfs", "-q", "-m", "reflink=1", str(image)], ["mount", "-o", "loop", str(image), str(mount)]):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as exc:
            done = subprocess.CompletedProcess(argv, 1, "", str(exc))
        if done.returncode != 0:
            reason = f"no XFS with reflinks could be mounted: {' '.join(argv)}: {done.stderr.strip()}"
            print(f"SKIP: {reason}")
            pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        image.unlink()


def test_snapshot_is_reused_frozen_and_isolates_arm_writes_by_reflink(
    harness: Harness, xfs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness's test as it runs it: every file reflinked, with no buffered fallback allowed
    # (its `MAX_BUFFERED_FALLBACK_BYTES = 0`); its fake reflink is XFS's real one here, the store,
    # the repository and the clones all on it, and each materialize reports one reflink.
    ta = harness.task_assets
    monkeypatch.setattr(ta, "CESTORE_STORE", xfs / "store")
    monkeypatch.setattr(ta, "MAX_BUFFERED_FALLBACK_BYTES", 0)
    repo, task = _repo_and_task(xfs, {"assets/index": b"original"})
    clone_a, clone_b = xfs / "clone-a", xfs / "clone-b"
    clone_a.mkdir()
    clone_b.mkdir()

    with ta.TaskAssetCache(xfs / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        assert cache.prepare(task, repo=repo, resolved_sha=SHA) is snapshot
        snapshot_file = snapshot.root / "sandbox-copy" / "assets" / "index"
        assert _read_only(snapshot.root) and _read_only(snapshot_file)

        reports = [snapshot.materialize(clone) for clone in (clone_a, clone_b)]
        (clone_a / "assets" / "index").write_bytes(b"arm-a")

        assert snapshot_file.read_bytes() == b"original"
        assert (clone_b / "assets" / "index").read_bytes() == b"original"
        assert (clone_a / "assets" / "index").stat().st_ino != snapshot_file.stat().st_ino
        assert (clone_b / "assets" / "index").stat().st_ino != snapshot_file.stat().st_ino
        assert [(r["reflinked"], r["copied"], r["bytes_copied"]) for r in reports] == [(1, 0, 0), (1, 0, 0)]


def test_snapshot_digest_binds_content_declaration_repo_and_sha(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"one": b"1", "two": b"2"})
    with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
        original = cache.prepare(task, repo=repo, resolved_sha=SHA)
        other_sha = cache.prepare(task, repo=repo, resolved_sha="b" * 40)
        reordered = cache.prepare({"sandbox_copy": ["two", "one"]}, repo=repo, resolved_sha=SHA)
    with ta.TaskAssetCache(tmp_path / "cache-b") as cache:
        identical = cache.prepare(task, repo=repo, resolved_sha=SHA)
    (repo / "one").write_bytes(b"changed")
    with ta.TaskAssetCache(tmp_path / "cache-c") as cache:
        changed = cache.prepare(task, repo=repo, resolved_sha=SHA)

    assert identical.digest == original.digest
    assert identical.manifest_digest == original.manifest_digest
    assert other_sha.digest != original.digest
    assert other_sha.manifest_digest == original.manifest_digest
    assert reordered.digest != original.digest
    assert changed.digest != original.digest
    assert changed.manifest_digest != original.manifest_digest


def test_small_assets_use_a_bounded_buffered_fallback(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness makes the reflink fail by monkeypatching; here the filesystem decides, and the
    # report says which path each file took: copied ones count against the 6-byte budget.
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"first": b"abc", "second": b"def"})
    clone = tmp_path / "clone"
    clone.mkdir()
    monkeypatch.setattr(ta, "MAX_BUFFERED_FALLBACK_BYTES", 6)

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        report = cache.prepare(task, repo=repo, resolved_sha=SHA).materialize(clone)

    assert (clone / "first").read_bytes() == b"abc"
    assert (clone / "second").read_bytes() == b"def"
    assert report["reflinked"] + report["copied"] == 2
    assert report["bytes_copied"] == 3 * report["copied"]


def test_default_buffered_fallback_budget_covers_a_realistic_large_asset(harness: Harness, tmp_path: Path) -> None:
    # 20 MiB: above the harness's old 16 MiB default, well under the current one.
    ta = harness.task_assets
    payload = os.urandom(20 * 1024 * 1024)
    repo, task = _repo_and_task(tmp_path, {"large": payload})
    clone = tmp_path / "clone"
    clone.mkdir()

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA).materialize(clone)

    assert (clone / "large").read_bytes() == payload


def test_large_asset_without_reflink_fails_before_publish_and_cleans_staging(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness monkeypatches the reflink away; here the test needs a filesystem without one.
    ta = harness.task_assets
    if _reflinks(tmp_path):
        reason = f"{tmp_path} clones files (FICLONE): the buffered fallback is not taken"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    repo, task = _repo_and_task(tmp_path, {"large": b"12345"})
    clone = tmp_path / "clone"
    clone.mkdir()
    monkeypatch.setattr(ta, "MAX_BUFFERED_FALLBACK_BYTES", 4)

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        with pytest.raises(harness.sandbox.SandboxError, match="cannot reflink"):
            snapshot.materialize(clone)

    assert not (clone / "large").exists()
    assert not list(tmp_path.glob(".wfbench-assets-*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["clone", "repo", "store", "harness-package"])


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_snapshot_rejects_links_and_special_files(harness: Harness, tmp_path: Path, kind: str) -> None:
    ta = harness.task_assets
    repo = tmp_path / "repo"
    assets = repo / "assets"
    assets.mkdir(parents=True)
    if kind == "symlink":
        (repo / "outside").write_text("secret")
        (assets / "bad").symlink_to(repo / "outside")
    else:
        os.mkfifo(assets / "bad")

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="regular files and directories|symlink"):
            cache.prepare({"sandbox_copy": ["assets"]}, repo=repo, resolved_sha=SHA)


def test_snapshot_rejects_a_file_mutated_during_capture(harness: Harness, tmp_path: Path) -> None:
    # The harness appends to the file from inside its read hook; the binary has no hook, so a
    # thread appends to the file while the capture reads it (64 MiB: the read takes far longer
    # than one append), until the capture answers.
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"asset": os.urandom(64 * 1024 * 1024)})
    done = threading.Event()

    def mutate() -> None:
        with (repo / "asset").open("ab", buffering=0) as source:
            while not done.is_set():
                source.write(b"!")
                done.wait(0.001)

    writer = threading.Thread(target=mutate)
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        writer.start()
        try:
            with pytest.raises(harness.sandbox.SandboxError, match="changed while snapshotting"):
                cache.prepare(task, repo=repo, resolved_sha=SHA)
        finally:
            done.set()
            writer.join()


@pytest.mark.parametrize(
    ("limit", "value", "task_files", "message"),
    [
        ("MAX_TASK_ASSET_ENTRIES", 1, {"nested/file": b"x"}, "entry limit"),
        ("MAX_TASK_ASSET_PATH_BYTES", 4, {"long-name": b"x"}, "path byte limit"),
        ("MAX_TASK_ASSET_BYTES", 4, {"asset": b"12345"}, "total byte limit"),
    ],
)
def test_snapshot_enforces_hard_walk_limits(
    harness: Harness,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    limit: str,
    value: int,
    task_files: dict[str, bytes],
    message: str,
) -> None:
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, task_files)
    monkeypatch.setattr(ta, limit, value)
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match=message):
            cache.prepare(task, repo=repo, resolved_sha=SHA)


def test_snapshot_rejects_overlapping_declarations(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, _task = _repo_and_task(tmp_path, {"assets/index": b"index"})
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="overlap"):
            cache.prepare({"sandbox_copy": ["assets", "assets/index"]}, repo=repo, resolved_sha=SHA)


def test_directory_materialization_removes_stale_children_exactly(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"assets/current": b"captured"})
    task["sandbox_copy"] = ["assets"]
    clone = tmp_path / "clone"
    (clone / "assets" / "nested").mkdir(parents=True)
    (clone / "assets" / "current").write_bytes(b"old")
    (clone / "assets" / "stale").write_bytes(b"stale")
    (clone / "assets" / "nested" / "stale").write_bytes(b"stale")

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA).materialize(clone)

    assert sorted(path.relative_to(clone).as_posix() for path in clone.rglob("*")) == ["assets", "assets/current"]
    assert (clone / "assets" / "current").read_bytes() == b"captured"


@pytest.mark.parametrize("source_kind", ["file", "directory"])
def test_materialization_replaces_file_directory_type_conflicts(
    harness: Harness, tmp_path: Path, source_kind: str
) -> None:
    ta = harness.task_assets
    if source_kind == "file":
        repo, task = _repo_and_task(tmp_path, {"asset": b"file"})
    else:
        repo, task = _repo_and_task(tmp_path, {"asset/child": b"directory"})
        task["sandbox_copy"] = ["asset"]
    clone = tmp_path / "clone"
    clone.mkdir()
    if source_kind == "file":
        (clone / "asset").mkdir()
        (clone / "asset" / "stale").write_bytes(b"stale")
    else:
        (clone / "asset").write_bytes(b"stale file")

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA).materialize(clone)

    if source_kind == "file":
        assert (clone / "asset").is_file()
        assert (clone / "asset").read_bytes() == b"file"
    else:
        assert (clone / "asset").is_dir()
        assert (clone / "asset" / "child").read_bytes() == b"directory"


def test_exact_tree_removal_does_not_follow_stale_child_symlinks(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"assets/current": b"captured"})
    task["sandbox_copy"] = ["assets"]
    clone = tmp_path / "clone"
    outside = tmp_path / "outside"
    (clone / "assets").mkdir(parents=True)
    outside.mkdir()
    (outside / "canary").write_bytes(b"outside")
    (clone / "assets" / "stale-link").symlink_to(outside, target_is_directory=True)

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA).materialize(clone)

    assert (outside / "canary").read_bytes() == b"outside"
    assert not (clone / "assets" / "stale-link").exists()


def test_dependency_snapshot_mounts_bound_bytes_and_rejects_later_live_drift(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/package.json": b'{"version":1}'})
    task = {
        "sandbox_copy": [],
        "sandbox_dependencies": [{"source": "dependency", "target": "node_modules/dependency"}],
    }
    clone = tmp_path / "clone"
    clone.mkdir()

    with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        binding = snapshot.dependency_binding
        mounts = ta.stage_task_assets(task, repo=repo, clone=clone, snapshot=snapshot)
        assert mounts[0].source != (repo / "dependency").resolve()
        assert (mounts[0].source / "package.json").read_bytes() == b'{"version":1}'
        assert mounts[0].target == "/workspace/node_modules/dependency"
        assert isinstance(mounts[0], harness.sandbox.ReadOnlyMount)

    (repo / "dependency" / "package.json").write_bytes(b'{"version":2}')
    with ta.TaskAssetCache(tmp_path / "cache-b") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="changed after task binding"):
            cache.prepare(task, repo=repo, resolved_sha=SHA, expected_dependency_binding=binding)


def test_dependency_content_and_manifest_digests_bind_distinct_contracts(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/file": b"one"})
    task = {"sandbox_dependencies": [{"source": "dependency", "target": "dependency"}]}
    retargeted = {"sandbox_dependencies": [{"source": "dependency", "target": "vendor/dependency"}]}
    with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
        original = cache.prepare(task, repo=repo, resolved_sha=SHA)
        changed_target = cache.prepare(retargeted, repo=repo, resolved_sha=SHA)

    assert changed_target.dependency_content_digest == original.dependency_content_digest
    assert changed_target.dependency_manifest_digest != original.dependency_manifest_digest
    (repo / "dependency" / "file").write_bytes(b"two")
    with ta.TaskAssetCache(tmp_path / "cache-b") as cache:
        changed_content = cache.prepare(task, repo=repo, resolved_sha=SHA)
    assert changed_content.dependency_content_digest != original.dependency_content_digest
    assert changed_content.dependency_manifest_digest != original.dependency_manifest_digest


def test_dependency_snapshot_preserves_internal_symlinks_and_executable_files(harness: Harness, tmp_path: Path) -> None:
    # The harness's frozen copy is 0500; the store's view is its object's link: executable, read-only.
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/package/bin": b"#!/bin/sh\nexit 0\n"})
    (repo / "dependency" / "package" / "bin").chmod(0o755)
    (repo / "dependency" / ".bin").mkdir()
    (repo / "dependency" / ".bin" / "tool").symlink_to("../package/bin")
    task = {"sandbox_dependencies": [{"source": "dependency", "target": "dependency"}]}
    clone = tmp_path / "clone"
    clone.mkdir()

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        mount = ta.stage_task_assets(task, repo=repo, clone=clone, snapshot=snapshot)[0]
        link = mount.source / ".bin" / "tool"
        captured_executable = mount.source / "package" / "bin"
        assert link.is_symlink()
        assert os.readlink(link) == "../package/bin"
        mode = stat.S_IMODE(captured_executable.stat().st_mode)
        assert mode & 0o100 and not mode & 0o222
        modes = {e.path.as_posix(): e.mode for e in snapshot.dependencies[0].entries}
        assert modes["payload/package/bin"] == 0o755


def test_dependency_snapshot_rejects_links_that_escape_the_sandbox_workspace(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/kept": b"payload"})
    (repo / "dependency" / "escape").symlink_to("../../../../outside")
    task = {"sandbox_dependencies": [{"source": "dependency", "target": "dependency"}]}

    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="escapes the sandbox workspace"):
            cache.prepare(task, repo=repo, resolved_sha=SHA)


def test_resolved_task_binding_carries_dependency_digests_and_rejects_live_drift(
    harness: Harness, tmp_path: Path
) -> None:
    # The harness's test goes through its runner (`resolve_task_bindings`, not task_assets); this
    # one takes the binding the runner takes, `capture_task_dependency_binding`, in a git repository,
    # and checks it against the live bytes once they drift, as the runner does through `prepare`.
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/package.json": b'{"version":1}'})
    for args in (
        ["init", "--quiet"],
        ["config", "user.name", "Workflow Bench Test"],
        ["config", "user.email", "workflow-bench@example.invalid"],
        ["add", "."],
        ["commit", "--quiet", "-m", "fixture"],
    ):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)
    task = {
        "id": "dependency-binding",
        "repo": str(repo),
        "sandbox_copy": [],
        "sandbox_dependencies": [{"source": "dependency", "target": "dependency"}],
    }
    binding = ta.capture_task_dependency_binding(task, repo=repo, resolved_sha=SHA)

    assert re.fullmatch("[0-9a-f]{64}", binding["sandbox_dependency_content_digest"])
    assert re.fullmatch("[0-9a-f]{64}", binding["sandbox_dependency_manifest_digest"])
    with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA, expected_dependency_binding=binding)
    (repo / "dependency" / "package.json").write_bytes(b'{"version":2}')
    with ta.TaskAssetCache(tmp_path / "cache-b") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="changed after task binding"):
            cache.prepare(task, repo=repo, resolved_sha=SHA, expected_dependency_binding=binding)


def test_node_modules_dependency_snapshot_captures_the_vite_temp_mount_point(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    vite_temp = harness.sandbox.VITE_TEMP_DIR
    repo, _ = _repo_and_task(tmp_path, {"dependency/package.json": b'{"version":1}'})
    task = {
        "sandbox_copy": [],
        "sandbox_dependencies": [{"source": "dependency", "target": "gitnexus/node_modules"}],
    }
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        captured = {entry.path.as_posix() for entry in snapshot.dependencies[0].entries}
        assert f"payload/{vite_temp}" in captured
        found = next((snapshot.root / "dependencies").glob(f"*/payload/{vite_temp}"))
        assert found.is_dir()


def test_non_node_modules_dependency_snapshot_has_no_vite_temp(harness: Harness, tmp_path: Path) -> None:
    ta = harness.task_assets
    repo, _ = _repo_and_task(tmp_path, {"dependency/package.json": b'{"version":1}'})
    task = {
        "sandbox_copy": [],
        "sandbox_dependencies": [{"source": "dependency", "target": "vendor/dependency"}],
    }
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        captured = {entry.path.as_posix() for entry in snapshot.dependencies[0].entries}
        assert not any(path.endswith(harness.sandbox.VITE_TEMP_DIR) for path in captured)


def test_review_case_sandbox_copy_is_read_from_the_harness_not_the_task_repo(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ta = harness.task_assets
    repo = tmp_path / "task-repo"
    (repo / "eval" / "workflow_bench").mkdir(parents=True)
    root = tmp_path / "harness"
    patch = root / "eval" / "workflow_bench" / "review_cases" / "pr-2718-defect.patch"
    patch.parent.mkdir(parents=True)
    patch.write_bytes(b"diff --git a/a b/a\n")
    monkeypatch.setattr(harness.runtime_mounts, "HARNESS_ROOT", root)

    task = {"sandbox_copy": ["eval/workflow_bench/review_cases/pr-2718-defect.patch"], "sandbox_dependencies": []}
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        copied = snapshot.root / "sandbox-copy" / "eval" / "workflow_bench" / "review_cases" / "pr-2718-defect.patch"
        assert copied.read_bytes() == b"diff --git a/a b/a\n"


def test_review_case_sandbox_copy_does_not_fall_back_to_the_task_repo(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ta = harness.task_assets
    repo = tmp_path / "task-repo"
    planted = repo / "eval" / "workflow_bench" / "review_cases" / "pr-2718-defect.patch"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"from-task-repo")
    root = tmp_path / "harness"
    root.mkdir()
    monkeypatch.setattr(harness.runtime_mounts, "HARNESS_ROOT", root)

    task = {"sandbox_copy": ["eval/workflow_bench/review_cases/pr-2718-defect.patch"], "sandbox_dependencies": []}
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        with pytest.raises(harness.sandbox.SandboxError, match="unavailable"):
            cache.prepare(task, repo=repo, resolved_sha=SHA)


def test_the_harness_root_is_checked_only_for_review_cases_by_the_harness_function(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness checks its root (`real_directory`) only when a declaration is a review case.
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"asset": b"x"})
    missing = tmp_path / "no-harness"
    monkeypatch.setattr(harness.runtime_mounts, "HARNESS_ROOT", missing)
    calls: list[Path] = []

    def checked(path: Path, *, label: str) -> Path:
        calls.append(Path(path))
        return harness.sandbox.real_directory(path, label=label)

    monkeypatch.setattr(ta, "real_directory", checked)
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        cache.prepare(task, repo=repo, resolved_sha=SHA)
        with pytest.raises(harness.sandbox.SandboxError) as raised:
            cache.prepare(
                {"sandbox_copy": ["eval/workflow_bench/review_cases/pr.patch"]}, repo=repo, resolved_sha=SHA
            )
    assert str(raised.value).startswith(f"harness sandbox_copy root must be a real directory: {missing}: [Errno 2]")
    assert calls[-1] == missing


def test_harness_sandbox_copy_does_not_treat_parent_escapes_as_corpus(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The harness asks its private `_is_harness_sandbox_copy`; the drop-in has no such function
    # (the binary decides), so the three paths are asked of a capture: a review case is read from
    # the harness, a path escaping through `..` is refused before anything is read, and a sibling
    # of review_cases is read from the task's repository.
    ta = harness.task_assets
    repo = tmp_path / "task-repo"
    (repo / "eval" / "workflow_bench" / "oracles").mkdir(parents=True)
    (repo / "eval" / "workflow_bench" / "oracles" / "hidden.json").write_bytes(b"from-task-repo")
    root = tmp_path / "harness"
    (root / "eval" / "workflow_bench" / "review_cases").mkdir(parents=True)
    (root / "eval" / "workflow_bench" / "review_cases" / "pr.patch").write_bytes(b"from-harness")
    monkeypatch.setattr(harness.runtime_mounts, "HARNESS_ROOT", root)

    def captured(declaration: str) -> bytes:
        with ta.TaskAssetCache(tmp_path / f"cache-{abs(hash(declaration))}") as cache:
            snapshot = cache.prepare({"sandbox_copy": [declaration]}, repo=repo, resolved_sha=SHA)
            files = [e for e in snapshot.entries if e.kind == "file"]
            return (snapshot.root / "sandbox-copy" / files[0].path).read_bytes()

    assert captured("eval/workflow_bench/review_cases/pr.patch") == b"from-harness"
    escape = "eval/workflow_bench/review_cases/../oracles/hidden.json"
    with pytest.raises(harness.sandbox.SandboxError, match="repository-relative path"):
        captured(escape)
    assert captured("eval/workflow_bench/oracles") == b"from-task-repo"


# --- the drop-in's own ------------------------------------------------------------------------


def test_stage_task_assets_refuses_as_the_harness_and_its_checks_record_nothing(
    harness: Harness, tmp_path: Path, store_dir: Path
) -> None:
    # stage_task_assets tells malformed declarations (the harness's own message) from well-formed
    # ones that are not the snapshot's; the binary answers which, and that check records nothing.
    ta, error = harness.task_assets, harness.sandbox.SandboxError
    repo, _ = _repo_and_task(tmp_path, {"assets/a": b"a", "dependency/x": b"x"})
    task = {"sandbox_copy": ["assets"], "sandbox_dependencies": [{"source": "dependency", "target": "dependency"}]}
    clone = tmp_path / "clone"
    clone.mkdir()
    store = cestore.Store(store_dir)
    with ta.TaskAssetCache(tmp_path / "cache") as cache:
        snapshot = cache.prepare(task, repo=repo, resolved_sha=SHA)
        recorded = store.run("list")["snapshots"]
        cases = [
            ({**task, "sandbox_copy": ["/etc"]}, "sandbox_copy must be a repository-relative path: '/etc'"),
            ({**task, "sandbox_copy": ("assets",)}, "sandbox_copy must be a list of nonblank repository-relative paths"),
            ({**task, "sandbox_copy": ["dependency"]}, "task asset snapshot does not match this task declaration"),
            ({**task, "sandbox_copy": []}, "task asset snapshot does not match this task declaration"),
            ({**task, "sandbox_dependencies": "x"}, "sandbox_dependencies must be a list"),
            ({**task, "sandbox_dependencies": [{"source": "dependency", "target": "../x"}]},
             "dependency target must stay inside the clone: ../x"),
            ({**task, "sandbox_dependencies": [{"source": "dependency", "target": "other"}]},
             "task asset snapshot does not match this dependency declaration"),
            ({**task, "sandbox_dependencies": []}, "task asset snapshot does not match this dependency declaration"),
        ]
        for staged, message in cases:
            with pytest.raises(error) as raised:
                ta.stage_task_assets(staged, repo=repo, clone=clone, snapshot=snapshot)
            assert str(raised.value) == message, staged
        other_repo = tmp_path / "other"
        other_repo.mkdir()
        with pytest.raises(error, match="^task asset snapshot does not match this task declaration$"):
            ta.stage_task_assets(task, repo=other_repo, clone=clone, snapshot=snapshot)
        # Without a snapshot: malformed declarations first, then the dependencies' own refusal.
        unowned = [
            ({**task, "sandbox_copy": [""]}, "sandbox_copy must be a list of nonblank repository-relative paths"),
            ({**task, "sandbox_dependencies": [{"source": "/usr"}]},
             "sandbox_dependencies entries require only nonblank source and target"),
            (task, "sandbox_dependencies require a caller-owned immutable task asset snapshot"),
        ]
        for staged, message in unowned:
            with pytest.raises(error) as raised:
                ta.stage_task_assets(staged, repo=repo, clone=clone)
            assert str(raised.value) == message, staged
        assert store.run("list")["snapshots"] == recorded
        # A task without dependencies is staged from a snapshot of its own.
        assert ta.stage_task_assets({"sandbox_copy": ["assets"]}, repo=repo, clone=clone) == []
        assert (clone / "assets" / "a").read_bytes() == b"a"


UPSTREAM_NAMES = (
    "MAX_TASK_ASSET_ENTRIES",
    "MAX_TASK_ASSET_PATH_BYTES",
    "MAX_TASK_ASSET_BYTES",
    "MAX_BUFFERED_FALLBACK_BYTES",
    "COPY_CHUNK_BYTES",
    "FICLONE",
    "DEPENDENCY_CONTENT_BINDING_FIELD",
    "DEPENDENCY_MANIFEST_BINDING_FIELD",
    "HARNESS_SANDBOX_COPY_PREFIXES",
    "AssetManifestEntry",
    "DependencySnapshot",
    "TaskAssetSnapshot",
    "TaskAssetCache",
    "capture_task_dependency_binding",
    "stage_task_assets",
    # Imported by the harness's module from proposer_sandbox, so its names too.
    "DEPENDENCY_MOUNT_BASENAME",
    "SANDBOX_WORKSPACE",
    "VITE_TEMP_DIR",
    "ReadOnlyMount",
    "SandboxError",
    "_prepare_clone_target",
    "real_directory",
)


def test_the_bound_module_has_the_harness_names_on_the_harness_classes(
    tmp_path: Path, store_dir: Path
) -> None:
    # No binary needed: nothing here runs a command.
    bound = make_harness(tmp_path)
    ta, sandbox = bound.task_assets, bound.sandbox
    assert [name for name in UPSTREAM_NAMES if not hasattr(ta, name)] == []
    assert ta.SandboxError is sandbox.SandboxError and ta.ReadOnlyMount is sandbox.ReadOnlyMount
    assert ta.real_directory is sandbox.real_directory
    assert ta._prepare_clone_target is sandbox._prepare_clone_target
    assert ta.TaskAssetCache.__module__ == ta.TaskAssetSnapshot.__module__ == ta.__name__
    assert (ta.MAX_TASK_ASSET_ENTRIES, ta.MAX_TASK_ASSET_PATH_BYTES) == (100_000, 4_096)
    assert ta.MAX_TASK_ASSET_BYTES == ta.MAX_BUFFERED_FALLBACK_BYTES == 2 * 1024**3
    assert ta.HARNESS_SANDBOX_COPY_PREFIXES == (PurePosixPath("eval/workflow_bench/review_cases"),)

    # Refusals made before any command: the harness's own checks and words.
    with pytest.raises(sandbox.SandboxError, match="task asset repository must be a real directory"):
        with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
            cache.prepare({}, repo=tmp_path / "missing", resolved_sha=SHA)
    cache = ta.TaskAssetCache(tmp_path / "cache-b")
    cache.close()
    with pytest.raises(sandbox.SandboxError, match="task asset cache is already closed"):
        cache.prepare({}, repo=tmp_path, resolved_sha=SHA)
    with pytest.raises(FileExistsError):
        ta.TaskAssetCache(tmp_path)
    assert not (tmp_path / "cache-a").exists() and not (tmp_path / "cache-b").exists()
    assert not store_dir.exists()


def test_a_second_invocation_reads_and_writes_no_object(harness: Harness, tmp_path: Path, store_dir: Path) -> None:
    ta = harness.task_assets
    repo, task = _repo_and_task(tmp_path, {"assets/a": b"a" * 4096, "assets/b": b"b", "dependency/x": b"x"})
    task = {"sandbox_copy": ["assets"], "sandbox_dependencies": [{"source": "dependency", "target": "dependency"}]}
    with ta.TaskAssetCache(tmp_path / "cache-a") as cache:
        first = cache.prepare(task, repo=repo, resolved_sha=SHA)
        assert cache.last_ingest is not None and cache.last_ingest["new_objects"] == 3
    assert not (tmp_path / "cache-a").exists()
    with ta.TaskAssetCache(tmp_path / "cache-b") as cache:
        second = cache.prepare(task, repo=repo, resolved_sha=SHA)
        assert cache.last_ingest is not None
        assert cache.last_ingest["new_objects"] == 0
        assert cache.last_ingest["bytes_written"] == 0
    assert second == first
    # The store keeps the snapshot after both caches are closed.
    shown = cestore.Store(store_dir).run("show", "--", first.digest)
    assert shown["ok"] is True


def test_bind_refuses_names_the_store_does_not_capture_with() -> None:
    import cestore.task_assets as drop_in

    namespace: dict[str, Any] = {}
    with pytest.raises(ValueError, match="VITE_TEMP_DIR"):
        drop_in.bind(
            namespace,
            sandbox_error=RuntimeError,
            read_only_mount=drop_in.ReadOnlyMount,
            prepare_clone_target=drop_in._prepare_clone_target,
            real_directory=drop_in.real_directory,
            sandbox_workspace="/workspace",
            dependency_mount_basename="node_modules",
            vite_temp_dir=".other",
            harness_root=Path("/"),
        )
    assert namespace == {}


# --- the harness's committed answers ------------------------------------------------------------

BY_NAME = {fixture["name"]: fixture for fixture in FIXTURES["fixtures"]}
ROOT = Path(FIXTURES["root"])


def _layout(name: str, key: str) -> Path:
    return Path(FIXTURES["layout"][key].replace("{root}", str(ROOT)).replace("{name}", name))


def _build(base: Path, entries: list[dict[str, Any]], repo: Path) -> None:
    """Builds a fixture's tree as fixtures.json says: entries in order, modes once every entry exists."""
    base.mkdir(parents=True, exist_ok=True)
    modes: list[tuple[Path, int, bool]] = []
    for entry in entries:
        path = base / entry["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        kind = entry["kind"]
        if kind == "file":
            data = bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode("utf-8")
            path.write_bytes(data)
        elif kind == "directory":
            path.mkdir(exist_ok=True)
        elif kind == "symlink":
            os.symlink(entry["target"].replace("{repo}", str(repo)), path)
        elif kind == "fifo":
            os.mkfifo(path)
        if kind != "symlink":
            modes.append((path, int(entry["mode"], 8), kind == "directory"))
    for path, mode, _ in [m for m in modes if not m[2]]:
        os.chmod(path, mode)
    for path, mode, _ in sorted((m for m in modes if m[2]), key=lambda m: -len(m[0].parts)):
        os.chmod(path, mode)


def _remove(path: Path) -> None:
    if not os.path.lexists(path):
        return
    for directory, names, _ in os.walk(path):
        os.chmod(directory, 0o700)
        for name in names:
            child = os.path.join(directory, name)
            if not os.path.islink(child):
                os.chmod(child, 0o700)
    import shutil

    shutil.rmtree(path)


def _walk(root: Path) -> list[dict[str, Any]]:
    """Every path below `root` as the answers record it: kind, permission bits, bytes or link target."""
    rows = []
    for directory, names, files in os.walk(root):
        for name in sorted(names + files):
            path = Path(directory, name)
            st = path.lstat()
            row: dict[str, Any] = {"path": path.relative_to(root).as_posix(), "mode": stat.S_IMODE(st.st_mode)}
            if stat.S_ISLNK(st.st_mode):
                row.update(kind="symlink", link_target=os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                row.update(kind="directory")
            elif not stat.S_ISREG(st.st_mode):
                row.update(kind="special")
            else:
                data = path.read_bytes()
                row.update(kind="file", size=len(data), sha256=hashlib.sha256(data).hexdigest())
            rows.append(row)
    return sorted(rows, key=lambda row: row["path"])


def _entry_rows(entries: Any) -> list[dict[str, Any]]:
    return [
        {
            "kind": e.kind,
            "link_target": e.link_target,
            "mode": e.mode,
            "path": e.path.as_posix(),
            "sha256": e.sha256,
            "size": e.size,
        }
        for e in entries
    ]


@pytest.fixture(scope="module")
def fixture_lock() -> Iterator[None]:
    # The fixtures' trees live at fixed paths (their digests hold them); the Rust replay and the
    # live generator build them there too, under this lock.
    ROOT.mkdir(parents=True, exist_ok=True)
    with open(ROOT / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.mark.parametrize("name", sorted(ANSWERS["answers"]))
def test_the_drop_in_gives_the_harness_answer(
    name: str,
    tree_binary: None,
    fixture_lock: None,
    tmp_path: Path,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixture, answer = BY_NAME[name], ANSWERS["answers"][name]
    harness = make_harness(tmp_path)
    ta = harness.task_assets
    paths = {key: _layout(name, key) for key in ("repo", "harness", "cache", "clone")}
    _remove(ROOT / name)
    old_umask = os.umask(int(FIXTURES["umask"], 8))
    try:
        _build(paths["repo"], fixture["repo"], paths["repo"])
        if "harness" in fixture:
            _build(paths["harness"], fixture["harness"], paths["repo"])
        _build(paths["clone"], fixture.get("clone", []), paths["repo"])
    finally:
        os.umask(old_umask)
    repo_before = _walk(paths["repo"])
    monkeypatch.setattr(harness.runtime_mounts, "HARNESS_ROOT", paths["harness"])
    for constant, value in (fixture.get("overrides") or {}).items():
        monkeypatch.setattr(ta, constant, value)

    def placeholders(message: str) -> str:
        for key in ("repo", "harness", "cache", "clone"):
            message = message.replace(str(paths[key]), "{" + key + "}")
        return message

    cache = ta.TaskAssetCache(paths["cache"])
    try:
        try:
            snapshot = cache.prepare(
                fixture["task"],
                repo=paths["repo"],
                resolved_sha=FIXTURES["resolved_sha"],
                expected_dependency_binding=fixture.get("expected_dependency_binding"),
            )
        except harness.sandbox.SandboxError as exc:
            assert answer["outcome"] == "rejected" and answer["phase"] == "prepare", exc
            assert placeholders(str(exc)) == answer["error"]
            assert sorted(os.listdir(paths["cache"])) == answer["cache_left"]
            return
        assert answer["outcome"] != "rejected", f"accepted what the harness refuses: {answer['error']}"

        assert snapshot.digest == answer["digest"]
        assert snapshot.manifest_digest == answer["manifest_digest"]
        assert snapshot.dependency_content_digest == answer["dependency_content_digest"]
        assert snapshot.dependency_manifest_digest == answer["dependency_manifest_digest"]
        assert snapshot.total_bytes == answer["total_bytes"]
        assert str(snapshot.repo_identity) == answer["repo_identity"]
        assert snapshot.resolved_sha == answer["resolved_sha"]
        assert list(snapshot.declarations) == answer["declarations"]
        assert [list(pair) for pair in snapshot.dependency_declarations] == answer["dependency_declarations"]
        assert _entry_rows(snapshot.entries) == answer["entries"]
        assert [
            {
                "entries": _entry_rows(d.entries),
                "kind": d.kind,
                "snapshot_path": d.snapshot_path.as_posix(),
                "source": d.source,
                "target": d.target,
                "total_bytes": d.total_bytes,
            }
            for d in snapshot.dependencies
        ] == answer["dependencies"]
        # The frozen root: the same paths, kinds, bytes and links; the store's read-only modes.
        frozen = _walk(snapshot.root)
        assert all(row["kind"] == "symlink" or not row["mode"] & 0o222 for row in frozen), frozen
        drop_modes = [{k: v for k, v in row.items() if k != "mode"} for row in frozen]
        assert drop_modes == [{k: v for k, v in row.items() if k != "mode"} for row in answer["frozen"]]

        materialize = fixture.get("materialize") or {}
        if materialize.get("reflink") is False and _reflinks(paths["clone"].parent):
            reason = f"{paths['clone'].parent} clones files (FICLONE): the fixture needs the buffered fallback"
            print(f"SKIP: {reason}")
            pytest.skip(reason)
        for constant, value in (materialize.get("overrides") or {}).items():
            monkeypatch.setattr(ta, constant, value)
        phase = "materialize"
        try:
            snapshot.materialize(paths["clone"])
            phase = "dependency_mounts"
            mounts = snapshot.dependency_mounts(paths["clone"])
        except harness.sandbox.SandboxError as exc:
            assert answer["outcome"] == "materialize_rejected", exc
            assert (phase, placeholders(str(exc))) == (answer["phase"], answer["error"])
            if phase == "materialize":
                assert _walk(paths["clone"]) == answer["materialized"]
            siblings = sorted(os.listdir(paths["clone"].parent))
            assert siblings == answer["clone_siblings"]
            return
        assert answer["outcome"] == "ok", f"accepted what the harness refuses: {answer['error']}"
        assert _walk(paths["clone"]) == answer["materialized"]
        view = cestore.Store(store_dir).path(snapshot.dependency_manifest_digest) if mounts else None
        assert [
            {"source": "dependencies/" + Path(m.source).relative_to(view).as_posix(), "target": m.target}
            for m in mounts
        ] == answer["dependency_mounts"]
    finally:
        cache.close()
        assert _walk(paths["repo"]) == repo_before
