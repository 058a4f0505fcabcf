"""``tickwork import crontab``: a crontab as an equivalent jobs file.

Examples::

    crontab -l | tickwork import crontab - > jobs.toml
    tickwork import crontab /etc/crontab --system -o jobs.toml

The jobs file goes to stdout (or ``-o FILE``), each of its jobs checked by the jobs
file's validator; remarks and the lines that cannot be imported go to stderr as
``file:line: message``. Exit status: 0 when every line was imported, 1 when some could
not be (the jobs file is still written, naming them in comments; ``--keep-going``
makes that 0), or when nothing can be imported; 2 for a file that cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

from tickwork._core.errors import ConfigError
from tickwork._daemon.jobsfile.crontab import CrontabOptions, crontab_config

__all__ = ["add_crontab_options", "add_parser", "crontab_options", "run"]

_PROG = "tickwork import crontab"


def add_parser(subparsers: Any) -> None:
    """Add ``import`` (with its one kind, ``crontab``) to an argparse ``subparsers`` object.

    Args:
        subparsers: The object returned by ``ArgumentParser.add_subparsers()``.
    """
    verb: argparse.ArgumentParser = subparsers.add_parser(
        "import",
        help="write a jobs file equivalent to another scheduler's file (a crontab)",
        description="Write a jobs file equivalent to another scheduler's file.",
    )
    kinds = verb.add_subparsers(dest="kind", required=True, metavar="KIND")
    p: argparse.ArgumentParser = kinds.add_parser(
        "crontab",
        help="a crontab as a jobs file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Write the jobs file equivalent to a crontab: one [[job]] a line, named after"
            ' its command,\nrun as cron runs it ([SHELL, "-c", command], % as standard'
            " input), in the system's\ntime zone (or CRON_TZ), with the crontab's"
            " environment lines as env. MAILTO has no\nequivalent: it becomes a comment"
            " saying what to use instead; @reboot is at_start,\na run at each start of"
            " the daemon.\n\n"
            "Exit status: 0 when every line was imported; 1 when a line could not be"
            " (cron\nrejects it, or it has a schedule field too many) unless"
            " --keep-going, or when no\njob can be imported; 2 when the file cannot be"
            ' read. See docs/daemon.md, "Coming\nfrom cron".'
        ),
    )
    p.add_argument("file", help="the crontab, or - for standard input (`crontab -l | ...`)")
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="write the jobs file here (replaced at once, never half-written) instead of to stdout",
    )
    add_crontab_options(p)
    p.set_defaults(func=run)


def add_crontab_options(p: Any, *, when: str = "") -> None:
    """``--system``, ``--seconds`` and ``--keep-going``: how a crontab is read.

    Shared by ``import crontab`` and ``run --crontab``: ``p`` is a parser or an argument
    group; ``when`` starts each help text (``run``'s say they go with ``--crontab``).
    """
    p.add_argument(
        "--system",
        action="store_true",
        help=f"{when}the system crontab format (/etc/crontab, /etc/cron.d/*): a user field"
        " after the schedule (each line runs as its user when tickwork runs as root, else"
        " as the daemon's user, with a warning)",
    )
    p.add_argument(
        "--seconds",
        action="store_true",
        help=f"{when}schedules have six fields, seconds first (*/10 * * * * *), as some"
        " cron replacements read them (cron reads five)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help=f"{when}lines that cannot be imported (cron rejects them, say) are"
        " warned about and left out, without failing",
    )


def crontab_options(args: argparse.Namespace) -> CrontabOptions:
    """The `CrontabOptions` of parsed ``--system``/``--seconds``/``--keep-going``."""
    return CrontabOptions(system=args.system, seconds=args.seconds, keep_going=args.keep_going)


def run(
    args: argparse.Namespace,
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``tickwork import crontab`` for parsed arguments; return the exit status."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    from_stdin = args.file == "-"
    path = "<stdin>" if from_stdin else args.file
    try:
        text = _read_stdin(stdin) if from_stdin else _read(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        print(f"{_PROG}: cannot read {path}: {reason}", file=err)
        return 2
    options = crontab_options(args)
    base = Path.cwd() if from_stdin else Path(path).resolve().parent
    try:
        config, translation = crontab_config(text, path=path, options=options, base_dir=base)
    except ConfigError as exc:
        for issue in exc.errors:
            print(issue, file=err)
        print(f"{_PROG}: nothing written", file=err)
        return 1
    for note in translation.notes:
        print(note.text(path), file=err)
    if args.output is not None:
        try:
            _write(args.output, translation.toml)
        except OSError as exc:
            print(f"{_PROG}: cannot write {args.output}: {exc.strerror or exc}", file=err)
            return 2
    else:
        out.write(translation.toml)
        out.flush()
    jobs = len(config.jobs)
    skipped = len(translation.skipped)
    where = f" to {args.output}" if args.output is not None else ""
    left = f"; {skipped} line{'s' if skipped != 1 else ''} not imported" if skipped else ""
    print(f"{_PROG}: {jobs} job{'s' if jobs != 1 else ''} from {path}{where}{left}", file=err)
    return 1 if skipped and not options.keep_going else 0


def _read(path: str) -> str:
    """The file's text with its line endings as written (a CRLF is worth a remark)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _read_stdin(stdin: TextIO | None) -> str:
    """Standard input's text, line endings as written (bytes, when it is the real one)."""
    if stdin is None:
        return sys.stdin.buffer.read().decode("utf-8")
    return stdin.read()


def _write(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` at once: a crash leaves the old file or the new one."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or Path("."))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a file the shell's > would create
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
