import numpy as np
import pytest

from reprobook.timeseries import loaders


def test_daphnet_shape_and_axes():
    s = loaders.daphnet()
    assert s.shape == (7040, 9)
    assert s.names[0] == "ankle_horiz_fwd" and s.names[-1] == "trunk_horiz_lateral"
    assert s.labels.shape == (7040,) and set(np.unique(s.labels)) <= {0, 1}
    # raw milli-g readings: vertical axes sit near +1 g
    assert 500 < s.values[:, 1].mean() < 1500


def test_daphnet_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="Daphnet"):
        loaders.daphnet(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("timestamp,a,b\n0,1,2\n")
    with pytest.raises(ValueError, match="not a Daphnet CSV"):
        loaders.daphnet(bad)


def test_daphnet_gap_filling(tmp_path):
    cols = ["timestamp", *loaders.DAPHNET_AXES, "is_anomaly"]
    rows = [",".join(["t"] + [str(i + k) for k in range(9)] + ["0"]) for i in range(3)]
    rows[1] = rows[1].replace(",2,", ",,", 1)    # one missing value in the middle row
    f = tmp_path / "d.csv"
    f.write_text(",".join(cols) + "\n" + "\n".join(rows) + "\n")
    s = loaders.daphnet(f)
    assert np.isfinite(s.values).all() and s.notes


@pytest.mark.parametrize("name,shape", [("co2", (2284, 1)), ("sunspots", (309, 1)),
                                        ("elnino", (732, 1)), ("macrodata", (203, 12))])
def test_statsmodels_series(name, shape):
    s = loaders.load(name)
    assert s.shape == shape and np.isfinite(s.values).all()


def test_elnino_is_month_ordered():
    s = loaders.elnino()
    # January of 1950 then February of 1950
    assert s.values[0, 0] == pytest.approx(23.11) and s.values[1, 0] == pytest.approx(24.20)


def test_unknown_name_and_bad_series():
    with pytest.raises(ValueError, match="unknown series 'ett'"):
        loaders.load("ett")
    with pytest.raises(ValueError, match=r"\[T, C\]"):
        loaders.Series("x", np.zeros(5), ["a"], "", "")
    with pytest.raises(ValueError, match="non-finite"):
        loaders.Series("x", np.full((2, 1), np.nan), ["a"], "", "")


def test_basic_motions():
    X, y = loaders.basic_motions("train")
    assert X.shape == (40, 6, 100) and set(y) == {0, 1, 2, 3}
    with pytest.raises(ValueError, match="split"):
        loaders.basic_motions("val")
