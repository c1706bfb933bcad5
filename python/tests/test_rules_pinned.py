"""The binary's decisions (`cestore rules`), the drop-in's constants and the seed's, pinned together.

The drop-in keeps the reference's constants as module attributes (a harness's
tests read and monkeypatch them); the decisions behind them (the exact-version
rule, the bounds, the CE arms, the flag behind each keyword) it reads from the
binary, and the GitNexus runtime it has the binary check. Each literal is
checked here against the binary's answer, and that answer against the values
committed here and, when `../shared/reference` is present, against the seed's
module itself; each rule the binary prints is checked against what the binary
does, on the cases where a drift would show.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

import cestore
import cestore.runtime_mounts as rm
from cestore import _contract
from conftest import REFERENCE, bound_harness, write_release
from test_upstream_contract import install_runtime


def cli(*args: str) -> tuple[int, dict[str, Any]]:
    """Runs the binary with `--json`; its exit code and its one JSON object."""
    done = subprocess.run(
        [str(cestore.find_binary()), "--json", *args], capture_output=True, text=True, timeout=60
    )
    return done.returncode, json.loads(done.stdout)


# The flag each of the drop-in's bounds is passed to the binary as.
BOUND_FLAGS = {
    "files": "--max-files",
    "file_bytes": "--max-file-bytes",
    "total_bytes": "--max-total-bytes",
    "path_bytes": "--max-path-bytes",
}


# The seed's constants, committed: the binary's answer and the drop-in's
# literals must be these, with or without ../shared/reference beside the checkout.
SEED = {
    "CE_ARMS": frozenset({"ce_workflow", "ce_workflow_direct", "ce_review"}),
    "SANDBOX_CE_PLUGIN": "/opt/compound-engineering-plugin",
    "CE_PLUGIN_MANIFEST_SCHEMA_VERSION": 1,
    "MAX_CE_PLUGIN_FILES": 2_048,
    "MAX_CE_PLUGIN_FILE_BYTES": 2 * 1024 * 1024,
    "MAX_CE_PLUGIN_TOTAL_BYTES": 16 * 1024 * 1024,
    "MAX_CE_PLUGIN_PATH_BYTES": 1_024,
    "PINNED_GITNEXUS_VERSION": "1.6.9",
    "_EXACT_VERSION": (
        r"(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)"
        r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
        r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
    ),
}


def binary_answer() -> dict[str, object]:
    """The binary's answer, under the seed's names."""
    rules = _contract.rules()
    answer: dict[str, object] = {
        "CE_ARMS": frozenset(rules["ce_arms"]),
        "SANDBOX_CE_PLUGIN": rules["plugin"]["sandbox_dir"],
        "CE_PLUGIN_MANIFEST_SCHEMA_VERSION": rules["plugin"]["manifest_schema_version"],
        "PINNED_GITNEXUS_VERSION": rules["gitnexus"]["pinned_version"],
        "_EXACT_VERSION": rules["exact_version"]["pattern"],
    }
    answer.update({b["constant"]: b["limit"] for b in rules["bounds"]})
    return answer


def test_the_binarys_answer_is_the_committed_seeds() -> None:
    assert binary_answer() == SEED


def test_the_drop_ins_literals_are_the_binarys() -> None:
    """The constants a harness imports without running the binary are the ones the binary decides by."""
    answer = binary_answer()
    for name, value in answer.items():
        if name.startswith("_"):
            continue
        assert getattr(rm, name) == value, name
    rules = _contract.rules()
    assert (rm.SANDBOX_GITNEXUS, rm.SANDBOX_GITNEXUS_SHARED) == (
        rules["gitnexus"]["sandbox_gitnexus"],
        rules["gitnexus"]["sandbox_gitnexus_shared"],
    )
    assert list(rm.REVISIONS) == rules["gitnexus"]["revisions"]
    assert rules["plugin"]["required_skills"] == ["ce-plan", "ce-work", "ce-code-review"]


def test_the_seeds_module_is_the_committed_seed() -> None:
    """The seed's own module (../shared/reference) still has the committed values."""
    if not (REFERENCE / "runtime_mounts.py").is_file():
        pytest.skip(f"the reference is absent: {REFERENCE} (set CESTORE_SHARED)")
    sys.path.insert(0, str(REFERENCE.parent))
    try:
        seed = importlib.import_module(f"{REFERENCE.name}.runtime_mounts")
    finally:
        sys.path.remove(str(REFERENCE.parent))
    for name, value in SEED.items():
        got = getattr(seed, name)
        assert (got.pattern if name == "_EXACT_VERSION" else got) == value, name


@pytest.mark.parametrize("name", sorted(k for k in SEED if k.startswith("MAX_")))
def test_each_bound_is_the_binarys_default(name: str, tmp_path: Path) -> None:
    """The binary takes its bound as the highest value of its flag, and refuses one more."""
    field, default = _contract.bounds()[name]
    assert getattr(rm, name) == default
    release = write_release(tmp_path / "release")
    flag = BOUND_FLAGS[field]
    assert {b["field"]: b["flag"] for b in _contract.rules()["bounds"]} == BOUND_FLAGS
    code, out = cli("digest", str(release), "--version=1.2.3", f"{flag}={default}")
    assert (code, out["ok"]) == (0, True), out
    code, out = cli("digest", str(release), "--version=1.2.3", f"{flag}={default + 1}")
    assert (code, out["error"]["kind"]) == (2, "usage"), out
    assert f"{default + 1} is not in 0..={default}" in out["error"]["message"]


ARMS = sorted(rm.CE_ARMS | {
    "baseline", "ce", "ce_", "ce_workflow_", "ce_workflow_direct_", "CE_REVIEW", "ce_review ",
    " ce_review", "ce_plan", "ce-review", "review", "",
})


@pytest.mark.parametrize("arm", ARMS)
def test_the_ce_arms_are_the_binarys(arm: str, tmp_path: Path, store_dir: Path) -> None:
    """An arm gets the plugin at SANDBOX_CE_PLUGIN from the binary exactly when the drop-in calls it a CE arm."""
    view = tmp_path / "view"
    view.mkdir()
    code, out = cli("mounts", f"--arm={arm}", f"--view={view}", "--unchecked")
    assert (code, out["ok"]) == (0, True), out
    if arm in rm.CE_ARMS:
        assert out["plugin_dir"] == rm.SANDBOX_CE_PLUGIN
        assert out["mounts"] == [{"source": str(view), "target": rm.SANDBOX_CE_PLUGIN, "read_only": True}]
    else:
        assert (out["plugin_dir"], out["mounts"]) == (None, [])
    assert set(_contract.ce_arms()) == rm.CE_ARMS


VERSIONS = [
    "0.0.0", "1.2.3", "10.20.30", "1.2.3-rc.1", "1.2.3-0", "1.2.3-01", "1.2.3-a-b.c", "1.2.3+build.5",
    "1.2.3-rc.1+build.5", "1.2.3+001", "99999999999999999999.0.0",
    "01.2.3", "1.02.3", "1.2.03", "1.2", "1", "v1.2.3", "=1.2.3", "^1.2.3", "~1.2.3", "1.2.x", "*",
    "latest", "1.2.3-", "1.2.3+", "1.2.3-rc..1", "1.2.3-rc_1", "1.2.3-é", "1.2.3 ", " 1.2.3",
    "1.2.3\n", "1.2.3.4", "", "-1.2.3",
]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_exact_version_rule_is_the_binarys(version: str, tmp_path: Path) -> None:
    """A version is exact by the pattern the binary prints exactly when the binary takes it."""
    release = tmp_path / "release"
    (release / ".claude-plugin").mkdir(parents=True)
    for skill in ("ce-plan", "ce-work", "ce-code-review"):
        (release / "skills" / skill).mkdir(parents=True)
        (release / "skills" / skill / "SKILL.md").write_text(f"# {skill}\n")
    (release / ".claude-plugin" / "plugin.json").write_text(
        json.dumps({"name": "compound-engineering", "version": version})
    )
    code, out = cli("digest", str(release), f"--version={version}")
    exact = _contract.exact_version().fullmatch(version) is not None
    if exact:
        assert (code, out["ok"]) == (0, True), out
    else:
        assert (code, out["error"].get("rule")) == (3, "version-not-exact"), out


# The seed's GitNexus runtime, broken one way at a time.
def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        for child in sorted(path.rglob("*"), reverse=True):
            child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
        path.rmdir()
    else:
        path.unlink()


def _to_file(path: Path) -> None:
    _remove(path)
    path.write_text("")


def _to_dir(path: Path) -> None:
    _remove(path)
    path.mkdir()


def _to_symlink(path: Path) -> None:
    moved = path.with_name(path.name + ".real")
    path.rename(moved)
    path.symlink_to(moved)


BREAKS: dict[str, Callable[[Path], None]] = {
    "whole": lambda root: None,
    "no runtime": lambda root: _remove(root / "gitnexus"),
    "runtime a file": lambda root: _to_file(root / "gitnexus"),
    "runtime a symlink": lambda root: _to_symlink(root / "gitnexus"),
    "no shared": lambda root: _remove(root / "gitnexus-shared"),
    "shared a symlink": lambda root: _to_symlink(root / "gitnexus-shared"),
    "no dist": lambda root: _remove(root / "gitnexus" / "dist"),
    "dist a file": lambda root: _to_file(root / "gitnexus" / "dist"),
    "package.json a directory": lambda root: _to_dir(root / "gitnexus" / "package.json"),
    "package.json a symlink": lambda root: _to_symlink(root / "gitnexus" / "package.json"),
    "no node_modules": lambda root: _remove(root / "gitnexus" / "node_modules"),
    "node_modules a symlink": lambda root: _to_symlink(root / "gitnexus" / "node_modules"),
    "no vendor": lambda root: _remove(root / "gitnexus" / "vendor"),
    "no shared dist": lambda root: _remove(root / "gitnexus-shared" / "dist"),
    "shared package.json a directory": lambda root: _to_dir(root / "gitnexus-shared" / "package.json"),
    "no claude hooks": lambda root: _remove(root / "gitnexus" / "hooks" / "claude"),
    "claude hooks a file": lambda root: _to_file(root / "gitnexus" / "hooks" / "claude"),
    "no entrypoint": lambda root: _remove(root / "gitnexus" / "dist" / "cli" / "index.js"),
    "entrypoint a symlink": lambda root: _to_symlink(root / "gitnexus" / "dist" / "cli" / "index.js"),
    "entrypoint a directory": lambda root: _to_dir(root / "gitnexus" / "dist" / "cli" / "index.js"),
    "package.json not JSON": lambda root: (root / "gitnexus" / "package.json").write_text("{"),
    "version drifted": lambda root: (root / "gitnexus" / "package.json").write_text('{"version": "1.7.0"}'),
    "version a number": lambda root: (root / "gitnexus" / "package.json").write_text('{"version": 1.6}'),
    "no version": lambda root: (root / "gitnexus" / "package.json").write_text("{}"),
    "no shared link": lambda root: _remove(root / "gitnexus" / "node_modules" / "gitnexus-shared"),
    "shared link a directory": lambda root: _to_dir(root / "gitnexus" / "node_modules" / "gitnexus-shared"),
    "shared link elsewhere": lambda root: (
        _remove(root / "gitnexus" / "node_modules" / "gitnexus-shared"),
        (root / "gitnexus" / "node_modules" / "gitnexus-shared").symlink_to(root / "gitnexus" / "vendor"),
    ),
    "shared package.json not JSON": lambda root: (root / "gitnexus-shared" / "package.json").write_text("["),
    "shared package renamed": lambda root: (root / "gitnexus-shared" / "package.json").write_text('{"name": "other"}'),
}

# Messages that end in what the system or the JSON parser said, which each
# language words its own way: compared up to that detail. Where the seed says
# no more, the binary may add what it found.
DETAILED = (
    "pinned GitNexus runtime is unavailable: ",
    "pinned GitNexus shared runtime is unavailable: ",
    "pinned GitNexus runtime component is unavailable: ",
    "pinned GitNexus runtime metadata is invalid: ",
    "pinned GitNexus shared runtime metadata is invalid: ",
)


def _comparable(message: str) -> str:
    for prefix in DETAILED:
        if message.startswith(prefix):
            rest = message[len(prefix):]
            # "PATH: detail" keeps PATH; a bare "detail" keeps nothing.
            path = rest.split(": ")[0] if rest.startswith("/") else ""
            return prefix + path
    return message


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_the_seeds_gitnexus_check_is_the_binarys(case: str, tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drop-in's seed-revision check accepts, mounts and refuses as `cestore mounts --gitnexus-rules seed` does."""
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, rm.PINNED_GITNEXUS_VERSION)
    BREAKS[case](root)
    harness = bound_harness(tmp_path, "seed")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    try:
        python: Any = [(str(m.source), m.target) for m in harness.trusted_gitnexus_runtime_mounts()]
    except harness.SandboxError as exc:
        python = _comparable(str(exc))
    code, out = cli("mounts", "--arm=baseline", f"--gitnexus-root={root}", "--gitnexus-rules=seed")
    if out["ok"]:
        binary: Any = [(m["source"], m["target"]) for m in out["mounts"]]
    else:
        assert code == 3, out
        binary = _comparable(out["error"]["message"])
    assert (case == "whole") == isinstance(python, list)
    if isinstance(python, list):
        assert python == binary
    else:
        # The binary may name what it found after the seed's words.
        assert isinstance(binary, str), binary
        assert binary == python or binary.startswith(python.rstrip(": ") + ": "), (python, binary)


def _rules_named_by(function: str) -> set[str]:
    """The rule ids a function of the drop-in compares `rule` with, or keys a table by."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(rm))
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    named: set[str] = set()

    def strings(node: ast.AST) -> set[str]:
        return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}

    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "rule":
            for comparator in node.comparators:
                named |= strings(comparator)
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if key is not None:
                    named |= strings(key)
    return named


@pytest.mark.parametrize("function", ["_reference_error", "_gitnexus_error"])
def test_each_rule_the_drop_in_names_is_the_binarys(function: str) -> None:
    """The drop-in turns a rule into the harness's exception by its id: each id it names is one the binary prints."""
    named = _rules_named_by(function)
    assert named, function
    listed = {r["rule"] for r in _contract.rules()["rules"]}
    assert named <= listed, named - listed


def test_the_drop_in_asks_the_binary(tmp_path: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The drop-in's version rule and flag keywords are the binary's answer, not a copy of it:
    a binary that answers otherwise changes them."""
    answer = json.loads(json.dumps(_contract.rules()))
    answer["exact_version"]["pattern"] = r"7\.7\.7"
    answer["flags"] = [
        dict(f, keyword="the_plugin_dir") if f["flag"] == "--plugin-dir" else f for f in answer["flags"]
    ]
    (tmp_path / "rules.json").write_text(json.dumps(answer))
    wrapper = tmp_path / "cestore"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = rules ]; then cat {tmp_path / "rules.json"}; exit 0; fi\n'
        f'exec {cestore.find_binary()} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CESTORE_BIN", str(wrapper))
    release = write_release(tmp_path / "release")
    with pytest.raises(ValueError, match="exact semantic version"):
        rm.validate_ce_plugin_inputs(["ce_review"], release, "1.2.3")
    assert rm.validate_ce_plugin_inputs(["ce_review"], release, "7.7.7") is not None
    with pytest.raises(cestore.Rejected) as refused:
        cestore.Store().stage(["baseline"], plugin_dir=release, plugin_version="1.2.3")
    assert refused.value.rule == "plugin-inputs-without-ce-arm"
    assert refused.value.message.startswith("the_plugin_dir, plugin_version and digest require"), refused.value
