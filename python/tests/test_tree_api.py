"""The typed API for tree snapshots: `ingest_tree`, `ingest_dependencies`, `ingest_task`, tree `show`,
`path`, `checkout(..., writable=True)` and `materialize`, against the real binary on real directories.

Each harness digest is recomputed here from the typed entries (docs/format.md, "Tree manifests and
digests"), so a field the API dropped or misread fails the test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import cestore
from conftest import write_release


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _entries(entries: tuple[cestore.TreeEntry, ...]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(e) for e in entries]


def _dependency_manifest(deps: tuple[cestore.Dependency, ...]) -> dict[str, Any]:
    return {
        "dependencies": [
            {"content": {"entries": _entries(d.entries)}, "source": d.source, "target": d.target} for d in deps
        ],
        "schema_version": 1,
    }


def _repo(root: Path) -> Path:
    """A task repository: two sandbox_copy roots (a nested file, an empty directory, an executable file),
    a node_modules dependency with a symlink, and a file dependency."""
    (root / "assets" / "sub").mkdir(parents=True)
    (root / "assets" / "empty").mkdir()
    (root / "assets" / "a.txt").write_bytes(b"alpha\n")
    run = root / "assets" / "sub" / "run.sh"
    run.write_bytes(b"#!/bin/sh\necho hi\n")
    run.chmod(0o755)
    (root / "docs").mkdir()
    (root / "docs" / "r.md").write_bytes(b"# read me\n")
    pkg = root / "node_modules" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "package.json").write_bytes(b'{"name": "pkg"}\n')
    (pkg / "package.json").chmod(0o644)
    (pkg / "link").symlink_to("package.json")
    (root / "tool.cfg").write_bytes(b"cfg=1\n")
    (root / "tool.cfg").chmod(0o600)
    return root


TASK: dict[str, Any] = {
    "sandbox_copy": ["assets", "docs"],
    "sandbox_dependencies": [
        {"source": "node_modules", "target": "node_modules"},
        {"source": "tool.cfg", "target": "etc/tool.cfg"},
    ],
}


def _snapshots(store: cestore.Store) -> list[tuple[str, str]]:
    return [(s["profile"], s["manifest_digest"]) for s in store.run("list")["snapshots"]]


def test_ingest_tree_reports_and_show_lists_typed_entries(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    tree = store.ingest_tree(repo, ["docs", "assets"], name="task-7-assets")
    assert isinstance(tree, cestore.TreeIngest)
    assert tree.name == "task-7-assets"
    assert tree.declarations == ("docs", "assets")
    assert tree.entry_count == 7
    assert tree.total_bytes == len(b"alpha\n") + len(b"#!/bin/sh\necho hi\n") + len(b"# read me\n")
    assert not tree.already_present and tree.new_objects == 3 and tree.reused_objects == 0
    assert tree.bytes_written == tree.total_bytes
    assert tree.source == repo and tree.store == store_dir
    assert tree.harness_digests.as_dict() == {"task_asset_manifest_digest": tree.manifest_digest}

    info = store.show(tree.manifest_digest)
    assert info.profile == "tree"
    assert info.provenance.name == "task-7-assets" and info.provenance.version == ""
    assert info.harness_digests == tree.harness_digests
    assert info.task is None and info.dependencies == ()
    by_path = {e.path: e for e in info.entries}
    assert [e.path for e in info.entries] == [
        "assets",
        "assets/a.txt",
        "assets/empty",
        "assets/sub",
        "assets/sub/run.sh",
        "docs",
        "docs/r.md",
    ]
    assert by_path["assets/empty"] == cestore.TreeEntry("assets/empty", "directory", 0, "", 0, "")
    run = by_path["assets/sub/run.sh"]
    # A sandbox_copy file keeps no mode: the harness records 0.
    assert (run.kind, run.size, run.mode, run.link_target) == ("file", 18, 0, "")
    assert run.sha256 == hashlib.sha256(b"#!/bin/sh\necho hi\n").hexdigest()
    # The digest is the harness's: SHA-256 of the entries' canonical JSON.
    assert _digest(_entries(info.entries)) == tree.manifest_digest

    # The same capture again records nothing new; no `copy` takes every top-level name.
    again = store.ingest_tree(repo, ["docs", "assets"])
    assert again.already_present and again.manifest_digest == tree.manifest_digest and again.new_objects == 0
    plain = tmp_path / "plain"
    for name in ("b.txt", "a", "B"):
        (plain / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "a":
            (plain / name).mkdir()
        else:
            (plain / name).write_bytes(b"x")
    everything = store.ingest_tree(plain)
    assert everything.declarations == ("B", "a", "b.txt")
    # Two files of the same bytes: one object, stored once.
    assert everything.new_objects == 1 and everything.reused_objects == 0 and everything.bytes_written == 1


def test_ingest_dependencies_reports_each_dependency(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    pairs = [(d["source"], d["target"]) for d in TASK["sandbox_dependencies"]]
    deps = store.ingest_dependencies(repo, pairs)
    assert isinstance(deps, cestore.DependenciesIngest)
    assert deps.name == "dependencies"
    modules, cfg = deps.dependencies
    assert (modules.source, modules.target, modules.kind) == ("node_modules", "node_modules", "directory")
    assert modules.snapshot_path == "dependencies/00000/payload"
    assert cfg.snapshot_path == "dependencies/00001/payload"
    assert [e.path for e in modules.entries] == [
        "payload",
        "payload/.vite-temp",
        "payload/pkg",
        "payload/pkg/link",
        "payload/pkg/package.json",
    ]
    link = modules.entries[3]
    assert (link.kind, link.link_target, link.size) == ("symlink", "package.json", len("package.json"))
    assert link.sha256 == hashlib.sha256(b"package.json").hexdigest()
    # A dependency's file keeps its permission bits.
    assert modules.entries[4].mode == 0o644
    assert cfg.kind == "file" and cfg.entries == (
        cestore.TreeEntry("payload", "file", 6, hashlib.sha256(b"cfg=1\n").hexdigest(), 0o600, ""),
    )
    assert deps.entry_count == len(modules.entries) + len(cfg.entries)
    assert deps.total_bytes == modules.total_bytes + cfg.total_bytes
    assert deps.digest == _digest(_dependency_manifest(deps.dependencies))
    assert deps.dependency_content_digest == _digest([{"entries": _entries(d.entries)} for d in deps.dependencies])
    assert deps.harness_digests.as_dict() == {
        "sandbox_dependency_manifest_digest": deps.digest,
        "sandbox_dependency_content_digest": deps.dependency_content_digest,
    }

    info = store.show(deps.digest)
    assert info.profile == "dependencies" and info.entries == () and info.task is None
    assert info.dependencies == deps.dependencies
    assert info.harness_digests == deps.harness_digests

    # An empty list is a snapshot too.
    empty = store.ingest_dependencies(repo, [])
    assert empty.dependencies == () and empty.digest == _digest({"dependencies": [], "schema_version": 1})


def test_ingest_task_and_show_give_the_harness_snapshot(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    task = store.ingest_task(repo, TASK, "0123abc")
    assert isinstance(task, cestore.TaskIngest)
    assert task.name == "task" and task.resolved_sha == "0123abc"
    assert task.repo_identity == str(repo) and task.harness_identity == ""
    assert task.declarations == ("assets", "docs")
    assert task.dependency_declarations == (("node_modules", "node_modules"), ("tool.cfg", "etc/tool.cfg"))
    assert task.manifest_digest == _digest(_entries(task.entries))
    assert task.dependency_manifest_digest == _digest(_dependency_manifest(task.dependencies))
    assert task.total_bytes == sum(e.size for e in task.entries) + sum(d.total_bytes for d in task.dependencies)
    assert task.new_objects == 5 and task.reused_objects == 0 and not task.already_present
    identity = {
        "declarations": list(task.declarations),
        "dependency_content_digest": task.dependency_content_digest,
        "dependency_manifest_digest": task.dependency_manifest_digest,
        "harness_identity": task.harness_identity,
        "manifest_digest": task.manifest_digest,
        "repo_identity": task.repo_identity,
        "resolved_sha": task.resolved_sha,
        "schema_version": 3,
    }
    assert task.digest == _digest(identity)
    assert task.harness_digests == cestore.HarnessDigests(
        task_asset_snapshot_digest=task.digest,
        task_asset_manifest_digest=task.manifest_digest,
        sandbox_dependency_manifest_digest=task.dependency_manifest_digest,
        sandbox_dependency_content_digest=task.dependency_content_digest,
    )

    info = store.show(task.digest)
    assert info.profile == "task"
    assert info.harness_digests == task.harness_digests
    assert info.task == cestore.TaskIdentity(
        task.declarations,
        task.repo_identity,
        task.resolved_sha,
        task.harness_identity,
        task.manifest_digest,
        task.dependency_content_digest,
        task.dependency_manifest_digest,
    )
    assert info.entries == task.entries and info.dependencies == task.dependencies
    # The three kinds are recorded: the tree and the list it names, and the task.
    assert {p for p, _ in _snapshots(store)} == {"tree", "dependencies", "task"}

    # A task file, and a binding the capture must give.
    task_file = tmp_path / "task.json"
    task_file.write_text(json.dumps(TASK))
    binding = tmp_path / "binding.json"
    binding.write_text(json.dumps(task.dependency_binding))
    again = store.ingest_task(repo, task_file, "0123abc", expect_binding=binding, name="t7")
    assert again.digest == task.digest and again.already_present and again.new_objects == 0
    assert store.ingest_task(repo, TASK, "0123abc", expect_binding=task.dependency_binding).digest == task.digest


def test_path_and_read_only_checkout_of_tree_kinds(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    task = store.ingest_task(repo, TASK, "0123abc")

    view = store.path(task.digest)
    assert (view / "sandbox-copy" / "assets" / "a.txt").read_bytes() == b"alpha\n"
    assert (view / "sandbox-copy" / "assets" / "empty").is_dir()
    assert os.readlink(view / "dependencies" / "00000" / "payload" / "pkg" / "link") == "package.json"
    assert (view / "dependencies" / "00001" / "payload").read_bytes() == b"cfg=1\n"
    assert stat.S_IMODE((view / "sandbox-copy" / "assets").stat().st_mode) == 0o555

    # A dependency's mount source is `<view of the list>/<index>/payload`.
    listed = store.path(task.dependency_manifest_digest)
    assert (listed / "00000" / "payload" / "pkg" / "package.json").read_bytes() == b'{"name": "pkg"}\n'
    assert store.path(task.manifest_digest).joinpath("docs", "r.md").read_bytes() == b"# read me\n"

    made = store.checkout(task.manifest_digest, tmp_path / "ro")
    assert isinstance(made, cestore.View)
    assert made.path == tmp_path / "ro" and made.manifest_digest == task.manifest_digest
    assert made.linked + made.copied == 3
    assert (tmp_path / "ro" / "assets" / "sub" / "run.sh").read_bytes() == b"#!/bin/sh\necho hi\n"


def test_writable_checkout(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    task = store.ingest_task(repo, TASK, "0123abc")
    copy = store.checkout(task.digest, tmp_path / "w", writable=True)
    assert isinstance(copy, cestore.WritableCopy)
    assert copy.path == tmp_path / "w" and copy.manifest_digest == task.digest and copy.profile == "task"
    assert copy.reflinked + copy.copied == 5 and copy.symlinks == 1
    assert copy.max_fallback_bytes == 2 * 1024**3
    if copy.reflinked == 0:
        # Every file copied: the five files' bytes.
        assert copy.bytes_copied == 6 + 18 + 10 + 16 + 6
    a = tmp_path / "w" / "sandbox-copy" / "assets" / "a.txt"
    assert stat.S_IMODE(a.stat().st_mode) == 0o600
    assert stat.S_IMODE(a.parent.stat().st_mode) == 0o700
    a.write_bytes(b"changed\n")
    # The copy is the user's own: the stored object is untouched.
    assert (store.path(task.digest) / "sandbox-copy" / "assets" / "a.txt").read_bytes() == b"alpha\n"

    if copy.reflinked == 0:
        # This filesystem copies: a fallback bound below the bytes refuses, and leaves nothing.
        with pytest.raises(cestore.Rejected) as refused:
            store.checkout(task.manifest_digest, tmp_path / "w2", writable=True, max_fallback_bytes=1)
        assert refused.value.code == 3 and refused.value.rule == "task-asset-fallback-limit"
        assert "buffered fallback limit would be exceeded" in refused.value.message
        assert not (tmp_path / "w2").exists()

    with pytest.raises(cestore.UsageError) as usage:
        store.checkout(task.digest, tmp_path / "w3", writable=True, max_fallback_bytes=2 * 1024**3 + 1)
    assert "max_fallback_bytes" in usage.value.message and "--max-fallback-bytes" not in usage.value.message
    with pytest.raises(cestore.UsageError) as read_only:
        store.checkout(task.digest, tmp_path / "w3", max_fallback_bytes=1)
    assert "writable" in read_only.value.message and not (tmp_path / "w3").exists()
    with pytest.raises(TypeError):
        store.checkout(task.digest, tmp_path / "w3", writable="yes")  # type: ignore[call-overload]


def test_materialize(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    task = store.ingest_task(repo, TASK, "0123abc")
    clone = tmp_path / "clone"
    (clone / "assets").mkdir(parents=True)
    (clone / "assets" / "stale.txt").write_bytes(b"old\n")
    (clone / "kept.txt").write_bytes(b"mine\n")
    done = store.materialize(task.digest, clone)
    assert isinstance(done, cestore.Materialized)
    assert done.digest == task.digest and done.clone == clone and done.declarations == ("assets", "docs")
    assert done.reflinked + done.copied == 3 and done.symlinks == 0
    assert not (clone / "assets" / "stale.txt").exists()
    assert (clone / "assets" / "a.txt").read_bytes() == b"alpha\n"
    assert (clone / "assets" / "empty").is_dir()
    assert (clone / "kept.txt").read_bytes() == b"mine\n"
    (clone / "docs" / "r.md").write_bytes(b"edited\n")

    # A declared root that is a symlink in the clone: refused as the harness refuses it, nothing followed.
    hazard = tmp_path / "hazard"
    hazard.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (hazard / "assets").symlink_to("../elsewhere")
    with pytest.raises(cestore.Rejected) as refused:
        store.materialize(task.digest, hazard)
    assert refused.value.rule == "sandbox-copy-target-symlink"
    assert refused.value.message == "sandbox_copy target cannot be a symlink: assets"
    assert refused.value.path == str(hazard / "assets")
    assert list((tmp_path / "elsewhere").iterdir()) == []

    with pytest.raises(cestore.NotFound) as missing:
        store.materialize(task.digest, tmp_path / "no-clone")
    assert missing.value.code == 4 and missing.value.rule == "asset-staging-clone-not-a-directory"
    with pytest.raises(cestore.NotFound) as unknown:
        store.materialize("0" * 64, clone)
    assert unknown.value.kind == "unknown-digest"
    with pytest.raises(cestore.UsageError) as not_task:
        store.materialize(task.manifest_digest, clone)
    assert "not a task snapshot" in not_task.value.message


def test_refusals_raise_typed_errors_and_record_nothing(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    with pytest.raises(cestore.Rejected) as missing:
        store.ingest_tree(repo, ["assets", "nope"])
    assert missing.value.code == 3 and missing.value.rule == "task-asset-path-unavailable"
    assert missing.value.message == (
        "sandbox_copy path is unavailable: nope: [Errno 2] No such file or directory: 'nope'"
    )
    with pytest.raises(cestore.Rejected) as outside:
        store.ingest_tree(repo, ["../x"])
    assert outside.value.rule == "task-copy-not-relative"
    assert outside.value.message == "sandbox_copy must be a repository-relative path: '../x'"
    with pytest.raises(cestore.Rejected) as symlink:
        store.ingest_tree(repo, ["node_modules"])
    assert symlink.value.rule == "task-asset-symlink"
    assert symlink.value.message == "sandbox_copy must not traverse a symlink: node_modules/pkg/link"
    with pytest.raises(cestore.Rejected) as bounded:
        store.ingest_tree(repo, ["assets"], limits=cestore.TreeLimits(entries=2))
    assert bounded.value.rule == "task-asset-entries"
    assert bounded.value.message == "sandbox_copy exceeds the entry limit"
    with pytest.raises(cestore.UsageError) as above:
        store.ingest_tree(repo, ["assets"], limits=cestore.TreeLimits(entries=100_001))
    assert "TreeLimits(entries=...)" in above.value.message
    good = store.ingest_task(repo, TASK, "0123abc")
    before = _snapshots(store)
    wrong = {**good.dependency_binding, "sandbox_dependency_content_digest": "0" * 64}
    with pytest.raises(cestore.Rejected) as changed:
        store.ingest_task(repo, TASK, "fedcba9", expect_binding=wrong)
    assert changed.value.rule == "task-dependency-binding-changed"
    assert changed.value.message == "sandbox dependency content changed after task binding"
    assert _snapshots(store) == before

    with pytest.raises(TypeError):
        store.ingest_dependencies(repo, "node_modules")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.ingest_dependencies(repo, [("node_modules",)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        store.ingest_tree(repo, "assets")
    # No path is not every path: the command line would read it so.
    with pytest.raises(ValueError, match="copy=\\[\\] names no path"):
        store.ingest_tree(repo, [])
    assert _snapshots(store) == before
    empty = store.ingest_task(repo, {"sandbox_copy": []}, "0123abc")
    assert empty.entries == () and empty.manifest_digest == _digest([])
    assert store.show(empty.manifest_digest).entries == ()
    with pytest.raises(TypeError):
        store.ingest_tree(repo, limits=cestore.Bounds(files=1))  # type: ignore[arg-type]


def test_tree_objects_are_shared_with_a_ce_plugin(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    release = write_release(tmp_path / "plugin")
    ce = store.ingest(release, "1.2.3")
    # A task repository that carries the plugin's skills among its assets.
    repo = tmp_path / "repo"
    (repo / "vendor").mkdir(parents=True)
    for skill in ("ce-plan", "ce-work"):
        (repo / "vendor" / skill).mkdir()
        (repo / "vendor" / skill / "SKILL.md").write_bytes((release / "skills" / skill / "SKILL.md").read_bytes())
    tree = store.ingest_tree(repo, ["vendor"])
    assert tree.new_objects == 0 and tree.reused_objects == 2 and tree.bytes_written == 0
    ce_sha = {f.path: f.sha256 for f in store.files(ce.manifest_digest)}
    entries = {e.path: e for e in store.show(tree.manifest_digest).entries}
    assert entries["vendor/ce-plan/SKILL.md"].sha256 == ce_sha["skills/ce-plan/SKILL.md"]
    # One object on disk serves both: the CE view and the tree view link the same inode.
    ce_file = store.path(ce.manifest_digest) / "skills" / "ce-plan" / "SKILL.md"
    tree_file = store.path(tree.manifest_digest) / "vendor" / "ce-plan" / "SKILL.md"
    assert ce_file.stat().st_ino == tree_file.stat().st_ino
    # A CE snapshot's `show` is as before: profile `ce`, no harness digests, no tree contents.
    info = store.show(ce.manifest_digest)
    assert info.profile == "ce" and info.harness_digests.as_dict() == {}
    assert info.entries == () and info.dependencies == () and info.task is None
    report = store.verify()
    assert report.ok and report.snapshots_checked == 2
    # A writable copy of the CE snapshot too.
    copy = store.checkout(ce.manifest_digest, tmp_path / "ce-rw", writable=True)
    assert copy.profile == "ce" and copy.reflinked + copy.copied == 4
    assert (tmp_path / "ce-rw" / "skills" / "ce-plan" / "SKILL.md").read_bytes() == b"# ce-plan\n"


def _frozen_all_the_way_down(value: Any, where: str) -> None:
    """Every part of `value` is a frozen dataclass, a tuple of them, or a scalar (the `raw` JSON aside)."""
    if dataclasses.is_dataclass(value):
        assert getattr(type(value), "__dataclass_params__").frozen, where
        for f in dataclasses.fields(value):
            if f.name != "raw":
                _frozen_all_the_way_down(getattr(value, f.name), f"{where}.{f.name}")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            _frozen_all_the_way_down(item, f"{where}[{i}]")
    else:
        assert value is None or isinstance(value, (str, int, bool, Path)), f"{where}: {type(value).__name__}"


def test_every_tree_result_is_a_frozen_dataclass_all_the_way_down(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    store = cestore.Store()
    task = store.ingest_task(repo, TASK, "0123abc")
    clone = tmp_path / "clone"
    clone.mkdir()
    results = {
        "ingest_tree": store.ingest_tree(repo, ["assets"]),
        "ingest_dependencies": store.ingest_dependencies(repo, [("node_modules", "node_modules")]),
        "ingest_task": task,
        "show(task)": store.show(task.digest),
        "show(dependencies)": store.show(task.dependency_manifest_digest),
        "checkout(writable)": store.checkout(task.digest, tmp_path / "w", writable=True),
        "materialize": store.materialize(task.digest, clone),
        "ingest_runtime": store.ingest_runtime(_gitnexus_checkout(tmp_path / "checkout", "1.6.9")),
    }
    for name, result in results.items():
        _frozen_all_the_way_down(result, name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        task.entries[0].path = "x"  # type: ignore[misc]


def test_a_review_case_is_read_from_the_harness_root(tmp_path: Path, store_dir: Path) -> None:
    repo = _repo(tmp_path / "repo")
    harness = tmp_path / "harness"
    case = harness / "eval" / "workflow_bench" / "review_cases" / "case1"
    case.mkdir(parents=True)
    (case / "notes.md").write_bytes(b"review notes\n")
    store = cestore.Store()
    task = {"sandbox_copy": ["eval/workflow_bench/review_cases/case1", "docs"]}
    with pytest.raises(cestore.UsageError) as no_root:
        store.ingest_task(repo, task, "0123abc")
    assert no_root.value.message.endswith("is read from the harness root: pass harness_root"), no_root.value
    made = store.ingest_task(repo, task, "0123abc", harness_root=harness)
    assert made.harness_identity == str(harness)
    notes = {e.path: e for e in made.entries}["eval/workflow_bench/review_cases/case1/notes.md"]
    assert notes.sha256 == hashlib.sha256(b"review notes\n").hexdigest()
    assert made.dependencies == () and made.dependency_declarations == ()
    assert store.show(made.digest).task.harness_identity == str(harness)  # type: ignore[union-attr]


def _runtime_digest_from_docs() -> Any:
    """docs/format.md's own `runtime_digest`, read from the checkout's docs."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "format.md").read_text(encoding="utf-8")
    section = doc[doc.index("### The GitNexus runtime's digest") :]
    start = section.index("```python\n") + len("```python\n")
    namespace: dict[str, Any] = {}
    exec(section[start : section.index("```", start)], namespace)  # noqa: S102 - the documented script
    return namespace["runtime_digest"]


def _gitnexus_checkout(root: Path, version: str) -> Path:
    """A checkout whose GitNexus runtime the seed's rules accept at `version`, with a .bin link and an executable."""
    files = {
        "gitnexus/dist/cli/index.js": "#!/usr/bin/env node\n",
        "gitnexus/package.json": json.dumps({"name": "gitnexus", "version": version}),
        "gitnexus/node_modules/pkg/bin/cli.js": "#!/usr/bin/env node\n",
        "gitnexus/vendor/README": "",
        "gitnexus/hooks/claude/hook.sh": "",
        "gitnexus-shared/dist/index.js": "",
        "gitnexus-shared/package.json": json.dumps({"name": "gitnexus-shared", "version": version}),
        "gitnexus/src/outside.ts": "not mounted\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "gitnexus/node_modules/pkg/bin/cli.js").chmod(0o755)
    (root / "gitnexus/node_modules/.bin").mkdir()
    os.symlink("../pkg/bin/cli.js", root / "gitnexus/node_modules/.bin/cli")
    os.symlink("../../gitnexus-shared", root / "gitnexus/node_modules/gitnexus-shared")
    return root


def test_ingest_runtime_gives_the_documented_digest(tmp_path: Path, store_dir: Path) -> None:
    checkout = _gitnexus_checkout(tmp_path / "checkout", "1.6.9")
    store = cestore.Store(store_dir)
    got = store.ingest_runtime(checkout)
    assert isinstance(got, cestore.RuntimeIngest)
    assert (got.name, got.rules, got.already_present) == ("gitnexus-runtime", "seed", False)
    assert [c.path for c in got.components] == [
        "gitnexus/dist",
        "gitnexus/package.json",
        "gitnexus/node_modules",
        "gitnexus/vendor",
        "gitnexus-shared/dist",
        "gitnexus-shared/package.json",
        "gitnexus/hooks/claude",
    ]
    assert got.components[2].source == checkout / "gitnexus/node_modules"
    assert got.manifest_digest == _runtime_digest_from_docs()(str(checkout))
    again = store.ingest_runtime(checkout, name="runtime-again")
    assert (again.manifest_digest, again.new_objects, again.bytes_written) == (got.manifest_digest, 0, 0)
    # The seed's pin, and upstream's rules, which pin nothing.
    with pytest.raises(cestore.Rejected):
        store.ingest_runtime(checkout, version="9.9.9")
    assert store.ingest_runtime(checkout, rules="upstream").manifest_digest == got.manifest_digest
    with pytest.raises(ValueError):
        store.ingest_runtime(checkout, rules="other")


def _environment_digest_from_docs() -> Any:
    """docs/format.md's `environment_digest`, read from the document."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "format.md").read_text()
    section = doc[doc.index("### An environment's digest") :]
    start = section.index("```python\n") + len("```python\n")
    scope: dict[str, Any] = {}
    exec(section[start : section.index("```", start)], scope)
    return scope["environment_digest"]


def test_ingest_environment_records_stored_snapshots_as_one(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "a").mkdir(parents=True)
    (repo / "a" / "x.txt").write_text("x\n")
    (repo / "b").mkdir()
    (repo / "b" / "y.txt").write_text("y\n")
    store = cestore.Store(store_dir)
    one = store.ingest_tree(repo, copy=["a"])
    two = store.ingest_tree(repo, copy=["b"])
    members = {"gitnexus_runtime_manifest_digest": one.manifest_digest, "task_asset_manifest_digest": two.manifest_digest}
    got = store.ingest_environment(members, name="sweep")
    assert isinstance(got, cestore.EnvironmentIngest)
    assert (got.name, got.stored, got.store) == ("sweep", True, store_dir)
    assert got.members == tuple(
        cestore.EnvironmentMember(role, "tree", digest) for role, digest in sorted(members.items())
    )
    triples = [(role, "tree", digest) for role, digest in members.items()]
    assert got.manifest_digest == _environment_digest_from_docs()(triples)
    # Pairs in another order, one twice: the same environment, nothing new.
    pairs = list(reversed(members.items())) + [next(iter(members.items()))]
    again = store.ingest_environment(pairs)
    assert (again.manifest_digest, again.stored) == (got.manifest_digest, False)
    info = store.show(got.manifest_digest)
    assert info.profile == "environment"
    assert info.harness_digests.environment_digest == got.manifest_digest
    # Refusals: a role out of its alphabet, an unknown digest, no member.
    with pytest.raises(cestore.UsageError):
        store.ingest_environment({"Bad": one.manifest_digest})
    with pytest.raises(cestore.NotFound):
        store.ingest_environment({"x": "ab" * 32})
    with pytest.raises(cestore.UsageError):
        store.ingest_environment({})
    with pytest.raises(TypeError):
        store.ingest_environment([("x", one.manifest_digest, "extra")])  # type: ignore[list-item]
    # Signed as one unit: the environment and each member, once.
    key = store.generate_key(tmp_path / "k.key")
    signed = store.sign(got.manifest_digest, key.private_key)
    assert {m.manifest_digest for m in signed.members} == set(members.values())
    assert all(m.new for m in signed.members)
    assert not any(m.new for m in store.sign(got.manifest_digest, key.private_key).members)
    # A member is not forgotten while the environment names it.
    with pytest.raises(cestore.Conflict):
        store.run("rm", one.manifest_digest)
