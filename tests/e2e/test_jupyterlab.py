"""A chapter opened in a real JupyterLab, run, and its Explore slider moved: the figure redraws.

This is the README's promise that a reader can execute a chapter and play with it. JupyterLab is
started on 127.0.0.1 with a throw-away workspace and settings (all cells rendered, no news fetched),
the chapter is a fresh copy of the committed notebook, and headless Chromium drives it: Run > Run
All Cells, wait until every code cell has run, press the right arrow on the first slider of the
Explore cell, and wait for the plotly figure above it to change. No request may leave the machine.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from reprobook.book.chapters import book_root, find

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

ROOT = book_root(Path(__file__).resolve().parents[2])
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: The chapter the README opens in JupyterLab.
SLUG = "h-pmd"
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}
SVG = "e => e.querySelector('.main-svg') ? e.querySelector('.main-svg').innerHTML : ''"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing in CI: .ci/run installs Debian's chromium")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    home = tmp_path_factory.mktemp("lab")
    for name, value in SETTINGS.items():
        path = home / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    work = home / "work"
    work.mkdir()
    shutil.copy(find(SLUG, ROOT).notebook, work / f"{SLUG}.ipynb")
    port, token = free_port(), "reprobook-e2e"
    env = {k: v for k, v in os.environ.items() if k != "REPROBOOK_STATIC"}
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser",
           f"--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--ServerApp.token={token}", f"--ServerApp.root_dir={work}",
           f"--LabApp.user_settings_dir={home / 'settings'}",
           f"--LabApp.workspaces_dir={home / 'workspaces'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(home / "lab.log", "wb")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start:\n" + (home / "lab.log").read_text()[-3000:])
    yield url, token
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_run_a_chapter_and_move_an_explore_slider(lab):
    from playwright.sync_api import sync_playwright

    url, token = lab
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        requests = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{url}/lab/tree/{SLUG}.ipynb?reset&token={token}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000, state="attached")
        page.wait_for_function("() => [...document.querySelectorAll('.jp-StatusBar-TextItem')]"
                               ".some(e => /Idle/.test(e.textContent))", timeout=90_000)
        page.click("li.lm-MenuBar-item:has-text('Run')")
        page.click("li.lm-Menu-item:has-text('Run All Cells')")
        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll("
            "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')];"
            " return p.length && p.every(e => /\\[\\d+\\]/.test(e.textContent)); }",
            timeout=300_000, polling=1000)
        notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        errors = notebook.locator(".jp-OutputArea-output[data-mime-type="
                                  "'application/vnd.jupyter.error']")
        assert errors.count() == 0, "a cell raised:\n" + errors.first.inner_text()[:2000]
        cell = notebook.locator(".jp-CodeCell", has_text="explore(").last
        cell.scroll_into_view_if_needed()
        figure = cell.locator(".js-plotly-plot").first
        figure.wait_for(timeout=60_000)
        before = figure.evaluate(SVG)
        cell.locator(".widget-slider .noUi-handle").first.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        deadline = time.time() + 60
        while time.time() < deadline and figure.evaluate(SVG) == before:
            time.sleep(0.5)
        shots = ROOT / "_build" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / f"jupyterlab-{SLUG}.png"))
        changed = figure.evaluate(SVG) != before
        browser.close()
    assert changed, "moving the Explore slider did not redraw the figure"
    offsite = [u for u in requests if not u.startswith((url, "ws://127.0.0.1", "data:", "blob:"))]
    assert not offsite, f"JupyterLab made network requests: {offsite[:5]}"
