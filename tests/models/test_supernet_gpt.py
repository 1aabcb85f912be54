import numpy as np
import pytest
import torch

from reprobook.models.supernet_gpt import Arch, GPTSpace, SuperGPT

SPACE = GPTSpace(embed=(8, 16), layers=(1, 2), heads=(1, 2), ratios=(2, 4), head_dim=4,
                 vocab_size=11, seq_len=6)


def test_extracted_subnetwork_equals_the_supernet_slice():
    torch.manual_seed(0)
    m = SuperGPT(SPACE).double()
    x = torch.randint(0, 11, (3, 6))
    rng = np.random.default_rng(0)
    for arch in [SPACE.smallest(), SPACE.largest()] + [SPACE.sample(rng) for _ in range(4)]:
        sub = m.extract(arch)
        assert torch.allclose(sub(x), m(x, arch), atol=1e-12)
        assert sum(p.numel() for p in sub.parameters()) == SPACE.params(arch)


def test_subnetworks_differ_and_only_their_slice_gets_gradients():
    torch.manual_seed(0)
    m = SuperGPT(SPACE)
    x = torch.randint(0, 11, (2, 6))
    small = Arch(8, (1,), (2,))
    assert not torch.allclose(m(x, small)[..., :3], m(x)[..., :3])
    m(x, small).sum().backward()
    assert m.blocks[1].q.grad is None                     # layer 2 unused
    g = m.blocks[0].fc1_w.grad
    assert g[16:].abs().sum() == 0 and g[:16, :8].abs().sum() > 0
    assert g[:, 8:].abs().sum() == 0


def test_sandwich_loss_trains_the_largest_and_smallest():
    torch.manual_seed(0)
    m = SuperGPT(SPACE)
    x, y = torch.randint(0, 11, (4, 6)), torch.randint(0, 11, (4, 6))
    loss, logs = m.sandwich_loss(x, y, np.random.default_rng(0), n_random=1)
    loss.backward()
    assert np.isfinite(float(loss.detach())) and set(logs) == {"ce_largest", "ce_smallest"}
    assert m.blocks[1].q.grad.abs().sum() > 0


def test_flops_grow_with_every_dimension_and_features_shape():
    a = Arch(8, (1,), (2,))
    for b in [Arch(16, (1,), (2,)), Arch(8, (2,), (2,)), Arch(8, (1,), (4,)), Arch(8, (1, 1), (2, 2))]:
        assert SPACE.flops(b) > SPACE.flops(a) and SPACE.params(b) > SPACE.params(a)
    X = SPACE.features([a, SPACE.largest()])
    assert X.shape == (2, 2 + 2 * 2 + 2)
    assert X[0, 3] == 0 and X[0, 5] == 0                   # padding beyond l


def test_genome_decodes_to_valid_architectures():
    rng = np.random.default_rng(1)
    hi = SPACE.genome_bounds()
    for _ in range(20):
        a = SPACE.decode(rng.integers(0, hi + 1))
        assert SPACE.check(a) is a
    assert SPACE.decode(hi) == SPACE.largest()
    assert SPACE.decode(np.zeros_like(hi)) == SPACE.smallest()


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="not in the space"):
        SPACE.check(Arch(12, (1,), (2,)))
    with pytest.raises(ValueError, match="same length"):
        Arch(8, (1, 2), (2,))
    with pytest.raises(ValueError, match="genes"):
        SPACE.decode([0, 1])
    with pytest.raises(ValueError, match="exceeds seq_len"):
        SuperGPT(SPACE)(torch.zeros(1, 7, dtype=torch.int64))
    with pytest.raises(ValueError, match="distinct positive"):
        GPTSpace(embed=(8, 8))
