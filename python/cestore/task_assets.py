"""A drop-in for the benchmark harness's `task_assets` module, backed by cestore.

It has the harness module's public names (`TaskAssetCache`,
`TaskAssetSnapshot`, `AssetManifestEntry`, `DependencySnapshot`,
`capture_task_dependency_binding`, `stage_task_assets` and the constants)
and its behaviour: the same digests, entries and totals, the same
exception and message for every rejection, the same materialized clone and
dependency mounts. The difference: the bytes are captured into a cestore
store, not copied into a private directory.

- `TaskAssetCache.prepare` runs one `cestore ingest --profile task`, which
  reads the task's declarations, walks and hashes the `sandbox_copy` paths
  and the dependencies, and records three manifests (the copied tree, the
  dependency list, the task) whose digests are the harness's
  `manifest_digest`, `dependency_manifest_digest` and `digest`. A file the
  store already holds is read and hashed, not written again: a second
  prepare of the same bytes, in this process or any other, writes no object.
  The snapshot's `root` is the store's shared read-only view of the task
  (`cestore path`): `sandbox-copy/...` and `dependencies/<index>/payload`,
  as the harness's frozen root.
- `TaskAssetSnapshot.materialize` runs `cestore materialize`: writable copies
  (reflinked where the filesystem can, else copied within
  `MAX_BUFFERED_FALLBACK_BYTES`) replace each declared root in the clone.
- `TaskAssetSnapshot.dependency_mounts` mounts each dependency from the
  store's shared view of the dependency list and prepares its mount point
  with the harness's own `_prepare_clone_target`.
- `TaskAssetCache.close` removes the cache's directory, which holds only this
  process's scratch files. The store keeps the objects and the records, so
  `cestore show DIGEST` can later say which bytes a digest in a results file
  stood for; the shared views stay, as every shared view does, until `cestore
  gc`.

Used as it is, the module has its own `real_directory` and
`_prepare_clone_target`, and cestore's `SandboxError` and `ReadOnlyMount`
(those `runtime_mounts` has). A harness binds it into its
own module with `bind(globals(), ...)`, which fills that namespace with
these names built on the harness's own (its `proposer_sandbox`). Every
function reads the constants (`MAX_TASK_ASSET_*`,
`MAX_BUFFERED_FALLBACK_BYTES`, `SANDBOX_WORKSPACE`, `CESTORE_STORE`) from
that namespace when it is called, so a test may monkeypatch them; bounds
below the store's are passed to the binary as `--max-entries`,
`--max-path-bytes`, `--max-bytes` and `--max-fallback-bytes`.

Python asks, the binary decides: which declaration is malformed, which
entry breaks a rule, and the harness's words for it come from the JSON
error (`rule`, `message`); this module only raises them as the harness's
`SandboxError`.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Optional, Union

from . import _errors
from ._sandbox import ReadOnlyMount, SandboxError, environment_recorder, namespace_store, note_staged
from ._store import Store

# The harness's constants, kept as literals: a harness imports them, `bind`
# copies them into its namespace and its tests monkeypatch them, all
# without any process. The binary's defaults are the same values.
MAX_TASK_ASSET_ENTRIES = 100_000
MAX_TASK_ASSET_PATH_BYTES = 4_096
MAX_TASK_ASSET_BYTES = 2 * 1024 * 1024 * 1024
MAX_BUFFERED_FALLBACK_BYTES = MAX_TASK_ASSET_BYTES
COPY_CHUNK_BYTES = 1024 * 1024
FICLONE = 0x40049409
DEPENDENCY_CONTENT_BINDING_FIELD = "sandbox_dependency_content_digest"
DEPENDENCY_MANIFEST_BINDING_FIELD = "sandbox_dependency_manifest_digest"
HARNESS_SANDBOX_COPY_PREFIXES = (PurePosixPath("eval/workflow_bench/review_cases"),)

# What the store captures with: the mount basename that gets a vite temp
# directory, and that directory's name (the harness's proposer_sandbox values).
SANDBOX_WORKSPACE = "/workspace"
DEPENDENCY_MOUNT_BASENAME = "node_modules"
VITE_TEMP_DIR = ".vite-temp"

# Each bound constant, the binary's flag for it and the binary's ceiling.
_CAPTURE_BOUNDS = (
    ("MAX_TASK_ASSET_ENTRIES", "--max-entries", MAX_TASK_ASSET_ENTRIES),
    ("MAX_TASK_ASSET_PATH_BYTES", "--max-path-bytes", MAX_TASK_ASSET_PATH_BYTES),
    ("MAX_TASK_ASSET_BYTES", "--max-bytes", MAX_TASK_ASSET_BYTES),
)
_FALLBACK_BOUND = ("MAX_BUFFERED_FALLBACK_BYTES", "--max-fallback-bytes", MAX_BUFFERED_FALLBACK_BYTES)

# The rules of a task's declarations (the binary's `profile::tree::declare`):
# a rejection by one of them means the declarations are malformed.
_DECLARATION_RULE_PREFIXES = ("task-copy-", "task-dependencies-", "task-dependency-")
_DECLARATION_RULES = frozenset({"task-asset-path-bytes"})

# The binary's refusals by a rule (exit 3, and exit 4 for what is not there): the harness's SandboxError.
_REFUSED = (_errors.Rejected, _errors.NotFound)

# A system error the harness leaves unwrapped, as the binary prints it: `[Errno N] text: 'name'`.
_OS_ERROR = re.compile(r"\[Errno (\d+)\] (.*?)(?:: (['\"])(.*)\3)?")

_PUBLIC = (
    "MAX_TASK_ASSET_ENTRIES",
    "MAX_TASK_ASSET_PATH_BYTES",
    "MAX_TASK_ASSET_BYTES",
    "MAX_BUFFERED_FALLBACK_BYTES",
    "COPY_CHUNK_BYTES",
    "FICLONE",
    "DEPENDENCY_CONTENT_BINDING_FIELD",
    "DEPENDENCY_MANIFEST_BINDING_FIELD",
    "HARNESS_SANDBOX_COPY_PREFIXES",
    "SANDBOX_WORKSPACE",
    "DEPENDENCY_MOUNT_BASENAME",
    "VITE_TEMP_DIR",
    "CESTORE_STORE",
    "SandboxError",
    "ReadOnlyMount",
    "real_directory",
    "_prepare_clone_target",
    "AssetManifestEntry",
    "DependencySnapshot",
    "TaskAssetSnapshot",
    "TaskAssetCache",
    "capture_task_dependency_binding",
    "stage_task_assets",
    "record_environment",
)


@dataclass(frozen=True)
class AssetManifestEntry:
    """One entry of a captured tree, as the harness records it."""

    path: PurePosixPath
    kind: str
    size: int = 0
    sha256: str = ""
    mode: int = 0
    link_target: str = ""


@dataclass(frozen=True)
class DependencySnapshot:
    """One declared dependency captured below the snapshot root."""

    source: str
    target: str
    snapshot_path: PurePosixPath
    kind: str
    entries: tuple[AssetManifestEntry, ...]
    total_bytes: int


def real_directory(path: Path, *, label: str) -> Path:
    """`path` made absolute, when it is a directory reached through no symlink; `SandboxError` otherwise."""
    lexical = Path(path).expanduser().absolute()
    try:
        mode = lexical.lstat().st_mode
        resolved = lexical.resolve(strict=True)
    except OSError as exc:
        raise SandboxError(f"{label} must be a real directory: {lexical}: {exc}") from exc
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise SandboxError(f"{label} must be a real directory: {lexical}")
    if resolved != lexical:
        raise SandboxError(f"{label} must not traverse symlinks: {lexical}")
    return lexical


def _prepare_clone_target(clone: Path, relative: PurePosixPath, *, directory: Optional[bool], label: str) -> Path:
    """Makes the mount point `relative` in `clone` (its parents as directories), following no symlink.

    `directory` says what the leaf must be: True a directory, False a regular
    file (made empty when absent), None either, when it exists.
    """
    opened = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    here = os.open(clone, opened)
    try:
        *parents, leaf = relative.parts
        for part in parents:
            try:
                os.mkdir(part, 0o700, dir_fd=here)
            except FileExistsError:
                pass
            try:
                below = os.open(part, opened, dir_fd=here)
            except OSError as exc:
                raise SandboxError(f"{label} target has a non-directory or symlink parent: {relative}") from exc
            os.close(here)
            here = below
        try:
            mode: Optional[int] = os.stat(leaf, dir_fd=here, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and stat.S_ISLNK(mode):
            raise SandboxError(f"{label} target cannot be a symlink: {relative}")
        if directory is True and mode is None:
            os.mkdir(leaf, 0o700, dir_fd=here)
        elif directory is True and not stat.S_ISDIR(mode or 0):
            raise SandboxError(f"{label} directory target has the wrong type: {relative}")
        elif directory is False and mode is None:
            made = os.open(leaf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=here)
            os.close(made)
        elif directory is False and not stat.S_ISREG(mode or 0):
            raise SandboxError(f"{label} file target has the wrong type: {relative}")
        elif directory is None and mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            raise SandboxError(f"{label} target has the wrong type: {relative}")
    finally:
        os.close(here)
    return clone / Path(*relative.parts)


def _plain(value: Any) -> Any:
    """`value` as JSON the binary reads with the harness's checks giving the same answer.

    Lists, mappings, strings, numbers, booleans and None keep their type. A
    value of any other type (a tuple, a set, an object) fails every check
    the harness makes of a declaration (a list, a mapping, a nonblank
    string), and so does JSON null: it becomes null. A mapping's key that is
    not a string becomes one no declaration can hold.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {(key if isinstance(key, str) else f"\0{key!r}"): _plain(item) for key, item in value.items()}
    return None


def _declarations_of(task: Mapping[str, Any]) -> dict[str, Any]:
    """The part of `task` the capture reads: its `sandbox_copy` and `sandbox_dependencies`, where present."""
    return {key: _plain(task[key]) for key in ("sandbox_copy", "sandbox_dependencies") if key in task}


def _entry(row: Mapping[str, Any]) -> AssetManifestEntry:
    return AssetManifestEntry(
        path=PurePosixPath(row["path"]),
        kind=row["kind"],
        size=int(row.get("size") or 0),
        sha256=row.get("sha256") or "",
        mode=int(row.get("mode") or 0),
        link_target=row.get("link_target") or "",
    )


def _dependency(row: Mapping[str, Any]) -> DependencySnapshot:
    return DependencySnapshot(
        source=row["source"],
        target=row["target"],
        snapshot_path=PurePosixPath(row["snapshot_path"]),
        kind=row["kind"],
        entries=tuple(_entry(e) for e in row["entries"]),
        total_bytes=int(row["total_bytes"]),
    )


def _is_declaration_rule(rule: Optional[str]) -> bool:
    return rule is not None and (rule.startswith(_DECLARATION_RULE_PREFIXES) or rule in _DECLARATION_RULES)


def _populate(ns: MutableMapping[str, Any]) -> None:
    """Defines the public functions and classes in `ns`, reading its constants at call time."""

    def err(message: str) -> BaseException:
        return ns["SandboxError"](message)

    store = namespace_store(ns)
    ns["record_environment"] = environment_recorder(store)

    def lowered(bounds: tuple[tuple[str, str, int], ...]) -> dict[str, int]:
        """The namespace's bounds that are below the binary's, by their flags."""
        flags = {}
        for name, flag, ceiling in bounds:
            value = int(ns[name])
            if value < ceiling:
                flags[flag] = max(value, 0)
        return flags

    def flag_args(flags: Mapping[str, int]) -> list[str]:
        return [f"{flag}={value}" for flag, value in flags.items()]

    def harness_root() -> Path:
        root = ns["CESTORE_HARNESS_ROOT"]
        return Path(root() if callable(root) else root).expanduser().absolute()

    def harness_error(exc: _errors.Error) -> BaseException:
        """The harness's exception for one refusal of the binary: its `SandboxError` with its words."""
        message = exc.reference_message or exc.message
        if exc.rule == "task-asset-io":
            # A system call the harness does not wrap: it raises the OSError itself.
            found = _OS_ERROR.fullmatch(message)
            if found is not None:
                errno_, text, _, name = found.groups()
                return OSError(int(errno_), text, *([name] if name is not None else []))
        if exc.rule == "task-asset-real-directory" and exc.path == str(harness_root()):
            # The harness checks its root with its own function: its exception, in its words.
            try:
                ns["real_directory"](harness_root(), label="harness sandbox_copy root")
            except BaseException as own:  # noqa: BLE001 - the harness's exception, whatever it is
                return own
        return err(message)

    def run_ingest(
        declarations: Mapping[str, Any],
        repo: Path,
        resolved_sha: str,
        *,
        scratch: Path,
        binding: Optional[Mapping[str, Any]] = None,
        bounds: Optional[Mapping[str, int]] = None,
    ) -> dict[str, Any]:
        """`cestore ingest --profile task` of `declarations` in `repo`: its JSON report, or its error raised.

        `bounds` replace the namespace's (by flag).
        """
        work = Path(tempfile.mkdtemp(prefix=".task-", dir=scratch))
        try:
            task_file = work / "task.json"
            task_file.write_text(json.dumps(declarations), encoding="utf-8")
            args = [
                "ingest",
                "--profile=task",
                f"--task={task_file}",
                f"--resolved-sha={resolved_sha}",
                f"--harness-root={harness_root()}",
                *flag_args({**lowered(_CAPTURE_BOUNDS), **(bounds or {})}),
            ]
            if binding is not None:
                binding_file = work / "binding.json"
                fields = (DEPENDENCY_CONTENT_BINDING_FIELD, DEPENDENCY_MANIFEST_BINDING_FIELD)
                binding_file.write_text(json.dumps({f: _plain(binding.get(f)) for f in fields}), encoding="utf-8")
                args.append(f"--expect-binding={binding_file}")
            return store().run(*args, "--", os.fspath(repo))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def declaration_error(declarations: Mapping[str, Any], repo: Path) -> Optional[BaseException]:
        """The harness's exception when `declarations` are malformed, else None.

        The binary reads the declarations before it walks anything; with no
        entry allowed, the walk that follows stops at its first entry, so
        nothing is recorded. Only a refusal by a declaration rule counts.
        """
        with tempfile.TemporaryDirectory(prefix="cestore-task-check-") as scratch:
            try:
                run_ingest(declarations, repo, "unbound", scratch=Path(scratch), bounds={"--max-entries": 0})
            except _REFUSED as exc:
                return harness_error(exc) if _is_declaration_rule(exc.rule) else None
            except _errors.Error:
                return None
        return None

    @dataclass(frozen=True)
    class TaskAssetSnapshot:
        """A frozen task-asset tree and its provenance identity."""

        root: Path
        digest: str
        manifest_digest: str
        repo_identity: Path
        resolved_sha: str
        declarations: tuple[str, ...]
        entries: tuple[AssetManifestEntry, ...]
        dependency_declarations: tuple[tuple[str, str], ...]
        dependencies: tuple[DependencySnapshot, ...]
        dependency_content_digest: str
        dependency_manifest_digest: str
        total_bytes: int

        @property
        def dependency_binding(self) -> dict[str, str]:
            """The fields a task binding stores and is checked against."""
            return {
                DEPENDENCY_CONTENT_BINDING_FIELD: self.dependency_content_digest,
                DEPENDENCY_MANIFEST_BINDING_FIELD: self.dependency_manifest_digest,
            }

        def validate_dependency_binding(self, binding: Mapping[str, Any]) -> None:
            """Raises unless `binding` names exactly this snapshot's dependencies."""
            expected = self.dependency_binding
            if {field: binding.get(field) for field in expected} != expected:
                raise err("sandbox dependency content changed after task binding")

        def materialize(self, clone: Path) -> dict[str, Any]:
            """Replaces every declared `sandbox_copy` root in `clone` with its snapshot tree.

            Returns `cestore materialize`'s report: `reflinked` and `copied`
            (files) and `bytes_copied` (the buffered fallback's bytes).
            """
            clone = ns["real_directory"](clone, label="asset-staging clone")
            args = ["materialize", *flag_args(lowered((_FALLBACK_BOUND,))), "--", self.digest, os.fspath(clone)]
            try:
                return store().run(*args)
            except _REFUSED as exc:
                if exc.rule is None:
                    raise
                raise harness_error(exc) from None

        def dependency_mounts(self, clone: Path) -> list[Any]:
            """Mounts each captured dependency, read-only, at its target in the clone."""
            clone = ns["real_directory"](clone, label="dependency clone")
            if not self.dependencies:
                return []
            view = store().path(self.dependency_manifest_digest)
            mounts = []
            for dependency in self.dependencies:
                # `dependencies/<index>/payload` in the task's view is `<index>/payload` in the list's.
                source = view.joinpath(*dependency.snapshot_path.parts[1:])
                mode = source.lstat().st_mode
                directory = dependency.kind == "directory"
                if stat.S_ISLNK(mode) or not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
                    raise err(f"dependency snapshot changed: {dependency.source}")
                target = PurePosixPath(dependency.target)
                ns["_prepare_clone_target"](clone, target, directory=directory, label="dependency")
                mounts.append(ns["ReadOnlyMount"](source=source, target=f"{ns['SANDBOX_WORKSPACE']}/{target.as_posix()}"))
            return mounts

    class TaskAssetCache:
        """The snapshots one benchmark invocation prepares, captured into the store.

        `root` must not exist; it is made and holds only scratch files while
        a command runs. `last_ingest` is the JSON report of the last
        `cestore ingest` this cache ran (`new_objects`, `reused_objects`,
        `bytes_written`, ...), None before the first.
        """

        def __init__(self, root: Path):
            self.root = Path(root).expanduser().absolute()
            self.root.mkdir(mode=0o700, parents=True, exist_ok=False)
            self._by_definition: dict[tuple[str, str, str, str], Any] = {}
            self._by_digest: dict[str, Any] = {}
            self._closed = False
            self.last_ingest: Optional[dict[str, Any]] = None

        def __enter__(self) -> TaskAssetCache:
            return self

        def __exit__(self, _exc_type: object, _exc: object, _traceback: object) -> None:
            self.close()

        def prepare(
            self,
            task: Mapping[str, Any],
            *,
            repo: Path,
            resolved_sha: str,
            expected_dependency_binding: Optional[Mapping[str, Any]] = None,
        ) -> Any:
            """Captures (or reuses) the task's copied and mounted bytes as one snapshot."""
            if self._closed:
                raise err("task asset cache is already closed")
            repo_identity = ns["real_directory"](repo, label="task asset repository")
            declarations = _declarations_of(task)
            definition = (
                str(repo_identity),
                resolved_sha,
                json.dumps(declarations, sort_keys=True),
                str(harness_root()),
            )
            existing = self._by_definition.get(definition)
            if existing is not None:
                if expected_dependency_binding is not None:
                    existing.validate_dependency_binding(expected_dependency_binding)
                return existing
            try:
                out = run_ingest(
                    declarations,
                    repo_identity,
                    resolved_sha,
                    scratch=self.root,
                    binding=expected_dependency_binding,
                )
            except _REFUSED as exc:
                if exc.rule is None:
                    raise
                raise harness_error(exc) from None
            self.last_ingest = out
            digest = out["digest"]
            note_staged(store(), "task_asset_snapshot_digest", digest)
            snapshot = self._by_digest.get(digest)
            if snapshot is None:
                snapshot = ns["TaskAssetSnapshot"](
                    root=store().path(digest),
                    digest=digest,
                    manifest_digest=out["manifest_digest"],
                    repo_identity=Path(out["repo_identity"]),
                    resolved_sha=out["resolved_sha"],
                    declarations=tuple(out["declarations"]),
                    entries=tuple(_entry(e) for e in out["entries"]),
                    dependency_declarations=tuple((s, t) for s, t in out["dependency_declarations"]),
                    dependencies=tuple(_dependency(d) for d in out["dependencies"]),
                    dependency_content_digest=out["dependency_content_digest"],
                    dependency_manifest_digest=out["dependency_manifest_digest"],
                    total_bytes=int(out["total_bytes"]),
                )
                self._by_digest[digest] = snapshot
            self._by_definition[definition] = snapshot
            return snapshot

        def close(self) -> None:
            """Removes the cache's directory; the store keeps its objects and records."""
            if self._closed:
                return
            self._closed = True
            if os.path.lexists(self.root):
                shutil.rmtree(self.root)

    def capture_task_dependency_binding(
        task: Mapping[str, Any],
        *,
        repo: Path,
        resolved_sha: str,
    ) -> dict[str, str]:
        """Captures the task's dependencies for their binding (the two dependency digests)."""
        dependency_task = {"sandbox_copy": [], "sandbox_dependencies": task.get("sandbox_dependencies", [])}
        with tempfile.TemporaryDirectory(prefix="wfbench-dependency-binding-") as temporary:
            with ns["TaskAssetCache"](Path(temporary) / "cache") as cache:
                return cache.prepare(dependency_task, repo=repo, resolved_sha=resolved_sha).dependency_binding

    def copy_pairs(raw: Any) -> Optional[tuple[str, ...]]:
        """`raw`'s strings when it is a list of strings, else None (no check of the paths)."""
        if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return tuple(raw)
        return None

    def dependency_pairs(raw: Any) -> Optional[tuple[tuple[str, str], ...]]:
        """`raw`'s (source, target) pairs when it has that shape, else None (no check of the paths)."""
        if not isinstance(raw, list):
            return None
        pairs = []
        for item in raw:
            if not (isinstance(item, Mapping) and set(item) == {"source", "target"}):
                return None
            if not (isinstance(item["source"], str) and isinstance(item["target"], str)):
                return None
            pairs.append((item["source"], item["target"]))
        return tuple(pairs)

    def stage_task_assets(
        task: Mapping[str, Any],
        *,
        repo: Path,
        clone: Path,
        snapshot: Optional[Any] = None,
    ) -> list[Any]:
        """Materializes the copied assets into `clone` and returns the dependencies' read-only mounts.

        Without `snapshot`, the task may declare no dependency: its assets are
        captured for this one clone.
        """
        repo_identity = ns["real_directory"](repo, label="task asset repository")
        raw_copy = task.get("sandbox_copy", [])
        raw_dependencies = task.get("sandbox_dependencies", [])
        if snapshot is not None:
            if copy_pairs(raw_copy) != snapshot.declarations:
                # Malformed declarations are refused as such; well-formed ones differ.
                if raw_copy != []:
                    refused = declaration_error({"sandbox_copy": _plain(raw_copy)}, repo_identity)
                    if refused is not None:
                        raise refused
                raise err("task asset snapshot does not match this task declaration")
            if snapshot.repo_identity != repo_identity:
                raise err("task asset snapshot does not match this task declaration")
            snapshot.materialize(clone)
            if dependency_pairs(raw_dependencies) != snapshot.dependency_declarations:
                if raw_dependencies != []:
                    checked = {"sandbox_copy": [], "sandbox_dependencies": _plain(raw_dependencies)}
                    refused = declaration_error(checked, repo_identity)
                    if refused is not None:
                        raise refused
                raise err("task asset snapshot does not match this dependency declaration")
            return snapshot.dependency_mounts(clone)

        if raw_dependencies != []:
            # Malformed declarations are refused first, the copied ones before the dependencies.
            refused = declaration_error(_declarations_of(task), repo_identity)
            if refused is not None:
                raise refused
            raise err("sandbox_dependencies require a caller-owned immutable task asset snapshot")
        with tempfile.TemporaryDirectory(prefix="wfbench-asset-snapshot-") as temporary:
            with ns["TaskAssetCache"](Path(temporary) / "cache") as cache:
                cache.prepare(task, repo=repo_identity, resolved_sha="unbound").materialize(clone)
        return []

    module = str(ns.get("__name__", __name__))
    for cls in (TaskAssetSnapshot, TaskAssetCache):
        cls.__module__ = module
        cls.__qualname__ = cls.__name__
        ns[cls.__name__] = cls
    for fn in (capture_task_dependency_binding, stage_task_assets):
        fn.__module__ = module
        fn.__qualname__ = fn.__name__
        ns[fn.__name__] = fn


def bind(
    namespace: MutableMapping[str, Any],
    *,
    sandbox_error: type[BaseException],
    read_only_mount: Any,
    prepare_clone_target: Callable[..., Any],
    real_directory: Callable[..., Path],
    sandbox_workspace: str,
    dependency_mount_basename: str,
    vite_temp_dir: str,
    harness_root: Union[Path, Callable[[], Path]],
    store: Optional[Path] = None,
) -> None:
    """Fill a module's namespace (its `globals()`) with this module's public names.

    The functions use the harness's own `SandboxError`, `ReadOnlyMount`,
    `real_directory` and `_prepare_clone_target` (its `proposer_sandbox`'s),
    and read the constants from `namespace` when they are called.
    `harness_root` is the checkout review cases are read from: a path, or a
    function returning it at each call (`lambda: runtime_mounts.HARNESS_ROOT`
    follows a monkeypatched `HARNESS_ROOT`). `store` is the cestore store
    (`None`: the CLI's default, `$CESTORE_DIR` or XDG).

    The store captures with the harness's `DEPENDENCY_MOUNT_BASENAME`
    (`node_modules`) and `VITE_TEMP_DIR` (`.vite-temp`); other values are
    refused with a ValueError.
    """
    for given, name in ((dependency_mount_basename, "DEPENDENCY_MOUNT_BASENAME"), (vite_temp_dir, "VITE_TEMP_DIR")):
        if given != globals()[name]:
            raise ValueError(f"cestore captures with {name} = {globals()[name]!r}, not {given!r}")
    for name in _PUBLIC:
        namespace[name] = globals()[name]
    namespace["SandboxError"] = sandbox_error
    namespace["ReadOnlyMount"] = read_only_mount
    namespace["real_directory"] = real_directory
    namespace["_prepare_clone_target"] = prepare_clone_target
    namespace["SANDBOX_WORKSPACE"] = sandbox_workspace
    namespace["CESTORE_HARNESS_ROOT"] = harness_root
    namespace["CESTORE_STORE"] = store
    _populate(namespace)


CESTORE_STORE: Optional[Path] = None
CESTORE_HARNESS_ROOT: Union[Path, Callable[[], Path]] = Path.cwd()

_populate(globals())

__all__ = [*_PUBLIC, "bind"]
