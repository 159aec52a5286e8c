"""`--llm` as a user gives it, in a real process: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL are
honoured (here pointing at the local stub), a missing key is a warning and `LLM: off`, and
`rlagent status` shows the check-in's tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from llm_helpers import copy_run
from stub_anthropic import StubServer


def rlagent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlagent", *args], capture_output=True, text=True, timeout=120, env=env)


def test_llm_claude_without_a_key_warns_and_checks_with_the_rules(tmp_path):
    run = copy_run("reverse-text-h", tmp_path)
    done = rlagent("check", str(run), "--offline", "--no-write", "--json", "--llm", "claude")
    assert done.returncode == 0, done.stderr
    assert "warning: --llm claude, but ANTHROPIC_API_KEY is not set; checking with the rules alone" in done.stderr
    report = json.loads(done.stdout)
    assert report["llm"]["status"] == "off"
    assert "- LLM: off (--llm claude, but ANTHROPIC_API_KEY is not set" in report["status_entry"]


def test_key_and_base_url_from_the_environment_reach_the_api_and_status_shows_the_tokens(tmp_path):
    run = copy_run("reverse-text-l", tmp_path)
    with StubServer(port=0) as stub:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-not-a-key", "ANTHROPIC_BASE_URL": stub.url}
        done = rlagent("check", str(run), "--offline", "--json", env=env)  # not --no-write: a preview keeps no state
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["llm"]["status"] == "ok" and report["llm"]["usage"]["calls"] == len(stub.requests) >= 1
        assert stub.state.auth[0] == "Bearer"
        status = rlagent("status", str(run), env=env)
    assert status.returncode == 0, status.stderr
    assert "LLM: claude-sonnet-5-5;" in status.stdout and "LLM that day (UTC):" in status.stdout


def test_eval_with_claude_scores_the_llm_path_next_to_the_rules(tmp_path):
    with StubServer(port=0) as stub:
        env = {**os.environ, "ANTHROPIC_API_KEY": "sk-test-not-a-key", "ANTHROPIC_BASE_URL": stub.url}
        done = subprocess.run(
            [sys.executable, "-m", "rlagent", "eval", "19_crash-oom-h", "--llm", "claude", "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    rules, claude = payload["rules"], payload["claude"]
    assert claude["scoreboard"]["fixtures"] == rules["fixtures"] == 1
    assert claude["usage"]["calls"] == len(stub.requests) >= 1
    assert claude["usage"]["input_tokens"] > 0 and claude["scoreboard"]["ungated_actions"] == 0


def test_eval_without_a_key_skips_the_claude_column():
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    done = subprocess.run(
        [sys.executable, "-m", "rlagent", "eval", "01_healthy-h", "--llm", "auto", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "ANTHROPIC_API_KEY" in json.loads(done.stdout)["claude"]["skipped"]
