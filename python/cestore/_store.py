"""A typed API over the `cestore` CLI's `--json` output."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from ._errors import Error, from_json
from ._find import find_binary

StrPath = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Provenance:
    """What identifies a snapshot: exactly the reference's provenance dict."""

    name: str
    version: str
    manifest_schema_version: int
    manifest_digest: str
    file_count: int
    total_bytes: int

    def as_dict(self) -> dict[str, Any]:
        """The provenance as the reference's `CePluginSnapshot.provenance` dict."""
        return {
            "name": self.name,
            "version": self.version,
            "manifest_schema_version": self.manifest_schema_version,
            "manifest_digest": self.manifest_digest,
            "file_count": self.file_count,
            "total_bytes": self.total_bytes,
        }

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Provenance:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Bounds:
    """Bounds for a release's walk, at most the reference's (the CLI's `--max-*` flags).

    `None` leaves a bound at the reference's value.
    """

    files: Optional[int] = None
    file_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    path_bytes: Optional[int] = None

    def args(self) -> list[str]:
        """The command-line flags for these bounds."""
        out: list[str] = []
        for flag, value in (
            ("--max-files", self.files),
            ("--max-file-bytes", self.file_bytes),
            ("--max-total-bytes", self.total_bytes),
            ("--max-path-bytes", self.path_bytes),
        ):
            if value is not None:
                out += [flag, str(value)]
        return out


@dataclass(frozen=True)
class IngestStats:
    """What one ingest did."""

    source: str
    store: str
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    hashes_known: int
    repaired: list[dict[str, Any]]
    left_out: list[dict[str, Any]]

    @classmethod
    def _of(cls, d: dict[str, Any]) -> IngestStats:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Snapshot:
    """A stored snapshot, as `ingest` reports it."""

    provenance: Provenance
    ingest: IngestStats

    @property
    def manifest_digest(self) -> str:
        """The snapshot's manifest digest."""
        return self.provenance.manifest_digest

    @property
    def version(self) -> str:
        """The release's version."""
        return self.provenance.version


@dataclass(frozen=True)
class View:
    """A frozen read-only view of a snapshot made by `checkout`."""

    path: Path
    manifest_digest: str
    linked: int
    copied: int
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class FileEntry:
    """One file of a snapshot, in manifest order."""

    path: str
    sha256: str
    size: int
    executable: bool


@dataclass(frozen=True)
class SnapshotInfo:
    """What the store knows about a snapshot (`show`)."""

    provenance: Provenance
    first_ingested_at: str
    last_ingested_at: Optional[str]
    ingest_count: int
    views: list[dict[str, Any]]


@dataclass(frozen=True)
class Change:
    """One difference between two snapshots (`diff`)."""

    change: str
    path: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class VerifyReport:
    """The result of `verify`: `ok` is false only when a problem is corruption."""

    ok: bool
    snapshots_checked: int
    objects_checked: int
    problems: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class Mount:
    """One read-only bind mount of an arm's sandbox."""

    source: Path
    target: str
    read_only: bool = True


@dataclass(frozen=True)
class ArmStage:
    """One arm of a staged run: its plugin directory in the sandbox and its mounts."""

    arm: str
    plugin_dir: Optional[str]
    mounts: tuple[Mount, ...]


@dataclass(frozen=True)
class Stage:
    """A staged run (`stage`)."""

    provenance: Optional[Provenance]
    view: Optional[Path]
    view_kind: Optional[str]
    ingest: Optional[IngestStats]
    arms: tuple[ArmStage, ...]


class Store:
    """A cestore store, driven through the `cestore` binary's `--json` output.

    `path=None` is the CLI's default store: `$CESTORE_DIR`, else
    `$XDG_DATA_HOME/cestore`, else `~/.local/share/cestore`. The store's
    directory is `location` (None for the default).
    """

    def __init__(
        self,
        path: Optional[StrPath] = None,
        *,
        binary: Optional[StrPath] = None,
        trust_store: bool = False,
    ) -> None:
        self.location: Optional[Path] = Path(path).absolute() if path is not None else None
        self.binary = os.fspath(binary) if binary is not None else find_binary()
        self.trust_store = trust_store

    def __repr__(self) -> str:
        return f"Store({str(self.location) if self.location else None!r})"

    def run(self, *args: str) -> dict[str, Any]:
        """Runs one command with `--json` and returns its object; raises on an error object."""
        argv = [self.binary, "--json"]
        if self.location is not None:
            argv += ["--store", str(self.location)]
        if self.trust_store:
            argv.append("--trust-store")
        argv += list(args)
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        try:
            obj = json.loads(proc.stdout)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            stderr = proc.stderr.decode(errors="replace").strip()
            raise Error(
                f"cestore printed no JSON object (exit {proc.returncode}): {stderr}",
                code=proc.returncode,
                kind="unknown",
                argv=argv,
            )
        if not obj.get("ok", False) and isinstance(obj.get("error"), dict):
            raise from_json(obj["error"], argv)
        return obj

    def ingest(self, source: StrPath, version: str, *, bounds: Optional[Bounds] = None) -> Snapshot:
        """Validates a release as the reference does and stores it."""
        extra = bounds.args() if bounds else []
        out = self.run("ingest", "--version", version, *extra, "--", _abs(source))
        return Snapshot(Provenance._of(out["provenance"]), IngestStats._of(out["ingest"]))

    def digest(self, source: StrPath, version: str, *, bounds: Optional[Bounds] = None) -> Provenance:
        """Validates a release and returns its provenance, storing nothing."""
        extra = bounds.args() if bounds else []
        out = self.run("digest", "--version", version, *extra, "--", _abs(source))
        return Provenance._of(out["provenance"])

    def checkout(self, digest: str, dest: StrPath, *, method: Optional[str] = None) -> View:
        """Makes a frozen read-only view of `digest` at `dest`, which must not exist."""
        args = ["checkout"]
        if method is not None:
            args += ["--method", method]
        out = self.run(*args, "--", digest, _abs(dest))
        return View(Path(out["view"]), out["manifest_digest"], out["linked"], out["copied"], out)

    def discard(self, view: StrPath) -> bool:
        """Removes a view made by `checkout`; returns whether this call removed it."""
        out = self.run("discard", "--", _abs(view))
        return bool(out["removed"])

    @contextmanager
    def view(self, digest: str, parent: StrPath, *, prefix: str = "cestore-view-") -> Iterator[View]:
        """Checks `digest` out in a new directory under `parent` and discards it on exit.

        The view is discarded also when the body raises; a checkout that fails
        leaves nothing behind.
        """
        made = self.checkout(digest, _fresh_path(Path(parent), prefix))
        try:
            yield made
        finally:
            self.discard(made.path)

    def path(self, digest: str) -> Path:
        """The store's shared frozen view of `digest`, made once when absent."""
        return Path(self.run("path", "--", digest)["path"])

    def show(self, digest: str) -> SnapshotInfo:
        """What the store knows about `digest`."""
        out = self.run("show", "--", digest)
        return SnapshotInfo(
            Provenance._of(out["provenance"]),
            out["first_ingested_at"],
            out["last_ingested_at"],
            out["ingest_count"],
            out["views"],
        )

    def files(self, digest: str) -> list[FileEntry]:
        """The files of `digest`, in manifest order."""
        out = self.run("show", "--files", "--", digest)
        return [FileEntry(f["path"], f["sha256"], f["size"], f["executable"]) for f in out["files"]]

    def verify(self, *digests: str, tree: Optional[StrPath] = None) -> VerifyReport:
        """Re-hashes objects (all snapshots, or `digests`); a report, not an exception, on problems.

        With `tree`, audits that directory against the one digest given; the
        differences are in `problems`.
        """
        args = ["verify"]
        if tree is not None:
            args += ["--tree", _abs(tree)]
        out = self.run(*args, "--", *digests)
        problems = out.get("problems", out.get("differences", []))
        return VerifyReport(
            bool(out["ok"]),
            int(out.get("snapshots_checked", 1 if tree is not None else 0)),
            int(out.get("objects_checked", 0)),
            problems,
            out,
        )

    def diff(self, a: str, b: str) -> list[Change]:
        """The files added, removed or changed from snapshot `a` to snapshot `b`."""
        out = self.run("diff", "--", a, b)
        return [Change(c["change"], c["path"], c) for c in out["changes"]]

    def stage(
        self,
        arms: Sequence[str],
        *,
        plugin_dir: Optional[StrPath] = None,
        plugin_version: Optional[str] = None,
        digest: Optional[str] = None,
        dest: Optional[StrPath] = None,
        gitnexus_root: Optional[StrPath] = None,
        strict_arms: bool = False,
        bounds: Optional[Bounds] = None,
    ) -> Stage:
        """Stages a run: checks the arms, ingests the release, makes its view, lists every arm's mounts."""
        args = ["stage"]
        for arm in arms:
            args += ["--arm", arm]
        if plugin_dir is not None:
            args += ["--plugin-dir", _abs(plugin_dir)]
        if plugin_version is not None:
            args += ["--plugin-version", plugin_version]
        if digest is not None:
            args += ["--digest", digest]
        if dest is not None:
            args += ["--dest", _abs(dest)]
        if gitnexus_root is not None:
            args += ["--gitnexus-root", _abs(gitnexus_root)]
        if strict_arms:
            args.append("--strict-arms")
        if bounds is not None:
            args += bounds.args()
        out = self.run(*args)
        return Stage(
            Provenance._of(out["provenance"]) if out["provenance"] else None,
            Path(out["view"]) if out["view"] else None,
            out["view_kind"],
            IngestStats._of(out["ingest"]) if out["ingest"] else None,
            tuple(
                ArmStage(
                    a["arm"],
                    a["plugin_dir"],
                    tuple(Mount(Path(m["source"]), m["target"], m["read_only"]) for m in a["mounts"]),
                )
                for a in out["arms"]
            ),
        )


def _abs(path: StrPath) -> str:
    return os.path.abspath(os.fspath(path))


def _fresh_path(parent: Path, prefix: str) -> Path:
    """A path under `parent` that did not exist a moment ago, named like `mkdtemp`'s."""
    made = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.rmdir(made)
    return Path(made)
