"""kvkb: vLLM's KV-cache and out-of-memory errors, with fixes proven against real vLLM."""

import os as _os

# matcher/, site_src/ and reproductions/ sit at the repository root (the layout the user fixed); a
# wheel installs them as kvkb.matcher, kvkb.site_src and kvkb.reproductions. In a checkout (the
# editable install is a plain .pth line, see pyproject.toml) searching the root as well resolves
# them with no import hook, whose own imports would cost ~20 ms of kbmatch's cold start.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if _os.path.isfile(_os.path.join(_root, "matcher", "engine.py")):
    __path__.append(_root)  # noqa: F821  (a package's __path__ is set by the import system)
del _os, _root
