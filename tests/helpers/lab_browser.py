"""Helpers for the real-browser JupyterLab tests (imported by ``conftest.py`` and the tests; a
unique module name because several test directories have a ``conftest.py``).

Recipes from ``reference/notebook_and_browser_testing.md`` (measured on this machine):

* server flags: ``--allow-root`` (mandatory as root), ``--IdentityProvider.token=''``,
  ``--ServerApp.password=''``, ``--LabApp.extension_manager=readonly`` (no PyPI lookups),
  temporary ``JUPYTER_CONFIG_DIR`` / ``JUPYTER_RUNTIME_DIR`` / ``JUPYTERLAB_WORKSPACES_DIR``, and an
  ``overrides.json`` that switches the news toast off;
* Chromium: Debian's binary as ``executable_path`` (``playwright install`` downloads are blocked);
* the kernel is ready when the status bar says ``(ipykernel) | Idle``: waiting for the execution
  indicator alone raced the kernel connection (3 of 10 runs executed nothing).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import geprof_nb

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}
#: Switches off the "get notified about official Jupyter news?" toast.
NEWS_OVERRIDES = {"@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}}
#: Tallest window :func:`screenshot` makes to fit an element.
MAX_SHOT_HEIGHT = 1800
SERVER_START_TIMEOUT_S = 60
KERNEL_IDLE_TEXT = "(ipykernel) | Idle"
OUTPUT = ".jp-OutputArea-output"

try:
    import playwright.sync_api as playwright_api
except ImportError:  # pragma: no cover - depends on the environment
    playwright_api = None

#: Why the browser tests cannot run here ("" when they can).
SKIP_REASON = ("playwright is not installed (pip install playwright)" if playwright_api is None else
               "Debian's chromium is not installed (apt-get install -y chromium)" if CHROMIUM is None else "")


# ----------------------------------------------------------------------------------------- server
@dataclass
class Lab:
    """A running JupyterLab server."""

    url: str
    root: Path
    log: Path
    proc: subprocess.Popen

    def notebook_url(self, relpath: str, workspace: str) -> str:
        """The URL that opens ``relpath`` in its own workspace (no tabs restored from other tests)."""
        return f"{self.url}/lab/workspaces/{workspace}/tree/{relpath}"

    def stop(self) -> None:
        """SIGTERM the server (it shuts its kernels down), SIGKILL if it does not exit."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(base: Path) -> Lab:
    """Start ``jupyter lab`` with its root in ``base/root`` and wait until /api/status answers."""
    root, settings = base / "root", base / "lab-settings"
    root.mkdir()
    settings.mkdir()
    (settings / "overrides.json").write_text(json.dumps(NEWS_OVERRIDES))
    # kernels import the geprof_nb this test process imported (its checkout, not another install)
    package_root = str(Path(geprof_nb.__file__).resolve().parents[1])
    pythonpath = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(base / "jcfg"), JUPYTER_RUNTIME_DIR=str(base / "jrt"),
               JUPYTERLAB_WORKSPACES_DIR=str(base / "jws"), PYTHONPATH=pythonpath, PYTHONUNBUFFERED="1")
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
           "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
           "--LabApp.extension_manager=readonly",
           # overrides.json from a temporary settings dir, not written into <venv>/share/jupyter/lab/settings
           f"--LabApp.app_settings_dir={settings}"]
    log = base / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    lab = Lab(f"http://127.0.0.1:{port}", root, log, proc)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(f"{lab.url}/api/status", timeout=2) as r:
                if r.status == 200:
                    return lab
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            lab.stop()
            raise RuntimeError(f"jupyter lab did not answer /api/status in {SERVER_START_TIMEOUT_S} s:\n"
                               f"{log.read_text(errors='replace')}")
        time.sleep(0.2)


# ------------------------------------------------------------------------------------ notebooks
def write_notebook(path: Path, sources: list[str]) -> None:
    """A notebook of code cells for the Python 3 kernel."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nbformat.write(nb, path)


def open_notebook(page, lab: Lab, relpath: str, workspace: str) -> None:
    """Open a notebook and wait until its kernel is connected and idle."""
    page.goto(lab.notebook_url(relpath, workspace))
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(f"() => document.body.innerText.includes({KERNEL_IDLE_TEXT!r})", timeout=60_000)
    # collapse the left sidebar (file browser): more room for the outputs and the screenshots
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current.count():
        current.first.click()


def run_all(page) -> None:
    """Run > Run All Cells."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.click("li[data-command='runmenu:run-all']")


def wait_all_executed(page, timeout_ms: int = 60_000) -> None:
    """Wait until every code cell of the notebook shows an execution count ``[n]:`` and the kernel is
    idle, or until a cell failed (Run All stops there: see :func:`error_outputs`)."""
    page.wait_for_function(
        """(idle) => {
            if (!document.body.innerText.includes(idle)) return false;
            const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
            const failed = [...document.querySelectorAll(
                ".jp-Notebook .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")]
                .some(e => e.innerText.includes('Traceback (most recent call last)'));
            return prompts.length > 0 && (prompts.every(p => /\\[\\d+\\]/.test(p.textContent)) || failed);
        }""",
        arg=KERNEL_IDLE_TEXT, timeout=timeout_ms,
    )


@contextmanager
def executed_notebook(browser_context, lab: Lab, name: str, sources: list[str], timeout_ms: int = 180_000):
    """A page with the notebook ``name``.ipynb of code cells ``sources`` written into the lab, opened and run to
    its end without a traceback; every dialog it opens is recorded in ``page.dialogs`` and dismissed; closed on
    exit."""
    write_notebook(lab.root / f"{name}.ipynb", sources)
    page = browser_context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append((d.type, d.message)), d.dismiss()))
    try:
        open_notebook(page, lab, f"{name}.ipynb", name)
        run_all(page)
        wait_all_executed(page, timeout_ms=timeout_ms)
        assert error_outputs(page) == []
        yield page
    finally:
        page.close()


def cell(page, index: int):
    """The ``index``-th cell (all cell kinds) of the open notebook."""
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def execution_count(page, index: int) -> str:
    return cell(page, index).locator(".jp-InputPrompt").inner_text().strip()


def rerun_cell(page, index: int, timeout_ms: int = 60_000) -> None:
    """Select cell ``index`` (command mode), run it with Shift+Enter and wait for its new execution count."""
    before = execution_count(page, index)
    cell(page, index).locator(".jp-InputPrompt").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(
        """([i, before]) => {
            const p = document.querySelectorAll('.jp-Notebook .jp-Cell')[i].querySelector('.jp-InputPrompt');
            const t = p.textContent.trim();
            return /\\[\\d+\\]/.test(t) && t !== before;
        }""",
        arg=[index, before], timeout=timeout_ms,
    )


def error_outputs(page) -> list[str]:
    """Texts of the tracebacks shown in the open notebook."""
    return page.eval_on_selector_all(
        f".jp-Notebook {OUTPUT}[data-mime-type='application/vnd.jupyter.stderr']",
        "els => els.map(e => e.innerText).filter(t => t.includes('Traceback (most recent call last)'))")


def screenshot(page, path: Path, element: str | None = None, fit: bool = False) -> None:
    """A full-page screenshot, with the top of ``element`` scrolled to the top of the notebook first.

    ``fit``: make the window tall enough for the whole element (up to :data:`MAX_SHOT_HEIGHT`), then
    restore it (JupyterLab scrolls inside the notebook, so a full-page shot is one window).
    """
    size = page.viewport_size

    def scroll_to_element() -> None:
        page.locator(element).first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(150)  # let the notebook's lazy rendering catch up with the scroll

    try:
        if element is not None:
            scroll_to_element()
            if fit:  # measured once on screen: off-screen cells are not laid out
                box = page.locator(element).first.bounding_box()
                notebook = page.locator(".jp-NotebookPanel-notebook").first.bounding_box()
                if box and notebook:
                    chrome = size["height"] - notebook["height"]  # menus, toolbar and status bar
                    height = int(min(MAX_SHOT_HEIGHT, max(size["height"], box["height"] + chrome + 40)))
                    page.set_viewport_size({"width": size["width"], "height": height})
                    scroll_to_element()
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)
    finally:
        if page.viewport_size != size:
            page.set_viewport_size(size)


# ------------------------------------------------------------------------------ geprof output
def explorer_tab(cell_locator, title: str, timeout_ms: int = 30_000):
    """Select the explorer tab ``title`` in a cell's output; returns its content box once built
    (tabs other than Summary are built the first time they are selected)."""
    explorer = cell_locator.locator(".geprof-explorer").first
    explorer.locator(".lm-TabBar-tab", has_text=title).first.click()
    slug = "geprof-tab-" + title.lower().replace("/", "-").replace(" ", "-")
    pane = explorer.locator(f".{slug}").first
    pane.wait_for(state="visible", timeout=timeout_ms)
    cell_locator.page.wait_for_function("el => el.textContent.trim().length > 0", arg=pane.element_handle(),
                                        timeout=timeout_ms)
    return pane
