"""Reading what a model replies: the JSON in it (repaired when slightly off) and its fenced blocks.

Models wrap JSON in fences and prose, and write the JSON that JavaScript or Python would accept:
trailing commas, comments, single quotes, True/None. `find_json` repairs exactly those faults, with
a small string-aware scan rather than a package that "repairs" anything (and so hides real mistakes);
when the JSON is still broken it raises ValueError naming the real problem with its line and column,
never a misleading "success" on some inner fragment such as `[]`.

    python replies.py "{'a': 1, /* note */ 'b': [True, None,],}"     # prints {"a": 1, "b": [true, null]}
"""

from __future__ import annotations

import json
import re
import sys

# A fenced block: ``` or ~~~, any info string (python, python3, py, Python, json, ...), closed by the same
# fence at the end of a line, or by the end of the reply when the model (or max_tokens) never closed it.
FENCE_RE = re.compile(r"(```|~~~)[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:\1[ \t]*$|\Z)", re.S | re.M)
WORD_RE = re.compile(r"[A-Za-z_]\w*")
PY_LITERALS = {"True": "true", "False": "false", "None": "null"}  # same lengths: columns stay right


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(info string lower-cased, body) of every fenced block, in order."""
    return [(m.group(2).lower(), m.group(3)) for m in FENCE_RE.finditer(text)]


def repair_json(text: str) -> str:
    """Fix the common non-JSON of models, keeping every other character at its line and column:
    comments (//, /* */, #) become spaces, single-quoted strings double-quoted, True/False/None
    true/false/null, and a comma right before } or ] a space. Text inside strings is never touched."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":  # a string: copy it, re-quoting a single-quoted one
            j, body = i + 1, []
            while j < n and text[j] != c:
                if text[j] == "\\" and j + 1 < n:
                    body.append(text[j:j + 2] if text[j + 1] != "'" else "'")
                    j += 2
                    continue
                body.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(body) + ('"' if j < n else ""))
            i = j + 1
        elif text.startswith("//", i) or c == "#":  # a line comment
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "}]":
            k = len(out) - 1
            while k >= 0 and out[k].isspace():
                k -= 1
            if k >= 0 and out[k] == ",":
                out[k] = " "
            out.append(c)
            i += 1
        else:
            m = WORD_RE.match(text, i) if c.isalpha() else None
            word = m.group(0) if m else c
            out.append(PY_LITERALS.get(word, word))
            i += len(word)
    return "".join(out)


def bracket_spans(text: str) -> list[str]:
    """The outermost {...} and [...] regions of `text` (string-aware), longest first. Only these are
    tried as JSON inside prose: an inner `[]` of a broken object is never taken for the reply."""
    spans, depth, start, quote, i = [], 0, 0, None, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif depth and c in "\"'":
            quote = c
        elif c in "{[":
            start = i if depth == 0 else start
            depth += 1
        elif c in "}]" and depth:
            depth -= 1
            if depth == 0:
                spans.append(text[start:i + 1])
        i += 1
    if depth:
        spans.append(text[start:])  # never closed (cut off): still the best place to find the error
    return sorted(spans, key=len, reverse=True)


def _decode(candidate: str) -> object:
    """json.loads, then json.loads of the repaired text (raw newlines in strings allowed too); the
    repaired text's error if both fail."""
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        return json.loads(repair_json(candidate), strict=False)


def find_json(text: str) -> object:
    """The JSON value in a reply: the whole reply, a fenced block, or the largest bracketed region that
    parses (each repaired if need be). ValueError says what is wrong with the most likely candidate."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty")
    fenced = [body.strip() for info, body in fenced_blocks(text) if info in ("", "json", "json5", "jsonc")]
    likely = fenced + bracket_spans(text)  # where the JSON was meant to be, most likely first
    errors: dict[str, json.JSONDecodeError] = {}
    for cand in [stripped] + likely:
        try:
            return _decode(cand)
        except json.JSONDecodeError as e:
            errors.setdefault(cand, e)
    if not likely:
        raise ValueError("there is no JSON object or array in it")
    e, lines = errors[likely[0]], likely[0].splitlines()
    line = lines[e.lineno - 1].strip()[:80] if e.lineno <= len(lines) else ""
    raise ValueError(f"{e.msg} at line {e.lineno} column {e.colno} of the JSON (that line: {line!r})")

if __name__ == "__main__":
    print(json.dumps(find_json(" ".join(sys.argv[1:]) or sys.stdin.read())))
