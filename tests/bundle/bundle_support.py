"""Helpers of the bundle tests: paths, the schema's patterns, a fake workspace."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

ROOT = Path(__file__).resolve().parents[2]
# The official bundle schema (`databricks bundle schema`), vendored gzipped with its source and
# version (tests/data/bundle-schema/README.md); MEDALLION_BUNDLE_SCHEMA may name a fresh one.
DEFAULT_SCHEMA = ROOT / "tests" / "data" / "bundle-schema" / "databricks-bundle-schema.json.gz"


def python_patterns(node: object) -> object:
    """The schema with its ``\\p{L}``/``\\p{N}`` classes spelled the way Python's ``re`` can."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                value = value.replace(r"[\p{L}\p{N}]", r"[^\W_]")
                value = value.replace(r"\p{L}", r"[^\W\d_]").replace(r"\p{N}", r"\d")
            out[key] = python_patterns(value)
        return out
    if isinstance(node, list):
        return [python_patterns(v) for v in node]
    return node


# --- a fake workspace: the few REST endpoints the workspace helpers call ----------------------


class FakeWorkspace:
    """An in-memory Databricks workspace on 127.0.0.1: Files API, Jobs API, SCIM Me."""

    def __init__(self) -> None:
        self.user_name = "jane.doe@example.com"
        self.volumes = {"/Volumes/main/medallion/landing"}
        self.files: dict[str, bytes] = {}
        self.directories: set[str] = set()
        self.jobs: dict[int, str] = {}
        self.run_requests: list[dict] = []
        self.run_states: list[dict] = []  # what successive runs/get calls answer
        self.requests: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def host(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def in_volume(self, path: str) -> bool:
        return any(path == v or path.startswith(v + "/") for v in self.volumes)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, body: dict | None = None) -> None:
                data = json.dumps(body or {}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                path, query = unquote(url.path), parse_qs(url.query)
                fake.requests.append(f"{method} {path}")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if path.startswith("/.well-known/"):  # host metadata: none here
                    return self._reply(404, {"error_code": "NOT_FOUND", "message": path})
                if self.headers.get("Authorization") != "Bearer test-token":
                    return self._reply(401, {"error_code": "UNAUTHENTICATED", "message": "no"})
                if method == "GET" and path.endswith("/preview/scim/v2/Me"):
                    return self._reply(200, {"id": "1", "userName": fake.user_name})
                if method == "PUT" and path.startswith("/api/2.0/fs/directories/"):
                    target = path[len("/api/2.0/fs/directories") :]
                    if not fake.in_volume(target):
                        return self._reply(404, {"error_code": "NOT_FOUND", "message": target})
                    fake.directories.add(target)
                    return self._reply(200)
                if method == "PUT" and path.startswith("/api/2.0/fs/files/"):
                    target = path[len("/api/2.0/fs/files") :]
                    if not fake.in_volume(target):
                        return self._reply(404, {"error_code": "NOT_FOUND", "message": target})
                    fake.files[target] = body
                    return self._reply(204)
                if method == "GET" and path.endswith("/jobs/list"):
                    name = (query.get("name") or [None])[0]
                    jobs = [
                        {"job_id": job_id, "settings": {"name": job_name}}
                        for job_id, job_name in fake.jobs.items()
                        if name is None or job_name == name
                    ]
                    return self._reply(200, {"jobs": jobs, "has_more": False})
                if method == "POST" and path.endswith("/jobs/run-now"):
                    fake.run_requests.append(json.loads(body or b"{}"))
                    return self._reply(200, {"run_id": 9001, "number_in_job": 1})
                if method == "GET" and path.endswith("/jobs/runs/get"):
                    state = (
                        fake.run_states.pop(0) if len(fake.run_states) > 1 else fake.run_states[0]
                    )
                    return self._reply(200, {"run_id": 9001, "job_id": 1, **state})
                return self._reply(404, {"error_code": "NOT_FOUND", "message": path})

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def do_PUT(self) -> None:
                self._route("PUT")

        return Handler


def comparable_snapshot(spark, config) -> dict:
    """The rows of every table that exists, as multisets, without ingestion times and paths,
    and without the tables of Change Data Feed rows (lake_checks.lake_snapshot)."""
    from lake_checks import lake_snapshot

    return lake_snapshot(spark, config, change_feeds=False)
