"""The built site in headless Debian chromium: paste raw vLLM errors into the search box and check
the right page is listed first. Screenshots go to .artifacts/ (gitignored; CI keeps them).

Needs `chromium`, `chromium-driver` (apt) and `selenium` (pip): site_src/install-chromium.sh.
"""

from __future__ import annotations

import re

import pytest

from kvkb import template
from kvkb.validate import load_valid_kb
from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.site_src import browser

pytestmark = pytest.mark.browser

ARTIFACTS = REPO_ROOT / ".artifacts"


@pytest.fixture(scope="module")
def entries():
    return load_valid_kb(kb_dir())


@pytest.fixture(scope="module")
def served(browser_site):
    with browser.serve(browser_site) as base, browser.chromium() as driver:
        yield base, driver


def _distinct_errors(entries) -> dict[str, str]:
    """Each entry's first verbatim line, where no other entry's template matches it too."""
    chosen = {}
    for eid, entry in sorted(entries.items()):
        line = entry.signatures[0].samples[0]
        if not any(template.extract(s.template, line) for o, e in entries.items() if o != eid for s in e.signatures):
            chosen[eid] = line
    return chosen


def test_pasted_error_text_lists_the_right_entry_first(served, entries):
    base, driver = served
    errors = _distinct_errors(entries)
    assert len(errors) >= 3, f"need three distinct errors in kb/, have {sorted(errors)}"
    wrong = []
    for eid, line in errors.items():
        results = browser.search(driver, base, line)
        browser.screenshot(driver, ARTIFACTS / f"search-{eid}.png")
        got = [r.removeprefix(base) for r in results]
        if not got or got[0] != f"errors/{eid}/":
            wrong.append((eid, got[:3]))
    assert not wrong, wrong


def test_the_briefs_example_paste(served, entries):
    base, driver = served
    if "no-memory-for-cache-blocks" not in entries:
        pytest.skip("no-memory-for-cache-blocks is not in kb/")
    line = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
    results = browser.search(driver, base, line)
    browser.screenshot(driver, ARTIFACTS / "search-raw-no-memory.png")
    assert results and results[0].removeprefix(base) == "errors/no-memory-for-cache-blocks/"


@pytest.mark.parametrize(
    "query, expected",
    [("--max-model-len", "max-model-len-exceeds-kv-cache"), ("VLLM_CPU_KVCACHE_SPACE", "cpu-kv-cache-space"),
     ("gpu_memory_utilization", "no-memory-for-cache-blocks")],
)
def test_flags_typed_as_on_the_command_line_find_entries(served, entries, query, expected):
    base, driver = served
    if expected not in entries:
        pytest.skip(f"{expected} is not in kb/")
    results = [r.removeprefix(base) for r in browser.search(driver, base, query)]
    browser.screenshot(driver, ARTIFACTS / f"search-flag-{re.sub(r'[^A-Za-z0-9_]+', '', query)}.png")
    assert f"errors/{expected}/" in results[:3], results[:5]
    # the query box still shows what was typed (the flag shim rewrites only the worker message)
    from selenium.webdriver.common.by import By

    assert driver.find_element(By.CSS_SELECTOR, "input.md-search__input").get_attribute("value") == query


def test_an_entry_page_renders_its_tabs_and_badges(served, entries):
    from selenium.webdriver.common.by import By

    base, driver = served
    eid = "max-model-len-exceeds-kv-cache" if "max-model-len-exceeds-kv-cache" in entries else sorted(entries)[0]
    driver.get(f"{base}errors/{eid}/")
    assert driver.find_element(By.TAG_NAME, "h1").text == entries[eid].short_title
    assert driver.find_elements(By.CSS_SELECTOR, ".tabbed-set .tabbed-labels label"), "content tabs did not render"
    assert driver.find_elements(By.CSS_SELECTOR, ".kvkb-badge"), "badges did not render"
    assert not driver.find_elements(By.XPATH, "//p[starts-with(normalize-space(.), '!!!') or starts-with(normalize-space(.), '===')]"), \
        "admonition or tab markup leaked into the page as text"
    browser.screenshot(driver, ARTIFACTS / f"page-{eid}.png")


def test_short_title_id_and_a_query_ending_in_a_number_find_their_entry(served, entries):
    """In the page's own search: an entry's short title (the navigation's name for it), its id (the
    URL, kbmatch's name) and a paste cut after a number ("2*" stays a prefix: lunr's token set
    used to throw on it, javascripts/lunr-tokenset-fix.js) each list the entry in the top 3."""
    base, driver = served
    eid = "nccl-cuda-out-of-memory" if "nccl-cuda-out-of-memory" in entries else sorted(entries)[0]
    driver.get_log("browser")  # start from an empty console
    for query in (entries[eid].short_title, eid, "Cuda failure 2"):
        results = [r.removeprefix(base) for r in browser.search(driver, base, query)]
        assert f"errors/{eid}/" in results[:3], (query, results[:5])
    invalid = [e["message"] for e in driver.get_log("browser") if "Invalid query" in e.get("message", "")]
    assert not invalid, invalid
