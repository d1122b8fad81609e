"""ControllerChannelManager: the controller's connections to brokers (Kafka's ControllerChannelManager.scala).

One RequestSendThread per live broker, with its own queue and gRPC channel to
the broker's registered host:port (the KafkaCluster service). Requests to one
broker go out one at a time, in the order the controller decided them; a slow
or dead broker holds up only its own queue. A request is retried until the
broker answers - whatever the answer - or the broker is removed (it
deregistered: its next registration, with a new broker epoch, gets a new thread
and fresh requests), as Kafka's RequestSendThread does.
"""

from __future__ import annotations

import logging
import queue
import threading

import grpc

from common.grpc_tls import PLAINTEXT, GrpcSecurity
from controller.request_batch import BrokerRequest, BrokerResponse, ResponseCallback
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import CLUSTER_CREDENTIAL_METADATA_KEY
from proto.errors import ErrorCode
from proto.types import EndPoint
from zk.paths import BrokerInfo

log = logging.getLogger(__name__)

# Kafka's controller retry backoff.
RETRY_BACKOFF_S = 0.1
# gRPC's own reconnect backoff grows to two minutes by default: a broker that
# restarts would wait that long for its LeaderAndIsr. Kafka reconnects within a second.
_CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def _target(endpoint: EndPoint) -> str:
    return f"[{endpoint.host}]:{endpoint.port}" if ":" in endpoint.host else f"{endpoint.host}:{endpoint.port}"


def _describe(request: BrokerRequest) -> str:
    partitions = request.partitions if isinstance(request, pb.StopReplicaRequest) else request.partition_states
    return (
        f"{type(request).__name__}(controller_id={request.controller_id}, controller_epoch={request.controller_epoch}, "
        f"broker_epoch={request.broker_epoch}, partitions={len(partitions)})"
    )


def _failure(error: Exception) -> str:
    if isinstance(error, grpc.Call):
        return f"{error.code().name}: {error.details()}"
    return str(error)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error code {code}"


class RequestSendThread(threading.Thread):
    def __init__(self, controller_id: int, broker: BrokerInfo, endpoint: EndPoint, credential: str | None,
                 socket_timeout_ms: int, security: GrpcSecurity = PLAINTEXT) -> None:
        super().__init__(name=f"Controller-{controller_id}-to-broker-{broker.id}-send-thread", daemon=True)
        self.broker = broker
        self.endpoint = endpoint
        self._controller_id = controller_id
        self._timeout_s = socket_timeout_ms / 1000
        # To an SSL listener: TLS with the controller's certificate, which replaces the credential there.
        tls = endpoint.security_protocol == "SSL"
        self._metadata = ((CLUSTER_CREDENTIAL_METADATA_KEY, credential),) if credential is not None and not tls else ()
        self._queue: queue.Queue[tuple[BrokerRequest, ResponseCallback | None] | None] = queue.Queue()
        self._stopped = threading.Event()
        self._channel = (security if tls else PLAINTEXT).channel(_target(endpoint), options=_CHANNEL_OPTIONS)
        self._stub = pb_grpc.KafkaClusterStub(self._channel)

    def enqueue(self, request: BrokerRequest, callback: ResponseCallback | None) -> None:
        self._queue.put((request, callback))

    def shutdown(self) -> None:
        """Stop now: the request in flight is cancelled, queued ones are dropped."""
        self._stopped.set()
        self._queue.put(None)
        self._channel.close()

    def run(self) -> None:
        while not self._stopped.is_set():
            item = self._queue.get()
            if item is None:
                return
            self._send_until_answered(*item)

    def _send_until_answered(self, request: BrokerRequest, callback: ResponseCallback | None) -> None:
        while not self._stopped.is_set():
            try:
                response = self._call(request)
            except (grpc.RpcError, ValueError) as e:  # ValueError: the channel was closed by shutdown()
                if self._stopped.is_set():
                    return
                log.warning(
                    "Controller %d epoch %d fails to send request %s to broker %s (%s). Reconnecting to broker.",
                    self._controller_id,
                    request.controller_epoch,
                    _describe(request),
                    self.endpoint.connection_string,
                    _failure(e),
                )
                self._stopped.wait(RETRY_BACKOFF_S)
                continue
            self._handle_response(request, response)
            if callback is not None:
                callback(response)
            return

    def _call(self, request: BrokerRequest) -> BrokerResponse:
        # wait_for_ready: a call to a broker that is (re)starting waits for the connection, up to the timeout,
        # instead of failing at once.
        timeout, metadata = self._timeout_s, self._metadata
        if isinstance(request, pb.LeaderAndIsrRequest):
            return self._stub.LeaderAndIsr(request, timeout=timeout, metadata=metadata, wait_for_ready=True)
        if isinstance(request, pb.StopReplicaRequest):
            return self._stub.StopReplica(request, timeout=timeout, metadata=metadata, wait_for_ready=True)
        return self._stub.UpdateMetadata(request, timeout=timeout, metadata=metadata, wait_for_ready=True)

    def _handle_response(self, request: BrokerRequest, response: BrokerResponse) -> None:
        if response.error_code != ErrorCode.NONE:
            log.error(
                "Controller %d epoch %d received %s in response to %s from broker %d",
                self._controller_id,
                request.controller_epoch,
                _error_name(response.error_code),
                _describe(request),
                self.broker.id,
            )
        if not isinstance(response, pb.UpdateMetadataResponse):
            for error in response.partition_errors:
                if error.error_code != ErrorCode.NONE:
                    log.warning(
                        "Broker %d failed to apply %s of controller epoch %d for partition %s-%d: %s",
                        self.broker.id,
                        type(request).__name__,
                        request.controller_epoch,
                        error.topic_name,
                        error.partition_index,
                        _error_name(error.error_code),
                    )
        log.debug(
            "Controller %d received a response to %s from broker %d",
            self._controller_id,
            _describe(request),
            self.broker.id,
        )


class ControllerChannelManager:
    def __init__(self, controller_id: int, cluster_credential: str | None, socket_timeout_ms: int,
                 inter_broker_listener: str = "PLAINTEXT", security: GrpcSecurity = PLAINTEXT) -> None:
        self._controller_id = controller_id
        self._inter_broker_listener = inter_broker_listener
        self._credential = cluster_credential
        self._security = security
        self._socket_timeout_ms = socket_timeout_ms
        self._brokers: dict[int, RequestSendThread] = {}

    def add_broker(self, broker: BrokerInfo) -> None:
        if broker.id in self._brokers:
            return
        endpoint = broker.endpoint(self._inter_broker_listener)
        if endpoint is None:
            # Kafka's BrokerEndPointNotAvailableException: requests to this broker are dropped as to an offline one.
            log.error("Broker %d has no endpoint for inter.broker.listener.name %s (it advertises %s): the"
                      " controller cannot reach it", broker.id, self._inter_broker_listener, broker.connection_strings)
            return
        thread = RequestSendThread(self._controller_id, broker, endpoint, self._credential, self._socket_timeout_ms,
                                   self._security)
        self._brokers[broker.id] = thread
        thread.start()

    def remove_broker(self, broker_id: int) -> None:
        thread = self._brokers.pop(broker_id, None)
        if thread is not None:
            thread.shutdown()

    def send_request(self, broker_id: int, request: BrokerRequest, callback: ResponseCallback | None = None) -> None:
        thread = self._brokers.get(broker_id)
        if thread is None:
            log.warning("Not sending request %s to broker %d, since it is offline.", _describe(request), broker_id)
            return
        thread.enqueue(request, callback)

    def shutdown(self) -> None:
        for broker_id in list(self._brokers):
            self.remove_broker(broker_id)
