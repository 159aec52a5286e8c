"""Settings: defaults < a TOML file (`--config`) < `RLAGENT_*` environment < command-line flags."""

from __future__ import annotations

import tomllib
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from rlagent.agents.rules.thresholds import Thresholds
from rlagent.graph.adaptive import WatchSettings
from rlagent.graph.store import default_home
from rlagent.models.actions import ApprovalMode
from rlagent.tools.launch_command import CommandError, parse_launch_command
from rlagent.tools.llm.client import LLMSettings
from rlagent.tools.notify import NotifySettings
from rlagent.tools.safefs import read_regular
from rlagent.tools.textfmt import parse_cadence

MAX_CONFIG_BYTES = 1 << 20
"""A settings file is a few lines of TOML; a longer one is not read."""


class ConfigError(Exception):
    """A setting or config file a user must fix; its message is one clear line."""


class Settings(BaseSettings):
    """Everything a check-in can be told; each field is also `RLAGENT_<NAME>` and a TOML key."""

    model_config = SettingsConfigDict(env_prefix="RLAGENT_", env_nested_delimiter="__", extra="forbid")

    home: Path = Field(default_factory=default_home)
    """Where run state lives (one SQLite state store per run)."""
    offline: bool = False
    """Treat the run dir as a recorded run: no process, HTTP or SLURM probes."""
    write: bool = True
    """Append the entry to the run's STATUS.md."""
    cadence: str = "1h"
    """Time between check-ins of `rlagent run` (30s, 10m, 1h, 1h30m)."""
    max_checks: int | None = Field(None, ge=1)
    """Stop `rlagent run` after this many check-ins (default: run until Ctrl-C)."""
    log_timezone: str | None = None
    """IANA zone the run's log times were written in (default: this machine's local zone)."""
    probe_timeout_s: float = Field(2.0, gt=0, le=60)
    """Timeout of each live probe (vLLM /metrics, SLURM)."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """The rules' thresholds (findings.md starting values)."""
    slurm_ssh: bool = False
    """SLURM runs: look at the processes on the job's nodes with `ssh NODE ps` (BatchMode, known hosts
    only) where `srun --jobid J --overlap` cannot; off by default, as not every cluster allows it."""

    # --- Acting on the run (only ever after review and a person's approval) -------------------
    approve: ApprovalMode = ApprovalMode.ASK
    """`ask`: offer an agreed command for approval (a prompt in a terminal, else pending for
    `rlagent approve`); `never`: observe only, never prompt, never send."""
    session: str = "prime-rl"
    """tmux session of the run (prime-rl's scripts/tmux.sh default); commands go to its `Launcher` window."""
    tmux_socket: str | None = None
    """tmux server socket name (`tmux -L NAME`); default: the default server."""
    launch_command: str | None = None
    """The run's own launch command (e.g. `uv run rl @ rl.toml --run.name x`), when rlagent cannot
    find it (WANDB_ARGS of the run's processes, rl.sbatch). Never guessed; never read from the
    Launcher pane, whose history mixes typed commands with what the program printed."""
    approval_timeout: str = "10m"
    """How long the terminal prompt waits; no answer counts as No and the decision stays pending."""
    decision_expiry: str = "2h"
    """A pending decision expires (as No) after this."""
    verify_timeout: str = "10m"
    """How long a sent restart has to show the run back (processes, new attempt, step advancing)."""
    max_restarts_per_day: int = Field(3, ge=0)
    """The safety officer rejects a restart once this many were sent to the run in 24 h."""
    lock_timeout: str = "1m"
    """How long a check-in waits while another rlagent holds the run's lock (it says who), then gives up."""

    # --- Claude (optional: the rules alone are complete and safe) ------------------------------
    llm: LLMSettings = Field(default_factory=LLMSettings)
    """Claude as diagnostician and reviewers: `--llm auto|claude|off`, `[llm]` in the TOML,
    `RLAGENT_LLM__MODE` ... (model, timeouts, retry and check-in budgets, caps per check-in and day)."""

    # --- A fleet in one process (`rlagent watch`) ----------------------------------------------
    watch: WatchSettings = Field(default_factory=WatchSettings)
    """`[watch]`: pool size, the Degraded/Down cadence, discovery depth, the HTML report."""
    notify: NotifySettings = Field(default_factory=NotifySettings)
    """`[notify]`: webhook URLs (secrets: never printed or logged), reminder interval, timeouts."""

    @field_validator("cadence")
    @classmethod
    def _cadence_parses(cls, value: str) -> str:
        parse_cadence(value)
        return value

    @field_validator("approval_timeout", "decision_expiry", "verify_timeout", "lock_timeout")
    @classmethod
    def _duration_parses(cls, value: str) -> str:
        parse_cadence(value)
        return value

    @field_validator("launch_command")
    @classmethod
    def _launch_command_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_launch_command(value)
            except CommandError as exc:
                raise ValueError(str(exc)) from exc
        return value

    @field_validator("log_timezone")
    @classmethod
    def _zone_exists(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError) as exc:
                raise ValueError(f"unknown time zone {value!r}") from exc
        return value

    @property
    def cadence_seconds(self) -> int:
        return parse_cadence(self.cadence)

    def seconds(self, name: str) -> int:
        """A duration setting (`approval_timeout`, `decision_expiry`, `verify_timeout`, `lock_timeout`) in seconds."""
        return parse_cadence(getattr(self, name))


def load_settings(config_file: Path | None = None, **flags: object) -> Settings:
    """Build settings; flags that are None were not given and do not override anything."""
    given = {key: value for key, value in flags.items() if value is not None}
    from_file: dict | None = None
    if config_file is not None:
        try:  # a regular file of sane size: a FIFO would wait for a writer, /dev/zero never end
            from_file = tomllib.loads(read_regular(config_file, limit=MAX_CONFIG_BYTES).decode("utf-8"))
        except OSError as exc:
            raise ConfigError(f"config {config_file}: cannot read it ({exc.strerror or exc})") from exc
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config {config_file}: malformed TOML ({exc})") from exc

    class _FromSources(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            if from_file is not None:  # what the file said, as read above (it is not opened twice)
                sources.append(InitSettingsSource(settings_cls, init_kwargs=from_file))
            return tuple(sources)

    try:
        return Settings.model_validate(_FromSources(**given).model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "settings"
        source = f" (from {config_file})" if config_file else ""
        message = str(first["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"setting {where}: {message}{source}") from exc
