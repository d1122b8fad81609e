"""TLS and authentication on the broker's gRPC listeners, from the same Kafka-named `ssl.*` keys as its Kafka
listeners (`listener.name.<listener>.ssl.*` winning over `ssl.*`, KafkaConfig.for_listener).

A gRPC listener whose security protocol is SSL serves TLS with its key store; with `ssl.client.auth=required`
(what inter-broker listeners use) only a peer whose certificate the trust store's CAs signed completes the
handshake: a broker with a certificate from another CA, an expired one or none cannot fetch from it at all.

Who a call is (Kafka's principal), in this order:
  1. a SASL user: a call carrying `authorization: Basic` (common/grpc_tls.py) whose password matches the user's
     SCRAM credential in ZooKeeper acts as User:<name>; a wrong one, or an unknown user, is refused
     (UNAUTHENTICATED) after connection.failed.authentication.delay.ms, never downgraded. The check (a PBKDF2)
     runs off the event loop, and costs as much for an unknown user as for a known one, as on the Kafka
     listeners;
  2. the peer certificate's subject, mapped by `ssl.principal.mapping.rules` (User:CN=broker-1,OU=minibroker);
  3. ANONYMOUS.
Cluster actions (LeaderAndIsr, UpdateMetadata, StopReplica, follower Fetch and ListOffsets,
OffsetsForLeaderEpoch) need Kafka's CLUSTER_ACTION on the cluster from the authorizer for the call's principal;
on a plaintext listener the shared `cluster.credential` is what is checked (common/security/cluster_action.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import hmac
import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import grpc
import scramp

from broker.config.kafka_config import KafkaConfig
from broker.security.scram import SCRAM_MECHANISMS, CredentialCache, ScramCredential, make_credential
from common.config import ConfigError
from common.grpc_tls import PLAINTEXT, GrpcSecurity, KeyStore, TlsConfigError, basic_credentials, read_truststore
from common.security.authorizer import AclAuthorizer, Session
from common.security.cluster_action import authorize_cluster_action
from common.security.grpc_peer import certificate_subject
from common.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from common.security.ssl_principal import SslPrincipalMapper
from proto.auth import carries_cluster_credential

logger = logging.getLogger(__name__)

_VERIFIED_CACHE_SIZE = 1024
# Checks a SASL user's password; True when it matches the user's stored credential.
PasswordCheck = Callable[[str, str], bool]


def _value(config: KafkaConfig, listener_name: str, key: str) -> Any:
    value = config.for_listener(listener_name, key)
    return getattr(value, "value", value)  # a Password's text


def listener_security(config: KafkaConfig, listener_name: str) -> GrpcSecurity:
    """The key store and trust store of one listener; PLAINTEXT for a plaintext listener. ConfigError, naming
    the key to fix, when a store cannot be read."""
    protocol = config.listener_security_protocols.get(listener_name.upper(), "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    password = _value(config, listener_name, "ssl.key.password")
    try:
        inline_chain = _value(config, listener_name, "ssl.keystore.certificate.chain")
        if inline_chain:
            key = _value(config, listener_name, "ssl.keystore.key") or ""
            keystore = KeyStore.from_pem((key + "\n" + inline_chain).encode(), password,
                                         config.listener_key(listener_name, "ssl.keystore.certificate.chain"))
        else:
            keystore = KeyStore.load(_value(config, listener_name, "ssl.keystore.location"), password)
    except TlsConfigError as e:
        raise ConfigError(config.listener_key(listener_name, "ssl.keystore.location"), "[hidden]", str(e)) from None
    try:
        inline_ca = _value(config, listener_name, "ssl.truststore.certificates")
        location = _value(config, listener_name, "ssl.truststore.location")
        if not inline_ca and not location:
            raise TlsConfigError(f"a TLS gRPC listener ({listener_name}) checks its peers' certificates with a"
                                 " trust store: set ssl.truststore.location")
        truststore = inline_ca.encode() if inline_ca else read_truststore(location)
    except TlsConfigError as e:
        raise ConfigError(config.listener_key(listener_name, "ssl.truststore.location"), location, str(e)) from None
    return GrpcSecurity(truststore, keystore)


def inter_broker_security(config: KafkaConfig) -> GrpcSecurity:
    """How this broker reaches the others (fetches) and the controller (ControlledShutdown): with the stores of
    its inter-broker listener, as Kafka's inter-broker clients use that listener's ssl.* keys."""
    return listener_security(config, config.inter_broker_listener)


def requires_client_certificates(config: KafkaConfig, listener_name: str) -> bool:
    return bool(_value(config, listener_name, "ssl.client.auth") == "required")


def scram_password_check(credentials: CredentialCache) -> PasswordCheck:
    """A user's password checked against its SCRAM credential (the strongest mechanism it has): the salted
    password recomputed with the stored salt and iterations (scramp) must give the stored key, compared in
    constant time. The password itself is stored nowhere, as with SCRAM on the Kafka listeners.

    An unknown user costs the same work, on a dummy credential no password matches (Kafka's default
    iterations), and gets the same answer, so neither tells an attacker which users exist. Salting costs
    thousands of hashes, and every call carries the password: a success is remembered, keyed by a digest of
    the password and the stored key it matched, so a changed credential is checked afresh. Blocking: call it
    off the event loop (GrpcAuthenticator's interceptor does)."""
    verified: OrderedDict[tuple[str, bytes, bytes], None] = OrderedDict()
    lock = threading.Lock()
    dummy_mechanism = SCRAM_MECHANISMS[-1]
    dummy = make_credential(dummy_mechanism, secrets.token_urlsafe(24))

    def check(username: str, password: str) -> bool:
        found = next(((m, c) for m in reversed(SCRAM_MECHANISMS) if (c := credentials.get(m, username))), None)
        mechanism, credential = found or (dummy_mechanism, dummy)
        key = (username, hashlib.sha256(password.encode()).digest(), credential.stored_key)
        with lock:
            if found is not None and key in verified:
                verified.move_to_end(key)
                return True
        matches = hmac.compare_digest(salted_stored_key(mechanism, password, credential), credential.stored_key)
        if found is None or not matches:
            return False
        with lock:
            verified[key] = None
            while len(verified) > _VERIFIED_CACHE_SIZE:
                verified.popitem(last=False)
        return True

    return check


def salted_stored_key(mechanism: str, password: str, credential: ScramCredential) -> bytes:
    """RFC 5802's StoredKey of `password` with the credential's salt and iterations: the PBKDF2 a check costs."""
    _, stored_key, _, _ = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=credential.iterations, salt=credential.salt)
    return bytes(stored_key)


class GrpcAuthenticator:
    """The principal of a call on one gRPC listener (see the module doc)."""

    def __init__(self, listener_name: str, tls: bool, mapper: SslPrincipalMapper,
                 check_password: PasswordCheck | None = None, cluster_credential: bytes | None = None,
                 failed_authentication_delay_s: float = 0.0, executor: Executor | None = None) -> None:
        self.listener_name = listener_name
        self.tls = tls
        self._mapper = mapper
        self._check_password = check_password
        self._cluster_credential = cluster_credential
        self.failed_authentication_delay_s = failed_authentication_delay_s
        # Where passwords are checked (a PBKDF2 each): never the event loop. None: the loop's default executor.
        self._executor = executor

    @classmethod
    def for_listener(cls, config: KafkaConfig, listener_name: str, check_password: PasswordCheck | None = None,
                     executor: Executor | None = None) -> GrpcAuthenticator:
        tls = listener_security(config, listener_name).tls
        credential = None if config.cluster_credential is None else config.cluster_credential.value.encode()
        rules = str(_value(config, listener_name, "ssl.principal.mapping.rules"))
        delay_ms = _value(config, listener_name, "connection.failed.authentication.delay.ms")
        return cls(listener_name, tls, SslPrincipalMapper(rules), check_password, credential, delay_ms / 1000,
                   executor)

    def interceptor(self) -> grpc.aio.ServerInterceptor:
        """Checks the SASL user of a call that names one before its handler runs; a wrong password (or an
        unknown user: the same work, the same answer) is refused with UNAUTHENTICATED (Kafka's
        SASL_AUTHENTICATION_FAILED) after connection.failed.authentication.delay.ms, logged with the peer."""
        return _AuthenticateSaslUsers(self)

    async def authenticate(self, username: str, password: str) -> bool:
        """Whether the password is the user's, checked off the event loop; never over plaintext, where a
        password must not travel."""
        if not self.tls or self._check_password is None:
            return False
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._check_password, username, password)

    def certificate_principal(self, context: Any) -> KafkaPrincipal | None:
        """The principal of the peer's CA-verified certificate; None without one (or on a plaintext listener)."""
        subject = certificate_subject(context) if self.tls else None
        return None if subject is None else KafkaPrincipal(USER_TYPE, self._mapper.name(subject))

    def principal(self, context: Any) -> KafkaPrincipal | None:
        """Who the call acts as; None when it names a SASL user the interceptor did not authenticate for this
        call (a call that never went through it)."""
        if basic_credentials(context.invocation_metadata()) is not None:
            return _sasl_principal.get()
        return self.certificate_principal(context) or ANONYMOUS

    def authorize_cluster_action(self, context: Any, authorizer: AclAuthorizer | None, session: Session) -> bool:
        """CLUSTER_ACTION on the cluster for the call (common/security/cluster_action.py): the cluster credential
        on a plaintext listener that has one, else the authorizer's decision for `session`, else (no
        authorizer) a CA-verified certificate on TLS."""
        verified = self.certificate_principal(context) is not None
        credential = None if self._cluster_credential is None else carries_cluster_credential(
            context.invocation_metadata(), self._cluster_credential)
        if authorize_cluster_action(authorizer, session, tls=self.tls, verified_certificate=verified,
                                    carries_credential=credential):
            return True
        if self.tls and not verified and authorizer is None:
            logger.warning("Refused a cluster action from %s on gRPC listener %s: no client certificate",
                           context.peer(), self.listener_name)
        return False


# The SASL user the interceptor authenticated, for the handler of the same call (it runs in the interceptor's
# wrapper, so in its context).
_sasl_principal: contextvars.ContextVar[KafkaPrincipal | None] = contextvars.ContextVar("grpc_sasl_principal",
                                                                                       default=None)


class _AuthenticateSaslUsers(grpc.aio.ServerInterceptor):
    def __init__(self, authenticator: GrpcAuthenticator) -> None:
        self._authenticator = authenticator

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        basic = basic_credentials(handler_call_details.invocation_metadata)
        if basic is None or handler is None:
            return handler
        username, password = basic
        authenticator = self._authenticator

        async def authenticated(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            if await authenticator.authenticate(username, password):
                _sasl_principal.set(KafkaPrincipal(USER_TYPE, username))
                return
            logger.info("Failed authentication with %s (user %s on gRPC listener %s: invalid credentials)",
                        context.peer(), username, authenticator.listener_name)
            # Kafka's connection.failed.authentication.delay.ms: slows down guessing.
            await asyncio.sleep(authenticator.failed_authentication_delay_s)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                                "Authentication failed: invalid username or password")

        if handler.unary_unary is not None:
            behavior = handler.unary_unary

            async def unary_unary(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                await authenticated(context)
                return await behavior(request, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, request_deserializer=handler.request_deserializer,
                                                       response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:  # grpc.health.v1's Watch
            streaming = handler.unary_stream

            async def unary_stream(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
                await authenticated(context)
                return await streaming(request, context)

            return grpc.unary_stream_rpc_method_handler(unary_stream,
                                                        request_deserializer=handler.request_deserializer,
                                                        response_serializer=handler.response_serializer)
        return handler  # no client-streaming RPC is served
