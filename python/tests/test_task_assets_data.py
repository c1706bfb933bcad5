"""The harness's task-asset answers (tests/data/task-assets) agree with their fixtures and with themselves.

answers.json holds what upstream's `TaskAssetCache` answered for each fixture of fixtures.json. These tests
need neither upstream nor the cestore binary: every digest is recomputed from the recorded entries, and every
entry is derived again from the fixture's declared tree. When CESTORE_UPSTREAM_TASK_ASSETS names the directory
holding upstream's code and the generator (see the data's README.md), one more test runs upstream live and
compares its answers with the committed ones.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "task-assets"
FIXTURES = json.loads((DATA / "fixtures.json").read_text(encoding="utf-8"))
ANSWERS = json.loads((DATA / "answers.json").read_text(encoding="utf-8"))
BY_NAME = {fixture["name"]: fixture for fixture in FIXTURES["fixtures"]}
CAPTURED = sorted(name for name, answer in ANSWERS["answers"].items() if answer["outcome"] != "rejected")
REJECTED = sorted(name for name, answer in ANSWERS["answers"].items() if answer["outcome"] == "rejected")
REVIEW_PREFIX = PurePosixPath("eval/workflow_bench/review_cases")
WORKSPACE = "/workspace"
ENTRY_KEYS = {"kind", "link_target", "mode", "path", "sha256", "size"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _compact(value: Any) -> str:
    """Upstream's canonical JSON: sorted keys, no spaces, ASCII escapes."""
    return _sha(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())


def _layout(name: str, key: str) -> str:
    return FIXTURES["layout"][key].replace("{root}", FIXTURES["root"]).replace("{name}", name)


def _tree(entries: list[dict[str, Any]], repo: str) -> dict[str, dict[str, Any]]:
    """The fixture's declared tree as path -> node, implied parent directories included (mode 0755)."""
    nodes: dict[str, dict[str, Any]] = {}
    for entry in entries:
        parts = PurePosixPath(entry["path"]).parts
        for depth in range(1, len(parts)):
            nodes.setdefault("/".join(parts[:depth]), {"kind": "directory", "mode": 0o755})
        node: dict[str, Any] = {"kind": entry["kind"]}
        if entry["kind"] == "file":
            node["data"] = bytes.fromhex(entry["hex"]) if "hex" in entry else entry["text"].encode("utf-8")
        if entry["kind"] == "symlink":
            node["target"] = entry["target"].replace("{repo}", repo)
        else:
            node["mode"] = int(entry["mode"], 8)
        nodes[entry["path"]] = node
    return nodes


def _below(nodes: dict[str, dict[str, Any]], root: str) -> list[str]:
    """`root` and every declared path under it, never through a symlink."""
    found = [path for path in nodes if path == root or path.startswith(root + "/")]
    links = [path for path in found if nodes[path]["kind"] == "symlink" and path != root]
    return sorted(path for path in found if not any(path.startswith(link + "/") for link in links))


def _expected_entry(path: str, node: dict[str, Any], *, dependency: bool) -> dict[str, Any]:
    entry = {"kind": node["kind"], "link_target": "", "mode": 0, "path": path, "sha256": "", "size": 0}
    if node["kind"] == "file":
        entry.update(size=len(node["data"]), sha256=_sha(node["data"]), mode=node["mode"] if dependency else 0)
    elif node["kind"] == "symlink":
        target = node["target"].encode("utf-8")
        entry.update(size=len(target), sha256=_sha(target), link_target=node["target"])
    return entry


def _expected_copy_entries(name: str) -> list[dict[str, Any]]:
    fixture = BY_NAME[name]
    repo = _layout(name, "repo")
    trees = {"repo": _tree(fixture["repo"], repo), "harness": _tree(fixture.get("harness", []), repo)}
    entries: dict[str, dict[str, Any]] = {}
    for declaration in fixture["task"].get("sandbox_copy", []):
        relative = PurePosixPath(declaration)
        nodes = trees["harness" if relative == REVIEW_PREFIX or REVIEW_PREFIX in relative.parents else "repo"]
        for parent in reversed(relative.parents[:-1]):
            entries[parent.as_posix()] = _expected_entry(parent.as_posix(), {"kind": "directory"}, dependency=False)
        for path in _below(nodes, declaration):
            entries[path] = _expected_entry(path, nodes[path], dependency=False)
    return [entries[path] for path in sorted(entries)]


def _expected_dependency_entries(name: str, index: int) -> list[dict[str, Any]]:
    fixture = BY_NAME[name]
    declaration = fixture["task"]["sandbox_dependencies"][index]
    nodes = _tree(fixture["repo"], _layout(name, "repo"))
    source = declaration["source"]
    entries: dict[str, dict[str, Any]] = {}
    for path in _below(nodes, source):
        payload = "payload" + path[len(source):]
        entries[payload] = _expected_entry(payload, nodes[path], dependency=True)
    if nodes[source]["kind"] == "directory" and PurePosixPath(declaration["target"]).name == "node_modules":
        entries.setdefault("payload/.vite-temp", _expected_entry("payload/.vite-temp", {"kind": "directory"}, dependency=True))
    return [entries[path] for path in sorted(entries)]


def test_every_fixture_has_one_answer_with_its_expected_outcome() -> None:
    assert sorted(BY_NAME) == sorted(ANSWERS["answers"])
    for name, fixture in BY_NAME.items():
        assert ANSWERS["answers"][name]["outcome"] == fixture["expect"], name
    assert ANSWERS["resolved_sha"] == FIXTURES["resolved_sha"]
    assert ANSWERS["root"] == FIXTURES["root"]
    assert len(CAPTURED) >= 7 and len(REJECTED) >= 30


@pytest.mark.parametrize("name", CAPTURED)
def test_digests_recompute_from_the_recorded_entries(name: str) -> None:
    answer = ANSWERS["answers"][name]
    fixture = BY_NAME[name]
    for entry in answer["entries"] + [e for dependency in answer["dependencies"] for e in dependency["entries"]]:
        assert set(entry) == ENTRY_KEYS, entry
    assert answer["entries"] == sorted(answer["entries"], key=lambda entry: entry["path"])
    assert answer["manifest_digest"] == _compact(answer["entries"])
    content = [{"entries": dependency["entries"]} for dependency in answer["dependencies"]]
    assert answer["dependency_content_digest"] == _compact(content)
    manifest = {
        "dependencies": [
            {"content": body, "source": dependency["source"], "target": dependency["target"]}
            for dependency, body in zip(answer["dependencies"], content)
        ],
        "schema_version": 1,
    }
    assert answer["dependency_manifest_digest"] == _compact(manifest)
    copies = fixture["task"].get("sandbox_copy", [])
    reviewed = any(
        PurePosixPath(path) == REVIEW_PREFIX or REVIEW_PREFIX in PurePosixPath(path).parents for path in copies
    )
    assert answer["repo_identity"] == _layout(name, "repo")
    assert answer["harness_identity"] == (_layout(name, "harness") if reviewed else "")
    assert answer["declarations"] == copies
    dependencies = fixture["task"].get("sandbox_dependencies", [])
    assert answer["dependency_declarations"] == [[item["source"], item["target"]] for item in dependencies]
    snapshot = {
        "declarations": answer["declarations"],
        "dependency_content_digest": answer["dependency_content_digest"],
        "dependency_manifest_digest": answer["dependency_manifest_digest"],
        "harness_identity": answer["harness_identity"],
        "manifest_digest": answer["manifest_digest"],
        "repo_identity": answer["repo_identity"],
        "resolved_sha": FIXTURES["resolved_sha"],
        "schema_version": 3,
    }
    assert answer["digest"] == _compact(snapshot) == answer["snapshot_root_name"]


@pytest.mark.parametrize("name", CAPTURED)
def test_entries_are_the_fixture_tree_walked_again(name: str) -> None:
    answer = ANSWERS["answers"][name]
    assert answer["entries"] == _expected_copy_entries(name)
    for index, dependency in enumerate(answer["dependencies"]):
        assert dependency["entries"] == _expected_dependency_entries(name, index), dependency["source"]
        assert dependency["snapshot_path"] == f"dependencies/{index:05d}/payload"
        assert dependency["kind"] == dependency["entries"][0]["kind"]
        sized = [entry["size"] for entry in dependency["entries"] if entry["kind"] != "directory"]
        assert dependency["total_bytes"] == sum(sized)
    counted = answer["entries"] + [entry for dependency in answer["dependencies"] for entry in dependency["entries"]]
    assert answer["total_bytes"] == sum(entry["size"] for entry in counted if entry["kind"] != "directory")


@pytest.mark.parametrize("name", CAPTURED)
def test_the_frozen_snapshot_holds_the_entries_read_only(name: str) -> None:
    answer = ANSWERS["answers"][name]
    expected = {"sandbox-copy": ("directory", 0o500, ""), "dependencies": ("directory", 0o500, "")}
    for entry in answer["entries"]:
        expected["sandbox-copy/" + entry["path"]] = (entry["kind"], 0o500 if entry["kind"] == "directory" else 0o400, "")
    for index, dependency in enumerate(answer["dependencies"]):
        expected[f"dependencies/{index:05d}"] = ("directory", 0o500, "")
        for entry in dependency["entries"]:
            path = f"dependencies/{index:05d}/{entry['path']}"
            if entry["kind"] == "symlink":
                expected[path] = ("symlink", 0o777, entry["link_target"])
            elif entry["kind"] == "directory":
                expected[path] = ("directory", 0o500, "")
            else:
                expected[path] = ("file", 0o400 | (0o100 if entry["mode"] & 0o111 else 0), "")
    frozen = {row["path"]: (row["kind"], row["mode"], row.get("link_target", "")) for row in answer["frozen"]}
    assert frozen == expected


def _clone_before(name: str) -> dict[str, tuple[str, int, str]]:
    """The fixture's clone as it was built, in the shape of the recorded walks."""
    nodes = _tree(BY_NAME[name].get("clone", []), _layout(name, "repo"))
    rows = {}
    for path, node in nodes.items():
        if node["kind"] == "symlink":
            rows[path] = ("symlink", 0o777, node["target"])
        elif node["kind"] == "directory":
            rows[path] = ("directory", node["mode"], "")
        else:
            rows[path] = ("file", node["mode"], _sha(node["data"]))
    return rows


def _walked(rows: list[dict[str, Any]]) -> dict[str, tuple[str, int, str]]:
    return {row["path"]: (row["kind"], row["mode"], row.get("sha256", row.get("link_target", ""))) for row in rows}


@pytest.mark.parametrize("name", [name for name in CAPTURED if ANSWERS["answers"][name]["outcome"] == "ok"])
def test_the_materialized_clone_is_the_copy_plus_mount_points(name: str) -> None:
    answer = ANSWERS["answers"][name]
    roots = [PurePosixPath(root) for root in answer["declarations"]]
    expected = {
        path: row
        for path, row in _clone_before(name).items()
        if not any(PurePosixPath(path) == root or root in PurePosixPath(path).parents for root in roots)
    }
    for entry in answer["entries"]:
        path = PurePosixPath(entry["path"])
        published = any(path == root or root in path.parents for root in roots)
        row = (entry["kind"], 0o700 if entry["kind"] == "directory" else 0o600, entry["sha256"])
        if published:
            expected[entry["path"]] = row
        else:  # an ancestor of a root: kept when the clone had it
            expected.setdefault(entry["path"], row)
    for dependency in answer["dependencies"]:
        target = PurePosixPath(dependency["target"])
        for parent in reversed(target.parents[:-1]):
            expected.setdefault(parent.as_posix(), ("directory", 0o700, ""))
        expected.setdefault(
            target.as_posix(),
            ("directory", 0o700, "") if dependency["kind"] == "directory" else ("file", 0o600, _sha(b"")),
        )
    assert _walked(answer["materialized"]) == expected
    assert answer["dependency_mounts"] == [
        {"source": dependency["snapshot_path"], "target": f"{WORKSPACE}/{dependency['target']}"}
        for dependency in answer["dependencies"]
    ]


@pytest.mark.parametrize("name", REJECTED)
def test_a_rejection_names_its_rule_and_leaves_no_snapshot(name: str) -> None:
    answer = ANSWERS["answers"][name]
    assert answer["error_type"] == "SandboxError"
    assert answer["error"] and FIXTURES["root"] not in answer["error"]
    assert answer["cache_left"] == []
    assert "digest" not in answer and "entries" not in answer


def test_a_failed_materialization_publishes_nothing() -> None:
    failed = [name for name in CAPTURED if ANSWERS["answers"][name]["outcome"] == "materialize_rejected"]
    assert len(failed) >= 4
    for name in failed:
        answer = ANSWERS["answers"][name]
        assert answer["error_type"] == "SandboxError" and answer["error"], name
        assert answer["phase"] in ("materialize", "dependency_mounts"), name
        if answer["phase"] == "materialize":
            assert _walked(answer["materialized"]) == _clone_before(name), name
        assert not any(sibling.startswith(".wfbench-assets-") for sibling in answer["clone_siblings"]), name


def test_no_fixture_repository_is_changed() -> None:
    assert all(answer["repo_unchanged"] is True for answer in ANSWERS["answers"].values())


def test_upstream_live_gives_the_committed_answers() -> None:
    upstream = os.environ.get("CESTORE_UPSTREAM_TASK_ASSETS")
    if not upstream:
        reason = "CESTORE_UPSTREAM_TASK_ASSETS is not set: upstream's task_assets.py is not run live"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    generator = Path(upstream) / "generate_answers.py"
    if not generator.is_file():
        pytest.fail(f"CESTORE_UPSTREAM_TASK_ASSETS has no generate_answers.py: {upstream}")
    spec = importlib.util.spec_from_file_location("cestore_upstream_task_assets", generator)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # The generator rebuilds the fixtures' trees at their fixed paths, where the Rust replay
    # (profile::tree::replay_tests) builds them too: both hold this lock meanwhile.
    root = Path(FIXTURES["root"])
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        live = module.generate(FIXTURES)
    for name, answer in ANSWERS["answers"].items():
        assert live["answers"][name] == answer, name
    assert sorted(live["answers"]) == sorted(ANSWERS["answers"])
