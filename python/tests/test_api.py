"""The typed API over the CLI: results, and one real case per exception class."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
from pathlib import Path

import pytest

import cestore
from conftest import write_release


def test_package_is_the_installed_one() -> None:
    if os.environ.get("CESTORE_PY_REQUIRE_INSTALLED") == "1":
        assert "site-packages" in cestore.__file__, cestore.__file__
        assert Path(cestore.find_binary()).parent.resolve() == Path(os.sys.executable).parent.resolve()


def test_find_binary_honours_cestore_bin(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = cestore.find_binary()
    assert os.access(real, os.X_OK)
    out = subprocess.run([real, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("cestore ")
    monkeypatch.setenv("CESTORE_BIN", str(tmp_path / "nope"))
    with pytest.raises(cestore.BinaryNotFound):
        cestore.find_binary()


def test_ingest_show_files_diff_verify(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    a = store.ingest(write_release(tmp_path / "a", extra={"scripts/run.sh": b"#!/bin/sh\n"}), "1.2.3")
    assert a.provenance.file_count == 5 and not a.ingest.already_present
    assert store.ingest(tmp_path / "a", "1.2.3").ingest.already_present
    b = store.ingest(write_release(tmp_path / "b", extra={"assets/x.txt": b"x"}), "1.2.3")
    assert [f.path for f in store.files(a.manifest_digest)][0] == ".claude-plugin/plugin.json"
    assert store.show(a.manifest_digest).ingest_count == 2
    changes = {(c.change, c.path) for c in store.diff(a.manifest_digest, b.manifest_digest)}
    assert changes == {("removed", "scripts/run.sh"), ("added", "assets/x.txt")}
    report = store.verify()
    assert report.ok and report.snapshots_checked == 2 and report.problems == ()
    shared = store.path(a.manifest_digest)
    assert (shared / "skills" / "ce-plan" / "SKILL.md").read_text() == "# ce-plan\n"
    staged = store.stage(["ce_review", "baseline"], plugin_dir=tmp_path / "a", plugin_version="1.2.3")
    assert staged.provenance == a.provenance
    assert staged.arms[0].plugin_dir == "/opt/compound-engineering-plugin"
    assert staged.arms[1].mounts == ()


def test_view_discards_on_exception(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    parent = tmp_path / "views"
    parent.mkdir()
    with pytest.raises(KeyError):
        with store.view(snap.manifest_digest, parent) as view:
            assert (view.path / ".claude-plugin" / "plugin.json").is_file()
            raise KeyError("body failed")
    assert list(parent.iterdir()) == []
    assert store.show(snap.manifest_digest).views == ()


def test_held_stage_discards_on_release_and_when_its_caller_is_killed(tmp_path: Path, store_dir: Path) -> None:
    import signal
    import sys
    import time

    store = cestore.Store()
    src = write_release(tmp_path / "a")
    view = tmp_path / "view"
    with pytest.raises(KeyError):
        with store.hold_stage(["ce_review"], plugin_dir=src, plugin_version="1.2.3", dest=view) as staged:
            assert staged.view == view and (view / ".claude-plugin" / "plugin.json").is_file()
            digest = staged.provenance.manifest_digest
            raise KeyError("body failed")
    assert not view.exists() and store.show(digest).views == ()

    held = store.hold_stage(["ce_review"], plugin_dir=src, plugin_version="1.2.3", dest=view)
    assert held.release(spare=True) and not view.exists()
    assert held.release() is False, "a second release does nothing"
    assert len(list((store_dir / "spare" / digest).iterdir())) == 1

    # A caller killed mid-sweep: the held process sees its input end and
    # discards the view (no spare: its sandboxes may still be running).
    code = (
        "import sys, cestore; "
        "h = cestore.Store().hold_stage(['ce_review'], plugin_dir=sys.argv[1], plugin_version='1.2.3', dest=sys.argv[2]); "
        "print(h.stage.view, flush=True); sys.stdin.read()"
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", code, str(src), str(view)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert caller.stdout is not None and caller.stdout.readline().strip() == str(view)
    assert view.is_dir() and len(store.show(digest).views) == 1
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while view.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    while store.show(digest).views and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not view.exists() and store.show(digest).views == ()
    assert not (store_dir / "spare" / digest).exists() or not list((store_dir / "spare" / digest).iterdir())
    assert store.verify().ok


@pytest.mark.parametrize("spare", [False, True])
def test_the_held_release_lines_are_the_binarys(tmp_path: Path, store_dir: Path, spare: bool) -> None:
    # The package writes the line; the binary decides what it means: its
    # release report says whether it kept the view as a spare.
    from cestore._store import _result, _release_line

    store = cestore.Store()
    src = write_release(tmp_path / "a")
    held = store.hold_stage(["ce_review"], plugin_dir=src, plugin_version="1.2.3", dest=tmp_path / "view")
    held._released = True
    report = _result(held._finish(_release_line(spare)), held._stderr, held._code, held._argv)
    assert report["removed"] is True and report["spare"] is spare
    assert _release_line(False) == b"discard\n"


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_held_stage_whose_process_is_signalled_discards_its_view(
    tmp_path: Path, store_dir: Path, signame: str
) -> None:
    import signal
    import time

    store = cestore.Store()
    src = write_release(tmp_path / "a", extra={"skills/ce-work/empty.md": b""})
    view = tmp_path / "view"
    held = store.hold_stage(["ce_review"], plugin_dir=src, plugin_version="1.2.3", dest=view)
    digest = held.stage.provenance.manifest_digest
    assert view.is_dir() and len(store.show(digest).views) == 1
    # The held process leads a session of its own: its group is its pid.
    sig = getattr(signal, signame)
    os.killpg(held._proc.pid, sig)
    deadline = time.monotonic() + 10
    while held._proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held._proc.returncode == 128 + sig
    assert not view.exists() and store.show(digest).views == ()
    # The release that follows reads what the process said and raises nothing.
    assert held.release() is True
    assert held.release() is False, "a second release does nothing"
    assert not (store_dir / "spare" / digest).exists() or not list((store_dir / "spare" / digest).iterdir())
    assert store.verify().ok


def test_rejected(tmp_path: Path, store_dir: Path) -> None:
    with pytest.raises(cestore.Rejected) as info:
        cestore.Store().ingest(write_release(tmp_path / "a"), "1.2.4")
    err = info.value
    assert (err.code, err.kind, err.rule) == (3, "rejected", "version-mismatch")
    assert err.path == str(tmp_path / "a" / ".claude-plugin" / "plugin.json")
    assert "expected 1.2.4" in err.message


def test_not_found(tmp_path: Path, store_dir: Path) -> None:
    with pytest.raises(cestore.NotFound) as info:
        cestore.Store().ingest(tmp_path / "missing", "1.2.3")
    assert (info.value.code, info.value.rule) == (4, "source-unavailable")
    cestore.Store().ingest(write_release(tmp_path / "a"), "1.2.3")
    with pytest.raises(cestore.NotFound) as info:
        cestore.Store().show("0" * 64)
    assert info.value.kind == "unknown-digest"


def test_ambiguous(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    # Two releases whose digests share four hex digits, found without storing.
    release = write_release(tmp_path / "r")
    (release / "assets").mkdir()
    seen: dict[str, int] = {}
    for i in range(10_000):
        (release / "assets" / "n").write_bytes(str(i).encode())
        prefix = store.digest(release, "1.2.3").manifest_digest[:4]
        if prefix in seen:
            break
        seen[prefix] = i
    digests = set()
    for i in (seen[prefix], i):
        (release / "assets" / "n").write_bytes(str(i).encode())
        digests.add(store.ingest(release, "1.2.3").manifest_digest)
    with pytest.raises(cestore.Ambiguous) as info:
        store.show(prefix)
    assert (info.value.code, info.value.kind) == (5, "ambiguous-digest")
    assert {m["manifest_digest"] for m in info.value.matches} == digests
    assert {m["version"] for m in info.value.matches} == {"1.2.3"}
    with pytest.raises(cestore.Ambiguous) as info:
        store.show("@1.2.3")
    assert {m["manifest_digest"] for m in info.value.matches} == digests
    with pytest.raises(cestore.UsageError):
        store.show(prefix[:3])


def test_conflict(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    (tmp_path / "taken").mkdir()
    with pytest.raises(cestore.Conflict) as info:
        store.checkout(snap.manifest_digest, tmp_path / "taken")
    assert info.value.code == 6
    assert list((tmp_path / "taken").iterdir()) == []


def test_damaged(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    objects = [p for p in (store_dir / "objects").rglob("*") if p.is_file()]
    assert objects
    victim = objects[0]
    victim.chmod(0o644)
    with victim.open("ab") as f:
        f.write(b"damage")
    victim.chmod(0o444)
    with pytest.raises(cestore.Damaged) as info:
        store.checkout(snap.manifest_digest, tmp_path / "view")
    assert (info.value.code, info.value.kind) == (1, "integrity")
    assert not (tmp_path / "view").exists()
    report = store.verify()
    assert not report.ok and report.problems


def _mutable_parts(value: object, where: str) -> list[str]:
    """Every place below `value` that is not frozen: a dict, a list, a set, or a dataclass that is not frozen.

    The raw JSON kept beside a result (fields with `repr=False`: `raw`,
    `envelope`) is not a part of it.
    """
    if isinstance(value, (str, bytes, int, float, bool, type(None), Path)):
        return []
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found = [] if type(value).__dataclass_params__.frozen else [f"{where}: {type(value).__name__} is not frozen"]
        for f in dataclasses.fields(value):
            if f.repr:
                found += _mutable_parts(getattr(value, f.name), f"{where}.{f.name}")
        return found
    if isinstance(value, tuple):
        return [p for i, v in enumerate(value) for p in _mutable_parts(v, f"{where}[{i}]")]
    return [f"{where}: a {type(value).__name__}"]


def test_every_result_is_a_frozen_dataclass_all_the_way_down(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    extra = {
        "README.md": b"outside the allowlist\n",
        "skills/ce-plan/tests/x.md": b"a forbidden part\n",
        "skills/ce-plan/api-token.txt": b"a secret's name\n",
    }
    snap = store.ingest(write_release(tmp_path / "a", extra=extra), "1.2.3")
    assert snap.ingest.left_out == (
        cestore.LeftOut("skills/ce-plan/tests", "forbidden-part"),
        cestore.LeftOut("skills/ce-plan/api-token.txt", "secret"),
        cestore.LeftOut("README.md", "outside-allowlist"),
    ), snap.ingest.left_out
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.ingest.left_out[0].path = "x"  # type: ignore[misc]
    digest = snap.manifest_digest
    view = store.checkout(digest, tmp_path / "view")
    # A mode changed through the view: the next ingest mends it and says so.
    (view.path / "skills" / "ce-plan" / "SKILL.md").chmod(0o644)
    again = store.ingest(tmp_path / "a", "1.2.3")
    assert [(r.repair, Path(r.object).is_file()) for r in again.ingest.repaired] == [("mode", True)], again
    info = store.show(digest)
    assert [(v.path, v.kind, v.on_disk) for v in info.views] == [(view.path, "checkout", True)], info.views
    # A byte changed in a copy of the view: verify(tree=...) lists the difference.
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(view.path), str(copy)], check=True)
    (copy / "skills" / "ce-work" / "SKILL.md").chmod(0o644)
    (copy / "skills" / "ce-work" / "SKILL.md").write_text("# changed\n")
    differs = store.verify(digest, tree=copy)
    assert [(p.kind, p.path) for p in differs.problems] == [("content-changed", "skills/ce-work/SKILL.md")]
    # Damage in the store: verify lists the problem with what it affects.
    store.discard(view.path)
    objects = sorted(p for p in (store_dir / "objects").rglob("*") if p.is_file())
    objects[0].chmod(0o644)
    with objects[0].open("ab") as f:
        f.write(b"damage")
    damaged = store.verify()
    assert not damaged.ok and damaged.problems[0].snapshots == (digest,), damaged.problems
    results = {
        "ingest": snap,
        "repairing ingest": again,
        "show": info,
        "files": tuple(store.files(digest)),
        "verify --tree": differs,
        "verify": damaged,
        "stage": store.stage(["ce_review"], plugin_dir=tmp_path / "a", plugin_version="1.2.3"),
    }
    assert [p for name, r in results.items() for p in _mutable_parts(r, name)] == []


def test_store_error(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(cestore.StoreError) as info:
        cestore.Store(not_a_dir).show("ab")
    assert (info.value.code, info.value.kind) == (7, "bad-store")


def test_usage_error(tmp_path: Path, store_dir: Path) -> None:
    cestore.Store().ingest(write_release(tmp_path / "a"), "1.2.3")
    with pytest.raises(cestore.UsageError) as info:
        cestore.Store().show("zz")
    assert info.value.code == 2


def test_remote_error(store_dir: Path) -> None:
    with pytest.raises(cestore.RemoteError) as info:
        cestore.Store().run("pull", "--timeout", "5", "127.0.0.1:1/x/y:1.0")
    assert isinstance(info.value, cestore.StoreError)
    assert (info.value.code, info.value.kind) == (8, "remote")


def test_every_error_is_an_error() -> None:
    for cls in (cestore.Rejected, cestore.NotFound, cestore.Ambiguous, cestore.Conflict,
                cestore.Damaged, cestore.StoreError, cestore.RemoteError, cestore.UsageError):
        assert issubclass(cls, cestore.Error)
    assert stat.S_IMODE(0o444) == 0o444


def test_lower_bounds_reach_the_cli(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "a", extra={"assets/big.bin": b"x" * 100})
    assert store.digest(source, "1.2.3", bounds=cestore.Bounds(files=5)).file_count == 5
    with pytest.raises(cestore.Rejected) as info:
        store.digest(source, "1.2.3", bounds=cestore.Bounds(file_bytes=60))
    assert (info.value.rule, info.value.path) == ("file-too-large", str(source / "assets" / "big.bin"))
    with pytest.raises(cestore.UsageError):
        store.ingest(source, "1.2.3", bounds=cestore.Bounds(files=5000))
    assert not store_dir.exists() or store.run("list")["snapshots"] == []


def test_audit_returns_a_typed_report(tmp_path: Path, store_dir: Path) -> None:
    import gzip
    import json

    store = cestore.Store()
    a = store.ingest(write_release(tmp_path / "a", "1.0.0"), "1.0.0")
    b = store.digest(write_release(tmp_path / "b", "2.0.0"), "2.0.0")

    def row(arm: str, version: str | None, digest: str | None) -> str:
        return json.dumps({"arm": arm, "task_id": "t1", "run": 1, "ce_plugin_version": version,
                           "ce_plugin_manifest_digest": digest, "score": 0.5})

    lines = [
        row("ce_review", "1.0.0", a.manifest_digest),
        row("ce_workflow", "1.0.1", a.manifest_digest),
        row("baseline", None, None),
        row("ce_review", "2.0.0", b.manifest_digest),
        row("baseline", None, a.manifest_digest),
        "[1, 2]",
        row("ce_review", "1.0.0", "not-hex"),
    ]
    results = tmp_path / "results.jsonl.gz"
    results.write_bytes(gzip.compress("\n".join(lines).encode() + b"\n"))

    report = store.audit(results)
    assert isinstance(report, cestore.AuditReport)
    assert not report.passed and report.rows == 6 and report.malformed_count == 1
    assert report.inputs[0].format == "gzip" and report.inputs[0].file == str(results)
    assert report.inputs[0].malformed == (cestore.MalformedLine(6, "a JSON array, not an object"),)
    da = report.digest(a.manifest_digest)
    assert da.status == "version-mismatch" and da.version == "1.0.0" and da.rows == 3
    assert [(c.value, c.rows, c.first.line) for c in da.claimed_versions] == [("1.0.0", 1, 1), ("1.0.1", 1, 2)]
    assert (da.first, da.last) == (cestore.Place(str(results), 1), cestore.Place(str(results), 5))
    assert report.digest(b.manifest_digest).status == "unknown"
    assert [(p.line, p.kind, p.arm) for p in report.row_problems] == [
        (5, "arm-mismatch", "baseline"),
        (7, "malformed-digest", "ce_review"),
    ]
    assert report.verdict.startswith("FAIL: 2 digests")
    assert not report.allow_malformed
    assert report.verdict.endswith("; 1 line could not be read, so any digest in it was not audited")

    clean = tmp_path / "clean.jsonl"
    clean.write_text(lines[0] + "\n" + lines[2] + "\n")
    ok = store.audit([clean], verify=True)
    assert ok.passed and ok.verified and ok.digest(a.manifest_digest).status == "ok"

    nested = tmp_path / "nested.jsonl"
    nested.write_text(json.dumps({"arm": "ce_review", "ce_plugin": a.provenance.as_dict()}) + "\n")
    dotted = store.audit(nested, digest_field="ce_plugin.manifest_digest", version_field="ce_plugin.version")
    assert dotted.passed and dotted.fields["digest"] == "ce_plugin.manifest_digest"

    with pytest.raises(cestore.NotFound):
        store.audit(tmp_path / "missing.jsonl")


def test_audit_reads_what_json_loads_reads_and_fails_malformed_lines(tmp_path: Path, store_dir: Path) -> None:
    import json

    store = cestore.Store()
    a = store.ingest(write_release(tmp_path / "a", "1.0.0"), "1.0.0")
    unknown = "e" * 64

    def row(digest: str, **extra: object) -> dict[str, object]:
        return {"arm": "ce_review", "ce_plugin_version": "1.0.0", "ce_plugin_manifest_digest": digest, **extra}

    # Rows json.dumps writes and json.loads reads back: NaN, infinities, a lone surrogate.
    rows = [
        row(a.manifest_digest, score=float("nan")),
        row(unknown, score=float("inf"), low=float("-inf"), note="\ud800"),
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert all(isinstance(json.loads(line), dict) for line in results.read_text().splitlines())
    report = store.audit(results)
    assert not report.passed and report.rows == 2 and report.malformed_count == 0
    assert report.digest(unknown).status == "unknown"
    assert report.digest(a.manifest_digest).status == "ok"

    # A line cut short: json.loads refuses it, so its digest is not audited and the audit fails,
    # unless malformed lines are allowed.
    cut = tmp_path / "cut.jsonl"
    cut.write_text(json.dumps(rows[0]) + "\n" + json.dumps(row(unknown))[:60] + "\n")
    failed = store.audit(cut)
    assert not failed.passed and failed.malformed_count == 1 and not failed.allow_malformed
    assert failed.inputs[0].malformed[0].line == 2
    assert failed.inputs[0].malformed[0].reason.startswith("not JSON: Unterminated string starting at")
    assert failed.verdict == (
        "FAIL: 1 digest (1 ok), 0 row problems, 1 malformed line in 1 row; "
        "1 line could not be read, so any digest in it was not audited"
    )
    allowed = store.audit(cut, allow_malformed=True)
    assert allowed.passed and allowed.allow_malformed and allowed.malformed_count == 1
    assert allowed.verdict.startswith("PASS: ") and allowed.verdict.endswith("(allowed: --allow-malformed)")


def test_errors_name_keyword_arguments_not_cli_flags(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "plugin")
    with pytest.raises(cestore.Rejected) as raised:
        store.stage(["ce_reviw"], plugin_dir=source, plugin_version="1.2.3")
    assert raised.value.message.startswith("plugin_dir, plugin_version and digest require at least one ce_* arm")
    assert str(raised.value) == raised.value.message and "--" not in raised.value.message
    with pytest.raises(cestore.Rejected, match="require both plugin_dir and plugin_version"):
        store.stage(["ce_review"])
    with pytest.raises(cestore.Rejected, match="^plugin_dir, plugin_version and digest require"):
        store.hold_stage(["baseline"], plugin_dir=source, plugin_version="1.2.3", dest=tmp_path / "v")
    assert not (tmp_path / "v").exists()
    with pytest.raises(cestore.Error) as raised:
        store.ingest(source, "1.2.3", bounds=cestore.Bounds(files=10**9))
    assert "Bounds(files=...)" in raised.value.message and "--max-files" not in raised.value.message
    # The raw command keeps the CLI's words.
    with pytest.raises(cestore.Rejected, match="--plugin-dir"):
        store.run("stage", "--arm", "baseline", "--plugin-dir", str(source), "--plugin-version", "1.2.3")


def test_wrong_types_raise_type_errors_naming_the_parameter(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "plugin")
    calls = [
        ("version", lambda: store.ingest(source, 3.23)),
        ("source", lambda: store.digest(3, "1.2.3")),
        ("bounds", lambda: store.ingest(source, "1.2.3", bounds={"files": 1})),
        ("digest", lambda: store.checkout(b"ab", tmp_path / "v")),
        ("dest", lambda: store.checkout("ab", 7)),
        ("arms", lambda: store.stage("ce_review")),
        ("arms", lambda: store.stage([1])),
        ("plugin_version", lambda: store.stage(["ce_review"], plugin_dir=source, plugin_version=1.2)),
        ("gitnexus_rules", lambda: store.stage(["baseline"], gitnexus_root=tmp_path, gitnexus_rules=1)),
        ("view", lambda: store.discard(None)),
    ]
    for name, call in calls:
        with pytest.raises(TypeError) as raised:
            call()
        assert str(raised.value).startswith(f"{name} must be "), (name, raised.value)
    # Refused before any command ran: no store was made.
    assert not store_dir.exists()


def test_dir_shows_only_the_public_api() -> None:
    assert dir(cestore) == sorted([*cestore.__all__, "runtime_mounts", "task_assets"])
    assert "annotations" not in dir(cestore)
    assert cestore.runtime_mounts.bind is not None
    assert isinstance(cestore.runtime_mounts.HARNESS_ROOT, Path)
    assert cestore.task_assets.bind is not None
    with pytest.raises(AttributeError):
        cestore.no_such_name  # noqa: B018


def test_stage_takes_the_gitnexus_revision(tmp_path: Path, store_dir: Path) -> None:
    harness = tmp_path / "harness"
    runtime, shared = harness / "gitnexus", harness / "gitnexus-shared"
    for d in (runtime / "dist" / "cli", runtime / "node_modules", runtime / "vendor", runtime / "hooks" / "claude", shared / "dist"):
        d.mkdir(parents=True)
    (runtime / "dist" / "cli" / "index.js").write_text("")
    (runtime / "package.json").write_text('{"version": "9.9.9-test"}')
    (runtime / "node_modules" / "gitnexus-shared").symlink_to(shared)
    (shared / "package.json").write_text('{"name": "gitnexus-shared"}')
    store = cestore.Store()
    staged = store.stage(["baseline"], gitnexus_root=harness, gitnexus_rules="upstream")
    assert [m.target for m in staged.arms[0].mounts][0] == "/opt/gitnexus/dist"
    with pytest.raises(cestore.Rejected, match="version drifted: expected 1.6.9"):
        store.stage(["baseline"], gitnexus_root=harness)
    with pytest.raises(cestore.UsageError, match="gitnexus_rules"):
        store.stage(["baseline"], gitnexus_root=harness, gitnexus_rules="latest")


def _pem_key() -> bytes:
    # Built at run time, so that no private-key header stands whole in the sources.
    dashes = "-" * 5
    body = "".join(chr(ord("A") + i % 26) for i in range(64 * 4))
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"{dashes}BEGIN RSA PRIVATE KEY{dashes}", *lines, f"{dashes}END RSA PRIVATE KEY{dashes}", ""]).encode()


def test_a_kept_file_whose_content_is_a_key_is_listed_and_refused_when_asked(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "a", extra={"skills/x/id_rsa": _pem_key()})
    snap = store.ingest(source, "1.2.3")
    assert snap.ingest.secrets_by_content == (cestore.SecretFound("skills/x/id_rsa", "private-key", 1),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.ingest.secrets_by_content[0].kind = "x"  # type: ignore[misc]
    # The digest is the reference's: the scan only reads.
    assert store.digest(source, "1.2.3").manifest_digest == snap.manifest_digest
    other = write_release(tmp_path / "b", version="1.2.4", extra={"skills/x/id_rsa": _pem_key()})
    with pytest.raises(cestore.Rejected) as info:
        store.ingest(other, "1.2.4", refuse_secrets=True)
    assert (info.value.code, info.value.rule) == (3, "secret-content")
    with pytest.raises(cestore.NotFound):
        store.show("@1.2.4")
    with pytest.raises(cestore.Rejected) as info:
        store.stage(["ce_review"], plugin_dir=other, plugin_version="1.2.4", refuse_secrets=True)
    assert info.value.rule == "secret-content"
    with pytest.raises(TypeError):
        store.ingest(source, "1.2.3", refuse_secrets="yes")  # type: ignore[arg-type]
