"""A headless Chromium driven over the DevTools protocol on a pipe: load, type, click, read.

Debian's ``chromium`` speaks the protocol on file descriptors 3 (commands in) and 4
(answers out) with ``--remote-debugging-pipe``: JSON messages ended by a NUL byte. No
WebSocket client and no driver package are needed. A click is a real mouse press and
release at the element's centre, as a person's.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless Chromium with one page; `close` ends it."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None, "no Chromium on this machine (apt-get install chromium)"
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def fds() -> None:  # in the child: its ends as fds 3 and 4
            a, b = os.dup(to_browser), os.dup(from_browser)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-sync",
             "--disable-component-update", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=fds, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._id = 0
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session: str | None = attached["sessionId"]

    def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if getattr(self, "_session", None) is not None:
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        give_up = time.monotonic() + 60
        while time.monotonic() < give_up:
            while b"\0" not in self._buffer:
                chunk = os.read(self._read, 1 << 16)
                if not chunk:
                    raise EOFError("Chromium ended")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
        raise TimeoutError(method)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression on the page."""
        result = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, limit: float = 60.0) -> Any:
        """Wait until the expression is truthy (the page loaded, an element shown)."""
        give_up = time.monotonic() + limit
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # the page is between documents
                value = None
            if value:
                return value
            if time.monotonic() > give_up:
                where = self.evaluate(
                    "location.href + ': ' + document.body.outerHTML.slice(0, 1500)"
                )
                raise AssertionError(f"not true within {limit} s: {expression} (at {where})")
            time.sleep(0.1)

    def open(self, url: str, *, loaded: str | None = None) -> None:
        """Load ``url`` and wait until it has loaded (or the expression ``loaded`` holds)."""
        self._call("Page.navigate", {"url": url})
        done = f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
        self.wait(loaded or done)

    def viewport(self, width: int, height: int = 800) -> None:
        """Show pages at ``width`` x ``height`` CSS pixels (``0``: undo).

        Up to 640 wide, as a phone's screen (2 device pixels a CSS pixel); wider, a desktop's.
        """
        if width == 0:
            self._call("Emulation.clearDeviceMetricsOverride")
            return
        phone = width <= 640
        metrics = {"width": width, "height": height, "deviceScaleFactor": 2 if phone else 1,
                   "mobile": phone}  # fmt: skip
        self._call("Emulation.setDeviceMetricsOverride", metrics)

    def html(self) -> str:
        """The page's DOM as HTML."""
        return str(self.evaluate("document.documentElement.outerHTML"))

    def type(self, selector: str, text: str) -> None:
        """Put ``text`` in the input ``selector`` names."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(text)}")

    def click(self, selector: str) -> None:
        """Click the element ``selector`` names with the mouse, at its (first box's) centre."""
        box = self.wait(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getClientRects()[0];"  # a link wrapped over lines: its first
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self._call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
            )

    def forget_cookies(self) -> None:
        """Drop every cookie (a new visitor; cookies do not tell ports apart)."""
        self._call("Network.clearBrowserCookies")

    def screenshot(self, path: Path) -> None:
        """Save the page as it looks now, as a PNG at ``path``."""
        path.write_bytes(base64.b64decode(self._call("Page.captureScreenshot")["data"]))

    def close(self) -> None:
        """End Chromium."""
        try:
            self._session = None
            self._call("Browser.close")
        except (OSError, EOFError, RuntimeError, TimeoutError):
            pass
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(30)
        os.close(self._write)
        os.close(self._read)
