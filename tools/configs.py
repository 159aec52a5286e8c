"""Read the settings a monitor needs from a run's resolved configs (JSON in H, TOML in L)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from rlagent.models.run import Layout, RunConfig
from rlagent.tools import safefs
from rlagent.tools.bounds import bounded_int

# Candidate key paths per setting, first hit wins; files are read in this order.
_FILES = {
    Layout.H: ("rl.json", "orchestrator.json", "trainer.json", "inference.json"),
    Layout.L: ("rl.toml", "orchestrator.toml", "trainer.toml", "inference.toml"),
}
_PATHS: dict[str, tuple[str, ...]] = {
    "max_steps": ("max_steps", "trainer.max_steps", "orchestrator.max_steps"),
    "model": ("model.name", "trainer.model.name", "orchestrator.model.name"),
    "batch_size": ("batch_size", "orchestrator.batch_size"),
    "token_batch_size": ("token_batch_size", "orchestrator.token_batch_size"),
    "group_size": ("group_size", "rollouts_per_example", "orchestrator.group_size", "orchestrator.rollouts_per_example"),
    "max_completion_tokens": (
        "train.sampling.max_completion_tokens",
        "sampling.max_completion_tokens",
        "train.sampling.max_tokens",
        "sampling.max_tokens",
        "orchestrator.train.sampling.max_completion_tokens",
        "orchestrator.sampling.max_tokens",
    ),
    "seq_len": ("seq_len", "model.seq_len", "trainer.model.seq_len", "orchestrator.seq_len"),
    "ckpt_interval": ("ckpt.interval", "trainer.ckpt.interval"),
    "max_off_policy_steps": ("max_off_policy_steps", "max_async_level", "orchestrator.max_off_policy_steps"),
    "temperature": ("train.sampling.temperature", "sampling.temperature", "orchestrator.train.sampling.temperature"),
}


_CASTS = {"model": str, "temperature": float}
MAX_CONFIG_BYTES = 16 << 20


def read_run_config(run_dir: Path, layout: Layout) -> RunConfig:
    """Merge the run's config files; unreadable ones become notes, never exceptions."""
    config = RunConfig()
    docs: list[dict[str, Any]] = []
    configs_dir = run_dir / "configs"
    present = {p.name for p in safefs.list_dir(configs_dir, config.problems, run_dir)}
    for name in _FILES[layout]:
        if name not in present:
            continue
        rel = f"configs/{name}"
        try:
            raw = safefs.read_regular(configs_dir / name, run_dir, MAX_CONFIG_BYTES)
            doc = json.loads(raw) if layout is Layout.H else tomllib.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            config.problems.append(f"{rel}: malformed {'JSON' if layout is Layout.H else 'TOML'} ({_short(exc)})")
            continue
        except RecursionError:
            config.problems.append(f"{rel}: nested too deeply to read")
            continue
        except OSError as exc:
            config.problems.append(f"{rel}: unreadable ({safefs.reason(exc)})")
            continue
        if not isinstance(doc, dict):
            config.problems.append(f"{rel}: expected an object at the top level")
            continue
        config.files.append(rel)
        docs.append(doc)
    if not config.files and not config.problems:
        config.problems.append("configs/: no resolved config found")
    for field, paths in _PATHS.items():
        value = _first(docs, paths)
        if value is None:
            continue
        try:
            setattr(config, field, _CASTS.get(field, bounded_int)(value))
        except (TypeError, ValueError, OverflowError):
            config.problems.append(f"config {field}={value!r} is not a number")
    config.envs = _envs(docs)
    config.inference_url = _inference_url(docs)
    return config


def _get(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _first(docs: list[dict[str, Any]], paths: tuple[str, ...]) -> Any:
    for doc in docs:
        for dotted in paths:
            value = _get(doc, dotted)
            if value is not None and not isinstance(value, dict | list | bool):
                return value
    return None


def _envs(docs: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for doc in docs:
        for dotted in ("train.source", "orchestrator.train.source", "env", "train.env", "orchestrator.env"):
            items = _get(doc, dotted)
            if isinstance(items, list):
                for item in items:
                    if isinstance(item, dict):
                        name = item.get("name") or item.get("id") or _get(item, "env.name") or _get(item, "env.id")
                        if isinstance(name, str) and name not in names:
                            names.append(name)
        if names:
            return names
    return names


def _inference_url(docs: list[dict[str, Any]]) -> str | None:
    for doc in docs:
        for dotted in ("client.base_url", "orchestrator.client.base_url"):
            value = _get(doc, dotted)
            if isinstance(value, list) and value:
                value = value[0]
            if isinstance(value, str) and value.startswith("http"):
                return value.rstrip("/").removesuffix("/v1")
        for dotted in ("server", "inference.server"):
            server = _get(doc, dotted)
            if isinstance(server, dict) and server.get("port"):
                host = server.get("host") or "localhost"
                if host in ("0.0.0.0", "::"):
                    host = "localhost"
                return f"http://{host}:{server['port']}"
    return None


def _short(exc: Exception) -> str:
    return str(exc).splitlines()[0][:160]
