"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) as plain values: Kafka 2.7+'s
ZkAdminManager.describeUserScramCredentials / alterUserScramCredentials, rule for rule and message for message.

Credentials live where `minibroker configs --zookeeper ... --entity-type users` keeps them, /config/users/<user>
in ScramCredentialUtils' text form, and are written the same way (KafkaZkClient.set_entity_config: the config and
a /config/changes notification in one multi-op), so every broker's CredentialCache takes them up live.

The rules (ZooKeeper mode; KRaft's ScramControlManager differs, e.g. it refuses a user named twice at all):
- describe: no users (or an empty list) lists every user with a SCRAM credential, sorted; a named user with none
  is RESOURCE_NOT_FOUND, an empty name RESOURCE_NOT_FOUND too, a name given twice DUPLICATE_RESOURCE;
- alter: an empty user name is UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
  iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL; the same (user, mechanism) twice among the valid
  alterations DUPLICATE_RESOURCE for that user; deleting a credential the user lacks RESOURCE_NOT_FOUND. Any of
  these fails every alteration of that user; the others apply. A credential that cannot be derived (an empty
  salted password: Java's HMAC refuses an empty key) or stored is UNKNOWN_SERVER_ERROR with Kafka's generic text.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    TYPE_OF_MECHANISM,
    ScramCredential,
    credential_from_salted_password,
)
from proto.errors import ErrorCode
from zk.client import KafkaZkClient
from zk.paths import USERS_ENTITY

logger = logging.getLogger(__name__)

# Kafka's texts (ZkAdminManager, and Errors.UNKNOWN_SERVER_ERROR's message).
USERNAME_MUST_NOT_BE_EMPTY = "Username must not be empty"
DESCRIBE_MISSING_USER = "Attempt to describe a user credential that does not exist"
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request"
UNKNOWN_SCRAM_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW_ITERATIONS = "Too few iterations"
TOO_MANY_ITERATIONS = "Too many iterations"
ALTERED_TWICE = "A user credential cannot be altered twice in the same request"
DELETE_MISSING_CREDENTIAL = "Attempt to delete a user credential that does not exist"
UNEXPECTED_ERROR = "The server experienced an unexpected error when processing the request."


@dataclass(frozen=True, slots=True)
class Upsertion:
    name: str
    mechanism: int  # Kafka's ScramMechanism type byte
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class UserResult:
    """One user's outcome; `credentials` (mechanism type, iterations) only in a describe."""

    user: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    credentials: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class DescribeResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    results: list[UserResult] = field(default_factory=list)


def credential_infos(config: Mapping[str, str]) -> list[tuple[int, int]]:
    """(mechanism type, iterations) of each SCRAM credential in a user's config, in ScramMechanism's order;
    ValueError if one cannot be read."""
    return [(TYPE_OF_MECHANISM[m], ScramCredential.from_text(config[m]).iterations)
            for m in SCRAM_MECHANISMS if m in config]


def describe_users(users: Sequence[str] | None, fetch: Callable[[str], Mapping[str, str]],
                   all_users: Callable[[], Sequence[str]]) -> DescribeResult:
    """ZkAdminManager.describeUserScramCredentials over `fetch` (a user's config) and `all_users`."""

    def described(user: str, explicit: bool) -> UserResult | None:
        config = fetch(user)
        if not any(m in config for m in SCRAM_MECHANISMS):
            return UserResult(user, ErrorCode.RESOURCE_NOT_FOUND, f"{DESCRIBE_MISSING_USER}: {user}") if explicit \
                else None
        try:
            return UserResult(user, credentials=credential_infos(config))
        except ValueError:
            logger.exception("Error processing describe user SCRAM credential configs request")
            return UserResult(user, ErrorCode.UNKNOWN_SERVER_ERROR)  # Kafka sends no text with this code

    try:
        if not users:
            found = (described(user, explicit=False) for user in sorted(all_users()))
            return DescribeResult(results=[r for r in found if r is not None])
        counts = Counter(users)
        results = []
        for user in dict.fromkeys(users):  # each user once, in request order
            if not user:
                results.append(UserResult(user, ErrorCode.RESOURCE_NOT_FOUND, USERNAME_MUST_NOT_BE_EMPTY))
            elif counts[user] > 1:
                results.append(UserResult(user, ErrorCode.DUPLICATE_RESOURCE, f"{DESCRIBE_DUPLICATE_USER}: {user}"))
            else:
                result = described(user, explicit=True)
                assert result is not None
                results.append(result)
        return DescribeResult(results=results)
    except Exception:  # ZooKeeper failed: the whole request fails, as Kafka's does
        logger.exception("Error processing describe user SCRAM credential configs request")
        return DescribeResult(ErrorCode.UNKNOWN_SERVER_ERROR, UNEXPECTED_ERROR)


def _refusal(name: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    """Why an alteration is illegal on its own (iterations None: a deletion), or None."""
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY
    if mechanism not in MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS
    return None


def alter_users(upsertions: Sequence[Upsertion], deletions: Sequence[Deletion],
                fetch: Callable[[str], Mapping[str, str]],
                store: Callable[[str, Mapping[str, str]], None]) -> list[UserResult]:
    """ZkAdminManager.alterUserScramCredentials over `fetch` and `store` (a user's config): one result per user
    named, in Kafka's order (illegal requests, duplicates, missing deletions, failures, successes)."""
    # Deletions first, so that an upsertion's reason wins for a user refused both ways (Kafka's map merge).
    illegal = {d.name: r for d in deletions if (r := _refusal(d.name, d.mechanism, None))}
    illegal.update({u.name: r for u in upsertions if (r := _refusal(u.name, u.mechanism, u.iterations))})
    results = [UserResult(user, code, message) for user, (code, message) in illegal.items()]

    alterations: list[Upsertion | Deletion] = [*upsertions, *deletions]
    pairs = Counter((a.name, a.mechanism) for a in alterations if a.name not in illegal)
    duplicated = list(dict.fromkeys(user for (user, _), n in pairs.items() if n > 1))
    results += [UserResult(user, ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE) for user in duplicated]

    candidates = [user for user in dict.fromkeys(user for user, _ in pairs) if user not in duplicated]
    # A ZooKeeper failure here fails the whole request (the caller answers every user), as in Kafka.
    configs = {user: dict(fetch(user)) for user in candidates}
    missing = list(dict.fromkeys(d.name for d in deletions
                                 if d.name in configs and MECHANISM_TYPES[d.mechanism] not in configs[d.name]))
    results += [UserResult(user, ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING_CREDENTIAL) for user in missing]

    succeeded, failed = [], []
    for user in (u for u in configs if u not in missing):
        config = configs[user]
        try:
            for d in deletions:
                if d.name == user:
                    del config[MECHANISM_TYPES[d.mechanism]]
            for u in upsertions:
                if u.name == user:
                    mechanism = MECHANISM_TYPES[u.mechanism]
                    config[mechanism] = credential_from_salted_password(
                        mechanism, u.salt, u.salted_password, u.iterations).to_text()
            store(user, config)
            succeeded.append(user)
        except Exception:
            logger.exception("Error encountered while altering user SCRAM credentials")
            failed.append(user)
    results += [UserResult(user, ErrorCode.UNKNOWN_SERVER_ERROR, UNEXPECTED_ERROR) for user in failed]
    return results + [UserResult(user) for user in succeeded]


class UserScramAdmin:
    """The two APIs on the broker's ZooKeeper client (blocking: call from a worker thread)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk

    def _fetch(self, user: str) -> dict[str, str]:
        return self._zk.get_entity_config(USERS_ENTITY, user)

    def _store(self, user: str, config: Mapping[str, str]) -> None:
        self._zk.set_entity_config(USERS_ENTITY, user, config)

    def describe(self, users: Sequence[str] | None) -> DescribeResult:
        return describe_users(users, self._fetch, self._zk.get_user_names)

    def alter(self, upsertions: Sequence[Upsertion], deletions: Sequence[Deletion]) -> list[UserResult]:
        return alter_users(upsertions, deletions, self._fetch, self._store)
