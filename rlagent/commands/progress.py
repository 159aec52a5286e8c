"""Progress of long work (eval, replay, a large simulate, a cold check of a large run): a rich bar
on stderr when stderr is a terminal, nothing otherwise (pipes, CI logs, `--json`), so stdout
stays exactly what the command prints."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

T = TypeVar("T")


def _console() -> Console:
    return Console(stderr=True, highlight=False)


def shows_progress(enabled: bool = True) -> bool:
    return enabled and _console().is_terminal


def progress(
    items: Iterable[T], description: str, *, enabled: bool = True, label: Callable[[T], str] | None = None
) -> Iterator[T]:
    """Yield `items`, with a bar (n of total, elapsed, the current item's label) on a terminal."""
    items = list(items)
    console = _console()
    if not (enabled and console.is_terminal) or not items:
        yield from items
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.fields[item]}"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(escape(description), total=len(items), item="")  # names are text, not markup
        for item in items:
            bar.update(task, item=escape(label(item)) if label else "")
            yield item
            bar.advance(task)


@contextmanager
def working(description: str, *, enabled: bool = True) -> Iterator[None]:
    """A spinner with elapsed time for one long step whose size is unknown (a cold check-in)."""
    console = _console()
    if not (enabled and console.is_terminal):
        yield
        return
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True) as bar:
        bar.add_task(escape(description), total=None)
        yield
