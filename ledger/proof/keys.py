"""Named Ed25519 keys as C2SP signed-note verifier keys, and the files that hold them.

Used to sign checkpoints (ledger.proof.checkpoint) and decisions (ledger.proof.decisions), and
named in a roster (ledger.proof.roster). docs/ledger-format.md section 9.2 is the byte-exact
definition:

- the key id is SHA-256(name || 0x0A || 0x01 || public key)[:4];
- the public key file holds the verifier key `NAME+<8 hex key id>+<base64(0x01 || key)>`;
- the private key file is `Key-Name: NAME` followed by an unencrypted PKCS#8 PEM block (mode 0600).

Errors: `MalformedError` (exit code 2: a file is not what it claims to be) and
`VerificationError` (exit code 1: a well-formed signature does not check out).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ledger.store.log import write_all

DEFAULT_KEY_NAME = "countersign.example/signer"
KEY_NAME_HEADER = "Key-Name: "
ED25519 = 0x01  # the signed-note signature type of Ed25519
MAX_NOTE_BYTES = 1 << 20


class CheckpointError(Exception):
    """A key, checkpoint, proof or signature problem; `exit_code` says which kind."""

    exit_code = 1


class MalformedError(CheckpointError):
    """A key, checkpoint or proof file is not in its format (bad input: exit code 2)."""

    exit_code = 2


class VerificationError(CheckpointError):
    """A signature, proof or ledger does not check out (a failed check: exit code 1)."""

    exit_code = 1


# --- base64, names ----------------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str, what: str) -> bytes:
    """Strict standard base64 (RFC 4648 section 4, with padding): exactly one spelling."""
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise MalformedError(f"{what} is not base64") from None
    if b64(data) != text:
        raise MalformedError(f"{what} is not in canonical base64")
    return data


def _valid_name(name: str) -> bool:
    """A signed-note key name: non-empty, no Unicode space, no '+', no control character."""
    return bool(name) and not any(c.isspace() or c == "+" or ord(c) < 0x20 or c == "\x7f" for c in name)


# --- keys ---------------------------------------------------------------------------------------


def key_id(name: str, public: bytes) -> bytes:
    """SHA-256(name || 0x0A || 0x01 || public key)[:4] (C2SP signed-note, Ed25519)."""
    return hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public).digest()[:4]


@dataclass(frozen=True)
class PublicKey:
    """A named Ed25519 public key: what a verifier trusts."""

    name: str
    key: bytes  # 32 bytes

    @property
    def id(self) -> bytes:
        return key_id(self.name, self.key)

    def text(self) -> str:
        """The verifier key: `name+<8 hex key id>+<base64(0x01 || key)>`."""
        return f"{self.name}+{self.id.hex()}+{b64(bytes([ED25519]) + self.key)}"

    @classmethod
    def parse(cls, text: str) -> "PublicKey":
        name, sep1, rest = text.partition("+")
        kid, sep2, data = rest.partition("+")
        if not (sep1 and sep2) or not _valid_name(name):
            raise MalformedError("a public key is NAME+KEYID+BASE64 (a signed-note verifier key)")
        if not re.fullmatch(r"[0-9a-f]{8}", kid):
            raise MalformedError("the public key's id is not 8 lowercase hex digits")
        raw = unb64(data, "the public key")
        if len(raw) != 33 or raw[0] != ED25519:
            raise MalformedError("the public key is not an Ed25519 key (0x01 followed by 32 bytes)")
        key = cls(name, raw[1:])
        if key.id.hex() != kid:
            raise MalformedError("the public key's id does not match its name and key")
        return key

    def verify(self, signature: bytes, message: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


@dataclass(frozen=True)
class SigningKey:
    """A named Ed25519 private key: what the log operator signs checkpoints with."""

    name: str
    private: object = field(repr=False)  # cryptography's Ed25519PrivateKey

    @property
    def public(self) -> PublicKey:
        from cryptography.hazmat.primitives import serialization

        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return PublicKey(self.name, raw)

    def sign(self, message: bytes) -> bytes:
        return self.private.sign(message)

    def pem(self) -> bytes:
        """The key file's bytes: `Key-Name: NAME`, then the PKCS#8 PEM block."""
        from cryptography.hazmat.primitives import serialization

        block = self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return f"{KEY_NAME_HEADER}{self.name}\n".encode() + block


def generate_key(name: str = DEFAULT_KEY_NAME) -> SigningKey:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    if not _valid_name(name):
        raise MalformedError(f"{name!r} is not a key name (non-empty, no spaces, no '+')")
    return SigningKey(name, Ed25519PrivateKey.generate())


def write_keypair(prefix: str | Path, key: SigningKey) -> tuple[Path, Path]:
    """Write PREFIX.key (mode 0600) and PREFIX.pub; refuses to overwrite either, and a PREFIX
    with no file name (empty, or a directory: `keys/`), which would make hidden `.key` files."""
    text = os.fspath(prefix)
    if not text or text.endswith(("/", os.sep)) or Path(text).name in ("", ".", ".."):
        raise MalformedError(f"the key prefix {text!r} names no file (it would write hidden .key and .pub files); give a name, such as keys/ledger")
    key_path, pub_path = Path(f"{prefix}.key"), Path(f"{prefix}.pub")
    for p in (key_path, pub_path):
        if p.exists():
            raise MalformedError(f"{p} already exists; refusing to overwrite a key")
    write_new(key_path, key.pem(), 0o600)
    try:
        write_new(pub_path, (key.public.text() + "\n").encode(), 0o644)
    except BaseException:
        key_path.unlink(missing_ok=True)
        raise
    return key_path, pub_path


def write_new(path: Path, data: bytes, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise MalformedError(f"{path} already exists; refusing to overwrite it") from None
    except OSError as exc:
        raise MalformedError(f"cannot write {path}: {exc.strerror}") from None
    try:
        try:
            os.fchmod(fd, mode)  # whatever the umask
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException as exc:  # a full disk: no partial file is left under that name
        path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise MalformedError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def read_file(path: str | Path, what: str, limit: int = MAX_NOTE_BYTES) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise MalformedError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise MalformedError(f"{what} {path} is larger than {limit} bytes")
    return data


def load_signing_key(path: str | Path) -> SigningKey:
    """Read a private key file. Refuses one that others can read (like ssh does)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError as exc:
        raise MalformedError(f"cannot read the key {path}: {exc.strerror}") from None
    data = read_file(path, "the key", 64 * 1024)
    if b"PRIVATE KEY-----" not in data:  # before the mode, whose advice would not help with a public key
        raise MalformedError(f"{path} holds no private key (the .pub file of keygen is the public key; sign with the .key file)")
    if mode & 0o077:
        raise MalformedError(f"the key {path} can be read by others (mode {mode:04o}); chmod 600 it")
    name = DEFAULT_KEY_NAME
    if data.startswith(KEY_NAME_HEADER.encode()):
        first, _, data = data.partition(b"\n")
        name = first[len(KEY_NAME_HEADER) :].decode("utf-8", "replace").strip()
        if not _valid_name(name):
            raise MalformedError(f"the key {path} names an invalid key name {name!r}")
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise MalformedError(f"the key {path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise MalformedError(f"the key {path} is not an Ed25519 key")
    return SigningKey(name, private)


def load_public_key(path: str | Path) -> PublicKey:
    data = read_file(path, "the public key", 4096)
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise MalformedError(f"the public key {path} is not ASCII") from None
    if text.endswith("\n"):
        text = text[:-1]
    try:
        return PublicKey.parse(text)
    except MalformedError as exc:
        raise MalformedError(f"{path}: {exc}") from None
