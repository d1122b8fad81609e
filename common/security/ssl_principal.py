"""The principal of an SSL connection: the client certificate's subject, mapped by ssl.principal.mapping.rules
(Kafka's DefaultKafkaPrincipalBuilder with SslPrincipalMapper).

The subject is its RFC 2253/4514 text, "CN=alice,OU=dev,O=example", which is what Java's X500Principal.getName()
gives Kafka. Rules are Kafka's: a comma-separated list of `DEFAULT` (the subject as it is) and
`RULE:<pattern>/<replacement>/[L|U]` (the first rule whose Java-style pattern matches the whole subject gives
the name, `$1`.. for its groups, lower- or upper-cased). A connection without a client certificate is
User:ANONYMOUS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cryptography import x509

from common.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, in Python's regex syntax (the same here).
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if self.pattern.fullmatch(subject) is None:
            return None
        groups = self.pattern.groups
        # Java's $n back references; one beyond the groups shrinks digit by digit, then stays literal (Kafka's
        # escapeLiteralBackReferences).
        def reference(match: re.Match[str]) -> str:
            number = match.group(1)
            index = int(number)
            while index > groups and index >= 10:
                index //= 10
            if number.startswith("0") or index > groups:
                return match.group(0).replace("\\", "\\\\")
            return f"\\g<{index}>" + number[len(str(index)):]
        name = self.pattern.sub(_BACK_REFERENCE.sub(reference, self.replacement), subject)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self._rules: list[_Rule] = []
        for rule in (m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())):
            match = _RULE_PARSER.match(rule)
            if match is None or match.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if match.group(1) is not None:
                self._rules.append(_Rule(None))
            elif match.group(2) is not None:
                try:
                    pattern = re.compile(match.group(2))
                except re.error as e:
                    raise ValueError(f"Invalid rule: {rule}: {e}") from None
                self._rules.append(_Rule(pattern, match.group(4), match.group(6)))
            elif match.group(7):
                raise ValueError(f"Invalid rule: {rule}")

    def name(self, subject: str) -> str:
        for rule in self._rules:
            name = rule.apply(subject)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {subject}")

    def principal(self, certificate_der: bytes | None) -> KafkaPrincipal:
        """The connection's principal from its peer certificate (DER); ANONYMOUS without one."""
        if not certificate_der:
            return ANONYMOUS
        subject = x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()
        return KafkaPrincipal(USER_TYPE, self.name(subject))
