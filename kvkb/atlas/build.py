"""Add releases to the atlas: fetch each wheel in turn, extract its facts, fold them in, save."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version

from kvkb.atlas.extract import release_facts
from kvkb.atlas.store import ATLAS_PATH, Atlas, AtlasError
from kvkb.atlas.wheels import release_sources

Fetch = Callable[[str, Path], "Iterable[tuple[str, str]]"]  # noqa: F821 (the wheels.release_sources shape)


def add_releases(atlas: Atlas, versions: list[str], *, path: Path | None = ATLAS_PATH,
                 fetch: Fetch = release_sources, workdir: Path | None = None,
                 progress: Callable[[str], None] = lambda msg: None) -> dict[str, list[tuple]]:
    """Add each version (oldest first), saving after each one when `path` is given.

    Returns the facts of each added release, for the drift report. Versions already held are
    skipped, so an interrupted build resumes where it stopped.
    """
    todo = sorted({v for v in versions if v not in atlas.releases}, key=Version)
    if atlas.releases and todo and Version(todo[0]) < Version(atlas.releases[-1]):
        raise AtlasError(f"{todo[0]} is older than {atlas.releases[-1]}, the newest release in the atlas; "
                         "releases are added oldest first: rebuild with `kvkb atlas add --rebuild` and every release")
    added: dict[str, list[tuple]] = {}
    cache: dict = {}
    with tempfile.TemporaryDirectory(prefix="kvkb-atlas-", dir=workdir) as tmp:
        for n, version in enumerate(todo, 1):
            t0 = time.monotonic()
            nxt: dict = {}
            facts = list(release_facts(fetch(version, Path(tmp)), cache=_Carry(cache, nxt)))
            cache = nxt  # keep only this release's files: the next release shares most of them
            atlas.add_release(version, facts)
            if path is not None:
                atlas.save(path)
            added[version] = facts
            progress(f"[{n}/{len(todo)}] vllm {version}: {len(facts)} facts in {time.monotonic() - t0:.0f}s")
    return added


class _Carry(dict):
    """A cache that reads the previous release's results and records this release's."""

    def __init__(self, old: dict, new: dict):
        super().__init__()
        self.old, self.new = old, new

    def get(self, key, default=None):
        if key in self.old:
            self.new[key] = self.old[key]
            return self.old[key]
        return default

    def __setitem__(self, key, value):
        self.new[key] = value
