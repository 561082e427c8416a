#!/bin/sh
# node and npm for the site build: the mkdocs hook runs `npm ci` (site_src/package-lock.json) to get
# the pinned Pyodide runtime that the diagnose page and the calculator serve. Installs Debian's
# nodejs + npm when npm is missing (as root, or through sudo); does nothing when npm is there.
set -eu
if command -v npm >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "npm is missing: install Node.js 18 or later with npm (https://nodejs.org), then rerun" >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "npm is missing and this user cannot install packages: apt-get install nodejs npm (as root)" >&2
    exit 1
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
node --version
npm --version
