"""`reprobook bench kernels` runs the benchmarks of reprobook.bench and skips its measuring tools."""
from reprobook.book.cli import benchmark_names


def test_suite_is_the_modules_with_a_main():
    names = benchmark_names()
    assert {"attention", "delta_rule", "gsa", "neighborhood"} <= set(names)
    # tools that chapters import, not benchmarks: running them as one crashed the suite
    assert not {"flops", "autograd_memory"} & set(names)
    assert not any(n.startswith("_") for n in names)
