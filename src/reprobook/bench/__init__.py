"""Benchmarks: each module has ``main(argv)`` printing ratios measured in one run."""
