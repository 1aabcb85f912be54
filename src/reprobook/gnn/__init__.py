"""Small graph neural networks in pure PyTorch (no graph library needed)."""
