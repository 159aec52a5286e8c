"""Checking what Claude cites against the run's files and history, and the read-only tools it may
call to look closer.

Nothing Claude says about the run is taken on its word: a log quote must be on the cited line of
a file inside the run dir, a metric value must be the one in the metric history at that step, a
sample quote must be in a completion rlagent read from the rollouts files. What does not check
out is dropped (and the entry says so).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from rlagent.agents.llm.models import GetMetricSeries, LogEvidence, MetricEvidence, ReadLogLines, ReadRollout, SampleEvidence
from rlagent.models.observation import MetricHistory, Rollout
from rlagent.models.run import Layout
from rlagent.tools.evidence import inside, line_at, metric_on_disk, same_value
from rlagent.tools.loglines import clean
from rlagent.tools.safefs import read_up_to
from rlagent.tools.textfmt import fmt
from rlagent.tools.untrusted import clip, data_fence

QUOTE_CHARS = 120
"""The head of a quote that must match: survives the ellipsis of a clipped line."""
TOOL_RESULT_CHARS = 2500
ROLLOUT_MAX_LINES = 4096
ROLLOUT_MAX_BYTES = 8 << 20
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")


def normal(text: str) -> str:
    """Whitespace collapsed, a trailing ellipsis dropped: how quotes and lines are compared."""
    flat = " ".join(str(text).split())
    return re.sub(r"(…|\.\.\.)$", "", flat).strip()


@dataclass
class Verifier:
    """Checks evidence against one run; remembers completions read through `read_rollout`."""

    run_dir: Path
    layout: Layout
    history: MetricHistory
    samples: list[Rollout] = field(default_factory=list)
    read: dict[int, list[str]] = field(default_factory=dict)
    """step -> completions read from disk by the read_rollout tool this check-in."""
    disk: bool = False
    """Also look metric values up in the logs when the history does not hold the step."""

    def check(self, evidence: BaseModel) -> str | None:
        """None when the evidence holds; otherwise why not, in words."""
        if isinstance(evidence, LogEvidence):
            return self._log(evidence)
        if isinstance(evidence, MetricEvidence):
            return self._metric(evidence)
        if isinstance(evidence, SampleEvidence):
            return self._sample(evidence)
        return f"unknown evidence {type(evidence).__name__}"

    def _log(self, ev: LogEvidence) -> str | None:
        path = inside(self.run_dir, ev.file)
        if path is None:
            return f"{ev.file} is not a file inside the run dir"
        line = line_at(path, ev.line)
        if line is None:
            return f"{ev.file} has no line {ev.line}"
        wanted = normal(ev.quote)[:QUOTE_CHARS]
        if len(wanted) < 4 or wanted not in normal(line):
            return f"{ev.file}:{ev.line} does not read {clip(ev.quote, 80)!r}"
        return None

    def _metric(self, ev: MetricEvidence) -> str | None:
        value = dict(self.history.series(ev.process, ev.metric)).get(ev.step)
        if value is None and self.disk:
            value = metric_on_disk(self.run_dir, self.layout, ev.process, ev.metric, ev.step)
        if value is None:
            return f"no {ev.process} {ev.metric} at step {ev.step} in the metric history"
        if not same_value(value, ev.value):
            return f"{ev.process} {ev.metric} at step {ev.step} is {fmt(value)}, not {fmt(ev.value)}"
        return None

    def _sample(self, ev: SampleEvidence) -> str | None:
        wanted = normal(ev.quote)[:QUOTE_CHARS]
        texts = [r.completion for r in self.samples if r.step == ev.step] + self.read.get(ev.step, [])
        if len(wanted) >= 8 and any(wanted in normal(t) for t in texts):
            return None
        return f"no completion read at step {ev.step} contains {clip(ev.quote, 80)!r}"


# --- read-only tools ------------------------------------------------------------------------


@dataclass
class Readers:
    """The tools Claude may call: they only read, inside the run dir, and return bounded text."""

    verifier: Verifier
    calls: list[str] = field(default_factory=list)

    def run(self, name: str, args: BaseModel) -> str:
        self.calls.append(name)
        if isinstance(args, ReadLogLines):
            return self.read_log_lines(args)
        if isinstance(args, ReadRollout):
            return self.read_rollout(args)
        if isinstance(args, GetMetricSeries):
            return self.get_metric_series(args)
        raise ValueError(f"{name} is not a read-only tool")

    def read_log_lines(self, args: ReadLogLines) -> str:
        path = inside(self.verifier.run_dir, args.file)
        if path is None or not path.name.endswith(LOG_SUFFIXES):
            return f"error: {args.file} is not a log file inside the run dir"
        first, last = max(1, args.line - args.before), args.line + args.after
        lines: list[str] = []
        try:
            with open(path, "rb") as f:
                for number, raw in enumerate(f, 1):
                    if number > last:
                        break
                    if number >= first:
                        lines.append(f"{number}: {clip(clean(raw), 300)}")
        except OSError as exc:
            return f"error: cannot read {args.file} ({exc.strerror or exc})"
        if not lines:
            return f"error: {args.file} has fewer than {first} lines"
        return data_fence("\n".join(lines), f"{args.file} lines {first}-{first + len(lines) - 1}", TOOL_RESULT_CHARS)

    def read_rollout(self, args: ReadRollout) -> str:
        from rlagent.tools import rollouts  # the schema readers of both layouts

        v = self.verifier
        base = v.run_dir / ("rollouts" if v.layout is Layout.H else "run_default/rollouts") / f"step_{args.step}"
        candidates = (
            [base / "train/all/traces.jsonl", base / "train/effective/traces.jsonl"]
            if v.layout is Layout.H
            else [base / "train_rollouts.jsonl"]
        )
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            return f"error: no saved rollouts at step {args.step}"
        found: list[Rollout] = []
        try:
            with open(path, "rb") as f:
                data = read_up_to(f, ROLLOUT_MAX_BYTES)
        except OSError as exc:
            return f"error: cannot read rollouts of step {args.step} ({exc.strerror or exc})"
        for raw in data.splitlines()[:ROLLOUT_MAX_LINES]:
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            if isinstance(row, dict):
                found.extend(rollouts._from_h(row, args.step) if v.layout is Layout.H else [rollouts._from_l(row, args.step)])
            if len(found) > args.index:
                break
        if len(found) <= args.index:
            return f"error: step {args.step} has {len(found)} rollout(s); index {args.index} is past the end"
        sample = found[args.index]
        v.read.setdefault(args.step, []).append(sample.completion)
        head = f"rollout {args.index} of step {args.step}: reward {fmt(sample.reward)}, truncated {sample.truncated}"
        body = sample.completion + (f"\n[error] {sample.error}" if sample.error else "")
        source = f"completion of the policy model, step {args.step} #{args.index}"
        return head + "\n" + data_fence(body, source, TOOL_RESULT_CHARS)

    def get_metric_series(self, args: GetMetricSeries) -> str:
        series = self.verifier.history.series(args.process, args.metric)
        if not series:
            table = self.verifier.history.table(args.process)
            known = sorted({m for row in table.values() for m in row})
            return f"error: no {args.process} metric {args.metric!r}; known: {', '.join(known) or 'none yet'}"
        shown = series[-args.last :]
        return clip(
            f"{args.process} {args.metric} (step:value): " + " ".join(f"{s}:{fmt(x)}" for s, x in shown), TOOL_RESULT_CHARS
        )
