"""Headless Debian chromium (via selenium + chromium-driver) against a locally served site.

Used by tests/test_site_browser.py and by hand:

    python -m kvkb.site_src.browser shot site/ errors/<id>/ .artifacts/page.png
    python -m kvkb.site_src.browser search site/ "No available memory for the cache blocks"

Install once with site_src/install-chromium.sh (apt: chromium chromium-driver; pip: selenium).
Nothing here downloads anything: selenium is pointed at /usr/bin/chromedriver explicitly, so its
driver manager never runs.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The closed network makes chromium stall on its background services without these.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def missing() -> str | None:
    """Why the browser cannot run here, or None when it can."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return f"{path} not found (apt-get install -y chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    return None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output readable
        pass


@contextlib.contextmanager
def serve(site_dir: Path):
    """Serve a built site on 127.0.0.1 (a free port); yields the base URL ending in '/'."""
    handler = functools.partial(_QuietHandler, directory=str(site_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# Every host name but the test server's fails to resolve: a page that asks anything outside the
# site gets ERR_NAME_NOT_RESOLVED (visible in the console log) instead of an answer.
OFFLINE_FLAG = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 1000, offline: bool = False):
    """A selenium driver for headless chromium with a fresh profile, closed on exit; offline: no
    host but 127.0.0.1 resolves. The console log (driver.get_log("browser")) is kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kvkb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    if offline:
        options.add_argument(OFFLINE_FLAG)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def search(driver, base_url: str, query: str, timeout: float = 15.0) -> list[str]:
    """Type the query into material's search box like a user; return result page URLs, best first.

    Each result group's first link is its page (material groups sections under their page).
    """
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base_url)
    wait = WebDriverWait(driver, timeout)
    box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input")))
    box.click()
    # wait for the worker to finish building the index: material then swaps "Initializing search"
    # for its "Type to start searching" prompt
    meta = (By.CSS_SELECTOR, ".md-search-result__meta")
    wait.until(lambda d: (t := d.find_element(*meta).text) and "Initializing" not in t)
    # like a paste: the whole text at once, then one real key so material's keyup handler runs
    # (typing 200 characters one by one would run 200 searches)
    driver.execute_script("arguments[0].value = arguments[1]", box, query)
    box.send_keys(Keys.END)
    # results render asynchronously (worker round trip, then material's list); read until two
    # reads 0.3 s apart agree and the meta line reports a finished search
    def read():
        try:
            meta = driver.find_element(By.CSS_SELECTOR, ".md-search-result__meta").text
            links = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item > a.md-search-result__link")
            return meta, [a.get_attribute("href").split("#")[0].split("?")[0] for a in links]
        except StaleElementReferenceException:  # the list was re-rendered under us: read again
            return None

    deadline = time.monotonic() + timeout
    last, same = None, 0
    while time.monotonic() < deadline:
        now = read()
        same = same + 1 if now is not None and now == last else 0
        last = now
        if now is not None and "matching document" in now[0]:
            # a non-empty list is final once it holds still; "No matching" must hold longer
            if same >= (1 if now[1] else 5):
                return now[1]
        time.sleep(0.3)
    raise TimeoutError(f"search for {query[:60]!r} did not settle in {timeout} s (last: {last})")


def wait_state(driver, element_id: str, done: tuple[str, ...] = ("done", "error"), timeout: float = 120.0,
               since: float | None = None) -> str:
    """Poll the element's data-state until it is one of done; the state reached."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = driver.find_element(By.ID, element_id).get_attribute("data-state")
        if state in done:
            return state
        time.sleep(0.02)
    raise TimeoutError(f"#{element_id} stayed {state!r} for {timeout} s (waiting for {done})")


def open_diagnose(driver, base_url: str, timeout: float = 120.0) -> float:
    """Open the diagnose page and wait until Python is ready; seconds from navigation to ready."""
    start = time.monotonic()
    driver.get(base_url + "diagnose/")
    state = wait_state(driver, "kvkb-result", ("ready", "error"), timeout)
    if state != "ready":
        raise RuntimeError(f"the diagnose page did not start: {status_text(driver)}")
    return time.monotonic() - start


def status_text(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, "kvkb-status").text


def diagnose(driver, text: str | None = None, file: Path | None = None, timeout: float = 300.0) -> dict:
    """Paste text (or choose a file, as a drop does) and press Diagnose; what the page shows:
    {"json", "root_cause", "matches": [(id, confidence)], "state", "seconds"}."""
    from selenium.webdriver.common.by import By

    result = driver.find_element(By.ID, "kvkb-result")
    driver.execute_script("arguments[0].dataset.state = 'submitted'", result)
    start = time.monotonic()
    if file is not None:
        driver.find_element(By.ID, "kvkb-file").send_keys(str(Path(file).resolve()))
    else:
        # like a paste: the whole text at once (send_keys would type it key by key)
        driver.execute_script("const p = arguments[0]; p.value = arguments[1]; p.dispatchEvent(new Event('input'))",
                              driver.find_element(By.ID, "kvkb-paste"), text)
        driver.find_element(By.ID, "kvkb-diagnose").click()
    state = wait_state(driver, "kvkb-result", timeout=timeout)
    seconds = time.monotonic() - start
    raw = driver.find_elements(By.ID, "kvkb-json")
    return {
        "state": state,
        "seconds": seconds,
        "ms": result.get_attribute("data-ms"),
        "json": raw[0].get_attribute("textContent") if raw else None,
        "root_cause": result.get_attribute("data-root-cause"),
        "matches": [(m.get_attribute("data-id"), m.get_attribute("data-confidence"))
                    for m in driver.find_elements(By.CSS_SELECTOR, "#kvkb-result .kvkb-match")],
    }


def outside_requests(driver) -> list[str]:
    """Console entries of requests that failed to resolve (with chromium(offline=True): any request
    that left the site)."""
    return [e["message"] for e in driver.get_log("browser") if "ERR_NAME_NOT_RESOLVED" in e.get("message", "")]


PHONE = {"width": 390, "height": 844}  # an iPhone 12-15 viewport in CSS pixels


def emulate_phone(driver, width: int = PHONE["width"], height: int = PHONE["height"]) -> None:
    """A phone's viewport through the DevTools protocol: mobile layout (the page's viewport meta
    applies, as on a phone) at width x height CSS pixels, scale 1. A window size alone would not
    do: desktop chromium keeps a minimum window width and draws scrollbars into the viewport."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True})


# The page's width against the viewport, and the elements that stick out past the right edge
# (their own right edge, not inside a box that scrolls or clips sideways): what to fix.
_OVERFLOW_JS = r"""
const vw = document.documentElement.clientWidth;
const clipped = el => {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX;
    if (o !== "visible") return true;
  }
  return false;
};
const out = [];
for (const el of document.body.querySelectorAll("*")) {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.right <= vw + 0.5 || clipped(el)) continue;
  const s = getComputedStyle(el);
  if (s.visibility === "hidden" || s.display === "none") continue;
  let name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (typeof el.className === "string" && el.className.trim() ? "." + el.className.trim().split(/\s+/).join(".") : "");
  out.push({el: name, right: Math.round(r.right), text: (el.textContent || "").trim().slice(0, 60)});
}
return {scrollWidth: document.documentElement.scrollWidth, bodyScrollWidth: document.body.scrollWidth,
        viewport: vw, innerWidth: window.innerWidth, offenders: out.slice(0, 12)};
"""


def overflow(driver) -> dict:
    """{scrollWidth, bodyScrollWidth, viewport, innerWidth, offenders: [{el, right, text}]} of the
    loaded page: scrollWidth > viewport means the page scrolls sideways."""
    return driver.execute_script(_OVERFLOW_JS)


def screenshot(driver, path: Path, full_page: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if full_page:
        height = driver.execute_script("return document.documentElement.scrollHeight")
        width = driver.execute_script("return document.documentElement.clientWidth")
        driver.set_window_size(max(width, 1280), min(height + 150, 16000))
    driver.save_screenshot(str(path))


def main(argv: list[str]) -> int:
    usage = "usage: python -m kvkb.site_src.browser shot SITE_DIR PAGE OUT.png [--full] | search SITE_DIR QUERY"
    if len(argv) < 3 or argv[0] not in ("shot", "search"):
        print(usage, file=sys.stderr)
        return 2
    if why := missing():
        print(f"error: {why}", file=sys.stderr)
        return 1
    site = Path(argv[1])
    if not (site / "index.html").is_file():
        print(f"error: {site}/index.html not found: build the site first (mkdocs build)", file=sys.stderr)
        return 1
    with serve(site) as base, chromium() as driver:
        if argv[0] == "search":
            for url in search(driver, base, argv[2]):
                print(url.removeprefix(base))
            return 0
        if len(argv) < 4:
            print(usage, file=sys.stderr)
            return 2
        driver.get(base + argv[2].lstrip("/"))
        screenshot(driver, Path(argv[3]), full_page="--full" in argv)
        print(argv[3])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
