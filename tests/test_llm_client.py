"""The Claude client against the local Messages API stub: one retry layer, retry-after, timeouts,
no retry on other 4xx, bounded time; the per-check-in budget; the mode and the default model."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from rlagent.models.llm import LLMRecord, LLMUsage
from rlagent.tools.llm.budget import Session, spent_on, usage_of
from rlagent.tools.llm.client import (
    DEFAULT_MODEL,
    AnthropicClient,
    LLMBudgetExceeded,
    LLMSettings,
    LLMUnavailable,
    Prices,
    ScriptedClient,
    TokenUsage,
    choose,
    text_reply,
    tool_reply,
)

from stub_anthropic import Fault, StubServer

REQUEST = {
    "max_tokens": 256,
    "system": [{"type": "text", "text": "static knowledge " * 200, "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    "tools": [{"name": "effect_verdict", "description": "d", "input_schema": {"type": "object", "properties": {}}}],
    "tool_choice": {"type": "tool", "name": "effect_verdict"},
    "messages": [
        {"role": "user", "content": "- action: stop\n- addresses: nan_detected\nAnswer by calling effect_verdict once."}
    ],
}


@pytest.fixture
def stub():
    with StubServer(port=0) as server:
        yield server


def client(stub, **kw) -> AnthropicClient:
    kw = {"backoff_s": 0.05, "max_backoff_s": 0.2, "call_timeout_s": 5.0, **kw}
    return AnthropicClient(api_key="sk-test-not-a-key", base_url=stub.url, **kw)


def test_a_stub_answer_parses_with_usage_and_the_key_goes_in_the_bearer_header(stub):
    c = client(stub)
    first = c.create(REQUEST, budget_s=10)
    second = c.create(REQUEST, budget_s=10)
    (use,) = first.tool_uses()
    assert use.name == "effect_verdict" and use.input["approve"] is True and use.id.startswith("toolu_")
    assert first.id.startswith("msg_") and first.stop_reason == "tool_use" and first.model == DEFAULT_MODEL
    # The static prefix is written to the cache once, then read from it.
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert stub.requests[0]["model"] == DEFAULT_MODEL and c.attempts == 1
    assert stub.state.auth == ["Bearer", "Bearer"]


def test_overload_then_success_is_retried_by_one_layer_only(stub):
    stub.plan(Fault(status=529), Fault(status=503))
    c = client(stub)
    reply = c.create(REQUEST, budget_s=10)
    assert reply.tool_uses() and c.attempts == 3 and stub.state.statuses == [529, 503, 200]


def test_a_lasting_overload_gives_up_within_the_retry_budget_with_a_reason(stub):
    stub.plan(*[Fault(status=529)] * 50)
    c = client(stub)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as caught:
        c.create(REQUEST, budget_s=2.0)
    assert time.monotonic() - started < 2.5
    assert "overloaded (HTTP 529)" in caught.value.reason and f"{c.attempts} attempt(s)" in caught.value.reason
    assert 2 <= c.attempts < 50


def test_retry_after_of_a_rate_limit_is_honoured(stub):
    stub.plan(Fault(status=429, retry_after=0.8))
    c = client(stub)
    started = time.monotonic()
    assert c.create(REQUEST, budget_s=10).tool_uses()
    assert time.monotonic() - started >= 0.8 and c.attempts == 2


def test_retry_after_past_the_budget_gives_up_at_once(stub):
    stub.plan(Fault(status=429, retry_after=120))
    c = client(stub)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as caught:
        c.create(REQUEST, budget_s=5)
    assert time.monotonic() - started < 1.0 and c.attempts == 1
    assert "rate limited (HTTP 429)" in caught.value.reason and "retry-after 120 s" in caught.value.reason


@pytest.mark.parametrize("status", [400, 401])
def test_other_client_errors_are_not_retried(stub, status):
    stub.plan(Fault(status=status))
    c = client(stub)
    with pytest.raises(LLMUnavailable) as caught:
        c.create(REQUEST, budget_s=10)
    assert c.attempts == 1 and f"HTTP {status}" in caught.value.reason


def test_a_slow_answer_times_out_per_call_and_is_retried_within_the_budget(stub):
    stub.plan(*[Fault(sleep=1.0)] * 5)
    c = client(stub, call_timeout_s=0.4)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable) as caught:
        c.create(REQUEST, budget_s=2.2)
    assert "timed out (per-call timeout 0.4 s)" in caught.value.reason and c.attempts >= 2
    assert time.monotonic() - started < 2.7


def test_the_default_retry_budget_bounds_an_outage_at_60_seconds(stub):
    """An endless 529 with the default settings: simulated clock, no real waiting."""
    stub.plan(*[Fault(status=529)] * 200)
    now = [0.0]
    c = client(stub, backoff_s=1.0, max_backoff_s=8.0, sleep=lambda s: now.__setitem__(0, now[0] + s), clock=lambda: now[0])
    with pytest.raises(LLMUnavailable):
        c.create(REQUEST, budget_s=LLMSettings().retry_budget_s)
    assert now[0] <= 60.0 and c.attempts >= 8


def test_mode_auto_needs_a_key_and_claude_without_one_is_off_with_a_reason():
    assert choose("auto", {}).enabled is False and choose("auto", {}).reason == "no ANTHROPIC_API_KEY"
    assert choose("auto", {"ANTHROPIC_API_KEY": "k"}).enabled is True
    off = choose("claude", {})
    assert off.enabled is False and "ANTHROPIC_API_KEY is not set" in off.reason
    assert choose("off", {"ANTHROPIC_API_KEY": "k"}).enabled is False


def test_the_default_model_is_a_current_sonnet_of_the_installed_sdk():
    import typing

    from anthropic.resources.messages.messages import DEPRECATED_MODELS
    from anthropic.types import Model

    literals = typing.get_args(typing.get_args(Model)[0])
    assert DEFAULT_MODEL in literals and "sonnet" in DEFAULT_MODEL and DEFAULT_MODEL not in DEPRECATED_MODELS
    # No DeprecationWarning when the SDK is asked for it.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert DEFAULT_MODEL not in DEPRECATED_MODELS


def test_importing_the_check_path_does_not_import_the_sdk():
    code = "import sys, rlagent.cli, rlagent.graph.runner; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_check_with_claude_off_never_loads_claudes_diagnosis_path(tmp_path):
    """No key: `rlagent check` records why Claude is off, as before, without importing the LLM
    diagnostician, its prompts, models and evidence readers (13 ms of every such process)."""
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parent.parent / "examples/runs/reverse-text-h", run)
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "rlagent", "check", str(run), "--offline", "--json", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode in (0, 1, 2), done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "rlagent.graph.runner" in imported  # the check path was loaded, and the import log read
    assert {m for m in imported if m.startswith("rlagent.agents.llm.")} == {"rlagent.agents.llm.runtime"}
    llm = json.loads(done.stdout)["llm"]
    assert (llm["status"], llm["reason"]) == ("off", "no ANTHROPIC_API_KEY")
    assert "- LLM: off (no ANTHROPIC_API_KEY; rules only)" in (run / "STATUS.md").read_text()


def test_the_network_guard_blocks_remote_hosts():
    with pytest.raises(RuntimeError, match="Network is disabled"), socket.create_connection(("192.0.2.1", 443), timeout=1):
        pass


# --- the budget ------------------------------------------------------------------------------


def usage(i=1000, o=100, read=0, write=0) -> TokenUsage:
    return TokenUsage(input_tokens=i, output_tokens=o, cache_read_input_tokens=read, cache_creation_input_tokens=write)


def test_cost_counts_cache_reads_and_writes_at_their_prices():
    spent = usage_of(usage(i=1_000_000, o=0, read=1_000_000, write=1_000_000), Prices(), "1h")
    assert spent.cost_usd == pytest.approx(3.0 + 0.30 + 6.0)
    assert spent.prompt_tokens == 3_000_000 and spent.cache_share == pytest.approx(1 / 3)


def test_the_check_in_cost_cap_stops_calls_before_they_are_made():
    settings = LLMSettings(max_usd_per_checkin=0.05, max_output_tokens=1000)
    fake = ScriptedClient([text_reply("x", usage=usage(i=9000, o=500))] * 5)
    session = Session(fake, settings)
    session.call("diagnostician", {**REQUEST, "max_tokens": 1000})
    with pytest.raises(LLMBudgetExceeded, match="cost cap"):
        session.call("diagnostician", {**REQUEST, "max_tokens": 1000})
    assert len(fake.requests) == 1


def test_the_daily_cap_counts_earlier_check_ins_of_the_same_day():
    from datetime import UTC, datetime

    day = datetime(2026, 11, 20, 23, 0, tzinfo=UTC)
    log = [
        LLMRecord(checkin=1, at=day.replace(hour=1), status="ok", usage=LLMUsage(cost_usd=4.99)),
        LLMRecord(checkin=0, at=datetime(2026, 11, 19, 23, tzinfo=UTC), status="ok", usage=LLMUsage(cost_usd=50)),
    ]
    assert spent_on(log, day) == pytest.approx(4.99)
    session = Session(ScriptedClient([text_reply("x")]), LLMSettings(), spent_today_usd=spent_on(log, day))
    with pytest.raises(LLMBudgetExceeded, match="daily cost cap"):
        session.call("diagnostician", REQUEST)


def test_the_time_budget_and_the_breaker_keep_an_outage_to_one_wait():
    now = [0.0]
    fake = ScriptedClient([LLMUnavailable("overloaded (HTTP 529); gave up after 6 attempt(s) in 58.0 s")])
    session = Session(fake, LLMSettings(checkin_time_budget_s=100), clock=lambda: now[0])
    with pytest.raises(LLMUnavailable):
        session.call("diagnostician", REQUEST)
    with pytest.raises(LLMUnavailable, match="not tried after: overloaded"):
        session.call("evidence_auditor", REQUEST)
    assert len(fake.requests) == 1
    late = Session(ScriptedClient([text_reply("x")]), LLMSettings(checkin_time_budget_s=100), clock=lambda: now[0])
    now[0] = 99.5
    with pytest.raises(LLMBudgetExceeded, match="time budget"):
        late.call("diagnostician", REQUEST)


def test_usage_is_kept_per_role_and_summed():
    fake = ScriptedClient(
        [tool_reply("x", {}, usage=usage(1000, 50, read=5000)), tool_reply("y", {}, usage=usage(800, 40, write=5000))]
    )
    session = Session(fake, LLMSettings())
    session.call("diagnostician", REQUEST)
    session.call("safety_officer", REQUEST)
    assert session.usage.calls == 2 and session.usage.prompt_tokens == 11800 and session.usage.output_tokens == 90
    assert (
        set(session.roles) == {"diagnostician", "safety_officer"}
        and session.roles["diagnostician"].cache_read_input_tokens == 5000
    )
