"""The bound drop-in against the reference's own module, on generated trees."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Iterator

import pytest

import cestore
import cestore.runtime_mounts as standalone
from conftest import REFERENCE, harness_packages, write_release

TREES = int(os.environ.get("CESTORE_PY_DIFF_TREES", "120"))
# The pinned table: the reference's answers for the first trees of one seed.
TABLE = Path(__file__).resolve().parent / "data" / "expected.json"
TABLE_SEED = 13
TABLE_TREES = 100
BOUNDS = ("MAX_CE_PLUGIN_FILES", "MAX_CE_PLUGIN_FILE_BYTES", "MAX_CE_PLUGIN_TOTAL_BYTES", "MAX_CE_PLUGIN_PATH_BYTES")
NAME_CHARS = "abcXYZ019-_.é"
MUTATIONS = [
    "none", "none", "none", "secret", "forbidden", "symlink", "fifo", "bad-json", "wrong-name",
    "wrong-version", "missing-skill", "no-skills", "no-manifest-dir", "manifest-symlink",
    "component-file", "long-path", "outside-allowlist", "bound-files", "bound-file-bytes",
    "bound-total-bytes", "bound-path-bytes", "bad-version-arg", "no-ce-arm",
]


def _name(rng: random.Random) -> str:
    name = "".join(rng.choice(NAME_CHARS) for _ in range(rng.randint(1, 12)))
    return name if name not in (".", "..") else "n"


def generate(rng: random.Random, root: Path, mutation: str) -> tuple[str, dict[str, int]]:
    """A random release at `root` broken as `mutation` says; the version to ask for and bounds to set."""
    extra: dict[str, bytes] = {}
    for _ in range(rng.randint(0, 25)):
        top = rng.choice(["skills", "scripts", "assets"])
        depth = rng.randint(0, 3)
        rel = "/".join([top, *[_name(rng) for _ in range(depth)], _name(rng)])
        extra[rel] = rng.randbytes(rng.choice([0, 1, 50, 700, 5000]))
    version = rng.choice(["1.2.3", "0.0.1", "2.10.0-rc.1+b7"])
    # A file and a directory of the same name cannot both be: keep the first.
    kept: dict[str, bytes] = {}
    for rel, data in extra.items():
        parts = rel.split("/")
        prefixes = {"/".join(parts[:i]) for i in range(1, len(parts))}
        if rel in kept or prefixes & set(kept) or any(k.startswith(rel + "/") for k in kept):
            continue
        kept[rel] = data
    write_release(root, version, kept)
    for rel in kept:
        if rng.random() < 0.3:
            (root / rel).chmod(0o755)
    bounds: dict[str, int] = {}
    ask = version
    plugin_json = root / ".claude-plugin" / "plugin.json"
    if mutation == "secret":
        (root / "skills" / "ce-plan" / rng.choice([".env", "id.pem", "my_token.txt", "Credentials"])).write_text("s")
    elif mutation == "forbidden":
        d = root / "skills" / rng.choice(["tests", ".git", "node_modules", "DOCS"])
        d.mkdir(exist_ok=True)
        (d / "x").write_text("x")
    elif mutation == "symlink":
        os.symlink("SKILL.md", root / "skills" / "ce-work" / "link")
    elif mutation == "fifo":
        os.mkfifo(root / "skills" / "ce-work" / "pipe")
    elif mutation == "bad-json":
        plugin_json.write_text(rng.choice(["{", "", "[1,", '{"name": nan'] ))
    elif mutation == "wrong-name":
        plugin_json.write_text(rng.choice(['{"name": "other", "version": "1.2.3"}', "[]", "3"]))
    elif mutation == "wrong-version":
        ask = "9.9.9"
    elif mutation == "missing-skill":
        shutil.rmtree(root / "skills" / rng.choice(["ce-plan", "ce-work", "ce-code-review"]))
    elif mutation == "no-skills":
        shutil.rmtree(root / "skills")
    elif mutation == "no-manifest-dir":
        shutil.rmtree(root / ".claude-plugin")
    elif mutation == "manifest-symlink":
        real = root / "real.json"
        plugin_json.rename(real)
        os.symlink(real, plugin_json)
    elif mutation == "component-file":
        shutil.rmtree(root / "assets", ignore_errors=True)
        (root / "assets").write_text("not a dir")
    elif mutation == "long-path":
        d = root / "skills" / ("d" * 250) / ("e" * 250) / ("f" * 250) / ("g" * 250)
        d.mkdir(parents=True)
        (d / "file.md").write_text("deep")
    elif mutation == "outside-allowlist":
        (root / "README.md").write_text("r")
        (root / ".claude-plugin" / "other.json").write_text("{}")
    elif mutation == "bound-files":
        bounds["MAX_CE_PLUGIN_FILES"] = rng.randint(1, 4)
    elif mutation == "bound-file-bytes":
        bounds["MAX_CE_PLUGIN_FILE_BYTES"] = rng.randint(5, 40)
    elif mutation == "bound-total-bytes":
        bounds["MAX_CE_PLUGIN_TOTAL_BYTES"] = rng.randint(1, 80)
    elif mutation == "bound-path-bytes":
        bounds["MAX_CE_PLUGIN_PATH_BYTES"] = rng.randint(10, 24)
    if mutation.startswith("bound-") and rng.random() < 0.5:
        # A rule the walk meets after the bound: the bound must win, as in the reference.
        (root / "assets" / "zz").mkdir(parents=True, exist_ok=True)
        os.symlink("/etc/passwd", root / "assets" / "zz" / "zz-link")
    if mutation == "bad-version-arg":
        ask = rng.choice(["^1.2.3", "1.2", "latest", "01.2.3"])
    return ask, bounds


def outcome(module: Any, source: Path, version: str, arms: tuple[str, ...], parent: Path) -> dict[str, Any]:
    """What one implementation does with a release: its error, or what its snapshot holds."""
    parent.mkdir(parents=True)
    try:
        config = module.validate_ce_plugin_inputs(arms, source, version)
        with module.staged_ce_plugin_snapshot(config, destination_parent=parent) as snap:
            if snap is None:
                return {"ok": True, "snapshot": None}
            files = {}
            for path in sorted(snap.root.rglob("*")):
                mode = path.lstat().st_mode & 0o7777
                rel = path.relative_to(snap.root).as_posix()
                data = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
                files[rel] = (data, oct(mode))
            result = {
                "ok": True,
                "provenance": snap.provenance,
                "files": files,
                "root_mode": oct(snap.root.stat().st_mode & 0o7777),
                "root_in_parent": snap.root.parent == parent and snap.root.name.startswith("wfbench-ce-plugin-"),
                "mounts": [(m.source == snap.root, m.target) for m in module.ce_plugin_mounts_for_arm("ce_review", snap)],
                "plugin_dir": module.ce_plugin_dir_for_arm("ce_review", snap),
            }
    except Exception as exc:  # both implementations raise SandboxError, ValueError, OSError
        result = {"ok": False, "type": type(exc).__name__, "module": type(exc).__module__.split(".")[-1], "message": str(exc)}
    result["left_behind"] = sorted(os.listdir(parent))
    return result


def trees(seed: int, count: int, base: Path) -> Iterator[tuple[int, str, Path, str, dict[str, int], tuple[str, ...]]]:
    """The generated trees of one seed, in order: index, mutation, tree, version, bounds, arms."""
    rng = random.Random(seed)
    for i in range(count):
        mutation = MUTATIONS[i % len(MUTATIONS)] if i < len(MUTATIONS) else rng.choice(MUTATIONS)
        source = base / f"t{i}"
        version, bounds = generate(rng, source, mutation)
        arms = ("baseline",) if mutation == "no-ce-arm" else ("ce_workflow", "baseline")
        yield i, mutation, source, version, bounds, arms


def bounded_outcome(module: Any, bounds: dict[str, int], monkeypatch: pytest.MonkeyPatch, *args: Any) -> dict[str, Any]:
    """`outcome` with the module's bounds set as a test sets them."""
    with monkeypatch.context() as m:
        for name, value in bounds.items():
            m.setattr(module, name, value)
        return outcome(module, *args)


def test_differential_against_the_reference(tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed, drop = harness_packages(tmp_path / "harness")
    seen: dict[str, int] = {}
    generated = trees(int(os.environ.get("CESTORE_PY_DIFF_SEED", str(TABLE_SEED))), TREES, tmp_path / "trees")
    for i, mutation, source, version, bounds, arms in generated:
        answers = []
        for module, tag in ((seed, "seed"), (drop, "drop")):
            parent = tmp_path / "parents" / f"{tag}{i}"
            answers.append(bounded_outcome(module, bounds, monkeypatch, source, version, arms, parent))
        assert answers[0] == answers[1], f"tree {i} ({mutation}) at {source}"
        key = "ok" if answers[0]["ok"] else answers[0]["message"].split(":")[0]
        seen[key] = seen.get(key, 0) + 1
    print(f"\n{TREES} trees, outcomes: {json.dumps(seen, indent=1, ensure_ascii=False)}")
    assert seen.get("ok", 0) >= TREES // 10
    assert len(seen) >= 12
    report = cestore.Store().verify()
    assert report.ok, report.problems


def pinned(result: dict[str, Any], source: Path) -> dict[str, Any]:
    """An outcome as the table keeps it: the tree's path templated, the files by their digest.

    The exception's module is left out: the standalone drop-in has its own
    `SandboxError`, where a bound one (and the reference) has the harness's.
    """
    kept = {k: v for k, v in result.items() if k != "module"}
    if "message" in kept:
        kept["message"] = kept["message"].replace(str(source), "{tree}")
    if "files" in kept:
        files = json.dumps(kept.pop("files"), sort_keys=True, ensure_ascii=False).encode()
        kept["files_sha256"] = hashlib.sha256(files).hexdigest()
    # As JSON holds it: tuples become lists.
    return json.loads(json.dumps(kept))


def table_entries(base: Path) -> Iterator[tuple[dict[str, Any], Path, str, dict[str, int], tuple[str, ...]]]:
    """Each pinned tree: its table key (what the generator made), tree, version, bounds, arms."""
    for i, mutation, source, version, bounds, arms in trees(TABLE_SEED, TABLE_TREES, base):
        key = {"tree": i, "mutation": mutation, "version": version, "bounds": bounds, "arms": list(arms)}
        yield key, source, version, bounds, arms


def test_pinned_table_of_the_reference_answers(tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The standalone drop-in gives the reference's answers kept in data/expected.json.

    CESTORE_PY_REGEN_TABLE=1 rewrites the table from the reference; that the
    reference still gives them is the next test.
    """
    seed = None
    if REFERENCE.is_dir():
        seed, _ = harness_packages(tmp_path / "harness")
    regen = os.environ.get("CESTORE_PY_REGEN_TABLE") == "1"
    if regen:
        assert seed is not None, f"regenerating the table needs the reference at {REFERENCE}"
        rows = []
        for key, source, version, bounds, arms in table_entries(tmp_path / "regen"):
            answer = bounded_outcome(seed, bounds, monkeypatch, source, version, arms, tmp_path / "seed" / str(key["tree"]))
            rows.append({**key, "outcome": pinned(answer, source)})
        TABLE.parent.mkdir(exist_ok=True)
        TABLE.write_text("[\n" + ",\n".join(json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows) + "\n]\n")
    table = json.loads(TABLE.read_text())
    assert len(table) == TABLE_TREES
    outcomes: dict[str, int] = {}
    for row, (key, source, version, bounds, arms) in zip(table, table_entries(tmp_path / "trees")):
        i = key["tree"]
        assert {k: row[k] for k in key} == key, f"tree {i}: the generator changed; regenerate the table (CESTORE_PY_REGEN_TABLE=1)"
        got = bounded_outcome(standalone, bounds, monkeypatch, source, version, arms, tmp_path / "drop" / str(i))
        assert pinned(got, source) == row["outcome"], f"tree {i} ({key['mutation']}) at {source}"
        tag = "ok" if row["outcome"]["ok"] else row["outcome"]["message"].split(":")[0]
        outcomes[tag] = outcomes.get(tag, 0) + 1
    # The table covers accepted trees and many distinct rejections.
    assert outcomes.get("ok", 0) >= TABLE_TREES // 10 and len(outcomes) >= 12, outcomes


def test_the_reference_still_gives_the_pinned_table(tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The table cannot go stale: the reference, where present, gives each of its answers."""
    seed, _ = harness_packages(tmp_path / "harness")
    table = json.loads(TABLE.read_text())
    for row, (key, source, version, bounds, arms) in zip(table, table_entries(tmp_path / "trees")):
        i = key["tree"]
        live = bounded_outcome(seed, bounds, monkeypatch, source, version, arms, tmp_path / "seed" / str(i))
        assert pinned(live, source) == row["outcome"], f"tree {i}: the reference no longer gives the table's answer"


def test_monkeypatched_bounds_give_the_reference_errors(tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed, drop = harness_packages(tmp_path / "harness")
    source = write_release(tmp_path / "rel", extra={"assets/big.bin": b"x" * 100})
    for name, value, message in (
        ("MAX_CE_PLUGIN_FILES", 2, "Compound Engineering plugin exceeds the file-count limit"),
        ("MAX_CE_PLUGIN_FILE_BYTES", 60, f"Compound Engineering plugin file exceeds the per-file limit: {source}/assets/big.bin"),
        ("MAX_CE_PLUGIN_TOTAL_BYTES", 1, "Compound Engineering plugin exceeds the total byte limit"),
        ("MAX_CE_PLUGIN_PATH_BYTES", 26, "Compound Engineering plugin path exceeds the byte limit: skills/ce-code-review/SKILL.md"),
    ):
        for module in (seed, drop):
            with monkeypatch.context() as m:
                m.setattr(module, name, value)
                config = module.validate_ce_plugin_inputs(["ce_review"], source, "1.2.3")
                parent = tmp_path / f"p-{name}-{module.__name__}"
                parent.mkdir()
                with pytest.raises(module.SandboxError) as info:
                    with module.staged_ce_plugin_snapshot(config, destination_parent=parent):
                        pass
                assert str(info.value) == message
                assert list(parent.iterdir()) == []


def test_root_is_gone_when_the_block_raises(tmp_path: Path, store_dir: Path) -> None:
    source = write_release(tmp_path / "rel")
    parent = tmp_path / "parent"
    parent.mkdir()
    config = standalone.validate_ce_plugin_inputs(["ce_review"], source, "1.2.3")
    with pytest.raises(RuntimeError, match="body"):
        with standalone.staged_ce_plugin_snapshot(config, destination_parent=parent) as snap:
            assert snap.root.parent == parent and snap.root.name.startswith("wfbench-ce-plugin-")
            assert isinstance(snap.mount, standalone.ReadOnlyMount)
            raise RuntimeError("body")
    assert list(parent.iterdir()) == []
    # The store keeps the objects and records the ingest, so the digest can be audited.
    info = cestore.Store().show(snap.manifest_digest)
    assert info.provenance.as_dict() == snap.provenance and info.views == ()
    with pytest.raises(standalone.SandboxError, match="no staged Compound Engineering plugin"):
        standalone.ce_plugin_mounts_for_arm("ce_review", None)


CONCURRENT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import cestore.runtime_mounts as rm
    config = rm.validate_ce_plugin_inputs(["ce_review"], Path(sys.argv[1]), "1.2.3")
    with rm.staged_ce_plugin_snapshot(config, destination_parent=Path(sys.argv[2])) as snap:
        assert (snap.root / "skills" / "ce-plan" / "SKILL.md").read_text() == "# ce-plan\\n"
        print(json.dumps(snap.provenance))
    """
)


def test_four_processes_stage_one_release_at_once(tmp_path: Path, store_dir: Path) -> None:
    extra = {f"assets/f{i}.txt": os.urandom(2000) for i in range(200)}
    source = write_release(tmp_path / "rel", extra=extra)
    parent = tmp_path / "parent"
    parent.mkdir()
    procs = [
        subprocess.Popen([sys.executable, "-c", CONCURRENT, str(source), str(parent)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    digests = {json.loads(out)["manifest_digest"] for out, _ in results}
    assert len(digests) == 1
    assert list(parent.iterdir()) == []
    report = cestore.Store().verify()
    assert report.ok and report.problems == () and report.snapshots_checked == 1


def test_bwrap_reads_a_mounted_snapshot_and_cannot_write(tmp_path: Path, store_dir: Path) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bwrap is not installed")
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"bwrap cannot run here: {probe.stderr.strip()}")
    source = write_release(tmp_path / "rel")
    parent = tmp_path / "parent"
    parent.mkdir()
    config = standalone.validate_ce_plugin_inputs(["ce_workflow"], source, "1.2.3")
    with standalone.staged_ce_plugin_snapshot(config, destination_parent=parent) as snap:
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--tmpfs", "/opt"]
        for mount in standalone.ce_plugin_mounts_for_arm("ce_workflow", snap):
            args += ["--ro-bind", str(mount.source), mount.target]
        plugin = standalone.ce_plugin_dir_for_arm("ce_workflow", snap)
        read = subprocess.run([*args, "cat", f"{plugin}/skills/ce-plan/SKILL.md"], capture_output=True, text=True)
        assert read.returncode == 0, read.stderr
        assert read.stdout == "# ce-plan\n"
        write = subprocess.run([*args, "sh", "-c", f"echo x >> {plugin}/skills/ce-plan/SKILL.md"], capture_output=True, text=True)
        assert write.returncode != 0
        assert "Read-only file system" in write.stderr
        create = subprocess.run([*args, "touch", f"{plugin}/new"], capture_output=True, text=True)
        assert create.returncode != 0
        assert (snap.root / "skills" / "ce-plan" / "SKILL.md").read_text() == "# ce-plan\n"
