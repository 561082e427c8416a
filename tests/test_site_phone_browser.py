"""The built site on a 390 px phone, in headless Debian chromium: no page is wider than the
viewport (wide tables and code blocks scroll inside their own box), and an entry page leads with
its short title, the exact error line right below. Screenshots of the home page and one entry
page at that width go to .artifacts/ (CI keeps them; .ci/run checks they exist).

Needs `chromium`, `chromium-driver` (apt) and `selenium`: site_src/install-chromium.sh.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.site_src import browser
from kvkb.validate import load_valid_kb

pytestmark = pytest.mark.browser

ARTIFACTS = REPO_ROOT / ".artifacts"
WIDTH = browser.PHONE["width"]
SHOT_ENTRY = "max-model-len-exceeds-kv-cache"  # an entry with every part: tabs, tables, code, runs


@pytest.fixture(scope="module")
def entries():
    return load_valid_kb(kb_dir())


@pytest.fixture(scope="module")
def site(browser_site):
    return browser_site


@pytest.fixture(scope="module")
def phone(site):
    with browser.serve(site) as base, browser.chromium(offline=True) as driver:
        browser.emulate_phone(driver)
        yield base, driver


def site_pages(site: Path) -> list[str]:
    """Every page of the built site, as a path under the base URL ('' is the home page)."""
    pages = []
    for html in sorted(site.rglob("index.html")):
        rel = html.parent.relative_to(site)
        if rel.parts and rel.parts[0] in ("assets", "search", "kvkb-runtime"):
            continue
        pages.append("" if rel == Path(".") else rel.as_posix() + "/")
    return pages


def wider_than_the_phone(driver) -> dict | None:
    """The overflow measurement when the page scrolls sideways, else None."""
    got = browser.overflow(driver)
    assert got["viewport"] == WIDTH, f"the phone viewport is {got['viewport']} px, not {WIDTH}"
    return got if got["scrollWidth"] > got["viewport"] else None


# A table that scrolls inside its own box keeps the page within the phone, but the columns past its
# right edge are out of sight: on the home page and the entry pages (tables of our own making) none may.
_CUT_TABLES_JS = r"""
return [...document.querySelectorAll("article table, article .md-typeset__table, article .md-typeset__scrollwrap")]
  .filter(t => t.scrollWidth > t.clientWidth + 1)
  .map(t => ({scrollWidth: t.scrollWidth, clientWidth: t.clientWidth,
              text: (t.querySelector("th, td") || t).textContent.trim().slice(0, 40)}));
"""


# What a reader opens: every collapsed block (details: the exact lines, the run logs) and every
# content tab (CLI / Python / env), drawn at once so their contents are measured too.
_OPEN_ALL_JS = r"""
document.querySelectorAll("details").forEach(d => { d.open = true; });
const style = document.createElement("style");
style.textContent = ".md-typeset .tabbed-set > .tabbed-content > .tabbed-block { display: block !important; }";
document.head.appendChild(style);
return document.querySelectorAll("details, .tabbed-block").length;
"""


def open_everything(driver) -> int:
    """Open every collapsed block and show every tab of the loaded page; how many there were."""
    return driver.execute_script(_OPEN_ALL_JS)


def tables_cut_off(driver) -> list[dict]:
    """The tables of the loaded page whose columns run past their own box (sideways scroll)."""
    return driver.execute_script(_CUT_TABLES_JS)


def test_the_measurement_sees_a_table_cut_off_at_the_right(phone):
    """The instrument: the home page's tables fit; a table with a 600 px cell is reported."""
    base, driver = phone
    driver.get(base)
    assert driver.find_elements("css selector", "article .md-typeset__table")
    assert tables_cut_off(driver) == []
    driver.execute_script("document.querySelector('article .md-typeset__table td').innerHTML ="
                          " '<div style=\"width: 600px\">x</div>'")
    assert len(tables_cut_off(driver)) == 1


def test_the_measurement_sees_a_page_that_is_too_wide(phone):
    """The instrument itself: a 600 px element on a 390 px page is reported, with the element."""
    base, driver = phone
    driver.get(base)
    assert wider_than_the_phone(driver) is None
    driver.execute_script("const d = document.createElement('div'); d.id = 'too-wide'; d.style.width = '600px';"
                          "d.textContent = 'x'; document.querySelector('article').appendChild(d)")
    got = wider_than_the_phone(driver)
    assert got and got["scrollWidth"] >= 600 - 20 and any(o["el"].startswith("div#too-wide") for o in got["offenders"]), got


def test_the_measurement_sees_inside_collapsed_blocks_and_hidden_tabs(phone, entries):
    """Opened, a collapsed block's or a hidden tab's too-wide content is measured; closed, it is not."""
    base, driver = phone
    driver.get(f"{base}errors/{SHOT_ENTRY if SHOT_ENTRY in entries else sorted(entries)[0]}/")
    assert wider_than_the_phone(driver) is None
    driver.execute_script("for (const box of [document.querySelector('details:not([open])'),"
                          " document.querySelector('.tabbed-block:not(:first-child)')]) {"
                          " const d = document.createElement('div'); d.style.width = '600px'; d.className = 'too-wide';"
                          " d.textContent = 'x'; box.appendChild(d); }")
    assert wider_than_the_phone(driver) is None  # both are out of sight
    assert open_everything(driver) >= 2
    got = wider_than_the_phone(driver)
    assert got and sum(o["el"] == "div.too-wide" for o in got["offenders"]) == 2, got


def test_no_page_is_wider_than_a_phone(phone, site, entries):
    base, driver = phone
    pages = site_pages(site)
    # the list at least: the home page, every entry page, the diagnose page, the calculator
    required = {"", "diagnose/", *(f"errors/{eid}/" for eid in entries)}
    if (site / "fit" / "index.html").exists():
        required.add("fit/")
    assert required <= set(pages), sorted(required - set(pages))
    wide, cut = {}, {}
    for page in pages:
        driver.get(base + page)
        if got := wider_than_the_phone(driver):
            wide[page or "/"] = (got["scrollWidth"], got["offenders"][:4])
        if open_everything(driver) and (got := wider_than_the_phone(driver)):
            wide[f"{page or '/'} (opened)"] = (got["scrollWidth"], got["offenders"][:4])
        if (page == "" or page.startswith("errors/")) and (tables := tables_cut_off(driver)):
            cut[page or "/"] = tables
    assert not wide, f"pages wider than {WIDTH} px (scrollWidth, elements past the right edge): {wide}"
    assert not cut, f"tables whose columns run past a {WIDTH} px phone's screen (they scroll sideways): {cut}"


def test_the_diagnose_page_with_an_answer_fits_a_phone(phone):
    """The answer (fix commands, evidence lines) is drawn after the page loads: measure it too."""
    base, driver = phone
    browser.open_diagnose(driver, base)
    shown = browser.diagnose(driver, (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_text())
    assert shown["state"] == "done" and shown["matches"], shown
    got = wider_than_the_phone(driver)
    assert got is None, got


def test_the_calculator_with_a_result_fits_a_phone(phone, site):
    base, driver = phone
    if not (site / "fit" / "index.html").exists():
        pytest.skip("the site has no fit page (kvkb.fit is not installed)")
    driver.get(base + "fit/")
    assert browser.wait_state(driver, "kvkb-fit-result", ("done", "error"), timeout=120) == "done"
    got = wider_than_the_phone(driver)
    assert got is None, got


def test_an_entry_page_leads_with_its_short_title_then_the_exact_error(phone, entries):
    from selenium.webdriver.common.by import By

    base, driver = phone
    for eid in sorted(entries):
        entry = entries[eid]
        driver.get(f"{base}errors/{eid}/")
        h1 = driver.find_element(By.CSS_SELECTOR, "article h1")
        assert h1.text.removesuffix("¶").strip() == entry.short_title, eid
        below = driver.execute_script("return arguments[0].nextElementSibling", h1)
        assert "kvkb-error-line" in below.get_attribute("class"), eid
        assert " ".join(below.text.split()) == " ".join(entry.title.split()), eid
        # readable on a phone: the heading takes a few lines, not the six a whole error line took
        line = float(driver.execute_script("return parseFloat(getComputedStyle(arguments[0]).lineHeight)", h1))
        assert h1.size["height"] <= 3 * line + 1, (eid, h1.size["height"], line)


def test_screenshots_of_the_home_page_and_an_entry_page_at_phone_width(phone, entries):
    base, driver = phone
    eid = SHOT_ENTRY if SHOT_ENTRY in entries else sorted(entries)[0]
    try:
        for page, name in (("", "phone-home.png"), (f"errors/{eid}/", "phone-entry.png")):
            browser.emulate_phone(driver, height=2000)  # a tall phone: the shot shows more than one screen
            driver.get(base + page)
            time.sleep(0.3)  # fonts and material's layout settle
            path = ARTIFACTS / name
            browser.screenshot(driver, path)
            assert path.stat().st_size > 10_000, path
    finally:
        browser.emulate_phone(driver)
