import json

import nbformat
import pytest

from reprobook.book.profiles import ParameterError, check_value, parse_override, read_parameters, resolve

DEFAULTS = {"seed": 0, "device": "auto", "profile": "smoke", "n": 3, "rate": 0.5, "flag": False,
            "sizes": [1, 2], "name": "a", "maybe": None}


def test_resolve_profile_and_overrides():
    out = resolve(DEFAULTS, {"cpu": {"n": 100}}, "cpu", {"rate": 1})
    assert out == {"n": 100, "rate": 1.0, "profile": "cpu"}
    assert resolve(DEFAULTS, {}, "smoke") == {"profile": "smoke"}


@pytest.mark.parametrize("profiles,profile,over,match", [
    ({}, "cpu", {}, "unknown profile 'cpu'"),
    ({}, "smoke", {"n_trails": 3}, "unknown parameter 'n_trails'"),
    ({"cpu": {"bogus": 1}}, "cpu", {}, "unknown parameter 'bogus'"),
    ({}, "smoke", {"n": 2.5}, "parameter 'n' must be int"),
    ({}, "smoke", {"flag": 1}, "parameter 'flag' must be bool"),
    ({}, "smoke", {"n": True}, "parameter 'n' must be int"),
    ({}, "smoke", {"sizes": 3}, "parameter 'sizes' must be list"),
    ({}, "smoke", {"profile": "cpu"}, "--profile"),
])
def test_errors_name_the_problem(profiles, profile, over, match):
    with pytest.raises(ParameterError, match=match):
        resolve(DEFAULTS, profiles, profile, over)


def test_check_value_none_default_accepts_anything():
    assert check_value("maybe", 3, None) == 3


def test_parse_override():
    assert parse_override("n=5") == ("n", 5)
    assert parse_override("sizes=[1, 2]") == ("sizes", [1, 2])
    assert parse_override("name=hello") == ("name", "hello")
    assert parse_override("flag=true") == ("flag", True)
    with pytest.raises(ParameterError, match="name=value"):
        parse_override("n5")


def _nb(tmp_path, src):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": ["parameters"]})]
    p = tmp_path / "x.ipynb"
    nbformat.write(nb, p)
    return p


def test_read_parameters(tmp_path):
    p = _nb(tmp_path, 'seed = 0  # s\ndevice = "auto"\nprofile = "smoke"\nn: int = 3\nxs = [1, 2]\n')
    assert read_parameters(p) == {"seed": 0, "device": "auto", "profile": "smoke", "n": 3,
                                  "xs": [1, 2]}


@pytest.mark.parametrize("src,match", [
    ('seed = 0\ndevice = "auto"\nprofile = "smoke"\nn = f(3)\n', "not a literal"),
    ('seed = 0\ndevice = "auto"\nprofile = "smoke"\nprint(1)\n', "not an assignment"),
    ('device = "auto"\nprofile = "smoke"\n', "lacks 'seed'"),
])
def test_read_parameters_errors(tmp_path, src, match):
    with pytest.raises(ParameterError, match=match):
        read_parameters(_nb(tmp_path, src))


def test_no_parameters_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    p = tmp_path / "y.ipynb"
    p.write_text(json.dumps(nb))
    with pytest.raises(ParameterError, match="exactly one cell tagged 'parameters'"):
        read_parameters(p)
