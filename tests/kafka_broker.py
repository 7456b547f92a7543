"""A real single-node Apache Kafka broker for tests and demos: KRaft mode, no Docker, no tarball.

The broker's jars are resolved from Maven Central by ``build-support/kafka/pom.xml`` with
``mvn dependency:copy-dependencies`` and cached in ``build/kafka/`` (ignored by git) until that
POM changes. :class:`KafkaBroker` formats a fresh storage folder, starts
``java -cp ... kafka.Kafka server.properties`` on free 127.0.0.1 ports, waits until the broker
answers, creates topics and stops the broker again. Producers use confluent-kafka.

As a script it runs the whole Kafka path for ``make kafka-demo``::

    python tests/kafka_broker.py demo --workdir build/kafka-demo --events 5000
    python tests/kafka_broker.py serve   # a broker until Ctrl-C, to try the CLI by hand

Needs ``java`` (17+) and ``mvn`` on the PATH.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POM = ROOT / "build-support" / "kafka" / "pom.xml"
CACHE = ROOT / "build" / "kafka"


class BrokerError(RuntimeError):
    """The broker could not be set up, started or used; the message says why."""


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise BrokerError(f"the Kafka test broker needs {tool!r} on the PATH")
    return path


def kafka_version(pom: Path = POM) -> str:
    """The Kafka version the POM resolves."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    if not match:
        raise BrokerError(f"no <kafka.version> in {pom}")
    return match.group(1).strip()


def kafka_libs(pom: Path = POM, cache: Path = CACHE, timeout: float = 900.0) -> Path:
    """The folder of the broker's jars, resolved from Maven Central on first use and cached.

    The folder name carries the Kafka version and a hash of the POM, so editing the POM
    resolves again. A marker file makes a half-finished copy count as absent.
    """
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    libs = cache / f"libs-{kafka_version(pom)}-{digest}"
    if (libs / ".complete").exists():
        return libs
    cache.mkdir(parents=True, exist_ok=True)
    staging = cache / f".staging-{digest}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    command = [
        _require("mvn"),
        "-B",
        "-q",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0 or not any(staging.glob("kafka_*.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        output = (result.stdout + result.stderr)[-3000:]
        raise BrokerError(f"resolving the Kafka jars with Maven failed:\n{output}")
    (staging / ".complete").write_text(" ".join(command) + "\n")
    try:
        staging.rename(libs)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return libs


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cluster_id() -> str:
    """A random KRaft cluster id; like Kafka's own, never one that starts with '-' (read as a flag)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def _quoted(value: str) -> str:
    """A JAAS option value: double-quoted, with backslash escapes."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _jaas_users(users: dict[str, str]) -> str:
    """The broker's PLAIN login: its own user plus ``users``, escaped for server.properties."""
    pairs = " ".join(f"user_{name}={_quoted(password)}" for name, password in users.items())
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="broker" password="broker-secret" user_broker="broker-secret" {pairs};'
    )
    return jaas.replace("\\", "\\\\")  # java.util.Properties unescapes backslashes once


class KafkaBroker:
    """One Kafka process acting as broker and KRaft controller on 127.0.0.1.

    With ``sasl_users`` ({user: password}) clients must authenticate with SASL/PLAIN over
    plaintext (``SASL_PLAINTEXT``); otherwise the client listener is ``PLAINTEXT``.
    """

    def __init__(
        self,
        workdir: Path | str,
        libs: Path | None = None,
        sasl_users: dict[str, str] | None = None,
        heap: str = "512m",
    ) -> None:
        self.workdir = Path(workdir)
        self.libs = libs
        self.sasl_users = dict(sasl_users or {})
        self.heap = heap
        self.port = 0
        self.controller_port = 0
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the client listener."""
        return f"127.0.0.1:{self.port}"

    def client_config(self) -> dict[str, str]:
        """confluent-kafka settings that reach this broker (with credentials, if any)."""
        config = {"bootstrap.servers": self.bootstrap}
        if self.sasl_users:
            user, password = next(iter(self.sasl_users.items()))
            config.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": user,
                    "sasl.password": password,
                }
            )
        return config

    def _properties(self, data: Path) -> str:
        client = "SASL_PLAINTEXT" if self.sasl_users else "PLAINTEXT"
        lines = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"{client}://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"{client}://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": client,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{client}:{client}",
            "log.dirs": str(data),
            "num.partitions": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
        }
        if self.sasl_users:
            lines.update(
                {
                    "sasl.enabled.mechanisms": "PLAIN",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": _jaas_users(
                        self.sasl_users
                    ),
                }
            )
        return "".join(f"{key}={value}\n" for key, value in lines.items())

    def _log4j(self) -> str:
        return (
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {self.workdir / 'broker.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = file\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = INFO\n"
            "logger.state.name = state.change.logger\nlogger.state.level = WARN\n"
        )

    def _java(self, main: str, *args: str) -> list[str]:
        assert self.libs is not None
        return [
            _require("java"),
            "-Xms128m",
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            "-cp",
            str(self.libs / "*"),
            main,
            *args,
        ]

    def log_tail(self, lines: int = 40) -> str:
        """The end of the broker's log and console output, for error messages."""
        out = []
        for name in ("console.log", "broker.log"):
            path = self.workdir / name
            if path.exists():
                out.append(
                    f"--- {name}\n"
                    + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
                )
        return "\n".join(out)

    def start(self, timeout: float = 120.0) -> KafkaBroker:
        """Resolve the jars, format storage and start the broker; return once it answers."""
        if self.process is not None:
            raise BrokerError("the broker is already running")
        self.libs = self.libs or kafka_libs()
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = self.workdir / "data"
        shutil.rmtree(data, ignore_errors=True)
        self.port, self.controller_port = free_port(), free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        properties = self.workdir / "server.properties"
        properties.write_text(self._properties(data))
        (self.workdir / "log4j2.properties").write_text(self._log4j())
        fmt = subprocess.run(
            self._java(
                "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(properties)
            ),
            capture_output=True,
            text=True,
            timeout=120,
        )
        if fmt.returncode != 0:
            raise BrokerError(f"formatting the Kafka storage failed:\n{fmt.stdout}{fmt.stderr}")
        console = open(self.workdir / "console.log", "w")  # noqa: SIM115 - the process keeps it
        self.process = subprocess.Popen(
            self._java("kafka.Kafka", str(properties)),
            stdout=console,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches the demo, which stops us
        )
        console.close()
        atexit.register(self.stop)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({**self.client_config(), "log_level": 0})

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        admin = None
        while True:
            if self.process is None or self.process.poll() is not None:
                raise BrokerError(f"the Kafka broker exited while starting\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                admin = admin or self._admin()
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"the broker did not start in {timeout:.0f}s\n{self.log_tail()}")
            time.sleep(0.25)

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 60.0) -> None:
        """Create a topic and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self._admin()
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout)
        futures[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            topic = admin.list_topics(name, timeout=5).topics.get(name)
            ready = topic and topic.error is None and len(topic.partitions) == partitions
            if ready and all(p.leader >= 0 and p.error is None for p in topic.partitions.values()):
                return
            time.sleep(0.2)
        raise BrokerError(f"topic {name!r} has no leaders after {timeout:.0f}s")

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL); safe to call more than once."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> KafkaBroker:
        return self.start() if self.process is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def produce(
    config: dict[str, str] | str,
    topic: str,
    values: Iterable[str | bytes | None],
    keys: Sequence[str | None] | None = None,
    timeout: float = 60.0,
) -> list[tuple[int, int]]:
    """Produce records (idempotently, in order) and return each one's (partition, offset).

    ``config`` is a bootstrap address or a confluent-kafka config (see
    :meth:`KafkaBroker.client_config`). Raises :class:`BrokerError` if any record failed.
    """
    from confluent_kafka import Producer

    settings = {"bootstrap.servers": config} if isinstance(config, str) else dict(config)
    producer = Producer({**settings, "enable.idempotence": True, "linger.ms": 5, "log_level": 3})
    results: dict[int, tuple[int, int]] = {}
    errors: list[str] = []

    def delivered(n: int):
        def callback(error, message) -> None:
            if error is not None:
                errors.append(str(error))
            else:
                results[n] = (message.partition(), message.offset())

        return callback

    count = 0
    for n, value in enumerate(values):
        key = keys[n] if keys is not None else None
        payload = value.encode() if isinstance(value, str) else value
        while True:
            try:
                producer.produce(topic, value=payload, key=key, on_delivery=delivered(n))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
        count += 1
    if producer.flush(timeout) != 0 or errors or len(results) != count:
        raise BrokerError(f"producing to {topic!r} failed: {errors[:3] or 'timed out'}")
    return [results[n] for n in range(count)]


def _customer_key(line: str) -> str | None:
    """The customer id of a change record, its Kafka key (None when it has none)."""
    try:
        value = json.loads(line).get("customer_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _demo(args: argparse.Namespace) -> int:
    """Broker -> generated events and customer changes on topics -> medallion run -> gold."""
    from medallion.pipelines.retail.generator import generate_customer_lines, generate_event_lines

    workdir = Path(args.workdir).resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    medallion = [sys.executable, "-m", "medallion.cli"]
    with KafkaBroker(workdir / "broker") as broker:
        print(f"Kafka broker (KRaft) on {broker.bootstrap}, jars in {broker.libs}")
        events = [line for line in generate_event_lines(args.events, args.seed) if line.strip()]
        changes = list(generate_customer_lines(args.customers, args.seed))
        for topic, lines, keys in (
            ("events", events, None),
            ("customers", changes, [_customer_key(line) for line in changes]),
        ):
            broker.create_topic(topic, partitions=args.partitions)
            produce(broker.bootstrap, topic, lines, keys=keys)
            print(
                f"produced {len(lines)} records to topic {topic!r} ({args.partitions} partitions)"
            )
        run = [*medallion, "run", "--source", "kafka", "--kafka-bootstrap", broker.bootstrap]
        run += ["--lake", str(workdir / "lake")]
        if args.max_offsets_per_trigger:
            run += ["--max-offsets-per-trigger", str(args.max_offsets_per_trigger)]
        print("$ medallion " + " ".join(run[3:]), flush=True)
        subprocess.run(run, check=True)
        show = [*medallion, "show", "--lake", str(workdir / "lake"), "--layer", "gold"]
        print("$ medallion " + " ".join(show[3:]), flush=True)
        subprocess.run(show, check=True)
    print("Kafka broker stopped")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """Run a broker with the pipeline's topics until Ctrl-C."""
    with KafkaBroker(Path(args.workdir).resolve()) as broker:
        for topic in ("events", "customers"):
            broker.create_topic(topic, partitions=args.partitions)
        print(f"Kafka broker on {broker.bootstrap} with topics events, customers; Ctrl-C stops it")
        try:
            while broker.process is not None and broker.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="broker, generated events, pipeline run, gold, stop")
    demo.add_argument("--workdir", default=str(ROOT / "build" / "kafka-demo"))
    demo.add_argument("--events", type=int, default=5000)
    demo.add_argument("--customers", type=int, default=200)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--partitions", type=int, default=3)
    demo.add_argument("--max-offsets-per-trigger", type=int, default=2000)
    serve = sub.add_parser("serve", help="a broker with topics events and customers until Ctrl-C")
    serve.add_argument("--workdir", default=str(ROOT / "build" / "kafka-serve"))
    serve.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        return _demo(args) if args.command == "demo" else _serve(args)
    except BrokerError as error:
        print(f"kafka broker: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
