"""Headless Chromium for the browser tests: the driver, the page checks, and the pages to check.

The driver is Debian's ``chromium`` and ``chromedriver`` found on PATH, both given to Selenium by path, so
Selenium Manager never looks for (or downloads) a browser or a driver of its own.
"""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import ROOT

WIDTH, HEIGHT = 1280, 900
MIN_SCREENSHOT_STD = 8.0   # grey-level sd of the viewport: a blank page is ~0, a page of text and figures 30+
INSTALL_HINT = ("the browser tests need Debian's headless Chromium and its driver on PATH: "
                "`apt-get install chromium chromium-driver` (`.ci/run` installs them when missing)")

# Waits for every <img>, lazy ones included, and returns what each decoded to; a broken one keeps naturalWidth 0.
_IMAGES_JS = """
const done = arguments[arguments.length - 1];
const images = Array.from(document.images);
images.forEach(img => { if (img.loading === "lazy") img.loading = "eager"; });
Promise.all(images.map(img => img.decode().then(() => "", err => String(err)))).then(errors => done(
    images.map((img, i) => ({src: (img.currentSrc || img.src || "").slice(0, 120), alt: img.alt || "",
                             width: img.naturalWidth, height: img.naturalHeight, error: errors[i]}))));
"""

# The page's horizontal extent and every rendered table's box; a table's scrolling ancestors must not scroll.
_LAYOUT_JS = """
const tables = Array.from(document.querySelectorAll(arguments[0])).filter(t => t.getClientRects().length > 0);
return {
  innerWidth: window.innerWidth,
  scrollWidth: document.documentElement.scrollWidth,
  tables: tables.map(t => {
    const r = t.getBoundingClientRect();
    let scrolls = [];
    for (let el = t.parentElement; el && el !== document.body; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible")
        scrolls.push((el.className || el.tagName) + " " + el.scrollWidth + " > " + el.clientWidth);
    }
    return {name: (t.className || t.id || "table") + " #" + tables.indexOf(t), left: r.left, right: r.right,
            width: r.width, height: r.height, scrolls: scrolls};
  })
};
"""


def browser_paths() -> tuple[str, str]:
    """(chromium, chromedriver) found on PATH; the test fails, saying how to install them, when either is not."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    missing = [name for name, path in (("chromium", browser), ("chromedriver", driver)) if path is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found on PATH; {INSTALL_HINT}", pytrace=False)
    return browser, driver


def start_driver():
    """A headless Chromium at 1280 x 900 that records the console (``driver.get_log("browser")``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = browser_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    # the pages are local files: no background networking (update checks, sync) on a machine without a network
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
                f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    chrome.set_page_load_timeout(60)
    chrome.set_script_timeout(60)
    return chrome


def check_page(driver, url: str, tables: str = "table", min_tables: int = 0, min_images: int = 0) -> list[str]:
    """Open ``url`` and return its problems (empty when it passes): console errors, images that did not decode,
    a page or a table (CSS selector ``tables``) wider than the 1280 px window, a blank screenshot, fewer rendered
    tables or images than expected."""
    from PIL import Image

    driver.get_log("browser")          # drop what earlier pages logged
    driver.get(url)
    problems = []
    images = driver.execute_async_script(_IMAGES_JS)
    layout = driver.execute_script(_LAYOUT_JS, tables)
    errors = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
    problems += [f"console error: {entry.get('message', '')[:300]}" for entry in errors]

    problems += [f"image not decoded: {img['alt'] or img['src']!r} ({img['error'] or 'naturalWidth 0'})"
                 for img in images if img["width"] <= 0]
    if len(images) < min_images:
        problems.append(f"{len(images)} images, expected at least {min_images}")

    if layout["scrollWidth"] > layout["innerWidth"]:
        problems.append(f"the page scrolls horizontally: scrollWidth {layout['scrollWidth']} > "
                        f"innerWidth {layout['innerWidth']}")
    if len(layout["tables"]) < min_tables:
        problems.append(f"{len(layout['tables'])} rendered tables matching {tables!r}, expected at least {min_tables}")
    for table in layout["tables"]:
        if table["width"] <= 0 or table["height"] <= 0:
            problems.append(f"table {table['name']} has an empty box ({table['width']} x {table['height']})")
        if table["left"] < 0 or table["right"] > layout["innerWidth"]:
            problems.append(f"table {table['name']} spans x = {table['left']:.0f}..{table['right']:.0f}, "
                            f"outside the {layout['innerWidth']} px viewport")
        problems += [f"table {table['name']} scrolls inside {where}" for where in table["scrolls"]]

    shot = np.asarray(Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("L"), dtype=float)
    if shot.std() <= MIN_SCREENSHOT_STD:
        problems.append(f"the screenshot is blank: grey-level sd {shot.std():.2f} <= {MIN_SCREENSHOT_STD}")
    return problems


# ------------------------------------------------------------------------------------------- the pages
def demo_report_backends(key: str) -> list[str]:
    """The demo's backends for problem ``key`` less the generic ones (PyMC / NumPyro NUTS, ADVI), which take
    most of ``make demo``'s minutes: the family's own hand-written algorithms."""
    import bayeszoo as bz
    from bayeszoo import demo

    spec = demo.DEMOS[key]
    families = bz.backends(spec["model"](), details=True).drop_duplicates("backend").set_index("backend")["family"]
    return [name for name in spec["backends"] if families[name] != "generic"]


def make_demo_report(key: str, out: str) -> str:
    """``make demo``'s report of problem ``key`` (its data, sizes, options and catalogue reference) with only
    its hand-written backends, saved under ``out/key``; the report's path."""
    import bayeszoo as bz
    from bayeszoo import catalogue, demo

    spec = demo.DEMOS[key]
    model, data = spec["model"](), spec["data"]()
    backends = demo_report_backends(key)
    options = {name: opts for name, opts in spec["options"].items() if name in backends}
    cmp = bz.compare(model, data, backends=backends, reference=catalogue.lookup(model, data), seed=0,
                     progress=False, options=options, **spec["sizes"])
    cmp.save(os.path.join(out, key))
    return os.path.join(out, key, "report.html")


def build_docs(out: str, timeout: float = 1200) -> float:
    """Build the Sphinx site into ``out`` with the notebooks' committed outputs (no execution); its seconds."""
    start = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-D", "nb_execution_mode=off",
                          os.path.join(ROOT, "docs"), out], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout)
    if run.returncode != 0:
        pytest.fail(f"the documentation build failed ({run.returncode}):\n{run.stderr[-4000:]}", pytrace=False)
    return time.perf_counter() - start


def api_page(site: str, name: str) -> str:
    """The page of the built site ``site`` that documents the Python object ``name``, from the site's
    ``objects.inv``; fails when the site does not document it."""
    from sphinx.util.inventory import InventoryFile

    with open(os.path.join(site, "objects.inv"), "rb") as fh:
        inventory = InventoryFile.load(fh, "", lambda base, uri: uri)
    for kind, objects in inventory.items():
        if kind.startswith("py:") and name in objects:
            item = objects[name]
            uri = item.uri if hasattr(item, "uri") else item[2]   # a tuple before Sphinx 8.2
            return os.path.join(site, uri.split("#")[0])
    documented = sorted(obj for kind, objects in inventory.items() if kind.startswith("py:") for obj in objects)
    pytest.fail(f"the site documents no Python object {name!r} (it documents {len(documented)}: "
                f"{', '.join(documented[:20]) or 'none'})", pytrace=False)


def gallery_pages(site: str) -> list[str]:
    """The pages the gallery's index links to, in its order."""
    import re

    index = os.path.join(site, "gallery", "index.html")
    with open(index, encoding="utf-8") as fh:
        text = fh.read()
    article = re.search(r"<article.*?</article>", text, re.S)
    links = re.findall(r'href="([^"#:?]+\.html)"', article.group(0) if article else text)
    pages = []
    for link in links:
        path = os.path.normpath(os.path.join(os.path.dirname(index), link))
        if os.path.dirname(path) == os.path.dirname(index) and path != index and path not in pages:
            pages.append(path)
    return pages
