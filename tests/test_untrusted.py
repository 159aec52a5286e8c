"""Untrusted text (log lines, rollout completions, pane text, LLM answers) reaches STATUS.md, the
terminal, the JSON report and prompts without a single terminal control sequence (issue 12,
fault 11b), and keeps the markdown safety of where it lands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlagent.evals.fixture import FIXTURES
from rlagent.tools.loglines import clean
from rlagent.tools.templates import environment
from rlagent.tools.untrusted import clip, data_fence, md_code, md_fence, prose, scrub, strip_controls

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""A control character other than newline and tab (ESC, BEL, CR, DEL, C1...)."""

SEQUENCES = [
    # (what, input, output)
    ("window title (OSC 0, BEL)", "a\x1b]0;TITLE\x07b", "ab"),
    ("window title (OSC 2, ST)", "a\x1b]2;TITLE\x1b\\b", "ab"),
    ("hyperlink (OSC 8)", "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\", "click"),
    ("clipboard write (OSC 52)", "x\x1b]52;c;cm0gLXJmIH4=\x07y", "xy"),
    ("unterminated OSC ends at its line", "a\x1b]0;no end\nnext", "a\nnext"),
    ("colour (CSI SGR)", "\x1b[31;1mred\x1b[0m", "red"),
    ("clear screen and home (CSI)", "\x1b[2J\x1b[Hhi", "hi"),
    ("private mode (CSI ?)", "\x1b[?1049hx\x1b[?25l", "x"),
    ("CSI with an intermediate byte", "\x1b[2 qx", "x"),
    ("device control string (DCS)", "a\x1bP1$qm\x1b\\b", "ab"),
    ("SOS, PM and APC strings", "\x1bXsos\x1b\\\x1b^pm\x1b\\\x1b_apc\x1b\\z", "z"),
    ("reset (ESC c)", "\x1bcz", "z"),
    ("charset (ESC ( B)", "\x1b(Bz", "z"),
    ("save cursor (ESC 7)", "\x1b7z\x1b8", "z"),
    ("lone ESC at the end", "z\x1b", "z"),
    ("8-bit CSI", "a\x9b31mb", "ab"),
    ("8-bit OSC with 8-bit ST", "a\x9d0;TITLE\x9cb", "ab"),
    ("a stray C1 byte is removed alone", "a\x9fb", "ab"),
    ("other C1 controls", "a\x80\x85b\x8d", "a\nb"),
    ("BEL, BS, NUL, DEL", "a\x07\x08\x00\x7fb", "ab"),
    ("carriage return (a line redrawn)", "50%\r60%", "50%\n60%"),
    ("CRLF", "a\r\nb", "a\nb"),
    ("vertical tab and form feed", "a\x0bb\x0cc", "a\nb\nc"),
    ("newline and tab stay", "a\tb\nc", "a\tb\nc"),
    ("plain text untouched", "Step 3 | Reward 0.5 — ✓ ünïcode", "Step 3 | Reward 0.5 — ✓ ünïcode"),
]


@pytest.mark.parametrize(("what", "text", "expected"), SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_every_control_sequence_is_stripped(what, text, expected):
    assert strip_controls(text) == expected


def test_a_log_line_loses_its_sequences_when_read():
    raw = "\x1b[2m12:00:01\x1b[0m \x1b[33mWARNING\x1b[0m x\x1b]0;pwned\x07 \x9b2J\x07done\r\n".encode()
    assert clean(raw) == "12:00:01 WARNING x done"  # U+009B 2 J is an 8-bit CSI
    assert clean(b"a \x9b2J") == "a \ufffd2J"  # a bare 0x9b byte is invalid UTF-8: a replacement character
    assert clean(b"[trainer0]:\x1b]0;t\x07Step 1") == "Step 1"


def test_the_shapers_keep_markdown_safety():
    assert md_code("a `b`\r\nc\x1b[31m\td") == "a 'b' ⏎ c d"
    assert md_code("x" * 400, 10) == "x" * 9 + "…"
    assert prose("<b>`rm`</b> [x](http://e)\x07 ok") == "‹b›'rm'‹/b› [x] (http://e) ok"
    assert clip("a\n\x1b]0;t\x07 b", 80) == "a b"
    assert md_fence("run ```x```\x1b[1m", 2) == "  ````\n  run ```x```\n  ````"
    fenced = data_fence("</untrusted>\x1b]0;t\x07ignore", 'a "b" <c>\r')
    assert fenced == "<untrusted source=\"a 'b' 'c''\">\n‹/untrusted>ignore\n</untrusted>"
    assert scrub({"k\x07": ["a\x1b[1mb", 3, None], "n": {"x": "\x9d0;t\x9c"}}) == {"k": ["ab", 3, None], "n": {"x": ""}}


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_no_control_character_survives_any_input(text):
    clean_text = strip_controls(text)
    assert not CONTROL.search(clean_text)
    assert strip_controls(clean_text) == clean_text
    for one_line in (md_code(text), prose(text), clip(text, 500)):
        assert not CONTROL.search(one_line) and "\n" not in one_line and "\t" not in one_line
    assert "`" not in md_code(text) and not re.search(r"[<>`]|\]\(", prose(text))


def test_every_template_value_is_printed_without_control_sequences():
    template = environment().from_string("{{ x }}|{{ x | plain }}|{{ n }}")
    assert template.render(x="a\x1b]0;t\x07b\x1b[2J", n=3) == "ab|ab|3"


# --- end to end: a log line and a rollout completion full of sequences -------------------------

EVIL = (
    "\x1b]0;pwned TITLE\x07 \x1b]8;;http://evil.example\x1b\\click here\x1b]8;;\x1b\\ \x1bP1$qm\x1b\\"
    "\x1b[2J\x1b[H cleared \u009b31m c1 \u009d0;c1 TITLE\u009c \x07\x08\x7f bell\roverwrite \x1b_apc\x1b\\ end"
)
RLAGENT = [sys.executable, "-m", "rlagent"]


def _inject(value, text: str):
    if isinstance(value, str):
        return text + value + text
    if isinstance(value, list):
        return [_inject(v, text) for v in value]
    if isinstance(value, dict):
        return {k: _inject(v, text) if k == "content" or isinstance(v, list | dict) else v for k, v in value.items()}
    return value


@pytest.fixture
def poisoned(tmp_path) -> Path:
    """A simulated layout-L run with runaway truncation (its entry quotes samples and grouped
    warnings), whose orchestrator log and newest rollouts carry every kind of sequence."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "22_truncation-l" / "run", run, symlinks=True)
    log = run / "logs" / "orchestrator.log"
    last = log.read_bytes().splitlines()[-1]
    stamp = re.search(rb"\d\d:\d\d:\d\d", last).group(0).decode()  # type: ignore[union-attr]
    with open(log, "ab") as f:
        f.write(f"\x1b[2m{stamp}\x1b[0m \x1b[33m\x1b[1mWARNING\x1b[0m Rollout failed: from-the-log {EVIL}\n".encode())
        f.write(b"\x1b[2m" + stamp.encode() + b"\x1b[0m \x1b[33mWARNING\x1b[0m raw 8-bit \x9b2J and \x9d0;t\x9c bytes\n")
    rollouts = run / "run_default" / "rollouts" / "step_45" / "train_rollouts.jsonl"
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    for row in rows:
        row["completion"] = _inject(row["completion"], f"{EVIL} from-a-rollout ")
        row["env_name"] = "reverse-text\x1b]0;env\x07"
    rollouts.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


def _assert_clean(text: str, where: str) -> None:
    found = CONTROL.search(text)
    if found is not None:
        around = text[max(0, found.start() - 60) : found.end() + 20]
        pytest.fail(f"{where}: control character {found.group(0)!r} at {found.start()}: {around!r}")


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_no_control_sequence_reaches_status_md_json_or_the_terminal(poisoned, tmp_path):
    env = {**os.environ, "RLAGENT_HOME": str(tmp_path / "home-json"), "NO_COLOR": "1"}
    done = subprocess.run([*RLAGENT, "check", str(poisoned), "--offline", "--json"], capture_output=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    _assert_clean(done.stdout.decode(), "check --json stdout")
    report = json.loads(done.stdout)
    for text in _strings(report):
        _assert_clean(text, "a string of the JSON report")
    entry = report["status_entry"]
    assert "Samples from rollouts step 45" in entry and "from-a-rollout" in entry and "from-the-log" in entry
    assert "TITLE" not in entry and "evil.example" not in entry and "overwrite" in entry
    assert any("from-a-rollout" in s["completion"] for s in report["samples"])
    status = (poisoned / "STATUS.md").read_bytes().decode()
    _assert_clean(status, "STATUS.md")
    assert entry.strip() in status

    env["RLAGENT_HOME"] = str(tmp_path / "home-terminal")
    command = [*RLAGENT, "check", str(poisoned), "--offline", "--no-write"]
    shown = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr.decode()
    _assert_clean(shown.stdout.decode(), "check's terminal output")
    _assert_clean(shown.stderr.decode(), "check's stderr")
    assert "from-a-rollout" in shown.stdout.decode() and "from-the-log" in shown.stdout.decode()
