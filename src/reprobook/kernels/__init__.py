"""Attention and sequence operators: a reference, a fast torch form and a Triton kernel each."""
from .gla import chunk_gla, fused_recurrent_gla
from .gsa import chunk_gsa, fused_recurrent_gsa
from .delta_rule import chunk_delta_rule, fused_recurrent_delta_rule
from .neighborhood import na1d, na2d
from .attention import flash_attn_func
from .fp8 import fp8_attention, hadamard, quantize_e4m3
