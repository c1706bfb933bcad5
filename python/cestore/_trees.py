"""Typed results of the tree-snapshot commands: `ingest --profile`, tree `show`, `checkout --writable`, `materialize`.

Each type is read from the binary's JSON as it prints it (docs/json.md); the
manifests of the tree kinds are the harness's own JSON (docs/format.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

#: The kinds of stored manifest (`SnapshotInfo.profile`): a CE plugin's, the three tree kinds and an environment.
PROFILES = ("ce", "tree", "dependencies", "task", "environment")


def _stored(d: dict[str, Any]) -> tuple[bool, int, int, int, Path, Path]:
    """What storing did, from an ingest report: the last fields of every tree-ingest type, in their order.

    `already_present`, `new_objects`, `reused_objects`, `bytes_written`,
    `source` and `store`.
    """
    return (
        d["already_present"],
        d["new_objects"],
        d["reused_objects"],
        d["bytes_written"],
        Path(d["source"]),
        Path(d["store"]),
    )


@dataclass(frozen=True)
class TreeLimits:
    """Bounds for a tree capture, at most the harness's (the CLI's `--max-*` flags of `ingest --profile`).

    `entries` and `bytes` count all the trees of one capture together;
    `None` leaves a bound at the harness's value. A bound above the
    harness's is refused (`UsageError`).
    """

    entries: Optional[int] = None
    path_bytes: Optional[int] = None
    bytes: Optional[int] = None

    def args(self) -> list[str]:
        """The command-line flags for these bounds."""
        out: list[str] = []
        for flag, value in (
            ("--max-entries", self.entries),
            ("--max-path-bytes", self.path_bytes),
            ("--max-bytes", self.bytes),
        ):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"TreeLimits bounds must be int, not {type(value).__name__}")
                out += [flag, str(value)]
        return out


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a tree, as the harness records it (its `AssetManifestEntry`).

    `kind` is `directory`, `file` or `symlink`. A directory has size 0 and
    sha256 ""; a symlink's `size` and `sha256` are those of its target
    string, `link_target`. `mode` is the file's permission bits where the
    harness keeps them (dependencies), 0 where it does not (sandbox_copy).
    """

    path: str
    kind: str
    size: int
    sha256: str
    mode: int
    link_target: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> TreeEntry:
        return cls(d["path"], d["kind"], d["size"], d["sha256"], d["mode"], d["link_target"])


@dataclass(frozen=True)
class Dependency:
    """One captured dependency: its `source` in the repository, the `target` it is mounted at, and its tree.

    `snapshot_path` is where the task's view holds it
    (`dependencies/00000/payload`); `kind` is that of its root,
    `payload` (`directory` or `file`); `entries` are rooted at `payload`.
    """

    source: str
    target: str
    snapshot_path: str
    kind: str
    entries: tuple[TreeEntry, ...]
    total_bytes: int

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Dependency:
        return cls(
            d["source"],
            d["target"],
            d["snapshot_path"],
            d["kind"],
            tuple(TreeEntry._of(e) for e in d["entries"]),
            d["total_bytes"],
        )

    @classmethod
    def _stored(cls, index: int, d: dict[str, Any]) -> Dependency:
        """One dependency of a stored `dependencies` manifest (its `index`-th), in the report's form."""
        entries = tuple(TreeEntry._of(e) for e in d["content"]["entries"])
        root = [e.kind for e in entries if e.path == "payload"]
        return cls(
            d["source"],
            d["target"],
            f"dependencies/{index:05d}/payload",
            root[0] if root else "",
            entries,
            sum(e.size for e in entries),
        )


@dataclass(frozen=True)
class HarnessDigests:
    """The harness's digest fields a snapshot answers to (`show`'s `harness_digests`); None where it has none."""

    task_asset_snapshot_digest: Optional[str] = None
    task_asset_manifest_digest: Optional[str] = None
    sandbox_dependency_manifest_digest: Optional[str] = None
    sandbox_dependency_content_digest: Optional[str] = None
    environment_digest: Optional[str] = None

    def as_dict(self) -> dict[str, str]:
        """The fields it has, by the harness's names."""
        return {k: v for k, v in ((k, getattr(self, k)) for k in self.__dataclass_fields__) if v is not None}

    @classmethod
    def _of(cls, d: Optional[dict[str, Any]]) -> HarnessDigests:
        d = d or {}
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class TaskIdentity:
    """What a `task` snapshot names (its manifest, the harness's snapshot identity, schema 3).

    `manifest_digest` is its `tree` snapshot, `dependency_manifest_digest`
    its `dependencies` snapshot; `repo_identity` the repository as the
    harness names it.
    """

    declarations: tuple[str, ...]
    repo_identity: str
    resolved_sha: str
    harness_identity: str
    manifest_digest: str
    dependency_content_digest: str
    dependency_manifest_digest: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> TaskIdentity:
        return cls(
            tuple(d["declarations"]),
            d["repo_identity"],
            d["resolved_sha"],
            d["harness_identity"],
            d["manifest_digest"],
            d["dependency_content_digest"],
            d["dependency_manifest_digest"],
        )


@dataclass(frozen=True)
class TreeIngest:
    """A `tree` snapshot recorded by `Store.ingest_tree`.

    `manifest_digest` is the harness's `task_asset_manifest_digest`;
    `declarations` the sandbox_copy paths captured; `entry_count` how many
    entries the tree has (`Store.show` lists them). `new_objects`,
    `reused_objects` and `bytes_written` count file objects.
    """

    name: str
    manifest_digest: str
    declarations: tuple[str, ...]
    entry_count: int
    total_bytes: int
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    source: Path
    store: Path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def harness_digests(self) -> HarnessDigests:
        """The harness field this snapshot answers to."""
        return HarnessDigests(task_asset_manifest_digest=self.manifest_digest)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> TreeIngest:
        return cls(
            d["name"],
            d["manifest_digest"],
            tuple(d["declarations"]),
            d["entries"],
            d["total_bytes"],
            *_stored(d),
            d,
        )


@dataclass(frozen=True)
class RuntimeComponent:
    """One of the GitNexus runtime's seven components: its path in the snapshot and the host path it was read from."""

    path: str
    source: Path


@dataclass(frozen=True)
class RuntimeIngest:
    """The GitNexus runtime of a checkout recorded by `Store.ingest_runtime`: a `tree` snapshot of its seven components.

    `manifest_digest` names every byte the runtime's mounts show (the row
    field `gitnexus_runtime_manifest_digest`; docs/format.md defines it);
    `rules` is `seed` or `upstream`; `components` lists the seven in the
    mounts' order, each with where it was read (a linked worktree's
    borrowed `node_modules` is the primary checkout's).
    """

    name: str
    manifest_digest: str
    rules: str
    components: tuple[RuntimeComponent, ...]
    entry_count: int
    total_bytes: int
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    source: Path
    store: Path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> RuntimeIngest:
        return cls(
            d["name"],
            d["manifest_digest"],
            d["rules"],
            tuple(RuntimeComponent(c["path"], Path(c["source"])) for c in d["components"]),
            d["entries"],
            d["total_bytes"],
            *_stored(d),
            d,
        )


@dataclass(frozen=True)
class EnvironmentMember:
    """One member of an environment: the results-row field it fills, its kind, its digest."""

    role: str
    kind: str
    digest: str


@dataclass(frozen=True)
class EnvironmentIngest:
    """An environment recorded by `Store.ingest_environment`: a named set of stored snapshots kept as one.

    `manifest_digest` is the environment's digest (docs/format.md, "An
    environment's digest"; a row's `environment_digest`); `members` lists
    them in (role, digest) order, each with the kind the store records;
    `stored` is False when the same set was recorded already.
    """

    name: str
    manifest_digest: str
    members: tuple[EnvironmentMember, ...]
    stored: bool
    store: Path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> EnvironmentIngest:
        return cls(
            d["name"],
            d["manifest_digest"],
            tuple(EnvironmentMember(m["role"], m["kind"], m["digest"]) for m in d["members"]),
            d["stored"],
            Path(d["store"]),
            d,
        )


@dataclass(frozen=True)
class DependenciesIngest:
    """A `dependencies` snapshot recorded by `Store.ingest_dependencies`.

    `digest` is the harness's `sandbox_dependency_manifest_digest`,
    `dependency_content_digest` its `sandbox_dependency_content_digest`;
    `entry_count` counts the entries of every dependency together.
    """

    name: str
    digest: str
    dependency_content_digest: str
    dependencies: tuple[Dependency, ...]
    entry_count: int
    total_bytes: int
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    source: Path
    store: Path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def harness_digests(self) -> HarnessDigests:
        """The harness fields this snapshot answers to."""
        return HarnessDigests(
            sandbox_dependency_manifest_digest=self.digest,
            sandbox_dependency_content_digest=self.dependency_content_digest,
        )

    @classmethod
    def _of(cls, d: dict[str, Any]) -> DependenciesIngest:
        return cls(
            d["name"],
            d["digest"],
            d["dependency_content_digest"],
            tuple(Dependency._of(x) for x in d["dependencies"]),
            d["entries"],
            d["total_bytes"],
            *_stored(d),
            d,
        )


@dataclass(frozen=True)
class TaskIngest:
    """A `task` snapshot recorded by `Store.ingest_task`: everything the harness's `TaskAssetSnapshot` has.

    `digest` is `task_asset_snapshot_digest`, `manifest_digest`
    `task_asset_manifest_digest` (its `tree` snapshot),
    `dependency_manifest_digest` and `dependency_content_digest` the
    `sandbox_dependency_*` ones (its `dependencies` snapshot). The object
    counts cover the whole capture.
    """

    name: str
    digest: str
    manifest_digest: str
    repo_identity: str
    harness_identity: str
    resolved_sha: str
    declarations: tuple[str, ...]
    entries: tuple[TreeEntry, ...]
    dependency_declarations: tuple[tuple[str, str], ...]
    dependencies: tuple[Dependency, ...]
    dependency_content_digest: str
    dependency_manifest_digest: str
    total_bytes: int
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    source: Path
    store: Path
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def harness_digests(self) -> HarnessDigests:
        """The four harness fields this snapshot answers to."""
        return HarnessDigests(
            self.digest, self.manifest_digest, self.dependency_manifest_digest, self.dependency_content_digest
        )

    @property
    def dependency_binding(self) -> dict[str, str]:
        """The dependency digests a task binding stores (`expect_binding` takes them back)."""
        return {
            "sandbox_dependency_content_digest": self.dependency_content_digest,
            "sandbox_dependency_manifest_digest": self.dependency_manifest_digest,
        }

    @classmethod
    def _of(cls, d: dict[str, Any]) -> TaskIngest:
        return cls(
            d["name"],
            d["digest"],
            d["manifest_digest"],
            d["repo_identity"],
            d["harness_identity"],
            d["resolved_sha"],
            tuple(d["declarations"]),
            tuple(TreeEntry._of(e) for e in d["entries"]),
            tuple((s, t) for s, t in d["dependency_declarations"]),
            tuple(Dependency._of(x) for x in d["dependencies"]),
            d["dependency_content_digest"],
            d["dependency_manifest_digest"],
            d["total_bytes"],
            *_stored(d),
            d,
        )


@dataclass(frozen=True)
class WritableCopy:
    """A writable copy of a snapshot made by `checkout(..., writable=True)`.

    Files are `reflinked` from their objects, or `copied` (buffered, the
    filesystem refusing reflinks; `bytes_copied` of at most
    `max_fallback_bytes`); files are 0600, directories 0700.
    """

    path: Path
    manifest_digest: str
    profile: str
    reflinked: int
    copied: int
    bytes_copied: int
    directories: int
    symlinks: int
    max_fallback_bytes: int
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> WritableCopy:
        return cls(
            Path(d["path"]),
            d["manifest_digest"],
            d["profile"],
            d["reflinked"],
            d["copied"],
            d["bytes_copied"],
            d["directories"],
            d["symlinks"],
            d["max_fallback_bytes"],
            d,
        )


@dataclass(frozen=True)
class Materialized:
    """What `Store.materialize` did: each declared sandbox_copy root of the task replaced in `clone`.

    The counts are those of the writable copies made, as for `WritableCopy`.
    """

    digest: str
    clone: Path
    declarations: tuple[str, ...]
    reflinked: int
    copied: int
    bytes_copied: int
    directories: int
    symlinks: int
    max_fallback_bytes: int
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Materialized:
        return cls(
            d["digest"],
            Path(d["clone"]),
            tuple(d["declarations"]),
            d["reflinked"],
            d["copied"],
            d["bytes_copied"],
            d["directories"],
            d["symlinks"],
            d["max_fallback_bytes"],
            d,
        )


def parse_stored(profile: str, canonical: str) -> Any:
    """The JSON of a stored tree-kind manifest (`show --manifest`'s `canonical_manifest`)."""
    value = json.loads(canonical)
    expected = list if profile == "tree" else dict
    if not isinstance(value, expected):
        raise ValueError(f"a {profile} manifest is a JSON {expected.__name__}, not {type(value).__name__}")
    return value
