"""The server side of the SASL mechanisms served on Kafka listeners: PLAIN and SCRAM-SHA-256/512.

Each SaslServer takes the client's tokens one at a time (`evaluate`) and answers the next server token, as
javax.security.sasl.SaslServer does, with no I/O: the Kafka protocol around it (SaslHandshake,
SaslAuthenticate, raw v0 tokens) is broker/api/kafka/sasl_authenticator.py. A failure raises
SaslAuthenticationError; its `client_message` is what Kafka tells the client. Like Kafka, the message says
whether the credentials were wrong, never whether the user exists.

- PLAIN (RFC 4616): `authzid NUL authcid NUL password`, checked against the users of the listener's JAAS
  config (Kafka's PlainServerCallbackHandler), in constant time.
- SCRAM (RFC 5802/7677): the exchange is `scramp`'s; the credentials come from the CredentialCache that
  /config/users/<user> feeds.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Protocol

import scramp

from broker.security.scram import SCRAM_MECHANISMS, CredentialCache

PLAIN = "PLAIN"


class SaslAuthenticationError(Exception):
    """Authentication failed; `client_message` goes into the SASL_AUTHENTICATION_FAILED response, the
    exception's own text (which may say more) only into the broker's log."""

    def __init__(self, log_message: str, client_message: str) -> None:
        super().__init__(log_message)
        self.client_message = client_message


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


def _invalid_credentials(mechanism: str, reason: str) -> SaslAuthenticationError:
    # Kafka's SaslServerAuthenticator: a SaslException's own message may reveal whether the user exists, so
    # the client only hears this.
    return SaslAuthenticationError(
        reason, f"Authentication failed during authentication due to invalid credentials with SASL mechanism"
                f" {mechanism}")


class PlainServer:
    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        assert self._user is not None, "authentication is not complete"
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        # Kafka's PlainSaslServer.evaluateResponse, with its messages.
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3:
            raise _invalid_credentials(PLAIN, f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, username, password = parts
        if not username:
            raise _invalid_credentials(PLAIN, "Authentication failed: username not specified")
        if not password:
            raise _invalid_credentials(PLAIN, "Authentication failed: password not specified")
        expected = self._users.get(username)
        # Kafka's Utils.isEqualConstantTime: how long the check takes says nothing about the password.
        if expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            message = "Authentication failed: Invalid username or password"
            raise SaslAuthenticationError(f"{message} (user {username!r})", message)
        if authorization_id and authorization_id != username:
            message = "Authentication failed: Client requested an authorization id that is different from username"
            raise SaslAuthenticationError(message, message)
        self._user = username
        return b""


class ScramServer:
    def __init__(self, mechanism: str, credentials: CredentialCache) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self._user: str | None = None
        self._first_done = False
        self._complete = False
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int] | None:
        credential = self._credentials.get(self.mechanism, user)
        if credential is None:
            return None
        self._user = user
        return credential.auth_info()

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete and self._user is not None, "authentication is not complete"
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
            if not self._first_done:
                self._first_done = True
                self._server.set_client_first(message)
                return self._server.get_server_first().encode()
            self._accept_nonce_as_kafka_does(message)
            self._server.set_client_final(message)
            final = self._server.get_server_final().encode()
        except (scramp.ScramException, UnicodeDecodeError) as e:
            raise _invalid_credentials(self.mechanism, f"SCRAM exchange failed: {e}") from None
        self._complete = True
        return final


    def _accept_nonce_as_kafka_does(self, client_final: str) -> None:
        """Kafka's ScramSaslServer only asks that the client-final nonce END with the server-first one, and
        librdkafka 2.0 (Debian's kcat) sends the client nonce twice; scramp wants them equal. So a nonce Kafka
        accepts becomes the one scramp expects; the proof still covers the message exactly as received."""
        expected = str(self._server.nonce)
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                nonce = attribute[2:]
                if nonce != expected and nonce.endswith(expected):
                    self._server.nonce = type(self._server.nonce)(nonce)
                return


ServerFactory = Callable[[str], SaslServer]


def server_factory(plain_users: Mapping[str, str], credentials: CredentialCache) -> ServerFactory:
    """A new SaslServer for a mechanism the listener enabled."""
    def make(mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, credentials)
        raise ValueError(f"SASL mechanism {mechanism} is not served")

    return make
