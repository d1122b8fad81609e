"""The controller's gRPC service: KafkaController.ControlledShutdown (Kafka's handleControlledShutdownRequest),
ElectLeaders (an admin client's leader election, KIP-460) and the project's own DescribeEvents (its event ring, its
epoch and its ZooKeeper members' `srvr` modes, for `minibroker console`).

In Kafka the controller is a broker and answers ControlledShutdown on its
broker port; here it is a process of its own, so it serves the one request
brokers send it on its `listeners` address (port 0: any free port) and
advertises where in the /controller znode it wins. Each handler asks what
Kafka's KafkaApis asks of the call's principal (its client certificate's subject
on an SSL listener, else ANONYMOUS; the controller knows no SASL users) before
anything is queued: ControlledShutdown needs CLUSTER_ACTION on the cluster (or
the cluster credential on a plaintext listener, common/security/cluster_action.py),
ElectLeaders ALTER on the cluster, from the authorizer fed by the same ZooKeeper
ACLs as the brokers' (zk/acl_store.py); without one, ElectLeaders is open, as in
Kafka. A request allowed is queued on the controller's event thread and the
handler waits for the answer: a broker asks once per attempt and waits for the
moves.
It also serves grpc.health.v1, SERVING for "" and for KafkaController, so a
healthcheck can tell a controller from a broker (proto/types.py).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from common.config import ConfigError, parse_endpoints
from common.event_ring import EVENTS, event_messages
from common.grpc_tls import GrpcSecurity
from common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from common.security.authorizer import AclAuthorizer, Session
from common.security.cluster_action import authorize_cluster_action
from common.security.grpc_peer import certificate_subject, peer_host
from common.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from common.security.ssl_principal import SslPrincipalMapper
from controller.config import ControllerConfig
from controller.controller import KafkaController
from proto import minibroker_pb2 as pb
from proto import minibroker_pb2_grpc as pb_grpc
from proto.auth import carries_cluster_credential
from proto.errors import ErrorCode
from proto.types import CONTROLLER_SERVICE, TopicPartition
from zk.server import member_modes

# Kafka's ElectionType ids.
ELECTION_TYPE_PREFERRED = 0
ELECTION_TYPE_UNCLEAN = 1
# A ZooKeeper server that does not answer `srvr` within this holds up a DescribeEvents no longer.
SRVR_TIMEOUT_S = 0.3
# Brokers shut down one at a time; a few threads cover retries that overlap.
_MAX_WORKERS = 4


class ControllerApis(pb_grpc.KafkaControllerServicer):
    def __init__(self, controller: KafkaController, credential: str | None, timeout_s: float,
                 tls: bool = False, authorizer: AclAuthorizer | None = None,
                 mapper: SslPrincipalMapper | None = None) -> None:
        self._controller = controller
        self._tls = tls
        # The credential proves a cluster action on a plaintext listener only (cluster_action.py).
        self._credential = None if credential is None or tls else credential.encode()
        self._authorizer = authorizer
        self._mapper = mapper or SslPrincipalMapper()
        # How long a request waits for the event thread (controller.socket.timeout.ms): past it the broker retries.
        self._timeout_s = timeout_s

    def _session(self, context: grpc.ServicerContext) -> Session:
        subject = certificate_subject(context) if self._tls else None
        principal = ANONYMOUS if subject is None else KafkaPrincipal(USER_TYPE, self._mapper.name(subject))
        return Session(principal, peer_host(context.peer() or ""))

    def _authorize_cluster_action(self, context: grpc.ServicerContext) -> bool:
        session = self._session(context)
        credential = None if self._credential is None else carries_cluster_credential(
            context.invocation_metadata(), self._credential)
        return authorize_cluster_action(self._authorizer, session, tls=self._tls,
                                        verified_certificate=session.principal != ANONYMOUS,
                                        carries_credential=credential)

    def _authorize_alter_cluster(self, context: grpc.ServicerContext) -> bool:
        return self._authorizer is None or self._authorizer.authorize(
            self._session(context), AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)

    def ControlledShutdown(
        self, request: pb.ControlledShutdownRequest, context: grpc.ServicerContext
    ) -> pb.ControlledShutdownResponse:
        """Kafka's handleControlledShutdownRequest: CLUSTER_ACTION on the cluster."""
        if not self._authorize_cluster_action(context):
            return pb.ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        done = threading.Event()
        answer: list[tuple[int, tuple[TopicPartition, ...]]] = []

        def callback(error: int, remaining: tuple[TopicPartition, ...]) -> None:
            answer.append((error, remaining))
            done.set()

        self._controller.controlled_shutdown(request.broker_id, request.broker_epoch, callback)
        if not done.wait(self._timeout_s):
            return pb.ControlledShutdownResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        error, remaining = answer[0]
        return pb.ControlledShutdownResponse(
            error_code=error,
            remaining_partitions=[
                pb.TopicPartition(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining
            ],
        )


    def ElectLeaders(self, request: pb.ElectLeadersRequest, context: grpc.ServicerContext) -> pb.ElectLeadersResponse:
        """An admin request, as Kafka's handleElectReplicaLeader: ALTER on the cluster, else
        CLUSTER_AUTHORIZATION_FAILED and nothing elected. A broker forwarding its client's request (KIP-590's
        Envelope: the broker authorized the client, and forwarding is a cluster action) is served as that
        client, as Kafka's controller serves an Envelope from a broker with CLUSTER_ACTION."""
        if not (self._authorize_cluster_action(context) or self._authorize_alter_cluster(context)):
            return pb.ElectLeadersResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if request.election_type not in (ELECTION_TYPE_PREFERRED, ELECTION_TYPE_UNCLEAN):
            return pb.ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST)
        partitions = tuple(TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions) or None
        done = threading.Event()
        answer: list[dict[TopicPartition, tuple[int, str]]] = []

        def callback(results: dict[TopicPartition, tuple[int, str]]) -> None:
            answer.append(results)
            done.set()

        self._controller.elect_leaders(partitions, request.election_type == ELECTION_TYPE_UNCLEAN, callback)
        timeout_s = request.timeout_ms / 1000 if request.timeout_ms > 0 else self._timeout_s
        if not done.wait(timeout_s):
            return pb.ElectLeadersResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
        response = pb.ElectLeadersResponse(error_code=ErrorCode.NONE)
        by_topic: dict[str, pb.ElectLeadersResponse.ReplicaElectionResult] = {}
        for tp, (error, message) in sorted(answer[0].items()):
            if tp.topic not in by_topic:
                by_topic[tp.topic] = response.replica_election_results.add(topic=tp.topic)
            by_topic[tp.topic].partition_result.add(partition_id=tp.partition, error_code=error, error_message=message)
        return response

    def DescribeEvents(self, request: pb.DescribeEventsRequest,
                       context: grpc.ServicerContext) -> pb.DescribeEventsResponse:
        """The controller's recent events (common/event_ring.py), read-only: a partition's need Describe on its
        topic, as a broker's DescribeReplicaState; events of no one partition go to anyone."""
        events = EVENTS.since(request.events_after)
        # A broker forwarding a console's request (a cluster action) gets them all and filters for its caller.
        if self._authorizer is not None and not self._authorize_cluster_action(context):
            session = self._session(context)
            topics = {e.topic for e in events if e.topic}
            describable = {t for t in topics if self._authorizer.authorize(
                session, AclOperation.DESCRIBE, ResourceType.TOPIC, t, log_if_denied=False)}
            events = [e for e in events if not e.topic or e.topic in describable]
        return pb.DescribeEventsResponse(
            controller_id=self._controller.controller_id, now_ms=int(time.time() * 1000),
            events=event_messages(events), controller_epoch=self._controller.context.epoch,
            zookeeper_servers=[pb.DescribeEventsResponse.ZooKeeperServer(connect=member, mode=mode) for member, mode
                               in member_modes(self._controller.config.zookeeper_connect, SRVR_TIMEOUT_S)])


def bind_controller_server(config: ControllerConfig) -> tuple[grpc.Server, str]:
    """A server bound to the first listener, not started yet (the controller it serves needs the endpoint
    first); the server and the host:port it is reachable at. Start it with serve()."""
    listener = parse_endpoints(config.listeners)[0]
    host = listener.host or "127.0.0.1"
    address = _grpc_address(host, listener.port)
    server = grpc.server(ThreadPoolExecutor(max_workers=_MAX_WORKERS, thread_name_prefix="controller-api"))
    if listener.security_protocol == "SSL":
        port = server.add_secure_port(address, _tls(config).server_credentials(require_client_auth=True))
    else:
        port = server.add_insecure_port(address)
    if not port:
        raise OSError(f"cannot listen on {address}: the port is taken or the address is not local")
    return server, _grpc_address(host, port)


def serve(server: grpc.Server, controller: KafkaController, config: ControllerConfig,
          authorizer: AclAuthorizer | None = None) -> None:
    """Serve the controller's APIs, each request decided by `authorizer` (None: no authorizer.class.name)."""
    tls = parse_endpoints(config.listeners)[0].security_protocol == "SSL"
    apis = ControllerApis(controller, config.cluster_credential_value, config.controller_socket_timeout_ms / 1000,
                          tls, authorizer, SslPrincipalMapper(config.ssl_principal_mapping_rules))
    pb_grpc.add_KafkaControllerServicer_to_server(apis, server)
    health_servicer = health.HealthServicer()
    for service in ("", CONTROLLER_SERVICE):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    server.start()


def _tls(config: ControllerConfig) -> GrpcSecurity:
    security = config.grpc_security
    if not security.tls:
        raise ConfigError("listeners", config.listeners, "an SSL listener needs ssl.keystore.location and"
                          " ssl.truststore.location")
    return security


def _grpc_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
