"""The guest's check of NVIDIA's CUDA repository key (cloudinit/scripts/cuda_key.py) against the fingerprint pinned in
guest.env, on keys GnuPG makes: the real tool says what each key's fingerprint is, the check must agree, take the
pinned key alone and refuse any other before apt is told to trust it. Booted for real in test_guest_boot.py (the
NVIDIA stand-in signed by a key of the test's own, pinned in its place)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, require_tool

from gemma4_t4 import catalog
from gemma4_t4.components.gce import guest as render

CHECK = REPO / "cloudinit" / "scripts" / "cuda_key.py"


class GnuPG:
    """A GnuPG home of the test's own (a short path: gpg-agent's socket lives there)."""

    def __init__(self, home: Path):
        self.home = home
        home.mkdir(mode=0o700)

    def __call__(self, *args: str) -> bytes:
        return subprocess.run([require_tool("gpg"), "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
                               *args], env={**os.environ, "GNUPGHOME": str(self.home)}, check=True,
                              capture_output=True).stdout

    def new_key(self, name: str, algorithm: str) -> str:
        self("--quick-gen-key", f"{name} <{name}@invalid>", algorithm, "sign", "never")
        return self.fingerprint(self("--armor", "--export", f"{name}@invalid"))

    def fingerprint(self, key: bytes) -> str:
        """The primary key's fingerprint as GnuPG reads it (`--show-keys --with-colons`, the `fpr` after `pub`)."""
        shown = subprocess.run([require_tool("gpg"), "--batch", "--with-colons", "--show-keys"], input=key,
                               env={**os.environ, "GNUPGHOME": str(self.home)}, check=True, capture_output=True)
        return next(line.split(b":")[9].decode() for line in shown.stdout.splitlines() if line.startswith(b"fpr:"))


@pytest.fixture
def gpg(tmp_path):
    home = GnuPG(Path(f"/tmp/g4t4-gpg-{os.getpid()}-{tmp_path.name[-12:]}"))
    yield home
    subprocess.run(["gpgconf", "--kill", "all"], env={**os.environ, "GNUPGHOME": str(home.home)}, capture_output=True)
    subprocess.run(["rm", "-rf", str(home.home)], check=True)


def check(key: Path, fingerprint: str, keyring: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), str(key), fingerprint, *([str(keyring)] if keyring else [])],
                          capture_output=True, text=True)


@pytest.mark.parametrize("algorithm", ["ed25519", "rsa2048"])
def test_the_pinned_key_is_taken_and_written_dearmored(gpg, tmp_path, algorithm):
    fingerprint = gpg.new_key("nvidia", algorithm)
    armored = tmp_path / "8793F200.pub"
    armored.write_bytes(gpg("--armor", "--export"))
    keyring = tmp_path / "keyrings" / "gemma4-t4-cuda.gpg"
    # Spaced and in lower case, as people copy a fingerprint from gpg's output.
    spaced = " ".join(fingerprint[i:i + 4] for i in range(0, 40, 4)).lower()
    taken = check(armored, spaced, keyring)
    assert taken.returncode == 0, taken.stderr
    assert f"the pinned key {fingerprint}" in taken.stdout
    assert keyring.read_bytes() == gpg("--export"), "the armored key's packets, as `gpg --dearmor` writes them"
    assert keyring.stat().st_mode & 0o777 == 0o644, "apt's verifier reads it as _apt"
    # The key on disk is checked again on every boot (offline, binary).
    assert check(keyring, fingerprint).returncode == 0


def test_a_key_with_another_fingerprint_is_refused_naming_both(gpg, tmp_path):
    gpg.new_key("impostor", "ed25519")
    key = tmp_path / "8793F200.pub"
    key.write_bytes(gpg("--armor", "--export"))
    found = gpg.fingerprint(key.read_bytes())
    pinned = catalog.PINS["nvidia.cuda_repo_key_fingerprint"]
    keyring = tmp_path / "gemma4-t4-cuda.gpg"
    refused = check(key, pinned, keyring)
    assert refused.returncode == 1
    assert f"expected the one primary key {pinned}, found {found}" in refused.stderr, refused.stderr
    assert f"refusing {key} as NVIDIA's CUDA repository key" in refused.stderr
    assert not keyring.exists(), "nothing for apt to trust"


def test_the_pinned_key_with_another_beside_it_is_refused(gpg, tmp_path):
    """apt trusts every key of a signed-by file: a second primary key in the download would be trusted too."""
    pinned = gpg.new_key("nvidia", "ed25519")
    other = gpg.new_key("other", "ed25519")
    key = tmp_path / "8793F200.pub"
    key.write_bytes(gpg("--armor", "--export"))
    refused = check(key, pinned, tmp_path / "keyring.gpg")
    assert refused.returncode == 1 and f"found {pinned}, {other}" in refused.stderr, refused.stderr


def test_what_is_not_one_whole_public_key_is_refused(gpg, tmp_path):
    fingerprint = gpg.new_key("nvidia", "ed25519")
    armored = gpg("--armor", "--export").decode()
    binary = gpg("--export")
    lines = armored.splitlines()
    data_line = next(i for i, line in enumerate(lines) if len(line) == 64)  # a full line of base64
    flipped = lines[data_line][:10] + ("A" if lines[data_line][10] != "A" else "B") + lines[data_line][11:]
    cases = {
        "truncated": binary[:-7],
        "checksum": "\n".join([*lines[:data_line], flipped, *lines[data_line + 1:]]).encode(),
        "crc line": "\n".join(line if not line.startswith("=") else "=abc" for line in lines).encode(),
        "cut in a header": b"\xc6\xd0",  # a new-format header whose two-octet length is cut off
        "secret": gpg("--armor", "--export-secret-keys"),
        "html": b"<html><body>404 Not Found</body></html>\n",
        "empty": b"",
    }
    for name, data in cases.items():
        key = tmp_path / name
        key.write_bytes(data)
        refused = check(key, fingerprint, tmp_path / f"{name}.gpg")
        assert refused.returncode == 1 and "refusing" in refused.stderr, (name, refused.stderr)
        assert "Traceback" not in refused.stderr, (name, refused.stderr)
        assert not (tmp_path / f"{name}.gpg").exists(), name


def test_the_guest_is_pinned_to_nvidias_debian13_key():
    """guest.env carries the catalog's key file and fingerprint; the fingerprint ends in the short id NVIDIA names
    the key file by (8793F200.pub)."""
    env = render.guest_env(render.GuestSettings("gemma4-data", 16))
    assert env["CUDA_REPO_KEY"] == "8793F200.pub" and env["CUDA_REPO_URL"].endswith("/repos/debian13/x86_64")
    fingerprint = env["CUDA_REPO_KEY_FINGERPRINT"]
    assert len(fingerprint) == 40 and fingerprint.endswith(env["CUDA_REPO_KEY"].removesuffix(".pub").upper())
    assert "CUDA_KEYRING_VERSION" not in env, "no unchecked keyring package"
    driver = (REPO / "cloudinit" / "scripts" / "install-driver.sh").read_text()
    assert "cuda-keyring_" not in driver and '"$lib/cuda_key.py"' in driver
