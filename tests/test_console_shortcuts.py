"""The framework console parsers' shortcuts say what the regexes they stand for say, on random lines
built from the fragments that matter to each (a search tried at every character is slow on a 3 KB
verl step line; each shortcut goes to where its literal is)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from rlagent.tools.adapters import common
from rlagent.tools.adapters.console import _calls_reward, _signal
from rlagent.tools.adapters.openrlhf import _GLOBAL, global_step_match
from rlagent.tools.frameworks import lines, trl, verl

# The regexes as they stood before the shortcuts (the long way).
SIGNAL = re.compile(
    r"rror|xception|File \"|Traceback|Root Cause|^\s*(?:time|host|rank|exitcode|error_file|traceback)\s*:|=====|[Kk]illed|OOM|"
    r"out of memory|low on memory|memory pressure|NCCL|nccl|[Ww]atchdog|failed|finished|Final validation|train_runtime|"
    r"Request error|Could not override|Overflow|loss scale|return code|Signal 9|Engine|collective_rpc|Dropping|"
    r"Server is not up|can't be reached|reward_func|compute_score"
)
REWARD_CALL = re.compile(r"\b(?:reward_func|compute_score|reward_fn)\(")
NP_WRAP = re.compile(r"^(?:np|numpy)\.\w+\((.*)\)$")


def parse_value_the_long_way(text: str) -> float | None:
    text = text.strip()
    while True:
        match = NP_WRAP.match(text)
        if not match:
            break
        text = match.group(1).strip()
    if text in {"np.True_": 1.0, "np.False_": 0.0, "True": 1.0, "False": 0.0}:
        return {"np.True_": 1.0, "np.False_": 0.0, "True": 1.0, "False": 0.0}[text]
    try:
        return float(text)
    except ValueError:
        return None


def clean_the_long_way(segment: str) -> tuple[str, str | None]:
    text = lines._ANSI.sub("", segment)
    actor = None
    match = lines._RAY_PREFIX.match(text)
    if match:
        actor = match.group("actor") or ""
        text = text[match.end() :]
    return lines._REPEATED.sub("", text).rstrip(), actor


def _texts(fragments: list[str]):
    return st.lists(st.sampled_from(fragments) | st.text(max_size=3), max_size=24).map("".join)


STEP_TEXTS = _texts(
    ["step:", "step:12", " - ", "12", ":", "/", "_", "x", "é", "٣", " ", "timing_s/step:3 - ", "global_step:4 - ", "\t", "-"]
)
GLOBAL_TEXTS = _texts(["Global step ", "Global step 7: ", "✨ ", "✨", "{'a': 1}", "{", "}", "7", ": ", " ", "x", "\u3000"])
SIGNAL_TEXTS = _texts(
    ["rror", "File \"", "killed", "Killed", "kIlled", "Watchdog", "OOM", "time", "host :", " rank:", "exitcode", "\u2003",
     "error_file", "traceback", "Traceback", ":", " ", "\t", "=====", "====", "Engine", "nccl", "NCCL", "finish"]
)  # fmt: skip
REWARD_TEXTS = _texts(["reward_func", "compute_score", "reward_fn", "(", "_", "x", "é", " ", "self.reward_fn("])
VALUE_TEXTS = _texts(
    ["np.float64(", "numpy.int64(", "np.", ")", "(", "0.5", "-1e-3", "nan", "inf", "True", "np.True_", " ", "_", "1_0"]
)
SEGMENT_TEXTS = _texts(
    ["(TaskRunner pid=42) ", "(pid=7, ip=10.0.0.1) ", "\x1b[2m", "\x1b[0m", " [repeated 7x across cluster]", "[repeated ", " ",
     "x", "step:1 - a:1"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(STEP_TEXTS)
def test_a_verl_step_is_found_where_the_regex_finds_it(text):
    long_way = verl._STEP.search(text)
    short = verl.step_match(text)
    assert (short is None) == (long_way is None)
    if long_way is not None:
        assert short.groups() == long_way.groups()


@settings(max_examples=400, deadline=None)
@given(VALUE_TEXTS)
def test_a_verl_value_is_read_as_before(text):
    got, want = verl.parse_value(text), parse_value_the_long_way(text)
    assert got == want or (got != got and want != want)  # NaN is NaN


@settings(max_examples=400, deadline=None)
@given(GLOBAL_TEXTS)
def test_an_openrlhf_global_step_is_found_where_the_regex_finds_it(text):
    long_way = _GLOBAL.search(text)
    short = global_step_match(text)
    assert (short is None) == (long_way is None)
    if long_way is not None:
        assert short.groups() == long_way.groups()


@settings(max_examples=400, deadline=None)
@given(SIGNAL_TEXTS)
def test_signal_lines_are_those_the_regex_finds(text):
    assert _signal(text) == (SIGNAL.search(text) is not None)


@settings(max_examples=300, deadline=None)
@given(REWARD_TEXTS)
def test_a_reward_call_is_found_where_the_regex_finds_it(text):
    assert bool(_calls_reward(text)) == (REWARD_CALL.search(text) is not None)


@settings(max_examples=300, deadline=None)
@given(SEGMENT_TEXTS)
def test_a_segment_is_cleaned_as_before(text):
    assert lines.clean_line(text) == clean_the_long_way(text)


def test_the_cases_the_shortcuts_turn_on():
    assert verl.step_match("step:3 - a:1").groups() == ("3", "a:1")
    assert verl.step_match("timing_s/step:3 - a:1") is None and verl.step_match("xstep:3 - a:1") is None
    assert verl.step_match("٣step:3 - a:1") is None  # an Arabic-Indic digit is a word character to the regex too
    assert verl.step_match("step:x - a step:4 - b:2").groups() == ("4", "b:2")
    assert global_step_match("✨ Global step 9: {'a': 1}").groups() == ("9", "{'a': 1}")
    assert global_step_match("Global step x Global step 2: {'b': 2}").groups() == ("2", "{'b': 2}")
    assert _signal("  exitcode  : 1") and _signal("time: x") and not _signal("x time: y")
    assert _calls_reward("self.reward_fn(data)") and not _calls_reward("my_reward_fn(x)")
    assert verl.parse_value(" np.float64(0.5) ") == 0.5 and verl.parse_value("1_0") == 10.0


_ITEM = re.compile(r"'([^'\\]*)': ('[^'\\]*'|[^,{}\[\]()']+)(?=, '|\}$)")
_FLOATISH = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "True": 1.0, "False": 0.0}


def fast_dict_the_long_way(text: str) -> dict | None:
    body = text.strip()
    if not (body.startswith("{'") and body.endswith("}")) or not common._WHOLE.fullmatch(body):
        return None
    out: dict = {}
    for key, raw in _ITEM.findall(body):
        raw = raw.strip()
        if raw.startswith("'"):
            raw = raw[1:-1]
        if raw == "None":
            out[key] = None
            continue
        try:
            out[key] = _FLOATISH[raw] if raw in _FLOATISH else float(raw)
        except ValueError:
            continue
    return out


RAW_VALUES = st.sampled_from(
    ["0.5", " 0.5", "-1e-3 ", "nan", "inf", "-inf", "None", "True", "False", "'0.001234'", "'nan'", "'x'", "1_0", "abc", "7"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["loss", "eval_loss", "grad_norm", "a b"]), RAW_VALUES), min_size=1, max_size=8))
def test_a_dict_line_is_read_as_before(items):
    text = "{" + ", ".join(f"'{key}': {raw}" for key, raw in items) + "}"
    got, want = common.fast_dict(text), fast_dict_the_long_way(text)
    assert (got is None) == (want is None)
    if want is not None:
        assert got.keys() == want.keys()
        assert all(got[k] == want[k] or (got[k] != got[k] and want[k] != want[k]) for k in want)


# Keys and values as hostile as a console can make them, for the JSON reading of all-number lines.
ODD_KEYS = st.one_of(
    st.sampled_from(["loss", "rewards/accuracy_reward/mean", "a b", ""]),
    st.text(alphabet=st.sampled_from(list("ab1_/: ,'\"\\\t\x01é\udc80")), max_size=8),
)
ODD_WORDS = ["nan", "-inf", "None", "True", "true", "false", "null", "1e400", "-0", "01", "1.", "+1", "1_0", "1 2"]
ODD_SPACED = [" 0.5", "0.5 ", "\t7", "\x0b7", "'0.5'", "'x'", "'a, '", "': 1'", '"2"', "[1]", "{}", "'\t'"]
ODD_QUOTED = ["'None'", "'nan'", "'-inf'", "'True'", "' 1_0'", "'1e400'", "' None'", "''", "'\x01'", "'é'"]
ODD_VALUES = st.one_of(
    st.floats().map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from([*ODD_WORDS, *ODD_SPACED, *ODD_QUOTED]),
)
ODD_ITEMS = st.tuples(
    ODD_KEYS, st.sampled_from(["': "] * 6 + ["':", "' : "]), ODD_VALUES, st.sampled_from([", "] * 6 + [",", " , "])
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(ODD_ITEMS, min_size=1, max_size=6))
def test_a_dict_line_read_as_json_is_read_as_the_regex_reads_it(items):
    text = "{" + "".join(f"'{key}{colon}{raw}{sep}" for key, colon, raw, sep in items[:-1])
    key, colon, raw, _ = items[-1]
    text += f"'{key}{colon}{raw}}}"
    got, want = common.fast_dict(text), fast_dict_the_long_way(text)
    assert (got is None) == (want is None)
    if want is not None:
        assert list(got) == list(want)
        assert [type(value) for value in got.values()] == [type(value) for value in want.values()]
        assert all(got[k] == want[k] or (got[k] != got[k] and want[k] != want[k]) for k in want)


def test_the_json_reading_takes_the_usual_lines_and_leaves_the_rest():
    line = "{'loss': -0.0073, 'grad_norm': 0.19385972889496392, 'learning_rate': 1e-06, 'num_tokens': 14980, 'epoch': 0.0}"
    want = {"loss": -0.0073, "grad_norm": 0.19385972889496392, "learning_rate": 1e-06, "num_tokens": 14980.0, "epoch": 0.0}
    assert common._read_as_json(line) == want
    assert common._read_as_json("{'loss': '0.001234', 'grad_norm': '0.2841', 'kl': 'None', 'x': 'n/a'}") == {
        "loss": 0.001234,
        "grad_norm": 0.2841,
        "kl": None,
    }  # transformers >= 5 writes `.4g` strings
    for other in ["{'a': nan}", "{'a\"': 1}", "{'a': True}", "{'a': 1, 'a': 'x'}", "{'a': ': b'}"]:
        assert common._read_as_json(other) is None, other
    for text in ["{'a': 1, 'b': 2, 'a': 3}", "{': b': 1}", "{'a': 1, 'a': 'x'}", """{'x": 1, "y': 2}""", "{'a': true}"]:
        assert common.fast_dict(text) == fast_dict_the_long_way(text), text
    assert common.fast_dict("{'a': 1, 'a': 'x'}") == {"a": 1.0}  # the regex's reading: the first value stays
    assert common.fast_dict("""{'x": 1, "y': 2}""") == {'x": 1, "y': 2.0}  # one key, not two


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["loss", "eval_loss", "xeval_", "eval", "train_runtime", "lr", "epoch", "Eval_x"]), max_size=5))
def test_a_trl_row_is_classified_as_before(keys):
    keys_set = set(keys)
    if keys_set & {"train_runtime", "train_loss", "train_samples_per_second"}:
        want = "summary"
    elif any(key.startswith("eval_") for key in keys_set):
        want = "val"
    elif keys_set & {"loss", "learning_rate", "grad_norm", "lr", "objective/kl"}:
        want = "train"
    else:
        want = None
    assert trl.classify(keys) == want
