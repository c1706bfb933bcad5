"""The decisions the `cestore` binary makes, as it prints them (`cestore rules --json`).

The package keeps no copy of them: the exact-version rule, the CE arms, the
bounds and their flags, and the keyword argument each CLI flag stands for
are read from the binary once per binary and process, when first needed.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
from typing import Any, Optional

from ._errors import Error
from ._find import find_binary


@functools.lru_cache(maxsize=None)
def _rules_of(binary: str) -> dict[str, Any]:
    done = subprocess.run(
        [binary, "rules", "--json"], stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict) or answer.get("ok") is not True:
        message = done.stderr.decode(errors="replace").strip()
        raise Error(
            f"cestore printed no rules (exit {done.returncode}): {message}",
            code=done.returncode,
            kind="unknown",
            argv=[binary, "rules", "--json"],
        )
    return answer


def rules(binary: Optional[str] = None) -> dict[str, Any]:
    """The binary's answer to `cestore rules --json` (`binary`: the one `find_binary` finds)."""
    return _rules_of(binary if binary is not None else find_binary())


@functools.lru_cache(maxsize=None)
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def exact_version(binary: Optional[str] = None) -> re.Pattern[str]:
    """The exact-version rule as a pattern to `fullmatch` a version with."""
    return _pattern(rules(binary)["exact_version"]["pattern"])


def bounds(binary: Optional[str] = None) -> dict[str, tuple[str, int]]:
    """Each bound by the reference's constant: its `Bounds` field and its limit."""
    return {b["constant"]: (b["field"], int(b["limit"])) for b in rules(binary)["bounds"]}


def ce_arms(binary: Optional[str] = None) -> tuple[str, ...]:
    """The arms that see the plugin, in the binary's order."""
    return tuple(rules(binary)["ce_arms"])


def rule_messages(binary: Optional[str] = None) -> dict[str, str]:
    """Each rule's message with `{path}`, `{os error}` and the like for what varies."""
    return {r["rule"]: r["message"] for r in rules(binary)["rules"]}


def flag_keywords(binary: Optional[str] = None) -> dict[str, str]:
    """Each CLI flag the API passes, with the keyword argument (or `Bounds` field) it stands for."""
    return {f["flag"]: f["keyword"] for f in rules(binary)["flags"]}
