"""Locate the `cestore` binary, as uv's `find_uv_bin` locates uv."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig


class BinaryNotFound(FileNotFoundError):
    """No `cestore` binary was found."""


def find_binary() -> str:
    """Return the path of the `cestore` binary.

    `CESTORE_BIN` wins when set. Otherwise: the scripts directory of the
    running Python (where `pip install` puts the wheel's binary), the base
    prefix's, the user scheme's (`~/.local/bin`), the `bin` beside a
    `--prefix` or `--target` install, and last `PATH`.
    """
    override = os.environ.get("CESTORE_BIN")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return os.path.abspath(override)
        raise BinaryNotFound(f"CESTORE_BIN names no executable file: {override}")

    exe = "cestore" + (sysconfig.get_config_var("EXE") or "")
    module = os.path.dirname(os.path.abspath(__file__))
    targets = [
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        sysconfig.get_path("scripts", scheme=_user_scheme()),
        _join(_matching_parents(module, "lib/python*/site-packages/cestore"), "bin"),
        _join(_matching_parents(module, "cestore"), "bin"),
    ]
    seen: list[str] = []
    for target in targets:
        if not target or target in seen:
            continue
        seen.append(target)
        path = os.path.join(target, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    on_path = shutil.which(exe)
    if on_path:
        return on_path
    listed = os.linesep.join(f" - {t}" for t in [*seen, "PATH"])
    raise BinaryNotFound(f"could not find the cestore binary in any of:{os.linesep}{listed}")


def _user_scheme() -> str:
    if sys.version_info >= (3, 10):
        return sysconfig.get_preferred_scheme("user")
    if os.name == "nt":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"


def _matching_parents(path: str | None, match: str) -> str | None:
    """The parent of `path` once `match` (with `/` and `*`) is trimmed from its end."""
    from fnmatch import fnmatch

    if not path:
        return None
    parts = path.split(os.sep)
    match_parts = match.split("/")
    if len(parts) < len(match_parts):
        return None
    if not all(fnmatch(p, m) for p, m in zip(reversed(parts), reversed(match_parts))):
        return None
    return os.sep.join(parts[: -len(match_parts)])


def _join(path: str | None, *parts: str) -> str | None:
    return os.path.join(path, *parts) if path else None
