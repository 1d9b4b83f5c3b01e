"""Measure the built HTML book in a browser: nothing on a page wider than its box.

Usage::

    python tools/check_rendering.py [_build/html] [--pages GLOB ...] [--json OUT]

Opens the chapter pages (by default those of ``FRAMED`` in
``tools/reading_path.py``) in headless Chromium (Debian's ``chromium``; set
``CHROMIUM`` to use another binary) at 1280 px and at 400 px, waits for MathJax,
and counts on each page:

* ``displays``, ``displays_cut``: display equations, and those whose rendered
  math is wider than the box it sits in (or runs under its equation number);
  at 1280 px and at 400 px;
* ``code_cut``: code cells in view with a line wider than the code box (1280 px);
* ``outputs_cut``: printed outputs and tables wider than their box (1280 px);
* ``raw_tex``: TeX left as text on the page (``\\frac``, ``$x$``), outside math,
  code and the solutions' source;
* ``uncaptioned``: figures (images of cell outputs in view) without a caption.

The chapters of ``FRAMED`` fail on any of these at 1280 px, or on more than
5 % of their displays cut at 400 px; raw TeX fails on any page measured
(``tests/check_offline_html.py``, which ``make book`` runs, finds raw TeX on
every page without a browser). Exit status 1 on a failure.

The browser is driven over the DevTools protocol (tornado's websocket client,
which Jupyter installs), one browser for all pages.
"""

from __future__ import annotations

import argparse
import asyncio
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

WIDTHS = (1280, 400)
MAX_CUT_400 = 0.05

_MEASURE = r"""
(async () => {
  const t0 = Date.now();
  while (!(window.MathJax && MathJax.startup && MathJax.startup.promise)
         && Date.now() - t0 < 5000) {
    await new Promise(r => setTimeout(r, 50));
  }
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  if (document.fonts) { await document.fonts.ready; }
  await new Promise(r => setTimeout(r, 200));
  const art = document.querySelector('article.bd-article') || document.body;
  const short = el => (el.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 70);
  const hidden = el => el.closest('details') !== null && !el.closest('details').open;
  const out = {displays: 0, displays_cut: [], code: 0, code_cut: [],
               outputs: 0, outputs_cut: [], raw_tex: [], figures: 0,
               uncaptioned: []};
  for (const d of art.querySelectorAll('div.math')) {
    if (hidden(d)) continue;
    out.displays++;
    const m = d.querySelector('mjx-container');
    if (!m) { out.raw_tex.push(short(d)); continue; }
    const cs = getComputedStyle(d);
    const box = d.getBoundingClientRect();
    const left = box.left + parseFloat(cs.paddingLeft) - 1;
    const right = box.right - parseFloat(cs.paddingRight) + 1;
    let cut = m.scrollWidth > m.clientWidth + 1 || d.scrollWidth > d.clientWidth + 1;
    for (const part of m.querySelectorAll('mjx-math, mjx-linestack, mjx-mtable')) {
      const r = part.getBoundingClientRect();
      if (r.width > 0 && (r.right > right || r.left < left)) cut = true;
    }
    const no = d.querySelector('span.eqno');
    if (no) {
      const a = no.getBoundingClientRect();
      for (const part of m.querySelectorAll('mjx-math')) {
        const r = part.getBoundingClientRect();
        if (r.right > a.left && r.left < a.right && r.bottom > a.top && r.top < a.bottom) {
          cut = true;
        }
      }
    }
    if (cut) out.displays_cut.push((d.id || '') + ' ' + short(d));
  }
  for (const pre of art.querySelectorAll('div.cell_input pre, div.highlight pre')) {
    if (hidden(pre) || pre.closest('div.cell_output')) continue;
    out.code++;
    if (pre.scrollWidth > pre.clientWidth + 1) out.code_cut.push(short(pre));
  }
  for (const o of art.querySelectorAll('div.cell_output > div.output')) {
    if (hidden(o)) continue;
    out.outputs++;
    let cut = false;
    for (const el of [o, ...o.querySelectorAll('pre, table, div')]) {
      if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) cut = true;
    }
    if (cut) out.outputs_cut.push(short(o));
  }
  const skip = 'mjx-container, pre, code, script, style, div.math, ' +
               'details:not([open]), .MathJax, nav, .bd-sidebar, .bd-toc';
  const walker = document.createTreeWalker(art, NodeFilter.SHOW_TEXT);
  const tex = /\\(?:[A-Za-z]{2,}|[{}_^])|\$[^$\s][^$]*\$|\$\$/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest(skip)) continue;
    const s = n.textContent;
    if (tex.test(s)) out.raw_tex.push(s.replace(/\s+/g, ' ').trim().slice(0, 70));
  }
  for (const img of art.querySelectorAll('div.cell_output img')) {
    if (hidden(img) || img.closest('div.animation')) continue;   // a player's frame
    out.figures++;
    const fig = img.closest('figure');
    if (!(fig && fig.querySelector('figcaption'))) out.uncaptioned.push(img.src.split('/').pop());
  }
  return JSON.stringify(out);
})()
"""


def chromium_binary() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)  # type: ignore[return-value]
    raise SystemExit("check_rendering: no Chromium found; install Debian's package "
                     "(apt-get install chromium) or set CHROMIUM=/path/to/chrome")


class Browser:
    """One headless Chromium, driven over the DevTools protocol."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="mvkm-chromium-")
        self.proc = subprocess.Popen(
            [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu",
             "--hide-scrollbars", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--disable-extensions",
             "--allow-file-access-from-files", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.time() + 30
        while not port_file.is_file() or not port_file.read_text().strip():
            if time.time() > deadline or self.proc.poll() is not None:
                raise SystemExit("check_rendering: Chromium did not start")
            time.sleep(0.1)
        self.port = int(port_file.read_text().split()[0])
        self.ws = None
        self.msg_id = 0

    async def connect(self) -> None:
        from tornado.httpclient import AsyncHTTPClient
        from tornado.websocket import websocket_connect

        client = AsyncHTTPClient()
        resp = await client.fetch(f"http://127.0.0.1:{self.port}/json/list")
        pages = [t for t in json.loads(resp.body) if t.get("type") == "page"]
        self.ws = await websocket_connect(pages[0]["webSocketDebuggerUrl"], max_message_size=1 << 28)

    async def call(self, method: str, **params: object) -> dict:
        self.msg_id += 1
        my_id = self.msg_id
        await self.ws.write_message(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = await self.ws.read_message()
            if msg is None:
                raise RuntimeError("Chromium closed the connection")
            data = json.loads(msg)
            if data.get("id") == my_id:
                if "error" in data:
                    raise RuntimeError(f"{method}: {data['error']}")
                return data.get("result", {})

    async def measure(self, url: str, width: int) -> dict:
        await self.call("Emulation.setDeviceMetricsOverride", width=width, height=900,
                        deviceScaleFactor=1, mobile=False)
        await self.call("Page.navigate", url=url)
        for _ in range(200):                       # until the document has loaded
            res = await self.call("Runtime.evaluate", expression="document.readyState",
                                  returnByValue=True)
            if res.get("result", {}).get("value") == "complete":
                break
            await asyncio.sleep(0.05)
        res = await self.call("Runtime.evaluate", expression=_MEASURE, awaitPromise=True,
                              returnByValue=True, timeout=30000)
        return json.loads(res["result"]["value"])

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


def chapter_pages(html_root: Path) -> list[Path]:
    """The pages built from the book's chapters (and the intro and back matter)."""
    return sorted(p for p in (html_root / "book").rglob("*.html"))


async def _run(pages: list[Path], html_root: Path) -> dict[str, dict[int, dict]]:
    browser = Browser()
    try:
        await browser.connect()
        await browser.call("Page.enable")
        out: dict[str, dict[int, dict]] = {}
        for page in pages:
            key = str(page.relative_to(html_root / "book").with_suffix(""))
            out[key] = {w: await browser.measure(page.resolve().as_uri(), w) for w in WIDTHS}
        return out
    finally:
        browser.close()


def measure_pages(html_root: Path, patterns: list[str] | None = None) -> dict[str, dict[int, dict]]:
    """``{chapter: {width: measurements}}`` for the chapter pages under ``html_root``."""
    pages = chapter_pages(html_root)
    if patterns:
        pages = [p for p in pages
                 if any(fnmatch.fnmatch(str(p.relative_to(html_root / "book").with_suffix("")), g)
                        for g in patterns)]
    return asyncio.run(_run(pages, html_root))


def problems(key: str, m: dict[int, dict], framed: bool) -> list[str]:
    """What fails on one page: raw TeX anywhere; for a framed chapter, anything cut."""
    found = [f"raw TeX: {t!r}" for t in m[1280]["raw_tex"]]
    if framed:
        wide = m[1280]
        found += [f"display cut at 1280 px: {t}" for t in wide["displays_cut"]]
        found += [f"code line cut at 1280 px: {t}" for t in wide["code_cut"]]
        found += [f"output cut at 1280 px: {t}" for t in wide["outputs_cut"]]
        found += [f"figure without a caption: {t}" for t in wide["uncaptioned"]]
        narrow = m[400]
        if narrow["displays"] and len(narrow["displays_cut"]) > MAX_CUT_400 * narrow["displays"]:
            found.append(f"{len(narrow['displays_cut'])} of {narrow['displays']} displays cut at "
                         f"400 px (at most {MAX_CUT_400:.0%}): " + "; ".join(narrow["displays_cut"][:3]))
    return found


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", nargs="?", default="_build/html")
    ap.add_argument("--pages", nargs="*",
                    help="glob(s) of chapters, e.g. 'rkm/*' (default: the FRAMED chapters)")
    ap.add_argument("--json", help="write the measurements here")
    args = ap.parse_args(argv)
    from reading_path import FRAMED  # the chapters held to the frame

    root = Path(args.html)
    if not (root / "book").is_dir():
        raise SystemExit(f"{root} has no book/: build the book first (make book)")
    results = measure_pages(root, args.pages or sorted(FRAMED))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(f"{'page':26} {'displays':>8} {'cut@1280':>8} {'cut@400':>7} {'code':>5} "
          f"{'cut':>4} {'outputs':>7} {'cut':>4} {'rawTeX':>6} {'figures':>7} {'nocap':>5}")
    failed = {}
    for key, m in results.items():
        w, n = m[1280], m[400]
        print(f"{key:26} {w['displays']:8d} {len(w['displays_cut']):8d} {len(n['displays_cut']):7d} "
              f"{w['code']:5d} {len(w['code_cut']):4d} {w['outputs']:7d} {len(w['outputs_cut']):4d} "
              f"{len(w['raw_tex']):6d} {w['figures']:7d} {len(w['uncaptioned']):5d}")
        bad = problems(key, m, key in FRAMED)
        if bad:
            failed[key] = bad
    for key, bad in failed.items():
        for b in bad:
            print(f"{key}: {b}".encode("utf-8", "backslashreplace").decode("utf-8"))
    if failed:
        print(f"rendering check FAILED on {len(failed)} of {len(results)} pages")
        return 1
    print(f"rendering check passed: {len(results)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
