"""Every number the rules judge by, with findings.md's starting values as defaults.

Thresholds are knowledge, not law (findings.md): the config loads this model from TOML/env, so
it stays a plain BaseModel with a docstring per field saying what the number means.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    """Starting thresholds of reference/findings.md; fractions are in [0, 1]."""

    model_config = ConfigDict(extra="forbid")  # a misspelt threshold in a config is an error, not a silent default

    # --- How rules look at a series -------------------------------------------------------
    warmup_steps: int = Field(10, ge=0)
    """Steps at the start of a run that rules skip where findings.md says so (reward_flat, step
    times, bottlenecks, grad-norm spikes, length collapse): compile, first batch, format learning."""
    early_steps: int = Field(10, ge=1)
    """How many first finite values of a metric form its early-run baseline (their median)."""
    min_baseline_points: int = Field(3, ge=1)
    """Fewer early/reference values than this: the rule lacks data and stays silent."""
    sustain_steps: int = Field(5, ge=1)
    """k: a condition must hold on this many consecutive steps (never a single point)."""
    rolling_window: int = Field(20, ge=3)
    """Steps in the rolling median a value is compared with (grad norm, step time, length)."""
    recent_steps: int = Field(50, ge=1)
    """Incidents (grad-norm spikes) whose last step is older than this many steps are history."""
    event_window_steps: int = Field(10, ge=1)
    """Steps over which log events are counted (env errors, empty batches, off-policy drops)."""
    noise_z: float = Field(4.0, gt=0)
    """A level change must also exceed this many standard errors of the series' own step-to-step
    noise, so that the maximum of a noisy series is not mistaken for a peak."""
    resume_grace_seconds: float = Field(120.0, ge=0)
    """A step line this long after a crash line means the run came back (the launcher tears the
    other processes down within seconds, so a later step line is a new attempt)."""

    # --- Health ------------------------------------------------------------------------------
    stall_min_minutes: float = Field(10.0, gt=0)
    """run_stalled: no new step for longer than max(this, stall_step_multiple x median step time)."""
    stall_step_multiple: float = Field(3.0, gt=0)
    required_roles: list[str] = Field(default_factory=lambda: ["Trainer", "Orchestrator"])
    """process_down: roles expected alive even before any earlier live check-in saw them."""
    ckpt_lag_steps: int = Field(2, ge=1)
    """checkpoint_failure: an incomplete step_N counts once the trainer is this many steps past N
    (trainer and orchestrator save independently, so the newest step is half-written a moment)."""
    disk_free_low: float = Field(0.10, ge=0, le=1)
    """disk_low: free fraction of the checkpoint/run filesystem below this."""
    host_ram_high: float = Field(0.95, ge=0, le=1)
    """host_oom: host RAM used above this fraction (the live probe)."""

    # --- Progress ----------------------------------------------------------------------------
    reward_smooth_steps: int = Field(10, ge=1)
    """Steps averaged into one reward level (reward_flat, reward_regression, eval_regression)."""
    reward_flat_steps: int = Field(50, ge=1)
    """reward_flat: no improvement of the reward level for this many steps after warm-up."""
    reward_regression_drop: float = Field(0.20, gt=0, lt=1)
    """reward_regression: the reward level fell more than this fraction below its peak..."""
    reward_regression_steps: int = Field(10, ge=1)
    """... over the last this many steps."""
    reward_constant_steps: int = Field(10, ge=1)
    """reward_constant: every rollout scores the same for this many consecutive steps."""
    reward_constant_eps: float = Field(1e-6, ge=0)
    """Spread (reward max - min, or of the per-step means) at or below which rewards are equal."""
    zero_adv_trainable: float = Field(0.25, ge=0, le=1)
    """zero_advantage: fraction of trainable samples below this, sustained."""
    truncation_high: float = Field(0.5, ge=0, le=1)
    """truncation_high: fraction of truncated samples above this, sustained."""
    truncation_trend_floor: float = Field(0.25, ge=0, le=1)
    """truncation_high (trend): only judged once truncation is at least this high..."""
    truncation_trend_horizon: int = Field(50, ge=1)
    """... and its trend reaches 100 % within this many steps."""
    length_collapse_ratio: float = Field(0.5, gt=0, lt=1)
    """length_collapse: mean length below this fraction of its rolling median before the drop."""
    length_collapse_steps: int = Field(3, ge=1)
    """length_collapse: the drop holds for this many steps ("within a few steps")."""
    length_explosion_ratio: float = Field(0.9, gt=0, le=1)
    """length_explosion: mean length above this fraction of the cap, sustained."""
    errored_high: float = Field(0.05, ge=0, le=1)
    """errored_rollouts_high / env_errors: errored fraction of rollouts above this, sustained."""
    empty_batch_critical_ratio: float = Field(0.5, gt=0, le=1)
    """empty_batches is critical once consecutive empty batches reach this fraction of the limit
    (prime-rl raises at the limit)."""
    eval_regression_evals: int = Field(3, ge=2)
    """eval_regression: an eval score falling over this many evals in a row..."""
    eval_regression_min_drop: float = Field(0.10, ge=0)
    """... by at least this fraction of its first score (eval noise is a few %)."""

    # --- Stability ---------------------------------------------------------------------------
    entropy_collapse_ratio: float = Field(0.10, gt=0, lt=1)
    """entropy_collapse: entropy below this fraction of its early median, sustained."""
    entropy_collapse_abs: float = Field(0.05, ge=0)
    """entropy_collapse: or below this absolute value (only when the early median was at least
    twice it, so a model that starts confident is not called collapsed)."""
    entropy_explosion_ratio: float = Field(2.0, gt=1)
    """entropy_explosion: entropy above this multiple of its early median, sustained and rising."""
    mismatch_kl_ratio: float = Field(10.0, gt=1)
    """mismatch_kl_growth: above this multiple of its early median, sustained."""
    mismatch_kl_floor: float = Field(1e-3, ge=0)
    """mismatch_kl_growth: and above this absolute value (step lines print 4 decimals, so a tiny
    early median times 10 is rounding noise)."""
    grad_spike_ratio: float = Field(10.0, gt=1)
    """grad_norm_spike: above this multiple of the rolling median of the previous steps..."""
    grad_spike_steps: int = Field(2, ge=1)
    """... on at least this many consecutive steps (a one-step excursion is normal)."""
    kl_blowup_abs: float = Field(10.0, gt=0)
    """kl_blowup: reference KL above this..."""
    kl_blowup_ratio: float = Field(100.0, gt=1)
    """... or above this multiple of its early median..."""
    kl_early_floor: float = Field(0.01, gt=0)
    """... where the early median is floored at this: KL to the reference starts at 0 and grows
    by design, so 100 x a near-zero start is normal training."""
    kl_blowup_steps: int = Field(3, ge=1)
    """kl_blowup: consecutive steps the condition must hold."""

    # --- Performance -------------------------------------------------------------------------
    wait_ratio_high: float = Field(0.5, gt=0, lt=1)
    """orchestrator/trainer_bottleneck: waiting above this fraction of the step, sustained."""
    kv_cache_high: float = Field(0.95, gt=0, le=1)
    """kv_cache_saturated: vLLM KV-cache usage at or above this with requests waiting."""
    step_time_ratio: float = Field(1.5, gt=1)
    """step_time_regression: step time above this multiple of its rolling median, sustained."""
    off_policy_min_steps: int = Field(3, ge=1)
    """off_policy_drops: drops on at least this many distinct steps of the window, and growing."""
