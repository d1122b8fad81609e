"""Kafka's `zookeeper.set.acl`: who may change which znode, and the ZooKeeper identity of the cluster's processes.

With `zookeeper.set.acl=true` every znode a broker, controller or tool creates gets Kafka's
ZkData.defaultAcls: ALL for its creator's authenticated identity (ZooKeeper's `auth` scheme, which the server
turns into the creator's `digest` id) and READ for anyone, except under the sensitive paths (`/config/users`,
which holds SCRAM credentials, and `/config/brokers`), which nobody else may even read. `/consumers` stays
open, as in Kafka (old consumers write there). So only processes logged in as the cluster's user can change
cluster state: all brokers and controllers must use the same ZooKeeper user, as Kafka's must.

That identity comes from the `Client` section of a JAAS login file (Kafka's `java.security.auth.login.config`
system property; a config key of the same name here), ZooKeeper's DigestLoginModule with username and
password: kazoo sends it as `digest` auth on every (re)connection. `zookeeper-security-migration`
(minibroker/commands/zookeeper_security_migration.py) sets these ACLs on an existing cluster's znodes, or
opens them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kazoo.security import ACL, CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from common.config import ConfigError
from common.jaas import JaasError, quoted, read_jaas_file
from zk import paths

# The JAAS section ZooKeeper's client reads (its `zookeeper.sasl.clientconfig` default).
CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
# What Kafka calls the JAAS file's system property; a broker or controller config key here.
JAAS_CONFIG_KEY = "java.security.auth.login.config"

# Kafka's ZkData.SecureRootPaths (+ ZkAclStore.securePaths): every top-level path a Kafka cluster owns.
SECURE_ROOT_PATHS = (
    "/admin",
    "/brokers",
    "/cluster",
    "/config",
    paths.CONTROLLER,
    paths.CONTROLLER_EPOCH,
    paths.ISR_CHANGE_NOTIFICATION,
    paths.PRODUCER_ID_BLOCK,
    paths.LOG_DIR_EVENT_NOTIFICATION,
    "/delegation_token",
    "/feature",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended",
    "/kafka-acl-extended-changes",
)
# Kafka's ZkData.SensitiveRootPaths: no world READ (SCRAM credentials, broker configs with passwords).
SENSITIVE_ROOT_PATHS = (paths.CONFIG_USERS, paths.CONFIG_BROKERS, "/delegation_token/tokens")

# Kafka 0.8's consumers wrote here themselves, so Kafka leaves it open; minibroker no longer uses it.
OLD_CONSUMERS = "/consumers"


def sensitive_path(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    """Kafka's ZkData.defaultAcls: the ACL a znode at `path` (chroot-relative) is created or migrated with."""
    if not secure or path == OLD_CONSUMERS:
        return list(OPEN_ACL_UNSAFE)
    return list(CREATOR_ALL_ACL) + ([] if sensitive_path(path) else list(READ_ACL_UNSAFE))


@dataclass(frozen=True)
class ZkCredentials:
    """The digest identity (DigestLoginModule's username and password) a process logs in to ZooKeeper with."""

    username: str
    password: str

    def __repr__(self) -> str:
        return f"ZkCredentials({self.username!r}, [hidden])"

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's auth_data: sent as `addauth digest user:password` on every connection."""
        return [("digest", f"{self.username}:{self.password}")]

    @classmethod
    def from_jaas_file(cls, path: Path, section: str = CLIENT_SECTION) -> ZkCredentials:
        """The DigestLoginModule of the file's `Client` section; JaasError says what is missing."""
        sections = read_jaas_file(path)
        modules = sections.get(section)
        if modules is None:
            raise JaasError(f"{path} has no '{section}' section (the ZooKeeper client's login)")
        for module in modules:
            if module.class_name == DIGEST_LOGIN_MODULE:
                username, password = module.options.get("username"), module.options.get("password")
                if not username or password is None:
                    raise JaasError(f"{path}: {DIGEST_LOGIN_MODULE} in '{section}' needs username and password")
                return cls(username, password)
        raise JaasError(f"{path}: '{section}' has no {DIGEST_LOGIN_MODULE} (only digest auth is supported)")

    def jaas_file_text(self) -> str:
        """A JAAS file whose `Client` section is this identity (what `cluster up --security` writes)."""
        return (f"{CLIENT_SECTION} {{\n    {DIGEST_LOGIN_MODULE} required\n"
                f"    username={quoted(self.username)}\n    password={quoted(self.password)};\n}};\n")


@dataclass(frozen=True)
class ZkSecurity:
    """How a process uses ZooKeeper: whether it creates znodes with Kafka's ACLs, and as whom it logs in."""

    set_acl: bool = False
    credentials: ZkCredentials | None = None

    def __post_init__(self) -> None:
        if self.set_acl and self.credentials is None:
            # Kafka's KafkaServer: "zookeeper.set.acl is true, but the verification of the JAAS login file failed".
            raise JaasError(f"zookeeper.set.acl is true, but no JAAS login file gives a ZooKeeper identity: set"
                            f" {JAAS_CONFIG_KEY} to a file with a '{CLIENT_SECTION}' section")

    @classmethod
    def from_config(cls, set_acl: bool, jaas_file: str | None) -> ZkSecurity:
        credentials = None if not jaas_file else ZkCredentials.from_jaas_file(Path(jaas_file))
        return cls(set_acl, credentials)

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [] if self.credentials is None else self.credentials.auth_data

    def acls(self, path: str) -> list[ACL]:
        return default_acls(self.set_acl, path)


OPEN = ZkSecurity()


def zk_security_from_config(set_acl: bool, jaas_file: str | None) -> ZkSecurity:
    """A process's ZkSecurity from its zookeeper.set.acl and java.security.auth.login.config (the broker's and the
    controller's configs alike); a bad JAAS file is a ConfigError naming that key."""
    try:
        return ZkSecurity.from_config(set_acl, jaas_file)
    except JaasError as e:
        raise ConfigError(JAAS_CONFIG_KEY, jaas_file, str(e)) from None
