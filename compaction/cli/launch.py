"""``demo`` and ``serve``: the bundled example compacted offline, and the HTTP service."""

from __future__ import annotations

import argparse

from compaction.cli.exits import EXIT_FILE, EXIT_MODEL, EXIT_USAGE, CliError

DISTRIBUTION = "compaction-engine"  # the name on PyPI; "compaction" there is another project


INSTALL_SERVER = f"pip install '{DISTRIBUTION}[server]' (from a clone: pip install -e '.[server]')"


def cmd_demo(args: argparse.Namespace) -> int:
    from compaction.demo import load_example, run_demo
    from guards import ContextWindowTooSmall

    try:
        load_example(args.example)
    except FileNotFoundError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"cannot load example {args.example!r}: {exc}", EXIT_FILE) from None
    try:
        return run_demo(args)
    except ContextWindowTooSmall as exc:
        raise CliError(str(exc), EXIT_MODEL) from None


def cmd_serve(args: argparse.Namespace) -> int:
    # The options are checked by the runner (python -m compaction.server too), after this import.
    try:
        from compaction.server.runner import run
    except ImportError as exc:
        raise CliError(
            f"`compaction serve` needs the server extra (missing {exc.name}): {INSTALL_SERVER}",
            EXIT_USAGE,
        ) from None
    return run(args)
