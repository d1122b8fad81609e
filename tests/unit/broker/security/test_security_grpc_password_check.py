"""Password checks on the gRPC listeners (broker/security/grpc_authentication.py): an unknown user costs the same
PBKDF2 as a known one and gets the same answer (a dummy credential), and the check runs in the executor the
broker gives it, never on the event loop, before the handler, which then sees the user as the call's principal."""

from __future__ import annotations

import asyncio
import base64
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from broker.security import grpc_authentication
from broker.security.grpc_authentication import GrpcAuthenticator, scram_password_check
from broker.security.scram import CredentialCache, make_credential
from common.security.principal import KafkaPrincipal
from common.security.ssl_principal import SslPrincipalMapper


@pytest.fixture
def credentials() -> CredentialCache:
    cache = CredentialCache()
    cache.update_user("alice", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "alice-secret").to_text()})
    return cache


def test_an_unknown_user_costs_one_pbkdf2_as_a_known_one_does(credentials: CredentialCache,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    salted: list[tuple[str, int]] = []
    real = grpc_authentication.salted_stored_key

    def counted(mechanism: str, password: str, credential: Any) -> bytes:
        salted.append((mechanism, credential.iterations))
        return real(mechanism, password, credential)

    monkeypatch.setattr(grpc_authentication, "salted_stored_key", counted)
    check = scram_password_check(credentials)
    assert not check("alice", "wrong")
    assert not check("mallory", "wrong")
    assert salted == [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)]
    assert check("alice", "alice-secret")


class _Context:
    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5353"

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise asyncio.CancelledError  # grpc.aio's abort never returns


def _call(authenticator: GrpcAuthenticator, user: str, password: str) -> tuple[_Context, list[Any]]:
    """A unary call naming `user` through the interceptor; what its handler saw as the principal."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    metadata = (("authorization", f"Basic {token}"),)
    context = _Context(metadata)
    seen: list[Any] = []

    async def handler(_request: Any, ctx: Any) -> str:
        seen.append(authenticator.principal(ctx))
        return "answered"

    async def scenario() -> None:
        async def continuation(_details: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(handler)

        wrapped = await authenticator.interceptor().intercept_service(
            continuation, SimpleNamespace(invocation_metadata=metadata, method="/m"))
        try:
            await wrapped.unary_unary(None, context)
        except asyncio.CancelledError:
            pass

    asyncio.run(scenario())
    return context, seen


def test_the_check_runs_in_the_executor_and_its_user_is_the_principal(credentials: CredentialCache) -> None:
    threads: list[int] = []
    check = scram_password_check(credentials)

    def recorded(user: str, password: str) -> bool:
        threads.append(threading.get_ident())
        return check(user, password)

    with ThreadPoolExecutor(1, thread_name_prefix="checks") as executor:
        worker = executor.submit(threading.get_ident).result()
        authenticator = GrpcAuthenticator("GRPC", True, SslPrincipalMapper(), recorded, None, 0.0, executor)
        context, seen = _call(authenticator, "alice", "alice-secret")
        assert context.aborted is None and seen == [KafkaPrincipal("User", "alice")]
        for user in ("alice", "mallory"):
            context, seen = _call(authenticator, user, "wrong")
            assert seen == [] and context.aborted == (grpc.StatusCode.UNAUTHENTICATED,
                                                      "Authentication failed: invalid username or password")
    assert threads == [worker] * 3


def test_a_handler_reached_without_the_interceptor_has_no_sasl_principal() -> None:
    authenticator = GrpcAuthenticator("GRPC", True, SslPrincipalMapper())
    token = base64.b64encode(b"alice:alice-secret").decode()
    assert authenticator.principal(_Context((("authorization", f"Basic {token}"),))) is None
