"""Signed snapshots from Python: keys, attestations, and the drop-in's signing.

Every attestation these tests make is verified with securesystemslib's DSSE
`Envelope` and an `SSlibKey` made from the public key file, with nothing from
cestore: as an auditor outside the team checks one (docs/python.md).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

import cestore
import cestore.runtime_mounts as standalone
from conftest import bound_harness, write_release

# securesystemslib[crypto] is installed by scripts/test; without it there is no independent check.
sslib_dsse = pytest.importorskip(
    "securesystemslib.dsse", reason="securesystemslib[crypto] is not installed: pip install 'securesystemslib[crypto]'"
)
sslib_signer = pytest.importorskip("securesystemslib.signer")
sslib_exceptions = pytest.importorskip("securesystemslib.exceptions")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

STATEMENT_V1 = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"


def sslib_key(public_key: Path) -> Any:
    """An SSlibKey made from a SubjectPublicKeyInfo PEM file, its key id the SHA-256 of the key's DER."""
    pub = serialization.load_pem_public_key(public_key.read_bytes())
    der = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return sslib_signer.SSlibKey.from_crypto(pub, keyid=hashlib.sha256(der).hexdigest(), scheme="ed25519")


def envelope_of(envelope: dict[str, Any]) -> Any:
    """A securesystemslib DSSE Envelope of a copy of `envelope` (its `from_dict` consumes the dict it reads)."""
    return sslib_dsse.Envelope.from_dict(copy.deepcopy(envelope))


def independently_verified(envelope: dict[str, Any], public_key: Path, digest: str) -> dict[str, Any]:
    """The in-toto statement of `envelope`, after securesystemslib verified its signature under
    `public_key` and the statement was checked to be SLSA provenance for exactly `digest`."""
    key = sslib_key(public_key)
    env = envelope_of(envelope)
    assert env.payload_type == "application/vnd.in-toto+json"
    verified = env.verify([key], 1)
    assert list(verified) == [key.keyid]
    statement = json.loads(env.payload)
    assert statement["_type"] == STATEMENT_V1
    assert statement["predicateType"] == SLSA_PROVENANCE_V1
    assert [s["digest"]["sha256"] for s in statement["subject"]] == [digest]
    return statement


def verify_all(store: cestore.Store, digest: str, public_key: Path) -> tuple[cestore.Attestation, ...]:
    """Every attestation of `digest`, each verified by securesystemslib under `public_key`."""
    found = store.attestations(digest)
    assert found
    for att in found:
        independently_verified(att.envelope, public_key, digest)
    return found


def tampered(envelope: dict[str, Any]) -> dict[str, Any]:
    """`envelope` with one byte of its payload changed."""
    payload = bytearray(base64.b64decode(envelope["payload"]))
    at = payload.index(b'"predicateType"')
    payload[at + 1] ^= 0x01
    return {**envelope, "payload": base64.b64encode(bytes(payload)).decode()}


@pytest.fixture
def key(tmp_path: Path, store_dir: Path) -> cestore.GeneratedKey:
    (tmp_path / "keys").mkdir()
    return cestore.Store().generate_key(tmp_path / "keys" / "stager")


@pytest.fixture(autouse=True)
def _no_signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(standalone.SIGNING_KEY_ENV, raising=False)


def test_generate_sign_and_an_auditor_verifies_with_securesystemslib(
    tmp_path: Path, key: cestore.GeneratedKey
) -> None:
    store = cestore.Store()
    assert key.private_key == tmp_path / "keys" / "stager"
    assert key.public_key == tmp_path / "keys" / "stager.pub"
    assert (key.private_key.stat().st_mode & 0o777) == 0o600
    assert key.keyid == sslib_key(key.public_key).keyid

    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    assert store.attestations(snap.manifest_digest) == ()
    signed = store.sign(snap.manifest_digest, key.private_key)
    assert isinstance(signed, cestore.SignReport)
    assert signed.manifest_digest == snap.manifest_digest and signed.keyid == key.keyid

    (att,) = verify_all(store, snap.manifest_digest, key.public_key)
    assert att.id == signed.attestation and att.keyid == key.keyid and att.at == signed.at
    assert att.subjects == ("compound-engineering@1.2.3",)
    assert att.verified is None
    statement = independently_verified(att.envelope, key.public_key, snap.manifest_digest)
    assert statement["subject"][0]["name"] == "compound-engineering@1.2.3"

    (trusted,) = store.attestations(snap.manifest_digest, trusted_keys=[key.public_key])
    assert trusted.verified == cestore.Verification(True, key.keyid, None)
    other = store.generate_key(tmp_path / "keys" / "other")
    (untrusted,) = store.attestations(snap.manifest_digest, trusted_keys=[other.public_key])
    assert untrusted.verified is not None and not untrusted.verified.ok and untrusted.verified.why

    # What show says, where this version of the CLI says it.
    info = store.show(snap.manifest_digest)
    assert all(isinstance(a, cestore.SignedBy) for a in info.attestations)
    assert {a.id for a in info.attestations} <= {att.id}


def test_a_tampered_envelope_or_another_key_fails_securesystemslib(
    tmp_path: Path, key: cestore.GeneratedKey
) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    store.sign(snap.manifest_digest, key.private_key)
    (att,) = verify_all(store, snap.manifest_digest, key.public_key)

    bad = envelope_of(tampered(att.envelope))
    with pytest.raises(sslib_exceptions.VerificationError):
        bad.verify([sslib_key(key.public_key)], 1)

    sig = bytearray(base64.b64decode(att.envelope["signatures"][0]["sig"]))
    sig[0] ^= 0x01
    forged_sig = {**att.envelope["signatures"][0], "sig": base64.b64encode(bytes(sig)).decode()}
    forged = {**att.envelope, "signatures": [forged_sig]}
    with pytest.raises(sslib_exceptions.VerificationError):
        envelope_of(forged).verify([sslib_key(key.public_key)], 1)

    other = store.generate_key(tmp_path / "keys" / "other")
    with pytest.raises(sslib_exceptions.VerificationError):
        envelope_of(att.envelope).verify([sslib_key(other.public_key)], 1)


def test_ingest_and_stage_sign_with(tmp_path: Path, key: cestore.GeneratedKey) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3", sign_with=key.private_key)
    (first,) = verify_all(store, snap.manifest_digest, key.public_key)
    assert first.keyid == key.keyid

    staged = store.stage(["ce_review"], plugin_dir=tmp_path / "a", plugin_version="1.2.3", sign_with=key.private_key)
    assert staged.provenance is not None and staged.provenance.manifest_digest == snap.manifest_digest
    with store.hold_stage(
        ["ce_review"], plugin_dir=tmp_path / "a", plugin_version="1.2.3", dest=tmp_path / "v", sign_with=key.private_key
    ) as held:
        assert held.provenance is not None and held.provenance.manifest_digest == snap.manifest_digest
    # The key had signed the snapshot: each stage keeps the one attestation.
    assert verify_all(store, snap.manifest_digest, key.public_key) == (first,)


def test_a_private_key_others_can_read_is_refused_naming_the_file(tmp_path: Path, key: cestore.GeneratedKey) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3")
    os.chmod(key.private_key, 0o644)
    release = {"plugin_dir": tmp_path / "a", "plugin_version": "1.2.3", "sign_with": key.private_key}
    calls = (
        lambda: store.sign(snap.manifest_digest, key.private_key),
        lambda: store.ingest(tmp_path / "a", "1.2.3", sign_with=key.private_key),
        lambda: store.stage(["ce_review"], **release),
        lambda: store.hold_stage(["ce_review"], dest=tmp_path / "v", **release),
    )
    for call in calls:
        with pytest.raises(cestore.Untrusted) as info:
            call()
        assert info.value.kind == "bad-key" and info.value.code == 9
        assert info.value.path == str(key.private_key)
        assert str(key.private_key) in info.value.message and "chmod 600" in info.value.message
    assert not (tmp_path / "v").exists()
    assert store.attestations(snap.manifest_digest) == ()


def test_keyword_names_in_messages(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    with pytest.raises(TypeError, match="trusted_keys"):
        store.attestations("abcd", trusted_keys="k.pub")  # type: ignore[arg-type]
    from cestore._contract import flag_keywords

    keywords = flag_keywords(store.binary)
    assert keywords["--sign-with"] == "sign_with"
    assert keywords["--key"] == "key"
    assert keywords["--trusted-key"] == "trusted_keys"


def test_show_reads_who_signed_where_the_cli_says_it(
    tmp_path: Path, key: cestore.GeneratedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cestore.Store()
    snap = store.ingest(write_release(tmp_path / "a"), "1.2.3", sign_with=key.private_key)
    (att,) = verify_all(store, snap.manifest_digest, key.public_key)
    real = store.run("show", "--", snap.manifest_digest)
    real.pop("attestations", None)
    assert store.show(snap.manifest_digest).provenance == snap.provenance
    brief = {"id": att.id, "keyid": att.keyid, "at": att.at}
    monkeypatch.setattr(store, "run", lambda *args: {**real, "attestations": [brief]})
    assert store.show(snap.manifest_digest).attestations == (cestore.SignedBy(att.id, key.keyid, att.at),)
    monkeypatch.setattr(store, "run", lambda *args: real)
    assert store.show(snap.manifest_digest).attestations == ()


def stage_with_drop_in(module: Any, source: Path, parent: Path) -> str:
    """Stages `source` through a drop-in as the harness does; returns the snapshot's digest."""
    parent.mkdir(parents=True, exist_ok=True)
    config = module.validate_ce_plugin_inputs(["ce_review"], source, "1.2.3")
    with module.staged_ce_plugin_snapshot(config, destination_parent=parent) as snap:
        assert snap is not None and snap.root.is_dir()
        return str(snap.manifest_digest)


def test_the_drop_in_signs_each_staged_snapshot_with_cestore_signing_key(
    tmp_path: Path, key: cestore.GeneratedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "a")

    digest = stage_with_drop_in(standalone, source, tmp_path / "runs0")
    assert store.attestations(digest) == ()
    monkeypatch.setenv("CESTORE_SIGNING_KEY", "")
    stage_with_drop_in(standalone, source, tmp_path / "runs1")
    assert store.attestations(digest) == ()

    monkeypatch.setenv("CESTORE_SIGNING_KEY", str(key.private_key))
    assert stage_with_drop_in(standalone, source, tmp_path / "runs2") == digest
    (att,) = verify_all(store, digest, key.public_key)
    assert att.keyid == key.keyid

    harness = bound_harness(tmp_path / "harness", "seed")
    assert stage_with_drop_in(harness, source, tmp_path / "runs3") == digest
    assert verify_all(store, digest, key.public_key) == (att,)


def test_the_drop_in_fails_staging_on_a_bad_key_with_the_harness_error(
    tmp_path: Path, store_dir: Path, key: cestore.GeneratedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cestore.Store()
    source = write_release(tmp_path / "a")
    os.chmod(key.private_key, 0o644)
    monkeypatch.setenv("CESTORE_SIGNING_KEY", str(key.private_key))
    harness: Any = bound_harness(tmp_path / "harness", "seed")
    for module in (standalone, harness):
        parent = tmp_path / f"runs-{module.__name__}"
        parent.mkdir()
        config = module.validate_ce_plugin_inputs(["ce_review"], source, "1.2.3")
        with pytest.raises(module.SandboxError) as info:
            with module.staged_ce_plugin_snapshot(config, destination_parent=parent):
                pytest.fail("staged with a key others can read")
        assert type(info.value) is module.SandboxError
        assert str(key.private_key) in str(info.value) and "chmod 600" in str(info.value)
        cause = info.value.__cause__
        assert isinstance(cause, cestore.Untrusted) and cause.kind == "bad-key"
        assert list(parent.iterdir()) == []
    # The key is checked before anything is stored.
    assert not store_dir.exists() or store.run("list")["snapshots"] == []


def test_the_drop_in_signs_the_gitnexus_runtime_it_stores(
    tmp_path: Path, store_dir: Path, key: cestore.GeneratedKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_upstream_contract import install_runtime

    store = cestore.Store()
    root = tmp_path.resolve() / "checkout"
    install_runtime(root, "1.6.9")
    monkeypatch.setenv("CESTORE_SIGNING_KEY", str(key.private_key))
    harness: Any = bound_harness(tmp_path / "harness", "seed")
    monkeypatch.setattr(harness, "HARNESS_ROOT", root)
    assert len(harness.trusted_gitnexus_runtime_mounts()) == 7
    digest = harness.staged_gitnexus_runtime().manifest_digest
    (att,) = verify_all(store, digest, key.public_key)
    assert att.keyid == key.keyid
    # A key others can read fails the mounts with the harness's error.
    os.chmod(key.private_key, 0o644)
    other: Any = bound_harness(tmp_path / "other", "seed")
    monkeypatch.setattr(other, "HARNESS_ROOT", root)
    with pytest.raises(other.SandboxError) as info:
        other.trusted_gitnexus_runtime_mounts()
    assert isinstance(info.value.__cause__, cestore.Untrusted)


def test_signing_again_with_the_same_key_keeps_the_one_attestation(tmp_path: Path, store_dir: Path) -> None:
    store = cestore.Store()
    key = store.generate_key(tmp_path / "k")
    release = write_release(tmp_path / "rel")
    snap = store.ingest(release, "1.2.3", sign_with=key.private_key)
    first = store.attestations(snap.manifest_digest)
    again = store.sign(snap.manifest_digest, key.private_key)
    assert not again.new and again.attestation == first[0].id
    store.ingest(release, "1.2.3", sign_with=key.private_key)
    assert [a.id for a in store.attestations(snap.manifest_digest)] == [first[0].id]
