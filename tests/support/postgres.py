"""A throw-away PostgreSQL cluster for tests.

:meth:`PostgresServer.start` runs ``initdb`` in a temporary directory, starts the cluster with
``pg_ctl`` on a free port of 127.0.0.1 (Unix socket inside the directory, no fsync), creates a
database and a password-protected role, and :meth:`PostgresServer.stop` stops it (immediate
mode) and removes the directory. PostgreSQL refuses to run as root, so when the tests run as
root the cluster is owned by and run as the ``postgres`` system user (else ``nobody``).

Binaries are looked up on PATH, then in ``/usr/lib/postgresql/<version>/bin`` (newest first).
The session fixture :func:`postgres_url` skips only when ``initdb``/``pg_ctl`` are missing::

    def test_it(postgres_url):
        engine = sqlalchemy.create_engine(postgres_url)  # postgresql+psycopg://...
"""

from __future__ import annotations

import atexit
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "PostgresError",
    "PostgresServer",
    "find_postgres_bin",
    "postgres",
    "postgres_url",
]

logger = logging.getLogger(__name__)

USER = "pyql"
DATABASE = "pyql_test"
_STARTUP_ATTEMPTS = 3
_PORT_FAILURE = re.compile(r"could not bind|already in use|could not create any", re.IGNORECASE)

_SETTINGS = """
# --- pyql test cluster ---
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 40
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
logging_collector = off
"""


class PostgresError(RuntimeError):
    """The test cluster could not be created or started."""


def find_postgres_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: PATH first, then Debian's layout."""
    initdb = shutil.which("initdb")
    if initdb is not None and shutil.which("pg_ctl") is not None:
        return Path(initdb).resolve().parent
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)] or [0],
        reverse=True,
    )
    for directory in candidates:
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class _RunAs:
    """Who runs the cluster: the current user, or (as root) an unprivileged system user."""

    uid: int
    gid: int
    name: str

    @classmethod
    def choose(cls) -> _RunAs:
        if os.geteuid() != 0:
            entry = pwd.getpwuid(os.geteuid())
            return cls(entry.pw_uid, entry.pw_gid, entry.pw_name)
        for name in ("postgres", "nobody"):
            try:
                entry = pwd.getpwnam(name)
            except KeyError:
                continue
            return cls(entry.pw_uid, entry.pw_gid, entry.pw_name)
        raise PostgresError("running as root and neither a 'postgres' nor a 'nobody' user exists")

    @property
    def switches(self) -> bool:
        return self.uid != os.geteuid()


class PostgresServer:
    """A running throw-away cluster. Use :meth:`start`; always :meth:`stop` (or ``with``)."""

    def __init__(self, workdir: Path, bindir: Path, run_as: _RunAs, port: int, password: str):
        self.workdir = workdir
        self.bindir = bindir
        self.run_as = run_as
        self.port = port
        self.host = "127.0.0.1"
        self.user = USER
        self.password = password
        self.database = DATABASE
        self.data_dir = workdir / "data"
        self._running = False
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """SQLAlchemy URL (psycopg 3 driver) of the test database."""
        return (
            f"postgresql+psycopg://{self.user}:{self.password}@{self.host}:{self.port}"
            f"/{self.database}"
        )

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def start(cls, *, bindir: Path | None = None, startup_timeout: float = 60.0) -> PostgresServer:
        """Create and start a cluster; raise :class:`PostgresError` if that fails."""
        bindir = bindir or find_postgres_bin()
        if bindir is None:
            raise PostgresError("initdb/pg_ctl not found on PATH or in /usr/lib/postgresql")
        run_as = _RunAs.choose()
        started = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="pyql-postgres-"))
        server = cls(workdir, bindir, run_as, 0, secrets.token_hex(16))
        try:
            if run_as.switches:
                os.chown(workdir, run_as.uid, run_as.gid)
            server._initdb()
            last_log = ""
            for attempt in range(1, _STARTUP_ATTEMPTS + 1):
                server.port = _free_port()
                try:
                    server._pg_ctl_start(startup_timeout)
                    break
                except PostgresError as exc:
                    last_log = str(exc)
                    if not _PORT_FAILURE.search(last_log):
                        raise
                    logger.warning("postgres start attempt %d lost a port race; retrying", attempt)
            else:
                raise PostgresError(f"could not start postgres on a free port:\n{last_log}")
            server._create_database()
        except BaseException:
            server.stop()
            raise
        logger.info(
            "postgres ready on 127.0.0.1:%d in %.1fs", server.port, time.monotonic() - started
        )
        return server

    def _run(self, *args: str, timeout: float = 120.0) -> str:
        """Run a PostgreSQL binary as the cluster owner; raise PostgresError when it fails."""
        command = [str(self.bindir / args[0]), *args[1:]]
        extra: dict[str, object] = {}
        if self.run_as.switches:
            extra = {"user": self.run_as.uid, "group": self.run_as.gid, "extra_groups": []}
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "HOME": str(self.workdir),
        }
        done = subprocess.run(
            command,
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
            **extra,  # type: ignore[arg-type]
        )
        output = (done.stdout + done.stderr).decode(errors="replace")
        if done.returncode != 0:
            raise PostgresError(f"{args[0]} failed (exit {done.returncode}):\n{output.strip()}")
        return output

    def _owned_file(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text)
        path.chmod(0o600)
        if self.run_as.switches:
            os.chown(path, self.run_as.uid, self.run_as.gid)
        return path

    def _initdb(self) -> None:
        pwfile = self._owned_file("pwfile", self.password + "\n")
        try:
            self._run(
                "initdb",
                "-D", str(self.data_dir),
                "-U", self.user,
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
                "--no-instructions",
            )  # fmt: skip
        finally:
            pwfile.unlink(missing_ok=True)

    def _pg_ctl_start(self, timeout: float) -> None:
        conf = self.data_dir / "postgresql.conf"
        base = conf.read_text().split("\n# --- pyql test cluster ---")[0]
        conf.write_text(base + _SETTINGS.format(port=self.port, socket_dir=self.workdir))
        log = self.workdir / "postgres.log"
        try:
            self._run(
                "pg_ctl", "-D", str(self.data_dir), "-l", str(log), "-w",
                "-t", str(int(timeout)), "start",
                timeout=timeout + 10,
            )  # fmt: skip
        except PostgresError as exc:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise PostgresError(f"{exc}\n--- postgres.log\n{tail}") from None
        self._running = True

    def _create_database(self) -> None:
        self._run(
            "createdb", "-h", str(self.workdir), "-p", str(self.port), "-U", self.user,
            self.database,
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the cluster (immediate mode) and remove its directory. Safe to call twice."""
        atexit.unregister(self.stop)
        if self._running:
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop",
                    timeout=30,
                )  # fmt: skip
            except (PostgresError, subprocess.TimeoutExpired) as exc:
                logger.error("pg_ctl stop failed (%s); killing the postmaster", exc)
                self._kill_postmaster()
            self._running = False
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _kill_postmaster(self) -> None:
        pidfile = self.data_dir / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0])
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster for the test session (``.url``, ``.port``, ``.database``...)."""
    bindir = find_postgres_bin()
    if bindir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in "
            "/usr/lib/postgresql/*/bin (Debian/Ubuntu: apt-get install postgresql)"
        )
    server = PostgresServer.start(bindir=bindir)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres: PostgresServer) -> str:
    """SQLAlchemy URL ``postgresql+psycopg://pyql:...@127.0.0.1:PORT/pyql_test``."""
    return postgres.url
