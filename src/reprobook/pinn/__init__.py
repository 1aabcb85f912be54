"""Physics-informed neural networks with two-layer ReLU^p networks, derivatives in closed form."""
