"""The browser runtime the site serves itself (no CDN): Pyodide from the npm package pinned in
site_src/package.json + package-lock.json, and a zip of the Python the CLI runs (kvkb.matcher,
kvkb.fit, `kvkb fit`'s argparse, rapidfuzz's pure-Python fallback), plus the portable match index.

Called by the mkdocs hook after the build; everything lands under site/assets/. Nothing here is
committed: node_modules lives in build/npm (gitignored), the zip and index are made from kb/.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

SITE_SRC = Path(__file__).resolve().parent
REPO_ROOT = SITE_SRC.parent
# the runtime a page loads: the module entry, the Emscripten glue, the interpreter and its stdlib
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
PYODIDE_OUT = "assets/pyodide"
KVKB_OUT = "assets/kvkb"


class WebBuildError(Exception):
    """The browser runtime cannot be assembled; the message says what to install or run."""


def pinned_pyodide() -> str:
    return json.loads((SITE_SRC / "package.json").read_text())["dependencies"]["pyodide"]


def npm_dir(root: Path = REPO_ROOT) -> Path:
    return root / "build" / "npm"


def ensure_pyodide(root: Path = REPO_ROOT) -> Path:
    """node_modules/pyodide at the pinned version, installed with `npm ci` from the lock file when
    missing or stale; the folder holding the runtime files."""
    work = npm_dir(root)
    want = pinned_pyodide()
    pkg = work / "node_modules" / "pyodide"
    lock = (SITE_SRC / "package-lock.json").read_bytes()
    current = work / "package-lock.json"
    if (pkg / "package.json").is_file() and current.is_file() and current.read_bytes() == lock \
            and json.loads((pkg / "package.json").read_text()).get("version") == want:
        return pkg
    npm = shutil.which("npm")
    if npm is None:
        raise WebBuildError("npm is not installed: the diagnose page needs the Pyodide runtime from npm "
                            "(`make run` installs node and npm; or apt-get install nodejs npm)")
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SITE_SRC / "package.json", work / "package.json")
    current.write_bytes(lock)
    proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=work,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        current.unlink(missing_ok=True)  # retried on the next build
        raise WebBuildError(f"`npm ci` in {work} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    missing = [f for f in PYODIDE_FILES if not (pkg / f).is_file()]
    if missing:
        raise WebBuildError(f"pyodide {want} from npm lacks {', '.join(missing)}")
    return pkg


def _rapidfuzz_dir() -> Path:
    import rapidfuzz

    return Path(rapidfuzz.__file__).resolve().parent


def _add_tree(zf: zipfile.ZipFile, src: Path, arc: str, suffixes: tuple[str, ...]) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_file() and path.suffix in suffixes and "__pycache__" not in rel.parts and "__pyinstaller" not in rel.parts:
            info = zipfile.ZipInfo(f"{arc}/{rel.as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))  # reproducible bytes
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())


def python_bundle(root: Path = REPO_ROOT) -> bytes:
    """A zip of the Python the worker imports: the CLI's own modules, no copies or stand-ins."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in (("kvkb/__init__.py", (root / "kvkb" / "__init__.py").read_bytes()),
                           ("kvkb/cli/__init__.py", (root / "kvkb" / "cli" / "__init__.py").read_bytes()),
                           ("kvkb/cli/fit.py", (root / "kvkb" / "cli" / "fit.py").read_bytes()),
                           ("kvkb/site_src/__init__.py", b""),
                           ("kvkb/site_src/webapi.py", (SITE_SRC / "webapi.py").read_bytes())):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
        _add_tree(zf, root / "matcher", "kvkb/matcher", (".py",))
        _add_tree(zf, root / "kvkb" / "fit", "kvkb/fit", (".py", ".json"))
        # rapidfuzz's pure-Python implementation (its *_py.py modules and the dispatching wrappers);
        # the compiled .so files are for this machine's CPython and cannot load in WebAssembly
        _add_tree(zf, _rapidfuzz_dir(), "rapidfuzz", (".py",))
    return buf.getvalue()


def _hashed(out: Path, stem: str, suffix: str, data: bytes) -> str:
    name = f"{stem}.{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    (out / name).write_bytes(data)
    return name


def write_assets(site_dir: Path, entries, root: Path = REPO_ROOT) -> dict:
    """Copy Pyodide and write the Python zip, the portable index and their manifest into the site."""
    from kvkb.matcher.portable import build as portable_index

    pkg = ensure_pyodide(root)
    pyo = site_dir / PYODIDE_OUT
    pyo.mkdir(parents=True, exist_ok=True)
    for name in PYODIDE_FILES:
        shutil.copyfile(pkg / name, pyo / name)
    out = site_dir / KVKB_OUT
    out.mkdir(parents=True, exist_ok=True)
    # content-hashed names: a browser may cache them for good; only the small manifest is revalidated
    manifest = {
        "pyodide": pinned_pyodide(),
        "python": _hashed(out, "kvkb-python", ".zip", python_bundle(root)),
        "index": _hashed(out, "kvkb-index", ".json", portable_index(entries).encode("utf-8")),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest
