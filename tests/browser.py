"""The served app and a headless Chromium, for the browser tests and the screenshots script.

    with served_app("sqlite:///runs.db") as base, chrome() as driver:
        driver.get(f"{base}/network?run=RUN_ID")
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)


def available() -> bool:
    """Whether Chromium and its driver are installed (apt-get install chromium chromium-driver)."""
    return bool(CHROMIUM and CHROMEDRIVER)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served_app(db_url: str, log: Path | None = None, timeout: float = 90.0, flags: tuple[str, ...] = (),
               root: Path = ROOT, started: Callable[[subprocess.Popen], None] | None = None,
               warm: bool = True, port: int | None = None) -> Iterator[str]:
    """The app on `db_url` as `societas app` serves it (`python -m app_pages.serve`: its pages' modules imported before
    it listens; `warm=False`, or a checkout without that launcher: a plain `streamlit run app.py`), with FLAGS
    (--allow-write, --allow-code) on a free local port, from `root` (this checkout's app by default); yields its base
    URL; stopped on exit. `started` is handed the server's process once it answers (the benchmark reads its CPU time);
    `port`: that port rather than a free one (a browser that opened an app there before has its files cached)."""
    port = port or _free_port()
    log = log or Path(tempfile.mkdtemp(prefix="societas-app-")) / "streamlit.log"
    out = open(log, "w")
    launcher = ["-m", "app_pages.serve"] if warm and (root / "app_pages" / "serve.py").exists() else ["-m", "streamlit", "run"]
    server = subprocess.Popen(
        [sys.executable, *launcher, str(root / "app.py"), "--server.headless", "true", "--server.port",
         str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", "--", "--db", db_url, *flags],
        cwd=root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).status == 200:
                    break
            except OSError:
                pass
            if server.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"the app did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        if started is not None:
            started(server)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
        out.close()


@contextmanager
def chrome(width: int = 1400, height: int = 1800) -> Iterator[Any]:
    """A headless Chromium driven by Selenium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/lib/chromium/chromium" if os.path.exists("/usr/lib/chromium/chromium") else CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, url: str, heading: str, *, charts: bool = True, timeout: float = 90.0,
              charts_required: bool = True, settle: float = 0.8, text: bool = True) -> str:
    """Load `url`, wait for an h1 containing `heading`, for the app to stop running and (if `charts`) for a chart to
    be drawn (a page that may have none: `charts_required=False` waits a little, then goes on); returns its text
    (`text=False`: "", for a timing: Selenium reads the text of the whole page in the browser, a tenth of a second
    and more of its CPU on a page with tables)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    driver.get(url)
    wait.until(ec.text_to_be_present_in_element((By.TAG_NAME, "h1"), heading))
    idle(driver, timeout)
    if charts:
        from selenium.common.exceptions import TimeoutException

        try:
            WebDriverWait(driver, timeout if charts_required else 8).until(lambda d: d.find_elements(
                By.CSS_SELECTOR, "[data-testid='stVegaLiteChart'] canvas, [data-testid='stVegaLiteChart'] svg"))
        except TimeoutException:
            if charts_required:
                raise
    time.sleep(settle)  # let the charts finish drawing
    return driver.find_element(By.TAG_NAME, "body").text if text else ""


def idle(driver: Any, timeout: float = 90.0) -> None:
    """Wait until the app's script is no longer running (Streamlit's status widget gone)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    time.sleep(0.3)
    WebDriverWait(driver, timeout).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, "[data-testid='stStatusWidget']"))


def metrics(driver: Any) -> dict[str, str]:
    """label -> value of every st.metric on the page."""
    from selenium.webdriver.common.by import By

    out = {}
    for m in driver.find_elements(By.CSS_SELECTOR, "[data-testid='stMetric']"):
        label = m.find_elements(By.CSS_SELECTOR, "[data-testid='stMetricLabel']")
        value = m.find_elements(By.CSS_SELECTOR, "[data-testid='stMetricValue']")
        if label and value:
            out[label[0].text.strip()] = value[0].text.strip()
    return out


def full_screenshot(driver: Any, path: Path, width: int = 1400) -> Path:
    """A PNG of the whole page (the window grown to the page's height, at most 8000 px)."""
    height = driver.execute_script(
        "const m = document.querySelector('[data-testid=\"stMainBlockContainer\"]');"
        "return m ? m.getBoundingClientRect().height + 160 : document.body.scrollHeight;")
    driver.set_window_size(width, min(8000, max(900, int(height) + 80)))
    time.sleep(0.6)
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
