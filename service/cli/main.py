"""The `clustersim` command line: the parser, and what each exit code means. Exit codes: 0 success, 2 invalid
input (one line on stderr: a request field and its rule, or a flag the command cannot use), 1 internal error,
3 `simulate --strict` on a layout that does not fit in memory (service.cli.simulate.DOES_NOT_FIT), 130
interrupted (Ctrl-C).

Each command lives in its own module and registers itself: simulate and presets (cli/simulate.py), compare
(cli/compare.py), search and sweep (cli/search.py), validate and serve (cli/serve.py), topology
(cli/topology.py), import and export (cli/interop.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from service.cli import plot
from service.cli.compare import add_compare_command
from service.cli.interop import add_interop_commands
from service.cli.search import add_search_commands
from service.cli.serve import add_serve_commands
from service.cli.simulate import add_simulate_commands
from service.cli.topology import add_topology_command
from service.cli.usage import UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors are invalid input too: exit 2, one line
        sys.stderr.write(f"clustersim: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="clustersim", description="Discrete-event simulator of distributed LLM training.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    add_simulate_commands(sub)
    add_serve_commands(sub)
    add_compare_command(sub)
    plot.add_plot_command(sub)
    add_search_commands(sub)
    add_topology_command(sub)
    add_interop_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Imported once the arguments are parsed: `--help` and usage errors answer without the simulator.
    from api_schemas import RequestError
    from service import convert
    from simcore import SpecError

    try:
        return int(args.func(args))
    except (RequestError, SpecError) as err:
        sys.stderr.write(f"clustersim: invalid input: {convert.request_error(err)}\n")
        return 2
    except UsageError as err:
        sys.stderr.write(f"clustersim: invalid input: {err}\n")
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: a search's or sweep's workers are already ended (their executor did it)
        sys.stderr.write("clustersim: interrupted\n")
        return 130
    except Exception as err:
        # An executor's error comes from a command that imported the executor protocol (search, sweep): a plain
        # simulate does not pay for importing simcore.planning just to name the class here.
        executors = sys.modules.get("simcore.planning.executor")
        if executors is not None and isinstance(err, executors.ExecutorError):
            if err.option is not None:  # an executor flag at fault is invalid input; a failure of its own is not
                sys.stderr.write(f"clustersim: invalid input: --{err.option}: {err.message}\n")
                return 2
            sys.stderr.write(f"clustersim: executor failed: {err.message}\n")
            return 1
        import traceback

        traceback.print_exc()  # an internal error: say so, with the traceback for a bug report
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
