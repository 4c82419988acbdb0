"""The variables a submission's config script sets, as bash would leave them after `source config.sh` in a clean
environment: assignments in order (`export X=...`, `X=...`, `: "${X:=default}"`, `unset X`), `source`d files
followed, and `if` / `elif` / `else` blocks taken or skipped by their conditions where those are simple enough to
evaluate here:

- `[[ ... ]]` and `[ ... ]` tests joined by `&&` or `||` (inside `[[ ]]` too): string comparison (`==`, `=`,
  `!=`, against a literal with no glob characters), integer comparison (`-eq -ne -gt -ge -lt -le`), `-n` / `-z`,
  and a bare word (non-empty);
- their operands: literals and `${VAR}`, `$VAR`, `${VAR:-default}`, `${VAR-default}`, `${VAR:=default}` (an unset
  variable is the empty string, as in bash);
- an empty or non-numeric operand of an integer comparison: 0 inside `[[ ]]` for the empty string (bash evaluates
  the operand arithmetically; a word that is not a number is not evaluated here), false inside `[ ]` (bash's
  "integer expression expected" is a failing test).

A condition with anything else (`$((...))`, file tests, globs, command substitution) cannot be evaluated here: its
whole `if` ... `fi` is skipped, every branch of it, and so is the rest of an `if` from the first `elif` that
cannot be evaluated (which branch runs is then unknown). bench/mlperf_results.py reads the configs with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# read(path) -> the file's text, or None where the repository has no such file
Reader = Callable[[str], "str | None"]

_VAR = re.compile(r"\$\{(\w+)(?:(:?[-=])([^}]*))?\}|\$(\w+)")
_INT_OPS = {"-eq": int.__eq__, "-ne": int.__ne__, "-gt": int.__gt__, "-ge": int.__ge__, "-lt": int.__lt__,
            "-le": int.__le__}


def expand(value: str, env: dict[str, str]) -> str:
    """`value` with its variables substituted (unset: the empty string, or the `:-`/`-`/`:=` default)."""
    def sub(m: re.Match[str]) -> str:
        name = m[1] or m[4]
        current = env.get(name)
        if m[2] in (":-", ":=") and not current or m[2] in ("-", "=") and current is None:
            default = expand(m[3], env)
            if m[2].endswith("="):
                env[name] = default
            return default
        return current or ""
    return _VAR.sub(sub, value)


def _operand(word: str, env: dict[str, str]) -> str | None:
    """A test's operand, its quotes removed and its variables expanded; None where it holds what is not evaluated
    here (arithmetic or command substitution, a glob)."""
    if "$(" in word or "`" in word:
        return None
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'":
        quoted, word = word[0], word[1:-1]
        return word if quoted == "'" else expand(word, env)
    if any(c in word for c in "*?["):
        return None
    return expand(word, env)


def _integer(text: str, double: bool) -> int | None:
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    return 0 if double and not text.strip() else None


def _test(words: list[str], double: bool, env: dict[str, str]) -> bool | None:
    """One `[[ ... ]]` (double) or `[ ... ]` test; None where it cannot be evaluated."""
    values = [_operand(w, env) for w in words]
    if any(v is None for v in values):
        return None
    vals = [v for v in values if v is not None]
    if len(vals) == 1:
        return bool(vals[0])
    if len(vals) == 2 and words[0] in ("-n", "-z"):
        return bool(vals[1]) == (words[0] == "-n")
    if len(vals) == 3 and words[1] in ("==", "=", "!="):
        return (vals[0] == vals[2]) == (words[1] != "!=")
    if len(vals) == 3 and words[1] in _INT_OPS:
        left, right = _integer(vals[0], double), _integer(vals[2], double)
        if left is None or right is None:
            return None if double else False  # `[ x -eq 1 ]`: bash's "integer expression expected" fails the test
        return bool(_INT_OPS[words[1]](left, right))
    return None


def _within(words: list[str], double: bool, env: dict[str, str]) -> bool | None:
    """The words inside one `[[ ]]`, whose `&&` binds tighter than its `||` (a `[ ]` has neither)."""
    def joined(parts: list[str], joiner: str) -> list[list[str]]:
        out: list[list[str]] = [[]]
        for word in parts:
            if word == joiner:
                out.append([])
            else:
                out[-1].append(word)
        return out
    values: list[bool] = []
    for alternative in joined(words, "||"):
        terms = [_test(term, double, env) for term in joined(alternative, "&&")]
        if any(term is None for term in terms):
            return None
        values.append(all(terms))
    return any(values)


def condition(text: str, env: dict[str, str]) -> bool | None:
    """An `if`/`elif` condition (the text between the keyword and `; then`): tests joined by `&&` and `||` (left to
    right, as bash's list operators are); None where it cannot be evaluated."""
    tokens = re.findall(r"\[\[|\]\]|\[|\]|&&|\|\||\"[^\"]*\"|'[^']*'|[^\s\[\]&|]+", text)
    result: bool | None = None
    joiner = None
    i = 0
    while i < len(tokens):
        opener = tokens[i]
        if opener not in ("[[", "["):
            return None
        closer = "]]" if opener == "[[" else "]"
        try:
            end = tokens.index(closer, i + 1)
        except ValueError:
            return None
        words = tokens[i + 1:end]
        if opener == "[" and any(w in ("&&", "||") for w in words):
            return None
        value = _within(words, opener == "[[", env)
        if value is None:
            return None
        result = value if joiner is None else (result and value) if joiner == "&&" else (result or value)
        i = end + 1
        if i < len(tokens):
            joiner = tokens[i]
            if joiner not in ("&&", "||"):
                return None
            i += 1
    return result


@dataclass
class _Block:
    running: bool  # the branch being read runs
    taken: bool  # a branch of this `if` ran or will run
    known: bool  # every condition so far was evaluated (False: the rest of the block is skipped)
    outer: bool  # the enclosing code runs


def _strip(raw: str) -> str:
    line = raw.split(" #")[0].strip()
    return "" if line.startswith("#") else line


def shell_env(read: Reader, path: str, env: dict[str, str] | None = None,
              include: Callable[[str, str], str | None] | None = None) -> dict[str, str]:
    """The variables `path` leaves set (module docstring). `include(path, name)` finds a `source`d file by its
    base name (None: not in the repository, skipped)."""
    env = {} if env is None else env
    text = read(path)
    if text is None:
        return env
    blocks: list[_Block] = []
    for raw in text.split("\n"):
        line = _strip(raw)
        if not line:
            continue
        running = not blocks or blocks[-1].running
        if re.match(r"^if\b.*;\s*fi$", line):  # a one-line `if ...; then ...; fi`: not evaluated, skipped
            continue
        if m := re.match(r"^if\s+(.*?)\s*;?\s*(?:then)?$", line):
            verdict = condition(m[1], env) if running else None
            blocks.append(_Block(running=bool(verdict), taken=bool(verdict), known=verdict is not None,
                                 outer=running))
            continue
        if (m := re.match(r"^elif\s+(.*?)\s*;?\s*(?:then)?$", line)) and blocks:
            block = blocks[-1]
            verdict = condition(m[1], env) if block.outer and block.known and not block.taken else None
            block.known = block.known and (block.taken or verdict is not None)
            block.running = block.known and not block.taken and bool(verdict)
            block.taken = block.taken or block.running
            continue
        if line == "else" and blocks:
            block = blocks[-1]
            block.running = block.outer and block.known and not block.taken
            block.taken = True
            continue
        if line == "fi" or line.startswith("fi "):
            if blocks:
                blocks.pop()
            continue
        if line == "then" or not running:
            continue
        if m := re.match(r"^(?:source|\.)\s+.*/([\w.]+\.sh)\"?$", line):
            found = include(path, m[1]) if include is not None else None
            if found is not None:
                shell_env(read, found, env, include)
        elif m := re.match(r'^:\s+"?\$\{(\w+):?=([^}]*)\}"?$', line):
            if not env.get(m[1]):
                env[m[1]] = expand(m[2], env)
        elif m := re.match(r"^unset\s+([\w\s]+)$", line):
            for name in m[1].split():
                env.pop(name, None)
        elif m := re.match(r"^(?:export\s+)?(\w+)=(.*)$", line):
            env[m[1]] = expand(m[2].strip().rstrip(";").strip("\"'"), env)
    return env
