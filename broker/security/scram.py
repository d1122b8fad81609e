"""SCRAM credentials as Kafka stores them, and the broker's cache of them.

Kafka keeps a user's SCRAM credentials in ZooKeeper's `/config/users/<user>`, one config per mechanism, in
ScramCredentialUtils' text form: `SCRAM-SHA-256` -> `salt=<base64>,stored_key=<base64>,server_key=<base64>,
iterations=4096`. The password itself is never stored: the salted keys of RFC 5802 are (made by `scramp`).
`kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'` takes a mechanism's
iterations (4096 unless given; Kafka's ScramMechanism bounds, 4096..16384) and password. AlterUserScramCredentials
(KIP-554) carries no password either: the client sends the salt and the salted password, from which the broker
derives the stored form (credential_from_salted_password).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import scramp

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 4096
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# Kafka's org.apache.kafka.clients.admin.ScramMechanism: the mechanism's type byte in the SCRAM admin APIs
# (0 is UNKNOWN, and so is any byte not listed).
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
TYPE_OF_MECHANISM = {name: code for code, name in MECHANISM_TYPES.items()}
_DIGESTS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString; ValueError on anything else."""
        fields = dict(part.partition("=")[::2] for part in text.split(","))
        if set(fields) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("invalid SCRAM credential: expected salt, stored_key, server_key and iterations")
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
        except ValueError as e:
            raise ValueError(f"invalid SCRAM credential: {e}") from None

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """What scramp's server asks its auth_fn for."""
        return self.salt, self.stored_key, self.server_key, self.iterations


def make_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """A new random salt and the salted keys of `password` (Kafka's ScramFormatter.generateCredential)."""
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"unknown SCRAM mechanism {mechanism}")
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"Invalid iterations {iterations} for mechanism {mechanism}: it must be between"
                         f" {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations)
    return ScramCredential(salt, stored_key, server_key, count)


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """Kafka's ScramFormatter.generateCredential(salt, saltedPassword, iterations), RFC 5802's keys:
    ClientKey = HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey = HMAC(SaltedPassword,
    "Server Key"). scramp derives these only from a password (its salted-password step is private), hence hmac.

    ValueError for an empty salted password: Kafka's HMAC key (javax's SecretKeySpec) refuses an empty key."""
    if not salted_password:
        raise ValueError("Empty key")
    digest = _DIGESTS[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    return ScramCredential(salt, digest(client_key).digest(), hmac.digest(salted_password, b"Server Key", digest),
                           iterations)


def parse_scram_request(mechanism: str, text: str) -> ScramCredential:
    """`iterations=8192,password=secret` (the value of --add-config 'SCRAM-SHA-256=[...]') -> a credential, as
    Kafka's ConfigCommand reads it: comma-separated key=value pairs, password required, iterations optional."""
    pairs = dict(part.partition("=")[::2] for part in text.split(",") if part.strip())
    unknown = sorted(set(pairs) - {"iterations", "password"})
    if unknown or not pairs.get("password"):
        raise ValueError(f"Invalid credential config {mechanism}: expected [iterations=N,]password=<password>")
    try:
        iterations = int(pairs.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise ValueError(f"Invalid iterations {pairs['iterations']!r} for mechanism {mechanism}") from None
    return make_credential(mechanism, pairs["password"], iterations)


class CredentialCache:
    """Every user's SCRAM credentials by mechanism (Kafka's CredentialCache), replaced user by user as
    /config/users/<user> changes; read by the SCRAM servers of the Kafka listeners."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        with self._lock:
            return self._credentials.get((mechanism, user))

    def update_user(self, user: str, config: Mapping[str, str]) -> list[str]:
        """Replace `user`'s credentials with the SCRAM entries of its config (none: the user is gone); returns
        the mechanisms whose entry could not be read (those are dropped, so that user cannot log in with them)."""
        credentials, bad = {}, []
        for mechanism in SCRAM_MECHANISMS:
            if mechanism in config:
                try:
                    credentials[(mechanism, user)] = ScramCredential.from_text(config[mechanism])
                except ValueError:
                    bad.append(mechanism)
        with self._lock:
            for mechanism in SCRAM_MECHANISMS:
                self._credentials.pop((mechanism, user), None)
            self._credentials.update(credentials)
        return bad

    def users(self, mechanism: str) -> list[str]:
        with self._lock:
            return sorted(user for m, user in self._credentials if m == mechanism)


def alter_user_config(current: Mapping[str, str], add: Mapping[str, str], delete: list[str]) -> dict[str, str]:
    """A user's /config/users/<user> config after `--add-config 'SCRAM-SHA-256=[iterations=N,password=P]'` and
    `--delete-config SCRAM-SHA-512` (Kafka's ConfigCommand for users, SCRAM part); ValueError in Kafka's words
    for anything else. Deleting a mechanism the user does not have is an error, as in Kafka."""
    invalid = sorted(k for k in [*add, *delete] if k not in SCRAM_MECHANISMS)
    if invalid:
        raise ValueError(f"Invalid config(s): {','.join(invalid)} (users take {', '.join(SCRAM_MECHANISMS)} here)")
    missing = sorted(k for k in delete if k not in current)
    if missing:
        raise ValueError(f"Invalid config(s): {','.join(missing)} (no such credential to delete)")
    config = {k: v for k, v in current.items() if k not in delete}
    for mechanism, request in add.items():
        config[mechanism] = parse_scram_request(mechanism, request).to_text()
    return config


def describe_user_config(config: Mapping[str, str]) -> str:
    """`SCRAM-SHA-256=iterations=8192` per credential (salts and keys are never printed), as kafka-configs.sh
    describes SCRAM credentials."""
    described = []
    for mechanism in SCRAM_MECHANISMS:
        if mechanism in config:
            try:
                described.append(f"{mechanism}=iterations={ScramCredential.from_text(config[mechanism]).iterations}")
            except ValueError:
                described.append(f"{mechanism}=<invalid credential>")
    return ", ".join(described)
