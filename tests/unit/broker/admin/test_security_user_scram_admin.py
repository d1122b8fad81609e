"""Describe/AlterUserScramCredentials' rules (broker/admin/scram_admin.py) over an in-memory user config store,
and the salted-password conversion checked against scramp's own derivation from the password."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import pytest
import scramp

from broker.admin.scram_admin import (
    ALTERED_TWICE,
    DELETE_MISSING_CREDENTIAL,
    TOO_FEW_ITERATIONS,
    TOO_MANY_ITERATIONS,
    UNEXPECTED_ERROR,
    UNKNOWN_SCRAM_MECHANISM,
    USERNAME_MUST_NOT_BE_EMPTY,
    Deletion,
    DescribeResult,
    Upsertion,
    UserResult,
    alter_users,
    describe_users,
)
from broker.security.scram import ScramCredential, credential_from_salted_password, make_credential
from proto.errors import ErrorCode

SHA256, SHA512 = 1, 2
SALT = b"0123456789abcdef"


def upsertion(name: str, mechanism: int = SHA256, iterations: int = 4096, password: bytes = b"secret") -> Upsertion:
    digest = {SHA256: "sha256", SHA512: "sha512"}.get(mechanism, "sha256")
    return Upsertion(name, mechanism, iterations, SALT, hashlib.pbkdf2_hmac(digest, password, SALT, iterations))


class Store:
    def __init__(self, configs: dict[str, dict[str, str]] | None = None) -> None:
        self.configs = configs or {}
        self.writes: list[str] = []

    def fetch(self, user: str) -> dict[str, str]:
        return dict(self.configs.get(user, {}))

    def store(self, user: str, config: Mapping[str, str]) -> None:
        self.writes.append(user)
        self.configs[user] = dict(config)

    def alter(self, upsertions: list[Upsertion], deletions: list[Deletion]) -> dict[str, tuple[ErrorCode, str | None]]:
        results = alter_users(upsertions, deletions, self.fetch, self.store)
        assert len({r.user for r in results}) == len(results), "one result per user"
        return {r.user: (r.error, r.message) for r in results}

    def describe(self, users: list[str] | None) -> DescribeResult:
        return describe_users(users, self.fetch, lambda: list(self.configs))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_salted_password_gives_the_keys_scramp_derives_from_the_password(mechanism: str) -> None:
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    salted = hashlib.pbkdf2_hmac(digest, b"pw", SALT, 8192)
    ours = credential_from_salted_password(mechanism, SALT, salted, 8192)
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info(
        "pw", iteration_count=8192, salt=SALT)
    assert ours == ScramCredential(salt, stored_key, server_key, iterations)


def test_empty_salted_password_is_refused_like_javas_hmac() -> None:
    with pytest.raises(ValueError, match="Empty key"):
        credential_from_salted_password("SCRAM-SHA-256", SALT, b"", 4096)


def test_upsertions_store_credentials_a_scramp_server_accepts() -> None:
    store = Store()
    assert store.alter([upsertion("alice", SHA256, 8192), upsertion("alice", SHA512)], []) == {
        "alice": (ErrorCode.NONE, None)}
    stored = ScramCredential.from_text(store.configs["alice"]["SCRAM-SHA-256"])
    assert stored.iterations == 8192 and stored.salt == SALT
    # A real SCRAM exchange with the stored keys: the client knows only the password.
    server = scramp.ScramMechanism("SCRAM-SHA-256").make_server(lambda user: stored.auth_info())
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "secret")
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())


def test_deletion_removes_only_that_mechanism() -> None:
    store = Store({"bob": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "x").to_text(),
                           "SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "x").to_text(),
                           "producer_byte_rate": "9"}})
    assert store.alter([], [Deletion("bob", SHA256)]) == {"bob": (ErrorCode.NONE, None)}
    assert set(store.configs["bob"]) == {"SCRAM-SHA-512", "producer_byte_rate"}


def test_illegal_requests_fail_their_user_only() -> None:
    store = Store()
    results = store.alter(
        [upsertion(""), upsertion("u1", mechanism=3), upsertion("u2", iterations=4095),
         upsertion("u3", iterations=16385), upsertion("ok")],
        [Deletion("u4", 0), Deletion("u2", SHA512)])
    assert results == {
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_MUST_NOT_BE_EMPTY),
        "u1": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM),
        "u2": (ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_FEW_ITERATIONS),
        "u3": (ErrorCode.UNACCEPTABLE_CREDENTIAL, TOO_MANY_ITERATIONS),
        "u4": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, UNKNOWN_SCRAM_MECHANISM),
        "ok": (ErrorCode.NONE, None)}
    assert store.writes == ["ok"]


def test_bounds_are_inclusive() -> None:
    assert Store().alter([upsertion("a", iterations=4096), upsertion("b", iterations=16384)], []) == {
        "a": (ErrorCode.NONE, None), "b": (ErrorCode.NONE, None)}


def test_same_user_and_mechanism_twice_is_a_duplicate_but_two_mechanisms_are_not() -> None:
    store = Store({"carol": {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "x").to_text()}})
    results = store.alter([upsertion("dup"), upsertion("dup"), upsertion("carol", SHA256), upsertion("mix")],
                          [Deletion("carol", SHA512), Deletion("mix", SHA256)])
    assert results == {"dup": (ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE),
                       "mix": (ErrorCode.DUPLICATE_RESOURCE, ALTERED_TWICE), "carol": (ErrorCode.NONE, None)}
    assert list(store.configs["carol"]) == ["SCRAM-SHA-256"]


def test_deleting_a_missing_credential_fails_every_alteration_of_that_user() -> None:
    store = Store()
    assert store.alter([upsertion("dave", SHA256)], [Deletion("dave", SHA512)]) == {
        "dave": (ErrorCode.RESOURCE_NOT_FOUND, DELETE_MISSING_CREDENTIAL)}
    assert store.writes == []


def test_empty_salted_password_is_unknown_server_error_with_kafkas_generic_text() -> None:
    bad = Upsertion("erin", SHA256, 4096, SALT, b"")
    assert Store().alter([bad], []) == {"erin": (ErrorCode.UNKNOWN_SERVER_ERROR, UNEXPECTED_ERROR)}


def test_describe_all_lists_users_with_scram_credentials_sorted() -> None:
    store = Store({"zed": {"SCRAM-SHA-512": make_credential("SCRAM-SHA-512", "x", 8192).to_text(),
                           "SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "x").to_text()},
                   "quota-only": {"producer_byte_rate": "10"},
                   "amy": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "x", 5000).to_text()}})
    for users in (None, []):
        assert store.describe(users) == DescribeResult(results=[
            UserResult("amy", credentials=[(SHA256, 5000)]),
            UserResult("zed", credentials=[(SHA256, 4096), (SHA512, 8192)])])


def test_describe_named_users() -> None:
    store = Store({"amy": {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "x").to_text()},
                   "quota-only": {"producer_byte_rate": "10"}})
    assert store.describe(["amy", "", "twice", "quota-only", "twice", "ghost"]).results == [
        UserResult("amy", credentials=[(SHA256, 4096)]),
        UserResult("", ErrorCode.RESOURCE_NOT_FOUND, USERNAME_MUST_NOT_BE_EMPTY),
        UserResult("twice", ErrorCode.DUPLICATE_RESOURCE,
                   "Cannot describe SCRAM credentials for the same user twice in a single request: twice"),
        UserResult("quota-only", ErrorCode.RESOURCE_NOT_FOUND,
                   "Attempt to describe a user credential that does not exist: quota-only"),
        UserResult("ghost", ErrorCode.RESOURCE_NOT_FOUND,
                   "Attempt to describe a user credential that does not exist: ghost")]


def test_describe_an_unreadable_credential_and_a_zookeeper_failure() -> None:
    store = Store({"broken": {"SCRAM-SHA-256": "salt=nope"}})
    assert store.describe(["broken"]).results == [UserResult("broken", ErrorCode.UNKNOWN_SERVER_ERROR)]

    def down() -> list[str]:
        raise ConnectionError("ZooKeeper is gone")

    assert describe_users(None, store.fetch, down) == DescribeResult(ErrorCode.UNKNOWN_SERVER_ERROR,
                                                                     UNEXPECTED_ERROR)
