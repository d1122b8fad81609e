"""The broker's Prometheus metrics, named after Kafka's JMX MBeans (`kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions` becomes `kafka_server_ReplicaManager_UnderReplicatedPartitions`).

Kafka's *PerSec meters are Prometheus counters (rates come from `rate()`), its
gauges are computed when scraped, and request latency is a histogram per
request kind. Each broker has its own registry, so several brokers in one
process (tests) do not collide; `metrics.port` serves it over HTTP (0: off).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client import Counter, Gauge, Histogram

from common.metrics import MetricsEndpoint

# Produce with acks=all waits for replication; fetches long-poll up to their max wait.
_LATENCY_BUCKETS_MS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


class BrokerMetrics(MetricsEndpoint):
    def __init__(self) -> None:
        super().__init__()
        registry = self.registry
        rm = "kafka_server_ReplicaManager_"
        self.isr_shrinks = Counter(f"{rm}IsrShrinksPerSec", "ISR shrinks written by this leader",
                                   registry=registry)
        self.isr_expands = Counter(f"{rm}IsrExpandsPerSec", "ISR expansions written by this leader",
                                   registry=registry)
        self.failed_isr_updates = Counter(f"{rm}FailedIsrUpdatesPerSec",
                                          "ISR writes refused because the state znode moved on", registry=registry)
        self._under_replicated = Gauge(f"{rm}UnderReplicatedPartitions",
                                       "Partitions led here whose ISR is smaller than their assignment",
                                       registry=registry)
        self._under_min_isr = Gauge(f"{rm}UnderMinIsrPartitionCount",
                                    "Partitions led here whose ISR is below min.insync.replicas", registry=registry)
        self._leader_count = Gauge(f"{rm}LeaderCount", "Partitions led by this broker", registry=registry)
        self._partition_count = Gauge(f"{rm}PartitionCount", "Partitions hosted by this broker", registry=registry)
        self._fetcher_max_lag = Gauge("kafka_server_ReplicaFetcherManager_MaxLag",
                                      "Largest lag, in records, of a partition this broker follows",
                                      ["clientId"], registry=registry)
        self._fetcher_failed_partitions = Gauge("kafka_server_ReplicaFetcherManager_FailedPartitionsCount",
                                                "Followed partitions whose fetching stopped on an error",
                                                ["clientId"], registry=registry)
        self.requests = Counter("kafka_network_RequestMetrics_RequestsPerSec", "Requests handled",
                                ["request"], registry=registry)
        self.request_time_ms = Histogram("kafka_network_RequestMetrics_TotalTimeMs",
                                         "Time from receiving a request to answering it", ["request"],
                                         buckets=_LATENCY_BUCKETS_MS, registry=registry)

    def bind_log_cleaner(self, *, max_dirty_percent: Callable[[], int], cleaner_recopy_percent: Callable[[], int],
                         max_clean_time_secs: Callable[[], int],
                         uncleanable_partitions_count: Callable[[], int]) -> None:
        """kafka.log:type=LogCleaner / LogCleanerManager gauges (Kafka's dashes become underscores)."""
        for name, help_text, read in (
            ("kafka_log_LogCleanerManager_max_dirty_percent", "Dirty ratio of the filthiest compacted log, %",
             max_dirty_percent),
            ("kafka_log_LogCleaner_cleaner_recopy_percent", "Bytes written over bytes read by the last cleanings, %",
             cleaner_recopy_percent),
            ("kafka_log_LogCleaner_max_clean_time_secs", "Longest of the cleaner threads' last cleanings",
             max_clean_time_secs),
            ("kafka_log_LogCleanerManager_uncleanable_partitions_count",
             "Compacted partitions set aside after a cleaning failed", uncleanable_partitions_count),
        ):
            Gauge(name, help_text, registry=self.registry).set_function(read)

    def bind_replica_manager(self, *, under_replicated: Callable[[], int], under_min_isr: Callable[[], int],
                             leader_count: Callable[[], int], partition_count: Callable[[], int]) -> None:
        self._under_replicated.set_function(under_replicated)
        self._under_min_isr.set_function(under_min_isr)
        self._leader_count.set_function(leader_count)
        self._partition_count.set_function(partition_count)

    def bind_purgatories(self, sizes: Mapping[str, Callable[[], int]]) -> None:
        """kafka.server:type=DelayedOperationPurgatory,name=NumDelayedOperations,delayedOperation=<name>: the
        requests waiting in each purgatory (long-poll fetches, acks=all produces)."""
        gauge = Gauge("kafka_server_DelayedOperationPurgatory_NumDelayedOperations",
                      "Delayed operations waiting in the purgatory", ["delayedOperation"], registry=self.registry)
        for name, size in sizes.items():
            gauge.labels(delayedOperation=name).set_function(size)

    def bind_log_dir_failure(self, *, offline_log_dirs: Callable[[], int], offline_replicas: Callable[[], int]) -> None:
        Gauge("kafka_log_LogManager_OfflineLogDirectoryCount", "Log dirs taken offline by an I/O error",
              registry=self.registry).set_function(offline_log_dirs)
        Gauge("kafka_server_ReplicaManager_OfflineReplicaCount", "Partitions hosted here on an offline log dir",
              registry=self.registry).set_function(offline_replicas)

    def bind_group_metadata_manager(self, gauges: Mapping[str, Callable[[], int]]) -> None:
        """kafka.coordinator.group:type=GroupMetadataManager gauges by Kafka's name (NumGroups, NumOffsets,
        NumGroupsStable, NumGroupsPreparingRebalance, ...)."""
        for name, read in gauges.items():
            Gauge(f"kafka_coordinator_group_GroupMetadataManager_{name}",
                  f"GroupMetadataManager {name} of the groups this broker coordinates",
                  registry=self.registry).set_function(read)

    def bind_fetcher_manager(self, *, max_lag: Callable[[], int], failed_partitions_count: Callable[[], int]) -> None:
        """kafka.server:type=ReplicaFetcherManager gauges: MaxLag and FailedPartitionsCount (partitions whose
        fetching stopped on an error until the controller next hands them to a fetcher)."""
        self._fetcher_max_lag.labels(clientId="Replica").set_function(max_lag)
        self._fetcher_failed_partitions.labels(clientId="Replica").set_function(failed_partitions_count)

    def bind_fetch_session_cache(self, *, sessions: Callable[[], int], partitions_cached: Callable[[], int]) -> None:
        """kafka.server:type=FetchSessionCache gauges (KIP-227): NumIncrementalFetchSessions and
        NumIncrementalFetchPartitionsCached, the fetch sessions this broker holds as a leader."""
        Gauge("kafka_server_FetchSessionCache_NumIncrementalFetchSessions", "Fetch sessions held here",
              registry=self.registry).set_function(sessions)
        Gauge("kafka_server_FetchSessionCache_NumIncrementalFetchPartitionsCached",
              "Partitions held in this broker's fetch sessions", registry=self.registry).set_function(partitions_cached)

    def record_request(self, request: str, elapsed_ms: float) -> None:
        self.requests.labels(request=request).inc()
        self.request_time_ms.labels(request=request).observe(elapsed_ms)
