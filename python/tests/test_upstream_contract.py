"""The harness's own contract for runtime_mounts, at both of its revisions.

The harness's tests of its runtime views, restated: the CE plugin's (the
same at both revisions) and the GitNexus runtime's, which upstream's current
revision changed (any non-empty version, linked git worktrees made with
`git worktree add` that borrow the primary checkout's `node_modules`,
`trusted_gitnexus_runtime_mounts(*, root=None)`). Each runs against the
drop-in bound as docs/python.md prints it, once per revision, and asserts
that revision's answer. Nothing here needs ../shared.
"""

from __future__ import annotations

import inspect
import json
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import bound_harness

REVISIONS = ("seed", "upstream")
PLUGIN_VERSION = "3.19.0"
TEST_VERSION = "9.9.9-test"
GN = "/opt/gitnexus"
GNS = "/opt/gitnexus-shared"


@pytest.fixture(params=REVISIONS)
def harness(request: pytest.FixtureRequest, tmp_path: Path, store_dir: Path) -> Any:
    """The harness's runtime_mounts module, bound at one revision."""
    module = bound_harness(tmp_path / "harness", request.param)
    module.revision = request.param
    return module


def sandbox_error(rm: Any) -> type[BaseException]:
    return rm.SandboxError


# ---------------------------------------------------------------------------
# The GitNexus runtime
# ---------------------------------------------------------------------------


def install_runtime(root: Path, version: str = TEST_VERSION) -> None:
    """A GitNexus runtime and shared package under `root`, as the harness's tests lay them out."""
    runtime = root / "gitnexus"
    shared = root / "gitnexus-shared"
    for directory in (
        runtime / "dist" / "cli",
        runtime / "node_modules",
        runtime / "vendor",
        runtime / "hooks" / "claude",
        runtime / "hooks" / "antigravity",
        shared / "dist",
    ):
        directory.mkdir(parents=True)
    (runtime / "dist" / "cli" / "index.js").write_text("")
    (runtime / "hooks" / "claude" / "resolve-analyze-cmd.cjs").write_text("")
    (runtime / "package.json").write_text(json.dumps({"version": version}))
    (runtime / "node_modules" / "gitnexus-shared").symlink_to(shared, target_is_directory=True)
    (shared / "package.json").write_text(json.dumps({"name": "gitnexus-shared"}))
    for secret in (".env", ".npmrc"):
        (runtime / secret).write_text("secret\n")


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def primary_and_worktree(tmp_path: Path, version: str = TEST_VERSION) -> tuple[Path, Path]:
    """A primary checkout and a linked worktree of it (`git worktree add`), each with a runtime."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    primary = (tmp_path / "primary").resolve()
    primary.mkdir()
    git(primary, "init", "-q")
    git(primary, "commit", "-q", "--allow-empty", "-m", "base")
    worktree = tmp_path.resolve() / "worktree"
    git(primary, "worktree", "add", "-q", str(worktree))
    assert (worktree / ".git").is_file()
    install_runtime(primary, version)
    install_runtime(worktree, version)
    return primary, worktree


def link_node_modules(checkout: Path, target: Path) -> None:
    node_modules = checkout / "gitnexus" / "node_modules"
    shutil.rmtree(node_modules)
    node_modules.symlink_to(target, target_is_directory=True)


def read_from(harness: Any, mounts: tuple[Any, ...]) -> list[tuple[Path, str]]:
    """Each mount as (the host path its bytes were read from, its target), after checking
    that it points into the staged runtime's view in the store."""
    staged = harness.staged_gitnexus_runtime()
    assert staged is not None
    view = staged.view.resolve()
    out = []
    for m, (path, source) in zip(mounts, staged.components, strict=True):
        assert m.source == view / path
        out.append((source, m.target))
    return out


def by_target(harness: Any, mounts: tuple[Any, ...]) -> dict[str, Path]:
    return {target: source for source, target in read_from(harness, mounts)}


def test_the_minimal_runtime_is_mounted_in_order(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, TEST_VERSION if harness.revision == "upstream" else "1.6.9")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    runtime, shared = root / "gitnexus", root / "gitnexus-shared"
    mounts = harness.trusted_gitnexus_runtime_mounts()
    assert all(isinstance(m, harness.ReadOnlyMount) for m in mounts)
    assert read_from(harness, mounts) == [
        (runtime / "dist", f"{GN}/dist"),
        (runtime / "package.json", f"{GN}/package.json"),
        (runtime / "node_modules", f"{GN}/node_modules"),
        (runtime / "vendor", f"{GN}/vendor"),
        (shared / "dist", f"{GNS}/dist"),
        (shared / "package.json", f"{GNS}/package.json"),
        (runtime / "hooks" / "claude", f"{GN}/hooks/claude"),
    ]
    sources = {source for source, _ in read_from(harness, mounts)}
    for never in (runtime, shared, runtime / "hooks", runtime / ".env", runtime / ".npmrc"):
        assert never not in sources


def test_a_process_mounts_the_runtime_it_first_read(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime is read and hashed once per process; a rebuild during the sweep changes nothing it mounts."""
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, TEST_VERSION if harness.revision == "upstream" else "1.6.9")
    (root / "gitnexus" / "node_modules" / "pkg").mkdir()
    (root / "gitnexus" / "node_modules" / "pkg" / "index.js").write_text("one\n")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    assert harness.staged_gitnexus_runtime() is None
    first = by_target(harness, harness.trusted_gitnexus_runtime_mounts())
    staged = harness.staged_gitnexus_runtime()
    import cestore

    ingested = cestore.Store().ingest_runtime(root, rules=harness.revision)
    assert staged.manifest_digest == ingested.manifest_digest
    assert first[f"{GN}/node_modules"] == root / "gitnexus" / "node_modules"

    (root / "gitnexus" / "node_modules" / "pkg" / "index.js").write_text("two\n")
    mounts = harness.trusted_gitnexus_runtime_mounts()
    assert harness.staged_gitnexus_runtime() == staged
    node_modules = {m.target: m.source for m in mounts}[f"{GN}/node_modules"]
    assert (node_modules / "pkg" / "index.js").read_text() == "one\n"
    # The checkout is still checked on every call, as the harness checks it.
    package = root / "gitnexus" / "package.json"
    package.write_text("{}")
    with pytest.raises(harness.SandboxError):
        harness.trusted_gitnexus_runtime_mounts()
    package.write_text(json.dumps({"version": TEST_VERSION if harness.revision == "upstream" else "1.6.9"}))
    # Another process reads the rebuilt runtime: a new digest.
    fresh = bound_harness(tmp_path / "again", harness.revision)
    monkeypatch.setattr(fresh, "HARNESS_ROOT", root)
    fresh_mounts = {m.target: m.source for m in fresh.trusted_gitnexus_runtime_mounts()}
    assert fresh.staged_gitnexus_runtime().manifest_digest != staged.manifest_digest
    assert (fresh_mounts[f"{GN}/node_modules"] / "pkg" / "index.js").read_text() == "two\n"
    assert (node_modules / "pkg" / "index.js").read_text() == "one\n"


def test_a_process_records_its_environment_as_one(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin, the runtime and each task a process staged, recorded as one environment that audits as one."""
    import cestore
    from cestore import task_assets
    from conftest import write_release

    with pytest.raises(ValueError, match="nothing to record"):
        harness.record_environment("sweep")
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, TEST_VERSION if harness.revision == "upstream" else "1.6.9")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    harness.trusted_gitnexus_runtime_mounts()
    runtime = harness.staged_gitnexus_runtime().manifest_digest
    parent = tmp_path / "runs"
    parent.mkdir()
    config = harness.validate_ce_plugin_inputs(["ce_review"], write_release(tmp_path / "release"), "1.2.3")
    with harness.staged_ce_plugin_snapshot(config, destination_parent=parent) as snapshot:
        ce = snapshot.manifest_digest
    repo = tmp_path.resolve() / "repo"
    (repo / "assets").mkdir(parents=True)
    (repo / "assets" / "a.txt").write_text("a\n")
    with task_assets.TaskAssetCache(tmp_path / "cache") as cache:
        task = cache.prepare({"sandbox_copy": ["assets"]}, repo=repo, resolved_sha="0" * 40)

    recorded = harness.record_environment("sweep")
    assert recorded.name == "sweep" and recorded.stored
    assert {(m.role, m.digest) for m in recorded.members} == {
        ("ce_plugin_manifest_digest", ce),
        ("gitnexus_runtime_manifest_digest", runtime),
        ("task_asset_snapshot_digest", task.digest),
    }
    # Either drop-in records the same environment; again, nothing new.
    again = task_assets.record_environment("sweep")
    assert again.manifest_digest == recorded.manifest_digest and not again.stored
    # A results file naming it audits as one.
    rows = tmp_path / "results.jsonl"
    row = {
        "arm": "ce_review",
        "ce_plugin_version": "1.2.3",
        "ce_plugin_manifest_digest": ce,
        "gitnexus_runtime_manifest_digest": runtime,
        "task_asset_snapshot_digest": task.digest,
        "environment_digest": recorded.manifest_digest,
    }
    rows.write_text(json.dumps(row) + "\n")
    report = cestore.Store().audit(rows, fields={"sweep.environment": "environment"})
    assert report.passed, report.raw
    counts = {c.field: c for c in report.field_counts}
    assert counts["environment_digest"].kind == "environment"
    assert counts["environment_digest"].rows_answered == 1
    assert counts["gitnexus_runtime_manifest_digest"].rows_answered == 1
    assert counts["sweep.environment"].rows == 0


def test_the_version_is_pinned_only_at_the_seed(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path.resolve() / "checkout"
    install_runtime(root)
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    package = root / "gitnexus" / "package.json"
    if harness.revision == "seed":
        assert harness.PINNED_GITNEXUS_VERSION == "1.6.9"
        with pytest.raises(harness.SandboxError) as raised:
            harness.trusted_gitnexus_runtime_mounts()
        assert str(raised.value) == "pinned GitNexus runtime version drifted: expected 1.6.9, got '9.9.9-test'"
    else:
        assert not hasattr(harness, "PINNED_GITNEXUS_VERSION")
        assert len(harness.trusted_gitnexus_runtime_mounts()) == 7
    for empty in ({}, {"version": ""}, {"version": 1}, {"version": None}):
        package.write_text(json.dumps(empty))
        with pytest.raises(harness.SandboxError) as raised:
            harness.trusted_gitnexus_runtime_mounts()
        if harness.revision == "seed":
            assert str(raised.value).startswith("pinned GitNexus runtime version drifted: expected 1.6.9, got ")
        else:
            assert str(raised.value) == "pinned GitNexus runtime package.json has no version"


def test_the_checkout_is_a_keyword_at_upstream(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path.resolve() / "other"
    install_runtime(other, "1.6.9")
    monkeypatch.setattr(harness, "HARNESS_ROOT", tmp_path / "absent")
    if harness.revision == "seed":
        assert list(inspect.signature(harness.trusted_gitnexus_runtime_mounts).parameters) == []
        with pytest.raises(TypeError):
            harness.trusted_gitnexus_runtime_mounts(root=other)
        return
    parameter = inspect.signature(harness.trusted_gitnexus_runtime_mounts).parameters["root"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
    mounts = harness.trusted_gitnexus_runtime_mounts(root=other)
    assert by_target(harness, mounts)[f"{GN}/dist"] == other / "gitnexus" / "dist"
    with pytest.raises(TypeError):
        harness.trusted_gitnexus_runtime_mounts(other)
    # Without root=, HARNESS_ROOT is the checkout, and it is checked first.
    absent = tmp_path / "absent"
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    assert str(raised.value) == (
        f"pinned GitNexus checkout is unavailable: {absent}: [Errno 2] No such file or directory: '{absent}'"
    )


def test_a_worktree_borrows_the_primary_node_modules(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    primary, worktree = primary_and_worktree(tmp_path)
    link_node_modules(worktree, primary / "gitnexus" / "node_modules")
    monkeypatch.setattr(harness, "HARNESS_ROOT", worktree)
    if harness.revision == "seed":
        with pytest.raises(harness.SandboxError, match="must be a real directory"):
            harness.trusted_gitnexus_runtime_mounts()
        return
    mounts = by_target(harness, harness.trusted_gitnexus_runtime_mounts())
    assert mounts[f"{GN}/node_modules"] == primary / "gitnexus" / "node_modules"
    assert mounts[f"{GNS}/package.json"] == primary / "gitnexus-shared" / "package.json"
    assert mounts[f"{GNS}/dist"] == primary / "gitnexus-shared" / "dist"
    assert mounts[f"{GN}/dist"] == worktree / "gitnexus" / "dist"


def test_a_worktree_whose_inner_link_points_at_the_primary_mounts_its_shared(
    harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At the seed's pinned version, so that the seed reaches the link.
    primary, worktree = primary_and_worktree(tmp_path, "1.6.9")
    linked = worktree / "gitnexus" / "node_modules" / "gitnexus-shared"
    linked.unlink()
    linked.symlink_to(primary / "gitnexus-shared", target_is_directory=True)
    monkeypatch.setattr(harness, "HARNESS_ROOT", worktree)
    if harness.revision == "seed":
        with pytest.raises(harness.SandboxError) as raised:
            harness.trusted_gitnexus_runtime_mounts()
        assert str(raised.value) == "pinned GitNexus runtime has an unexpected gitnexus-shared dependency"
        return
    mounts = by_target(harness, harness.trusted_gitnexus_runtime_mounts())
    assert mounts[f"{GN}/node_modules"] == worktree / "gitnexus" / "node_modules"
    assert mounts[f"{GNS}/package.json"] == primary / "gitnexus-shared" / "package.json"


def test_a_node_modules_symlink_outside_the_primary_checkout_is_refused(
    harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    primary, worktree = primary_and_worktree(tmp_path)
    outsider = tmp_path.resolve() / "outsider"
    install_runtime(outsider)
    link_node_modules(worktree, outsider / "gitnexus" / "node_modules")
    monkeypatch.setattr(harness, "HARNESS_ROOT", worktree)
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    node_modules = worktree / "gitnexus" / "node_modules"
    if harness.revision == "seed":
        assert str(raised.value) == f"pinned GitNexus runtime component must be a real directory: {node_modules}"
    else:
        assert str(raised.value) == (
            f"pinned GitNexus runtime component symlink must point at the primary checkout: {node_modules}"
        )


def test_a_node_modules_symlink_in_a_regular_checkout_is_refused(
    harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = tmp_path.resolve() / "checkout"
    other = tmp_path.resolve() / "other"
    install_runtime(checkout, "1.6.9")
    install_runtime(other, "1.6.9")
    (checkout / ".git").mkdir()
    link_node_modules(checkout, other / "gitnexus" / "node_modules")
    monkeypatch.setattr(harness, "HARNESS_ROOT", checkout)
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    node_modules = checkout / "gitnexus" / "node_modules"
    assert str(raised.value) == f"pinned GitNexus runtime component must be a real directory: {node_modules}"


def test_broken_runtimes_get_the_harness_exceptions(harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages that carry the system's words, and the exceptions that are not SandboxError."""
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, "1.6.9")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    runtime = root / "gitnexus"
    (runtime / "package.json").write_text("{")
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    assert str(raised.value) == (
        "pinned GitNexus runtime metadata is invalid: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    (runtime / "package.json").write_text('["1.6.9"]')
    with pytest.raises(AttributeError):
        harness.trusted_gitnexus_runtime_mounts()
    (runtime / "package.json").write_text(json.dumps({"version": "1.6.9"}))
    shutil.rmtree(runtime / "vendor")
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    vendor = runtime / "vendor"
    assert str(raised.value) == (
        f"pinned GitNexus runtime component is unavailable: {vendor}: "
        f"[Errno 2] No such file or directory: '{vendor}'"
    )
    vendor.mkdir()
    link = runtime / "node_modules" / "gitnexus-shared"
    link.unlink()
    link.symlink_to(root / "nowhere")
    with pytest.raises(FileNotFoundError):
        harness.trusted_gitnexus_runtime_mounts()
    link.unlink()
    link.symlink_to(tmp_path)
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    assert str(raised.value) == "pinned GitNexus runtime has an unexpected gitnexus-shared dependency"
    link.unlink()
    link.symlink_to(root / "gitnexus-shared")
    (root / "gitnexus-shared" / "package.json").write_text(json.dumps({"name": "other"}))
    with pytest.raises(harness.SandboxError) as raised:
        harness.trusted_gitnexus_runtime_mounts()
    assert str(raised.value) == "pinned GitNexus shared runtime has an unexpected package identity"


# ---------------------------------------------------------------------------
# The CE plugin (the same at both revisions)
# ---------------------------------------------------------------------------


def make_plugin(root: Path, *, version: str = PLUGIN_VERSION, noise: bool = False) -> Path:
    """A plugin release as the harness's tests make one; `noise` adds files a snapshot must leave out."""
    manifest_dir = root / ".claude-plugin"
    manifest_dir.mkdir(parents=True)
    (manifest_dir / "plugin.json").write_text(
        json.dumps({"name": "compound-engineering", "version": version, "description": "canary"})
    )
    for name in ("ce-plan", "ce-work", "ce-code-review"):
        skill = root / "skills" / name / "SKILL.md"
        skill.parent.mkdir(parents=True)
        skill.write_text(f"---\nname: {name}\n---\n\n# {name}\n")
    script = root / "scripts" / "run.sh"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    asset = root / "assets" / "icon.txt"
    asset.parent.mkdir()
    asset.write_text("icon\n")
    if noise:
        (manifest_dir / "CHANGELOG.md").write_text("not runtime input\n")
        for relative in (".git/config", "tests/test_plugin.py", "docs/notes.md", "src/internal.py"):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("excluded\n")
        for relative in (".env", ".npmrc", "skills/ce-plan/api-token.txt"):
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("super-secret\n")
    return root


@pytest.mark.parametrize(
    ("arms", "plugin_dir", "version", "message"),
    [
        (("ce_workflow",), None, None, "require both"),
        (("ce_review",), Path("plugin"), None, "require both"),
        (("baseline",), Path("plugin"), PLUGIN_VERSION, "require at least one"),
        (("ce_workflow_direct",), Path("plugin"), "latest", "exact semantic version"),
        (("ce_workflow_direct",), Path("plugin"), "^3.19.0", "exact semantic version"),
    ],
)
def test_preflight_refuses_unpinned_or_misapplied_inputs(
    harness: Any, arms: tuple[str, ...], plugin_dir: Path | None, version: str | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        harness.validate_ce_plugin_inputs(arms, plugin_dir, version)


def test_preflight_accepts_only_a_matching_explicit_source(harness: Any, tmp_path: Path) -> None:
    source = make_plugin(tmp_path / "plugin")
    config = harness.validate_ce_plugin_inputs(("baseline", "ce_review"), source, PLUGIN_VERSION)
    assert config is not None and config.source == source and config.version == PLUGIN_VERSION
    assert harness.validate_ce_plugin_inputs(("baseline",), None, None) is None


def test_the_snapshot_is_exact_bounded_and_secret_free(harness: Any, tmp_path: Path) -> None:
    source = make_plugin(tmp_path / "operator-plugin", noise=True)
    config = harness.validate_ce_plugin_inputs(("ce_review",), source, PLUGIN_VERSION)
    with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path) as first:
        expected = {
            ".claude-plugin/plugin.json",
            "skills/ce-plan/SKILL.md",
            "skills/ce-work/SKILL.md",
            "skills/ce-code-review/SKILL.md",
            "scripts/run.sh",
            "assets/icon.txt",
        }
        actual = {p.relative_to(first.root).as_posix() for p in first.root.rglob("*") if p.is_file()}
        assert actual == expected
        assert first.root != source
        assert first.mount == harness.ReadOnlyMount(source=first.root, target=harness.SANDBOX_CE_PLUGIN)
        assert first.provenance == {
            "name": "compound-engineering",
            "version": PLUGIN_VERSION,
            "manifest_schema_version": harness.CE_PLUGIN_MANIFEST_SCHEMA_VERSION,
            "manifest_digest": first.manifest_digest,
            "file_count": len(expected),
            "total_bytes": first.total_bytes,
        }
        assert all(not p.is_symlink() for p in first.root.rglob("*"))
        assert all(not (p.stat().st_mode & stat.S_IWUSR) for p in first.root.rglob("*"))
        digest = first.manifest_digest
    assert not first.root.exists()
    with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path) as second:
        assert second.manifest_digest == digest


def test_the_snapshot_refuses_version_drift_and_symlinks(harness: Any, tmp_path: Path) -> None:
    source = make_plugin(tmp_path / "plugin", version="3.18.0")
    config = harness.validate_ce_plugin_inputs(("ce_workflow",), source, PLUGIN_VERSION)
    with pytest.raises(harness.SandboxError, match="version mismatch"):
        with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path):
            pass
    source = make_plugin(tmp_path / "symlinked-plugin")
    target = source / "real-reference.md"
    target.write_text("reference\n")
    (source / "skills" / "ce-plan" / "linked.md").symlink_to(target)
    config = harness.validate_ce_plugin_inputs(("ce_workflow",), source, PLUGIN_VERSION)
    with pytest.raises(harness.SandboxError, match="must not be symlinks"):
        with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path):
            pass
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("wfbench-ce-plugin-")]


def test_the_snapshot_keeps_a_monkeypatched_total_bound(
    harness: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = make_plugin(tmp_path / "plugin")
    config = harness.validate_ce_plugin_inputs(("ce_review",), source, PLUGIN_VERSION)
    monkeypatch.setattr(harness, "MAX_CE_PLUGIN_TOTAL_BYTES", 1)
    with pytest.raises(harness.SandboxError, match="total byte limit"):
        with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path):
            pass


def test_the_mount_and_plugin_dir_are_for_ce_arms_only(harness: Any, tmp_path: Path) -> None:
    source = make_plugin(tmp_path / "plugin")
    config = harness.validate_ce_plugin_inputs(("ce_review",), source, PLUGIN_VERSION)
    with harness.staged_ce_plugin_snapshot(config, destination_parent=tmp_path) as snapshot:
        assert harness.ce_plugin_mounts_for_arm("ce_review", snapshot) == (snapshot.mount,)
        assert harness.ce_plugin_dir_for_arm("ce_review", snapshot) == harness.SANDBOX_CE_PLUGIN
        assert harness.ce_plugin_mounts_for_arm("review", snapshot) == ()
        assert harness.ce_plugin_dir_for_arm("review", snapshot) is None
        with pytest.raises(harness.SandboxError, match="no staged"):
            harness.ce_plugin_mounts_for_arm("ce_workflow", None)


def test_bind_refuses_an_unknown_revision(tmp_path: Path) -> None:
    from cestore.runtime_mounts import bind

    with pytest.raises(ValueError, match="revision must be one of 'seed', 'upstream'"):
        bind(
            {},
            revision="latest",
            sandbox_error=RuntimeError,
            read_only_mount=tuple,
            sandbox_gitnexus=GN,
            sandbox_gitnexus_shared=GNS,
            harness_root=tmp_path,
        )


def test_the_docs_print_each_revisions_whole_file() -> None:
    """docs/python.md gives, under each revision's heading, exactly the file these tests bind."""
    from conftest import BOUND_MODULES, REPO

    text = (REPO / "docs" / "python.md").read_text()
    headings = {"seed": "### At the seed's revision", "upstream": "### At upstream's current revision"}
    for revision, heading in headings.items():
        section = text.split(heading, 1)[1]
        block = section.split("```python\n", 1)[1].split("```", 1)[0]
        assert block == BOUND_MODULES[revision], revision
