"""Image tools for the vision part: degradations and attacks with known models, frequency masks,
quality metrics, boxes and matching. Small networks in plain torch (``torchvision`` cannot load
beside the CPU torch)."""
