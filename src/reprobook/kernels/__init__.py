"""Attention and sequence operators: a reference, a fast torch form and a Triton kernel each."""
from .neighborhood import na1d, na2d
from .attention import flash_attn_func
from .fp8 import fp8_attention, hadamard, quantize_e4m3
