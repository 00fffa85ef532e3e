"""A local Redis Cluster for the tests: 3 masters, no replicas, on free loopback ports.

Each master is a redis-server in cluster mode in a directory of its own (AOF on,
``nodes.conf`` there), so ``restart()`` of one brings it back as the same node
with its keys. ``redis-cli --cluster create`` splits the 16,384 slots into three
equal ranges. Importable without pytest (bench/ may use it).
"""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.servers import RedisServer, _die_with_parent
from trawler.localservers import ensure_redis_server, free_port, redis_ping, wait_ready

MASTERS = 3
NODE_TIMEOUT_MS = 3000  # a shard down longer than this fails the cluster until it is back


@dataclass
class ClusterNode(RedisServer):
    """One master: RedisServer's settings plus cluster mode, its bus on a port of its
    own (by default port + 10,000, which may be taken or out of range)."""

    bus_port: int = 0

    def start(self) -> ClusterNode:
        cmd = [str(self.binary), "--bind", "127.0.0.1", "--port", str(self.port),
               "--dir", str(self.dir), "--appendonly", "yes", "--appendfsync", "everysec",
               "--save", "", "--daemonize", "no", "--logfile", str(self.log_path),
               "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
               "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
               "--cluster-port", str(self.bus_port)]  # fmt: skip
        self.process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent(signal.SIGTERM)
        )
        wait_ready(lambda: redis_ping(self.port), self.process, "redis-server", self.log_path, 20)
        return self


@dataclass
class LocalCluster:
    nodes: list[ClusterNode] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The frontier's URL for it: any one node, the client finds the others."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def cli(self, node: ClusterNode, *args: str) -> str:
        binary = Path(node.binary).with_name("redis-cli")
        cmd = [str(binary), "-h", "127.0.0.1", "-p", str(node.port), *args]
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=30).stdout

    def wait_ok(self, timeout_s: float = 30) -> None:
        """Until every node says cluster_state:ok (slots assigned, all masters up)."""
        deadline = time.monotonic() + timeout_s
        while any("cluster_state:ok" not in self.cli(n, "cluster", "info") for n in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not become ok")
            time.sleep(0.1)

    def command_calls(self) -> int:
        """Commands run on all the masters (INFO commandstats, calls summed)."""
        total = 0
        for node in self.nodes:
            for line in self.cli(node, "info", "commandstats").splitlines():
                if line.startswith("cmdstat_"):
                    total += int(line.split("calls=", 1)[1].split(",", 1)[0])
        return total

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


def start_cluster(tmpdir: Path | str, masters: int = MASTERS) -> LocalCluster:
    binary = ensure_redis_server()
    cluster = LocalCluster()
    try:
        for i in range(masters):
            node = ClusterNode(binary, Path(tmpdir) / f"node{i}", free_port())
            node.bus_port = free_port()
            node.dir.mkdir(parents=True, exist_ok=True)
            cluster.nodes.append(node.start())
        addresses = [f"127.0.0.1:{n.port}" for n in cluster.nodes]
        cluster.cli(cluster.nodes[0], "--cluster", "create", *addresses,
                    "--cluster-replicas", "0", "--cluster-yes")  # fmt: skip
        cluster.wait_ok()
    except BaseException:
        cluster.stop()
        raise
    return cluster
