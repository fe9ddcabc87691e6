"""The pages a person opens, in headless Chromium at 1280 x 900: each demo problem's HTML report and the
documentation site. Every page must load without console errors, decode every image, show its tables without
horizontal scrolling and not render blank (``make test-browser``; needs Debian's chromium and chromium-driver).

The reports are those of ``make demo`` with only each problem's hand-written backends, made here in a couple of
minutes; with ``BAYESZOO_DEMO_DIR`` pointing at a finished ``make demo`` output (``runs/demo``), that output's
reports are checked instead.
"""
from __future__ import annotations

import os
import pathlib

import pytest

from tests.helpers import browser
from bayeszoo import demo  # noqa: E402

pytestmark = pytest.mark.browser

DEMO_KEYS = list(demo.DEMOS)


@pytest.fixture(scope="session")
def driver():
    chrome = browser.start_driver()
    yield chrome
    chrome.quit()


@pytest.fixture(scope="session")
def demo_reports(tmp_path_factory) -> dict[str, str]:
    """Each demo problem's report.html: from ``BAYESZOO_DEMO_DIR`` if set, else made here."""
    given = os.environ.get("BAYESZOO_DEMO_DIR")
    if given:
        return {key: os.path.join(given, key, "report.html") for key in DEMO_KEYS}
    out = str(tmp_path_factory.mktemp("demo"))
    return {key: browser.make_demo_report(key, out) for key in DEMO_KEYS}


def _problems_text(problems: list[str]) -> str:
    return "\n  ".join([""] + problems)


# ---------------------------------------------------------------------------------- the checks themselves
def test_checks_catch_broken_pages(driver, tmp_path):
    """A page with each defect is reported for it, and a sound page is not."""
    good = ("<!DOCTYPE html><html><body><h1>A heading</h1><p>" + "Some words. " * 200 + "</p>"
            "<table><tr><td>1</td><td>2</td></tr></table>"
            "<img alt='dot' src='data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
            "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='></body></html>")
    wide = ("<!DOCTYPE html><html><body><p>" + "Words. " * 100 + "</p><div style='overflow-x:auto'><table>"
            "<tr>" + "<td>a&nbsp;long&nbsp;cell&nbsp;of&nbsp;numbers</td>" * 60 + "</tr></table></div></body></html>")
    broken = ("<!DOCTYPE html><html><body><p>" + "Words. " * 100 + "</p><table><tr><td>1</td></tr></table>"
              "<img alt='missing' src='no-such-file.png'><script>console.error('boom')</script></body></html>")
    blank = "<!DOCTYPE html><html><body></body></html>"
    pages = {}
    for name, text in {"good": good, "wide": wide, "broken": broken, "blank": blank}.items():
        (tmp_path / f"{name}.html").write_text(text)
        pages[name] = browser.check_page(driver, (tmp_path / f"{name}.html").as_uri(), min_tables=1)

    assert pages["good"] == []
    assert any("scrolls inside" in p for p in pages["wide"])
    assert any("outside the 1280 px viewport" in p for p in pages["wide"])
    assert any(p.startswith("console error") and "boom" in p for p in pages["broken"])
    assert any(p.startswith("image not decoded: 'missing'") for p in pages["broken"])
    assert any(p.startswith("the screenshot is blank") for p in pages["blank"])
    assert any(p.startswith("0 rendered tables") for p in pages["blank"])


# --------------------------------------------------------------------------------------- demo reports
@pytest.mark.parametrize("key", DEMO_KEYS)
def test_demo_report(driver, demo_reports, key):
    path = demo_reports[key]
    assert os.path.exists(path), f"no report for {key} at {path}"
    # the report has its comparison table (a second one for the family's scores) and embedded figures
    problems = browser.check_page(driver, pathlib.Path(path).resolve().as_uri(), tables="table",
                                   min_tables=2, min_images=2)
    assert not problems, f"{key} report:{_problems_text(problems)}"
    assert driver.find_element("css selector", "table.cmp").is_displayed()


# ------------------------------------------------------------------------------------ documentation site
@pytest.fixture(scope="session")
def site(tmp_path_factory) -> str:
    """The documentation site: ``BAYESZOO_SITE_DIR`` if set (a finished ``make docs``, as CI does), else built here
    from docs/ with the notebooks' saved outputs (not executed)."""
    given = os.path.abspath(os.environ["BAYESZOO_SITE_DIR"]) if os.environ.get("BAYESZOO_SITE_DIR") else None
    if given:
        if not os.path.isfile(os.path.join(given, "index.html")):
            pytest.fail(f"BAYESZOO_SITE_DIR={given} holds no built site (index.html): run `make docs` first")
        return given
    out = str(tmp_path_factory.mktemp("site"))
    browser.build_docs(out)
    return out


def test_docs_landing_page(driver, site):
    problems = browser.check_page(driver, pathlib.Path(site, "index.html").as_uri(), tables="article table")
    assert not problems, f"index.html:{_problems_text(problems)}"
    assert driver.find_element("css selector", "article h1").is_displayed()


def test_docs_api_page_of_fit(driver, site):
    page = browser.api_page(site, "bayeszoo.fit")
    problems = browser.check_page(driver, pathlib.Path(page).as_uri(), tables="article table")
    assert not problems, f"{os.path.relpath(page, site)}:{_problems_text(problems)}"
    # the function's signature is rendered, with its docstring below it
    signature = driver.find_element("id", "bayeszoo.fit")
    assert signature.is_displayed() and "backend" in signature.text
    docstring = driver.find_element("xpath", "//dt[@id='bayeszoo.fit']/following-sibling::dd[1]")
    assert docstring.is_displayed() and len(docstring.text) > 40


def test_docs_gallery_page(driver, site):
    pages = browser.gallery_pages(site)
    assert pages, "the gallery's index links to no page"
    figures = {}
    for page in pages:      # the first page, in the gallery's order, that shows a figure
        driver.get(pathlib.Path(page).as_uri())
        name = os.path.basename(page)
        figures[name] = driver.execute_script("return document.querySelectorAll('article img').length")
        if figures[name]:
            break
    else:
        pytest.fail(f"no gallery page shows a figure ({figures}): the notebooks in gallery/ are to be committed "
                    f"with their outputs")
    problems = browser.check_page(driver, pathlib.Path(page).as_uri(), tables="article table", min_images=1)
    assert not problems, f"{os.path.relpath(page, site)}:{_problems_text(problems)}"
