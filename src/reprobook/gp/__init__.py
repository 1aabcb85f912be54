"""Gaussian-process building blocks shared by the GP chapters (kernels, exact GP, CaGP, baselines)."""
