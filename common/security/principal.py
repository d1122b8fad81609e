"""Kafka's principal: a type and a name, written "User:alice" in ACLs, super.users and logs."""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """"User:alice" -> KafkaPrincipal("User", "alice"); the name may itself hold colons, the type may not."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected a principal as <type>:<name>, got {text!r}")
        return cls(principal_type, name)


# Kafka's KafkaPrincipal.ANONYMOUS: what a PLAINTEXT (or unauthenticated SSL) connection acts as.
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
