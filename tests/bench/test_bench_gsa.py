"""The GSA benchmark runs and returns positive ratios (no timing is asserted)."""

from reprobook.bench.gsa import cpu_ratios


def test_cpu_ratios_shape_and_sign():
    ratios = cpu_ratios([16, 40], B=1, H=1, K=8, V=8, M=4, chunk=16, repeats=1)
    assert list(ratios) == [16, 40]
    assert all(r > 0 for pair in ratios.values() for r in pair)
