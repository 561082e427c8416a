"""The diagnose page and the "Will it fit?" calculator in headless Debian chromium, against a
strictly built site served on 127.0.0.1 with every other host name unresolvable.

The page's answers are compared with the CLI's on the same input at test time (kbmatch --json,
kvkb fit --json), never with stored answers: the matcher is improving and the tests follow it.
Screenshots and the timing figures go to .artifacts/ (CI keeps them).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.site_src import browser

pytestmark = pytest.mark.browser

ARTIFACTS = REPO_ROOT / ".artifacts"
SHARED = REPO_ROOT.parent / "shared" / "fixtures"
PASTES = sorted(p for d in ("real-pastes", "real-pastes-2") for p in (SHARED / d).glob("*.txt"))
BIN = Path(sys.executable).parent
TIMINGS: dict[str, list[float]] = {}


@pytest.fixture(scope="module")
def site(browser_site):
    return browser_site


@pytest.fixture(scope="module")
def served(site):
    with browser.serve(site) as base, browser.chromium(offline=True) as driver:
        TIMINGS.setdefault("ready_cold_s", []).append(browser.open_diagnose(driver, base))
        yield base, driver
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "diagnose-timings.json").write_text(json.dumps(
        {k: {"median": statistics.median(v), "n": len(v), "all": [round(x, 3) for x in v]} for k, v in TIMINGS.items()}, indent=1))


@pytest.fixture
def page(served):
    base, driver = served
    if not driver.current_url.endswith("/diagnose/"):
        browser.open_diagnose(driver, base)
    return base, driver


def kbmatch(base: str, data: bytes | None = None, path: Path | None = None) -> str:
    args = [str(BIN / "kbmatch"), "--json", "--base-url", base] + ([str(path)] if path else [])
    proc = subprocess.run(args, input=data, capture_output=True, env={**os.environ, "KVKB_KB_DIR": str(kb_dir())}, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.decode()


def tiers(report: dict) -> list[tuple[str, str]]:
    # the page names the tier the JSON gives; a matcher without tiers yet has only `confident`
    return [(m["id"], m.get("confidence") or ("confident" if m["confident"] else "possible")) for m in report["matches"]]


def assert_same_as_cli(shown: dict, cli_json: str, what: str) -> None:
    assert shown["state"] == "done", (what, shown)
    assert shown["json"] + "\n" == cli_json, what
    report = json.loads(cli_json)
    assert shown["root_cause"] == (report["root_cause"] or ""), what
    assert shown["matches"] == tiers(report), what


def assert_drawn(driver, report: dict, what: str) -> None:
    """What the terminal shows is on the page: each match's link, fix forms and evidence, and the
    report-level notes the JSON carries (whichever fields this matcher emits)."""
    result = driver.find_element("id", "kvkb-result")
    text = result.text
    assert "[object" not in text, what  # nothing drawn from the wrong type (an array or element as a string)
    for m in report["matches"]:
        card = result.find_element("css selector", f'.kvkb-match[data-id="{m["id"]}"]')
        assert card.find_element("css selector", "h3 a").get_attribute("href") == m["url"], what
        codes = [c.get_attribute("textContent") for c in card.find_elements("css selector", ".kvkb-fix-form code")]
        assert [f for f in (m.get("fix_forms") or {}).values() if f] == codes or (not m.get("fix_forms") and m.get("fix") in codes + [None]), what
        assert len(card.find_elements("css selector", ".kvkb-evidence li")) == len(m.get("evidence") or []), what
        why = card.find_element("css selector", ".kvkb-why").text
        for key, value in (m.get("params") or {}).items():  # the values read from the user's log
            assert f"{key}={value}" in why, (what, key)
    for key, selector in (("not_memory", ".kvkb-not-memory"), ("truncated", ".kvkb-truncated"), ("first_error", ".kvkb-first-error")):
        assert bool(result.find_elements("css selector", selector)) == bool(report.get(key)), (what, key)
    assert bool(result.find_elements("css selector", ".kvkb-restarts")) == bool(report.get("restarts")), what
    if report.get("not_memory"):
        assert " ".join(report["not_memory"]["text"].split())[:60] in " ".join(text.split()), what
    if not report["root_cause"] and report.get("new_issue_url"):
        assert result.find_element("css selector", ".kvkb-new-issue a").get_attribute("href") == report["new_issue_url"], what


# --- the diagnose page ---------------------------------------------------------------------------------


@pytest.mark.skipif(not PASTES, reason="../shared/fixtures/real-pastes*/ not present")
def test_every_real_paste_gets_kbmatchs_answer(page):
    base, driver = page
    wrong = []
    for path in PASTES:
        text = path.read_text(encoding="utf-8")
        shown = browser.diagnose(driver, text)
        TIMINGS.setdefault("paste_s", []).append(shown["seconds"])
        TIMINGS.setdefault("paste_worker_ms", []).append(float(shown["ms"]))
        try:
            cli = kbmatch(base, text.encode("utf-8"))
            assert_same_as_cli(shown, cli, path.name)
            assert_drawn(driver, json.loads(cli), path.name)
        except AssertionError as exc:
            wrong.append((path.name, str(exc).splitlines()[0][:160]))
    largest = max(PASTES, key=lambda p: p.stat().st_size)
    shown = browser.diagnose(driver, largest.read_text(encoding="utf-8"))
    TIMINGS["largest_paste_s"] = [shown["seconds"]]
    TIMINGS["largest_paste_bytes"] = [largest.stat().st_size]
    # the screenshot CI keeps: a confident answer, with its fix, evidence and why
    browser.diagnose(driver, (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_text())
    browser.screenshot(driver, ARTIFACTS / "diagnose.png", full_page=True)
    driver.set_window_size(1280, 1000)
    assert not wrong, wrong
    assert not browser.outside_requests(driver)


def test_a_dropped_non_utf8_crlf_file_is_read_as_the_cli_reads_it(page, tmp_path):
    base, driver = page
    source = (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_bytes()
    # Windows line ends and a Latin-1 byte that is not UTF-8 (a user's locale in a hostname)
    data = b"host caf\xe9-gpu01 starting\r\n" + source.replace(b"\n", b"\r\n") + b"\xff\xfe trailing \x80 bytes\r\n"
    path = tmp_path / "vllm-latin1.log"
    path.write_bytes(data)
    shown = browser.diagnose(driver, file=path)
    assert_same_as_cli(shown, kbmatch(base, path=path), path.name)
    assert shown["root_cause"], "the example log has a root cause"
    assert driver.find_element("id", "kvkb-file-name").text.startswith("vllm-latin1.log")


DROP = """
const [b64, name] = arguments;
const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
const data = new DataTransfer();
data.items.add(new File([bytes], name));
document.getElementById("kvkb-result").dataset.state = "submitted";
document.getElementById("kvkb-drop").dispatchEvent(new DragEvent("drop", {dataTransfer: data, bubbles: true, cancelable: true}));
"""


def test_a_file_dropped_on_the_drop_zone_and_a_big_log_file(page, tmp_path):
    import base64

    base, driver = page
    example = (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_bytes()
    data = example.replace(b"\n", b"\r\n").replace(b"INFO", b"INF\xd6")  # CRLF, a cp1252 byte
    driver.execute_script(DROP, base64.b64encode(data).decode(), "dropped.log")
    browser.wait_state(driver, "kvkb-result", timeout=120)
    (tmp_path / "dropped.log").write_bytes(data)
    shown = {"state": driver.find_element("id", "kvkb-result").get_attribute("data-state"),
             "json": driver.find_element("id", "kvkb-json").get_attribute("textContent"),
             "root_cause": driver.find_element("id", "kvkb-result").get_attribute("data-root-cause"),
             "matches": [(m.get_attribute("data-id"), m.get_attribute("data-confidence"))
                         for m in driver.find_elements("css selector", "#kvkb-result .kvkb-match")]}
    assert_same_as_cli(shown, kbmatch(base, path=tmp_path / "dropped.log"), "dropped")
    # past the reader's 1 MB paste size it streams windows around candidate lines, as for a big file
    noise = b"".join(b"INFO 10-22 09:00:%02d [loggers.py:%d] Avg prompt throughput: %d tokens/s\n" % (i % 60, i, i)
                     for i in range(30000))
    big = tmp_path / "big.log"
    big.write_bytes(noise + example + noise[:300000])
    shown = browser.diagnose(driver, file=big)
    TIMINGS.setdefault("file_3mb_s", []).append(shown["seconds"])
    assert_same_as_cli(shown, kbmatch(base, path=big), "big file")
    assert shown["root_cause"]


def test_a_paste_is_never_html(page):
    base, driver = page
    line = (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_text().splitlines()
    paste = "\n".join(['<img src=x onerror="document.body.dataset.pwned=1">', "<script>document.body.dataset.pwned=2</script>",
                       *line, 'ValueError: <img src=y onerror="document.body.dataset.pwned=3"> no such thing'])
    shown = browser.diagnose(driver, paste)
    assert_same_as_cli(shown, kbmatch(base, paste.encode()), "html paste")
    time.sleep(0.5)  # an onerror would have fired by now
    assert driver.execute_script("return document.body.dataset.pwned") is None
    assert not driver.find_elements("css selector", "#kvkb-result img, #kvkb-result script")
    # and with nothing matched, the text still shows as text (the no-match path)
    shown = browser.diagnose(driver, '<img src=z onerror="document.body.dataset.pwned=4">')
    assert shown["state"] == "done" and shown["root_cause"] == ""
    time.sleep(0.5)
    assert driver.execute_script("return document.body.dataset.pwned") is None


def test_a_paste_with_no_known_error_says_so(page):
    base, driver = page
    text = "INFO all good\nRuntimeError: something kvkb has never heard of\n"
    shown = browser.diagnose(driver, text)
    assert_same_as_cli(shown, kbmatch(base, text.encode()), "unknown")
    report = json.loads(shown["json"])
    if report.get("new_issue_url"):  # the matcher offers a prefilled new-entry issue: the page links it
        link = driver.find_element("css selector", ".kvkb-new-issue a")
        assert link.get_attribute("href") == report["new_issue_url"]


def test_a_paste_with_no_error_asks_for_the_lines_after_it(page):
    base, driver = page
    text = "INFO 10-16 20:27:43 [api_server.py:1034] vLLM API server version 0.8.4\n" \
           "INFO 10-16 20:27:49 [gpu_model_runner.py:1134] Loading model weights took 14.9888 GB\n"
    shown = browser.diagnose(driver, text)
    assert_same_as_cli(shown, kbmatch(base, text.encode()), "no error")
    box = driver.find_element("css selector", "#kvkb-result .kvkb-no-error")
    assert "line 2" in box.text and "Loading model weights took 14.9888 GB" in box.text
    assert not driver.find_elements("css selector", ".kvkb-new-issue")  # nothing to propose


def test_the_loading_message_is_shown_once(page):
    # the status line says "Loading Python…"; the result box once said it again through CSS
    base, driver = page
    result = driver.find_element("id", "kvkb-result")
    state = result.get_attribute("data-state")
    try:
        driver.execute_script("arguments[0].dataset.state = 'loading'", result)
        before = driver.execute_script("return getComputedStyle(arguments[0], '::before').content", result)
        assert before in ("none", "normal", ""), before
        assert "Loading Python" not in result.text
    finally:
        driver.execute_script("arguments[0].dataset.state = arguments[1]", result, state)


def test_cancel_stops_long_work_and_the_page_answers_again(page):
    base, driver = page
    from selenium.webdriver.common.by import By

    # many distinct error records: seconds of pure-Python matching
    big = "\n".join(f"ValueError: worker {i} failed with code {i * 7} at step {i} of {i + 3} in module m{i}x"
                    for i in range(6000))
    driver.execute_script("const p = arguments[0]; p.value = arguments[1]; p.dispatchEvent(new Event('input'))",
                          driver.find_element(By.ID, "kvkb-paste"), big)
    driver.find_element(By.ID, "kvkb-diagnose").click()
    browser.wait_state(driver, "kvkb-result", ("working",), timeout=10)
    cancel = driver.find_element(By.ID, "kvkb-cancel")
    assert cancel.is_displayed()
    cancel.click()
    assert browser.wait_state(driver, "kvkb-result", ("loading", "ready"), timeout=10) in ("loading", "ready")
    assert browser.wait_state(driver, "kvkb-result", ("ready",), timeout=120) == "ready"
    assert not cancel.is_displayed()
    text = (REPO_ROOT / "matcher" / "examples" / "engine-core-max-model-len.log").read_text()
    assert_same_as_cli(browser.diagnose(driver, text), kbmatch(base, text.encode()), "after cancel")


def test_the_page_makes_no_request_outside_the_site_and_reloads_fast(served):
    base, driver = served
    for _ in range(3):
        TIMINGS.setdefault("ready_reload_s", []).append(browser.open_diagnose(driver, base))
    assert not browser.outside_requests(driver)
    assert driver.find_element("css selector", ".kvkb-header-diagnose").get_attribute("href") == base + "diagnose/"


def test_every_page_links_the_diagnose_page_in_its_header(site):
    for page in ("index.html", "memory/index.html", "errors/max-model-len-exceeds-kv-cache/index.html", "fit/index.html"):
        html = (site / page).read_text(encoding="utf-8")
        assert 'class="kvkb-header-diagnose"' in html, page
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="diagnose/"' in home


def test_the_runtime_is_served_by_the_site(site):
    for name in ("pyodide.mjs", "pyodide.asm.wasm", "python_stdlib.zip"):
        assert (site / "assets" / "pyodide" / name).is_file()
    manifest = json.loads((site / "assets" / "kvkb" / "manifest.json").read_text())
    assert (site / "assets" / "kvkb" / manifest["python"]).is_file() and (site / "assets" / "kvkb" / manifest["index"]).is_file()
    for js in (site / "javascripts").glob("kvkb-*.js"):
        text = js.read_text()
        assert "cdn." not in text and "https://" not in text, js.name  # no runtime from elsewhere
        assert ".innerHTML" not in text and "insertAdjacentHTML" not in text, js.name  # data is text, never HTML


# --- the calculator ------------------------------------------------------------------------------------

# rotated over the shipped models: each option is exercised against several configs
VARIANTS = [
    {},
    {"kvkb-fit-gpu-memory": "23.99GiB", "kvkb-fit-max-model-len": "8192"},
    {"kvkb-fit-util": "0.85", "kvkb-fit-kv-dtype": "fp8", "kvkb-fit-tp": "2"},
    {"kvkb-fit-gpu-memory": "139.8GiB", "kvkb-fit-block-size": "32", "kvkb-fit-max-model-len": "131072"},
    {"kvkb-fit-gpu-memory": "44.42GiB", "kvkb-fit-tp": "4", "kvkb-fit-kv-dtype": "fp8_e5m2", "kvkb-fit-util": "0.95"},
    {"kvkb-fit-draft-layers": "1", "kvkb-fit-max-model-len": "16384"},  # an EAGLE / MTP drafter shares the pool
]
SET_INPUTS = """
const [values] = arguments;
const defaults = {"kvkb-fit-gpu-memory": "79.18GiB", "kvkb-fit-util": "", "kvkb-fit-max-model-len": "",
                  "kvkb-fit-tp": "1", "kvkb-fit-kv-dtype": "auto", "kvkb-fit-block-size": "", "kvkb-fit-draft-layers": ""};
for (const [id, value] of Object.entries({...defaults, ...values})) document.getElementById(id).value = value;
document.getElementById("kvkb-fit-result").dataset.state = "submitted";
document.getElementById("kvkb-fit-run").click();
"""


def test_the_calculator_equals_kvkb_fit_json(served):
    from kvkb.fit import shipped_configs

    base, driver = served
    start = time.monotonic()
    driver.get(base + "fit/")
    browser.wait_state(driver, "kvkb-fit-result", ("done", "error"), timeout=120)
    TIMINGS.setdefault("calculator_ready_s", []).append(time.monotonic() - start)
    models = [name for name, _ in shipped_configs()]
    wrong, checked, drafted = [], 0, 0
    for i, name in enumerate(models):
        for variant in (VARIANTS[i % len(VARIANTS)], VARIANTS[(i + 2) % len(VARIANTS)]):
            driver.execute_script("document.getElementById('kvkb-fit-model').value = arguments[0]", name)
            driver.execute_script(SET_INPUTS, variant)
            browser.wait_state(driver, "kvkb-fit-result", ("done", "error"), timeout=60)
            argv = json.loads(driver.find_element("id", "kvkb-fit-result").get_attribute("data-argv"))
            assert argv[0] == name
            drafted += "--draft-layers" in argv
            cli = subprocess.run([str(BIN / "kvkb"), "fit", *argv, "--json"], capture_output=True, text=True, timeout=120)
            shown = driver.find_elements("id", "kvkb-fit-json")
            if cli.returncode == 2:  # bad input: the page shows the CLI's message instead
                ok = not shown and cli.stderr.strip() in driver.find_element("id", "kvkb-fit-result").text
            else:
                ok = bool(shown) and shown[0].get_attribute("textContent") == cli.stdout
                fits = json.loads(cli.stdout)["fits"]
                ok = ok and driver.find_element("id", "kvkb-fit-result").get_attribute("data-fits") == str(fits).lower().replace("none", "null")
                ok = ok and bool(driver.find_elements("css selector", "#kvkb-fit-bar rect"))
            checked += 1
            if not ok:
                wrong.append((name, argv))
    assert checked >= 2 * len(models) and drafted >= 2  # the drafter option was exercised too
    assert not wrong, wrong
    driver.execute_script("document.getElementById('kvkb-fit-model').value = 'meta-llama/Llama-3.1-8B-Instruct'")
    driver.execute_script(SET_INPUTS, {"kvkb-fit-max-model-len": "32768"})
    browser.wait_state(driver, "kvkb-fit-result", ("done",), timeout=60)
    # the screenshot CI keeps: the form, the answer and the memory bar, below the sticky header
    driver.set_window_size(1280, 1900)
    driver.execute_script("window.scrollTo(0, document.getElementById('calculator').getBoundingClientRect().top + window.scrollY - 70)")
    time.sleep(0.3)
    browser.screenshot(driver, ARTIFACTS / "fit-calculator.png")
    driver.set_window_size(1280, 1000)
    assert not browser.outside_requests(driver)


def test_the_calculator_sizes_a_pasted_config_json(served):
    base, driver = served
    if not driver.current_url.endswith("/fit/"):
        driver.get(base + "fit/")
        browser.wait_state(driver, "kvkb-fit-result", ("done", "error"), timeout=120)
    config = (REPO_ROOT / "kvkb" / "fit" / "models" / "Qwen--Qwen2.5-0.5B-Instruct" / "config.json").read_text()
    driver.execute_script("""
        const m = document.getElementById('kvkb-fit-model'); m.value = '__paste__';
        document.getElementById('kvkb-fit-config').value = arguments[0];
        m.dispatchEvent(new Event('input', {bubbles: true}));""", config)
    assert driver.find_element("id", "kvkb-fit-config").is_displayed()
    driver.execute_script(SET_INPUTS, {"kvkb-fit-gpu-memory": "23.99GiB"})
    browser.wait_state(driver, "kvkb-fit-result", ("done",), timeout=60)
    page = json.loads(driver.find_element("id", "kvkb-fit-json").get_attribute("textContent"))
    cli = json.loads(subprocess.run([str(BIN / "kvkb"), "fit", "Qwen/Qwen2.5-0.5B-Instruct", "--gpu-memory", "23.99GiB",
                                     "--tensor-parallel-size", "1", "--json"], capture_output=True, text=True).stdout)
    # the same config from a file: the same numbers (only the name and the "shipped config" note differ)
    for key in ("bytes_per_token", "num_blocks", "kv_tokens", "max_model_len", "fits", "budget"):
        assert page[key] == cli[key], key
