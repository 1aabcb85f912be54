"""Attention and sequence operators: a reference, a fast torch form and a Triton kernel each."""
from .neighborhood import na1d, na2d
