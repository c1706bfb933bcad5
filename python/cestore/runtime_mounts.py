"""A drop-in for the benchmark harness's `runtime_mounts` module, backed by cestore.

It has the reference module's public names and behaviour: the same checks,
the same exception types and messages, the same provenance, and a snapshot
root that is a new directory under `destination_parent` named
`wfbench-ce-plugin-*`, holding exactly the kept files with the reference's
modes, and gone after the `with` block. The difference: one `cestore stage
--hold` process ingests the release into a cestore store (which keeps its
objects and records the ingest, so the digest can be audited later), checks
the root out, hard-linked from the store, and discards it when the block
ends (or when this process dies first).

Used as it is, the module has cestore's `SandboxError` and `ReadOnlyMount`
(the ones `task_assets` has too, as a harness has one of each). A
harness binds it into its own module with `bind(globals(), ...)`, which fills
that namespace with these names built on the harness's exception and mount
classes. Every function reads the constants (`MAX_CE_PLUGIN_*`,
`HARNESS_ROOT`, `SANDBOX_*`, `CESTORE_STORE`) from its namespace when it is
called, so a test may monkeypatch them.

When the environment variable `CESTORE_SIGNING_KEY` names a private key
file (`cestore key generate`), each staged snapshot, the plugin's and the
GitNexus runtime's, is also signed with it (`stage --sign-with`, `mounts
--sign-with`): its attestation is kept with it in the store. Unset
or empty, nothing is signed. A key that cannot be used (not a key, or
readable by others) fails the staging with the harness's `SandboxError`,
whose cause is the `cestore.Untrusted` naming the file.

The harness names its revision in `bind(..., revision=...)`. The two differ
only in `trusted_gitnexus_runtime_mounts`: at the seed's revision
(`"seed"`, the default) it takes no argument and requires the runtime to
carry `PINNED_GITNEXUS_VERSION`; at upstream's current revision
(`"upstream"`) it is `trusted_gitnexus_runtime_mounts(*, root=None)`, accepts
any non-empty version, and lets a linked git worktree borrow its primary
checkout's `gitnexus/node_modules`. At either revision `cestore mounts
--gitnexus-rules REVISION` makes the check; this module raises its refusal
with the revision's messages.

`HARNESS_ROOT` is the checkout holding `gitnexus/` and `gitnexus-shared/`.
The harness's module sets it to its own checkout (`bind(...,
harness_root=...)`); used as it is, this module's is the current directory
when it was imported.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from . import _contract, _errors
from ._sandbox import (
    SIGNING_KEY_ENV,
    ReadOnlyMount,
    SandboxError,
    environment_recorder,
    namespace_store,
    note_staged,
)
from ._sandbox import signing_key as _signing_key
from ._store import Bounds, HeldStage, Store

PINNED_GITNEXUS_VERSION = "1.6.9"
CE_ARMS = frozenset({"ce_workflow", "ce_workflow_direct", "ce_review"})
SANDBOX_CE_PLUGIN = "/opt/compound-engineering-plugin"
CE_PLUGIN_MANIFEST_SCHEMA_VERSION = 1
MAX_CE_PLUGIN_FILES = 2_048
MAX_CE_PLUGIN_FILE_BYTES = 2 * 1024 * 1024
MAX_CE_PLUGIN_TOTAL_BYTES = 16 * 1024 * 1024
MAX_CE_PLUGIN_PATH_BYTES = 1_024

# The constants above are the reference's, kept as literals: a harness
# imports them, `bind` copies them into its namespace and its tests
# monkeypatch them, all before (or without) any process. The decisions
# behind them are the binary's (`cestore rules`, read by `_contract`): the
# exact-version rule, the bounds' defaults, the arm that stages;
# tests/test_rules_pinned.py checks each literal against the binary's answer
# and the seed's module.
_SNAPSHOT_PREFIX = "wfbench-ce-plugin-"

#: The harness revisions `bind` knows: the seed's and upstream's current one.
REVISIONS = ("seed", "upstream")

_PUBLIC = (
    "PINNED_GITNEXUS_VERSION",
    "HARNESS_ROOT",
    "CE_ARMS",
    "SANDBOX_CE_PLUGIN",
    "SANDBOX_GITNEXUS",
    "SANDBOX_GITNEXUS_SHARED",
    "CE_PLUGIN_MANIFEST_SCHEMA_VERSION",
    "MAX_CE_PLUGIN_FILES",
    "MAX_CE_PLUGIN_FILE_BYTES",
    "MAX_CE_PLUGIN_TOTAL_BYTES",
    "MAX_CE_PLUGIN_PATH_BYTES",
    "CESTORE_STORE",
    "SandboxError",
    "ReadOnlyMount",
    "CePluginConfig",
    "CePluginSnapshot",
    "ce_plugin_mounts_for_arm",
    "ce_plugin_dir_for_arm",
    "trusted_gitnexus_runtime_mounts",
    "staged_gitnexus_runtime",
    "StagedGitNexusRuntime",
    "record_environment",
    "validate_ce_plugin_inputs",
    "staged_ce_plugin_snapshot",
)


@dataclass(frozen=True)
class StagedGitNexusRuntime:
    """The GitNexus runtime a process mounts: a snapshot in the store, read once."""

    #: The runtime snapshot's digest: a results row's `gitnexus_runtime_manifest_digest`.
    manifest_digest: str
    #: Its shared view in the store, which every runtime mount points into.
    view: Path
    #: Each component's path in the snapshot and the host path it was read from.
    components: tuple[tuple[str, Path], ...]


@dataclass(frozen=True)
class CePluginConfig:
    """Explicit operator input for one pinned CE plugin release."""

    source: Path
    version: str


def _populate(ns: MutableMapping[str, Any], revision: str = "seed") -> None:
    """Defines the public functions and classes in `ns`, reading constants from it at call time."""

    def err(message: str) -> BaseException:
        return ns["SandboxError"](message)

    @dataclass(frozen=True)
    class CePluginSnapshot:
        """A bounded read-only plugin tree and its content identity."""

        root: Path
        version: str
        manifest_digest: str
        file_count: int
        total_bytes: int

        @property
        def mount(self) -> Any:
            return ns["ReadOnlyMount"](source=self.root, target=ns["SANDBOX_CE_PLUGIN"])

        @property
        def provenance(self) -> dict[str, Any]:
            return {
                "name": "compound-engineering",
                "version": self.version,
                "manifest_schema_version": ns["CE_PLUGIN_MANIFEST_SCHEMA_VERSION"],
                "manifest_digest": self.manifest_digest,
                "file_count": self.file_count,
                "total_bytes": self.total_bytes,
            }

    CePluginSnapshot.__module__ = str(ns.get("__name__", __name__))
    CePluginSnapshot.__qualname__ = "CePluginSnapshot"

    def ce_plugin_mounts_for_arm(arm: str, snapshot: Optional[CePluginSnapshot]) -> tuple[Any, ...]:
        """Expose the staged comparator only to CE arms."""
        if arm not in ns["CE_ARMS"]:
            return ()
        if snapshot is None:
            raise err("ce_* arm has no staged Compound Engineering plugin")
        return (snapshot.mount,)

    def ce_plugin_dir_for_arm(arm: str, snapshot: Optional[CePluginSnapshot]) -> Optional[str]:
        """Return Claude's fixed in-sandbox plugin path only for CE arms."""
        ce_plugin_mounts_for_arm(arm, snapshot)
        return ns["SANDBOX_CE_PLUGIN"] if arm in ns["CE_ARMS"] else None

    def validated_root(path: Path, *, label: str) -> Path:
        root = Path(path).expanduser().absolute()
        try:
            mode = root.lstat().st_mode
            resolved = root.resolve(strict=True)
        except OSError as exc:
            raise err(f"{label} is unavailable: {root}: {exc}") from exc
        if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode) or resolved != root:
            raise err(f"{label} must be a real directory: {root}")
        return root

    # The runtime each checkout gave in this process, by store and rules:
    # read and hashed once, then mounted from the store by digest.
    pinned: dict[tuple[Any, ...], StagedGitNexusRuntime] = {}
    last: list[StagedGitNexusRuntime] = []

    def gitnexus_mounts(checkout: Path, *rules: str) -> tuple[Any, ...]:
        """The runtime's mounts, from its snapshot in the store, after `cestore mounts` checks
        `checkout` by `rules`; a refusal raised as the harness's revision raises it.

        The first call for a checkout in this process ingests its runtime (instant when the
        store holds it); later ones check the checkout again and mount that same snapshot,
        so a runtime rebuilt during a sweep changes nothing the sweep's runs see.
        """
        current = store()
        checkout_text = os.fspath(Path(checkout).expanduser().absolute())
        key = (current.location, os.environ.get("CESTORE_DIR"), current.binary, checkout_text, rules)
        known = pinned.get(key)
        args = ["mounts", "--arm=baseline", f"--gitnexus-root={os.fspath(checkout)}", *rules]
        sign_with = _signing_key()
        if sign_with is not None:
            args.append(f"--sign-with={os.fspath(sign_with)}")
        try:
            try:
                out = current.run(*args, *([f"--gitnexus-runtime={known.manifest_digest}"] if known else []))
            except _errors.NotFound as exc:
                if known is None or exc.rule is not None:
                    raise
                # The pinned snapshot left the store (rm, gc): read the checkout again.
                del pinned[key]
                known = None
                out = current.run(*args)
        except (_errors.Rejected, _errors.NotFound) as exc:
            if exc.rule is None:
                raise
            raise _gitnexus_error(err, exc, checkout) from None
        except _errors.Untrusted as exc:
            # The signing key, as the plugin's staging reports it.
            raise err(exc.message) from exc
        if known is None:
            known = pinned[key] = StagedGitNexusRuntime(
                out["gitnexus_runtime_manifest_digest"],
                Path(out["gitnexus_runtime_view"]),
                tuple((c["path"], Path(c["source"])) for c in out["gitnexus_runtime_components"]),
            )
        last[:] = [known]
        note_staged(current, "gitnexus_runtime_manifest_digest", known.manifest_digest)
        mount = ns["ReadOnlyMount"]
        return tuple(
            mount(source=Path(m["source"]), target=_retarget(m["target"], ns))
            for m in out["mounts"]
        )

    def staged_gitnexus_runtime() -> Optional[StagedGitNexusRuntime]:
        """The GitNexus runtime the last `trusted_gitnexus_runtime_mounts` call mounted, if any:
        its snapshot's digest goes into each row as `gitnexus_runtime_manifest_digest`."""
        return last[0] if last else None

    def trusted_gitnexus_runtime_mounts() -> tuple[Any, ...]:
        """Expose only the files needed by the pinned CLI and linked shared package."""
        return gitnexus_mounts(
            Path(ns["HARNESS_ROOT"]),
            "--gitnexus-rules=seed",
            f"--gitnexus-version={ns['PINNED_GITNEXUS_VERSION']}",
        )

    def upstream_trusted_gitnexus_runtime_mounts(*, root: Optional[Path] = None) -> tuple[Any, ...]:
        """Expose only the files needed by the pinned CLI and linked shared package."""
        checkout = Path(root if root is not None else ns["HARNESS_ROOT"])
        return gitnexus_mounts(checkout, "--gitnexus-rules=upstream")

    def validate_ce_plugin_inputs(
        arms: Sequence[str],
        plugin_dir: Optional[Path],
        plugin_version: Optional[str],
    ) -> Optional[CePluginConfig]:
        """Require an explicit directory and exact version iff a CE arm is selected."""
        has_ce_arm = any(arm in ns["CE_ARMS"] for arm in arms)
        supplied = plugin_dir is not None or plugin_version is not None
        if not has_ce_arm:
            if supplied:
                raise ValueError("--ce-plugin-dir and --ce-plugin-version require at least one ce_* arm")
            return None
        if plugin_dir is None or plugin_version is None:
            raise ValueError("ce_* arms require both --ce-plugin-dir and --ce-plugin-version")
        if _contract.exact_version(store().binary).fullmatch(plugin_version) is None:
            raise ValueError(
                "--ce-plugin-version must be an exact semantic version (aliases and ranges are forbidden)"
            )
        source = validated_root(plugin_dir, label="Compound Engineering plugin source")
        return ns["CePluginConfig"](source=source, version=plugin_version)

    store = namespace_store(ns)
    ns["record_environment"] = environment_recorder(store)

    def lowered_bounds(binary: str) -> Optional[Bounds]:
        """The namespace's bounds that are below the binary's (the reference's), for the CLI."""
        lowered = {}
        for name, (field, default) in _contract.bounds(binary).items():
            value = int(ns[name])
            if value < default:
                lowered[field] = max(value, 0)
        return Bounds(**lowered) if lowered else None

    def build(config: CePluginConfig, destination_parent: Path) -> tuple[CePluginSnapshot, HeldStage]:
        parent = validated_root(destination_parent, label="CE plugin snapshot parent")
        st = store()
        bounds = lowered_bounds(st.binary)
        # The arm `stage` is given: any CE arm has it make the release's view.
        stage_arm = _contract.ce_arms(st.binary)[0]
        sign_with = _signing_key()
        held = None
        for _ in range(16):
            made = Path(tempfile.mkdtemp(prefix=_SNAPSHOT_PREFIX, dir=parent))
            os.rmdir(made)
            try:
                # One process validates and stores the release, checks its
                # view out, and discards it once released.
                held = st.hold_stage(
                    [stage_arm],
                    plugin_dir=config.source,
                    plugin_version=config.version,
                    dest=made,
                    bounds=bounds,
                    sign_with=sign_with,
                )
                break
            except _errors.Conflict:
                # Another process took the name between rmdir and stage.
                if made.exists():
                    continue
                raise
            except (_errors.Rejected, _errors.NotFound) as exc:
                if exc.rule is None:
                    raise
                raise _reference_error(ns, exc, config) from None
            except _errors.Untrusted as exc:
                # The signing key: an operator's input the harness reports as it reports the others.
                raise err(exc.message) from exc
        if held is None:
            raise err(f"could not find a free snapshot name under {parent}")
        staged = held.stage
        if staged.view is None or staged.provenance is None:
            held.release()
            raise err(f"could not stage a snapshot under {parent}")
        prov = staged.provenance
        note_staged(st, "ce_plugin_manifest_digest", prov.manifest_digest)
        snapshot = ns["CePluginSnapshot"](
            root=staged.view,
            version=config.version,
            manifest_digest=prov.manifest_digest,
            file_count=prov.file_count,
            total_bytes=prov.total_bytes,
        )
        return snapshot, held

    def remove(root: Path, held: HeldStage) -> None:
        try:
            # The sweep is over: no run uses the snapshot any more, so the
            # store may keep it whole for the next sweep's checkout.
            held.release(spare=True)
        except _errors.Error:
            pass
        if not os.path.lexists(root):
            return
        try:
            # The held process could not discard it (it died): discard it here.
            store().discard(root)
            return
        except _errors.Error:
            pass
        # Not (or no longer) a recorded view: remove it without touching any
        # file's mode, since the files may be the store's own objects.
        for directory, _, _ in os.walk(root):
            os.chmod(directory, 0o700)
        shutil.rmtree(root)

    @contextmanager
    def staged_ce_plugin_snapshot(
        config: Optional[CePluginConfig],
        *,
        destination_parent: Path,
    ) -> Iterator[Optional[CePluginSnapshot]]:
        """Yield one bounded immutable CE plugin view and remove it afterward."""
        if config is None:
            yield None
            return
        snapshot, held = build(config, destination_parent)
        try:
            yield snapshot
        finally:
            remove(snapshot.root, held)

    if revision == "upstream":
        upstream_trusted_gitnexus_runtime_mounts.__name__ = "trusted_gitnexus_runtime_mounts"
        trusted_gitnexus_runtime_mounts = upstream_trusted_gitnexus_runtime_mounts  # noqa: F811
    for fn in (
        ce_plugin_mounts_for_arm,
        ce_plugin_dir_for_arm,
        trusted_gitnexus_runtime_mounts,
        staged_gitnexus_runtime,
        validate_ce_plugin_inputs,
        staged_ce_plugin_snapshot,
    ):
        fn.__module__ = str(ns.get("__name__", __name__))
        fn.__qualname__ = fn.__name__
        ns[fn.__name__] = fn
    ns["CePluginSnapshot"] = CePluginSnapshot


def _reference_error(ns: MutableMapping[str, Any], exc: _errors.Error, config: CePluginConfig) -> BaseException:
    """The reference's exception, with its exact message, for one CLI rejection."""
    sandbox_error = ns["SandboxError"]
    rule = exc.rule
    path = Path(exc.path) if exc.path else None
    prefix = "Compound Engineering plugin"

    def with_os_error(os_exc: OSError) -> BaseException:
        # The binary's words for the rule (the reference's), with Python's text of the OSError.
        return sandbox_error(_with_os_text(exc, os_exc))

    # The binary decides the rule and, where they are not Python's own, the
    # reference's words; the version's refusal is the reference's ValueError.
    if rule == "version-not-exact" and exc.reference_message is not None:
        return ValueError(exc.reference_message)
    if exc.reference_message is not None:
        return sandbox_error(exc.reference_message)
    # The call the reference makes, for the text of the OSError it raises.
    probes: dict[str, Callable[[Path], Any]] = {
        "source-unavailable": os.lstat,
        "manifest-dir-unavailable": os.lstat,
        "component-unreadable": os.lstat,
        "directory-unreadable": lambda p: os.scandir(p).close(),
        "entry-unreadable": os.lstat,
    }
    if rule in probes and path is not None:
        try:
            probes[rule](path)
        except OSError as os_exc:
            return with_os_error(os_exc)
        return sandbox_error(exc.message)
    if rule == "path-too-long" and path is not None:
        return sandbox_error(f"{prefix} path exceeds the byte limit: {_relative(path, config)}")
    if rule == "path-not-utf8" and path is not None:
        # The reference measures the path with str.encode(), which raises.
        try:
            _relative(path, config).encode()
        except UnicodeError as unicode_exc:
            return unicode_exc
    if rule == "file-unreadable" and path is not None:
        try:
            os.lstat(path)
        except OSError as os_exc:
            return with_os_error(os_exc)
        # The reference opens the file outside any handler: the OSError itself.
        try:
            os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)))
        except OSError as os_exc:
            return os_exc
    if rule == "entry-unavailable" and path is not None:
        # The reference's Path.exists() lets this OSError through.
        try:
            os.stat(path)
        except OSError as os_exc:
            return os_exc
    if rule == "too-deep":
        return RecursionError(exc.message)
    return sandbox_error(exc.message)


def _with_os_text(exc: _errors.Error, os_exc: OSError) -> str:
    """The binary's message for `exc`'s rule, with its path and Python's text of `os_exc`."""
    template = _contract.rule_messages(exc.argv[0] if exc.argv else None)[str(exc.rule)]
    return template.replace("{path}", str(Path(str(exc.path)))).replace("{os error}", str(os_exc))


def _retarget(target: str, ns: MutableMapping[str, Any]) -> str:
    """A CLI mount target under the namespace's `SANDBOX_GITNEXUS*` (which may be monkeypatched)."""
    for default, name in ((SANDBOX_GITNEXUS_SHARED, "SANDBOX_GITNEXUS_SHARED"), (SANDBOX_GITNEXUS, "SANDBOX_GITNEXUS")):
        if target == default or target.startswith(default + "/"):
            return str(ns[name]) + target[len(default) :]
    return target


def _gitnexus_error(err: Callable[[str], BaseException], exc: _errors.Error, checkout: Path) -> BaseException:
    """The harness's exception, with its exact message, for one `cestore mounts --gitnexus-rules` refusal.

    The binary decides which rule is broken; the seed and upstream word them
    alike. What is Python's own is made here: the text of an `OSError` or of
    a JSON error (by the same call the harness makes), an `AttributeError`
    where the harness calls `.get` on a JSON value that is no object.
    """
    rule = exc.rule
    path = Path(exc.path) if exc.path else None

    def os_error(probe: Callable[[], Any]) -> Optional[OSError]:
        try:
            probe()
        except OSError as os_exc:
            return os_exc
        return None

    def lstat_resolve(p: Path) -> None:
        p.lstat()
        p.resolve(strict=True)

    if rule in ("gitnexus-checkout-unavailable", "gitnexus-component-unavailable") and path is not None:
        found = os_error(lambda: lstat_resolve(path))
        if found is not None:
            return err(_with_os_text(exc, found))
    if rule == "gitnexus-root-unavailable" and path is not None:
        # The one rule whose words name which root: the shared one by its directory's name.
        label = "pinned GitNexus shared runtime" if path.name == "gitnexus-shared" else "pinned GitNexus runtime"
        found = os_error(lambda: lstat_resolve(path))
        if found is not None:
            return err(f"{label} is unavailable: {path}: {found}")
    if rule in ("gitnexus-entrypoint-unavailable", "gitnexus-metadata-invalid"):
        runtime = Path(os.path.abspath(os.path.expanduser(checkout))) / "gitnexus"
        try:
            (runtime / "dist" / "cli" / "index.js").lstat()
            package = json.loads((runtime / "package.json").read_text())
        except (OSError, json.JSONDecodeError) as probe_exc:
            return err(f"pinned GitNexus runtime metadata is invalid: {probe_exc}")
        # Upstream then calls `package.get`: an AttributeError for a non-object.
        try:
            package.get("version")
        except AttributeError as attr_exc:
            return attr_exc
    if rule in ("gitnexus-shared-link-not-symlink", "gitnexus-shared-link-elsewhere"):
        return err("pinned GitNexus runtime has an unexpected gitnexus-shared dependency")
    if rule == "gitnexus-shared-link-unresolvable" and path is not None:
        # Upstream's is_symlink() and resolve(strict=True) let this OSError through.
        found = os_error(lambda: path.is_symlink() and path.resolve(strict=True))
        if found is not None:
            return found
        return err("pinned GitNexus runtime has an unexpected gitnexus-shared dependency")
    if rule == "gitnexus-shared-metadata-invalid" and path is not None:
        try:
            shared = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as probe_exc:
            return err(f"pinned GitNexus shared runtime metadata is invalid: {probe_exc}")
        try:
            shared.get("name")
        except AttributeError as attr_exc:
            return attr_exc
    if rule == "gitnexus-shared-identity":
        return err("pinned GitNexus shared runtime has an unexpected package identity")
    # The other rules' messages are the harness's own.
    return err(exc.message)


def _relative(path: Path, config: CePluginConfig) -> str:
    try:
        return path.relative_to(config.source).as_posix()
    except ValueError:
        return path.as_posix()


def bind(
    namespace: MutableMapping[str, Any],
    *,
    revision: str = "seed",
    sandbox_error: type[BaseException],
    read_only_mount: Any,
    sandbox_gitnexus: str,
    sandbox_gitnexus_shared: str,
    harness_root: Path,
    store: Optional[Path] = None,
) -> None:
    """Fill a module's namespace (its `globals()`) with this module's public names.

    `revision` is the harness's: `"seed"` (the seed's revision: a pinned
    GitNexus version, `trusted_gitnexus_runtime_mounts()`) or `"upstream"`
    (upstream's current one: any version, linked worktrees,
    `trusted_gitnexus_runtime_mounts(*, root=None)`, and no
    `PINNED_GITNEXUS_VERSION`). The functions use the harness's own
    `SandboxError` and `ReadOnlyMount`, and read the constants from
    `namespace` when they are called. `harness_root` becomes `HARNESS_ROOT`,
    the checkout holding `gitnexus/` and `gitnexus-shared/`. `store` is the
    cestore store (`None`: the CLI's default, `$CESTORE_DIR` or XDG).
    """
    if revision not in REVISIONS:
        raise ValueError(f"revision must be one of {', '.join(map(repr, REVISIONS))}, not {revision!r}")
    for name in _PUBLIC:
        if name in globals() and not (revision == "upstream" and name == "PINNED_GITNEXUS_VERSION"):
            namespace[name] = globals()[name]
    namespace["SandboxError"] = sandbox_error
    namespace["ReadOnlyMount"] = read_only_mount
    namespace["SANDBOX_GITNEXUS"] = sandbox_gitnexus
    namespace["SANDBOX_GITNEXUS_SHARED"] = sandbox_gitnexus_shared
    namespace["HARNESS_ROOT"] = Path(harness_root)
    namespace["CESTORE_STORE"] = store
    _populate(namespace, revision)


SANDBOX_GITNEXUS = "/opt/gitnexus"
SANDBOX_GITNEXUS_SHARED = "/opt/gitnexus-shared"
HARNESS_ROOT: Path = Path.cwd()
CESTORE_STORE: Optional[Path] = None

_populate(globals())

__all__ = [*_PUBLIC, "bind"]
