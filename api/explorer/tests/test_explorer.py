"""The web explorer (api/explorer/) in a real browser, against a real server.

The test starts `ledger demo` (a fresh data directory with a realistic bench,
served until stopped), puts a tamper proxy between it and headless Chromium,
and drives every page: the head, the entry list, an entry, the three kinds of
search and a task class. With the proxy passing everything through, every
check on those pages must turn green (`data-status="ok"`), except what the
page cannot prove (the recommendation's rules: "not checked"). Then the
proxy changes one byte of one kind of answer (an inclusion proof step, a
consistency proof step, the checkpoint's signature or root, a served
statistic, an evidence proof step, a projection's root), or rewrites a JSON
answer (another class's projection, the view's settings or window, its
rules, the entry listings, a search answer, evidence indices), or does not
answer at all, and the element that checks it must turn red (or "not
checked" where nothing can be verified), naming what failed.

Environment:
- LEDGER_BIN: the `ledger` binary (default target/release/ledger);
- EXPLORER_SCREENSHOTS: where screenshots go (default target/explorer-screenshots);
- UPDATE_README_SCREENSHOT=1: also copy the task-class page to docs/explorer.png;
- EXPLORER_ASSETS_DIR: for development only, before the binary serves the
  explorer: the proxy then serves /explorer/* from that directory, with the
  headers the server must send. Unset (as in CI), /explorer/* is forwarded
  to the server like everything else, so the test proves the binary serves
  the assets.

Needs Debian's chromium and chromium-driver (/usr/bin/chromium,
/usr/bin/chromedriver) and the Python packages in requirements.txt.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

HERE = Path(__file__).resolve().parent
EXPLORER = HERE.parent
REPO = EXPLORER.parents[1]
LEDGER_BIN = Path(os.environ.get("LEDGER_BIN", str(REPO / "target/release/ledger")))
SCREENSHOTS = Path(os.environ.get("EXPLORER_SCREENSHOTS", str(REPO / "target/explorer-screenshots")))
ASSETS_DIR = os.environ.get("EXPLORER_ASSETS_DIR")
CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER_BIN", "/usr/bin/chromedriver")

#: Every file of the explorer and the Content-Type the server must send.
ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "ui.js": "text/javascript; charset=utf-8",
    "api.js": "text/javascript; charset=utf-8",
    "blake3.js": "text/javascript; charset=utf-8",
    "envelope.js": "text/javascript; charset=utf-8",
    "libm.js": "text/javascript; charset=utf-8",
    "merkle.js": "text/javascript; charset=utf-8",
    "note.js": "text/javascript; charset=utf-8",
    "plot.js": "text/javascript; charset=utf-8",
    "stats.js": "text/javascript; charset=utf-8",
    "page-head.js": "text/javascript; charset=utf-8",
    "page-entries.js": "text/javascript; charset=utf-8",
    "page-classes.js": "text/javascript; charset=utf-8",
    "page-settings.js": "text/javascript; charset=utf-8",
    "rules.js": "text/javascript; charset=utf-8",
}
#: The Content-Security-Policy every explorer file is served with.
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'")

CLASS = "flaky-test-quarantine"
#: A `case.added` of the demo, in payload schema 3: five committed fields, the
#: last its companion `case_name` (the case id behind the handle in `case_id`;
#: docs/PRIVACY.md, "Handles (schema 3)").
COMMITTED_ENTRY = 17
CASE_FIELDS = ["title", "disposition", "difficulty", "provenance.source_ref", "case_name"]
#: A `principal.enrolled` of the demo (a curator's key), in schema 3: its companion `identity_name`.
ENROLMENT_ENTRY = 3
WAIT = 60  # seconds: an upper bound for a page, never a sleep


# --- the demo server --------------------------------------------------------------------


class Demo:
    """`ledger demo --listen 127.0.0.1:0`, with what it printed: its address,
    the log's verifier key and its data directory."""

    def __init__(self) -> None:
        self._wait_for_binary()
        self.proc = subprocess.Popen(
            [str(LEDGER_BIN), "demo", "--listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        )
        self.lines: list[str] = []
        self.errors: list[str] = []
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(self.proc.stdout, self.lines, ready), daemon=True).start()
        threading.Thread(target=self._drain, args=(self.proc.stderr, self.errors, None), daemon=True).start()
        if not ready.wait(120) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("the demo did not start:\n" + "".join(self.lines + self.errors)[-4000:])
        out = "".join(self.lines)
        self.url = _search(r"server listening on (http://127\.0\.0\.1:\d+)", out)
        self.key = _search(r"--key '([^']+)'", out)
        self.data_dir = Path(_search(r"demo data directory: (\S+)", out))
        #: The demo's auditor: a reader with a role, who receives the disclosures of committed values.
        self.auditor_token = _search(r"auditor reader token \(receives disclosures of sensitive values\): (\S+)", out)
        self.enrolled = 0

    @staticmethod
    def _wait_for_binary() -> None:
        # Another build may be replacing the binary: wait for it, briefly.
        deadline = time.monotonic() + 120
        while not (LEDGER_BIN.is_file() and os.access(LEDGER_BIN, os.X_OK)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{LEDGER_BIN} does not exist (set LEDGER_BIN)")
            time.sleep(1)

    @staticmethod
    def _drain(stream: Any, into: list[str], ready: Optional[threading.Event]) -> None:
        for line in stream:
            into.append(line)
            if ready is not None and line.startswith("serving until"):
                ready.set()
        if ready is not None:
            ready.set()

    def grow(self) -> None:
        """Appends one entry: enrols a fresh key, signed with the demo's operator key."""
        self.enrolled += 1
        with tempfile.TemporaryDirectory() as tmp:
            keyfile = Path(tmp) / "k.key"
            out = subprocess.run([str(LEDGER_BIN), "keygen", "--name", f"explorer-test-{self.enrolled}", "--out", str(keyfile)],
                                 check=True, capture_output=True, text=True).stdout
            public = _search(r"public key:\s+(\S+)", out)
            subprocess.run([str(LEDGER_BIN), "enrol", "--server", self.url, "--key", self.key,
                            "--operator-key", str(self.data_dir / "operator.key"), "--public-key", public,
                            "--identity", f"explorer-test-{self.enrolled}@explorer.test", "--role", "harness"],
                           check=True, capture_output=True, text=True, timeout=60)

    def get(self, path: str, token: Optional[str] = None) -> Any:
        req = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"} if token else {})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        # The demo leaves its fresh temporary directory behind on purpose; this one is ours.
        d = getattr(self, "data_dir", None)
        if d is not None and d.name.startswith("ledger-demo-") and d.parent == Path(tempfile.gettempdir()):
            shutil.rmtree(d, ignore_errors=True)


def _search(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    if not m:
        raise RuntimeError(f"`{pattern}` not found in:\n{text[-4000:]}")
    return m.group(1)


# --- the tamper proxy ------------------------------------------------------------------


def _flip_hex(body: bytes, at: int) -> bytes:
    c = body[at:at + 1]
    return body[:at] + (b"1" if c == b"0" else b"0") + body[at + 1:]


def _after(body: bytes, marker: bytes) -> int:
    i = body.find(marker)
    if i < 0:
        raise AssertionError(f"{marker!r} not in the answer")
    return i + len(marker)


def _is_projection(path: str) -> bool:
    return re.fullmatch(r"/v1/task-classes/[^/?]+", path.split("?")[0]) is not None


def _tamper_signature(body: bytes) -> bytes:
    # A character in the middle of the signature line's base64 (past the key hash).
    i = _after(body, "\n\u2014 ".encode()) + 40
    return body[:i] + (b"A" if body[i:i + 1] != b"A" else b"B") + body[i + 1:]


def _tamper_root(body: bytes) -> bytes:
    # The first character of the checkpoint's root line (the third line).
    i = body.index(b"\n", body.index(b"\n") + 1) + 1
    return body[:i] + (b"A" if body[i:i + 1] != b"A" else b"B") + body[i + 1:]


def _tamper_mean(body: bytes) -> bytes:
    # The first decimal of the served held-out mean: 0.5711… becomes 0.6711….
    i = _after(body, b'"held_out":{"cases":')
    i = _after(body[i:], b'"mean":0.') + i
    d = body[i:i + 1]
    return body[:i] + str((int(d) + 1) % 10).encode() + body[i + 1:]


def _json(change: Callable[[Any], None]) -> Callable[[bytes], bytes]:
    """A tampering that rewrites a JSON answer: `change` edits the parsed document in place
    (floats go back out as the shortest text of the same double)."""
    def rewrite(body: bytes) -> bytes:
        doc = json.loads(body)
        change(doc)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
    return rewrite


def _is_listing(path: str) -> bool:
    return path.startswith("/v1/entries?")


def _is_class(path: str) -> bool:
    return path.split("?")[0] == f"/v1/task-classes/{CLASS}"


def _window_doubled(doc: Any) -> None:
    # A longer window, stated consistently: every number still follows from the evidence.
    v = doc["view"]
    v["settings"]["window_seconds"] *= 2
    v["window_start_micros"] = v["now_micros"] - v["settings"]["window_seconds"] * 1_000_000


def _all_indices_zero(doc: Any) -> None:
    for e in doc["entries"]:
        e["index"] = 0


def _rule(i: int, **change: Any) -> Callable[[Any], None]:
    def edit(doc: Any) -> None:
        doc["view"]["recommendation"]["rationale"][i].update(change)
    return edit


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _disclosure_one_character_off(doc: Any) -> None:
    # One bit of the disclosed value's last character flipped: one base64url
    # character of the disclosure changes, and it still parses (naming its field).
    d = doc["disclosures"][0]
    raw = bytearray(_b64url_decode(d))
    i = len(raw) - 3  # the value's last character, before `"]`
    assert raw[-2:] == b'"]' and raw[i] not in b'#]"\\', raw
    raw[i] ^= 1
    changed = _b64url(bytes(raw))
    assert len(changed) == len(d) and sum(a != b for a, b in zip(changed, d)) == 1
    doc["disclosures"][0] = changed


def _canonical(value: Any) -> bytes:
    """Canonical JSON (docs/FORMAT.md §7) of what these tests build: sorted keys, no spaces."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _open_leaf(leaf_b64: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A served leaf (standard base64) as its record and its decoded payload."""
    record = json.loads(base64.b64decode(leaf_b64))
    return record, json.loads(base64.b64decode(record["envelope"]["payload"]))


def _seal_leaf(record: dict[str, Any], payload: dict[str, Any]) -> str:
    """The leaf (standard base64) of `record` carrying `payload` (its signature no longer verifies)."""
    record = copy.deepcopy(record)
    record["envelope"]["payload"] = base64.b64encode(_canonical(payload)).decode()
    return base64.b64encode(_canonical(record)).decode()


def _leaf_payload_changed(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
    """Rewrites an entry answer's leaf: `change` edits its payload; the stated leaf hash
    follows the new leaf (so the leaf-hash check stays green and the decoding is what fails)."""
    def edit(doc: Any) -> None:
        record, payload = _open_leaf(doc["leaf"])
        change(payload)
        doc["leaf"] = _seal_leaf(record, payload)
        doc["leaf_hash"] = hashlib.sha256(b"\x00" + base64.b64decode(doc["leaf"])).hexdigest()
    return edit


def _as_schema_2(payload: dict[str, Any]) -> None:
    # Schema 2 has no companion: a schema-2 entry holding `case_name` is malformed.
    payload["schema"] = 2


def _without_companion(payload: dict[str, Any]) -> None:
    # Schema 3 commits the case id beside its handle: a `case.added` without `case_name` is malformed.
    del payload["event"]["body"]["case_name"]


def _evidence_index_as_text(doc: Any) -> None:
    for e in (doc["view"]["evidence"][0], doc["evidence"][0]):
        e["index"] = str(e["index"])


#: What each tampering changes: (does it apply to this path?, how the answer's bytes change).
TAMPERS: dict[str, tuple[Callable[[str], bool], Callable[[bytes], bytes]]] = {
    "inclusion-step": (lambda p: p.startswith("/v1/proofs/inclusion"), lambda b: _flip_hex(b, _after(b, b'"proof":["'))),
    "consistency-step": (lambda p: p.startswith("/v1/proofs/consistency"), lambda b: _flip_hex(b, _after(b, b'"proof":["'))),
    "checkpoint-signature": (lambda p: p == "/checkpoint", _tamper_signature),
    "checkpoint-root": (lambda p: p == "/checkpoint", _tamper_root),
    "served-mean": (_is_projection, _tamper_mean),
    "evidence-step": (_is_projection, lambda b: _flip_hex(b, _after(b, b'"proof":["'))),
    "projection-root": (_is_projection, lambda b: _flip_hex(b, _after(b, b'"root":"'))),
    # JSON answers rewritten (the class page's view, the entry listings, a search answer).
    "settings-window": (_is_class, _json(_window_doubled)),
    "settings-resamples": (_is_class, _json(lambda d: d["view"]["settings"].update(resamples=10**12))),
    "window-start": (_is_class, _json(lambda d: d["view"].update(window_start_micros=d["view"]["window_start_micros"] - 86_400_000_000))),
    "window-start-missing": (_is_class, _json(lambda d: d["view"].pop("window_start_micros"))),
    "rules-missing": (_is_class, _json(lambda d: d["view"]["recommendation"]["rationale"].pop(0))),
    "rule-detail": (_is_class, _json(_rule(2, detail="lower 95% bound: fine"))),
    "rule-outcome": (_is_class, _json(_rule(1, holds=False))),
    "evidence-index-text": (_is_class, _json(_evidence_index_as_text)),
    "listing-stuck": (_is_listing, _json(_all_indices_zero)),
    "listing-gap": (_is_listing, _json(lambda d: d["entries"].pop(2))),
    "search-index-text": (lambda p: p.startswith("/v1/entries/by-id/"), _json(lambda d: d.update(index=str(d["index"])))),
    "disclosure-character": (lambda p: p == f"/v1/entries/{COMMITTED_ENTRY}", _json(_disclosure_one_character_off)),
    # The entry's leaf rewritten (and its leaf hash with it): a payload out of its schema's form.
    "leaf-schema-2-companion": (lambda p: p == f"/v1/entries/{COMMITTED_ENTRY}", _json(_leaf_payload_changed(_as_schema_2))),
    "leaf-schema-3-no-companion": (lambda p: p == f"/v1/entries/{COMMITTED_ENTRY}", _json(_leaf_payload_changed(_without_companion))),
}

#: Answers taken from another path: (does it apply to this path?, the path asked upstream instead).
REROUTES: dict[str, tuple[Callable[[str], bool], Callable[[str], str]]] = {
    "other-class": (_is_class, lambda p: "/v1/task-classes/dependency-bump"),
}

#: Paths not answered at all (the connection is held longer than a page may take).
STALLS: dict[str, Callable[[str], bool]] = {
    "stall-inclusion": lambda p: p.startswith("/v1/proofs/inclusion"),
}
STALL_SECONDS = WAIT + 10

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length", "host", "accept-encoding"}


class Proxy:
    """Forwards every request to the server unchanged, unless `tamper` names
    one of TAMPERS (the matching answers get that change), REROUTES (they
    are another path's answers) or STALLS (they never come).
    Records the Authorization headers it saw. With EXPLORER_ASSETS_DIR set,
    serves /explorer/* from that directory (development only)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removeprefix("http://")
        self.tamper: Optional[str] = None
        self.tampered = 0
        self.authorizations: list[tuple[str, str]] = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self)

            def do_HEAD(self) -> None:
                proxy.handle(self)

            def do_POST(self) -> None:
                proxy.handle(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, req: http.server.BaseHTTPRequestHandler) -> None:
        path = req.path
        auth = req.headers.get("Authorization")
        if auth:
            self.authorizations.append((path, auth))
        if ASSETS_DIR and (path == "/explorer" or path.startswith("/explorer/")):
            return self._serve_asset(req, path)
        length = int(req.headers.get("Content-Length") or 0)
        body = req.rfile.read(length) if length else None
        headers = {k: v for k, v in req.headers.items() if k.lower() not in HOP_BY_HOP}
        stall = STALLS.get(self.tamper or "")
        if stall is not None and stall(path):
            self.tampered += 1
            time.sleep(STALL_SECONDS)  # the browser must give up first
            req.close_connection = True
            return
        upstream_path = path
        reroute = REROUTES.get(self.tamper or "")
        if reroute is not None and reroute[0](path):
            upstream_path = reroute[1](path)
            self.tampered += 1
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            conn.request(req.command, upstream_path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            status, resp_headers = resp.status, resp.getheaders()
        finally:
            conn.close()
        t = TAMPERS.get(self.tamper or "")
        if t is not None and status == 200 and t[0](path):
            data = t[1](data)
            self.tampered += 1
        self._reply(req, status, [(k, v) for k, v in resp_headers if k.lower() not in HOP_BY_HOP], data)

    def _serve_asset(self, req: http.server.BaseHTTPRequestHandler, path: str) -> None:
        # What the server's route must do (README.md beside the explorer says it too).
        name = path.split("?")[0].removeprefix("/explorer").lstrip("/") or "index.html"
        if path.split("?")[0] == "/explorer":
            return self._reply(req, 308, [("Location", "/explorer/")], b"")
        if name not in ASSETS:
            return self._reply(req, 404, [("Content-Type", "application/problem+json")], b'{"code":"not_found"}')
        data = (Path(ASSETS_DIR) / name).read_bytes()  # type: ignore[arg-type]
        self._reply(req, 200, [("Content-Type", ASSETS[name]), ("Content-Security-Policy", CSP),
                               ("X-Content-Type-Options", "nosniff"), ("Cache-Control", "no-cache")], data)

    @staticmethod
    def _reply(req: http.server.BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        req.send_response(status)
        for k, v in headers:
            req.send_header(k, v)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(data)


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    d = Demo()
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture(scope="module")
def proxy(demo: Demo) -> Iterator[Proxy]:
    p = Proxy(demo.url)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture(scope="module")
def served(proxy: Proxy) -> None:
    """The explorer's page is served at /explorer/ (by the binary unless EXPLORER_ASSETS_DIR):
    without it every browser test would only time out."""
    try:
        with urllib.request.urlopen(f"{proxy.url}/explorer/", timeout=30) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    if status != 200:
        detail = str(status)
        pytest.fail(f"GET /explorer/ answered {detail}: {LEDGER_BIN} does not serve the explorer "
                    "(api/explorer/README.md, 'Serving it'); EXPLORER_ASSETS_DIR=api/explorer serves it from the proxy")


@pytest.fixture()
def tamper(proxy: Proxy) -> Iterator[Callable[[str], None]]:
    def set_(kind: str) -> None:
        proxy.tamper = kind
        proxy.tampered = 0

    try:
        yield set_
    finally:
        proxy.tamper = None


@pytest.fixture(scope="module")
def browser(served: None) -> Iterator[WebDriver]:
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,1700", "--disable-extensions", "--no-first-run"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_script_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def pinned(browser: WebDriver, proxy: Proxy, demo: Demo) -> str:
    """Pins the demo's verifier key through the settings page."""
    open_page(browser, proxy, "/settings")
    area = browser.find_element(By.ID, "key-input")
    area.clear()
    area.send_keys(demo.key)
    browser.find_element(By.ID, "key-pin").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.find_element(By.ID, "key-message").get_attribute("data-status") == "ok")
    assert browser.execute_script("return localStorage.getItem('evidence-ledger.key')") == demo.key
    return demo.key


# --- helpers -----------------------------------------------------------------------------------


#: What the browser logged: a policy violation or an uncaught error fails the test at its end.
CONSOLE: list[str] = []


def browser_log(driver: WebDriver) -> list[str]:
    """The browser's console messages since the last call."""
    entries: list[dict[str, Any]] = driver.get_log("browser")  # type: ignore[no-untyped-call]
    return [str(e.get("message", "")) for e in entries]


def open_page(driver: WebDriver, proxy: Proxy, route: str) -> str:
    """Loads the explorer afresh at `#route` and waits until every check on the page
    has finished; returns the page's status (ok, fail or none)."""
    CONSOLE.extend(browser_log(driver))
    driver.get("about:blank")
    driver.get(f"{proxy.url}/explorer/#{route}")
    WebDriverWait(driver, WAIT).until(lambda d: d.find_element(By.ID, "page").get_attribute("data-status") != "pending")
    return str(driver.find_element(By.ID, "page").get_attribute("data-status"))


def status(driver: WebDriver, id_: str) -> str:
    return str(driver.find_element(By.ID, id_).get_attribute("data-status"))


def message(driver: WebDriver, id_: str) -> str:
    return driver.find_element(By.ID, id_).text


def checks(driver: WebDriver) -> dict[str, str]:
    return {str(e.get_attribute("id")): str(e.get_attribute("data-status")) for e in driver.find_elements(By.CSS_SELECTOR, ".check")}


def assert_all_green(driver: WebDriver, expect: list[str]) -> None:
    found = checks(driver)
    for id_ in expect:
        assert id_ in found, f"no #{id_} on the page ({sorted(found)})"
    bad = {k: v for k, v in found.items() if v != "ok"}
    assert not bad, {k: message(driver, k) for k in bad}
    assert driver.find_element(By.ID, "alarm").get_attribute("hidden") is not None
    assert status(driver, "page") == "ok"


def assert_checks(driver: WebDriver, ok: list[str], none: list[str]) -> None:
    """`ok` checks green, `none` checks "not checked", nothing else on the page, no alarm."""
    found = checks(driver)
    for id_ in ok + none:
        assert id_ in found, f"no #{id_} on the page ({sorted(found)})"
    want = {**{k: "ok" for k in found}, **{k: "none" for k in none}}
    bad = {k: (v, message(driver, k)) for k, v in found.items() if v != want[k]}
    assert not bad, bad
    assert driver.find_element(By.ID, "alarm").get_attribute("hidden") is not None


def assert_red(driver: WebDriver, id_: str, *needles: str) -> None:
    assert status(driver, id_) == "fail", f"#{id_} is {status(driver, id_)}: {message(driver, id_)}"
    text = message(driver, id_)
    for n in needles:
        assert n in text, f"#{id_} says {text!r}, which does not name {n!r}"
    alarm = driver.find_element(By.ID, "alarm")
    assert alarm.get_attribute("hidden") is None and status(driver, "alarm") == "fail"
    assert any(n in alarm.text for n in needles), alarm.text
    assert status(driver, "page") == "fail"


def screenshot(driver: WebDriver, name: str, full: bool = True) -> Path:
    """Saves the page (the whole of it, or with `full=False` its top, about 1280×1400 pixels)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 6000)") if full else 1540
    driver.set_window_size(1280, max(900, int(height) + 40) if full else height)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1700)
    return path


def head_size(driver: WebDriver) -> int:
    return int(driver.find_element(By.ID, "head-size").text)


# --- the assets ----------------------------------------------------------------------------------


def test_every_asset_is_served_with_its_type_and_the_policy(proxy: Proxy, served: None) -> None:
    for name, ctype in {"": ASSETS["index.html"], **ASSETS}.items():
        with urllib.request.urlopen(f"{proxy.url}/explorer/{name}", timeout=30) as r:
            assert r.status == 200, name
            assert r.headers["Content-Type"] == ctype, (name, r.headers["Content-Type"])
            assert r.headers["Content-Security-Policy"] == CSP, name
            assert r.headers["X-Content-Type-Options"] == "nosniff", name
            body = r.read()
        if name in ("", "index.html"):
            assert body == (EXPLORER / "index.html").read_bytes(), "the served index.html is not api/explorer/index.html"
        else:
            assert body == (EXPLORER / name).read_bytes(), f"the served {name} is not api/explorer/{name}"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"{proxy.url}/explorer/no-such-file.js", timeout=30)
    assert e.value.code == 404
    # The assets are named relative to /explorer/: /explorer redirects there.
    with urllib.request.urlopen(f"{proxy.url}/explorer", timeout=30) as r:
        assert r.geturl() == f"{proxy.url}/explorer/"
        assert r.read() == (EXPLORER / "index.html").read_bytes()


def test_modules_in_the_browser(browser: WebDriver, proxy: Proxy) -> None:
    """BLAKE3 against the official vectors' inputs, RFC 6962 and the format
    vectors, the signed-note vectors with WebCrypto Ed25519, and the statistics
    bit for bit against the Python client's."""
    open_page(browser, proxy, "/settings")
    vectors = json.loads((HERE / "selftest_vectors.json").read_text(encoding="utf-8"))
    rfc = json.loads((REPO / "ledger/testdata/rfc6962_vectors.json").read_text(encoding="utf-8"))
    fmt = json.loads((REPO / "ledger/testdata/format_vectors.json").read_text(encoding="utf-8"))
    result = browser.execute_async_script(
        """
        const [vectors, rfc, fmt, done] = arguments;
        (async () => {
          const b3 = await import('./blake3.js');
          const m = await import('./merkle.js');
          const n = await import('./note.js');
          const s = await import('./stats.js');
          const out = {blake3: [], rfc: [], format: [], note: [], stats: []};
          const hex = (h) => Uint8Array.from(h.match(/../g) ?? [], (x) => parseInt(x, 16));
          for (const v of vectors.blake3) {
            const input = new Uint8Array(v.input_len).map((_, i) => i % 251);
            const got = m.toHex(b3.blake3(input, 131));
            if (got !== v.hash) out.blake3.push(`length ${v.input_len}: ${got}`);
          }
          const hashes = [];
          for (const l of rfc.leaves_hex) hashes.push(await m.leafHash(hex(l)));
          const roots = [];
          for (let k = 0; k <= hashes.length; k++) roots.push(await m.rootOf(hashes.slice(0, k)));
          roots.forEach((r, k) => { if (m.toHex(r) !== rfc.roots_by_size[k]) out.rfc.push(`root of ${k}`); });
          for (const c of rfc.inclusion) {
            try { await m.verifyInclusion(c.index, c.size, hashes[c.index], c.proof.map(hex), roots[c.size]); }
            catch (e) { out.rfc.push(`inclusion ${c.index}/${c.size}: ${e.message}`); }
            for (let j = 0; j < c.proof.length; j++) {
              const bad = c.proof.map(hex); bad[j][0] ^= 1;
              try { await m.verifyInclusion(c.index, c.size, hashes[c.index], bad, roots[c.size]); out.rfc.push(`accepted a flipped inclusion step ${j}`); } catch {}
            }
          }
          for (const c of rfc.consistency) {
            try { await m.verifyConsistency(c.old, roots[c.old], c.new, roots[c.new], c.proof.map(hex)); }
            catch (e) { out.rfc.push(`consistency ${c.old}->${c.new}: ${e.message}`); }
            for (let j = 0; j < c.proof.length; j++) {
              const bad = c.proof.map(hex); bad[j][0] ^= 1;
              try { await m.verifyConsistency(c.old, roots[c.old], c.new, roots[c.new], bad); out.rfc.push(`accepted a flipped consistency step ${j}`); } catch {}
            }
          }
          let chain = new Uint8Array(32); const hs = [];
          for (const e of fmt.entries) {
            const leaf = hex(e.leaf_hex); const lh = await m.leafHash(leaf); hs.push(lh);
            chain = await m.chainHash(chain, leaf);
            if (m.toHex(lh) !== e.leaf_hash) out.format.push(`leaf hash ${e.index}`);
            if (m.toHex(b3.blake3(leaf)) !== e.content_digest_blake3) out.format.push(`blake3 ${e.index}`);
            if (m.toHex(chain) !== e.chain_hash) out.format.push(`chain ${e.index}`);
            if (m.toHex(await m.rootOf(hs)) !== e.root_after) out.format.push(`root ${e.index}`);
          }
          const key = await n.parseVerifierKey(fmt.log_key.verifier_key);
          const cp = await n.openCheckpoint(fmt.checkpoint.note, key);
          if (cp.size !== fmt.checkpoint.size || cp.rootHex !== fmt.checkpoint.root_hex) out.note.push('checkpoint');
          for (const [what, note] of [['flipped signature', fmt.checkpoint.note.replace('Kp3rcnD2', 'Kp3rcnD3')],
                                      ['attestation as a checkpoint', fmt.bundle_attestation.note]]) {
            try { await n.openCheckpoint(note, key); out.note.push(`accepted ${what}`); } catch {}
          }
          const settings = vectors.settings;
          for (const c of vectors.stats) {
            const seed = s.bootstrapSeed(c.name);
            const seedText = ((BigInt(seed[0]) << 32n) | BigInt(seed[1])).toString();
            if (seedText !== c.seed) out.stats.push(`${c.name}: seed ${seedText}`);
            const got = s.scoreStats(c.data, c.passed, settings, seed);
            for (const r of s.compareStats(c.expected, got)) {
              if (r.status !== 'ok' || r.note !== 'bit for bit') out.stats.push(`${c.name} ${r.field}: ${r.recomputed} vs ${r.served}`);
            }
          }
          return out;
        })().then(done, (e) => done({error: String(e && e.stack || e)}));
        """,
        vectors, rfc, fmt)
    assert "error" not in result, result
    assert result == {"blake3": [], "rfc": [], "format": [], "note": [], "stats": []}


# --- the pages, honest server --------------------------------------------------------------------


def test_without_a_pinned_key_nothing_is_verified(browser: WebDriver, proxy: Proxy) -> None:
    open_page(browser, proxy, "/settings")
    browser.execute_script("localStorage.clear()")
    assert open_page(browser, proxy, "/") == "none"
    assert status(browser, "key-banner") == "none"
    assert "Nothing on these pages is verified" in message(browser, "key-banner")
    for id_ in ("check-head-signature", "check-head-consistency", "check-head-age"):
        assert status(browser, id_) == "none", id_
    assert "no verifier key" in message(browser, "check-head-signature")
    open_page(browser, proxy, f"/classes/{CLASS}")
    assert {v for k, v in checks(browser).items()} == {"none"}
    screenshot(browser, "no-key")


def test_without_a_pinned_key_entries_are_only_as_served(browser: WebDriver, proxy: Proxy) -> None:
    """Item 5: leaf hash, decoding, chain, search and the list agree with each other, which
    proves nothing without a verified head: "not checked", never "verified"."""
    open_page(browser, proxy, "/settings")
    browser.execute_script("localStorage.clear()")
    assert open_page(browser, proxy, "/entries/17") == "none"
    for id_ in ENTRY_CHECKS:
        assert status(browser, id_) == "none", (id_, message(browser, id_))
        assert "no verifier key is pinned" in message(browser, id_), id_
    assert open_page(browser, proxy, "/find/genesis-ledger-key") == "none"
    assert status(browser, "check-search") == "none"
    assert open_page(browser, proxy, "/entries?start=0") == "none"
    assert status(browser, "check-list") == "none"
    assert "no verifier key is pinned" in message(browser, "check-list")
    assert {r.get_attribute("data-status") for r in browser.find_elements(By.CSS_SELECTOR, "#entries-table tbody tr")} == {"none"}


def test_head_page_verifies_the_signature_then_consistency(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    open_page(browser, proxy, "/settings")
    browser.find_element(By.ID, "trusted-forget").click()
    # First visit: signed, and trusted on first use (nothing to be consistent with).
    assert open_page(browser, proxy, "/") == "none"
    assert status(browser, "check-head-signature") == "ok"
    assert pinned in message(browser, "check-head-signature")
    assert status(browser, "check-head-consistency") == "none"
    assert "trust on first use" in message(browser, "check-head-consistency")
    assert status(browser, "check-head-age") == "ok"
    first = head_size(browser)
    assert first <= demo.get("/v1/log")["tree_size"]
    # The log grows; the next visit proves the new head extends the trusted one.
    demo.grow()
    assert open_page(browser, proxy, "/") == "ok"
    assert_all_green(browser, ["check-head-signature", "check-head-consistency", "check-head-age"])
    second = head_size(browser)
    assert second > first
    assert f"from the head this browser trusted (size {first}) to size {second}" in message(browser, "check-head-consistency")
    assert len(browser.find_element(By.ID, "head-detail-root").text) == 64
    screenshot(browser, "head")


def test_entry_list(browser: WebDriver, proxy: Proxy, pinned: str) -> None:
    assert open_page(browser, proxy, "/entries?start=0") == "ok"
    assert_all_green(browser, ["check-head-signature", "check-head-consistency", "check-list"])
    rows = browser.find_elements(By.CSS_SELECTOR, "#entries-table tbody tr")
    assert len(rows) == 50
    assert all(r.get_attribute("data-status") == "ok" for r in rows)
    assert "genesis-operator" in browser.find_element(By.ID, "entry-row-0").text
    screenshot(browser, "entries")
    # The default page is the newest entries.
    assert open_page(browser, proxy, "/entries") == "ok"
    assert browser.find_element(By.ID, f"entry-row-{head_size(browser) - 1}")


ENTRY_CHECKS = ["check-leaf-hash", "check-decoded", "check-inclusion", "check-signature", "check-chain"]


def test_entry_page(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    assert open_page(browser, proxy, "/entries/17") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)
    served = demo.get("/v1/entries/17")
    assert browser.find_element(By.ID, "entry-id").text == served["id"]
    assert browser.find_element(By.ID, "entry-kind").text == served["kind"] == "case.added"
    assert "curator" in browser.find_element(By.ID, "entry-role").text
    assert "inclusion proof" in message(browser, "check-inclusion") and "entry 17" in message(browser, "check-inclusion")
    screenshot(browser, "entry")
    # Entry 0 (the genesis: chain from zeros, signed by the key it enrols) and a score.
    assert open_page(browser, proxy, "/entries/0") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)
    assert "genesis value" in message(browser, "check-chain")
    assert open_page(browser, proxy, "/entries/60") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)


def test_search_by_index_envelope_id_and_leaf_hash(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    open_page(browser, proxy, "/")
    box = browser.find_element(By.ID, "search-input")
    box.send_keys("17")
    browser.find_element(By.ID, "search-button").click()
    WebDriverWait(browser, WAIT).until(lambda d: d.current_url.endswith("#/entries/17") and status(d, "page") != "pending")
    assert_all_green(browser, ENTRY_CHECKS)

    assert open_page(browser, proxy, "/find/genesis-ledger-key") == "ok"
    assert_all_green(browser, ENTRY_CHECKS + ["check-search"])
    assert browser.find_element(By.ID, "entry-id").text == "genesis-ledger-key"
    screenshot(browser, "search-envelope-id")

    lh = demo.get("/v1/entries/42")["leaf_hash"]
    assert open_page(browser, proxy, f"/find/{lh}") == "ok"
    assert_all_green(browser, ENTRY_CHECKS + ["check-search"])
    assert browser.find_element(By.ID, "entry-leaf-hash").text == lh
    assert browser.find_element(By.CSS_SELECTOR, "h1").text.startswith("Entry 42")
    screenshot(browser, "search-leaf-hash")

    assert open_page(browser, proxy, "/find/no-such-envelope") in ("ok", "none")
    assert browser.find_element(By.ID, "find-none")


CLASS_CHECKS = ["check-projection-signature", "check-projection-head", "check-evidence", "check-stats", "check-rules", "check-plot"]


def test_task_class_pages(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    assert open_page(browser, proxy, "/classes") == "ok"
    names = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#classes-table tbody td:first-child")]
    assert CLASS in names and len(names) == 3
    for name in names:
        # The rules rest on thresholds and counts this page cannot prove: "not checked", so the page is too.
        assert open_page(browser, proxy, f"/classes/{name}") == "none", name
        assert_checks(browser, [c for c in CLASS_CHECKS if c != "check-rules"], ["check-rules"])
        assert "Not verified: the thresholds" in message(browser, "check-rules")
        view = demo.get(f"/v1/task-classes/{name}")["view"]
        assert browser.find_element(By.ID, "class-tier").text == view["tier"]
        assert browser.find_element(By.ID, "class-recommended").text == view["recommendation"]["recommended_tier"]
        evidence = browser.find_elements(By.CSS_SELECTOR, "#evidence-table tbody tr")
        assert len(evidence) == view["held_out"]["cases"] > 0
        assert all(r.get_attribute("data-status") == "ok" for r in evidence)
        stats = browser.find_elements(By.CSS_SELECTOR, "#stats-table tbody tr")
        assert len(stats) == 8 and all(r.get_attribute("data-status") == "ok" for r in stats)
        assert "bit for bit" in message(browser, "check-stats")
        assert browser.find_elements(By.CSS_SELECTOR, "#plot-mean svg circle")
        assert browser.find_elements(By.CSS_SELECTOR, "#plot-pass-rate svg polygon")
        rules = browser.find_elements(By.CSS_SELECTOR, "#rules-table tbody tr")
        assert [r.get_attribute("data-holds") == "true" for r in rules] == [o["holds"] for o in view["recommendation"]["rationale"]]
    # The flaky class: a rule fails (its lower bound is below silver's), which is the ledger's
    # decision, not a verification failure: nothing turns red.
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "none"
    assert_checks(browser, [c for c in CLASS_CHECKS if c != "check-rules"], ["check-rules"])
    assert browser.find_element(By.ID, "rule-2").get_attribute("data-holds") == "false"
    assert "bound recomputed" in browser.find_element(By.ID, "rule-check-2").text
    assert status(browser, "rule-check-2") == "ok"
    # Only the bound and the scored-case count are recomputed; the other rules are as served.
    assert status(browser, "rule-check-0") == status(browser, "rule-check-3") == "none"
    assert "bound recomputed" not in browser.find_element(By.ID, "rules-table").text.replace(
        browser.find_element(By.ID, "rule-check-2").text, "")
    assert all(m.get_attribute("data-status") == "ok" for m in browser.find_elements(By.CSS_SELECTOR, ".stat-mark"))
    screenshot(browser, "task-class")
    top = screenshot(browser, "task-class-top", full=False)
    # The README's picture is replaced only when asked for.
    if os.environ.get("UPDATE_README_SCREENSHOT") == "1":
        shutil.copyfile(top, REPO / "docs/explorer.png")


def test_read_token_is_sent(browser: WebDriver, proxy: Proxy, pinned: str) -> None:
    open_page(browser, proxy, "/settings")
    browser.find_element(By.ID, "token-input").send_keys("explorer-test-token")
    browser.find_element(By.ID, "token-save").click()
    proxy.authorizations.clear()
    try:
        assert open_page(browser, proxy, "/entries/5") == "ok"
        seen = {p.split("?")[0] for p, a in proxy.authorizations if a == "Bearer explorer-test-token"}
        assert {"/checkpoint", "/v1/entries/5", "/v1/proofs/inclusion"} <= seen, seen
    finally:
        open_page(browser, proxy, "/settings")
        browser.find_element(By.ID, "token-clear").click()
    proxy.authorizations.clear()
    open_page(browser, proxy, "/entries/5")
    assert not proxy.authorizations


# --- committed fields and their disclosures (docs/PRIVACY.md) --------------------------------------


@pytest.fixture()
def auditor(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> Iterator[str]:
    """The demo's auditor token, set as the explorer's token (cleared afterwards)."""
    open_page(browser, proxy, "/settings")
    box = browser.find_element(By.ID, "token-input")
    box.clear()
    box.send_keys(demo.auditor_token)
    browser.find_element(By.ID, "token-save").click()
    try:
        yield demo.auditor_token
    finally:
        open_page(browser, proxy, "/settings")
        browser.find_element(By.ID, "token-clear").click()


def disclosed_values(demo: Demo, index: int) -> dict[str, str]:
    """The values the auditor is served for entry `index`, by field (decoded here, unchecked)."""
    out = {}
    for d in demo.get(f"/v1/entries/{index}", demo.auditor_token)["disclosures"]:
        _, field, value = json.loads(_b64url_decode(d))
        out[field] = value
    return out


def test_committed_fields_show_their_digests_to_a_reader_without_a_role(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    assert open_page(browser, proxy, f"/entries/{COMMITTED_ENTRY}") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)
    assert not browser.find_elements(By.ID, "check-disclosures")
    body = demo.get(f"/v1/entries/{COMMITTED_ENTRY}")["payload"]["event"]["body"]
    assert "disclosures" not in demo.get(f"/v1/entries/{COMMITTED_ENTRY}")
    for path in CASE_FIELDS:
        row = browser.find_element(By.ID, f"committed-{path}")
        sd = body["provenance"]["source_ref"] if path == "provenance.source_ref" else body[path]
        assert sd["_sd"] in row.text and "committed" in row.text, row.text
        assert row.get_attribute("data-status") == "none"
    text = browser.find_element(By.ID, "main").text
    for value in disclosed_values(demo, COMMITTED_ENTRY).values():
        assert value not in text, value
    screenshot(browser, "entry-committed")


def test_the_auditor_sees_the_disclosed_values_checked_against_the_leaf(browser: WebDriver, proxy: Proxy, demo: Demo, auditor: str) -> None:
    score = demo.get(f"/v1/task-classes/{CLASS}")["evidence"][0]["index"]
    for index, fields in ((COMMITTED_ENTRY, CASE_FIELDS), (score, ["operator_fingerprint"])):
        assert open_page(browser, proxy, f"/entries/{index}") == "ok"
        assert_all_green(browser, ENTRY_CHECKS + ["check-disclosures"])
        assert f"{len(fields)} of {len(fields)} committed fields disclosed" in message(browser, "check-disclosures")
        values = disclosed_values(demo, index)
        assert sorted(values) == sorted(fields)
        for path in fields:
            assert status(browser, f"committed-{path}") == "ok"
            assert browser.find_element(By.ID, f"committed-value-{path}").text == values[path]
    screenshot(browser, "entry-disclosed")
    # The token went with the requests: the disclosures are the auditor's alone.
    assert any(a == f"Bearer {auditor}" for _, a in proxy.authorizations)


# --- handles (schema 3, docs/PRIVACY.md "Handles (schema 3)") ----------------------------------------


def test_a_schema_3_case_shows_its_handle_and_its_companion_committed(browser: WebDriver, proxy: Proxy, demo: Demo, pinned: str) -> None:
    """A case added as `ledger demo` writes it (schema 3): every check green, `case_id` is the
    handle derived from the commitment in `case_name`, and `case_name` is a committed field
    like the others, its value hidden from a reader without a role."""
    served = demo.get(f"/v1/entries/{COMMITTED_ENTRY}")
    assert served["payload"]["schema"] == 3 and served["kind"] == "case.added"
    body = served["payload"]["event"]["body"]
    assert body["case_id"] == body["case_name"]["_sd"] and len(body["case_id"]) == 43
    assert open_page(browser, proxy, f"/entries/{COMMITTED_ENTRY}") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)
    handle = browser.find_element(By.ID, "entry-handle")
    assert handle.get_attribute("data-derived") == "true"
    assert body["case_id"] in handle.text and "derived here" in handle.text and "case_name" in handle.text
    rows = [r.get_attribute("id") for r in browser.find_elements(By.CSS_SELECTOR, "#committed-table tbody tr")]
    assert rows == [f"committed-{p}" for p in CASE_FIELDS], rows  # the companion last
    row = browser.find_element(By.ID, "committed-case_name")
    assert body["case_id"] in row.text and row.get_attribute("data-status") == "none"
    assert browser.find_element(By.ID, "committed-value-case_name").text == "committed"
    assert disclosed_values(demo, COMMITTED_ENTRY)["case_name"] not in browser.find_element(By.ID, "main").text
    # An enrolment names its identity by a handle the same way.
    enrolment = demo.get(f"/v1/entries/{ENROLMENT_ENTRY}")["payload"]
    assert enrolment["schema"] == 3 and enrolment["event"]["kind"] == "principal.enrolled"
    assert open_page(browser, proxy, f"/entries/{ENROLMENT_ENTRY}") == "ok"
    assert_all_green(browser, ENTRY_CHECKS)
    assert browser.find_element(By.ID, "entry-handle").get_attribute("data-derived") == "true"
    assert [r.get_attribute("id") for r in browser.find_elements(By.CSS_SELECTOR, "#committed-table tbody tr")] == ["committed-identity_name"]
    screenshot(browser, "entry-handle")


def test_the_auditor_sees_the_value_behind_a_handle(browser: WebDriver, proxy: Proxy, demo: Demo, auditor: str) -> None:
    """To a reader with a role the companion is disclosed like any committed field, last."""
    for index, path in ((COMMITTED_ENTRY, "case_name"), (ENROLMENT_ENTRY, "identity_name")):
        served = demo.get(f"/v1/entries/{index}", auditor)
        _, field, value = json.loads(_b64url_decode(served["disclosures"][-1]))
        assert field == path
        assert open_page(browser, proxy, f"/entries/{index}") == "ok"
        assert_all_green(browser, ENTRY_CHECKS + ["check-disclosures"])
        assert status(browser, f"committed-{path}") == "ok"
        assert browser.find_element(By.ID, f"committed-value-{path}").text == value


def test_a_schema_2_entry_holding_a_companion_does_not_decode(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("leaf-schema-2-companion")
    assert open_page(browser, proxy, f"/entries/{COMMITTED_ENTRY}") == "fail"
    assert proxy.tampered > 0
    assert status(browser, "check-leaf-hash") == "ok"
    assert_red(browser, "check-decoded", f"entry {COMMITTED_ENTRY}", "schema 2 has no field event.body.case_name")
    screenshot(browser, "tampered-schema-2-companion")


def test_a_schema_3_case_without_its_companion_does_not_decode(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("leaf-schema-3-no-companion")
    assert open_page(browser, proxy, f"/entries/{COMMITTED_ENTRY}") == "fail"
    assert proxy.tampered > 0
    assert status(browser, "check-leaf-hash") == "ok"
    assert_red(browser, "check-decoded", f"entry {COMMITTED_ENTRY}", "event.body.case_name", "does not hold it")


def _digest_of(text: str) -> str:
    return _b64url(hashlib.sha256(text.encode()).digest())


def _form_cases(demo: Demo) -> list[dict[str, Any]]:
    """Payloads in and out of their schema's form (`events::disclose::check_form`), as leaves:
    {name, leaf, expect (None: it decodes; else what the failure must name), derived}."""
    cases: list[dict[str, Any]] = []
    record, case = _open_leaf(demo.get(f"/v1/entries/{COMMITTED_ENTRY}")["leaf"])
    enrolment_record, enrolment = _open_leaf(demo.get(f"/v1/entries/{ENROLMENT_ENTRY}")["leaf"])
    d = [_digest_of(f"d{i}") for i in range(8)]
    # The two kinds the demo does not write, shaped as the ledger would (only the fields the form rule reads matter here).
    proposal = copy.deepcopy(case)
    proposal["event"] = {"kind": "case.proposed", "body": {
        "task_class": "flaky-test-quarantine", "production_ref": {"_sd": d[0]},
        "draft": {"case_id": d[1], "case_name": {"_sd": d[1]}, "title": {"_sd": d[2]},
                  "disposition": {"_sd": d[3]}, "difficulty": {"_sd": d[4]}}}}
    capability = copy.deepcopy(case)
    capability["event"] = {"kind": "rag.capability.minted", "body": {
        "workflow_id": d[5], "workflow_name": {"_sd": d[5]}}}

    def add(name: str, payload: dict[str, Any], expect: Optional[list[str]], derived: Optional[bool] = None) -> None:
        own = enrolment_record if payload["event"]["kind"] == "principal.enrolled" else record  # the key id must be the signer
        cases.append({"name": name, "leaf": _seal_leaf(own, payload), "expect": expect, "derived": derived})

    def changed(payload: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        out = copy.deepcopy(payload)
        edit(out)
        return out

    # (kind, payload, identifier, companion, its first committed field)
    for kind, payload, handle, name, first in (("case.added", case, "case_id", "case_name", "title"),
                                               ("principal.enrolled", enrolment, "identity", "identity_name", "identity_name"),
                                               ("case.proposed", proposal, "draft.case_id", "draft.case_name", "draft.title"),
                                               ("rag.capability.minted", capability, "workflow_id", "workflow_name", "workflow_name")):
        def at(p: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
            body = p["event"]["body"]
            *parents, last = path.split(".")
            for k in parents:
                body = body[k]
            return body, last

        def drop(p: dict[str, Any], path: str = name) -> None:
            o, k = at(p, path)
            del o[k]

        def put(p: dict[str, Any], path: str, value: Any) -> None:
            o, k = at(p, path)
            o[k] = value

        field = f"event.body.{name}"
        assert payload["event"]["kind"] == kind
        add(f"{kind}: schema 3 as the ledger writes it", payload, None, True)
        add(f"{kind}: schema 3, an earlier handle beside a fresh commitment",
            changed(payload, lambda p: put(p, handle, d[6])), None, False)
        add(f"{kind}: schema 3 without its companion", changed(payload, drop), [field, "does not hold it"])
        add(f"{kind}: schema 3, the companion in clear",
            changed(payload, lambda p: put(p, name, "GHSA-2026-clear")), [field, "the value in clear"])
        add(f"{kind}: schema 3, the companion null (absent or a commitment, never null)",
            changed(payload, lambda p: put(p, name, None)), [field, "no commitment"])
        add(f"{kind}: schema 2 holding the companion", changed(payload, lambda p: p.update(schema=2)),
            ["schema 2 has no field " + field])
        add(f"{kind}: schema 2, the identifier in clear and no companion",
            changed(payload, lambda p: (p.update(schema=2), drop(p), put(p, handle, "GHSA-2026-clear"))), None, False)
        add(f"{kind}: schema 1 holding commitments", changed(payload, lambda p: p.update(schema=1)),
            [f"schema 1 holds event.body.{first} in clear"])
    # Schema 1 with every value in clear and a companion in clear: still a field schema 1 does not have.
    clear = copy.deepcopy(case)
    clear["schema"] = 1
    body = clear["event"]["body"]
    for k in ("title", "disposition", "difficulty"):
        body[k] = "positive" if k == "disposition" else "clear"
    body["provenance"]["source_ref"] = "clear"
    body["case_id"] = body["case_name"] = "GHSA-2026-clear"
    add("case.added: schema 1 in clear with a companion in clear", clear, ["schema 1 has no field event.body.case_name"])
    del body["case_name"]
    add("case.added: schema 1 in clear, no companion", clear, None, False)
    return cases


def test_schema_forms_in_the_browser(browser: WebDriver, proxy: Proxy, demo: Demo) -> None:
    """`decodeLeaf` holds each payload to its schema's form as `check_form` does: schema 3 holds
    the companion of an identifier that names a value first (case.added, case.proposed,
    principal.enrolled, rag.capability.minted), committed, and listed last among the committed
    fields; schemas 1 and 2 hold none; a failure names the field. Whether the handle is derived
    is noted, not required (an earlier handle is a replay's to check)."""
    open_page(browser, proxy, "/settings")
    cases = _form_cases(demo)
    result = browser.execute_async_script(
        """
        const [cases, done] = arguments;
        (async () => {
          const env = await import('./envelope.js');
          const m = await import('./merkle.js');
          const out = [];
          for (const c of cases) {
            try {
              const d = env.decodeLeaf(m.b64decode('leaf', c.leaf), 'leaf');
              const hf = env.handleField(d.kind, d.body);
              const paths = env.commitments(d.kind, d.body).map((x) => x.path);
              out.push({name: c.name, error: null, derived: hf ? hf.derived : null, last: paths[paths.length - 1] ?? null});
            } catch (e) {
              out.push({name: c.name, error: String(e.message), derived: null, last: null});
            }
          }
          return out;
        })().then(done, (e) => done([{name: 'uncaught', error: String(e && e.stack || e)}]));
        """,
        cases)
    assert len(result) == len(cases), result
    for c, r in zip(cases, result):
        assert r["name"] == c["name"]
        if c["expect"] is None:
            assert r["error"] is None, (c["name"], r["error"])
            assert r["derived"] == c["derived"], (c["name"], r)
            if c["derived"]:
                assert r["last"] is not None and r["last"].endswith("_name"), (c["name"], r)
        else:
            assert r["error"] is not None, f"{c['name']}: decoded, but it should fail naming {c['expect']}"
            for needle in c["expect"]:
                assert needle in r["error"], (c["name"], r["error"], needle)


def test_the_shared_disclosure_vectors_in_the_browser(browser: WebDriver, proxy: Proxy) -> None:
    """events/testdata/disclosure_vectors.json (made by the Rust tests, read by the Python package
    too): each valid disclosure parses to its field and value and hashes to its digest; each
    invalid one is refused as malformed."""
    open_page(browser, proxy, "/settings")
    vectors = json.loads((REPO / "events/testdata/disclosure_vectors.json").read_text(encoding="utf-8"))
    assert vectors["valid"] and vectors["invalid"]
    result = browser.execute_async_script(
        """
        const [vectors, done] = arguments;
        (async () => {
          const env = await import('./envelope.js');
          const out = [];
          for (const v of vectors.valid) {
            try {
              const o = env.parseDisclosure(v.disclosure);
              if (o.field !== v.field || o.value !== v.value) out.push(`${v.field}: parsed as ${o.field} = ${o.value}`);
              if ((await env.disclosureDigest(v.disclosure)) !== v.digest) out.push(`${v.field}: another digest`);
            } catch (e) { out.push(`${v.field}: ${e.message}`); }
          }
          for (const v of vectors.invalid) {
            try { env.parseDisclosure(v.disclosure); out.push(`accepted: ${v.why}`); }
            catch (e) { if (!String(e.message).includes('is malformed')) out.push(`${v.why}: ${e.message}`); }
          }
          return out;
        })().then(done, (e) => done([String(e && e.stack || e)]));
        """,
        vectors)
    assert result == [], result


def test_a_disclosure_changed_by_one_character_turns_red(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], auditor: str) -> None:
    tamper("disclosure-character")
    assert open_page(browser, proxy, f"/entries/{COMMITTED_ENTRY}") == "fail"
    assert proxy.tampered > 0
    assert_red(browser, "check-disclosures", f"entry {COMMITTED_ENTRY}: disclosure 0 (of title) matches no commitment in the entry")
    assert status(browser, "committed-title") == "fail"
    assert browser.find_element(By.ID, "committed-value-title").text == "committed"
    for path in CASE_FIELDS[1:]:
        assert status(browser, f"committed-{path}") == "ok", path
    for id_ in ENTRY_CHECKS:
        assert status(browser, id_) == "ok", id_
    screenshot(browser, "tampered-disclosure")


# --- one byte changed: the right element turns red ---------------------------------------------------


def test_tampered_checkpoint_signature(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("checkpoint-signature")
    assert open_page(browser, proxy, "/") == "fail"
    assert proxy.tampered > 0
    assert_red(browser, "check-head-signature", f"checkpoint signature invalid for key {pinned}")
    screenshot(browser, "tampered-checkpoint-signature")


def test_tampered_checkpoint_root(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("checkpoint-root")
    assert open_page(browser, proxy, "/entries/17") == "fail"
    # The root is signed: a changed root is a signature that no longer verifies,
    # and nothing is proven against it.
    assert_red(browser, "check-head-signature", f"checkpoint signature invalid for key {pinned}")
    assert status(browser, "check-inclusion") == "none"


def test_tampered_consistency_proof(browser: WebDriver, proxy: Proxy, demo: Demo, tamper: Callable[[str], None], pinned: str) -> None:
    assert open_page(browser, proxy, "/") == "ok"  # trusts the current head
    before = head_size(browser)
    demo.grow()
    tamper("consistency-step")
    assert open_page(browser, proxy, "/") == "fail"
    after = head_size(browser)
    assert_red(browser, "check-head-consistency", f"consistency proof from size {before} to {after}", "does not lead to")
    screenshot(browser, "tampered-consistency")
    # The head that failed was not trusted: the honest proof from the old one passes.
    # (The server may have appended meanwhile: its periodic state commitment is an entry.)
    tamper("")
    assert open_page(browser, proxy, "/") == "ok"
    honest = head_size(browser)
    assert honest >= after
    assert f"(size {before}) to size {honest}" in message(browser, "check-head-consistency")


def test_tampered_inclusion_proof(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("inclusion-step")
    assert open_page(browser, proxy, "/entries/17") == "fail"
    assert_red(browser, "check-inclusion", "inclusion proof of entry 17 does not reach the verified root")
    assert status(browser, "check-leaf-hash") == "ok"
    screenshot(browser, "tampered-inclusion")


def test_tampered_evidence_proof(browser: WebDriver, proxy: Proxy, demo: Demo, tamper: Callable[[str], None], pinned: str) -> None:
    first = demo.get(f"/v1/task-classes/{CLASS}")["evidence"][0]["index"]
    tamper("evidence-step")
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert_red(browser, "check-evidence", f"inclusion proof of evidence entry {first} does not reach the projection's signed root")
    assert status(browser, f"evidence-{first}") == "fail"
    assert status(browser, "check-projection-signature") == "ok"


def test_tampered_statistic(browser: WebDriver, proxy: Proxy, demo: Demo, tamper: Callable[[str], None], pinned: str) -> None:
    mean = demo.get(f"/v1/task-classes/{CLASS}")["view"]["held_out"]["mean"]
    text = repr(mean)
    changed = float(text[:2] + str((int(text[2]) + 1) % 10) + text[3:])
    tamper("served-mean")
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert_red(browser, "check-stats", f"held-out mean recomputed {text} ≠ served {changed!r}")
    assert status(browser, "stat-mean") == "fail"
    assert status(browser, "stat-mean_ci-low") == "ok"
    screenshot(browser, "tampered-statistic")


def test_tampered_projection_root(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("projection-root")
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert_red(browser, "check-projection-signature", "differs from its signed checkpoint")
    assert status(browser, "check-evidence") == "none"


# --- answers rewritten: what each check must refuse ------------------------------------------------


def test_projection_for_another_class(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    """Item 1: a real, signed projection of another class is not this class's."""
    tamper("other-class")
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert proxy.tampered > 0
    assert_red(browser, "check-projection-signature", '"dependency-bump"', f'not of "{CLASS}", the one asked for')
    for id_ in ("check-evidence", "check-stats", "check-rules", "check-plot"):
        assert status(browser, id_) == "none", id_
    assert browser.find_element(By.ID, "class-name").text == CLASS


@pytest.mark.parametrize("kind, needles", [
    ("settings-window", ['"window_seconds":5184000', "not the ledger's"]),
    ("settings-resamples", ['"resamples":1000000000000', "not the ledger's"]),
    ("window-start", ["the view's window starts at", "less the ledger's window of 2592000 s"]),
    ("window-start-missing", ["the view states no window start"]),
])
def test_view_settings_are_the_ledgers(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str,
                                       kind: str, needles: list[str]) -> None:
    """Item 2: the settings are the ledger's fixed ones and the window ends at the view's time,
    checked before anything is recomputed with them (no bootstrap with 10^12 resamples)."""
    tamper(kind)
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert proxy.tampered > 0
    assert status(browser, "check-evidence") == "ok"
    assert_red(browser, "check-stats", *needles)
    assert not browser.find_elements(By.CSS_SELECTOR, "#stats-table tbody tr"), "recomputed with the served settings"
    assert status(browser, "check-rules") == status(browser, "check-plot") == "none"
    assert all(m.get_attribute("data-status") != "ok" for m in browser.find_elements(By.CSS_SELECTOR, ".stat-mark"))


@pytest.mark.parametrize("kind, row, needles", [
    ("rules-missing", None, ["are not the ones the ledger evaluates for a bronze class", "silver.enough_held_out_cases"]),
    ("rule-detail", 2, ["silver.lower_bound_meets_threshold", "is not what the ledger writes for this rule"]),
    ("rule-outcome", 1, ["silver.every_case_scored_in_window", "its detail gives true, the outcome says false"]),
])
def test_recommendation_rules_are_the_ledgers(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str,
                                              kind: str, row: Optional[int], needles: list[str]) -> None:
    """Item 3: exactly the rules the ledger evaluates, details as it writes them, outcomes
    that follow from them."""
    tamper(kind)
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert proxy.tampered > 0
    assert status(browser, "check-stats") == "ok"
    assert_red(browser, "check-rules", *needles)
    if row is not None:
        assert status(browser, f"rule-check-{row}") == "fail"


def test_enrolment_scan_refuses_a_listing_out_of_order(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    """Item 4: a listing whose entries are not the next ones ends the scan (it used to loop forever)."""
    tamper("listing-stuck")
    assert open_page(browser, proxy, "/entries/17") == "fail"
    assert proxy.tampered > 0
    assert status(browser, "check-inclusion") == "ok"
    assert_red(browser, "check-signature", "the server's list of entries from 0 gives entry 0 where entry 1 belongs")


def test_a_request_that_never_ends_times_out(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    """Item 4: every request gives up after 20 s, and the check that waited fails."""
    tamper("stall-inclusion")
    started = time.monotonic()
    assert open_page(browser, proxy, "/") == "fail"
    assert proxy.tampered > 0
    assert_red(browser, "check-head-age", "could not be checked: timed out", "/v1/proofs/inclusion")
    assert 19 < time.monotonic() - started < WAIT


def test_entry_list_must_be_consecutive(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    """Item 5: an entry list with a gap (entry 2 withheld) is not the log's order."""
    tamper("listing-gap")
    assert open_page(browser, proxy, "/entries?start=0") == "fail"
    assert proxy.tampered > 0
    assert_red(browser, "check-list", "entry 2: listed as entry 3 where entry 2 belongs")
    assert status(browser, "entry-row-1") == "ok"
    assert status(browser, "entry-row-2") == "fail"


def test_inconsistent_head_is_not_the_verified_head(browser: WebDriver, proxy: Proxy, demo: Demo, tamper: Callable[[str], None], pinned: str) -> None:
    """Item 6: a signed head that fails consistency is not used downstream."""
    assert open_page(browser, proxy, "/") == "ok"  # trusts the current head
    demo.grow()
    tamper("consistency-step")
    assert open_page(browser, proxy, "/entries/17") == "fail"
    assert_red(browser, "check-head-consistency", "does not lead to")
    for id_ in ENTRY_CHECKS:
        assert status(browser, id_) == "none", (id_, message(browser, id_))
        assert "not consistent with the head this browser trusted" in message(browser, id_), id_
    assert "reaches the verified root" not in browser.find_element(By.ID, "main").text
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert_red(browser, "check-head-consistency", "does not lead to")
    for id_ in CLASS_CHECKS:
        assert status(browser, id_) == "none", id_
    assert open_page(browser, proxy, "/") == "fail"
    assert status(browser, "check-head-age") == "none"
    assert browser.find_element(By.ID, "head-verified").text.startswith("no:")
    # Honest again: the head is proven to extend the trusted one.
    tamper("")
    assert open_page(browser, proxy, "/") == "ok"


def test_damaged_trusted_head_is_a_failure(browser: WebDriver, proxy: Proxy, pinned: str) -> None:
    """A trusted head this browser cannot read is not a reason to trust whatever comes next."""
    browser.execute_script("localStorage.setItem(arguments[0], 'not a signed note')", f"evidence-ledger.trusted.{pinned}")
    assert open_page(browser, proxy, "/entries/17") == "fail"
    assert_red(browser, "check-head-consistency", "the trusted head stored in this browser cannot be read")
    assert status(browser, "check-inclusion") == "none"
    assert browser.execute_script("return localStorage.getItem(arguments[0])", f"evidence-ledger.trusted.{pinned}") == "not a signed note"
    open_page(browser, proxy, "/settings")
    browser.find_element(By.ID, "trusted-forget").click()
    assert open_page(browser, proxy, "/") == "none"  # trust on first use again, saying so
    assert "trust on first use" in message(browser, "check-head-consistency")


def test_search_answer_that_names_no_entry(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    """An index sent as text ("17") is not an entry index: the search fails."""
    tamper("search-index-text")
    assert open_page(browser, proxy, "/find/genesis-ledger-key") == "fail"
    assert proxy.tampered > 0
    assert "is not an entry index" in browser.find_element(By.ID, "alarm").text
    assert browser.find_element(By.ID, "page-error")


def test_evidence_index_must_be_a_number(browser: WebDriver, proxy: Proxy, tamper: Callable[[str], None], pinned: str) -> None:
    tamper("evidence-index-text")
    assert open_page(browser, proxy, f"/classes/{CLASS}") == "fail"
    assert_red(browser, "check-evidence", "evidence[0] names", "which is not an entry index")
    assert status(browser, "check-stats") == "none"


def test_no_policy_violation_or_uncaught_error(browser: WebDriver) -> None:
    """Every page above ran under the Content-Security-Policy without breaking it."""
    CONSOLE.extend(browser_log(browser))
    assert CONSOLE, "the browser's log was not collected"
    bad = [m for m in CONSOLE if "Content Security Policy" in m or "Refused to" in m or "Uncaught" in m]
    assert not bad, bad
