"""The ``tickwork`` command line (also ``python -m tickwork``)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from tickwork._cli.main import build_parser as build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    from tickwork._cli.main import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
