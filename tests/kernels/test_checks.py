"""The shared Triton-target check: a clear error naming the argument, not a Triton traceback."""
import pytest
import torch

from reprobook.kernels._checks import check_triton_target, triton_interpreting


def test_interpreting_follows_the_environment(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_interpreting()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not triton_interpreting()


def test_cpu_tensor_without_interpreter_is_refused(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="needs query on a CUDA device"):
        check_triton_target("query", torch.zeros(2))


def test_bfloat16_under_interpreter_is_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    check_triton_target("q", torch.zeros(2, dtype=torch.float16))
    with pytest.raises(TypeError, match="q has dtype bfloat16"):
        check_triton_target("q", torch.zeros(2, dtype=torch.bfloat16))


@pytest.mark.parametrize("call", ["gla", "gsa", "delta", "attn", "na"])
def test_public_kernels_use_it(monkeypatch, call):
    import importlib

    from reprobook.kernels import chunk_delta_rule, chunk_gla, chunk_gsa, flash_attn_func, na1d
    # Triton decides at a kernel's definition whether it is interpreted: import the kernel modules
    # under the session's setting before hiding the variable from the check
    for mod in ("_attention_triton", "_neighborhood_triton", "_delta_rule_triton", "_gla_triton"):
        importlib.import_module(f"reprobook.kernels.{mod}")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    x = torch.zeros(1, 16, 1, 16)
    with pytest.raises(ValueError, match="on a CUDA device"):
        if call == "gla":
            chunk_gla(x, x, x, x, impl="triton")
        elif call == "gsa":
            chunk_gsa(x, x, x, torch.zeros(1, 16, 1, 4), torch.zeros(1, 16, 1, 4), impl="triton")
        elif call == "delta":
            chunk_delta_rule(x, x, x, torch.zeros(1, 16, 1), impl="triton")
        elif call == "attn":
            flash_attn_func(x, x, x, impl="triton")
        else:
            na1d(x, x, x, kernel_size=3, impl="triton")
