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
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.kind = kind
        self.rule = rule
        self.path = path
        self.argv = argv or []

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
    """Exit 5, `ambiguous-digest`: a digest prefix matches several snapshots."""


class Conflict(Error):
    """Exit 6, `conflict`: the destination exists, views are still recorded, and the like."""


class StoreError(Error):
    """Exit 7 (`io`, `catalogue`, `bad-store`, ...): the store failed."""


class RemoteError(StoreError):
    """Exit 8, `remote`: a registry could not be reached or answered something unusable."""


_BY_CODE: dict[int, type[Error]] = {
    1: Damaged,
    2: UsageError,
    3: Rejected,
    4: NotFound,
    5: Ambiguous,
    6: Conflict,
    7: StoreError,
    8: RemoteError,
}


def from_json(error: dict[str, Any], argv: list[str]) -> Error:
    """The exception for one JSON `error` object."""
    code = int(error.get("code", 0))
    cls = _BY_CODE.get(code, Error)
    return cls(
        str(error.get("message", "")),
        code=code,
        kind=str(error.get("kind", "")),
        rule=error.get("rule"),
        path=error.get("path"),
        argv=argv,
    )
