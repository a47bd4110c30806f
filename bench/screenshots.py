"""Screenshots of the Prefect UI as the contributor sees last night's run, for docs/screenshots/.

    .venv/bin/python -m bench.screenshots            # writes docs/screenshots/*.png (about a minute)
    .venv/bin/python -m bench.screenshots --out /tmp/shots
    .venv/bin/python -m bench.screenshots --only morning   # the morning after only (about 40 s)

Starts ``prefect server start`` on a free port in a temporary PREFECT_HOME
(``PREFECT_UI_API_URL`` pointed at it), runs ``microstock run`` on a small
batch in a temporary workdir — review on, Dreamstime's target a port where
nothing listens (so that agency stops), Vecteezy to its local outbox — and,
with headless Chromium (Debian's ``chromium``) driven over its DevTools
protocol, takes PNGs of: the run paused for review (Details: its state
message), the review form (the Resume modal), its picker of the waiting
files and a correction's text boxes, the run once answered (``Incomplete``
and its message), its ``batch-assets`` table, the dashboard, and a describe
task run's page (its retry settings). The answer
is given through Prefect's API as ``microstock review reject`` gives it.

``morning``: the morning after, as a contributor lives it on the workdir's own
server (no ``PREFECT_API_URL``): ``microstock run`` at night, its server stopped
once idle, ``microstock server start`` in the morning, and the address the run
printed at night opened again, logged in with the server's auth string
(``morning-run-page.png``).
Every process it starts is stopped before it returns. Rerun it whenever the
UI side changes, then look at the PNGs.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

from tasks.orchestration.local_server import LocalServer, free_port

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
WINDOW = (1400, 1000)


class Browser:
    """One headless Chromium page, driven over the DevTools protocol (navigate, evaluate, click, capture)."""

    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             f"--remote-debugging-port={self.port}", f"--user-data-dir={home}",
             f"--window-size={WINDOW[0]},{WINDOW[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.ws = connect(self._page_ws(), max_size=64 * 1024 * 1024)
        self._id = 0

    def _page_ws(self) -> str:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t["type"] == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("chromium's DevTools did not answer")
            time.sleep(0.3)

    def call(self, method: str, **params) -> dict:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, js: str):
        return self.call("Runtime.evaluate", expression=js, returnByValue=True).get("result", {}).get("value")

    def open(self, url: str, until_text: str, timeout_s: float = 60) -> None:
        """Go to ``url`` and wait until the page shows ``until_text`` (the UI is a JS app), then a moment more."""
        self.call("Page.navigate", url=url)
        self.wait_for(until_text, timeout_s)

    def wait_for(self, text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.evaluate(f"document.body && document.body.innerText.includes({json.dumps(text)})"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the page never showed {text!r}")
            time.sleep(0.5)
        time.sleep(1.5)  # let the rest of the page render

    def click(self, text: str) -> None:
        """Click the innermost element whose text is ``text`` (a button, a tab, a select's face) as a mouse does."""
        box = self.evaluate(
            f"(() => {{ const e = {self._innermost(text)}; if (!e) return null; const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2] })()")
        if not box:
            raise RuntimeError(f"nothing reading {text!r} on the page")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def click_first(self, css: str) -> None:
        """Click the first visible element matching ``css`` as a mouse does."""
        box = self.evaluate(
            f"(() => {{ const e = [...document.querySelectorAll({json.dumps(css)})].find(e => e.offsetParent !== null);"
            " if (!e) return null; const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2] })()")
        if not box:
            raise RuntimeError(f"nothing matches {css!r} on the page")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    @staticmethod
    def _innermost(text: str) -> str:
        """JS: the visible element that reads exactly ``text``, else the one with the least text around it."""
        t = json.dumps(text)
        return ("(() => { const seen = [...document.querySelectorAll('body *')].filter(e => e.offsetParent !== null "
                f"&& e.innerText && e.innerText.includes({t})); const exact = seen.filter(e => e.innerText.trim() === "
                f"{t}); return (exact.length ? exact : seen).sort((a, b) => a.innerText.length - b.innerText.length)"
                "[exact.length ? exact.length - 1 : 0] })()")

    def scroll_to(self, text: str) -> None:
        """Scroll the element reading ``text`` to the top of the window."""
        self.evaluate(f"(() => {{ const e = {self._innermost(text)}; if (e) e.scrollIntoView(true) }})()")
        time.sleep(1)

    def shot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
        print(f"wrote {path}")

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def api(url: str, method: str, path: str, body: dict | None = None):
    request = urllib.request.Request(f"{url}{path}", method=method, data=json.dumps(body).encode() if body else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.load(r)


def wait_for_run(api_url: str, state_type: str, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = api(api_url, "POST", "/flow_runs/filter", {"flows": {"name": {"any_": ["stock-batch"]}}})
        mine = [r for r in runs if r["state"] and r["state"]["type"] == state_type]
        if mine:
            return mine[0]
        time.sleep(1)
    raise RuntimeError(f"no stock-batch run became {state_type}")


def morning(out: Path, tmp: Path) -> None:
    """The night's run on the workdir's own server, that server stopped once idle, brought back in the morning by
    ``microstock server start``, and the address the run printed at night opened in the UI (docs/OPERATIONS.md,
    "Every night, and the morning after"). The server is stopped before it returns."""
    wd = tmp / "night"
    cli = [sys.executable, "-c", "from flows.cli import main; main()"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "MICROSTOCK_", "PREFECT_"))}
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", COLUMNS="200")
    night = subprocess.run(cli + ["run", "--workdir", str(wd), "--count", "3"], capture_output=True, text=True,
                           timeout=600, env=dict(env, MICROSTOCK_SERVER_IDLE_SECONDS="5"))
    print(night.stdout[-600:])
    url = night.stdout.strip().splitlines()[-1].rsplit(" ", 1)[1]
    health = url.split("/runs/")[0] + "/api/health"  # not `server status`: that counts as a use of the server
    deadline = time.monotonic() + 120  # the night's server stops 5 s after the run: the page no longer opens
    while True:
        try:
            urllib.request.urlopen(health, timeout=2).close()
        except OSError:
            break
        if time.monotonic() > deadline:
            raise RuntimeError("the night's server did not stop when idle")
        time.sleep(2)
    try:
        back = subprocess.run(cli + ["server", "start", "--workdir", str(wd)], capture_output=True, text=True,
                              timeout=300, env=dict(env, MICROSTOCK_SERVER_IDLE_SECONDS="600"))
        print(back.stdout)
        auth = (wd / ".prefect" / "server.auth").read_text(encoding="utf-8").strip()
        browser = Browser(tmp / "chromium-morning")
        try:
            browser.call("Page.navigate", url=url.split("/runs/")[0] + "/")
            time.sleep(2)  # the UI keeps the login in localStorage, base64 (its Unauthenticated page does the same)
            browser.evaluate(f"localStorage.setItem('prefect-password', btoa({json.dumps(auth)}))")
            browser.open(url, "Completed")
            browser.shot(out / "morning-run-page.png")
        finally:
            browser.close()
    finally:
        subprocess.run(cli + ["server", "stop", "--workdir", str(wd)], capture_output=True, env=env, timeout=120)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.screenshots", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT})")
    ap.add_argument("--only", choices=["morning"], help="take only these shots")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="microstock-shots-"))
    if args.only == "morning":
        try:
            return morning(args.out, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    port = free_port()
    saved = dict(os.environ)
    os.environ.update(PREFECT_UI_API_URL=f"http://127.0.0.1:{port}/api", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    run = browser = None
    try:
        with LocalServer(tmp / "prefect", port) as server:
            wd = tmp / "data"
            wd.mkdir()
            (wd / "microstock.toml").write_text(
                "[review]\nenabled = true\ntimeout_hours = 1\n\n[agencies.dreamstime]\n"
                f'target = "ftp://contributor@127.0.0.1:{free_port()}/"\nattempts = 1\ntimeout_s = 2\n',
                encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "MICROSTOCK_"))}
            env.update(PREFECT_API_URL=server.api_url, PREFECT_HOME=str(tmp / "client"), COLUMNS="160")
            log = open(tmp / "run.log", "wb")
            run = subprocess.Popen([sys.executable, "-c", "from flows.cli import main; main()", "run",
                                    "--workdir", str(wd), "--count", "3", "--agency", "vecteezy",
                                    "--agency", "dreamstime"], env=env, stdout=log, stderr=subprocess.STDOUT)
            paused = wait_for_run(server.api_url, "PAUSED")
            names = sorted(p.name for p in (wd / "assets").glob("*.jpg"))
            page = f"{server.url}/runs/flow-run/{paused['id']}"
            browser = Browser(tmp / "chromium")
            browser.open(page, "waiting for review")
            browser.click("Details")
            browser.wait_for("answer in the Prefect UI")
            browser.scroll_to("Flow Run ID")
            browser.shot(args.out / "run-paused-for-review.png")
            browser.open(page, "Resume")
            browser.click("Resume")
            browser.wait_for("Reject")
            browser.shot(args.out / "review-form.png")
            browser.click_first('[role="dialog"] [role="combobox"], [role="dialog"] [aria-haspopup], '
                                '[role="dialog"] select')
            browser.wait_for(names[-1])
            browser.shot(args.out / "review-picker.png")
            browser.open(page, "Resume")
            browser.click("Resume")
            browser.wait_for("Reject")
            browser.click("Add item")
            browser.wait_for("Keywords")
            browser.scroll_to("Corrections (Optional)")
            browser.shot(args.out / "review-correction.png")

            from prefect.flow_runs import resume_flow_run  # the answer `microstock review reject NAME` gives
            from prefect.settings import PREFECT_API_URL, temporary_settings

            with temporary_settings({PREFECT_API_URL: server.api_url}):
                resume_flow_run(paused["id"], run_input={"reject": names[:1]})
            run.wait(240)
            browser.open(page, "Incomplete")
            browser.shot(args.out / "run-incomplete.png")  # the badge
            browser.click("Details")
            browser.wait_for("State Message")
            browser.scroll_to("Flow Run ID")
            browser.click("See More")
            time.sleep(1)
            browser.shot(args.out / "run-incomplete-message.png")
            artifacts = api(server.api_url, "POST", "/artifacts/filter",
                            {"artifacts": {"flow_run_id": {"any_": [paused["id"]]}, "key": {"any_": ["batch-assets"]}}})
            browser.call("Emulation.setDeviceMetricsOverride", width=2000, height=WINDOW[1], deviceScaleFactor=1,
                         mobile=False)  # the table is wide: every agency's column in view
            browser.open(f"{server.url}/artifacts/artifact/{artifacts[0]['id']}", "Fix first")
            browser.shot(args.out / "batch-assets.png")
            browser.call("Emulation.clearDeviceMetricsOverride")
            browser.open(f"{server.url}/dashboard", "Flow Runs")
            time.sleep(3)
            browser.shot(args.out / "dashboard.png")
            task_runs = api(server.api_url, "POST", "/task_runs/filter",
                            {"flow_runs": {"id": {"any_": [paused["id"]]}},
                             "task_runs": {"name": {"like_": "describe-"}}})
            print("describe task run's empirical_policy:", json.dumps(task_runs[0]["empirical_policy"]))
            browser.open(f"{server.url}/runs/task-run/{task_runs[0]['id']}", "Retry")
            browser.shot(args.out / "describe-task-run.png")
    finally:
        if browser is not None:
            browser.close()
        if run is not None and run.poll() is None:
            run.kill()
            run.wait()
        os.environ.clear()
        os.environ.update(saved)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
