"""The shape of a request body, scanned chunk by chunk as it arrives and before any parser reads it: how deep its
brackets nest, how many values it holds at least, and (YAML) how far a line is indented.

A parser pays for a hostile body before its own limits (api_schemas.loading) stop it: libyaml scans ahead
through a run of ``[``, and the YAML composer makes a Python node for every value. So a body over those limits is
refused here, in time linear in its bytes and with a few calls into C per chunk (``bytes.find``, ``translate``,
``count`` and ``replace``, regular expressions), never a Python step per byte or per token: about 5 ms per MB
of JSON or of plain YAML; YAML dense with quotes or comments costs more per byte, so their number is bounded
(below), which bounds the scan of any body to a few tens of milliseconds. The first two rules are the loader's,
with the same field and wording; the others are the scan's own:

- more than MAX_DEPTH nested brackets (``[`` and ``{``) outside quoted strings and comments;
- more than MAX_VALUES values. JSON counts what the loader's own check counts (every ``[``, ``{``, ``,`` and
  ``:``). YAML counts a lower bound of the nodes the composer would make, the largest of three: the entries
  that each have a node of their own (the first of each non-empty flow collection, the one after each comma,
  the value after each mapping indicator, which is ``:`` before a space or a line break, and each block
  sequence entry, ``-`` first on a line); two nodes, key and value, per mapping indicator; a node per flow
  collection and per quoted scalar;
- YAML: a line whose content is indented more than MAX_INDENT columns (block nesting is by indentation: 32
  levels of up to 8 columns each fit); more than MAX_SKIPPED quoted strings and comments, and more than
  MAX_QUOTES quote and ``#`` characters in all: what the scan steps over one at a time (a document the loader
  accepts holds at most MAX_VALUES quoted strings, each with two quotes).

What is outside a string is decided as each syntax decides it. JSON: a ``"`` always opens or closes a string
(a backslash escapes the next byte). YAML (and a body of no declared syntax, read as YAML first): a quote opens
a quoted scalar only where a node may start (after a space, a line break, ``[``, ``{``, ``,`` or ``:``),
elsewhere (``it's``) it is text, and ``#`` after a space or a line break starts a comment. JSON that closes more
brackets than it opened, or holds two strings with nothing between them, is invalid: the scan stops there and
the parser says where. In YAML a closer with nothing open is text of a plain scalar (``name: x]``). The scan
may miss a bracket that a YAML plain or block scalar hides; the parser's own limits still apply after it.
"""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Literal

from api_schemas.loading import MAX_DEPTH, MAX_VALUES, Syntax

__all__ = ["MAX_INDENT", "MAX_QUOTES", "MAX_SKIPPED", "BodyShape"]

MAX_INDENT = 8 * MAX_DEPTH
"""The most columns a YAML line's content may be indented."""
MAX_SKIPPED = 2 * MAX_VALUES
"""The most quoted strings and comments a YAML body may hold."""
MAX_QUOTES = 4 * MAX_VALUES
"""The most quote (" and ') and # characters a YAML body may hold."""

_CLOSE = ord("]")
# Brackets alone, each kind of opener as "[" and each kind of closer as "]".
_BRACKETS_ONLY = (bytes.maketrans(b"{}", b"[]"), bytes(b for b in range(256) if b not in b"[]{}"))
_RUNS = re.compile(rb"\[+|\]+")

# JSON: a complete string, the rest of a string once inside it (a YAML double-quoted scalar escapes the same
# way), and a run of text with its strings whole.
_DQ_BODY = rb'[^"\\]*+(?:\\.[^"\\]*+)*+'
_J_STRING = re.compile(rb'"' + _DQ_BODY + rb'"', re.S)
_DQ_REST = re.compile(_DQ_BODY, re.S)
_J_RUN = re.compile(rb'(?:[^"]++|"' + _DQ_BODY + rb'")*+', re.S)

# YAML. A quote opens a quoted scalar, and # a comment, only after the bytes named: each pattern starts with its
# own byte, which lets the regular expression engine skip to it, and a lookbehind then checks the byte before.
# A single-quoted scalar is complete only once the byte after its closing quote is known not to be another
# quote ('' is an escaped quote); a comment once its line break has come.
_SQ_BODY = rb"[^']*+(?:''[^']*+)*+"
_Y_SKIPPED = (rb'"(?<![^ \t\r\n\[{,:]")' + _DQ_BODY + rb'"'
              + rb"|'(?<![^ \t\r\n\[{,:]')" + _SQ_BODY + rb"'(?=[^'])"
              + rb"|#(?<![^ \t\r\n]#)[^\n]*+(?=\n)")
_Y_SKIP = re.compile(_Y_SKIPPED, re.S)
_Y_RUN = re.compile(rb"""(?:[^"'#]++|["'](?<=[^ \t\r\n\[{,:]["'])|#(?<=[^ \t\r\n]#)|""" + _Y_SKIPPED + rb")*+",
                    re.S)
_SQ_REST = re.compile(_SQ_BODY, re.S)
# The byte before a run, as the class its lookbehinds see: a space, a byte a quoted scalar may follow, other.
_CONTEXT = bytes(32 if b in b" \t\r\n" else 44 if b in b"[{,:" else 120 for b in range(256))
_DEEP = b"\n" + b" " * (MAX_INDENT + 1)
_SPACES = re.compile(rb" *+")
_INDICATORS = (b": ", b":\n", b":\r", b":\t")
_SEQUENCE_ENTRY = re.compile(rb"\n *+-[ \r\n]")  # a block sequence entry
# An empty flow collection, or one that held only quoted strings (taken out before): counted as empty, which
# only lowers the bound.
_EMPTY = re.compile(rb"\[[ \t\r\n]*+\]|\{[ \t\r\n]*+\}")
_NOT_QUOTES = bytes(b for b in range(256) if b not in b"\"'#")

_State = Literal["text", "double", "single", "comment"]


class BodyShape:
    """Feed a body's chunks in order; `refusal` is the first rule the body breaks (then the scan stops), None
    while it breaks none. `syntax` is how the body will be read: "json", "yaml", or None (YAML, then JSON)."""

    def __init__(self, syntax: Syntax | None) -> None:
        self.json = syntax == "json"
        self.refusal: str | None = None
        self.depth = 0  # brackets open now (YAML: lower than the truth after a stray closer)
        self._state: _State = "text"
        self._escape = False  # a chunk ended on the backslash of an escape inside a double-quoted string
        self._quote = False  # a chunk ended on a quote inside a single-quoted scalar: its end, or '' begun
        self._before = b"\n"  # the byte before the chunk: the start of a body is the start of a line
        self._column = 0  # the indentation of the line so far while it holds only spaces, else -1
        self._stopped = False  # invalid JSON: the parser says where
        self._after_comment = False  # the text to scan next starts where a comment ended
        # What the values are counted from: brackets opened, commas (and JSON's colons), YAML's empty flow
        # collections, mapping indicators and block sequence entries, quoted strings (YAML: at least), and
        # (YAML) quoted strings and comments stepped over.
        self._opens = self._empty = self._separators = self._colons = self._entries = 0
        self._quoted = self._skipped = 0
        self._quotes = 0  # YAML: quote and # characters so far

    def feed(self, chunk: bytes) -> None:
        """Scan the next chunk; sets `refusal` when the body so far breaks a rule."""
        if self.refusal is not None or self._stopped or not chunk:
            return
        if not self.json:
            self._quotes += len(chunk.translate(None, _NOT_QUOTES))
            if self._quotes > MAX_QUOTES:
                self.refusal = f"holds more than {MAX_QUOTES} quote and '#' characters"
                return
        data = self._before + chunk
        self._before = chunk[-1:]
        pos = 1
        while pos < len(data) and self.refusal is None and not self._stopped:
            pos = self._text(data, pos) if self._state == "text" else self._inside(data, pos)

    def _inside(self, data: bytes, pos: int) -> int:
        """Go on through the string or comment the last chunk ended in: where it ends, or the data's end."""
        self._column = -1
        if self._state == "comment":
            end = data.find(b"\n", pos)
            if end < 0:
                return len(data)
            self._state, self._after_comment = "text", True
            return end
        if self._state == "double":
            if self._escape:
                self._escape, pos = False, pos + 1
                if pos >= len(data):
                    return pos
            end = _DQ_REST.match(data, pos).end()  # type: ignore[union-attr]  # matches the empty string
            if end == len(data):
                return end
            if data[end] != ord('"'):  # the data ends on an escape's backslash
                self._escape = True
                return len(data)
            self._state = "text"
            return end + 1
        if self._quote:  # single-quoted: the last chunk ended on a quote
            self._quote = False
            if data[pos] != ord("'"):
                self._state = "text"
                return pos
            pos += 1  # '' is an escaped quote: still inside
        end = _SQ_REST.match(data, pos).end()  # type: ignore[union-attr]
        if end == len(data):
            return end
        if end + 1 == len(data):  # a quote at the very end: the next chunk says which
            self._quote = True
            return len(data)
        self._state = "text"
        return end + 1

    def _text(self, data: bytes, pos: int) -> int:
        """Scan text from `pos` up to a string or comment this chunk does not finish (or the data's end)."""
        if self.json:
            end = _J_RUN.match(data, pos).end()  # type: ignore[union-attr]
            text, strings = _J_STRING.subn(b"", data[pos:end])
            skipped = 0
        else:
            # Up to the first quote or '#' the text is plain: no expression needs to walk it.
            first = min((i for i in (data.find(b'"', pos), data.find(b"'", pos), data.find(b"#", pos)) if i >= 0),
                        default=len(data))
            end = _Y_RUN.match(data, first).end() if first < len(data) else first  # type: ignore[union-attr]
            # The byte before, as its class, keeps the lookbehinds right at the first byte.
            stripped, skipped = _Y_SKIP.subn(b"", data[first - 1:first].translate(_CONTEXT) + data[first:end])
            text = data[pos:first] + stripped[1:]
            strings = max(0, skipped - data.count(b"#", first, end))  # at least: the rest may be comments
            self._indentation(text)
        if self.refusal is None:  # the byte before, unless it ended a comment (# a note:)
            self._count(text, strings, skipped, b"" if self._after_comment else data[pos - 1:pos])
        self._after_comment = False
        if end < len(data) and self.refusal is None and not self._stopped:
            opener = data[end]
            self._state = "double" if opener == ord('"') else "single" if opener == ord("'") else "comment"
            self._quoted += opener != ord("#")
            self._skipped += 1
            self._column = -1
            return end + 1
        return end

    def _count(self, text: bytes, strings: int, skipped: int, before: bytes) -> None:
        """Nesting and values of text outside strings and comments, from which `strings` quoted strings and
        `skipped` quoted strings and comments were taken out; `before` is the byte before it (for an indicator
        of two bytes that it ends)."""
        brackets = text.translate(*_BRACKETS_ONLY)
        if brackets:
            if self.json and _lowest(brackets, self.depth) < 0:
                self._stopped = True
                return
            if _highest(brackets, self.depth) > MAX_DEPTH:
                self.refusal = f"nests more than {MAX_DEPTH} levels deep"
                return
            opens = brackets.count(b"[")
            self.depth += 2 * opens - len(brackets)
            self._opens += opens
        self._quoted += strings
        self._skipped += skipped
        self._separators += text.count(b",")
        if self.json:
            self._separators += text.count(b":")
            values = self._opens + self._separators
            if self._quoted > values + 1:  # every string but a lone top-level one follows a [, , or : of its own
                self._stopped = True
                return
        else:
            # A count of one byte first: most text has few of these, and a count of two bytes is slower.
            if b":" in text or before == b":":
                self._colons += sum((before + text).count(indicator) for indicator in _INDICATORS)
            if b"-" in text:
                self._entries += _SEQUENCE_ENTRY.subn(b"", before + text)[1]
            if brackets:
                self._empty += _EMPTY.subn(b"", text)[1]
            values = max(self._opens - self._empty + self._separators + self._colons + self._entries,
                         2 * self._colons, self._opens + self._quoted)
            if self._skipped > MAX_SKIPPED:
                self.refusal = f"holds more than {MAX_SKIPPED} quoted strings and comments"
        if values > MAX_VALUES:
            self.refusal = f"holds more than {MAX_VALUES} values"

    def _indentation(self, text: bytes) -> None:
        """Refuse a YAML line (outside strings and comments) whose content is indented past MAX_INDENT."""
        if self._column >= 0:  # the line this text goes on with has held only spaces so far
            lead = len(text) - len(text.lstrip(b" "))
            if lead < len(text) and text[lead] not in b"\r\n" and self._column + lead > MAX_INDENT:
                self.refusal = f"indents a line by more than {MAX_INDENT} columns"
                return
            self._column = self._column + lead if lead == len(text) else -1
        at = text.find(_DEEP)
        while at >= 0:  # a line of more than MAX_INDENT spaces: deep content, or blank
            content = _SPACES.match(text, at + 1).end()  # type: ignore[union-attr]
            if content < len(text) and text[content] not in b"\r\n":
                self.refusal = f"indents a line by more than {MAX_INDENT} columns"
                return
            at = text.find(_DEEP, content)
        newline = text.rfind(b"\n")
        if newline >= 0:
            tail = text[newline + 1:]
            self._column = len(tail) if not tail.strip(b" ") else -1


# The depths a run of brackets reaches, highest and lowest, from the depth before it. Taking every "][" (a valley)
# out leaves every higher point of the walk as it was, taking every "[]" (a peak) out every lower one; each pass
# is one call into C. Within _PASSES passes a walk that stays between 0 and MAX_DEPTH is left as "[[[]]" or
# "]][[[", read at once; what is left otherwise has at most one run per MAX_DEPTH bytes, walked run by run.
_PASSES = MAX_DEPTH + 2


def _reduced(brackets: bytes, pair: bytes) -> tuple[bytes, bool]:
    """`brackets` with `pair` taken out, up to _PASSES times; and whether none is left."""
    for _ in range(_PASSES):
        shorter = brackets.replace(pair, b"")
        if len(shorter) == len(brackets):
            return brackets, True
        brackets = shorter
    return brackets, False


def _walk(brackets: bytes, depth: int) -> list[int]:
    """The depth after each run of openers or closers, starting at `depth`."""
    steps = [len(run) for run in _RUNS.findall(brackets)]
    closers = 0 if brackets[0] == _CLOSE else 1  # closer runs alternate with opener runs
    steps[closers::2] = [-step for step in steps[closers::2]]
    return list(accumulate(steps, initial=depth))


def _highest(brackets: bytes, depth: int) -> int:
    left, whole = _reduced(brackets, b"][")
    return depth + len(left) - len(left.lstrip(b"[")) if whole else max(_walk(left, depth))


def _lowest(brackets: bytes, depth: int) -> int:
    left, whole = _reduced(brackets, b"[]")
    return depth - (len(left) - len(left.lstrip(b"]"))) if whole else min(_walk(left, depth))
