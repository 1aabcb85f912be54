"""The attention benchmark runs and returns positive ratios (no timing is asserted)."""

from reprobook.bench.attention import cpu_ratios, main


def test_cpu_ratios_shape_and_sign():
    ratios = cpu_ratios([16, 40], H=1, D=8, block=16, repeats=1)
    assert list(ratios) == [16, 40]
    assert all(r > 0 for pair in ratios.values() for r in pair)


def test_main_prints_a_table(capsys):
    ratios = main(["--lengths", "24", "--repeats", "1"])
    assert list(ratios) == [24]
    assert "tiled/sdpa" in capsys.readouterr().out
