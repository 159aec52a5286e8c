"""OpenRLHF: `Global step N: {...}` lines (any key order), eval lines, the <= v0.8.0 tqdm postfix,
`_actor/global_stepN` + `latest` checkpoints, and `--ckpt.load_enable` (v0.10.2 on) or
`--load_checkpoint` (older) to resume (frameworks.md 3)."""

from __future__ import annotations

import re
from pathlib import Path

from rlagent.models.run import Framework, RunConfig, RunInfo
from rlagent.tools.adapters.base import ResumePlan
from rlagent.tools.adapters.common import ConsoleAdapter, as_int, fast_dict, flag, script_words
from rlagent.tools.adapters.console import ConsoleState
from rlagent.tools.frameworks import openrlhf
from rlagent.tools.frameworks.lines import LogLine
from rlagent.tools.frameworks.records import MetricRow

_GLOBAL = re.compile(r"(?:✨\s*)?Global step (\d+): (\{.*\})\s*$")
_GLOBAL_AT = re.compile(r"Global step (\d+): (\{.*\})\s*$")  # matched where global_step_match found it


def global_step_match(text: str) -> re.Match[str] | None:
    """`_GLOBAL.search(text)`'s groups, matched at each `Global step` of the line in turn rather than
    tried at every character (the optional `✨ ` before it gives the regex no literal to skip to)."""
    at = text.find("Global step ")
    while at != -1:
        match = _GLOBAL_AT.match(text, at)
        if match is not None:
            return match
        at = text.find("Global step ", at + 1)
    return None


_EPISODE = re.compile(r"Episode \[(\d+)/(\d+)\]")


class OpenRLHFAdapter(ConsoleAdapter):
    framework = Framework.OPENRLHF
    launch_markers = ("openrlhf.cli",)

    def parse_rows(self, line: LogLine, state: ConsoleState | None = None) -> list[MetricRow]:
        text = line.text
        if "Global step" in text:
            match = global_step_match(text)
            data = fast_dict(match.group(2)) if match else None
            if match and data is not None:
                values = {k: (float("nan") if v is None else v) for k, v in data.items()}
                return [MetricRow(step=int(match.group(1)), values=values, lineno=line.lineno)]
            row = openrlhf.parse_global_step_line(text, line.lineno)
            return [row] if row is not None else []
        if "Evaluation completed" in text:
            match = openrlhf.EVAL_LINE.search(text)
            data = fast_dict(match.group(2)) if match else None
            if match and data is not None:  # the fast path; anything else goes through the full parser
                values = {k: (float("nan") if v is None else v) for k, v in data.items()}
                return [MetricRow(step=int(match.group(1)), values=values, lineno=line.lineno, kind="val")]
            row = openrlhf.parse_eval_line(text, line.lineno)
            return [row] if row is not None else []
        if "Episode [" in text and "=" in text:  # <= v0.8.0: the Episode bar's postfix is the status
            bar = openrlhf.parse_tqdm(text)
            episode = _EPISODE.search(bar.desc) if bar is not None and bar.postfix else None
            if bar is not None and episode and (state is None or state.memo.get("postfix") != bar.postfix):
                if state is not None:
                    state.memo["postfix"] = bar.postfix
                step = (int(episode.group(1)) - 1) * (bar.total or 0) + bar.n + 1
                return [MetricRow(step=step, values=dict(bar.postfix), lineno=line.lineno)]
        return []

    def _words(self, run_dir: Path) -> list[str]:
        script = self.launch_script(run_dir)
        return script_words(script) if script else []

    def dotted_flags(self, words: list[str]) -> bool:
        """v0.10.2 and on use dotted flag groups (`--ckpt.path`)."""
        return any(w.startswith(("--ckpt.", "--actor.", "--rollout.", "--train.")) for w in words)

    def read_config(self, run_dir: Path) -> RunConfig:
        words = self._words(run_dir)
        config = RunConfig()
        script = self.launch_script(run_dir)
        if script:
            config.files.append(script.name)
        config.model = flag(words, "--actor.model_name_or_path", "--pretrain")
        config.group_size = as_int(flag(words, "--rollout.n_samples_per_prompt", "--n_samples_per_prompt"))
        config.max_completion_tokens = as_int(flag(words, "--rollout.max_new_tokens", "--generate_max_len"))
        config.ckpt_interval = as_int(flag(words, "--ckpt.save_steps", "--save_steps"))
        config.batch_size = as_int(flag(words, "--rollout.batch_size", "--rollout_batch_size"))
        return config

    def ckpt_path(self, run_dir: Path) -> Path:
        path = flag(self._words(run_dir), "--ckpt.path", "--ckpt_path") or "./ckpt/checkpoints_ppo_ray"
        return Path(path) if Path(path).is_absolute() else run_dir / path

    def checkpoints(self, run_dir: Path, notes: list[str] | None = None) -> dict[int, list[str]]:
        found = openrlhf.checkpoints(self.ckpt_path(run_dir))
        if notes is not None:
            notes.extend(n for n in found.notes if "unreadable" in n and n not in notes)
        parts: dict[int, list[str]] = {}
        for step in found.steps[-3:]:
            parts[step] = ["actor"] if found.latest is not None and step <= found.latest else ["actor", "incomplete"]
        return parts

    def resume_flags(self, run_dir: Path, step: int, words: list[str]) -> ResumePlan:
        load = "--ckpt.load_enable" if self.dotted_flags(words or self._words(run_dir)) else "--load_checkpoint"
        return ResumePlan(True, step, add=[load], drop=[])

    def process_markers(self, run: RunInfo) -> list[str]:
        return [run.run_dir, str(self.ckpt_path(Path(run.run_dir)))]
