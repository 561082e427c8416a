"""One function per answer, shared by `kbmatch --json` and the site's diagnose page (Pyodide).

The CLI prints `to_json(report, top)` + newline; the browser calls `diagnose_json(data)` with a
Matcher built from the portable index, so both show the very same JSON for the same bytes.
"""

from __future__ import annotations

import io


def report_dict(report, top: int = 3) -> dict:
    data = report.to_dict()
    data["matches"] = data["matches"][:top]
    return data


def to_json(report, top: int = 3) -> str:
    import json

    return json.dumps(report_dict(report, top), indent=2, ensure_ascii=False)


def diagnose_json(data: bytes | str, matcher, top: int = 3) -> str:
    """Exactly what `kbmatch --json` prints for these bytes (without the final newline)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    return to_json(matcher.match_stream(io.BytesIO(raw)), top)
