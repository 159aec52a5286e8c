"""`rlagent silence RUN_DIR FINDING_ID --for 6h --reason TEXT` and `rlagent ack RUN_DIR FINDING_ID`.

A silence stops notifications about a finding id (or `*`: all of them) of one run until it ends;
the finding still appears in STATUS.md, marked. An acknowledgement stops the reminders of the
run's open incident of that id (its resolution is still announced). Both are written to the run's
state store, where the next check-in of any monitor (`check`, `run`, `watch`) reads them.
"""

from __future__ import annotations

import difflib
import getpass
import os
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import out
from rlagent.tools.untrusted import clip

RunArg = Annotated[Path, typer.Argument(help="The run directory (one run, not a folder of runs).")]
HomeOpt = Annotated[Path | None, typer.Option("--home", help="Where run state is kept (env RLAGENT_HOME).")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file.")]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _open(run_dir: Path, config: Path | None, home: Path | None):
    """(run, its fleet tables), or one clear error line."""
    from rlagent.commands import common
    from rlagent.graph.fleetview import state_db_path
    from rlagent.tools.fleetdb import FleetDB
    from rlagent.tools.layout import RunNotFound

    settings = common.settings_from(config, home=home)
    try:
        run = common.find_run(run_dir)  # of any framework rlagent reads, as `check` and `status` find it
    except RunNotFound as exc:
        common.fail(str(exc))
        raise AssertionError from exc
    if run.picked_from is not None:
        common.fail(f"{run_dir} holds runs, it is not one: name the run directory (e.g. {run.run_dir})")
    try:
        db = FleetDB.open(state_db_path(settings.home, run.run_dir))
    except (OSError, sqlite3.Error) as exc:
        common.fail(f"state store under {settings.home}: {getattr(exc, 'strerror', None) or exc}")
        raise AssertionError from exc
    assert db is not None
    return run, db


def _check_id(finding_id: str, allow_all: bool) -> None:
    from rlagent.agents.rules.catalogue import FINDING_IDS
    from rlagent.commands import common

    if finding_id in FINDING_IDS or (allow_all and finding_id == "*"):
        return
    close = difflib.get_close_matches(finding_id, FINDING_IDS, n=3)
    every = "; `*` silences them all" if allow_all else ""  # `ack` takes one incident at a time
    hint = f" (did you mean {', '.join(close)}?)" if close else f" (the ids are in findings.md{every})"
    common.fail(f"unknown finding id {finding_id!r}{hint}")


def silence(
    run_dir: RunArg,
    finding_id: Annotated[
        str | None, typer.Argument(help="Finding id (findings.md), or '*' for every finding of the run.")
    ] = None,
    for_: Annotated[str, typer.Option("--for", help="How long: 30m, 6h, 2d.")] = "6h",
    reason: Annotated[str | None, typer.Option("--reason", help="Why (shown in STATUS.md and the report).")] = None,
    by: Annotated[str | None, typer.Option("--by", help="Who (default: your user name).")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List the run's silences in force.")] = False,
    remove: Annotated[int | None, typer.Option("--remove", help="End the silence with this number now.")] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Silence a finding of a run: no notification until it ends; STATUS.md still shows it, marked."""
    from rlagent.commands import common
    from rlagent.models.incidents import Silence
    from rlagent.tools.textfmt import parse_cadence

    run, db = _open(run_dir, config, home)
    try:
        now = datetime.now(UTC)
        if remove is not None:
            if not db.remove_silence(remove):
                common.fail(f"no silence #{remove} on {run.run_dir} (see `rlagent silence {run.run_dir} --list`)")
            out.print(f"silence #{remove} on {escape(run.name)} ended")
            return
        if list_ or finding_id is None:
            found = db.silences(now)
            if not found:
                out.print(f"no silence in force on {escape(run.name)}")
            for s in found:
                out.print(
                    f"#{s.id} {escape(s.finding_id)} until {s.until:%Y-%m-%d %H:%M} UTC by {escape(s.by)}: {escape(s.reason)}"
                )
            return
        _check_id(finding_id, allow_all=True)
        try:
            seconds = parse_cadence(for_)
        except ValueError as exc:
            common.fail(f"--for: {exc}")
            return
        if not reason or not reason.strip():
            common.fail("--reason is required: say why, for whoever reads STATUS.md next")
            return
        saved = db.add_silence(
            Silence(
                finding_id=finding_id,
                until=now + timedelta(seconds=seconds),
                reason=clip(reason, 300),  # one clean line: it is shown in terminals, STATUS.md and the report
                by=clip(by or _user(), 100),
                created_at=now,
            )
        )
        what = "every finding" if finding_id == "*" else finding_id
        out.print(
            f"silenced {escape(what)} on {escape(run.name)} until {saved.until:%Y-%m-%d %H:%M} UTC (#{saved.id}); "
            "STATUS.md still lists it, marked"
        )
    finally:
        db.close()


def ack(
    run_dir: RunArg,
    finding_id: Annotated[str, typer.Argument(help="Finding id of the run's open incident.")],
    by: Annotated[str | None, typer.Option("--by", help="Who (default: your user name).")] = None,
    config: ConfigOpt = None,
    home: HomeOpt = None,
) -> None:
    """Acknowledge a run's open incident: no more reminders; its resolution is still announced."""
    from rlagent.commands import common

    _check_id(finding_id, allow_all=False)
    run, db = _open(run_dir, config, home)
    try:
        incidents = db.open_incidents()
        incident = incidents.get(finding_id)
        if incident is None:
            open_ids = ", ".join(incidents) or "none"
            common.fail(f"no open incident {finding_id!r} on {run.run_dir} (open: {open_ids})")
            return
        with db.conn:
            db.save_incident(incident.model_copy(update={"acked_by": clip(by or _user(), 100), "acked_at": datetime.now(UTC)}))
        out.print(f"acknowledged {escape(finding_id)} on {escape(run.name)} (open since check-in #{incident.opened_checkin})")
    finally:
        db.close()
