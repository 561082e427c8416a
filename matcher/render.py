"""Terminal text for a Report and for `kbmatch --explain ID`. Colour is decided by the caller."""

from __future__ import annotations



class Style:
    def __init__(self, color: bool):
        self.color = color

    def _w(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, t: str) -> str:
        return self._w("1", t)

    def red(self, t: str) -> str:
        return self._w("1;31", t)

    def green(self, t: str) -> str:
        return self._w("32", t)

    def yellow(self, t: str) -> str:
        return self._w("33", t)

    def dim(self, t: str) -> str:
        return self._w("2", t)


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _fix_lines(m, s: Style) -> list[str]:
    out = [f"  {s.bold('fix')}   {m.fix_title}"]
    for form, prompt in (("cli", "$ "), ("python", ">>> "), ("env", "env ")):
        if form in m.fix_forms:
            out.append(f"        {prompt}{s.green(m.fix_forms[form])}")
    for name, note in m.notes.items():
        out.append(s.dim(f"        {name}: {note}"))
    return out


def _where(m) -> str:
    return f"line {m.line_no}" if m.line_no is not None else f"the window at byte {m.offset}"


def _why(m, s: Style) -> list[str]:
    sig = m.signature
    out = [
        f"  {s.bold('why')}   {_where(m)} matches signature {sig['id']} "
        f"(vLLM {sig['versions']}, {sig['engine']} engine, {sig['backend']} backend), score {m.score:.1f}",
    ]
    # a line the paste cuts where a sentence of the wording ends: why that names the error
    out += [f"        {f.says}" for f in m.evidence if f.says.startswith("the paste stops")]
    if m.runner_up:
        r = m.runner_up
        out.append(f"        runner-up: {r['id']} ({r['signature']}) {r['score']:.1f}")
    else:
        out.append("        runner-up: none (no other entry comes close)")
    if m.stage:
        at = next((f for f in m.evidence if f.says.startswith("stage ") and f.line is not None), None)
        where = f", line {at.line}: {_short(at.text, 120)}" if at else ""
        out.append(f"        stage seen in the log: {m.stage}{where} (decides between entries that share this wording)")
    out.append(s.dim(f"        normalised: {_short(m.line, 200)}"))
    return out


def _order(report, s: Style) -> list[str]:
    if not getattr(report, "newest_first", False):
        return []
    return [s.dim("  the paste runs newest first (its timestamps go back in time): it was read oldest first")]


def _restarts(report, s: Style) -> list[str]:
    if not report.restarts:
        return []
    n = report.restarts
    return [s.dim(f"  the log shows {n} restart{'s' if n > 1 else ''} ({n + 1} start-ups); this is the last one's answer")]


def _evidence_lines(m, s: Style) -> list[str]:
    out = []
    for f in m.evidence:
        where = f"line {f.line}" if f.line is not None else "the log"
        out.append(f"        {where}: {s.dim(_short(f.text, 140))}")
        out.append(f"          {f.says}")
    return out


def report_text(report, top: int, color: bool) -> str:
    s = Style(color)
    lines: list[str] = []
    conf = report.confident
    if conf:
        root = conf[0]
        lines.append(f"{s.red('root cause')}  {s.bold(root.id)}  {root.title}")
        lines += _restarts(report, s) + _order(report, s)
        lines.append(f"  {s.bold('error')} {_short(root.text, 240)}")
        lines += _fix_lines(root, s)
        lines += _why(root, s)
        lines.append(f"  {s.bold('read')}  {root.url}")
        others = conf[1:]
        if others:
            lines.append("")
            lines.append(s.bold("also in this log") + " (in log order):")
            for m in others[: max(0, top - 1)]:
                wrapper = m.category == "engine-wrapper"
                note = " (the engine dying of the root cause above)" if wrapper else ""
                lines.append(f"  {_where(m)}: {s.bold(m.id)} (score {m.score:.1f}){note} {m.url}")
                if m.fix and not wrapper:  # a wrapper's own fix would distract from the root cause's
                    lines.append(f"        fix: {m.fix}")
        return "\n".join(lines) + "\n"
    nm = report.not_memory
    lines.append(s.yellow("No confident match in the knowledge base."))
    if nm:
        where = f"line {nm['line']}" if nm.get("line") is not None else "the log"
        lines.append(f"  {s.bold('not a memory error')}: the error at {where} is")
        lines.append(f"    {_short(nm['text'], 240)}")
        lines.append("  no KV-cache or out-of-memory entry applies; any engine-died message around it reports this error")
    else:
        if report.first_error:
            lines.append(f"  first error: {_short(report.first_error, 240)}")
    lines += _restarts(report, s) + _order(report, s)
    if report.reached:
        lines.append(s.dim(f"  the log's last start-up had reached: {report.reached}"))
    shown = report.matches[:top]
    likely = [m for m in shown if m.confidence == "likely"]
    for m in likely:
        lines.append(f"{s.bold('likely')}  {s.bold(m.id)}  {m.title}")
        if m.fix:
            lines += _fix_lines(m, s)
        lines.append(f"  {s.bold('evidence')}")
        lines += _evidence_lines(m, s)
        lines.append(f"  {s.bold('read')}  {m.url}")
    if report.truncated:
        lines.append(s.yellow("The paste ends before the exception line.") +
                     " Paste the lines after the last one shown (the line starting with the exception's name)" +
                     (" to confirm." if likely else "."))
    elif report.no_error:
        ne = report.no_error
        where = f"line {ne['line']}" if ne.get("line") is not None else "its last line"
        lines.append(s.yellow("No error in this paste:") + " no exception, traceback or ERROR line. It ends at " + where + ":")
        lines.append(f"    {_short(ne['text'], 240)}")
        lines.append("  Paste the lines that came after it, down to the last line of the traceback (it names the error).")
    possible = [m for m in shown if m.confidence == "possible"]
    if possible:
        lines.append(s.bold("possible:"))
        for m in possible:
            if m.notes.get("advisory"):
                why = m.notes["advisory"]
            elif m.runner_up:
                why = f"runner-up {m.runner_up['id']} {m.runner_up['score']:.1f}"
            elif m.evidence and m.signature is None:
                why = m.evidence[0].says
            else:
                why = "below the confidence cutoff"
            lines.append(f"  {m.id}  score {m.score:.1f} ({why})  {m.url}")
    if report.new_issue_url and not likely:
        lines.append("If this is a KV-cache or memory error, propose an entry (prefilled):")
        lines.append(f"  {report.new_issue_url}")
    return "\n".join(lines) + "\n"


def _block(title: str, body: str, s: Style, width: int = 100) -> list[str]:
    import textwrap  # only --explain wraps text

    out = [s.bold(title)]
    for para in body.strip().split("\n\n"):
        raw = para.splitlines()
        if any(ln.startswith(("  ", "-", "*", "|", "```")) for ln in raw):
            out += ["  " + ln for ln in raw]
        else:
            out += textwrap.wrap(" ".join(raw), width, initial_indent="  ", subsequent_indent="  ")
        out.append("")
    return out


def explain_text(entry: dict, url: str, color: bool) -> str:
    s = Style(color)
    out = [s.red(entry["id"]), s.bold(entry["title"]), ""]
    out += _block("Summary", entry["summary"], s)
    out += _block("What it means", entry["meaning"], s)
    out.append(s.bold("Signatures (what vLLM prints)"))
    for sig in entry["signatures"]:
        kind = sig.get("exception") or sig.get("level")
        out.append(f"  {sig['id']}  vLLM {sig['versions']}, {sig['engine']} engine, {sig['backend']} backend")
        out.append(s.dim(f"    {kind}: {sig['template']}"))
    out.append("")
    for n, cause in enumerate(entry["causes"], 1):
        out += _block(f"Cause {n}: {cause['title']}", cause["diagnosis"], s)
        for fix in cause["fixes"]:
            out.append(f"  fix: {fix['title']}  [{fix.get('status', 'unverified')}, risk {fix.get('risk', 'low')}, vLLM {fix.get('versions', '')}]")
            for form, prompt in (("cli", "$ "), ("python", ">>> "), ("env", "env ")):
                if fix.get(form):
                    out.append("    " + prompt + s.green(fix[form]))
        out.append("")
    if entry.get("ineffective"):
        out.append(s.bold("Advice that does not work"))
        for fix in entry["ineffective"]:
            out.append(f"  {fix['title']}: {fix['claim']}")
            import textwrap

            out += ["    " + ln for ln in textwrap.wrap(" ".join(fix["reason"].split()), 96)]
        out.append("")
    verify = entry.get("verify") or {}
    if verify.get("text"):
        out += _block("Check the fix took", verify["text"], s)
    out.append(f"{s.bold('Read more')}  {url}")
    return "\n".join(out) + "\n"
