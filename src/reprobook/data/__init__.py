"""Synthetic task generators and dataset loaders."""
