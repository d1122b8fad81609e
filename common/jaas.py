"""JAAS login configuration, as Java reads `java.security.auth.login.config` files and Kafka `sasl.jaas.config`.

A file holds named sections, each a list of login modules with a control flag and options:

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="minibroker"
        password="secret";
    };

Kafka's `sasl.jaas.config` is one section's body without the name and braces. Only what Java's
ConfigFile parser accepts: quoted or bare values, `//` and `/* */` comments. The processes here read the
ZooKeeper client's identity from the `Client` section (zk/acl.py), as Kafka's brokers do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# Java's JAAS control flags.
FLAGS = ("required", "requisite", "sufficient", "optional")

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{};=]|[^\s{};="]+')


class JaasError(ValueError):
    """A JAAS configuration that does not parse, or lacks what is asked of it."""


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[str]:
    text = _COMMENT.sub(" ", text)
    tokens, pos = [], 0
    for match in _TOKEN.finditer(text):
        if text[pos:match.start()].strip():  # skipped over: only a quote the pattern could not close
            raise JaasError("unbalanced quotes in JAAS configuration")
        tokens.append(match.group())
        pos = match.end()
    if text[pos:].strip():
        raise JaasError("unbalanced quotes in JAAS configuration")
    return tokens


def _unquote(token: str) -> str:
    if token.startswith('"'):
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token


def _modules(tokens: list[str], pos: int, end: str | None) -> tuple[list[LoginModule], int]:
    """Login modules from tokens[pos] up to `end` ("}" in a file, None: the end of the text)."""
    modules = []
    while pos < len(tokens) and tokens[pos] != end:
        if pos + 1 >= len(tokens):
            raise JaasError(f"login module {tokens[pos]} has no control flag")
        class_name, flag = tokens[pos], tokens[pos + 1].lower()
        if flag not in FLAGS:
            raise JaasError(f"login module {class_name}: control flag must be one of {', '.join(FLAGS)}, not"
                            f" {tokens[pos + 1]!r}")
        pos += 2
        options = {}
        while pos < len(tokens) and tokens[pos] != ";":
            if pos + 2 >= len(tokens) or tokens[pos + 1] != "=":
                raise JaasError(f"login module {class_name}: expected key=value, found {tokens[pos]!r}")
            options[tokens[pos]] = _unquote(tokens[pos + 2])
            pos += 3
        if pos >= len(tokens):
            raise JaasError(f"login module {class_name} does not end with ';'")
        modules.append(LoginModule(class_name, flag, options))
        pos += 1
    return modules, pos


def parse_jaas_config(text: str) -> list[LoginModule]:
    """Kafka's `sasl.jaas.config` value: one or more `Module flag key=value ...;`."""
    modules, _ = _modules(_tokens(text), 0, None)
    if not modules:
        raise JaasError("JAAS configuration has no login module")
    return modules


def parse_jaas_file_text(text: str) -> dict[str, list[LoginModule]]:
    """Section name -> its login modules, from a JAAS login configuration file's text."""
    tokens = _tokens(text)
    sections: dict[str, list[LoginModule]] = {}
    pos = 0
    while pos < len(tokens):
        name = tokens[pos]
        if pos + 1 >= len(tokens) or tokens[pos + 1] != "{":
            raise JaasError(f"expected '{{' after section name {name!r}")
        modules, pos = _modules(tokens, pos + 2, "}")
        if pos >= len(tokens):
            raise JaasError(f"section {name} does not end with '}};'")
        pos += 1
        if pos < len(tokens) and tokens[pos] == ";":
            pos += 1
        sections[name] = modules
    return sections


def read_jaas_file(path: Path) -> dict[str, list[LoginModule]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise JaasError(f"cannot read JAAS file {path}: {e.strerror}") from None
    try:
        return parse_jaas_file_text(text)
    except JaasError as e:
        raise JaasError(f"{path}: {e}") from None


def quoted(value: str) -> str:
    """A value as a JAAS file or sasl.jaas.config writes it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
