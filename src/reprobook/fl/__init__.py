"""Federated learning: personalized Bayesian FL with functional-space priors (FedBNN) and baselines."""
