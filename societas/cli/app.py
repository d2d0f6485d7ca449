"""The `societas` typer app and what its commands share: the store they open, errors, numbers, progress bars.

Bad input exits with code 2 and one line on stderr naming the problem; nothing is written.

A command imports what it runs when it runs (the store, the runner, Mesa, the model): `societas --help` and
`--version` load none of them (tests/test_cli_imports.py).
"""

from __future__ import annotations

import atexit
import errno
import importlib.metadata as md
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, NoReturn, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from sim.core.errors import UsageError
from sim.store.urls import DEFAULT_URL, default_url
from societas.cli.quiet import library_warnings

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from runner.execution import RunResult
    from sim.store.store import Store

class PipeClosed(Exception):
    """The reader of the command's output went away (`societas show RUN | head`)."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """Rich exits 1 on a closed pipe; the command ends quietly instead (`main` exits 0, as Unix tools do)."""
        self.quiet = True
        raise PipeClosed


app = typer.Typer(add_completion=False, no_args_is_help=True, help="societas: societies of LLM-driven agents on Mesa.")
out = _Console()
err = _Console(stderr=True)

DbOption = typer.Option(None, "--db", help=f"database URL or SQLite file path (default: $SOCIETAS_DB or {DEFAULT_URL}, i.e. runs.db in "
                        "the current directory)")
JsonOption = typer.Option(False, "--json", help="print JSON on stdout instead of tables")
PricesOption = typer.Option(None, "--prices", help="the price table of LLM tokens per model (YAML; default: $SOCIETAS_PRICES, "
                            "else the built-in one: local models cost 0; see analysis/prices.yaml)")


def open_store(url: Optional[str], *, create: bool = True) -> Store:
    """The store at `url` (default_url); read-only commands pass create=False so that reading never creates one.

    It is closed when the command exits (however it exits, short of SIGKILL): SQLite then folds its
    write-ahead log into the file, so a user who copies `runs.db` alone after a run copies all of it.
    """
    from sim.store.store import Store

    store = Store(default_url(url), create=create)
    atexit.register(store.close)
    return store


def _version(value: bool) -> None:
    if value:
        try:
            version = md.version("societas")
        except md.PackageNotFoundError:
            version = "unknown"
        print(f"societas {version}")
        raise typer.Exit(0)


@app.callback()
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version and exit"),
          verbose: bool = typer.Option(False, "-v", "--verbose", help="show the warnings of the libraries societas uses "
                                       "(hidden by default)")) -> None:
    """societas: societies of LLM-driven agents on Mesa."""
    ctx.with_resource(library_warnings(verbose))


def fail(message: str, code: int = 2) -> NoReturn:
    """Print `error: message` on stderr and exit with `code` (2: bad input)."""
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def fmt(v: Any) -> str:
    """A metric for a table: 4 significant digits; a missing value as `null`, the word its docs and --json use."""
    if v is None:
        return "null"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def progress_bar(label: str, total: int, quiet: bool) -> tuple[Progress, Any]:
    """A progress bar on stderr (transient and hidden off a terminal when `quiet`: --json) and its task."""
    bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[info]}"), console=err, transient=quiet, disable=quiet and not err.is_terminal)
    return bar, bar.add_task(label, total=total, info="")


def with_progress(label: str, quiet: bool, call: Callable[[Callable[[int, int, Any], None]], RunResult], *,
                  total: Optional[int] = None, info: Optional[Callable[[Any], str]] = None,
                  resume_hint: bool = False) -> RunResult:
    """Run `call(progress)` under a progress bar: shown at once when `total` is known, else with the first
    committed tick (bad input found first stays one line, no empty bar). A failed or interrupted run exits
    1 or 128 + the signal, its committed ticks kept."""
    from runner.execution import RunFailed, RunInterrupted

    shown: list[tuple[Progress, Any]] = []

    def show(total: int) -> None:
        shown.append(progress_bar(label, total, quiet))
        shown[0][0].start()

    if total is not None:
        show(total)

    def progress(tick: int, total: int, record: Any) -> None:
        if not shown:
            show(total)
        bar, task = shown[0]
        bar.update(task, completed=tick, total=total, info=info(record) if info is not None else "")

    try:
        return call(progress)
    except RunInterrupted as exc:
        fail(f"run {exc.run_id} {exc.reason}; its committed ticks are kept (status failed)", code=exc.exit_code)
    except RunFailed as exc:
        hint = f"; `societas resume {exc.run_id}` continues it" if resume_hint else ""
        fail(f"run {exc.run_id} failed: {exc.reason} (committed ticks are kept{hint})", code=1)
    finally:
        if shown:
            shown[0][0].stop()


def fit_widths(headers: Sequence[str], cells: Sequence[Sequence[str]], width: int, shrink: Sequence[int]) -> list[int]:
    """Column widths for a table with one space between columns, to fit `width` characters.

    Each column starts as wide as its longest cell; where the table is too wide, the widest of the
    `shrink` columns give way one character at a time, first down to their longest word (a narrow
    terminal then wraps a cell between words, never inside one: "commo/ns"), and only then further
    (a file-path scenario, a stale run's host name fold), before any column is cut off at the edge.
    """
    natural, words = [], []
    for i, header in enumerate(headers):
        column = [header, *(row[i] for row in cells)]
        natural.append(max(map(len, column)))
        words.append(max(len(w) for text in column for w in text.split() or [""]))
    widths = list(natural)
    for floor in (words, [6] * len(headers)):
        while sum(widths) + len(widths) - 1 > width:
            fits = [i for i in shrink if widths[i] > floor[i]]
            if not fits:
                break
            widths[max(fits, key=lambda i: widths[i])] -= 1
    return widths


def main() -> None:
    """Console-script entry: bad input (ours or the parser's) is one line on stderr and exit code 2; a closed
    pipe (`| head`) ends quietly with exit 0, whatever was writing (a command, the help of any command: typer's
    help console exits 1 on a closed pipe); Ctrl-C outside a run exits 130."""
    try:
        code = _dispatch()
        _flush_or_quiet()
    except SystemExit as exc:
        if _closed_pipe(exc):
            _quiet_broken_pipe()
        raise
    sys.exit(code)


def _closed_pipe(exc: BaseException) -> bool:
    """Whether `exc` ends a write to a closed pipe: raised while handling one (rich's console and click's printing
    exit that way) or after click wrapped stdout to keep such an exit quiet."""
    if type(sys.stdout).__name__ == "PacifyFlushWrapper":
        return True
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, (BrokenPipeError, PipeClosed)) or (isinstance(seen, OSError) and seen.errno == errno.EPIPE):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _dispatch() -> int:
    """Run the command line; its exit code (bad input: 2)."""
    try:
        code = app(standalone_mode=False, prog_name="societas")
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        code = 2
    except typer.TyperException as exc:  # the parser's: a bad option value, a missing option, an unknown command
        code = _parser_error(exc)
    except typer.Abort:
        code = 1
    except KeyboardInterrupt:
        code = 130
    except PipeClosed:
        _quiet_broken_pipe()
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        _quiet_broken_pipe()
    return code if isinstance(code, int) else 0


def _parser_error(exc: Any) -> int:
    """One line for a command-line error, naming where help is (`societas` alone prints the help, exit 2)."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()
        return 2
    where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
    message = " ".join(exc.format_message().split())
    err.print(f"[bold red]error:[/] {message}{where}", highlight=False, soft_wrap=True, markup=True)
    return int(getattr(exc, "exit_code", 2) or 2)


def _flush_or_quiet() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    """The reader went away (`societas list | head`): stop quietly with exit 0, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def reference_table(rows: list[dict[str, Any]]) -> Table:
    """A run's final figures beside published ones (`analysis.reference`), each saying whether it is an input."""
    ref = Table(title="beside published values")
    for col in ("metric", "this run", "published", "set by", "source"):
        ref.add_column(col, overflow="fold")
    for row in rows:
        ref.add_row(row["metric"], fmt(row["value"]), fmt(row["published"]), row.get("set_by", ""), row["source"])
    return ref

