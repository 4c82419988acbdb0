"""Reading a Megatron-LM argument list: the command line `pretrain_gpt.py` receives (a file holding it, shell
line continuations and comments allowed, arrays already expanded; a `torchrun` prefix gives the world size), or
the `arguments` block Megatron prints at start-up (`_print_args` in megatron/training/arguments.py: a line
`  name ........ value` per argument between `---- arguments ----` and `---- end of arguments ----`).

Both give `MegatronArgs`: argparse destinations (`tensor_model_parallel_size`) -> value as text, with the line
each came from. Flags are checked against the recorded list of Megatron-LM's own (interop/data/megatron_flags.txt,
read from arguments.py at the commit its header names): an unknown flag is an error naming it and its line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from api_schemas import RequestError

__all__ = ["MegatronArgs", "megatron_flags", "parse_megatron"]

# torchrun's own options (torch.distributed.run), before the script name.
_TORCHRUN = {"--nproc_per_node", "--nproc-per-node", "--nnodes", "--node_rank", "--node-rank", "--master_addr",
             "--master-addr", "--master_port", "--master-port", "--rdzv_backend", "--rdzv-backend",
             "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_id", "--rdzv-id", "--max_restarts", "--max-restarts"}
_LOG_START = re.compile(r"-{3,} arguments -{3,}")
_LOG_END = re.compile(r"-{3,} end of arguments -{3,}")
_LOG_LINE = re.compile(r"^\s*(?:\[[^\]]*\]:?\s*)?([a-z_][a-z0-9_]*) \.+ ?(.*)$")


@cache
def megatron_flags() -> frozenset[str]:
    """Megatron-LM's command-line flags, as recorded in interop/data/megatron_flags.txt."""
    text = resources.files("interop").joinpath("data/megatron_flags.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line.startswith("--"))


@dataclass(frozen=True, slots=True)
class MegatronArgs:
    """Argument destinations -> value text ("True" for a flag given alone), the line of each, and the world size
    when the input says it (torchrun's --nproc_per_node x --nnodes, or the log's world_size)."""

    values: dict[str, str]
    lines: dict[str, int] = field(default_factory=dict)
    world_size: int | None = None
    from_log: bool = False


def _dest(flag: str) -> tuple[str, str | None]:
    """A flag's destination, and the value a store_false form (--no-x, --disable-x) sets."""
    for prefix in ("--no-", "--disable-"):
        if flag.startswith(prefix) and flag not in _POSITIVE:
            return flag[len(prefix):].replace("-", "_"), "False"
    return flag[2:].replace("-", "_"), None


# Flags that start with no-/disable- and yet are their own destination (store_true), from arguments.py.
_POSITIVE = {"--disable-bias-linear", "--no-load-optim", "--no-load-rng", "--no-save-optim", "--no-save-rng"}


def _tokens(text: str, source: str) -> list[tuple[str, int]]:
    """Shell words with their line numbers (comments and `\\` continuations as bash reads them)."""
    words: list[tuple[str, int]] = []
    for number, line in enumerate(text.replace("\\\n", " \n").splitlines(), start=1):
        try:
            words.extend((w, number) for w in shlex.split(line, comments=True))
        except ValueError as exc:
            raise RequestError.for_field(f"{source}:{number}", f"cannot be read as a command line ({exc})") from None
    return words


def _command_line(text: str, source: str) -> MegatronArgs:
    words = _tokens(text, source)
    start = next((i for i, (w, _) in enumerate(words) if w.endswith(".py")), -1)
    launcher = words[:start] if start >= 0 else []
    body = words[start + 1:] if start >= 0 else words
    distributed: dict[str, str] = {}
    for i, (word, _line) in enumerate(launcher):
        if word in _TORCHRUN and i + 1 < len(launcher):
            distributed[word.replace("-", "_")] = launcher[i + 1][0]
    known = megatron_flags()
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    i = 0
    while i < len(body):
        word, line = body[i]
        if not word.startswith("--"):
            raise RequestError.for_field(f"{source}:{line}", f"{word!r} is not a flag (Megatron-LM flags start "
                                         "with --)")
        if "=" in word:
            word, _, inline = word.partition("=")
            taken = [inline]
        else:
            taken = []
            while i + 1 < len(body) and not body[i + 1][0].startswith("--"):
                i += 1
                taken.append(body[i][0])
        if word not in known:
            raise RequestError.for_field(f"{source}:{line}", f"{word} is not a Megatron-LM flag (checked against "
                                         "megatron/training/arguments.py)")
        dest, implied = _dest(word)
        values[dest] = " ".join(taken) if taken else (implied or "True")
        lines[dest] = line
        i += 1
    world = None
    per_node = distributed.get("__nproc_per_node")
    if per_node is not None:
        try:
            world = int(per_node) * int(distributed.get("__nnodes", "1"))
        except ValueError:
            raise RequestError.for_field(f"{source}", "torchrun's --nproc_per_node and --nnodes must be "
                                         f"integers (given {per_node!r}, {distributed.get('__nnodes')!r})") from None
    return MegatronArgs(values=values, lines=lines, world_size=world)


def _log(text: str, source: str) -> MegatronArgs:
    values: dict[str, str] = {}
    lines: dict[str, int] = {}
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _LOG_START.search(line):
            inside = True
            continue
        if _LOG_END.search(line):
            break
        if inside:
            match = _LOG_LINE.match(line)
            if match is None:
                raise RequestError.for_field(f"{source}:{number}", "is not an `  name ..... value` line of "
                                             "Megatron's arguments block")
            values[match.group(1)] = match.group(2).strip()
            lines[match.group(1)] = number
    world = values.get("world_size")
    return MegatronArgs(values=values, lines=lines, world_size=int(world) if world and world.isdigit() else None,
                        from_log=True)


def parse_megatron(text: str, source: str = "<megatron>") -> MegatronArgs:
    """A command line or a log's arguments block (whichever the text holds); RequestError naming the line."""
    args = _log(text, source) if _LOG_START.search(text) else _command_line(text, source)
    if not args.values:
        raise RequestError.for_field(source, "holds no Megatron-LM arguments (a pretrain_gpt.py command line or "
                                     "the `arguments` block of a Megatron log)")
    return args
