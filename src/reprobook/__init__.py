"""reprobook: an executable reproducibility book of NeurIPS 2024 papers.

The chapter-facing API: the claims ledger and its criteria, intervals, glue, seed and device.
The machinery that runs and builds the book lives in :mod:`reprobook.book`.
"""
from . import intervals
from .claims import Ledger, at_least, at_most, between, close_to, is_true
from .devices import select_device
from .glue import glue
from .seeding import rng, seed_everything

__all__ = ["Ledger", "at_least", "at_most", "between", "close_to", "is_true", "intervals", "glue",
           "select_device", "seed_everything", "rng"]
__version__ = "0.1.0"
