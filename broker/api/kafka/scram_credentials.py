"""DescribeUserScramCredentials 0 and AlterUserScramCredentials 0 (KIP-554): users' SCRAM credentials read and
changed through any broker, as AdminClient.describeUserScramCredentials/alterUserScramCredentials and
kafka-configs.sh --bootstrap-server --entity-type users do; the rules are broker/admin/scram_admin.py's.

Describe needs Describe on the cluster, Alter needs Alter on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.alter_user_scram_credentials.v0 import response as alter_schema
from kio.schema.describe_user_scram_credentials.v0 import response as describe_schema

from broker.admin.scram_admin import Deletion, Upsertion
from broker.api.kafka.context import KafkaContext
from broker.api.kafka.protocol import Reply, RequestHeader, build, encode, kio_error, millis


async def handle_describe_user_scram_credentials(context: KafkaContext, header: RequestHeader,
                                                 request: Any) -> Reply:
    users = None if request.users is None else [u.name for u in request.users]
    answer = await context.operations.describe_user_scram_credentials(context.session, users)
    results = tuple(
        build(describe_schema.DescribeUserScramCredentialsResult, user=r.user, error_code=kio_error(r.error),
              error_message=r.message, credential_infos=tuple(
                  build(describe_schema.CredentialInfo, mechanism=mechanism, iterations=iterations)
                  for mechanism, iterations in r.credentials))
        for r in answer.results)
    return encode(build(describe_schema.DescribeUserScramCredentialsResponse, throttle_time=millis(0),
                        error_code=kio_error(answer.error), error_message=answer.message, results=results))


async def handle_alter_user_scram_credentials(context: KafkaContext, header: RequestHeader, request: Any) -> Reply:
    upsertions = [Upsertion(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
                  for u in request.upsertions]
    deletions = [Deletion(d.name, d.mechanism) for d in request.deletions]
    answer = await context.operations.alter_user_scram_credentials(context.session, upsertions, deletions)
    results = tuple(build(alter_schema.AlterUserScramCredentialsResult, user=r.user, error_code=kio_error(r.error),
                          error_message=r.message) for r in answer)
    return encode(build(alter_schema.AlterUserScramCredentialsResponse, throttle_time=millis(0), results=results))
