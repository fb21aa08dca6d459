"""A real single-node Apache Kafka (KRaft, combined broker + controller) on 127.0.0.1, without Docker.

The jars come from Maven Central through `deploy/local/pom.xml` into a cache outside git; the broker runs as a child
JVM whose pid, ports and logs live under one state directory. `ctxbudget kafka up|down|status` and the test harness
drive it through `LocalKafka`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

REPO_ROOT = Path(__file__).resolve().parents[1]
POM = REPO_ROOT / "deploy" / "local" / "pom.xml"
JVM_HEAP = ("-Xms256m", "-Xmx768m")
STOP_TIMEOUT_S = 30.0


class LocalKafkaError(RuntimeError):
    pass


def ensure_jars(version: str, cache_dir: Path) -> Path:
    """The folder of Kafka `version`'s runtime jars, resolved with Maven on first use (atomically: all or nothing)."""
    libs = cache_dir / f"kafka-{version}" / "libs"
    if (libs / ".complete").exists():
        return libs
    if shutil.which("mvn") is None:
        raise LocalKafkaError(
            "Maven (`mvn`) is needed once to fetch the Kafka jars; install it (apt-get install maven)"
        )
    if not POM.exists():
        raise LocalKafkaError(f"{POM} is missing: run from a checkout of the project")
    libs.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="libs-", dir=libs.parent))
    command = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        f"-Dkafka.version={version}",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(staging.glob(f"kafka_2.13-{version}.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        raise LocalKafkaError(f"resolving Kafka {version} failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")
    (staging / ".complete").touch()
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    return libs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Whether the broker could listen on `port`. The JVM binds with SO_REUSEADDR, so the probe does too: without it
    a connection of the last run still in TIME_WAIT makes the port look taken, and the broker would move."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


async def broker_answers(bootstrap: str, timeout_s: float = 5.0) -> bool:
    """True when the broker answers a metadata request (not merely accepts TCP connections)."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:  # a cheap TCP probe first, so a broker that is still starting costs no client set-up (nor its error logs)
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(host, int(port))
        writer.close()
    except (OSError, TimeoutError):
        return False
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout_s * 1000))
    try:
        async with asyncio.timeout(timeout_s):
            await admin.start()
        async with asyncio.timeout(timeout_s):
            cluster = await admin.describe_cluster()
        return bool(cluster.get("brokers"))
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            await admin.close()


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap: str | None
    version: str
    state_dir: str
    log_file: str

    def as_json(self) -> str:
        return json.dumps(asdict(self))


@dataclass(frozen=True)
class _Ports:
    broker: int
    controller: int


class LocalKafka:
    """One local broker whose whole state (log dirs, config, pid, ports, log) lives under `state_dir`."""

    def __init__(self, state_dir: Path, version: str, cache_dir: Path) -> None:
        self.state_dir = state_dir.expanduser().resolve()
        self.version = version
        self.cache_dir = cache_dir.expanduser()
        self._pid_file = self.state_dir / "broker.pid"
        self._ports_file = self.state_dir / "ports.json"
        self._log_dir = self.state_dir / "log-dirs"
        self.log_file = self.state_dir / "broker.log"

    # -- status ---------------------------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """The broker's pid if a process started by us is still alive (guards against a recycled pid)."""
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"kafka.Kafka" in cmdline and str(self.state_dir).encode() in cmdline else None

    def bootstrap(self) -> str | None:
        ports = self._saved_ports()
        return f"127.0.0.1:{ports.broker}" if ports else None

    def status(self) -> BrokerStatus:
        pid = self.pid()
        return BrokerStatus(
            running=pid is not None,
            pid=pid,
            bootstrap=self.bootstrap() if pid else None,
            version=self.version,
            state_dir=str(self.state_dir),
            log_file=str(self.log_file),
        )

    # -- up / down ------------------------------------------------------------------------------------------------
    def up(self, port: int | None = None, timeout_s: float = 90.0) -> str:
        """Start the broker unless it runs; wait until it answers a metadata request; return the bootstrap address."""
        if self.pid() is not None:
            bootstrap = self.bootstrap()
            assert bootstrap is not None
            if port is not None and not bootstrap.endswith(f":{port}"):
                raise LocalKafkaError(f"the local broker already runs at {bootstrap}; `ctxbudget kafka down` first")
            return bootstrap
        libs = ensure_jars(self.version, self.cache_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        ports = self._choose_ports(port)
        config = self._write_config(ports)
        if not (self._log_dir / "meta.properties").exists():
            self._format_storage(libs, config)
        with self.log_file.open("ab") as log:
            process = subprocess.Popen(
                [*self._java(libs), "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a Ctrl-C in our terminal does not reach it
            )
        self._pid_file.write_text(str(process.pid))
        bootstrap = f"127.0.0.1:{ports.broker}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                self._pid_file.unlink(missing_ok=True)
                raise LocalKafkaError(f"the broker exited with {process.returncode}; see {self.log_file}")
            if asyncio.run(broker_answers(bootstrap, timeout_s=2.0)):
                return bootstrap
            time.sleep(0.3)
        self.down()
        raise LocalKafkaError(f"the broker did not answer within {timeout_s:.0f}s; see {self.log_file}")

    def down(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stop the broker (SIGTERM for a clean shutdown, SIGKILL after `timeout_s`). False if it was not running."""
        pid = self.pid()
        if pid is None:
            self._pid_file.unlink(missing_ok=True)
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.05)
        self._pid_file.unlink(missing_ok=True)
        return True

    def destroy(self) -> None:
        """Stop the broker and delete all its data."""
        self.down()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- internals ------------------------------------------------------------------------------------------------
    def _saved_ports(self) -> _Ports | None:
        try:
            return _Ports(**json.loads(self._ports_file.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None

    def _choose_ports(self, port: int | None) -> _Ports:
        """Reuse the last ports when they are free, so clients keep their bootstrap address across restarts."""
        saved = self._saved_ports()
        broker = port or (saved.broker if saved and port_is_free(saved.broker) else free_port())
        if not port_is_free(broker):
            raise LocalKafkaError(f"port {broker} on 127.0.0.1 is taken")
        controller = saved.controller if saved and port_is_free(saved.controller) else free_port()
        while controller == broker:
            controller = free_port()
        ports = _Ports(broker=broker, controller=controller)
        self._ports_file.write_text(json.dumps(asdict(ports)))
        return ports

    def _write_config(self, ports: _Ports) -> Path:
        config = self.state_dir / "server.properties"
        config.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{ports.controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{ports.broker},CONTROLLER://127.0.0.1:{ports.controller}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{ports.broker}",
                    "controller.listener.names=CONTROLLER",
                    "inter.broker.listener.name=PLAINTEXT",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    f"log.dirs={self._log_dir}",
                    # The project creates every topic itself, with explicit partitions and cleanup policy.
                    "auto.create.topics.enable=false",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=8",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "transaction.state.log.num.partitions=4",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    # One broker, tests that join groups often: no point delaying the first rebalance.
                    "group.initial.rebalance.delay.ms=0",
                    "log.cleaner.backoff.ms=1000",
                ]
            )
            + "\n"
        )
        (self.state_dir / "log4j2.properties").write_text(
            "\n".join(
                [
                    "rootLogger.level=INFO",
                    "rootLogger.appenderRef.out.ref=OUT",
                    "appender.out.type=Console",
                    "appender.out.name=OUT",
                    "appender.out.layout.type=PatternLayout",
                    "appender.out.layout.pattern=[%d] %p %m (%c)%n",
                    "logger.kafka.name=kafka",
                    "logger.kafka.level=WARN",
                    "logger.apache.name=org.apache.kafka",
                    "logger.apache.level=WARN",
                ]
            )
            + "\n"
        )
        return config

    def _java(self, libs: Path) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise LocalKafkaError("a Java runtime (17+) is needed for the local broker")
        return [
            java,
            *JVM_HEAP,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.state_dir / 'log4j2.properties'}",
            f"-Dctxbudget.state={self.state_dir}",  # lets pid() recognise our own broker
            "-cp",
            f"{libs}/*",
        ]

    def _format_storage(self, libs: Path, config: Path) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        result = subprocess.run(
            # `=` form: a base64url id may start with "-", which argparse would take for an option
            [*self._java(libs), "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise LocalKafkaError(f"formatting KRaft storage failed:\n{result.stdout[-4000:]}{result.stderr[-4000:]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return False
    return state != "Z"
