"""mkdocs hook: generate the entry pages, the index and (when available) the fit page from kb/.

Nothing generated is committed: pages exist only inside the build (File.generated). A bad entry
stops the build with every problem as file:line:code and a remedy, before anything is written.
"""

from __future__ import annotations

import logging
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from kvkb.codes import EntryError
from kvkb.validate import load_valid_kb
from kvkb.site_src import render, webbuild
from kvkb.site_src.results import ResultsError, load_results, results_dir

log = logging.getLogger("mkdocs.hooks.kvkb")

# state for one build: on_config loads, on_files writes (mkdocs serve reruns both on change)
_state: dict = {}


def _repo_root(config) -> Path:
    return Path(config.config_file_path).resolve().parent


def _kb_dir(config) -> Path:
    import os

    env = os.environ.get("KVKB_KB_DIR")
    return Path(env) if env else _repo_root(config) / "kb"


def _fit_page() -> str | None:
    """`kvkb fit`'s page when that module exists; None leaves the page out (never faked)."""
    try:
        from kvkb.fit.sitepage import render_markdown
    except ImportError:
        return None
    try:
        return render_markdown()
    except Exception as exc:  # a present but broken fit page is a build error, not a missing page
        raise PluginError(f"kvkb.fit.sitepage.render_markdown() failed: {type(exc).__name__}: {exc}") from exc


def with_calculator(fit_markdown: str) -> str:
    """The generated fit page with the calculator (site_src/calculator.html) before its first
    section: the generated tables stay below it."""
    calculator = (Path(__file__).resolve().parent / "calculator.html").read_text(encoding="utf-8")
    head, sep, rest = fit_markdown.partition("\n## ")
    return f"{head}\n{calculator}\n## {rest}" if sep else f"{fit_markdown}\n\n{calculator}"


def on_config(config):
    kb = _kb_dir(config)
    try:
        entries = load_valid_kb(kb)
    except EntryError as exc:
        raise PluginError(f"kb/ has {len(exc.problems)} problem(s); the site is not built:\n{exc}") from None
    try:
        results = load_results(results_dir(_repo_root(config)))
    except (ResultsError, OSError) as exc:
        raise PluginError(f"reproduction results cannot be read: {exc}") from None
    fit = _fit_page()
    _state.update(entries=entries, results=results, fit=fit, repo_url=config.repo_url)

    config.watch.append(str(kb))
    # the header banner (overrides/main.html) links the calculator only when the fit page exists
    config.extra["kvkb_has_fit"] = fit is not None
    config.nav = [
        {"Errors": "index.md"},
        {"Diagnose a log": "diagnose.md"},
        {"Where the memory goes": "memory.md"},
        *([{"Will it fit?": "fit.md"}] if fit is not None else []),
        {"Tags": "tags.md"},
        *render.nav_tree(entries),  # phase sections -> category -> entry short title, as on the index
    ]
    return config


def on_files(files: Files, config) -> Files:
    entries = _state["entries"]
    results = _state["results"]
    # related-error links read as the navigation does: the short title, not the whole error line
    titles = {eid: e.short_title for eid, e in entries.items()}
    pages = {"index.md": render.render_index(entries, results, has_fit=_state["fit"] is not None)}
    for eid, entry in entries.items():
        pages[f"errors/{eid}.md"] = render.render_entry(entry, titles, results, repo_url=_state["repo_url"])
    if _state["fit"] is not None:
        pages["fit.md"] = with_calculator(_state["fit"])
    for path, content in pages.items():
        if files.get_file_from_path(path) is not None:
            raise PluginError(f"{path} is generated from kb/; remove the hand-written copy from {config.docs_dir}")
        files.append(File.generated(config, path, content=content))
    log.info("kvkb: generated %d entry pages from %s", len(entries), _kb_dir(config))
    return files


def on_post_build(config) -> None:
    """The browser runtime of the diagnose page and the calculator: Pyodide (npm ci, pinned), the
    CLI's Python and the portable match index, all served by the site itself."""
    try:
        manifest = webbuild.write_assets(Path(config.site_dir), list(_state["entries"].values()))
    except webbuild.WebBuildError as exc:
        raise PluginError(str(exc)) from None
    log.info("kvkb: browser runtime: pyodide %s, %s, %s", manifest["pyodide"], manifest["python"], manifest["index"])
