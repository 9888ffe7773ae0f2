"""503s with Retry-After are retried, and a retried post appends once."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.request
from typing import Iterator

import pytest

from conftest import Bench, LedgerServer
from evidence_ledger import Client, problems
from evidence_ledger.errors import ServiceUnavailable

OVERLOADED = b'{"type":"urn:evidence-ledger:problem:overloaded","title":"Service Unavailable","status":503,"detail":"busy","code":"overloaded"}'


class Flaky:
    """A loopback proxy to the real server that answers the first `fail` POSTs with
    503 overloaded (Retry-After: 0) and passes everything else through."""

    def __init__(self, upstream: str, fail: int) -> None:
        self.upstream, self.fail, self.posts = upstream, fail, 0
        flaky = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                pass

            def relay(self, body: bytes | None) -> None:
                req = urllib.request.Request(flaky.upstream + self.path, data=body, method=self.command,
                                             headers={"content-type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        status, data = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, data = e.code, e.read()
                self.send_response(status)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self.relay(None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                flaky.posts += 1
                if flaky.posts <= flaky.fail:
                    self.send_response(503)
                    self.send_header("retry-after", "0")
                    self.send_header("content-type", "application/problem+json")
                    self.send_header("content-length", str(len(OVERLOADED)))
                    self.end_headers()
                    self.wfile.write(OVERLOADED)
                    return
                self.relay(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def bench(server: LedgerServer) -> Bench:
    return Bench(server, "retry", cases=1)


@pytest.fixture()
def flaky(server: LedgerServer) -> Iterator[Flaky]:
    f = Flaky(server.url, fail=2)
    yield f
    f.close()


def test_a_503_is_retried_after_retry_after_and_the_write_lands_once(bench: Bench, flaky: Flaky, server: LedgerServer) -> None:
    c = Client(flaky.url, server.vkey, retries=3)
    env = bench.score(bench.cases[0], 0.6).sign(bench.harness)
    r = c.post(env)
    assert flaky.posts == 3 and not r.existing
    assert bench.client.post(env).existing


def test_a_503_past_the_retries_is_the_typed_refusal(bench: Bench, flaky: Flaky, server: LedgerServer) -> None:
    c = Client(flaky.url, server.vkey, retries=1)
    with pytest.raises(problems.Overloaded) as e:
        c.post(bench.score(bench.cases[0], 0.6).sign(bench.harness))
    assert isinstance(e.value, ServiceUnavailable) and e.value.retry_after == 0.0
