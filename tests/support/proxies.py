"""Private infrastructure in front of the bot's stores, as operators run it beyond one machine:
a PgBouncer in transaction mode before the test Postgres, and a Redis master with a replica
watched by a Redis Sentinel. Each runs as its own process on free ports, never touching the
shared servers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.servers import free_port

# Debian installs it in /usr/sbin, which a non-root PATH may lack.
PGBOUNCER = shutil.which("pgbouncer", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
REDIS_SERVER = shutil.which("redis-server")
REDIS_SENTINEL = shutil.which("redis-sentinel")
START_TIMEOUT_S = 30.0
MASTER = "mymaster"


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_listening(process: subprocess.Popen[bytes], port: int, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _listening(port):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} on port {port} did not start")
        time.sleep(0.02)  # polling the port until the server listens


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL to the whole session the process leads (each is started in its own): as root
    PgBouncer runs under ``runuser``, and killing that wrapper alone left PgBouncer running
    after the tests, one more per run."""
    if process is not None and process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class PrivatePgBouncer:
    """PgBouncer in transaction mode with a pool of one server connection per database:
    every client shares it, so anything that leans on session state (a prepared statement
    kept from an earlier transaction, a session lock) breaks visibly."""

    def __init__(self, upstream_host: str, upstream_port: int, user: str) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="bot_pgbouncer_"))
        self.log = self.root / "pgbouncer.log"
        self._upstream = (upstream_host, upstream_port)
        self._user = user
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://{self._user}@127.0.0.1:{self.port}/{database}"

    def _config(self) -> Path:
        host, port = self._upstream
        (self.root / "users.txt").write_text(f'"{self._user}" ""\n')
        config = self.root / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.root / 'users.txt'}\n"
            "pool_mode = transaction\ndefault_pool_size = 5\nmax_client_conn = 500\n"
            "reserve_pool_size = 0\n"
            f"logfile = {self.log}\npidfile = {self.root / 'pgbouncer.pid'}\n"
        )
        return config

    def start(self) -> None:
        assert PGBOUNCER is not None
        config = self._config()
        argv = [PGBOUNCER, str(config)]
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            shutil.chown(self.root, user="postgres")
            for path in self.root.iterdir():
                shutil.chown(path, user="postgres")
            argv = ["runuser", "-u", "postgres", "--", *argv]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        _wait_listening(self.process, self.port, "pgbouncer")

    def close(self) -> None:
        try:
            _stop(self.process)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _redis(port: int, *options: str) -> subprocess.Popen[bytes]:
    assert REDIS_SERVER is not None
    argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    argv += ["--appendonly", "no", "--daemonize", "no", *options]
    process = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    _wait_listening(process, port, "redis-server")
    return process


class PrivateSentinel:
    """A Redis master, its replica and one Sentinel watching them (quorum 1), quick to fail
    over: the master counts as down after 1 s without an answer."""

    def __init__(self) -> None:
        self.master_port, self.replica_port, self.port = free_port(), free_port(), free_port()
        self.root = Path(tempfile.mkdtemp(prefix="bot_sentinel_"))
        self.master: subprocess.Popen[bytes] | None = None
        self.replica: subprocess.Popen[bytes] | None = None
        self.sentinel: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.master = _redis(self.master_port)
        self.replica = _redis(self.replica_port, "--replicaof", "127.0.0.1", str(self.master_port))
        config = self.root / "sentinel.conf"  # Sentinel rewrites its own file
        config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {self.root}\n"
            f"sentinel monitor {MASTER} 127.0.0.1 {self.master_port} 1\n"
            f"sentinel down-after-milliseconds {MASTER} 1000\n"
            f"sentinel failover-timeout {MASTER} 5000\n"
        )
        assert REDIS_SENTINEL is not None
        self.sentinel = subprocess.Popen(
            [REDIS_SENTINEL, str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_listening(self.sentinel, self.port, "redis-sentinel")

    def kill_master(self) -> None:
        _stop(self.master)

    def close(self) -> None:
        try:
            for process in (self.sentinel, self.replica, self.master):
                _stop(process)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def missing(*binaries: str | None) -> bool:
    return any(binary is None for binary in binaries)
