"""A typed API over the `cestore` CLI's `--json` output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional, Union, overload

from . import _contract
from ._errors import Error, from_json
from ._find import find_binary
from ._trees import (
    Dependency,
    DependenciesIngest,
    EnvironmentIngest,
    HarnessDigests,
    Materialized,
    TaskIdentity,
    TaskIngest,
    TreeEntry,
    RuntimeIngest,
    TreeIngest,
    TreeLimits,
    WritableCopy,
    parse_stored,
)

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
class Changes:
    """The files that differ between a snapshot and its commit's snapshot."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceRecord:
    """Where a snapshot's bytes came from: a directory of a git commit's tree.

    `clean` says whether the snapshot is exactly that directory's snapshot;
    when not, `changes` lists what differs, and `commit_refused` why the
    commit's directory makes no snapshot, if it makes none.
    """

    read_from: str
    repository: str
    commit: Optional[str]
    path: str
    tree: Optional[str]
    tag: Optional[str]
    clean: bool
    changes: Changes = Changes()
    commit_refused: Optional[str] = None

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SourceRecord:
        changes = d.get("changes") or {}
        return cls(
            d["read_from"],
            d["repository"],
            d["commit"],
            d["path"],
            d["tree"],
            d["tag"],
            d["clean"],
            Changes(*(tuple(changes.get(k, ())) for k in ("added", "changed", "removed"))),
            d.get("commit_refused"),
        )


@dataclass(frozen=True)
class SourceEntry:
    """A source record as a store keeps it: when its ingest ran and how the store came to hold it.

    `via` is `ingest`, `registry` (pulled) or `bundle` (imported).
    """

    at: str
    via: str
    record: SourceRecord

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SourceEntry:
        return cls(d["at"], d["via"], SourceRecord._of(d["record"]))


@dataclass(frozen=True)
class SourceSummary:
    """A snapshot's newest source record in brief (`list`, `audit`)."""

    commit: Optional[str]
    tag: Optional[str]
    clean: bool
    read_from: str
    via: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SourceSummary:
        return cls(d["commit"], d["tag"], d["clean"], d["read_from"], d["via"])


@dataclass(frozen=True)
class SourceCheck:
    """A snapshot re-derived from its recorded commit in a local clone (`verify --source`, `audit --source-repo`).

    `status` is `equal`, `source-mismatch` or `no-source-record`; a mismatch
    says which (`digest`, `missing-commit` or `refused`), with `detail`.
    """

    status: str
    mismatch: Optional[str]
    commit: Optional[str]
    path: Optional[str]
    expected: str
    found: Optional[str]
    detail: Optional[str]

    @property
    def equal(self) -> bool:
        """Whether the commit's tree gives the snapshot's digest."""
        return self.status == "equal"

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SourceCheck:
        return cls(d["status"], d["mismatch"], d["commit"], d["path"], d["expected"], d["found"], d["detail"])


@dataclass(frozen=True)
class LeftOut:
    """An entry of the release the reference's filters left out of the snapshot (a directory counts once).

    `path` is relative to the source; `reason` is `secret`, `forbidden-part`
    or `outside-allowlist`.
    """

    path: str
    reason: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> LeftOut:
        return cls(d["path"], d["reason"])


@dataclass(frozen=True)
class SecretFound:
    """A file the snapshot keeps whose content looks like a secret (the reference's filters go by name only).

    `path` is relative to the source; `kind` is `private-key`,
    `github-token`, `aws-access-key-id` and the like (docs/json.md lists
    them); `line` is where the first one starts, from 1.
    """

    path: str
    kind: str
    line: int

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SecretFound:
        return cls(d["path"], d["kind"], d["line"])


@dataclass(frozen=True)
class Repaired:
    """A stored object an ingest found drifted and mended from the source.

    `object` is its absolute path, `repair` is `mode` (set back) or `bytes`
    (replaced by the source's), and `was` says what was wrong.
    """

    object: str
    repair: str
    was: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Repaired:
        return cls(d["object"], d["repair"], d["was"])


@dataclass(frozen=True)
class IngestStats:
    """What one ingest did.

    `repaired` lists the stored objects it mended, `left_out` what the
    reference's filters left out of the snapshot. `sources` holds the source
    record the ingest kept (the git commit its directory lies in), or those
    an adopted snapshot brought; `source_unrecorded` says why none was kept
    for a directory in a git repository that could not be read.
    `secrets_by_content` lists the files kept whose bytes look like a
    private key or a token (each also warned of on stderr).
    """

    source: str
    store: str
    already_present: bool
    new_objects: int
    reused_objects: int
    bytes_written: int
    repaired: tuple[Repaired, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    sources: tuple[SourceEntry, ...] = ()
    source_unrecorded: Optional[str] = None
    secrets_by_content: tuple[SecretFound, ...] = ()

    @classmethod
    def _of(cls, d: dict[str, Any]) -> IngestStats:
        return cls(
            d["source"],
            d["store"],
            d["already_present"],
            d["new_objects"],
            d["reused_objects"],
            d["bytes_written"],
            repaired=tuple(Repaired._of(r) for r in d["repaired"]),
            left_out=tuple(LeftOut._of(e) for e in d["left_out"]),
            sources=tuple(SourceEntry._of(e) for e in d["sources"]),
            source_unrecorded=d["source_unrecorded"],
            secrets_by_content=tuple(SecretFound._of(e) for e in d.get("secrets_by_content", ())),
        )


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
class GeneratedKey:
    """An ed25519 key pair made by `generate_key`: the private key (PKCS#8 PEM, mode 0600),
    its public key (SubjectPublicKeyInfo PEM) and the key id (SHA-256 of the public key's DER)."""

    private_key: Path
    public_key: Path
    keyid: str


@dataclass(frozen=True)
class SignReport:
    """An attestation `sign` made: the snapshot it vouches for, the key that signed, its id and time.

    `new` is false when the key had signed the snapshot already: the
    attestation it had is the one named. Signing an environment signs
    every snapshot it names first: `members` lists them, in that order.
    """

    manifest_digest: str
    keyid: str
    attestation: str
    at: str
    new: bool = True
    members: tuple[SignReport, ...] = ()

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SignReport:
        return cls(
            d["manifest_digest"],
            d["keyid"],
            d["attestation"],
            d["at"],
            d["new"],
            tuple(cls._of(m) for m in d.get("members", ())),
        )


@dataclass(frozen=True)
class Verification:
    """Whether an attestation vouches for its snapshot under the keys trusted.

    `keyid` is the trusted key that signed it; `why` says why it does not vouch.
    """

    ok: bool
    keyid: Optional[str]
    why: Optional[str]


@dataclass(frozen=True)
class Attestation:
    """One attestation of a snapshot (`attestations`): a DSSE envelope of an in-toto statement.

    `subjects` are the statement's subject names (`PLUGIN@VERSION`),
    `builder` the stager that signed. `verified` is None when no key was
    trusted. `envelope` is the DSSE envelope as stored: any DSSE
    implementation verifies it with the signer's public key (docs/python.md).
    """

    id: str
    keyid: str
    at: str
    subjects: tuple[str, ...]
    builder: Optional[str]
    verified: Optional[Verification]
    envelope: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Attestation:
        v = d.get("verified")
        return cls(
            d["id"],
            d["keyid"],
            d["at"],
            tuple(d.get("subjects") or ()),
            d.get("builder"),
            Verification(bool(v["ok"]), v.get("keyid"), v.get("why")) if v else None,
            dict(d.get("envelope") or {}),
        )


@dataclass(frozen=True)
class SignedBy:
    """An attestation of a snapshot in brief (`show`): its id, the key that signed and when."""

    id: str
    keyid: str
    at: str

    @classmethod
    def _of(cls, d: dict[str, Any]) -> SignedBy:
        return cls(d["id"], d["keyid"], d["at"])


@dataclass(frozen=True)
class ViewRecord:
    """A view of a snapshot the store records (`show`).

    `kind` is `checkout` or `shared`; `method` how its files were made
    (`hardlink`; `copy` or `mixed` where hard links were refused), with how
    many were `linked` and `copied`; `on_disk` whether its directory is
    still there.
    """

    path: Path
    manifest_digest: str
    kind: str
    method: str
    linked: int
    copied: int
    created_at: str
    on_disk: bool

    @classmethod
    def _of(cls, d: dict[str, Any]) -> ViewRecord:
        return cls(
            Path(d["path"]),
            d["manifest_digest"],
            d["kind"],
            d["method"],
            d["linked"],
            d["copied"],
            d["created_at"],
            d["on_disk"],
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """What the store knows about a snapshot (`show`): `views` are its recorded views; `sources` its
    source records, oldest first; `attestations` who signed it.

    `profile` is the snapshot's kind: `ce` (a plugin release), `tree`,
    `dependencies` or `task`. A tree kind has `harness_digests` (the
    harness's digest fields it answers to) and its contents: a `tree` its
    `entries`; a `dependencies` list its `dependencies`; a `task` its
    identity (`task`) with the entries and dependencies of the two
    snapshots it names.
    """

    provenance: Provenance
    first_ingested_at: str
    last_ingested_at: Optional[str]
    ingest_count: int
    views: tuple[ViewRecord, ...]
    sources: tuple[SourceEntry, ...] = ()
    attestations: tuple[SignedBy, ...] = ()
    profile: str = "ce"
    harness_digests: HarnessDigests = HarnessDigests()
    entries: tuple[TreeEntry, ...] = ()
    dependencies: tuple[Dependency, ...] = ()
    task: Optional[TaskIdentity] = None


@dataclass(frozen=True)
class Change:
    """One difference between two snapshots (`diff`)."""

    change: str
    path: str
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class Problem:
    """One problem `verify` found.

    In the store: `severity` (`corruption` or `garbage`), `detail`, and the
    `snapshots` and `views` it affects. With `verify(d, tree=dir)`, one
    difference between the directory and the snapshot: `kind` is `missing`,
    `extra-file`, `extra-directory`, `symlink`, `not-a-file`,
    `content-changed` (with the `expected` and `found` SHA-256) or
    `exec-changed` (with the `expected` exec bit); what a kind lacks is None.
    """

    kind: str
    path: str
    severity: Optional[str] = None
    detail: Optional[str] = None
    snapshots: tuple[str, ...] = ()
    views: tuple[str, ...] = ()
    expected: Union[str, bool, None] = None
    found: Optional[str] = None

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Problem:
        return cls(
            d["kind"],
            d["path"],
            d.get("severity"),
            d.get("detail"),
            tuple(d.get("snapshots") or ()),
            tuple(d.get("views") or ()),
            d.get("expected"),
            d.get("found"),
        )


@dataclass(frozen=True)
class VerifyReport:
    """The result of `verify`: `ok` is false only when a problem is corruption."""

    ok: bool
    snapshots_checked: int
    objects_checked: int
    problems: tuple[Problem, ...]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)


@dataclass(frozen=True)
class Place:
    """A line of a results file: the file (absolute, or `<stdin>`) and the line, from 1."""

    file: str
    line: int

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Place:
        return cls(d["file"], d["line"])


@dataclass(frozen=True)
class Claimed:
    """A version or arm that rows claim for a digest: how many rows, and the first."""

    value: str
    rows: int
    first: Place

    @classmethod
    def _of(cls, d: dict[str, Any]) -> Claimed:
        return cls(d["value"], d["rows"], Place._of(d["first"]))


@dataclass(frozen=True)
class DamagedObject:
    """An object of a snapshot that fails its re-hash (`audit --verify`)."""

    kind: str
    path: str
    detail: str


@dataclass(frozen=True)
class DigestAudit:
    """One digest of a results file: its status and what the rows say about it.

    `status` is `ok`, `unknown`, `version-mismatch`, `damaged`,
    `source-mismatch`, `no-clean-source` or `pulled`. `source` is the
    snapshot's newest source record in brief; `source_check` is set when the
    audit re-derived the digest from its commit (`source_repo`).
    """

    manifest_digest: str
    status: str
    version: Optional[str]
    claimed_versions: tuple[Claimed, ...]
    claimed_versions_unlisted: int
    rows: int
    arms: tuple[Claimed, ...]
    arms_unlisted: int
    first: Place
    last: Place
    damaged: tuple[DamagedObject, ...]
    pulled: bool
    pull_error: Optional[str]
    source: Optional[SourceSummary] = None
    source_check: Optional[SourceCheck] = None

    @classmethod
    def _of(cls, d: dict[str, Any]) -> DigestAudit:
        return cls(
            d["manifest_digest"],
            d["status"],
            d["version"],
            tuple(Claimed._of(c) for c in d["claimed_versions"]),
            d["claimed_versions_unlisted"],
            d["rows"],
            tuple(Claimed._of(c) for c in d["arms"]),
            d["arms_unlisted"],
            Place._of(d["first"]),
            Place._of(d["last"]),
            tuple(DamagedObject(o["kind"], o["path"], o["detail"]) for o in d["damaged"]),
            d["pulled"],
            d["pull_error"],
            SourceSummary._of(d["source"]) if d["source"] else None,
            SourceCheck._of(d["source_check"]) if d["source_check"] else None,
        )


@dataclass(frozen=True)
class RowProblem:
    """A row that breaks a rule: `arm-mismatch` or `malformed-digest`."""

    file: str
    line: int
    kind: str
    arm: Optional[str]
    detail: str


@dataclass(frozen=True)
class MalformedLine:
    """A line of a results file that is not a row, and why."""

    line: int
    reason: str


@dataclass(frozen=True)
class AuditInput:
    """One results file as `audit` read it."""

    file: str
    format: str
    bytes: int
    lines: int
    rows: int
    malformed_count: int
    malformed: tuple[MalformedLine, ...]


@dataclass(frozen=True)
class FieldCount:
    """How many rows name a digest of one field of the audit's table, and how many the store answers for."""

    field: str
    kind: str
    rows: int
    digests: int
    rows_answered: int
    rows_unanswered: int
    rows_malformed: int
    #: The first row naming a digest the store cannot answer for: its file, line, digest and status.
    first_unanswered: Optional[dict[str, Any]]


@dataclass(frozen=True)
class AuditReport:
    """The result of `audit`: `passed` is false when a digest is not `ok` or `pulled`,
    a row breaks a rule, no line is a row, no row carries any of the three fields,
    or a line is malformed and `allow_malformed` is false.

    A row is a line `json.loads` reads as a dict (`NaN`, `Infinity` and lone
    surrogates included); a malformed line (one it refuses, or reads as no
    dict) is listed in its input's `malformed`, and any digest in it was not
    audited: it fails the audit unless `allow_malformed` was given.
    """

    passed: bool
    verdict: str
    rows: int
    digests: tuple[DigestAudit, ...]
    row_problem_count: int
    row_problems: tuple[RowProblem, ...]
    malformed_count: int
    allow_malformed: bool
    inputs: tuple[AuditInput, ...]
    verified: bool
    registry: Optional[str]
    listed_at_most: int
    fields: dict[str, str]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)
    #: Each digest field of the table (the CE digest's first), with its counts.
    field_counts: tuple[FieldCount, ...] = ()

    def digest(self, manifest_digest: str) -> DigestAudit:
        """The entry of one digest; KeyError when no row names it."""
        for d in self.digests:
            if d.manifest_digest == manifest_digest:
                return d
        raise KeyError(manifest_digest)

    @classmethod
    def _of(cls, d: dict[str, Any]) -> AuditReport:
        return cls(
            d["passed"],
            d["verdict"],
            d["rows"],
            tuple(DigestAudit._of(x) for x in d["digests"]),
            d["row_problem_count"],
            tuple(RowProblem(p["file"], p["line"], p["kind"], p["arm"], p["detail"]) for p in d["row_problems"]),
            d["malformed_count"],
            d["allow_malformed"],
            tuple(
                AuditInput(
                    i["file"],
                    i["format"],
                    i["bytes"],
                    i["lines"],
                    i["rows"],
                    i["malformed_count"],
                    tuple(MalformedLine(m["line"], m["reason"]) for m in i["malformed"]),
                )
                for i in d["inputs"]
            ),
            d["verified"],
            d["registry"],
            d["listed_at_most"],
            dict(d["fields"]),
            d,
            tuple(
                FieldCount(
                    f["field"],
                    f["kind"],
                    f["rows"],
                    f["digests"],
                    f["rows_answered"],
                    f["rows_unanswered"],
                    f["rows_malformed"],
                    f["first_unanswered"],
                )
                for f in d.get("field_counts", ())
            ),
        )


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
    #: The GitNexus runtime snapshot every arm mounts (a row's
    #: `gitnexus_runtime_manifest_digest`), when one is staged.
    gitnexus_runtime_manifest_digest: Optional[str] = None
    #: That snapshot's shared view in the store, which the runtime's mounts point into.
    gitnexus_runtime_view: Optional[Path] = None
    #: The environment recorded (`stage(..., environment=NAME)`), if any.
    environment: Optional[EnvironmentIngest] = None

    @classmethod
    def _of(cls, out: dict[str, Any]) -> Stage:
        view = out.get("gitnexus_runtime_view")
        return cls(
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
            out.get("gitnexus_runtime_manifest_digest"),
            Path(view) if view else None,
            EnvironmentIngest._of(out["environment"]) if out.get("environment") else None,
        )


def _discard_args(spare: bool) -> list[str]:
    """The `discard` command's words: `--spare` keeps the view as a spare."""
    return ["discard", "--spare"] if spare else ["discard"]


def _release_line(spare: bool) -> bytes:
    """The line that releases a held stage: the `discard` command's own words.

    The binary keeps the view as a spare only for `discard --spare`
    (`SPARE_LINE` in its `cli/hold.rs`); the tests check this line against it.
    """
    return (" ".join(_discard_args(spare)) + "\n").encode()


class HeldStage:
    """A staged run whose view lives until `release` (`stage --hold`).

    One `cestore` process makes the view and, once released, discards it: a
    sweep's whole staging costs one process start. The process holds nothing
    of the store meanwhile. Should this process die first, the view is
    discarded all the same (the held process sees its input end); so it is
    when the held process gets SIGTERM, SIGINT or SIGHUP, and `release` then
    finds it done.
    """

    def __init__(self, argv: list[str]) -> None:
        self._argv = argv
        self._stderr = b""
        self._code = 0
        self._released = False
        # Its own session: a Ctrl-C meant for the caller does not kill it
        # before it has discarded the view.
        self._proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        try:
            first = self._proc.stdout.readline()
            try:
                out = _result(first, b"", 0, argv)
            except Error:
                self._finish()
                out = _result(first, self._stderr, self._code, argv)
            self.stage = Stage._of(out)
        except BaseException:
            # Interrupted, or a report this package cannot read: the process
            # sees its input end and takes its view back.
            self._released = True
            if self._proc.returncode is None:
                self._finish()
            raise

    def _finish(self, line: bytes = b"") -> bytes:
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write(line)
            proc.stdin.close()
        except OSError:
            pass
        rest = proc.stdout.read()
        self._stderr = proc.stderr.read()
        self._code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        return rest

    def release(self, *, spare: bool = False) -> bool:
        """Discards the view; returns whether its process removed it.

        That is on this call, or on a termination signal the process got
        before it (then nothing is left to do, and nothing is raised).

        With `spare`, the store keeps the view whole for the next checkout of
        its snapshot (see `Store.discard`): only when no process and no
        sandbox mount still uses it.
        """
        if self._released:
            return False
        self._released = True
        rest = self._finish(_release_line(spare))
        if self.stage.view is None:
            return False
        return bool(_result(rest, self._stderr, self._code, self._argv)["removed"])

    def __enter__(self) -> Stage:
        return self.stage

    def __exit__(self, *exc: object) -> None:
        self.release()


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

    def _argv(self, *args: str) -> list[str]:
        argv = [self.binary, "--json"]
        if self.location is not None:
            argv += ["--store", str(self.location)]
        if self.trust_store:
            argv.append("--trust-store")
        return argv + list(args)

    def run(self, *args: str) -> dict[str, Any]:
        """Runs one command with `--json` and returns its object; raises on an error object."""
        argv = self._argv(*args)
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
        return _result(proc.stdout, proc.stderr, proc.returncode, argv)

    def _typed(self, *args: str) -> dict[str, Any]:
        """`run`, for a typed method: an error's message names keyword arguments, not CLI flags."""
        try:
            return self.run(*args)
        except Error as exc:
            raise _with_keywords(exc) from None

    def ingest(
        self,
        source: Optional[StrPath] = None,
        version: Optional[str] = None,
        *,
        bounds: Optional[Bounds] = None,
        git: Optional[StrPath] = None,
        rev: Optional[str] = None,
        plugin: Optional[str] = None,
        subdir: Optional[str] = None,
        sign_with: Optional[StrPath] = None,
        refuse_secrets: bool = False,
    ) -> Snapshot:
        """Validates a release as the reference does and stores it.

        The release is the directory `source`, or, with `git` (a repository)
        and `rev` (a tag, branch or commit), that revision's tree read from
        the repository's objects: at its root, at `subdir`, or where its
        marketplace puts `plugin`. Either way the snapshot keeps a source
        record naming the commit (`Snapshot.ingest.sources`).

        With `sign_with` (a private key file from `generate_key`), the
        snapshot is signed too: `attestations` lists the attestation.

        A kept file whose content looks like a private key or a token is
        listed in `Snapshot.ingest.secrets_by_content`; with
        `refuse_secrets`, the release is refused instead (`Rejected`, rule
        `secret-content`) and nothing is recorded.
        """
        extra = (
            _bounds(bounds)
            + _git_args(source, git, rev, plugin, subdir)
            + _sign_args(sign_with)
            + _secrets_args(refuse_secrets)
        )
        if version is None:
            raise TypeError("ingest() needs a version")
        version = _str("version", version)
        where = [] if git is not None else ["--", _path("source", source)]
        out = self._typed("ingest", "--version", version, *extra, *where)
        return Snapshot(Provenance._of(out["provenance"]), IngestStats._of(out["ingest"]))

    def digest(self, source: StrPath, version: str, *, bounds: Optional[Bounds] = None) -> Provenance:
        """Validates a release and returns its provenance, storing nothing."""
        extra = _bounds(bounds)
        source, version = _path("source", source), _str("version", version)
        out = self._typed("digest", "--version", version, *extra, "--", source)
        return Provenance._of(out["provenance"])

    @overload
    def checkout(
        self,
        digest: str,
        dest: StrPath,
        *,
        method: Optional[str] = None,
        writable: Literal[False] = False,
        max_fallback_bytes: Optional[int] = None,
    ) -> View: ...

    @overload
    def checkout(
        self,
        digest: str,
        dest: StrPath,
        *,
        method: Optional[str] = None,
        writable: Literal[True],
        max_fallback_bytes: Optional[int] = None,
    ) -> WritableCopy: ...

    def checkout(
        self,
        digest: str,
        dest: StrPath,
        *,
        method: Optional[str] = None,
        writable: bool = False,
        max_fallback_bytes: Optional[int] = None,
    ) -> Union[View, WritableCopy]:
        """Makes a frozen read-only view of `digest` at `dest`, which must not exist.

        With `writable`, a writable copy instead (of any kind): every file
        reflinked from its object, or copied where the filesystem cannot
        reflink, those copies bounded by `max_fallback_bytes` (default and
        ceiling 2 GiB); a `WritableCopy` is returned. Nothing of it is
        recorded: remove it as any directory.
        """
        if not isinstance(writable, bool):
            raise TypeError(f"writable must be a bool, not {type(writable).__name__}")
        args = ["checkout"]
        if method is not None:
            args += ["--method", _str("method", method)]
        if writable:
            args.append("--writable")
        args += _fallback_args(max_fallback_bytes)
        where = ["--", _str("digest", digest), _path("dest", dest)]
        if writable or max_fallback_bytes is not None:
            return WritableCopy._of(self._typed_tree(*args, *where))
        out = self._typed(*args, *where)
        return View(Path(out["view"]), out["manifest_digest"], out["linked"], out["copied"], out)

    def discard(self, view: StrPath, *, spare: bool = False) -> bool:
        """Removes a view made by `checkout`; returns whether this call removed it.

        With `spare`, the store keeps the view whole for the next checkout of
        its snapshot (which checks it first) instead of deleting its files:
        only when no process and no sandbox mount still uses the view.
        """
        out = self._typed(*_discard_args(spare), "--", _path("view", view))
        return bool(out["removed"])

    @contextmanager
    def view(self, digest: str, parent: StrPath, *, prefix: str = "cestore-view-") -> Iterator[View]:
        """Checks `digest` out in a new directory under `parent` and discards it on exit.

        The view is discarded also when the body raises; a checkout that fails
        leaves nothing behind.
        """
        made = self.checkout(digest, _fresh_path(Path(_path("parent", parent)), _str("prefix", prefix)))
        try:
            yield made
        finally:
            self.discard(made.path)

    def path(self, digest: str) -> Path:
        """The store's shared frozen view of `digest`, made once when absent.

        For a tree kind: a `tree`'s entries; a `dependencies` list's
        `<index>/payload` trees (`00000/payload` is the first dependency's
        mount source); a `task`'s `sandbox-copy/` and `dependencies/`.
        """
        return Path(self._typed("path", "--", _str("digest", digest))["path"])

    def show(self, digest: str) -> SnapshotInfo:
        """What the store knows about `digest`.

        For a tree kind, also its contents, read from its stored manifest (and
        for a `task`, from the manifests it names).
        """
        out = self._typed("show", "--", _str("digest", digest))
        profile = out.get("profile", "ce")
        contents: dict[str, Any] = {}
        if profile == "tree":
            contents["entries"] = self._tree_entries(out["provenance"]["manifest_digest"])
        elif profile == "dependencies":
            contents["dependencies"] = self._dependencies(out["provenance"]["manifest_digest"])
        elif profile == "task":
            task = TaskIdentity._of(self._stored(out["provenance"]["manifest_digest"], "task"))
            contents["task"] = task
            contents["entries"] = self._tree_entries(task.manifest_digest)
            contents["dependencies"] = self._dependencies(task.dependency_manifest_digest)
        return SnapshotInfo(
            Provenance._of(out["provenance"]),
            out["first_ingested_at"],
            out["last_ingested_at"],
            out["ingest_count"],
            tuple(ViewRecord._of(v) for v in out["views"]),
            tuple(SourceEntry._of(e) for e in out["sources"]),
            tuple(SignedBy._of(a) for a in out.get("attestations") or ()),
            profile,
            HarnessDigests._of(out.get("harness_digests")),
            **contents,
        )

    def _stored(self, digest: str, profile: str) -> Any:
        """The JSON of the stored manifest of a tree-kind snapshot (`show --manifest`)."""
        out = self._typed("show", "--manifest", "--", digest)
        return parse_stored(profile, out["canonical_manifest"])

    def _tree_entries(self, digest: str) -> tuple[TreeEntry, ...]:
        return tuple(TreeEntry._of(e) for e in self._stored(digest, "tree"))

    def _dependencies(self, digest: str) -> tuple[Dependency, ...]:
        listed = self._stored(digest, "dependencies")["dependencies"]
        return tuple(Dependency._stored(i, d) for i, d in enumerate(listed))

    def ingest_tree(
        self,
        repo: StrPath,
        copy: Optional[Sequence[str]] = None,
        *,
        name: Optional[str] = None,
        limits: Optional[TreeLimits] = None,
    ) -> TreeIngest:
        """Captures the `sandbox_copy` paths `copy` of `repo` as the harness does and records a `tree` snapshot.

        `copy` are paths relative to `repo`; None captures every name at its
        top level. An empty `copy` is refused here (ValueError): the command
        line reads no path as every name, and an empty `sandbox_copy` is a
        task's (`ingest_task`). A path the harness refuses raises `Rejected`,
        with the harness's `rule` and message; nothing is recorded.
        """
        args = ["ingest", "--profile", "tree", *_tree_common(name, limits)]
        if copy is not None:
            paths = _strs("copy", copy)
            if not paths:
                raise ValueError("copy=[] names no path: give None for every top-level name, or use ingest_task")
            args += [f"--copy={rel}" for rel in paths]
        return TreeIngest._of(self._typed_tree(*args, "--", _path("repo", repo)))

    def ingest_dependencies(
        self,
        repo: StrPath,
        dependencies: Sequence[tuple[str, str]],
        *,
        name: Optional[str] = None,
        limits: Optional[TreeLimits] = None,
    ) -> DependenciesIngest:
        """Captures the dependency list `dependencies` ((source, target) pairs, in order) of `repo`.

        Records a `dependencies` snapshot (even for an empty list): its
        digest is the harness's `sandbox_dependency_manifest_digest`.
        """
        if isinstance(dependencies, (str, bytes)) or not isinstance(dependencies, Sequence):
            raise TypeError(f"dependencies must be a sequence of (source, target), not {type(dependencies).__name__}")
        args = ["ingest", "--profile", "dependency", *_tree_common(name, limits)]
        for pair in dependencies:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
                raise TypeError(f"each dependency must be a (source, target) pair, not {pair!r}")
            source, target = pair
            args += [f"--source={_str('source', source)}", f"--target={_str('target', target)}"]
        return DependenciesIngest._of(self._typed_tree(*args, "--", _path("repo", repo)))

    def ingest_runtime(
        self,
        checkout: StrPath,
        *,
        rules: str = "seed",
        version: Optional[str] = None,
        name: Optional[str] = None,
        limits: Optional[TreeLimits] = None,
    ) -> RuntimeIngest:
        """Records the GitNexus runtime of `checkout` (holding gitnexus/ and gitnexus-shared/) as one `tree` snapshot.

        The runtime is first checked as `rules` check it: `seed` (its
        package.json must carry `version`, the pinned 1.6.9 by default) or
        `upstream` (any version; a linked worktree may borrow the primary
        checkout's node_modules). A refusal raises `Rejected` with its rule;
        nothing is recorded.
        """
        if rules not in ("seed", "upstream"):
            raise ValueError(f"rules must be 'seed' or 'upstream', not {rules!r}")
        args = ["ingest", "--profile", "runtime", f"--gitnexus-rules={rules}", *_tree_common(name, limits)]
        if version is not None:
            args.append(f"--gitnexus-version={_str('version', version)}")
        return RuntimeIngest._of(self._typed_tree(*args, "--", _path("checkout", checkout)))

    def ingest_environment(
        self,
        members: Union[Mapping[str, str], Sequence[tuple[str, str]]],
        *,
        name: Optional[str] = None,
        sign_with: Optional[StrPath] = None,
    ) -> EnvironmentIngest:
        """Records stored snapshots as one environment: `members` maps each results-row field (its role) to a digest.

        A list of `(role, digest)` pairs may name a role twice. Each digest
        must be a stored snapshot (`NotFound` otherwise, exit 4); a role is
        1 to 64 of `a-z`, `0-9` and `_` (`UsageError` otherwise). The same
        set again records nothing new. With `sign_with` (a private key
        file), the environment's manifest is signed; `sign(digest, key)`
        signs it with every member.
        """
        pairs = list(members.items()) if isinstance(members, Mapping) else list(members)
        args = ["ingest", "--profile", "environment"]
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(f"members must be (role, digest) pairs, not {pair!r}")
            role, digest = pair
            args.append(f"--member={_str('role', role)}={_str('digest', digest)}")
        if name is not None:
            args.append(f"--name={_str('name', name)}")
        return EnvironmentIngest._of(self._typed(*args, *_sign_args(sign_with)))

    def ingest_task(
        self,
        repo: StrPath,
        task: Union[StrPath, Mapping[str, Any]],
        resolved_sha: str,
        *,
        harness_root: Optional[StrPath] = None,
        expect_binding: Union[StrPath, Mapping[str, Any], None] = None,
        name: Optional[str] = None,
        limits: Optional[TreeLimits] = None,
    ) -> TaskIngest:
        """Captures a whole task as the harness's `TaskAssetCache.prepare` does: tree, dependencies, then the task.

        `task` is the task JSON (a file, or its object): its `sandbox_copy`
        and `sandbox_dependencies` are read. `harness_root` is where the
        harness's own paths (`eval/workflow_bench/review_cases/...`) are read
        from. With `expect_binding` (a task binding, a file or its object),
        the capture must give its two dependency digests, else `Rejected`.
        """
        resolved_sha = _str("resolved_sha", resolved_sha)
        with tempfile.TemporaryDirectory(prefix="cestore-task-") as work:
            args = [
                "ingest",
                "--profile",
                "task",
                f"--task={_json_file('task', task, Path(work) / 'task.json')}",
                f"--resolved-sha={resolved_sha}",
                *_tree_common(name, limits),
            ]
            if harness_root is not None:
                args.append(f"--harness-root={_path('harness_root', harness_root)}")
            if expect_binding is not None:
                binding = _json_file("expect_binding", expect_binding, Path(work) / "binding.json")
                args.append(f"--expect-binding={binding}")
            out = self._typed_tree(*args, "--", _path("repo", repo))
        return TaskIngest._of(out)

    def materialize(
        self, task_digest: str, clone: StrPath, *, max_fallback_bytes: Optional[int] = None
    ) -> Materialized:
        """Replaces every declared `sandbox_copy` root of the task `task_digest` in `clone` with a writable copy.

        As the harness's `TaskAssetSnapshot.materialize`: the copies are made
        beside `clone` first, and hazards it refuses (a symlink on the way, a
        special file) raise `Rejected` with its message. Files are reflinked,
        or copied where the filesystem cannot (at most `max_fallback_bytes`
        bytes, default and ceiling 2 GiB).
        """
        args = ["materialize", *_fallback_args(max_fallback_bytes)]
        out = self._typed_tree(*args, "--", _str("task_digest", task_digest), _path("clone", clone))
        return Materialized._of(out)

    def _typed_tree(self, *args: str) -> dict[str, Any]:
        """`_typed` for the tree commands: their own flags named as this API's keywords too."""
        try:
            return self.run(*args)
        except Error as exc:
            if exc.path is None:
                message = _FLAG.sub(lambda m: _TREE_KEYWORDS.get(m.group(0), m.group(0)), exc.message)
                if message != exc.message:
                    exc.message = message
                    exc.args = (message, *exc.args[1:])
            raise _with_keywords(exc) from None

    def files(self, digest: str) -> list[FileEntry]:
        """The files of `digest`, in manifest order."""
        out = self._typed("show", "--files", "--", _str("digest", digest))
        return [FileEntry(f["path"], f["sha256"], f["size"], f["executable"]) for f in out["files"]]

    def verify(self, *digests: str, tree: Optional[StrPath] = None) -> VerifyReport:
        """Re-hashes objects (all snapshots, or `digests`); a report, not an exception, on problems.

        With `tree`, audits that directory against the one digest given; the
        differences are in `problems`.
        """
        args = ["verify"]
        if tree is not None:
            args += ["--tree", _path("tree", tree)]
        out = self._typed(*args, "--", *[_str("digests", d) for d in digests])
        problems = out.get("problems", out.get("differences", []))
        return VerifyReport(
            bool(out["ok"]),
            int(out.get("snapshots_checked", 1 if tree is not None else 0)),
            int(out.get("objects_checked", 0)),
            tuple(Problem._of(p) for p in problems),
            out,
        )

    def check_source(self, digest: str, repo: StrPath) -> SourceCheck:
        """Re-derives `digest` from the commit its source record names, read from the local clone `repo`.

        A report, not an exception, when the digests differ
        (`SourceCheck.equal` is false).
        """
        out = self.run("verify", "--source", _path("repo", repo), "--", _str("digest", digest))
        return SourceCheck._of(out)

    def audit(
        self,
        paths: Union[StrPath, Sequence[StrPath]],
        *,
        verify: bool = False,
        registry: Optional[str] = None,
        plain_http: bool = False,
        digest_field: Optional[str] = None,
        version_field: Optional[str] = None,
        arm_field: Optional[str] = None,
        require_clean_source: bool = False,
        source_repo: Optional[StrPath] = None,
        allow_malformed: bool = False,
        fields: Mapping[str, str] = {},
    ) -> AuditReport:
        """Checks every digest of results files (JSON Lines; `.gz`, `.zst`) against the store.

        A report, not an exception, when digests or rows have problems
        (`passed` is false); an exception when a file cannot be read. With
        `verify`, every object of each snapshot is re-hashed; with `registry`
        (`REGISTRY/REPOSITORY`), unknown digests are pulled from it. A field
        may be a dotted path (`ce_plugin.manifest_digest`). With
        `require_clean_source`, a digest without a clean git source record
        fails; with `source_repo` (a local clone), each digest is re-derived
        from its recorded commit and fails as `source-mismatch` when it differs.
        A line `json.loads` cannot read as a row fails the audit, since any
        digest in it was not audited; with `allow_malformed`, such lines are
        listed and counted but fail nothing. `fields` adds digest fields to
        the default table, or re-maps one (name to kind: `ce`, `tree`,
        `dependencies`, `task`, `dependencies-content` or `environment`), as
        `--field NAME=KIND` does.
        """
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        files = [os.fspath(p) for p in paths]
        if "-" in files:
            raise ValueError("Store.audit reads files; standard input (-) is for the CLI")
        args = ["audit"]
        if verify:
            args.append("--verify")
        if registry is not None:
            args += ["--registry", registry]
        if plain_http:
            args.append("--plain-http")
        if require_clean_source:
            args.append("--require-clean-source")
        if source_repo is not None:
            args += ["--source-repo", _path("source_repo", source_repo)]
        if allow_malformed:
            args.append("--allow-malformed")
        for flag, value in (
            ("--digest-field", digest_field),
            ("--version-field", version_field),
            ("--arm-field", arm_field),
        ):
            if value is not None:
                args += [flag, value]
        if not isinstance(fields, Mapping):
            raise TypeError(f"fields must be a mapping of field to kind, not {type(fields).__name__}")
        for name, kind in fields.items():
            args.append(f"--field={_str('fields', name)}={_str('fields', kind)}")
        out = self.run(*args, "--", *[_abs(f) for f in files])
        return AuditReport._of(out)

    def diff(self, a: str, b: str) -> list[Change]:
        """The files added, removed or changed from snapshot `a` to snapshot `b`."""
        out = self._typed("diff", "--", _str("a", a), _str("b", b))
        return [Change(c["change"], c["path"], c) for c in out["changes"]]

    def generate_key(self, path: StrPath) -> GeneratedKey:
        """Writes a new ed25519 key pair: `path` (the private key, mode 0600) and `path`.pub.

        Neither file may exist. The private key never leaves the file: give
        its path to `sign`, or as `sign_with`; give the `.pub` file to whoever
        checks the attestations.
        """
        out = self._typed("key", "generate", "--", _path("path", path))
        return GeneratedKey(Path(out["private_key"]), Path(out["public_key"]), out["keyid"])

    def sign(self, digest: str, key: StrPath) -> SignReport:
        """Signs a stored snapshot with the private key file `key`; the attestation is kept beside it.

        Raises `Untrusted` (kind `bad-key`) when `key` is no private key, or
        when others can read it or another user owns it.
        """
        out = self._typed("sign", "--key", _path("key", key), "--", _str("digest", digest))
        return SignReport._of(out)

    def attestations(self, digest: str, *, trusted_keys: Sequence[StrPath] = ()) -> tuple[Attestation, ...]:
        """The attestations of a snapshot; with `trusted_keys` (public key files), whether each vouches for it.

        Each one's `verified` is None without `trusted_keys`; with them, it
        says whether the attestation's signature verifies under one of them
        and its subject is exactly the snapshot's digest.
        """
        if isinstance(trusted_keys, (str, os.PathLike)) or not isinstance(trusted_keys, Sequence):
            raise TypeError(f"trusted_keys must be a sequence of paths, not {type(trusted_keys).__name__}")
        args = ["attestations"]
        for pub in trusted_keys:
            args += ["--trusted-key", _path("trusted_keys", pub)]
        out = self._typed(*args, "--", _str("digest", digest))
        return tuple(Attestation._of(a) for a in out["attestations"])

    def stage(
        self,
        arms: Sequence[str],
        *,
        plugin_dir: Optional[StrPath] = None,
        plugin_version: Optional[str] = None,
        digest: Optional[str] = None,
        dest: Optional[StrPath] = None,
        gitnexus_root: Optional[StrPath] = None,
        gitnexus_rules: Optional[str] = None,
        strict_arms: bool = False,
        bounds: Optional[Bounds] = None,
        sign_with: Optional[StrPath] = None,
        refuse_secrets: bool = False,
        gitnexus_runtime: Optional[str] = None,
        environment: Optional[str] = None,
        members: Union[Mapping[str, str], Sequence[tuple[str, str]]] = (),
    ) -> Stage:
        """Stages a run: checks the arms, ingests the release, makes its view, lists every arm's mounts.

        With `gitnexus_root`, the GitNexus runtime there is checked, ingested
        and mounted from its snapshot's view in the store
        (`Stage.gitnexus_runtime_manifest_digest` names it); `gitnexus_runtime`
        names a stored runtime snapshot to mount instead, the checkout (if
        given) still checked but not read.
        `gitnexus_rules` is the harness revision whose GitNexus runtime check
        applies: `"seed"` (the default) or `"upstream"`.
        With `environment=NAME`, the release and the runtime staged, and
        each of `members` (role to digest: `task_asset_snapshot_digest`, …),
        are recorded as one environment (`Stage.environment`).
        With `sign_with` (a private key file), the staged snapshot is signed,
        as `ingest(..., sign_with=...)` signs it; the key is checked first.
        With `refuse_secrets`, a kept file whose content looks like a secret
        refuses the release, as `ingest(..., refuse_secrets=True)` does.
        """
        args = _stage_args(
            arms, plugin_dir, plugin_version, digest, dest, gitnexus_root, gitnexus_rules, strict_arms, bounds
        ) + _sign_args(sign_with) + _secrets_args(refuse_secrets)
        if gitnexus_runtime is not None:
            args += ["--gitnexus-runtime", _str("gitnexus_runtime", gitnexus_runtime)]
        if environment is not None:
            args += ["--environment", _str("environment", environment)]
        pairs = list(members.items()) if isinstance(members, Mapping) else list(members)
        for role, digest in pairs:
            args.append(f"--member={_str('role', role)}={_str('digest', digest)}")
        return Stage._of(self._typed(*args))

    def hold_stage(
        self,
        arms: Sequence[str],
        *,
        dest: StrPath,
        plugin_dir: Optional[StrPath] = None,
        plugin_version: Optional[str] = None,
        digest: Optional[str] = None,
        gitnexus_root: Optional[StrPath] = None,
        gitnexus_rules: Optional[str] = None,
        strict_arms: bool = False,
        bounds: Optional[Bounds] = None,
        sign_with: Optional[StrPath] = None,
        refuse_secrets: bool = False,
    ) -> HeldStage:
        """`stage` with a view at `dest` that lives until `HeldStage.release` (or the `with` block's end).

        One process stages and later discards: use it for a sweep, which
        stages once and discards once.
        """
        args = _stage_args(
            arms, plugin_dir, plugin_version, digest, dest, gitnexus_root, gitnexus_rules, strict_arms, bounds
        ) + _sign_args(sign_with) + _secrets_args(refuse_secrets)
        try:
            return HeldStage(self._argv(*args, "--hold"))
        except Error as exc:
            raise _with_keywords(exc) from None


# The tree commands' own flags, as this API's keywords name them.
_TREE_KEYWORDS = {
    "--max-entries": "TreeLimits(entries=...)",
    "--max-path-bytes": "TreeLimits(path_bytes=...)",
    "--max-bytes": "TreeLimits(bytes=...)",
    "--max-fallback-bytes": "max_fallback_bytes",
    "--writable": "writable",
    "--copy": "copy",
    "--source": "dependencies",
    "--target": "dependencies",
    "--task": "task",
    "--resolved-sha": "resolved_sha",
    "--harness-root": "harness_root",
    "--expect-binding": "expect_binding",
    "--name": "name",
}


def _tree_common(name: Optional[str], limits: Optional[TreeLimits]) -> list[str]:
    """The flags every `ingest --profile` takes: the snapshot's name and the capture's bounds."""
    out = []
    if name is not None:
        out.append(f"--name={_str('name', name)}")
    if limits is not None:
        if not isinstance(limits, TreeLimits):
            raise TypeError(f"limits must be a cestore.TreeLimits, not {type(limits).__name__}")
        out += limits.args()
    return out


def _fallback_args(max_fallback_bytes: Optional[int]) -> list[str]:
    if max_fallback_bytes is None:
        return []
    if isinstance(max_fallback_bytes, bool) or not isinstance(max_fallback_bytes, int):
        raise TypeError(f"max_fallback_bytes must be an int, not {type(max_fallback_bytes).__name__}")
    return ["--max-fallback-bytes", str(max_fallback_bytes)]


def _strs(name: str, values: Any) -> list[str]:
    """`values`, a sequence of str (not one str); a TypeError naming `name` otherwise."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of str, not {type(values).__name__}")
    return [_str(name, v) for v in values]


def _json_file(name: str, value: Any, scratch: Path) -> str:
    """The path of a JSON file: `value` itself (a path), or `value` (a mapping) written to `scratch`."""
    if isinstance(value, Mapping):
        scratch.write_text(json.dumps(dict(value)), encoding="utf-8")
        return str(scratch)
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path or a mapping, not {type(value).__name__}")
    return _abs(value)


def _secrets_args(refuse_secrets: bool) -> list[str]:
    if not isinstance(refuse_secrets, bool):
        raise TypeError(f"refuse_secrets must be a bool, not {type(refuse_secrets).__name__}")
    return ["--refuse-secrets"] if refuse_secrets else []


def _stage_args(
    arms: Sequence[str],
    plugin_dir: Optional[StrPath],
    plugin_version: Optional[str],
    digest: Optional[str],
    dest: Optional[StrPath],
    gitnexus_root: Optional[StrPath],
    gitnexus_rules: Optional[str],
    strict_arms: bool,
    bounds: Optional[Bounds],
) -> list[str]:
    if isinstance(arms, str) or not isinstance(arms, Sequence):
        raise TypeError(f"arms must be a sequence of str, not {type(arms).__name__}")
    args = ["stage"]
    for arm in arms:
        args += ["--arm", _str("arms", arm)]
    if plugin_dir is not None:
        args += ["--plugin-dir", _path("plugin_dir", plugin_dir)]
    if plugin_version is not None:
        args += ["--plugin-version", _str("plugin_version", plugin_version)]
    if digest is not None:
        args += ["--digest", _str("digest", digest)]
    if dest is not None:
        args += ["--dest", _path("dest", dest)]
    if gitnexus_root is not None:
        args += ["--gitnexus-root", _path("gitnexus_root", gitnexus_root)]
    if gitnexus_rules is not None:
        args += ["--gitnexus-rules", _str("gitnexus_rules", gitnexus_rules)]
    if strict_arms:
        args.append("--strict-arms")
    return args + _bounds(bounds)


def _sign_args(sign_with: Optional[StrPath]) -> list[str]:
    """The CLI flag that signs what an ingest or a stage stores (none for None)."""
    if sign_with is None:
        return []
    return ["--sign-with", _path("sign_with", sign_with)]


def _result(stdout: bytes, stderr: bytes, code: int, argv: list[str]) -> dict[str, Any]:
    """The object a command printed; raises on an error object, or on none."""
    try:
        obj = json.loads(stdout)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        message = stderr.decode(errors="replace").strip()
        raise Error(
            f"cestore printed no JSON object (exit {code}): {message}",
            code=code,
            kind="unknown",
            argv=argv,
        )
    if not obj.get("ok", False) and isinstance(obj.get("error"), dict):
        raise from_json(obj["error"], argv)
    return obj


# A flag as a word of its own, not part of a path that happens to hold one.
_FLAG = re.compile(r"(?<![^\s(,'\"])--[a-z][a-z0-9-]*(?![\w/-])")


def _with_keywords(exc: Error) -> Error:
    """`exc` with the CLI flags its message names spelled as the keyword arguments that set them.

    An error about a path keeps its message: the path is the user's, as it is.
    """
    if exc.path is not None or not _FLAG.search(exc.message):
        return exc
    # The binary's table of each flag's keyword (`cestore rules`).
    keywords = _contract.flag_keywords(exc.argv[0] if exc.argv else None)
    message = _FLAG.sub(lambda m: keywords.get(m.group(0), m.group(0)), exc.message)
    if message != exc.message:
        exc.message = message
        exc.args = (message, *exc.args[1:])
    return exc


def _str(name: str, value: Any, *, optional: bool = False) -> Any:
    """`value`, which must be a str (or None when `optional`); a TypeError naming `name` otherwise."""
    if (value is None and optional) or isinstance(value, str):
        return value
    raise TypeError(f"{name} must be a str, not {type(value).__name__}")


def _path(name: str, value: Any) -> str:
    """`value` as an absolute path; a TypeError naming `name` when it is no str or os.PathLike."""
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike, not {type(value).__name__}")
    return _abs(value)


def _git_args(
    source: Optional[StrPath],
    git: Optional[StrPath],
    rev: Optional[str],
    plugin: Optional[str],
    subdir: Optional[str],
) -> list[str]:
    """The CLI flags that read a release from git, after checking that exactly one of `source` and `git` is given."""
    if git is None:
        if source is None:
            raise TypeError("ingest() needs a source directory, or git= and rev=")
        for name, value in (("rev", rev), ("plugin", plugin), ("subdir", subdir)):
            if value is not None:
                raise TypeError(f"{name}= reads a release from git: give git= too")
        return []
    if source is not None:
        raise TypeError("give a source directory or git=, not both")
    if rev is None:
        raise TypeError("git= needs rev=, the revision to read")
    if plugin is not None and subdir is not None:
        raise TypeError("give plugin= or subdir=, not both")
    out = ["--git", _path("git", git), "--rev", _str("rev", rev)]
    if plugin is not None:
        out += ["--plugin", _str("plugin", plugin)]
    if subdir is not None:
        out += ["--subdir", _str("subdir", subdir)]
    return out


def _bounds(bounds: Any) -> list[str]:
    """The CLI flags of `bounds` (a Bounds, or None)."""
    if bounds is None:
        return []
    if not isinstance(bounds, Bounds):
        raise TypeError(f"bounds must be a cestore.Bounds, not {type(bounds).__name__}")
    return bounds.args()


def _abs(path: StrPath) -> str:
    return os.path.abspath(os.fspath(path))


def _fresh_path(parent: Path, prefix: str) -> Path:
    """A path under `parent` that did not exist a moment ago, named like `mkdtemp`'s."""
    made = tempfile.mkdtemp(prefix=prefix, dir=parent)
    os.rmdir(made)
    return Path(made)
