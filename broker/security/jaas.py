"""Kafka's JAAS config value (`sasl.jaas.config`): `<LoginModule class> <flag> key="value" ...;`.

The brokers read `listener.name.<listener>.<mechanism>.sasl.jaas.config` (Kafka's JaasContext.loadServerContext).
For PLAIN, Kafka's default server callback (PlainServerCallbackHandler) takes the users from the login module's
options: `user_<name>="<password>"`; the `username`/`password` options are the broker's own client identity
(unused here: brokers talk gRPC to each other).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_USER_PREFIX = "user_"
# A token: a quoted string (with \" and \\ escapes), a word, '=' or ';' (Kafka's JaasConfig StreamTokenizer).
_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')


class JaasConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str]


def parse_jaas_config(text: str) -> list[LoginModule]:
    """Every login module of the value, in order; JaasConfigError naming what is wrong."""
    tokens: list[tuple[str, str]] = []  # (kind, text): kind is "word", "string", "=" or ";"
    position, end = 0, len(text.rstrip())
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasConfigError(f"Invalid JAAS config: unexpected text at {text[position:position + 20]!r}")
        quoted, word, equals, semicolon = match.groups()
        if quoted is not None:
            tokens.append(("string", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            tokens.append(("word", word))
        else:
            tokens.append((equals or semicolon, equals or semicolon))
        position = match.end()
    modules = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][1].lower() not in FLAGS:
            raise JaasConfigError("Invalid JAAS config: expected '<LoginModule class> <control flag> [options];'"
                                  f" with a flag of {', '.join(FLAGS)}")
        class_name, flag = tokens[i][1], tokens[i + 1][1].lower()
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            if not (i + 2 < len(tokens) and tokens[i][0] == "word" and tokens[i + 1][0] == "="
                    and tokens[i + 2][0] in ("word", "string")):
                raise JaasConfigError(f"Invalid JAAS config: expected key=value options for {class_name}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasConfigError(f"Invalid JAAS config: login module {class_name} must end with ';'")
        i += 1
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise JaasConfigError("Invalid JAAS config: no login module")
    return modules


def plain_users(text: str) -> dict[str, str]:
    """user name -> password from the `user_<name>="<password>"` options of a PLAIN login module config."""
    users = {}
    for module in parse_jaas_config(text):
        for key, value in module.options.items():
            if key.startswith(PLAIN_USER_PREFIX) and len(key) > len(PLAIN_USER_PREFIX):
                users[key[len(PLAIN_USER_PREFIX):]] = value
    return users
