"""Fixtures shared across test modules."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.site_src import browser


@pytest.fixture(scope="session")
def browser_site(tmp_path_factory):
    """The site built once (mkdocs --strict, this checkout's kb/ and committed results) for every
    browser test; skipped without chromium, and a failure where CI requires the browser, since a skip
    there would hide a broken setup."""
    if why := browser.missing():
        if os.environ.get("KVKB_REQUIRE_BROWSER"):
            pytest.fail(f"KVKB_REQUIRE_BROWSER is set but the browser cannot run: {why}")
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("browser-site")
    env = {**os.environ, "KVKB_KB_DIR": str(kb_dir()), "NO_MKDOCS_2_WARNING": "1"}
    env.setdefault("KVKB_RESULTS_DIR", str(REPO_ROOT / "reproductions" / "results"))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO_ROOT / "mkdocs.yml"),
                           "-d", str(tmp / "site")], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "site"
