"""Helpers of the ``pyql serve`` tests: the real app served by uvicorn in a thread (a real HTTP
server on a free port of 127.0.0.1) and run directories made from real result records (the
system Chromium the browser tests drive is found by :mod:`tests.support.chromium`)."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from pyql.apps.web.app import LOCAL_HOSTS, ServeConfig, create_app
from pyql.apps.web.workspace import Workspace
from pyql.demo import movies_path
from tests.support.threaded_server import served_in_thread

FIXTURE_RUN = Path(__file__).resolve().parent.parent / "fixtures" / "runs" / "metaqa_small"


@dataclass
class Served:
    url: str
    config: ServeConfig
    app: Any
    server: uvicorn.Server

    def csrf(self) -> str:
        return self.config.csrf_token


def movies_workspace() -> Workspace:
    return Workspace(kb=str(movies_path()))


@contextmanager
def serve(workspace: Workspace, out: Path, runs: list[Path] | None = None, *,
          token: str | None = None, allowed_hosts: tuple[str, ...] | None = LOCAL_HOSTS
          ) -> Iterator[Served]:
    """The app on a free port of 127.0.0.1, in a thread of this process, until the block ends."""
    config = ServeConfig(workspace=workspace, out=out, runs=list(runs or []), token=token,
                         allowed_hosts=allowed_hosts)
    app = create_app(config)
    with served_in_thread(app, name="pyql-serve-test", graceful_seconds=1) as running:
        try:
            yield Served(running.url, config, app, running.server)
        finally:
            app.state.asks.shutdown()


def request(url: str, *, method: str = "GET", body: Any = None,
            headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON or text, headers) of one HTTP request (errors are answers too)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=20) as response:
            raw, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text), got
    except ValueError:
        return status, text, got


def post(served: Served, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    """A POST as the app's own page sends it (its Origin and CSRF token)."""
    return request(served.url + path, method="POST", body=body if body is not None else {},
                   headers={"Origin": served.url, "X-CSRF-Token": served.csrf()})


def results(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def copy_run(target: Path) -> Path:
    shutil.copytree(FIXTURE_RUN, target)
    return target


def big_run(target: Path, n: int = 1000) -> Path:
    """A run directory of ``n`` questions made from the fixture run's real result records (ids
    renamed, the records cycled), with its config; no trajectories (the table does not need
    them)."""
    target.mkdir(parents=True)
    shutil.copy(FIXTURE_RUN / "config.json", target / "config.json")
    records = results(FIXTURE_RUN)
    with (target / "results.jsonl").open("w", encoding="utf-8") as handle:
        for i in range(n):
            record = dict(records[i % len(records)])
            record["id"] = f"{record['id']}-x{i}"
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return target
