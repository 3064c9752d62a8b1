"""NVIDIA's CUDA repository key, checked against the fingerprint pinned in guest.env before apt trusts it.

    python3 cuda_key.py KEY FINGERPRINT [KEYRING]

KEY is an OpenPGP public key, ASCII-armored (as NVIDIA publishes it beside the repository) or binary. It is
accepted only when it holds exactly one primary key and that key's fingerprint is FINGERPRINT; then, given
KEYRING, its packets are written there, dearmored (apt's signed-by reads a binary key file). Exit 1 with the
expected and the found fingerprint otherwise. Standard library only: the Debian 13 image has python3 but not
necessarily gpg, and apt's own verifier (sqv) checks signatures, not whose key a file holds.

The fingerprint is RFC 4880's (section 12.2) for a version 4 key, SHA-1 over 0x99, the public-key packet's
two-octet length and its body; RFC 9580's (section 5.5.4) for a version 6 key, SHA-256 over 0x9B, a four-octet
length and the body. A second primary key in the file is refused: apt would trust it as well. Subkeys are
apt's to check: sqv accepts one only with a binding signature the primary key made.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from collections.abc import Iterator

PUBLIC_KEY, SECRET_KEY = 6, 5  # packet tags (RFC 9580, section 5)
ARMOR_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
ARMOR_END = "-----END PGP PUBLIC KEY BLOCK-----"


class Refused(Exception):
    pass


def dearmor(data: bytes) -> bytes:
    """The packets of an armored key (RFC 9580, section 6: headers, a blank line, base64, an optional CRC-24)."""
    text = data.decode("ascii", errors="replace")
    if ARMOR_BEGIN not in text:
        return data  # binary already
    body = text.split(ARMOR_BEGIN, 1)[1].split(ARMOR_END, 1)[0]
    lines = [line.strip() for line in body.strip().splitlines()]
    if "" in lines:  # the armor headers (Version:, Comment:) end at the first blank line
        lines = lines[lines.index("") + 1:]
    checksum = [line for line in lines if line.startswith("=")]
    try:
        packets = base64.b64decode("".join(line for line in lines if not line.startswith("=")), validate=True)
    except ValueError as error:
        raise Refused(f"its armor is not base64 ({error})") from None
    if checksum and base64.b64decode(checksum[0][1:]) != crc24(packets).to_bytes(3, "big"):
        raise Refused("its armor's checksum does not match")
    return packets


def crc24(data: bytes) -> int:
    crc = 0xB704CE
    for byte in data:
        crc ^= byte << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= 0x1864CFB
    return crc & 0xFFFFFF


def packets(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(tag, body) of each packet (RFC 9580, section 4.2: the old and the new header formats)."""
    at = 0
    while at < len(data):
        header = data[at]
        at += 1
        if not header & 0x80:
            raise Refused(f"byte {at - 1} is not a packet header")
        if header & 0x40:
            tag, first = header & 0x3F, data[at] if at < len(data) else 0
            if first < 192:
                length, at = first, at + 1
            elif first < 224:
                length, at = ((first - 192) << 8) + data[at + 1] + 192, at + 2
            elif first == 255:
                length, at = int.from_bytes(data[at + 1:at + 5], "big"), at + 5
            else:
                raise Refused("a partial-length packet (never part of a key)")
        else:
            tag, size = (header >> 2) & 0x0F, header & 0x03
            if size == 3:
                raise Refused("an indeterminate-length packet (never part of a key)")
            length, at = int.from_bytes(data[at:at + (1 << size)], "big"), at + (1 << size)
        body = data[at:at + length]
        if len(body) != length:
            raise Refused("it ends inside a packet")
        yield tag, body
        at += length


def fingerprint(body: bytes) -> str:
    version = body[0] if body else 0
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body, usedforsecurity=False).hexdigest().upper()
    if version == 6:
        return hashlib.sha256(b"\x9b" + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise Refused(f"a version {version} key (only versions 4 and 6 are checked)")


def primary_fingerprints(data: bytes) -> list[str]:
    found = []
    for tag, body in packets(dearmor(data)):
        if tag == SECRET_KEY:
            raise Refused("it holds a secret key")
        if tag == PUBLIC_KEY:
            found.append(fingerprint(body))
    return found


def check(data: bytes, pinned: str) -> bytes:
    """DATA's packets, dearmored, when it holds exactly one primary key and it is PINNED; else Refused."""
    pinned = pinned.replace(" ", "").upper()
    found = primary_fingerprints(data)
    if found != [pinned]:
        raise Refused(f"expected the one primary key {pinned}, found {', '.join(found) or 'none'}")
    return dearmor(data)


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, pinned = argv[1], argv[2]
    try:
        with open(path, "rb") as f:
            keyring = check(f.read(), pinned)
    except (OSError, Refused) as error:
        print(f"install-driver: refusing {path} as NVIDIA's CUDA repository key: {error}", file=sys.stderr)
        return 1
    except (ValueError, IndexError) as error:  # a malformed checksum line, a packet header cut off
        print(f"install-driver: refusing {path} as NVIDIA's CUDA repository key: it is not one whole OpenPGP key "
              f"({type(error).__name__}: {error})", file=sys.stderr)
        return 1
    if len(argv) == 4:
        partial = argv[3] + ".partial"
        os.makedirs(os.path.dirname(partial) or ".", exist_ok=True)
        with open(partial, "wb") as f:
            f.write(keyring)
        os.chmod(partial, 0o644)  # apt's verifier reads it as _apt
        os.replace(partial, argv[3])
    print(f"install-driver: {path}: the pinned key {pinned.replace(' ', '').upper()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
