"""pydict.py: printed Python dicts parsed without eval."""

from __future__ import annotations

import math

from rlagent.tools.frameworks.pydict import parse_py_dict


def test_bare_tokens_outside_strings_only():
    text = "{'a': nan, 'b': -inf, 'c': inf, 'd': -nan, 's': 'nan, inf', 'q': \"it's -inf\", 'e': 'a\\'nan'}"
    value = parse_py_dict(text)
    assert math.isnan(value["a"]) and math.isnan(value["d"])
    assert value["b"] == -math.inf and value["c"] == math.inf
    assert value["s"] == "nan, inf" and value["q"] == "it's -inf" and value["e"] == "a'nan"


def test_identifiers_containing_nan_are_untouched():
    assert parse_py_dict("{'nanoseconds': 1, 'info': 2, 'x': 1e-06}") == {"nanoseconds": 1, "info": 2, "x": 1e-06}


def test_not_a_dict_or_unsafe():
    for text in ("", "{", "[1, 2]", "{'a': 1} trailing", "{'a': __import__('os').getcwd()}", "{'a': (lambda: 1)}", "{" * 5000):
        assert parse_py_dict(text) is None
    assert parse_py_dict("{'a': [1, {'b': nan}]}")["a"][1]["b"] != 0
