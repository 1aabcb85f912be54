"""The built book in headless Chromium: every plotly figure draws, and no page touches the network.

Needs `reprobook run --all` and `reprobook book` first (`make test` runs them before this).
Screenshots land in `_build/screenshots/` for a person to look at.
"""
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

from reprobook.book.chapters import book_root, discover

pytestmark = pytest.mark.e2e

ROOT = book_root(Path(__file__).resolve().parents[2])
HTML = ROOT / "_build" / "html" / "smoke"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server():
    if not (HTML / "index.html").exists():
        pytest.fail("the book is not built: run `reprobook book` first (make test does)")
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing in CI: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def pages():
    out = [("book/dashboard.html", "dashboard"), ("book/parts/kernels.html", "part-kernels")]
    out += [(f"notebooks/{c.part}/{c.slug}.html", c.slug) for c in discover(ROOT)]
    return out


@pytest.mark.parametrize("path,name", pages())
def test_page_draws_offline(server, browser, path, name):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
            if r.status >= 400 and not r.url.endswith("favicon.ico") else None)
    page.goto(f"{server}/{path}", wait_until="load")
    if page.locator("article span.math").count():  # formulas in the text are typeset (offline)
        # wait until MathJax has typeset everything: the fonts it asks for come late, and a page
        # closed earlier hides a missing one (\mathcal once 404'd only now and then)
        page.wait_for_function("() => window.MathJax && MathJax.Hub && MathJax.Hub.queue"
                               " && MathJax.Hub.queue.pending === 0 && document.querySelector("
                               "'article .MathJax, article mjx-container')", timeout=30_000)
    page.wait_for_timeout(1500)  # late requests (fonts, MathJax pieces) are caught too
    figures = page.locator("div.rb-plotly")
    n = figures.count()
    if n:
        page.wait_for_function(
            "() => [...document.querySelectorAll('div.rb-plotly')]"
            ".every(d => d.querySelector('svg.main-svg'))", timeout=30_000)
    drawn = page.evaluate("() => [...document.querySelectorAll('div.rb-plotly')]"
                          ".filter(d => d.querySelector('svg.main-svg')).length")
    shots = ROOT / "_build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=False)
    offsite = [u for u in requests if not u.startswith((server, "data:", "blob:", "about:"))]
    page.close()
    assert not offsite, f"{path} made network requests: {offsite[:5]}"
    assert not errors, f"{path}: JavaScript errors or missing files: {errors[:3]}"
    if path.startswith("notebooks/"):
        assert n >= 1, f"{path} has no plotly figure"
    assert drawn == n, f"{path}: only {drawn} of {n} plotly figures drew"
