"""Open HTML files in headless Chromium (Debian's ``chromium``) over the DevTools protocol, the way a person would
see them: collect console errors, uncaught exceptions and network requests, measure the plotly charts, take a
full-page screenshot and tell from its pixels whether each chart's plot area shows data.

Chromium is started with a fresh profile and ``--remote-debugging-port=0``; the port is read from the profile's
``DevToolsActivePort`` file, and the page target is driven with ``websocket-client``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-port=0",
    "--window-size=1400,900",
)
INSTALL = "command -v chromium || (apt-get update && apt-get install -y chromium)"
CHROMA_INK = 40  # a pixel is "data ink" when max(rgb) - min(rgb) exceeds this (colour, not white/grey/gridlines)


def chromium_path() -> str:
    """The chromium binary; installs Debian's package (as the Makefile's ``browser`` target does) if missing."""
    found = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if found:
        return found
    sudo = "" if os.geteuid() == 0 else "sudo "
    subprocess.run(["sh", "-c", INSTALL.replace("apt-get", sudo + "apt-get")], check=False,
                   env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    found = shutil.which("chromium") or (CHROMIUM if os.path.exists(CHROMIUM) else None)
    if not found:
        raise RuntimeError(f"chromium is not installed and could not be installed ({INSTALL})")
    return found


@dataclass
class PlotInfo:
    """One plotly chart on the page: its div id, title, subplot titles and plot-area rectangles (page px)."""

    div_id: str
    title: str
    annotations: list[str]
    rect: tuple[float, float, float, float]  # x, y, width, height
    areas: list[tuple[float, float, float, float]]
    traces: int


@dataclass
class Rendered:
    title: str
    text: str  # document.body.innerText
    plots: list[PlotInfo]
    screenshot: bytes  # PNG, full page, device scale 1
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def image(self) -> np.ndarray:
        """The screenshot as an (H, W, 3) uint8 array."""
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(self.screenshot)).convert("RGB"))


def crop(img: np.ndarray, rect: tuple[float, float, float, float], inset: int = 2) -> np.ndarray:
    x, y, w, h = rect
    x0, y0 = max(0, int(round(x)) + inset), max(0, int(round(y)) + inset)
    x1, y1 = min(img.shape[1], int(round(x + w)) - inset), min(img.shape[0], int(round(y + h)) - inset)
    return img[y0:y1, x0:x1]


def ink_fraction(img: np.ndarray, rect: tuple[float, float, float, float]) -> float:
    """Fraction of coloured pixels in ``rect``: data lines and markers are coloured; the background, gridlines,
    text and the grey join/leave markers are not."""
    region = crop(img, rect).astype(np.int16)
    if region.size == 0:
        return 0.0
    chroma = region.max(axis=2) - region.min(axis=2)
    return float((chroma > CHROMA_INK).mean())


def pixel_std(img: np.ndarray, rect: tuple[float, float, float, float]) -> float:
    """Standard deviation of the pixel values in ``rect`` (0 for a uniform area)."""
    region = crop(img, rect)
    return float(region.std()) if region.size else 0.0


_MEASURE = """
(() => {
  const r = e => { const b = e.getBoundingClientRect();
                   return [b.left + window.scrollX, b.top + window.scrollY, b.width, b.height]; };
  const plots = [...document.querySelectorAll('.js-plotly-plot')].map(p => ({
    div_id: p.id,
    title: (p.querySelector('.gtitle') || {}).textContent || '',
    annotations: [...p.querySelectorAll('.annotation-text')].map(a => a.textContent),
    rect: r(p),
    areas: [...p.querySelectorAll('.draglayer .nsewdrag')].map(r),
    traces: (p.data || []).length,
  }));
  return JSON.stringify({title: document.title, text: document.body.innerText, plots: plots,
                         height: Math.ceil(document.documentElement.scrollHeight)});
})()
"""

_READY = """
(() => {
  const plots = [...document.querySelectorAll('.js-plotly-plot, .plotly-graph-div')];
  return document.readyState === 'complete' && typeof Plotly !== 'undefined' &&
         plots.every(p => p.querySelector('.main-svg') && p._fullLayout);
})()
"""

_FRAMES = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(() => r(true), 200))))"


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol (use as a context manager)."""

    def __init__(self, width: int = 1400, height: int = 900, timeout: float = 180.0):
        self.width, self.height, self.timeout = width, height, timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.profile: str | None = None
        self.ws: Any = None
        self._id = 0
        self.events: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Browser":
        import websocket

        self.profile = tempfile.mkdtemp(prefix="lbreplay-chromium-")
        log = open(Path(self.profile) / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            [chromium_path(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"chromium did not start (log: {self._log()})")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        page = None
        while page is None:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as resp:
                targets = json.loads(resp.read().decode())
            page = next((t for t in targets if t.get("type") == "page"), None)
            if page is None:
                if time.monotonic() > deadline:
                    raise RuntimeError("chromium has no page target")
                time.sleep(0.1)
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=self.timeout, suppress_origin=True,
                                              enable_multithread=False)
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:  # noqa: BLE001
                pass
            self.ws = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=15)
            self.proc = None
        if self.profile:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None

    def _log(self) -> str:
        try:
            return (Path(self.profile or "") / "chromium.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    # ------------------------------------------------------------------ protocol
    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params or {}}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, method: str, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = len(self.events)
        for ev in self.events[:seen]:
            if ev["method"] == method:
                return ev
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == method:
                    return msg
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    # ------------------------------------------------------------------ the check
    def render(self, path: str | Path) -> Rendered:
        """Open ``path``, wait until every plotly chart is drawn, and take a full-page screenshot."""
        self.events = []
        url = Path(path).resolve().as_uri()
        self.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired")
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(_READY):
            if time.monotonic() > deadline:
                raise TimeoutError(f"charts of {url} not drawn within {self.timeout}s")
            time.sleep(0.2)
        self.evaluate(_FRAMES)
        height = json.loads(self.evaluate(_MEASURE))["height"]
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": max(self.height, height), "deviceScaleFactor": 1, "mobile": False})
        self.evaluate(_FRAMES)
        page = json.loads(self.evaluate(_MEASURE))
        shot = self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        import base64

        png = base64.b64decode(shot["data"])
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False})
        return Rendered(
            title=page["title"], text=page["text"],
            plots=[PlotInfo(p["div_id"], p["title"], p["annotations"], tuple(p["rect"]), [tuple(a) for a in p["areas"]],
                            int(p["traces"])) for p in page["plots"]],
            screenshot=png, console_errors=self.console_errors(), requests=self.requests(),
        )

    def console_errors(self) -> list[str]:
        """Console errors, failed assertions, uncaught exceptions and error log entries since the last render."""
        out = []
        for ev in self.events:
            m, p = ev["method"], ev.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                                  for a in p.get("args", [])))
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + str(d.get("exception", {}).get("description") or d.get("text")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + str(p["entry"].get("text")) + " " + str(p["entry"].get("url", "")))
        return out

    def requests(self) -> list[str]:
        """URLs the page requested since the last render."""
        return [ev["params"]["request"]["url"] for ev in self.events if ev["method"] == "Network.requestWillBeSent"]
