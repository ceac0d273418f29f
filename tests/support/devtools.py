"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
JSON messages ending in NUL on fds 3 and 4), for pages that change while they are open."""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["DevTools"]


class DevTools:
    """One browser with one page; every console message and page error is kept."""

    def __init__(self, browser: str, profile: Path, *, height: int = 1400) -> None:
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 "--no-first-run", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                 f"--window-size=1200,{height}", "about:blank"]  # fmt: skip
        command = f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}'
        self._process = subprocess.Popen(
            ["bash", "-c", command, browser, *flags], pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._ids = 0
        self._answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.problems: list[str] = []
        threading.Thread(target=self._reader, daemon=True).start()
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session: str | None = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command (to the page once attached) and wait for its answer."""
        with self._lock:
            self._ids += 1
            ident = self._ids
            self._answers[ident] = queue.Queue()
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if getattr(self, "_session", None):
            message["sessionId"] = self._session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        answer = self._answers[ident].get(timeout=30)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def open(self, url: str) -> None:
        """Navigate the page to `url`."""
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str, timeout: float = 30.0) -> Any:
        """Poll `expression` until it is truthy; fail naming `what` at the deadline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"the page never showed {what} within {timeout}s "
                             f"(console: {self.problems})")  # fmt: skip

    def screenshot(self, path: Path) -> None:
        """Save the whole page as a PNG."""
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        """Stop the browser."""
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._write)

    def _reader(self) -> None:
        buffer = b""
        while chunk := _read(self._read):
            buffer += chunk
            while b"\0" in buffer:
                raw, buffer = buffer.split(b"\0", 1)
                self._dispatch(json.loads(raw))
        os.close(self._read)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message:
            self._answers[message["id"]].put(message)
            return
        params = message.get("params", {})
        method = message.get("method")
        if method == "Runtime.consoleAPICalled":
            texts = [str(arg.get("value", arg.get("description"))) for arg in params["args"]]
            self.problems.append(f"console.{params['type']}: {' '.join(texts)}")
        elif method == "Runtime.exceptionThrown":
            self.problems.append(f"exception: {params['exceptionDetails'].get('text')}")
        elif method == "Log.entryAdded" and params["entry"]["level"] in {"error", "warning"}:
            self.problems.append(f"log {params['entry']['level']}: {params['entry']['text']}")


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""
