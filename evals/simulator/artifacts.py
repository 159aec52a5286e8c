"""Whole files a run leaves besides its logs: configs, checkpoints, broadcasts, weights, rollouts.

Checkpoint and weight files are tiny stand-ins (a monitor checks that `trainer/.metadata` and
`orchestrator/progress.pt` exist, never what is inside); rollouts are real-shaped samples for the
last `rollout_steps_kept` steps only, so a simulated run stays small.
"""

from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path

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
    out = [
        Artifact(t, f"{base}/.metadata", _pickle({"step": n, "planner": "DefaultSavePlanner", "storage": "fs"})),
        Artifact(t, f"{base}/__0_0.distcp", _pickle({"shard": 0, "step": n})),
    ]
    if sim.h:
        out.append(Artifact(t, f"{base}/dataloader/rank_0.pt", _pickle({"step": n, "epoch": 0})))
    else:
        weights = _rel(sim).weights(n).as_posix()
        out.append(Artifact(t, f"{weights}/config.json", json.dumps({"_name_or_path": sim.sc.model}).encode()))
        out.append(Artifact(t, f"{weights}/model.safetensors", _safetensors({"format": "pt", "step": str(n)})))
    return out


def orchestrator_checkpoint(sim: Sim, n: int, t: float) -> list[Artifact]:
    path = _rel(sim).ckpt_orchestrator(n).as_posix()
    total_tokens, rollouts, tasks = sim.dyn.cumulative(n)
    progress = {"step": n + 1, "total_tokens": round(total_tokens), "total_rollouts": rollouts, "total_tasks": tasks}
    return [Artifact(t, f"{path}/progress.pt", _pickle(progress))]


def broadcast(sim: Sim, n: int) -> list[Artifact]:
    t = sim.tl.broadcast[n]
    base = _rel(sim).broadcast(n).as_posix()
    stable = Artifact(t, f"{base}/STABLE", b"")
    if sim.h:
        return [Artifact(t - 0.1, f"{base}/model.safetensors", _safetensors({"format": "pt", "step": str(n)})), stable]
    return [stable]


def rollouts(sim: Sim, n: int, cut: float) -> list[Artifact]:
    tl, sc = sim.tl, sim.sc
    t = tl.ship[n]
    base = _rel(sim).rollouts(n).as_posix()
    out: list[Artifact] = []
    if sim.h:
        policy = max(0, n - 2)
        for rel, data in h_traces(sc, sim.dyn, n, "train", policy, sim.clock.epoch(tl.gen_start[n])).items():
            out.append(Artifact(t, f"{base}/{rel}", data))
    else:
        out.append(Artifact(t, f"{base}/train_rollouts.jsonl", l_rollouts(sc, sim.dyn, n, "train")))
    evals = [ev for ev in tl.evals(n) if ev.end <= cut]
    if evals:
        t_eval = max(ev.end for ev in evals)
        if sim.h:
            epoch = sim.clock.epoch(evals[0].start)
            for rel, data in h_traces(sc, sim.dyn, n, "eval", evals[0].policy, epoch).items():
                out.append(Artifact(t_eval, f"{base}/{rel}", data))
        else:
            out.append(Artifact(t_eval, f"{base}/eval_rollouts.jsonl", l_rollouts(sc, sim.dyn, n, "eval")))
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
    if final:
        out += trainer_checkpoint(sim, sc.max_steps, tl.end[sc.max_steps] + 2.5)
    for n in range(max(t_first, t_last - 1), t_last + 1):
        out += broadcast(sim, n)  # prime-rl cleans older broadcasts
    for n in range(o_first, o_last + 1):
        if n % sc.ckpt_interval == 0 and n < sc.max_steps:
            out += orchestrator_checkpoint(sim, n, tl.ship[n] + 0.01)
    if final:
        out += orchestrator_checkpoint(sim, sc.max_steps, tl.end[sc.max_steps] + 1.5)
    for n in range(max(o_first, o_last - sc.rollout_steps_kept + 1), o_last + 1):
        out += rollouts(sim, n, cut)
    return [a for a in out if a.t <= cut]
