#!/bin/sh
# Install what tests/test_site_browser.py needs (Debian/Ubuntu, as root): chromium, its WebDriver
# and selenium. Nothing else is downloaded: selenium is pointed at /usr/bin/chromedriver, so its
# driver manager never runs, and no browser is fetched from the internet by any tool.
set -eu
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    apt-get update
    apt-get install -y --no-install-recommends chromium chromium-driver
fi
python -m pip install 'selenium>=4.20'
chromium --version
chromedriver --version
