"""Exceptions raised from the CLI's JSON errors (docs/exit-codes.md)."""

from __future__ import annotations

from typing import Any, Optional


class Error(Exception):
    """A `cestore` command failed; carries the fields of its JSON error."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        kind: str,
        rule: Optional[str] = None,
        path: Optional[str] = None,
        argv: Optional[list[str]] = None,
        reference_message: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.rule = rule
        self.path = path
        self.argv = argv or []
        #: The reference's own words for a broken rule, where the binary knows them exactly.
        self.reference_message = reference_message

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code}, kind={self.kind!r}, rule={self.rule!r}, "
            f"path={self.path!r}, message={self.message!r})"
        )


class Damaged(Error):
    """Exit 1, `integrity`: stored bytes or a view do not match what they should be."""


class UsageError(Error):
    """Exit 2, `usage`: the command line was wrong (a bad digest, a bad flag value)."""


class Rejected(Error):
    """Exit 3, `rejected`: the input breaks a rule; `rule` says which."""


class NotFound(Error):
    """Exit 4, `not-found` or `unknown-digest`: something named does not exist."""


class Ambiguous(Error):
    """Exit 5, `ambiguous-digest`: a digest prefix or `@VERSION` matches several snapshots.

    `matches` holds what it matches, as the JSON error lists them: a snapshot's
    `manifest_digest`, `version` and `ingested_at`, or (`find --object`) a
    stored content's `sha256`.
    """

    matches: tuple[dict[str, Any], ...] = ()


class Conflict(Error):
    """Exit 6, `conflict`: the destination exists, views are still recorded, and the like."""


class StoreError(Error):
    """Exit 7 (`io`, `catalogue`, `bad-store`, ...): the store failed."""


class RemoteError(StoreError):
    """Exit 8, `remote`: a registry could not be reached or answered something unusable."""


class Untrusted(Error):
    """Exit 9 (`untrusted`, `bad-key`): no attestation vouches for a snapshot under a key
    trusted, or a key file is not a key, or a private key file is not its owner's alone."""


# Every JSON error `kind` with its exit code and exception. `cestore exit-codes`
# prints the binary's table; tests/test_errors.py checks this copy against it.
_KINDS: dict[str, tuple[int, type[Error]]] = {
    "integrity": (1, Damaged),
    "usage": (2, UsageError),
    "rejected": (3, Rejected),
    "not-found": (4, NotFound),
    "unknown-digest": (4, NotFound),
    "ambiguous-digest": (5, Ambiguous),
    "conflict": (6, Conflict),
    "io": (7, StoreError),
    "catalogue": (7, StoreError),
    "catalogue-lost": (7, StoreError),
    "catalogue-too-new": (7, StoreError),
    "bad-store": (7, StoreError),
    "remote": (8, RemoteError),
    "untrusted": (9, Untrusted),
    "bad-key": (9, Untrusted),
}

# The exception of each exit code, for a kind this package does not know yet.
_BY_CODE: dict[int, type[Error]] = {code: cls for code, cls in _KINDS.values()}


def from_json(error: dict[str, Any], argv: list[str]) -> Error:
    """The exception for one JSON `error` object."""
    code = int(error.get("code", 0))
    kind = str(error.get("kind", ""))
    known = _KINDS.get(kind)
    cls = known[1] if known else _BY_CODE.get(code, Error)
    exc = cls(
        str(error.get("message", "")),
        code=code,
        kind=kind,
        rule=error.get("rule"),
        path=error.get("path"),
        argv=argv,
        reference_message=error.get("reference_message"),
    )
    if isinstance(exc, Ambiguous):
        exc.matches = tuple(error.get("matches") or ())
    return exc
