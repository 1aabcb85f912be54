"""reprobook: an executable reproducibility book of NeurIPS 2024 papers.

The chapter-facing API: seed and device, and the claims ledger.
"""
from .claims import Ledger, at_least, at_most, between, close_to, is_true
from .devices import select_device
from .seeding import rng, seed_everything

__all__ = ["Ledger", "at_least", "at_most", "between", "close_to", "is_true", "select_device",
           "seed_everything", "rng"]
__version__ = "0.1.0"
