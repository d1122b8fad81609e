"""Bad command lines, as a user types them: every `minibroker` subcommand answers with a precise message and a
non-zero exit code, never a traceback. Each case runs the real command in a process of its own; where it needs a
cluster, the cluster is one that does not answer (a free port), so nothing is started."""

from __future__ import annotations

import argparse
import itertools
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_cluster.cluster_file import BrokerEntry, ClusterInfo, ZooKeeperEntry
from minibroker.cli import build_parser
from zk.server import free_port

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[3]
NOT_WALKED: set[str] = set()


@dataclass(frozen=True)
class Case:
    argv: tuple[str, ...]
    exit_code: int
    message: str  # must appear, on the last line of the command's error output
    within_s: float = 20.0


def leaf_commands() -> set[str]:
    """Every runnable (sub)command of the parser, as "cluster up", "perf produce", "topics"."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            found.add(" ".join(path))
        for action in subparsers:
            for name, subparser in action.choices.items():
                walk(subparser, (*path, name))

    walk(build_parser(), ())
    return found


@pytest.fixture
def places(tmp_path: Path) -> Iterator[dict[str, str]]:
    """What a case's {placeholders} name; fresh for each case, so a command that creates {missing} (it should not)
    cannot change the next case."""
    root = tmp_path
    regular = root / "regular-file"
    regular.write_text("not a directory, not properties=\\u12\n")
    json_garbage = root / "garbage.json"
    json_garbage.write_text('{"version": 1, "partitions": [')
    blocked = root / "blocked"  # a data dir whose zookeeper/ cannot be created: a file holds its name
    blocked.mkdir()
    (blocked / "zookeeper").write_text("")
    stopped = root / "stopped-cluster"  # a cluster.json whose ZooKeeper is gone
    stopped.mkdir()
    ClusterInfo(ZooKeeperEntry(connect=f"127.0.0.1:{free_port()}", pid=None),
                brokers=[BrokerEntry(1, "127.0.0.1", free_port(), None, str(stopped / "broker-1"))]).save(stopped)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never answers
        silent_port = silent.getsockname()[1]
        # A stopped cluster whose ZooKeeper port another process took meanwhile (its pid above Linux's pid_max
        # limit: no process has it).
        taken = root / "port-taken"
        taken.mkdir()
        ClusterInfo(ZooKeeperEntry(connect=f"127.0.0.1:{silent_port}", pid=(1 << 22) + 1)).save(taken)
        yield {"file": str(regular), "missing": str(root / "missing" / "x"), "dir": str(root),
               "json": str(json_garbage), "blocked": str(blocked), "stopped": str(stopped), "taken": str(taken),
               "nobody": f"127.0.0.1:{free_port()}", "silent": f"127.0.0.1:{silent_port}",
               "silent_port": str(silent_port)}


NOT_A_DIR = "Not a directory"
CASES = [
    Case(("demo", "--data-dir", "{file}"), 1, f"cannot use {{file}} as the cluster's data dir: {NOT_A_DIR}"),
    Case(("demo", "--records", "many"), 2, "argument --records: invalid int value: 'many'"),
    Case(("configs", "--describe"), 2, "the following arguments are required: --entity-type"),
    Case(("configs", "--describe", "--entity-type", "bogus"), 2, "argument --entity-type: invalid choice: 'bogus'"),
    Case(("configs", "--describe", "--entity-type", "topics", "--entity-name", "t", "--data-dir", "{missing}"), 1,
         "no cluster in {missing}"),
    Case(("configs", "--alter", "--entity-type", "topics", "--entity-name", "t", "--add-config", "garbage",
          "--bootstrap-server", "{nobody}"), 1,
         'all configs to be added must be in the format "key=val", found: garbage'),
    # As the other --zookeeper commands: ZooKeeper probed first, one line (it was 19 "Connection dropped" lines and
    # a KazooTimeoutError traceback after 15 s).
    Case(("configs", "--describe", "--entity-type", "topics", "--entity-name", "t", "--zookeeper", "{nobody}"), 1,
         "cannot connect to ZooKeeper at {nobody}", within_s=10),
    Case(("configs", "--alter", "--entity-type", "brokers", "--entity-name", "1", "--add-config",
          "log.cleaner.threads=2", "--zookeeper", "{nobody}"), 1, "cannot connect to ZooKeeper at {nobody}",
         within_s=10),
    Case(("acls", "--list"), 2, "One of --bootstrap-server or --authorizer-properties must be specified"),
    Case(("acls", "--add", "--bootstrap-server", "{nobody}", "--topic", "t", "--allow-principal", "bob"), 2,
         "Could not parse principal from `bob`"),
    Case(("acls", "--add", "--bootstrap-server", "{nobody}", "--cluster", "--operation", "Read",
          "--allow-principal", "User:a"), 2, "ResourceType Cluster only supports operations Alter,"),
    Case(("acls", "--add", "--bootstrap-server", "{nobody}", "--topic", "t", "--resource-pattern-type", "match",
          "--allow-principal", "User:a"), 2, "A '--resource-pattern-type' value of 'match' is not valid"),
    Case(("acls", "--list", "--bootstrap-server", "{nobody}"), 1,
         "Error while executing ACL command: Timed out waiting for a node assignment ({nobody}", within_s=30),
    Case(("acls", "--list", "--authorizer-properties", "zookeeper.connect={nobody}"), 1,
         "Error while executing ACL command: cannot connect to ZooKeeper at {nobody}"),
    Case(("transactions",), 2, "the following arguments are required: COMMAND"),
    Case(("transactions", "describe-producers", "--topic", "t", "--partition", "0"), 1,
         'Missing required argument "[bootstrap-server]"'),
    Case(("transactions", "describe-producers", "--topic", "t"), 2,
         "the following arguments are required: --partition"),
    Case(("transactions", "list", "--bogus"), 2, "unrecognized arguments: --bogus"),
    Case(("transactions", "describe"), 2, "the following arguments are required: --transactional-id"),
    Case(("transactions", "find-hanging", "--max-transaction-timeout", "x"), 2,
         "argument --max-transaction-timeout: invalid int value: 'x'"),
    Case(("transactions", "abort", "--topic", "t", "--partition", "0", "--start-offset", "x"), 2,
         "argument --start-offset: invalid int value: 'x'"),
    Case(("transactions", "--bootstrap-server", "{nobody}", "describe-producers", "--topic", "t", "--partition",
          "0"), 1, "Timed out waiting for a node assignment ({nobody}", within_s=30),
    Case(("dump-log",), 2, "the following arguments are required: --files"),
    Case(("dump-log", "--files", "{missing}.log"), 1, "Error: {missing}.log (No such file or directory)"),
    Case(("dump-log", "--files", "{file}", "--bogus"), 2, "unrecognized arguments: --bogus"),
    Case(("controller", "--config", "{missing}"), 1, "config file {missing} does not exist"),
    Case(("controller", "--config", "{dir}"), 1, "config file {dir} does not exist"),
    Case(("controller", "--controller-id", "x"), 2, "argument --controller-id: invalid int value: 'x'"),
    Case(("controller", "--zookeeper", "{nobody}", "--controller-id", "1001", "--override", "garbage"), 2,
         "Invalid value null for configuration garbage: an override must be key=value"),
    Case(("broker",), 2, "the following arguments are required: --config"),
    Case(("broker", "--config", "{missing}"), 1, "config file {missing} does not exist"),
    Case(("broker", "--config", "{file}"), 1, "malformed \\uxxxx escape"),
    Case(("broker", "--config", "{file}", "extra"), 2, "unrecognized arguments: extra"),
    Case(("cluster",), 2, "the following arguments are required: ACTION"),
    Case(("cluster", "up"), 2, "the following arguments are required: --data-dir"),
    Case(("cluster", "up", "--data-dir", "{file}"), 1, f"cannot use {{file}} as the cluster's data dir: {NOT_A_DIR}"),
    Case(("cluster", "up", "--data-dir", "{blocked}", "--brokers", "1", "--controllers", "1"), 1,
         f"cannot start ZooKeeper in {{blocked}}/zookeeper: {{blocked}}/zookeeper/data: {NOT_A_DIR}"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--brokers", "many"), 2,
         "argument --brokers: invalid int value: 'many'"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--brokers", "0"), 2,
         "a cluster needs at least one broker and one controller"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--override", "garbage"), 2,
         "an override must be key=value, not 'garbage'"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--port-base", "65534"), 2,
         "--port-base 65534 leaves no room for 3 brokers: ports 65534..65637 must be at most 65535"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--port-base", "9000", "--well-known-ports"), 2,
         "--port-base and --well-known-ports: choose one"),
    Case(("cluster", "up", "--data-dir", "{missing}", "--zookeeper", "{nobody}"), 1,
         "cannot connect to ZooKeeper at {nobody}: 127.0.0.1:", within_s=10),
    Case(("cluster", "up", "--data-dir", "{missing}", "--zookeeper", "{silent}", "--timeout", "3"), 1,
         "cannot connect to ZooKeeper at {silent}: something listens there, but no ZooKeeper session within 3 s",
         within_s=10),
    Case(("cluster", "up", "--data-dir", "{taken}"), 1,
         "ports in use by another process: zookeeper port {silent_port} (as before); stop what listens there, or"
         " choose other ports with --port-base N"),
    Case(("cluster", "up", "--data-dir", "{missing}", "extra"), 2, "unrecognized arguments: extra"),
    Case(("cluster", "status", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("cluster", "status", "--data-dir", "{file}"), 1,
         f"cannot read {{file}}/cluster.json: [Errno 20] {NOT_A_DIR}"),
    Case(("cluster", "down", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("cluster", "down", "--data-dir", "{dir}", "--timeout", "soon"), 2,
         "argument --timeout: invalid float value: 'soon'"),
    Case(("cluster", "restart-broker", "--data-dir", "{missing}"), 2, "the following arguments are required: --id"),
    Case(("cluster", "restart-broker", "--data-dir", "{missing}", "--id", "1"), 1, "no cluster in {missing}"),
    Case(("cluster", "restart-zookeeper", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("cluster", "restart-zookeeper", "--data-dir", "{stopped}"), 1,
         "the cluster uses a ZooKeeper it did not start"),
    Case(("cluster", "restart-broker", "--data-dir", "{stopped}", "--id", "2"), 1,
         "the cluster has no broker 2 (brokers: 1)"),
    Case(("cluster", "restart-broker", "--data-dir", "{stopped}", "--id", "1"), 1,
         "cannot connect to the cluster's ZooKeeper at 127.0.0.1:", within_s=10),
    Case(("cluster", "isolate", "--data-dir", "{missing}", "--id", "1"), 1, "no cluster in {missing}"),
    Case(("cluster", "heal", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("topics",), 2, "one of the arguments --create --list --alter --describe --delete is required"),
    Case(("topics", "--alter", "--topic", "t", "--bootstrap-server", "{nobody}"), 1,
         'Missing required argument "[partitions]"'),
    Case(("topics", "--describe", "--topics-with-overrides", "--bootstrap-server", "{nobody}"), 1,
         "--topics-with-overrides needs --data-dir"),
    Case(("topics", "--list"), 1, 'Missing required argument "[bootstrap-server]"'),
    Case(("topics", "--list", "--bootstrap-server", "host:port"), 1,
         "Invalid url in bootstrap.servers: host:port"),
    Case(("topics", "--list", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("topics", "--create", "--topic", "t", "--partitions", "x", "--bootstrap-server", "{nobody}"), 2,
         "argument --partitions: invalid int value: 'x'"),
    Case(("topics", "--list", "--bootstrap-server", "{nobody}"), 1, "UNAVAILABLE from {nobody}"),
    Case(("consumer-groups",), 2,
         "one of the arguments --list --describe --reset-offsets --delete --delete-offsets is required"),
    Case(("consumer-groups", "--delete-offsets", "--group", "g", "--bootstrap-server", "{nobody}"), 1,
         'Option "[delete-offsets]" takes the following options: "[group]", "[topic]"'),
    Case(("consumer-groups", "--list", "--topic", "t", "--bootstrap-server", "{nobody}"), 1,
         'Option "[topic]" can only be used with options "[reset-offsets]" or "[delete-offsets]"'),
    Case(("consumer-groups", "--describe", "--bootstrap-server", "{nobody}"), 1,
         'Option "[describe]" / "[reset-offsets]" / "[delete]" takes one of these options: "[all-groups]",'
         ' "[group]"'),
    Case(("consumer-groups", "--reset-offsets", "--group", "g", "--all-topics", "--bootstrap-server", "{nobody}"), 1,
         'Option "[reset-offsets]" takes one of these options: "[to-datetime]", "[shift-by]", "[to-earliest]",'
         ' "[to-latest]", "[to-offset]"'),
    Case(("consumer-groups", "--list", "--to-earliest", "--bootstrap-server", "{nobody}"), 1,
         'can only be used with option "[reset-offsets]"'),
    Case(("consumer-groups", "--list", "--bootstrap-server", "{nobody}"), 1, "UNAVAILABLE from {nobody}"),
    Case(("leader-election",), 2, "the following arguments are required: --election-type"),
    Case(("leader-election", "--election-type", "preferred", "--all-topic-partitions", "--zookeeper", "{nobody}"), 1,
         "cannot connect to ZooKeeper at {nobody}", within_s=10),
    Case(("leader-election", "--election-type", "unclean", "--all-topic-partitions", "--zookeeper", "{nobody}"), 1,
         "cannot connect to ZooKeeper at {nobody}", within_s=10),
    Case(("get-offsets", "--time", "soon", "--bootstrap-server", "{nobody}"), 1,
         "Error occurred: Malformed time argument soon."),
    Case(("get-offsets", "--partitions", "x", "--bootstrap-server", "{nobody}"), 1,
         "--partitions expects a comma separated list of numeric partition ids, but received: x"),
    Case(("get-offsets", "--bootstrap-server", "{nobody}"), 1, "UNAVAILABLE from {nobody}"),
    Case(("delete-records", "--bootstrap-server", "{nobody}"), 2,
         "the following arguments are required: --offset-json-file"),
    Case(("delete-records", "--bootstrap-server", "{nobody}", "--offset-json-file", "{json}"), 1,
         "The input string is not a valid JSON"),
    Case(("delete-records", "--bootstrap-server", "{nobody}", "--offset-json-file", "{missing}"), 1,
         "cannot read {missing}: No such file or directory"),
    Case(("reassign-partitions",), 2, "one of the arguments --generate --execute --verify --cancel is required"),
    Case(("reassign-partitions", "--zookeeper", "{nobody}", "--execute", "--reassignment-json-file", "{missing}"), 1,
         "cannot read {missing}: No such file or directory"),
    Case(("reassign-partitions", "--zookeeper", "{nobody}", "--verify", "--reassignment-json-file", "{json}"), 1,
         "The input string is not a valid JSON"),
    Case(("reassign-partitions", "--zookeeper", "{nobody}", "--generate", "--topics-to-move-json-file", "{json}",
          "--broker-list", "1,2"), 1, "The input string is not a valid JSON"),
    Case(("console-producer",), 2, "the following arguments are required: --topic"),
    Case(("console-producer", "--topic", "t", "--bootstrap-server", "{nobody}", "--producer.config", "{missing}"), 1,
         "cannot read {missing}: No such file or directory"),
    Case(("console-producer", "--topic", "t", "--bootstrap-server", "host:port"), 1,
         "Invalid url in bootstrap.servers: host:port"),
    Case(("console-consumer",), 2, "one of the arguments --topic --include/--whitelist is required"),
    Case(("console-consumer", "--topic", "t", "--bootstrap-server", "{nobody}", "--consumer.config", "{dir}"), 1,
         "cannot read {dir}: Is a directory"),
    Case(("perf",), 2, "the following arguments are required: TOOL"),
    Case(("perf", "produce", "--topic", "t", "--num-records", "x", "--record-size", "1", "--throughput", "-1"), 2,
         "argument --num-records: invalid int value: 'x'"),
    Case(("perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
          "--bootstrap-server", "{nobody}", "--producer.config", "{missing}"), 1,
         "cannot read {missing}: No such file or directory"),
    Case(("perf", "produce", "--topic", "t", "--num-records", "1", "--payload-file", "{missing}", "--throughput",
          "-1", "--bootstrap-server", "{nobody}"), 1, "File does not exist or empty file provided."),
    Case(("perf", "consume", "--topic", "t", "--messages", "1", "--bootstrap-server", "{nobody}",
          "--consumer.config", "{missing}"), 1, "cannot read {missing}: No such file or directory"),
    Case(("perf", "end-to-end", "--topic", "t", "--num-records", "1", "--bootstrap-server", "host:port"), 1,
         "Invalid url in bootstrap.servers: host:port"),
    Case(("chaos",), 2, "the following arguments are required: ACTION"),
    Case(("chaos", "run", "--interval", "soon"), 2, "argument --interval: not a duration: 'soon'"),
    Case(("chaos", "run", "--data-dir", "{missing}"), 2, "no cluster in {missing}"),
    Case(("chaos", "check", "{missing}"), 2, "cannot read history {missing}"),
    Case(("chaos", "check", "{file}"), 2, "{file}:1: not a chaos history event"),
    Case(("health",), 2, "one of the arguments --bootstrap-server --controller is required"),
    Case(("health", "--bootstrap-server", "{nobody}", "--broker-id", "1"), 2,
         "--broker-id and --zookeeper go together"),
    Case(("health", "--controller", "{nobody}", "--timeout-ms", "500"), 1,
         "controller {nobody} does not accept connections"),
    Case(("zookeeper-security-migration", "--zookeeper.connect", "{nobody}"), 2,
         "the following arguments are required: --zookeeper.acl"),
    Case(("zookeeper-security-migration", "--zookeeper.acl", "secure", "--zookeeper.connect", "{nobody}"), 1,
         "No JAAS configuration file has been specified"),
    Case(("topics", "--bootstrap-server", "{nobody}", "--list", "--command-config", "{missing}"), 1,
         "cannot read {missing}"),
    Case(("console",), 1, 'Missing required argument "[bootstrap-server]"'),
    Case(("console", "--data-dir", "{missing}"), 1, "no cluster in {missing}"),
    Case(("console", "--bootstrap-server", "{nobody}", "--allow-faults"), 1,
         "--allow-faults needs --data-dir: faults are for a local cluster only"),
    Case(("console", "--bootstrap-server", "{nobody}", "--port", "{silent_port}"), 1,
         "cannot serve on 127.0.0.1:{silent_port}: "),
    Case(("pipeline",), 2, "the following arguments are required: --input, --output, --checkpoint"),
    Case(("pipeline", "--input", "a", "--output", "b", "--checkpoint", "{missing}"), 1,
         'pipeline: Missing required argument "[bootstrap-server]"'),
    Case(("audit",), 2, "one of the arguments --log-dirs --data-dir is required"),
    Case(("audit", "--log-dirs", "{missing}"), 2, "no such log dir: {missing}"),
]


def test_the_walk_covers_every_command() -> None:
    walked = {" ".join(arg for arg in case.argv if not arg.startswith("-")).split(" {")[0] for case in CASES}
    missing = leaf_commands() - NOT_WALKED - {
        command for command in leaf_commands() if any(w == command or w.startswith(command + " ") for w in walked)}
    assert not missing, f"no bad-input case for: {', '.join(sorted(missing))}"


@pytest.mark.parametrize("case", CASES, ids=lambda case: " ".join(case.argv))
def test_bad_input_is_a_message_not_a_traceback(case: Case, places: dict[str, str]) -> None:
    argv = [arg.format(**places) for arg in case.argv]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "minibroker.cli", *argv], capture_output=True, text=True,
                            timeout=120, cwd=REPO_ROOT, stdin=subprocess.DEVNULL)
    elapsed = time.monotonic() - started
    output = result.stdout + result.stderr
    assert "Traceback" not in output, output
    assert result.returncode == case.exit_code, output
    message = case.message.format(**places)
    if case.exit_code == 2 and "usage:" in result.stderr:
        # argparse's way, and from the (sub)command's own parser, not the top-level one.
        words = list(itertools.takewhile(lambda arg: not arg.startswith(("-", "{")), case.argv))
        assert result.stderr.startswith(f"usage: minibroker {' '.join(words)} "), result.stderr
        assert result.stderr.splitlines()[-1].startswith(f"minibroker {' '.join(words)}: error: "), result.stderr
    # Kafka's topic command prints its error on stdout ("Error while executing topic command : ..."); the others
    # on stderr. Either way it is the last thing said, on one line.
    said = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
    assert said and message in said[-1], output
    assert elapsed < case.within_s, f"took {elapsed:.1f} s"
