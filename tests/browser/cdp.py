"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe): one browser opens every
page of a test in turn, and for each says what its console said, which requests it made, its DOM, how long its
longest task ran, and a screenshot. No port is opened and nothing but the pages is loaded (background services off,
every host name resolves to nothing)."""
import base64
import fcntl
import json
import os
import select
import subprocess
import time

FLAGS = [
    "--headless=new", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
    # The browser's own traffic (updates, sync, accounts) would be noise beside the page's; none of it is wanted.
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    # Only the agent on loopback may answer; every other name resolves to nothing.
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]


def find_chromium():
    """GPUDX_CHROMIUM when set (a path; one that is not there stands for a machine without a browser), else the
    first Chromium on PATH."""
    if "GPUDX_CHROMIUM" in os.environ:
        p = os.environ["GPUDX_CHROMIUM"]
        return p if os.access(p, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        for d in os.environ.get("PATH", "").split(":") + ["/usr/bin"]:
            p = os.path.join(d, name)
            if os.access(p, os.X_OK):
                return p
    return None


def _high(fd):
    """The descriptor moved above 9, so that putting the pipe's ends at 3 and 4 in the child never closes one."""
    n = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return n


class Browser:
    def __init__(self, chromium, profile, log):
        to_browser_r, to_browser_w = (_high(f) for f in os.pipe())
        from_browser_r, from_browser_w = (_high(f) for f in os.pipe())

        def child():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen([chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, preexec_fn=child,
                                     pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.w, self.r = to_browser_w, from_browser_r
        self.buf = b""
        self.next_id = 0
        self.events = []

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # the browser this test started, by its own handle
            self.proc.wait()
        os.close(self.w)
        os.close(self.r)

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the browser did not answer in time")
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe (it exited: see its log)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None, timeout=60):
        self.next_id += 1
        mid = self.next_id
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout=120):
        deadline = time.monotonic() + timeout
        for i, m in enumerate(self.events):
            if m.get("method") == method and m.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)


def open_page(browser, url, screenshot=None, width=1280, max_height=2400, scale=0.75, start=None):
    """Loads `url` in a new tab; returns what the page did: console and log entries, the URLs it requested, its DOM,
    the longest task of its renderer (ms), its load time (s), and writes its screenshot (PNG) when asked: from the top,
    or from the element `start` (a CSS selector) names."""
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network", "DOM"):
        browser.call(f"{domain}.enable", session=session)
    browser.call("Emulation.setDeviceMetricsOverride",
                 {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
    # The renderer's tasks, timed by the browser itself: a task over a second is a page too heavy to draw.
    browser.call("Tracing.start", {"categories": "devtools.timeline,disabled-by-default-devtools.timeline",
                                   "transferMode": "ReturnAsStream"}, session=session)
    started = time.monotonic()
    browser.events = [m for m in browser.events if m.get("sessionId") != session]
    browser.call("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session)
    load_s = time.monotonic() - started
    time.sleep(0.2)  # late console messages (a blocked load reports after the load event)
    browser.call("Tracing.end", session=session)
    done = browser.wait_event("Tracing.tracingComplete", session)
    trace = b""
    handle = done["params"].get("stream")
    while handle:
        chunk = browser.call("IO.read", {"handle": handle, "size": 1 << 20}, session=session)
        trace += base64.b64decode(chunk["data"]) if chunk.get("base64Encoded") else chunk["data"].encode()
        if chunk.get("eof"):
            browser.call("IO.close", {"handle": handle}, session=session)
            break
    longest_ms = 0.0
    try:
        events = json.loads(trace or b"{}")
        events = events.get("traceEvents", events) if isinstance(events, dict) else events
        for e in events:
            if e.get("name") == "RunTask" and e.get("ph") == "X":
                longest_ms = max(longest_ms, e.get("dur", 0) / 1000.0)
    except ValueError:
        longest_ms = -1  # the trace could not be read: said, not taken as fast

    root = browser.call("DOM.getDocument", {"depth": 0}, session=session)["root"]["nodeId"]
    dom = browser.call("DOM.getOuterHTML", {"nodeId": root}, session=session)["outerHTML"]
    scripts = browser.call("DOM.querySelectorAll", {"nodeId": root, "selector": "script"}, session=session)["nodeIds"]
    if screenshot:
        size = browser.call("Page.getLayoutMetrics", session=session)["cssContentSize"]
        top = 0
        if start:
            node = browser.call("DOM.querySelector", {"nodeId": root, "selector": start}, session=session)["nodeId"]
            if node:
                top = browser.call("DOM.getBoxModel", {"nodeId": node}, session=session)["model"]["border"][1]
        clip = {"x": 0, "y": top, "width": width, "height": min(size["height"] - top, max_height), "scale": scale}
        shot = browser.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                            session=session)
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    console, requests, failed = [], [], []
    for m in browser.events:
        if m.get("sessionId") != session:
            continue
        p = m.get("params", {})
        if m["method"] == "Runtime.consoleAPICalled":
            console.append(f"console.{p.get('type')}: " + " ".join(str(a.get("value", "")) for a in p.get("args", [])))
        elif m["method"] == "Runtime.exceptionThrown":
            console.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:300])
        elif m["method"] == "Log.entryAdded":
            e = p.get("entry", {})
            console.append(f"{e.get('level')} ({e.get('source')}): {e.get('text')}")
        elif m["method"] == "Network.requestWillBeSent":
            requests.append(p.get("request", {}).get("url", ""))
        elif m["method"] == "Network.loadingFailed":
            failed.append(p.get("errorText", ""))
    browser.events = [m for m in browser.events if m.get("sessionId") != session]
    browser.call("Target.closeTarget", {"targetId": target})
    return {"console": console, "requests": requests, "failed": failed, "dom": dom, "scripts": len(scripts),
            "longest_task_ms": longest_ms, "load_s": load_s}
