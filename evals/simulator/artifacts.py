"""Whole files a run leaves besides its logs: configs, checkpoints, broadcasts, weights, rollouts.

Checkpoint and weight files are tiny stand-ins (a monitor checks that `trainer/.metadata` and
`orchestrator/progress.pt` exist, never what is inside); rollouts are real-shaped samples for the
last `rollout_steps_kept` steps only, so a simulated run stays small. A failed trainer save
leaves its shards without `.metadata` (DCP writes it last). Each artifact names the process
that writes it, so a live run writes it from there.
"""

from __future__ import annotations

import json
import pickle
import shutil
import struct
from pathlib import Path

from . import shapes
from .configs import configs
from .events import Artifact, Sim
from .layout import RunPaths
from .rollouts import h_traces, l_rollouts


def _pickle(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=4)


def _safetensors(meta: dict[str, str]) -> bytes:
    header = json.dumps({"__metadata__": meta}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header


def _rel(sim: Sim) -> RunPaths:
    """The layout's paths relative to the run directory."""
    return RunPaths(Path(), sim.layout)


def config_artifacts(sim: Sim) -> list[Artifact]:
    return [Artifact(0.3, path, data) for path, data in configs(sim.sc).items()]


def trainer_checkpoint(sim: Sim, n: int, t: float) -> list[Artifact]:
    base = _rel(sim).ckpt_trainer(n).as_posix()
    out = [Artifact(t, f"{base}/__0_0.distcp", _pickle({"shard": 0, "step": n}), "trainer")]
    if not shapes.checkpoint_fails(sim.sc, n):
        meta = _pickle({"step": n, "planner": "DefaultSavePlanner", "storage": "fs"})
        out.insert(0, Artifact(t, f"{base}/.metadata", meta, "trainer"))
    if sim.h:
        out.append(Artifact(t, f"{base}/dataloader/rank_0.pt", _pickle({"step": n, "epoch": 0}), "trainer"))
    else:
        weights = _rel(sim).weights(n).as_posix()
        out.append(Artifact(t, f"{weights}/config.json", json.dumps({"_name_or_path": sim.sc.model}).encode(), "trainer"))
        out.append(Artifact(t, f"{weights}/model.safetensors", _safetensors({"format": "pt", "step": str(n)}), "trainer"))
    return out


def orchestrator_checkpoint(sim: Sim, n: int, t: float) -> list[Artifact]:
    path = _rel(sim).ckpt_orchestrator(n).as_posix()
    total_tokens, rollouts, tasks = sim.dyn.cumulative(n)
    progress = {"step": n + 1, "total_tokens": round(total_tokens), "total_rollouts": rollouts, "total_tasks": tasks}
    return [Artifact(t, f"{path}/progress.pt", _pickle(progress), "orchestrator")]


def broadcast(sim: Sim, n: int) -> list[Artifact]:
    t = sim.tl.broadcast[n]
    base = _rel(sim).broadcast(n).as_posix()
    stable = Artifact(t, f"{base}/STABLE", b"", "trainer")
    if sim.h:
        weights = _safetensors({"format": "pt", "step": str(n)})
        return [Artifact(t - 0.1, f"{base}/model.safetensors", weights, "trainer"), stable]
    return [stable]


def rollouts(sim: Sim, n: int, cut: float) -> list[Artifact]:
    tl, sc = sim.tl, sim.sc
    t = tl.ship[n]
    base = _rel(sim).rollouts(n).as_posix()
    out: list[Artifact] = []
    if sim.h:
        policy = max(0, n - 2)
        for rel, data in h_traces(sc, sim.dyn, n, "train", policy, sim.clock.epoch(tl.gen_start[n])).items():
            out.append(Artifact(t, f"{base}/{rel}", data, "orchestrator"))
    else:
        out.append(Artifact(t, f"{base}/train_rollouts.jsonl", l_rollouts(sc, sim.dyn, n, "train"), "orchestrator"))
    evals = [ev for ev in tl.evals(n) if ev.end <= cut]
    if evals:
        t_eval = max(ev.end for ev in evals)
        if sim.h:
            epoch = sim.clock.epoch(evals[0].start)
            for rel, data in h_traces(sc, sim.dyn, n, "eval", evals[0].policy, epoch).items():
                out.append(Artifact(t_eval, f"{base}/{rel}", data, "orchestrator"))
        else:
            out.append(Artifact(t_eval, f"{base}/eval_rollouts.jsonl", l_rollouts(sc, sim.dyn, n, "eval"), "orchestrator"))
    return out


def step_artifacts(sim: Sim, trainer_steps: tuple[int, int], orch_steps: tuple[int, int], cut: float) -> list[Artifact]:
    """Artifacts of the trainer steps and orchestrator steps in the given inclusive ranges, none
    after `cut` (the rollouts only for the newest `rollout_steps_kept` orchestrator steps)."""
    sc, tl = sim.sc, sim.tl
    (t_first, t_last), (o_first, o_last) = trainer_steps, orch_steps
    t_first, o_first = max(1, t_first), max(1, o_first)
    out: list[Artifact] = []
    final = sc.finished and t_last == sc.max_steps
    for n in range(t_first, t_last + 1):
        if n % sc.ckpt_interval == 0 and n < sc.max_steps:
            out += trainer_checkpoint(sim, n, tl.end[n])
    for n in range(max(t_first, t_last - 1), t_last + 1):
        out += broadcast(sim, n)  # prime-rl cleans older broadcasts
    for n in range(o_first, o_last + 1):
        if n % sc.ckpt_interval == 0 and n < sc.max_steps:
            out += orchestrator_checkpoint(sim, n, tl.ship[n] + 0.01)
    if final:
        out += final_checkpoints(sim)
    for n in range(max(o_first, o_last - sc.rollout_steps_kept + 1), o_last + 1):
        out += rollouts(sim, n, cut)
    return [a for a in out if a.t <= cut]


def final_checkpoints(sim: Sim) -> list[Artifact]:
    """prime-rl saves the final step once after the loop, both parts."""
    end = sim.tl.end[sim.sc.max_steps]
    return trainer_checkpoint(sim, sim.sc.max_steps, end + 2.5) + orchestrator_checkpoint(sim, sim.sc.max_steps, end + 1.5)


def live_step_artifacts(sim: Sim, n: int, owner: str | None = None) -> list[Artifact]:
    """Step n's files at the moment their owner writes them, and the removals that go with them
    (older broadcasts; rollouts beyond `rollout_steps_kept`, to keep a long live run small).
    With `owner`, only that process's (rollouts are costly to build for nothing)."""
    sc, tl = sim.sc, sim.tl
    tl.ensure(n + 1)
    paths = _rel(sim)
    out: list[Artifact] = []
    trainer, orchestrator = owner in (None, "trainer"), owner in (None, "orchestrator")
    if n % sc.ckpt_interval == 0 and n < sc.max_steps:
        out += trainer_checkpoint(sim, n, tl.end[n]) if trainer else []
        out += orchestrator_checkpoint(sim, n, tl.ship[n] + 0.01) if orchestrator else []
    if trainer:
        out += broadcast(sim, n)
        if n - 2 >= sc.first_step:
            out.append(Artifact(tl.broadcast[n] + 0.05, paths.broadcast(n - 2).as_posix(), b"", "trainer", remove=True))
    if orchestrator:
        out += rollouts(sim, n, sim.horizon)
        old = n - sc.rollout_steps_kept
        if old >= sc.first_step:
            out.append(Artifact(tl.ship[n] + 0.05, paths.rollouts(old).as_posix(), b"", "orchestrator", remove=True))
    return out


def clean_future_steps(root: Path, layout: str, step: int) -> None:
    """What prime-rl does before a resume: rollouts and broadcasts past the resume step go."""
    paths = RunPaths(root, layout)
    for base in (paths.orch_root / "rollouts", paths.orch_root / "broadcasts"):
        if not base.is_dir():
            continue
        for d in base.iterdir():
            name = d.name
            if name.startswith("step_") and name[5:].isdigit() and int(name[5:]) > step:
                shutil.rmtree(d, ignore_errors=True)
