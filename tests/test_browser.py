"""The report in a real browser: headless Chromium (Debian's `chromium`) opens the report of a small
synthetic campaign served on localhost, visits every page it links to, checks that every image
loads (naturalWidth > 0) and that every local link answers 200, and saves a screenshot.

Chromium is driven through its DevTools protocol (--remote-debugging-port) with a tiny websocket
client written here on the standard library, so nothing is downloaded. If chromium is missing the
test installs it as root with apt (as the Makefile's system-packages step does), else it skips.
"""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from test_report_synth import synthetic_report_copy

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--remote-debugging-port=0", "--window-size=1400,1000",
]  # fmt: skip
CHECK_PAGE = """(async () => {
  const images = Array.from(document.images);
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src);
  const hrefs = Array.from(document.querySelectorAll('a[href], link[href]')).map(a => a.href);
  const local = [...new Set(hrefs.filter(h => h.startsWith(location.origin))
                                 .map(h => h.split('#')[0]))];
  const bad = [];
  for (const url of local) {
    try { const r = await fetch(url); if (r.status !== 200) bad.push(url + ' -> ' + r.status); }
    catch (e) { bad.push(url + ' -> ' + e); }
  }
  const pages = local.filter(u => u.endsWith('.html'));
  return JSON.stringify({images: images.length, broken, links: local.length, bad, pages});
})()"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], check=False, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=False, env=env,
                       capture_output=True)  # fmt: skip
        found = shutil.which("chromium")
        if found:
            return found
    pytest.skip("chromium is not installed and cannot be installed here (needs root and apt)")


# ---- a minimal websocket client (RFC 6455, text frames, client-masked) -----------------------
class WebSocket:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (f"GET {u.path} HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nUpgrade: websocket\r\n"
             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
             "Sec-WebSocket-Version: 13\r\n\r\n").encode()
        )  # fmt: skip
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the websocket handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket upgrade refused: {head[:200]!r}")

    def send(self, text: str) -> None:
        data = text.encode()
        header = bytearray([0x81])
        n = len(data)
        if n < 126:
            header.append(0x80 | n)
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(bytes(header) + mask + masked)

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("DevTools closed the websocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else b""
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the websocket")
            if opcode in (0x9, 0xA):  # ping/pong: nothing to do for a short session
                continue
            message += payload
            if b0 & 0x80:
                return message.decode()

    def close(self) -> None:
        self.sock.close()


class DevTools:
    """Just enough of the Chrome DevTools protocol: call a method, evaluate, navigate."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, timeout: float = 30.0) -> None:
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        ready = (
            "document.readyState === 'complete' && location.href === "
            f"{json.dumps(url)} && Array.from(document.images).every(i => i.complete)"
        )
        while time.monotonic() < deadline:
            if self.evaluate(ready):
                return
            time.sleep(0.05)
        raise TimeoutError(f"{url} did not finish loading in {timeout:.0f} s")


# ---- fixtures: the report served on localhost, and a browser --------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    results = synthetic_report_copy(tmp_path_factory.mktemp("browser"))

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(results))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", results
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevTools]:
    exe = chromium()
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.Popen(
        [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        ws_url = None
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        while time.monotonic() < deadline and ws_url is None:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                pytest.fail(f"chromium exited with {proc.returncode} before DevTools listened")
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                ws_url = m.group(1)
        assert ws_url, "chromium did not announce its DevTools endpoint"
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
        port = urlparse(ws_url).port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t.get("type") == "page")
        ws = WebSocket(page["webSocketDebuggerUrl"])
        tools = DevTools(ws)
        tools.call("Page.enable")
        yield tools
        ws.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_every_page_loads_its_images_and_no_link_is_broken(
    served: tuple[str, Path], browser: DevTools
):
    served, _ = served
    start = f"{served}/synth/report/index.html"
    todo, seen, problems, images = [start], set(), [], 0
    while todo:
        url = todo.pop()
        if url in seen:
            continue
        seen.add(url)
        browser.open(url)
        result = json.loads(browser.evaluate(CHECK_PAGE))
        images += result["images"]
        problems += [f"{url}: image did not load: {src}" for src in result["broken"]]
        problems += [f"{url}: broken link {bad}" for bad in result["bad"]]
        todo += [p for p in result["pages"] if p not in seen]
    assert not problems, "\n".join(problems[:20])
    # The index, a page per paper experiment, and the report across campaigns were all visited.
    assert f"{served}/synth/report/experiments/sm_clock.html" in seen
    assert f"{served}/synth/report/combined/index.html" in seen
    assert f"{served}/synth/report/tables.html" in seen
    assert f"{served}/other/report/index.html" in seen
    assert len(seen) > 25 and images > 20


def test_screenshot_of_the_index(served: tuple[str, Path], browser: DevTools, tmp_path: Path):
    served, _ = served
    browser.open(f"{served}/synth/report/index.html")
    shot = browser.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
    png = tmp_path / "report-index.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    verdicts = browser.evaluate(
        "Array.from(document.querySelectorAll('td.verdict')).map(t => t.textContent)"
    )
    assert {"reproduced", "not reproduced", "not measurable here"} <= set(verdicts)


def test_tables_fit_1400_px_without_sideways_scrolling(served: tuple[str, Path], browser: DevTools):
    served, _ = served
    for page in ("tables.html", "experiments/one_op.html", "index.html"):
        browser.open(f"{served}/synth/report/{page}")
        width = json.loads(browser.evaluate(
            "JSON.stringify({page: document.documentElement.scrollWidth, view: innerWidth,"
            " tables: Array.from(document.querySelectorAll('table.paper-table, table.claims'))"
            "  .map(t => Math.ceil(t.getBoundingClientRect().right))})"
        ))  # fmt: skip
        assert width["view"] == 1400
        assert width["page"] <= width["view"], (page, width["page"])
        assert max(width["tables"], default=0) <= width["view"], (page, width["tables"])


def test_the_checks_catch_a_missing_image_and_a_dead_link(
    served: tuple[str, Path], browser: DevTools
):
    url, root = served
    (root / "broken.html").write_text(
        '<img src="synth/report/figures/paper/fig05.png"><img src="no-such.png">'
        '<a href="synth/report/index.html">ok</a><a href="no-such.html">dead</a>'
    )
    browser.open(f"{url}/broken.html")
    result = json.loads(browser.evaluate(CHECK_PAGE))
    assert result["images"] == 2 and [s.rsplit("/", 1)[1] for s in result["broken"]] == [
        "no-such.png"
    ]
    assert len(result["bad"]) == 1 and "no-such.html -> 404" in result["bad"][0]
