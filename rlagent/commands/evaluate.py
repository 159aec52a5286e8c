"""`rlagent eval [FIXTURE...]`: replay fixtures and print the scoreboard.

Per finding id: precision, recall, detection delay (check-ins and steps); overall: false alarms
on healthy fixtures, health accuracy per check-in, ungated actions (must be 0) and wall time.
Deterministic without an LLM (the default). `--llm claude` (or auto, with a key) replays the
fixtures a second time with Claude as diagnostician and reviewers and prints its pass rate,
tokens and cost next to the rules-only scoreboard; without a key that column is skipped, said
so. A fixture that cannot be replayed is listed with what is wrong while the
others still run; the exit status is 0 unless `--strict` (then 1 if a fixture could not be
replayed or a must-pass one differs from its case), or unless no fixture could be replayed at all (1).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from rlagent.commands.console import error_line, fail, out

if TYPE_CHECKING:
    from rlagent.evals.scoring import Scoreboard

TIERS = ("easy", "medium", "hard")


class LLMChoice(StrEnum):
    OFF = "off"
    AUTO = "auto"
    CLAUDE = "claude"


def _num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) and not float(value).is_integer() else f"{value:g}"


def _span(values: list[int]) -> str:
    return f"{_num(statistics.median(values))}/{max(values)}" if values else "-"


def evaluate(
    fixtures: Annotated[
        list[str] | None, typer.Argument(help="Fixture folders or names (default: every fixture under evals/fixtures).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the scoreboard as JSON, nothing else.")] = False,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only fixtures of this difficulty (easy, medium, hard); repeatable.")
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 if a fixture cannot be replayed or a must-pass one differs from its case.")
    ] = False,
    root: Annotated[
        Path | None,
        typer.Option(
            "--fixtures",
            "--root",
            help="The fixture set (default: $RLAGENT_FIXTURES, else evals/fixtures of the rlagent checkout you are in).",
        ),
    ] = None,
    llm: Annotated[
        LLMChoice, typer.Option("--llm", help="off: rules only (deterministic); claude/auto: also score the Claude path.")
    ] = LLMChoice.OFF,
    real: Annotated[
        bool, typer.Option("--real", help="Score `diagnose` on the real corpus (evals/real: published logs) instead.")
    ] = False,
) -> None:
    """Replay fixtures through the check-in graph and score the diagnoses."""
    if real:
        _real(as_json, strict)
        return
    from rlagent.commands.progress import progress
    from rlagent.evals.fixture import FixtureError, fixture_dirs, load_fixture, resolve
    from rlagent.evals.locate import FixturesNotFound, find_fixtures
    from rlagent.evals.replay import replay
    from rlagent.evals.scoring import explain, score_fixture, scoreboard

    started = time.perf_counter()
    bad_tags = sorted(set(tag or ()) - set(TIERS))
    if bad_tags:
        fail(f"unknown --tag {', '.join(bad_tags)} (easy, medium, hard)")
    paths: list[Path] = []
    unknown: list[str] = []
    base: Path | None = None
    for name in fixtures or []:
        if Path(name).is_dir():
            paths.append(Path(name))
            continue
        try:
            base = base or find_fixtures(root)
            paths.append(resolve(name, base))
        except FixturesNotFound as exc:
            fail(str(exc))
        except FixtureError:
            unknown.append(name)
    if unknown:  # every argument is checked before anything is replayed
        fail(f"no fixture {', '.join(map(repr, unknown))} under {base} (names as in `ls {base}`, or a fixture folder)")
    if not fixtures:
        try:
            base = find_fixtures(root)
        except FixturesNotFound as exc:
            fail(str(exc))
        paths = fixture_dirs(base)
    errors: dict[str, list[str]] = {}
    loaded = []
    for path in paths:
        try:
            fixture = load_fixture(path)
        except FixtureError as exc:
            errors[exc.name] = exc.problems
            continue
        if not tag or fixture.case.difficulty.value in tag:
            loaded.append(fixture)
    if not loaded and not errors:
        fail(f"no fixture of tier {', '.join(tag or [])} among the {len(paths)} given")
    scores, diffs = [], {}
    for fixture in progress(loaded, "replaying fixtures", enabled=not as_json, label=lambda f: f.name):
        try:
            result = replay(fixture)
        except FixtureError as exc:
            errors[exc.name] = exc.problems
            continue
        score = score_fixture(result)
        scores.append(score)
        if not score.passed:
            diffs[result.fixture] = explain(result, score)
    board = scoreboard(scores, errors, wall=time.perf_counter() - started)
    claude = _claude_column(llm.value, [p for p in paths if p.name not in errors], tag) if llm is not LLMChoice.OFF else None
    if as_json:
        summary = board.summary()
        payload = summary if claude is None else {"rules": summary, "claude": claude}
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        _print(board, diffs, {f.name: f.case.framework for f in loaded})
        if claude is not None:
            _print_claude(board, claude)
    failed = any(f.must_pass and not f.passed for f in board.fixtures)
    if strict and (errors or failed):
        raise typer.Exit(1)
    if not scores:  # not one fixture replayed: there is no scoreboard to succeed with, --strict or not
        raise typer.Exit(1)


def _real(as_json: bool, strict: bool) -> None:
    """The real corpus: verdict accuracy, cases right, per framework and per finding id."""
    import math

    from rlagent.agents.excerpt import diagnose
    from rlagent.evals.real import RealCaseError, real_cases, score_real

    try:
        cases = real_cases()
    except RealCaseError as exc:
        error_line(exc)
        raise typer.Exit(2) from exc

    def judge(case):
        found = diagnose(case.input_path, case.framework)
        return found.health.value, {f.id for f in found.findings}

    started = time.perf_counter()
    board = score_real(cases, judge)
    wall = time.perf_counter() - started
    per_id = board.per_id()
    if as_json:
        payload = {
            "cases": len(board.results),
            "right": sum(r.ok for r in board.results),
            "accuracy": board.accuracy,
            "verdict_accuracy": board.verdict_accuracy,
            "healthy_called_down": [r.case.name for r in board.healthy_called_down],
            "per_framework": {fw: {"right": ok, "cases": n} for fw, (ok, n) in board.per_framework.items()},
            "per_id": {
                k: {m: (None if isinstance(v, float) and math.isnan(v) else v) for m, v in row.items()}
                for k, row in per_id.items()
            },
            "failures": [
                {
                    "case": r.case.name,
                    "label": r.case.label.health.value,
                    "got": r.health,
                    "missed": sorted(r.missed),
                    "forbidden": sorted(r.forbidden),
                    "error": r.error,
                }
                for r in board.results
                if not r.ok
            ],
            "seconds": wall,
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
    else:
        right = sum(r.ok for r in board.results)
        out.print(
            f"real corpus: {right}/{len(board.results)} cases right ({board.accuracy:.1%}), verdict accuracy "
            f"{board.verdict_accuracy:.1%}, healthy cases called Down: {len(board.healthy_called_down)}, {wall:.1f}s"
        )
        by_fw = []
        for fw, (ok, n) in sorted(board.per_framework.items()):
            mine = [r for r in board.results if r.case.framework == fw]
            verdicts = sum(r.health == r.case.label.health.value for r in mine)
            by_fw.append((fw, f"{ok}/{n}", f"{verdicts}/{n}"))
        for line in _rows(("framework", "cases right", "verdicts right"), by_fw):
            out.print(line, markup=False)
        out.print()
        rows = [
            (
                fid,
                str(row["expected"]),
                str(row["reported"]),
                _num(row["recall"]) if not math.isnan(row["recall"]) else "-",
                _num(row["precision"]) if not math.isnan(row["precision"]) else "-",
            )
            for fid, row in per_id.items()
        ]
        for line in _rows(("finding id", "expected", "reported", "recall", "precision"), rows):
            out.print(line, markup=False)
        for r in board.results:
            if not r.ok:
                out.print(
                    f"  differs: {r.case.name}: label {r.case.label.health.value}, got {r.health}; missed "
                    f"{', '.join(sorted(r.missed)) or '-'}; forbidden reported {', '.join(sorted(r.forbidden)) or '-'}"
                    + (f"; {r.error}" if r.error else ""),
                    markup=False,
                )
    if strict and (board.accuracy < 0.9 or board.healthy_called_down):
        raise typer.Exit(1)


def _claude_column(mode: str, paths: list[Path], tag: list[str] | None) -> dict:
    """Replay the same fixtures with Claude on; {"skipped": why} when no key is set."""
    from rlagent.agents.llm.runtime import LLMRuntime
    from rlagent.evals.fixture import FixtureError, load_fixture
    from rlagent.evals.replay import replay
    from rlagent.evals.scoring import score_fixture, scoreboard
    from rlagent.tools.llm.budget import summarise
    from rlagent.tools.llm.client import LLMSettings

    runtime = LLMRuntime.from_settings(LLMSettings(mode=mode))
    if not runtime.enabled:
        return {"skipped": runtime.choice.reason}
    started = time.perf_counter()
    scores, records = [], []
    for path in paths:
        try:
            fixture = load_fixture(path)
        except FixtureError:
            continue
        if tag and fixture.case.difficulty.value not in tag:
            continue
        result = replay(fixture, llm=runtime)
        scores.append(score_fixture(result))
        records += [c.llm for c in result.checkins if c.llm]
    board = scoreboard(scores, {}, wall=time.perf_counter() - started)
    return {"model": runtime.model, "scoreboard": board.summary(), "usage": summarise(records)}


def _print_claude(rules: Scoreboard, claude: dict) -> None:
    out.print()
    if "skipped" in claude:
        out.print(f"LLM column skipped: {claude['skipped']}", markup=False)
        return
    board, usage = claude["scoreboard"], claude["usage"]
    rules_summary = rules.summary()
    out.print(f"Claude ({claude['model']}) next to the rules alone:", markup=False)
    for line in _rows(
        ("", "fixtures as expected", "recall", "precision", "false alarms", "health accuracy"),
        [
            (
                "rules",
                f"{rules_summary['passed']}/{rules_summary['fixtures']}",
                _num(rules_summary["recall"]),
                _num(rules_summary["precision"]),
                str(rules_summary["false_alarms_on_healthy"]),
                _num(rules_summary["health_accuracy"], 3),
            ),
            (
                "claude",
                f"{board['passed']}/{board['fixtures']}",
                _num(board["recall"]),
                _num(board["precision"]),
                str(board["false_alarms_on_healthy"]),
                _num(board["health_accuracy"], 3),
            ),
        ],
    ):
        out.print(line, markup=False)
    out.print(
        f"tokens: {usage['input_tokens']} in ({usage['cache_share']:.0%} from cache), {usage['output_tokens']} out; "
        f"{usage['calls']} calls over {usage['checkins']} check-ins; cost ${usage['cost_usd']:.2f}",
        markup=False,
    )


def _rows(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns sized to their content (plain text: readable in CI logs and pipes)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def _print(board: Scoreboard, diffs: dict[str, list[str]], frameworks: dict[str, str]) -> None:
    from rlagent.evals.scoring import scoreboard

    rows = []
    for f in board.fixtures:
        found = ", ".join(f"{d.id} #{d.first_report if d.first_report is not None else '-'}/{d.by_checkin}" for d in f.detections)
        false = ", ".join(sorted({f"{r.id}({r.why})" for r in f.false_reports}))
        health = f"{sum(h.ok for h in f.health)}/{len(f.health)}"
        verdict = "pass" if f.passed else "FAIL"
        rows.append((f.fixture, f.difficulty, health, found or "-", false or "-", f"{f.seconds:.2f}s", verdict))
    header = ("fixture", "tier", "health ok", "expected: first report/due", "false reports", "time", "")
    for line in _rows(header, rows):
        out.print(line, markup=False)
    out.print()
    per: dict[str, list[int]] = {}
    for f in board.fixtures:
        fw = frameworks.get(f.fixture, "?")
        per.setdefault(fw, [0, 0])
        per[fw][0] += f.passed
        per[fw][1] += 1
    for line in _rows(("framework", "fixtures passed"), [(fw, f"{ok}/{n}") for fw, (ok, n) in sorted(per.items())]):
        out.print(line, markup=False)
    out.print()
    rows = [
        (
            s.id,
            str(s.expected),
            str(s.on_time),
            str(s.late),
            str(s.missed),
            str(s.false_fixtures),
            _num(s.recall),
            _num(s.precision),
            _span(s.delays_checkins),
            _span(s.delays_steps),
        )
        for s in board.by_id().values()
    ]
    header = ("finding id", "expected", "on time", "late", "missed", "false", "recall", "precision", "delay", "steps")
    for line in _rows(header, rows):
        out.print(line, markup=False)
    out.print("(false: fixtures with a false report; delay: check-ins from the signal, median/worst; steps: the same in steps)")
    summary = board.summary()
    must = scoreboard([f for f in board.fixtures if f.must_pass])
    out.print()
    out.print(
        f"[bold]{summary['passed']}/{summary['fixtures']} fixtures as expected[/]; must-pass tier (easy+medium): "
        f"{sum(f.passed for f in must.fixtures)}/{len(must.fixtures)}, recall {_num(must.recall)}, "
        f"false alarms on healthy fixtures {len(must.false_alarms)}"
    )
    out.print(
        f"recall {_num(summary['recall'])} · precision {_num(summary['precision'])} · "
        f"false alarms on healthy fixtures {summary['false_alarms_on_healthy']} · false reports {summary['false_reports']} · "
        f"health accuracy {_num(summary['health_accuracy'], 3)}"
    )
    out.print(
        f"detections late {summary['late_detections']} · check-ins after due median {_num(summary['after_due']['median'])} "
        f"worst {_num(summary['after_due']['worst'])} · delay from the signal: check-ins median "
        f"{_num(summary['delay_checkins']['median'])} worst {_num(summary['delay_checkins']['worst'])}, steps median "
        f"{_num(summary['delay_steps']['median'])} worst {_num(summary['delay_steps']['worst'])}"
    )
    out.print(
        f"proposals {summary['proposals']} · ungated actions {summary['ungated_actions']} · "
        f"wall {summary['wall_seconds']:.1f}s (replays {summary['replay_seconds']:.1f}s)"
    )
    for name, problems in board.errors.items():
        out.print(f"[bold red]cannot replay {escape(name)}:[/] " + escape("; ".join(problems)), markup=True)
    if diffs:
        out.print()
        for lines in diffs.values():
            for line in lines:
                out.print(line, markup=False)
