"""Source records through the typed API and the drop-in: a release read from git, and a directory in a work tree."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import cestore
import cestore.runtime_mounts as standalone
from conftest import write_release


def git(repo: Path, *args: str) -> str:
    """Runs git in `repo` with a fixed identity; returns its stdout, stripped."""
    ident = ["-c", "user.name=cestore", "-c", "user.email=cestore@example.invalid", "-c", "commit.gpgsign=false"]
    ident += ["-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main"]
    done = subprocess.run(["git", *ident, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def committed_release(root: Path, tag: str = "v1.2.3", message: str = "release") -> str:
    """A release at the root of a new repository, committed and tagged; returns the commit."""
    write_release(root)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    git(root, "tag", "-a", tag, "-m", "release")
    return git(root, "rev-parse", "HEAD")


def test_a_release_read_from_git_is_its_directory_s_snapshot(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    commit = committed_release(repo)
    git(repo, "remote", "add", "origin", "https://bob:hunter2@example.com/o/r.git")
    store = cestore.Store()
    from_git = store.ingest(git=repo, rev="v1.2.3", version="1.2.3")
    from_dir = store.ingest(repo, "1.2.3")
    assert from_git.manifest_digest == from_dir.manifest_digest
    (git_entry,) = from_git.ingest.sources
    (dir_entry,) = from_dir.ingest.sources
    assert isinstance(git_entry.record, cestore.SourceRecord)
    assert git_entry.via == "ingest" and git_entry.record.read_from == "git"
    assert dir_entry.record.read_from == "work-tree"
    for record in (git_entry.record, dir_entry.record):
        assert record.commit == commit and record.tag == "v1.2.3" and record.clean
        assert record.path == "" and record.repository == "https://example.com/o/r.git"
        assert record.changes == cestore.Changes()
    assert from_dir.ingest.source_unrecorded is None
    assert "hunter2" not in json.dumps(store.run("show", from_dir.manifest_digest))
    info = store.show(from_dir.manifest_digest)
    assert [e.record.read_from for e in info.sources] == ["git", "work-tree"]


def test_plugin_finds_its_directory_in_the_marketplace(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    write_release(repo / "plugins" / "ce")
    (repo / ".claude-plugin").mkdir()
    (repo / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps({"name": "m", "plugins": [{"name": "compound-engineering", "source": "./plugins/ce"}]})
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "release")
    store = cestore.Store()
    by_plugin = store.ingest(git=repo, rev="HEAD", plugin="compound-engineering", version="1.2.3")
    by_subdir = store.ingest(git=repo, rev="HEAD", subdir="plugins/ce", version="1.2.3")
    assert by_plugin.manifest_digest == by_subdir.manifest_digest
    assert by_plugin.ingest.sources[0].record.path == "plugins/ce"
    with pytest.raises(cestore.NotFound) as caught:
        store.ingest(git=repo, rev="no-such-rev", version="1.2.3")
    assert caught.value.code == 4


def test_a_changed_file_makes_the_record_dirty(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    committed_release(repo)
    (repo / "skills" / "ce-plan" / "SKILL.md").write_text("# ce-plan, edited\n")
    record = cestore.Store().ingest(repo, "1.2.3").ingest.sources[0].record
    assert not record.clean
    assert record.changes == cestore.Changes(changed=("skills/ce-plan/SKILL.md",))


def test_ingest_arguments_are_checked_before_the_binary_runs(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    with pytest.raises(TypeError, match="source directory, or git="):
        store.ingest(version="1.2.3")
    with pytest.raises(TypeError, match="needs rev="):
        store.ingest(git=tmp_path, version="1.2.3")
    with pytest.raises(TypeError, match="not both"):
        store.ingest(tmp_path, "1.2.3", git=tmp_path, rev="HEAD")
    with pytest.raises(TypeError, match="plugin= or subdir="):
        store.ingest(git=tmp_path, rev="HEAD", plugin="p", subdir="s", version="1.2.3")
    with pytest.raises(TypeError, match="give git= too"):
        store.ingest(tmp_path, "1.2.3", rev="HEAD")
    with pytest.raises(TypeError, match="needs a version"):
        store.ingest(tmp_path)


def test_the_drop_in_records_the_source_of_the_harness_s_plugin_directory(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    commit = committed_release(repo)
    parent = tmp_path / "parent"
    parent.mkdir()
    config = standalone.validate_ce_plugin_inputs(["ce_review"], repo, "1.2.3")
    with standalone.staged_ce_plugin_snapshot(config, destination_parent=parent) as snap:
        digest = snap.manifest_digest
    (entry,) = cestore.Store().show(digest).sources
    assert entry.record.commit == commit and entry.record.clean and entry.record.tag == "v1.2.3"


def test_audit_and_check_source_re_derive_a_digest_from_its_commit(tmp_path: Path, store_dir: Path) -> None:
    repo = tmp_path / "repo"
    commit = committed_release(repo)
    store = cestore.Store()
    recorded = store.ingest(git=repo, rev="v1.2.3", version="1.2.3").manifest_digest
    unrecorded = store.ingest(write_release(tmp_path / "plain", extra={"assets/x.txt": b"x"}), "1.2.3").manifest_digest
    check = store.check_source(recorded, repo)
    assert isinstance(check, cestore.SourceCheck) and check.equal
    assert check.commit == commit and check.found == recorded == check.expected
    other = tmp_path / "other"
    committed_release(other, tag="v9", message="another history")
    missing = store.check_source(recorded, other)
    assert not missing.equal and missing.status == "source-mismatch" and missing.mismatch == "missing-commit"

    results = tmp_path / "results.jsonl"
    rows = [
        {"arm": "ce_review", "ce_plugin_version": "1.2.3", "ce_plugin_manifest_digest": d}
        for d in (recorded, unrecorded)
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = store.audit(results, require_clean_source=True, source_repo=repo)
    assert not report.passed
    by_digest = {d.manifest_digest: d for d in report.digests}
    good, bad = by_digest[recorded], by_digest[unrecorded]
    assert good.status == "ok" and good.source == cestore.SourceSummary(commit, "v1.2.3", True, "git", "ingest")
    assert good.source_check is not None and good.source_check.equal
    assert bad.status == "no-clean-source" and bad.source is None
    assert store.audit(results).passed
