"""The ACLs in ZooKeeper, as Kafka's AclAuthorizer keeps them (ZkAclStore, ZkAclChangeStore,
ZkNodeChangeNotificationListener), feeding an AclAuthorizer's cache.

- LITERAL ACLs live in /kafka-acl/<ResourceType>/<name>, PREFIXED ones in
  /kafka-acl-extended/prefixed/<ResourceType>/<name>, as {"version":1,"acls":[...]}.
- A change is a conditional write on the resource's znode version (re-read and retried when another writer got
  there first, as AclAuthorizer.updateResourceAcls), then a sequential notification naming the resource:
  /kafka-acl-changes/acl_changes_<seq> ("TOPIC:orders") or /kafka-acl-extended-changes/acl_changes_<seq> (JSON).
- Every broker and controller watches both change directories and re-reads each resource a new notification
  names, so an ACL added through any broker (or written by Kafka's own tools) applies everywhere without a restart.
  Notifications older than 15 minutes are purged, as Kafka's listener does.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from common.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_acl_name,
    validate_binding,
)
from common.security.authorizer import AclAuthorizer
from proto.errors import ErrorCode, KafkaError
from zk import paths
from zk.client import KafkaZkClient, Watch
from zk.paths import CHANGE_EXPIRATION_MS

logger = logging.getLogger(__name__)

# AclAuthorizer's maxUpdateRetries and its retry backoff (retryBackoffMs + up to retryBackoffJitterMs).
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_S = (0.1, 0.15)
STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)
STORED_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                         ResourceType.DELEGATION_TOKEN)


def entry_to_json(entry: AccessControlEntry) -> paths.AclJsonEntry:
    return paths.AclJsonEntry(entry.principal, entry.permission_type.acl_name, entry.operation.acl_name, entry.host)


def entry_from_json(entry: paths.AclJsonEntry) -> AccessControlEntry:
    return AccessControlEntry(entry.principal, entry.host, AclOperation(from_acl_name(AclOperation, entry.operation)),
                              AclPermissionType(from_acl_name(AclPermissionType, entry.permission_type)))


def change_notification(pattern: ResourcePattern) -> bytes:
    return paths.encode_acl_change(pattern.pattern_type.name, pattern.resource_type.name, pattern.name)


class ZkAclStore:
    """Reads and writes the ACLs in ZooKeeper and keeps `authorizer`'s cache equal to them."""

    def __init__(self, zk: KafkaZkClient, authorizer: AclAuthorizer) -> None:
        self._zk = zk
        self.authorizer = authorizer
        self._lock = threading.Lock()  # one change at a time on this broker (AclAuthorizer's lock)
        # ZooKeeper reads off kazoo's event thread: a watch callback must not block it.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="acl-change")
        self._last_seen: dict[PatternType, str] = {}
        self._watches: list[Watch] = []

    # ------------------------------------------------------------------ lifecycle

    def startup(self) -> None:
        """Create the ACL paths, follow both change stores, then load every ACL (AclAuthorizer.configure)."""
        self._zk.create_acl_paths([t.acl_name for t in STORED_RESOURCE_TYPES])
        for pattern_type in STORED_PATTERN_TYPES:
            self._watches.append(self._zk.watch_acl_changes(pattern_type.name, self._on_changes(pattern_type)))
        self.load()

    def load(self) -> None:
        """Read every ACL into the cache (AclAuthorizer.loadCache); all a one-shot tool needs."""
        with self._lock:
            self.authorizer.replace_all({pattern: self._read(pattern) for pattern in self._stored_patterns()})
        logger.info("Loaded ACLs of %d resources from ZooKeeper", len(self.authorizer.acls_by_pattern()))

    def _on_changes(self, pattern_type: PatternType) -> Callable[[list[str]], None]:
        def submit(sequence_numbers: list[str]) -> None:
            self._executor.submit(self._process, pattern_type, sequence_numbers)
        return submit

    def shutdown(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._executor.shutdown(wait=True)

    def _stored_patterns(self) -> list[ResourcePattern]:
        found: list[ResourcePattern] = []
        for pattern_type in STORED_PATTERN_TYPES:
            for type_name in self._zk.get_acl_resource_types(pattern_type.name):
                try:
                    resource_type = ResourceType(from_acl_name(ResourceType, type_name))
                except ValueError:
                    logger.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                found.extend(ResourcePattern(resource_type, name, pattern_type)
                             for name in self._zk.get_acl_resource_names(pattern_type.name, type_name))
        return found

    def _read_versioned(self, pattern: ResourcePattern) -> tuple[set[AccessControlEntry], int]:
        entries, version = self._zk.get_versioned_acls(pattern.pattern_type.name, pattern.resource_type.acl_name,
                                                       pattern.name)
        return {entry_from_json(e) for e in entries}, version

    def _read(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        return self._read_versioned(pattern)[0]

    # ------------------------------------------------------------------ change notifications

    def _process(self, pattern_type: PatternType, sequence_numbers: Sequence[str]) -> None:
        """ZkNodeChangeNotificationListener.processNotifications: each notification newer than the last one seen,
        in order, re-reads the resource it names."""
        with self._lock:
            for seq in sequence_numbers:
                if seq <= self._last_seen.get(pattern_type, ""):  # zero-padded: string order is sequence order
                    continue
                self._last_seen[pattern_type] = seq
                try:
                    data = self._zk.get_acl_change(pattern_type.name, seq)
                    if data is not None:
                        self._reload(pattern_type, seq, data)
                except Exception:
                    logger.exception("Failed to process ACL change notification %s", seq)
            try:
                self._zk.purge_acl_changes(pattern_type.name, list(sequence_numbers),
                                           int(time.time() * 1000) - CHANGE_EXPIRATION_MS)
            except Exception:
                logger.exception("Failed to purge obsolete ACL change notifications")

    def _reload(self, store: PatternType, seq: str, data: bytes) -> None:
        pattern_name, type_name, name = paths.decode_acl_change(store.name, paths.acl_change_path(store.name, seq),
                                                                data)
        pattern = ResourcePattern(ResourceType(from_acl_name(ResourceType, type_name)),
                                  name, PatternType(from_acl_name(PatternType, pattern_name)))
        acls = self._read(pattern)
        self.authorizer.update(pattern, acls)
        logger.info("Processing ACL change notification for %s, versionedAcls : %s", pattern,
                    sorted(str(a) for a in acls))

    # ------------------------------------------------------------------ changes (CreateAcls / DeleteAcls)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """AclAuthorizer.createAcls: each binding's error, or None once it is stored (adding an ACL that exists
        is no error)."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for i, binding in enumerate(bindings):
            try:
                validate_binding(binding)
            except ValueError as e:
                results[i] = KafkaError(str(e), ErrorCode.INVALID_REQUEST)
                continue
            by_pattern.setdefault(binding.pattern, []).append(i)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                new = {bindings[i].entry for i in indexes}
                try:
                    self._update(pattern, new.union)
                except Exception as e:
                    logger.exception("Failed to add ACLs to %s", pattern)
                    for i in indexes:
                        results[i] = _api_error(e)
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]
                    ) -> list[tuple[KafkaError | None, list[tuple[AclBinding, KafkaError | None]]]]:
        """AclAuthorizer.deleteAcls: per filter, its own error (an indefinite filter) and the bindings it
        deleted, each with its error; a binding two filters match is reported by the first."""
        outcomes: list[tuple[KafkaError | None, list[tuple[AclBinding, KafkaError | None]]]] = []
        usable: list[tuple[int, AclBindingFilter]] = []
        for i, binding_filter in enumerate(filters):
            indefinite = binding_filter.find_indefinite_field()
            outcomes.append((None if indefinite is None else KafkaError(indefinite, ErrorCode.INVALID_REQUEST), []))
            if indefinite is None:
                usable.append((i, binding_filter))
        with self._lock:
            candidates = set(self.authorizer.acls_by_pattern())
            # A filter naming exactly one pattern reaches it even if this cache has not seen it yet.
            candidates.update(ResourcePattern(f.pattern.resource_type, f.pattern.name, f.pattern.pattern_type)
                              for _, f in usable if f.pattern.name is not None
                              and f.pattern.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
                              and f.pattern.pattern_type.is_specific)
            deleted: dict[AclBinding, int] = {}
            for pattern in sorted(candidates):
                matching = [(i, f) for i, f in usable if f.pattern.matches(pattern)]
                if not matching:
                    continue
                removing: dict[AclBinding, int] = {}

                def without(current: set[AccessControlEntry], pattern: ResourcePattern = pattern,
                            matching: list[tuple[int, AclBindingFilter]] = matching,
                            removing: dict[AclBinding, int] = removing) -> set[AccessControlEntry]:
                    removing.clear()
                    for entry in current:
                        index = next((i for i, f in matching if f.entry.matches(entry)), None)
                        if index is not None:
                            removing[AclBinding(pattern, entry)] = index
                    return current - {b.entry for b in removing}

                try:
                    self._update(pattern, without)
                    error = None
                except Exception as e:
                    logger.exception("Failed to delete ACLs of %s", pattern)
                    error = _api_error(e)
                for binding, index in removing.items():
                    if binding not in deleted:
                        deleted[binding] = index
                        outcomes[index][1].append((binding, error))
        return outcomes

    def _update(self, pattern: ResourcePattern,
                new_acls: Callable[[set[AccessControlEntry]], set[AccessControlEntry]]) -> None:
        """AclAuthorizer.updateResourceAcls: apply `new_acls` to the stored ACLs with a conditional write,
        re-reading and retrying when another writer changed them meanwhile; then update the cache and notify
        every broker. No change, no write."""
        type_name, pattern_name = pattern.resource_type.acl_name, pattern.pattern_type.name
        current, version = self._read_versioned(pattern)
        for _ in range(MAX_UPDATE_RETRIES + 1):
            wanted = new_acls(current)
            if wanted == current:
                self.authorizer.update(pattern, current)
                return
            if wanted:
                written, _ = self._zk.conditional_set_acls(pattern_name, type_name, pattern.name,
                                                           [entry_to_json(e) for e in wanted], version)
            else:
                written = self._zk.conditional_delete_acls(pattern_name, type_name, pattern.name, version)
            if written:
                self.authorizer.update(pattern, wanted)
                self._zk.create_acl_change_notification(pattern_name, change_notification(pattern))
                return
            time.sleep(random.uniform(*RETRY_BACKOFF_S))  # another writer won: back off, re-read, try again
            current, version = self._read_versioned(pattern)
        raise KafkaError(f"Failed to update ACLs for {pattern} after trying a maximum of {MAX_UPDATE_RETRIES}"
                         " times", ErrorCode.UNKNOWN_SERVER_ERROR)


def _api_error(e: Exception) -> KafkaError:
    return e if isinstance(e, KafkaError) else KafkaError(str(e), ErrorCode.UNKNOWN_SERVER_ERROR)
