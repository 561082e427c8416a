"""The "checked against vLLM's code" cell of each signature row: the releases whose code prints the
wording (kvkb/atlas) and a link to the raising line of the newest of them at its tag on GitHub."""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kvkb.atlas.check import explained
from kvkb.atlas.store import Atlas, AtlasError, load_default, spans
from kvkb.entry import ORIGIN_NAMES, Entry, Signature

VLLM_BLOB = "https://github.com/vllm-project/vllm/blob"
_SAFE_PATH = re.compile(r"^[\w./-]+$")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]#|!<>])")


def source_url(version: str, path: str, line: int | None) -> str:
    """vLLM's file at the release tag (vX.Y.Z), at the line when known."""
    if not _SAFE_PATH.match(path):
        raise ValueError(f"not a source path: {path!r}")
    return f"{VLLM_BLOB}/v{version}/{path}" + (f"#L{line}" if line else "")


def _releases_in(sig: Signature, atlas: Atlas) -> set[int]:
    spec = SpecifierSet(sig.versions)
    return {i for i, v in enumerate(atlas.releases) if spec.contains(Version(v), prereleases=True)}


def _foreign_check(sig: Signature, atlas: Atlas | None) -> str:
    """A declared-foreign text: whose it is, and (what lint's KB073 checks) that vLLM's Python code
    does not print it in the releases the signature names."""
    who = ORIGIN_NAMES.get(sig.origin, sig.origin)
    head = {"invented": "not an error vLLM prints", "vllm-csrc": f"printed by {who}"}.get(
        sig.origin, f"printed by {who}, not by vLLM")
    if atlas is None:
        return head
    shown = explained(sig, atlas)
    claimed = _releases_in(sig, atlas)
    if shown is None or not claimed or shown[0] & claimed:
        return head  # lint reports it (KB042 / KB073); the page does not vouch for it
    where = spans(claimed, atlas.releases)
    if sig.origin == "invented":
        return f"no vLLM release prints it: checked against vLLM's code, releases {where}"
    if sig.origin == "vllm-csrc":
        return f"{head}; not in its Python code: checked, releases {where}"
    return f"{head}; checked absent from vLLM's code, releases {where}"


def signature_check(sig: Signature, atlas: Atlas | None) -> str:
    """Markdown for one table cell (no '|' in it)."""
    if sig.origin != "vllm":
        return _foreign_check(sig, atlas)
    if atlas is None:
        return "not checked (no atlas in this build)"
    shown = explained(sig, atlas)
    if not shown or not shown[0]:
        return "not found in vLLM's code"
    found, items = shown
    newest = max(found)
    version = atlas.releases[newest]
    # the raise or log call that prints it (a plain piece joined into it only when none is known)
    ranked = sorted((it for it in items if newest in it.indexes), key=lambda it: not it.role)
    holder = next((it for it in ranked if it.line_at(newest) is not None), None) or next(iter(ranked), None)
    text = f"checked against vLLM's code, releases {spans(found, atlas.releases)}"
    if holder is None:
        return text
    line = holder.line_at(newest)
    label = _MD_SPECIAL.sub(r"\\\1", f"{holder.file}:{line}" if line else holder.file)
    return f"{text}: [{label} at v{version}]({source_url(version, holder.file, line)})"


def signature_checks(entry: Entry, atlas: Atlas | None = None, use_default: bool = True) -> list[str]:
    if atlas is None and use_default:
        try:
            atlas = load_default()
        except AtlasError:
            atlas = None
    return [signature_check(sig, atlas) for sig in entry.signatures]
