"""Entries -> Markdown pages (Jinja2 templates in site_src/templates). Pure: no mkdocs here.

The mkdocs hook (site_src/hooks.py) feeds these strings to File.generated(); tests call them
directly.
"""

from __future__ import annotations

import difflib
import html
import re
from collections import defaultdict
from pathlib import Path

import yaml
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from packaging.specifiers import SpecifierSet
from pymdownx.slugs import slugify

from kvkb.entry import PLACEHOLDER_RE, Category, Entry, FixStatus, Phase

from .codecheck import signature_checks
from .results import Results, tail, verification

TEMPLATES = Path(__file__).resolve().parent / "templates"

CATEGORY_TITLES = {
    Category.kv_capacity: "KV-cache capacity",
    Category.device_memory: "Device memory (GPU and accelerators)",
    Category.host_memory: "Host memory and offloading",
    Category.cpu_backend: "CPU backend",
    Category.config: "Configuration checks",
    Category.request: "Per-request limits",
    Category.multimodal: "Multimodal budgets",
    Category.sleep_mode: "Sleep mode",
    Category.engine_wrapper: "Wrappers of another error",
    Category.internal: "vLLM internal errors",
    Category.misinformation: "Advice that does not work",
}
PHASE_TITLES = {
    Phase.startup: "At startup (the engine does not come up)",
    Phase.serving: "While serving (the server is up)",
}
FORM_LABELS = (("cli", "CLI", "bash"), ("python", "Python", "python"), ("env", "env", "bash"))

_FLAG_RE = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
_ENV_RE = re.compile(r"\b([A-Z][A-Z0-9_]{2,})=")
_SHELL_SPLIT_RE = re.compile(r"&&|\|\||[;|\n]")
_VLLM_CMD_RE = re.compile(r"^\s*(?:[A-Z][A-Z0-9_]*=\S*\s+)*(?:vllm|python3?\s+-m\s+vllm\S*)\b")


# --- small pure helpers (also Jinja filters) ----------------------------------------------------


def readable(text: str | None) -> str:
    """'{max_model_len_fit}' -> '<max_model_len_fit>': reads as 'put your value here'."""
    return PLACEHOLDER_RE.sub(lambda m: f"<{m.group(1)}>", text or "")


def versions_text(spec: str | None) -> str:
    """'>=0.9.1,<=0.21.0' -> '0.9.1 – 0.21.0'; anything unusual is shown as written."""
    if not spec:
        return "all"
    lower = upper = None
    rest = []
    for s in SpecifierSet(spec):
        if s.operator == ">=" and lower is None:
            lower = s.version
        elif s.operator == "<=" and upper is None:
            upper = s.version
        else:
            rest.append(str(s))
    if rest:
        return spec
    if lower and upper:
        return lower if lower == upper else f"{lower} – {upper}"
    if lower:
        return f"{lower} and later"
    if upper:
        return f"up to {upper}"
    return spec


def upper_version(spec: str | None) -> str | None:
    """The '<=X' bound of a range, for linking the source file at that release tag."""
    if not spec:
        return None
    for s in SpecifierSet(spec):
        if s.operator in ("<=", "=="):
            return s.version
    return None


def fence(text: str, lang: str = "text", attrs: str = "") -> str:
    """A fenced block that survives backticks inside the text."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    head = f"{ticks} {lang}" + (f" {attrs}" if attrs else "")
    return f"{head}\n{text.rstrip()}\n{ticks}"


def inline_code(text: str) -> str:
    """Inline code that survives backticks and table pipes."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def cell(text: str) -> str:
    """Inline code for a Markdown table cell: a '|' would end the cell."""
    return inline_code(text).replace("|", "\\|")


_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|!])")


def plain(text: str) -> str:
    """Plain text (titles, claims) placed in Markdown: no accidental emphasis, links or HTML."""
    return _MD_SPECIAL.sub(r"\\\1", text).replace("<", "&lt;").replace(">", "&gt;")


def quoted(text: str) -> str:
    """Admonition/details titles are double-quoted strings."""
    return text.replace('"', "&quot;")


def changed_lines(before: str, after: str) -> str:
    """1-based line numbers of `after` that differ from `before`, for hl_lines."""
    a, b = before.splitlines(), after.splitlines()
    lines = []
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            lines.extend(range(j1 + 1, j2 + 1))
    return " ".join(map(str, lines))


def entry_tags(entry: Entry) -> list[str]:
    """Stable tags: the id, the exception types, the flags and env vars of the working fixes,
    and the author's tags. Invented flags (ineffective fixes) are not tags: a tag implies it exists."""
    tags: list[str] = [entry.id]
    tags += [s.exception for s in entry.signatures if s.exception]
    for cause in entry.causes:
        for fix in cause.fixes:
            if fix.status == FixStatus.ineffective:
                continue
            tags += vllm_flags(fix.cli or "")
            tags += _ENV_RE.findall(fix.env or "")
    tags += list(entry.tags)
    seen: dict[str, None] = {}
    for tag in tags:
        seen.setdefault(tag, None)
    return list(seen)


def vllm_flags(cli: str) -> list[str]:
    """Flags and env vars of the vllm commands in a shell line; other tools' flags (nvidia-smi
    --format) are not vLLM's and make no tags."""
    found: list[str] = []
    for segment in _SHELL_SPLIT_RE.split(cli):
        if _VLLM_CMD_RE.match(segment):
            found += _ENV_RE.findall(segment.split("vllm", 1)[0]) + _FLAG_RE.findall(segment)
    return found


def fix_forms(fix) -> list[tuple[str, str, str]]:
    """[(tab label, fence language, readable text)] for the forms a fix has."""
    return [(label, lang, readable(getattr(fix, name))) for name, label, lang in FORM_LABELS if getattr(fix, name)]


def run_sentence(run) -> str:
    """One line saying what the reproduction showed, from the captured numbers."""
    if run.status == "pass":
        said = "The broken program raised this error"
        if run.broken and run.broken.matched:
            said += f" (kbmatch named `{run.broken.matched}`)"
        said += " and the fixed program started"
        if run.fixed and run.fixed.kv_tokens is not None:
            said += f" with {run.fixed.kv_tokens:,} KV-cache tokens"
            if run.fixed.max_concurrency is not None:
                said += f", maximum concurrency {run.fixed.max_concurrency:.2f}x"
        said += "."
    else:
        said = "The last reproduction run did not behave as this page says: read the captured output."
    if run.device:
        said += f" Device: {plain(run.device)}."
    if run.duration_s is not None:
        said += f" Took {run.duration_s:.1f} s."
    return said


# --- pages ---------------------------------------------------------------------------------------


def _env() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # Markdown out, not HTML: escaping is explicit (plain, quoted)
    )
    env.filters.update(
        readable=readable,
        versions=versions_text,
        fence=fence,
        code=inline_code,
        cell=cell,
        plain=plain,
        quoted=quoted,
    )
    return env


_ENV = _env()


def front_matter(**values) -> str:
    return "---\n" + yaml.safe_dump(values, sort_keys=False, allow_unicode=True, width=10_000) + "---\n\n"


_TAG_SLUG = slugify(case="lower")  # the tags plugin's default tags_slugify


def tag_anchor(tag: str) -> str:
    """The tags page's anchor for a tag ('torch.OutOfMemoryError' -> 'tag:torchoutofmemoryerror')."""
    return f"tag:{_TAG_SLUG(tag, '-')}"


DEFAULT_REPO_URL = "https://github.com/kvkb/kvkb"
FIX_OUTCOMES = (("worked", "Yes, it worked"), ("did-not-work", "No, it did not"))


def fix_report_url(repo_url: str, entry_id: str, fix_id: str, outcome: str) -> str:
    """A prefilled .github/ISSUE_TEMPLATE/fix-report.yml issue: each query key is a form field id."""
    from urllib.parse import urlencode

    query = {"template": "fix-report.yml", "title": f"Fix report: {entry_id} / {fix_id}: {outcome}",
             "entry": entry_id, "fix": fix_id, "outcome": outcome, "vllm-version": "", "gpu": ""}
    return f"{repo_url.rstrip('/')}/issues/new?{urlencode(query)}"


def page_title(entry: Entry) -> str:
    """The entry page's title: what a reader calls the error, then the exact line vLLM prints.
    HTML-escaped: material writes the title into <title>, the header bar, the tags page and the
    search index unescaped, and an error line may hold '<model.safetensors>'-like text."""
    return html.escape(f"{entry.short_title} — {entry.title}", quote=False)


def render_entry(entry: Entry, titles: dict[str, str], results: list[Results], repo_url: str | None = None) -> str:
    """The page for one entry; titles maps every entry id to the name its related links show (the site
    passes short titles); repo_url
    (mkdocs' repo_url) receives the "Did this fix it?" reports."""
    repo = repo_url or DEFAULT_REPO_URL
    ver = verification(entry, results)
    fix_status = {}
    for fix in entry.all_fixes:
        status, source = ver.fix_status.get(fix.id, (fix.status.value, ""))
        fix_status[fix.id] = {"status": status, "source": source}
    body = _ENV.get_template("entry.md.j2").render(
        e=entry,
        tags=entry_tags(entry),
        tag_anchor=tag_anchor,
        ver=ver,
        fix_status=fix_status,
        forms=fix_forms,
        titles=titles,
        tail=tail,
        run_sentence=run_sentence,
        upper_version=upper_version,
        report_links=lambda fix_id: [(label, fix_report_url(repo, entry.id, fix_id, outcome)) for outcome, label in FIX_OUTCOMES],
        hl=changed_lines(entry.broken_code, entry.fixed_code) if entry.broken_code and entry.fixed_code else "",
        checked=signature_checks(entry),
    )
    # the page title (search result, <title>, the phone's header bar) is the short title, then the
    # error line users paste: mkdocs.yml's search boosts rank pastes on the latter; tags feed the
    # tags plugin; search boost: an error page should outrank the hand-written pages that quote its log lines
    return front_matter(title=page_title(entry), description=entry.summary, tags=entry_tags(entry), hide=["tags"], search={"boost": 2}) + body


def group_entries(entries: dict[str, Entry]) -> list[tuple[Phase, list[tuple[Category, list[Entry]]]]]:
    """Phase -> category -> entries, in the enums' order (startup first), short titles sorted within
    (the order a reader scans the navigation and the index in)."""
    grouped: dict[Phase, dict[Category, list[Entry]]] = defaultdict(lambda: defaultdict(list))
    for entry in sorted(entries.values(), key=lambda e: (e.short_title.casefold(), e.id)):
        grouped[entry.phase][entry.category].append(entry)
    return [
        (phase, [(cat, grouped[phase][cat]) for cat in Category if grouped[phase].get(cat)])
        for phase in Phase
        if grouped.get(phase)
    ]


# the left nav is narrow: short phase names there, the long ones head the index page
NAV_PHASE_TITLES = {Phase.startup: "Errors at startup", Phase.serving: "Errors while serving"}


def nav_label(entry: Entry) -> str:
    """The entry's name in the navigation: its short title (the whole error line is too long to
    scan in a sidebar; the id stays the URL). mkdocs' theme templates do not escape nav titles."""
    return html.escape(entry.short_title, quote=False)


def nav_tree(entries: dict[str, Entry]) -> list[dict]:
    """mkdocs nav for the entry pages, grouped like the index (phase -> category), each page
    listed by its short title."""
    return [
        {NAV_PHASE_TITLES[phase]: [
            {CATEGORY_TITLES[category]: [{nav_label(e): f"errors/{e.id}.md"} for e in group]}
            for category, group in categories
        ]}
        for phase, categories in group_entries(entries)
    ]


# the index table's reproduction column: a word per state (the run and date are above the tables;
# the full badge text is the tooltip)
SHORT_BADGES = {"verified": "✓ verified", "failed": "✗ failed", "gpu-only": "GPU runner only", "not-reproduced": "not yet"}


def render_index(entries: dict[str, Entry], results: list[Results], has_fit: bool) -> str:
    badges = {eid: verification(e, results).badges[0] for eid, e in entries.items()}
    return front_matter(title="vLLM KV-cache and OOM errors") + _ENV.get_template("index.md.j2").render(
        groups=group_entries(entries),
        badges=badges,
        short_badges=SHORT_BADGES,
        phase_titles=PHASE_TITLES,
        category_titles=CATEGORY_TITLES,
        count=len(entries),
        has_fit=has_fit,
        results=results,
    )
