"""Set abstraction and disassembled set abstraction: costs, equivalences, the pyramid, training."""
import numpy as np
import pytest
import torch

from reprobook.bench.flops import count_flops
from reprobook.data.point_scenes import indoor_scene
from reprobook.models.point_set_abstraction import (AGGREGATORS, DisassembledSetAbstraction,
                                                    PointSegNet, SetAbstraction, aggregator_macs,
                                                    build_pyramid, collate, confusion, miou, predict,
                                                    train_segmenter)


def _inputs(n=300, m=60, k=8, c=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    xyz = torch.rand(n, 3, generator=g)
    centres = torch.randperm(n, generator=g)[:m]
    group = torch.randint(0, n, (m, k), generator=g)
    return torch.randn(n, c, generator=g), xyz, xyz[centres], group


@pytest.mark.parametrize("kind", AGGREGATORS)
def test_macs_formula_matches_torch_flop_counter(kind, one_thread):
    n, m, k, c_in, c_out = 300, 60, 8, 16, 32
    f, xyz, xyz_c, group = _inputs(n, m, k, c_in)
    net = PointSegNet(4, (c_out,), c_in, kind).enc[0]
    flops = count_flops(lambda: net(f, xyz, xyz_c, group, 0.1))
    if kind in ("dsa", "dsa-per-pair"):
        # torch's counter skips the in-place addmm_ of the spatial map's second layer
        flops += 2 * m * k * 8 * c_out
    assert flops == 2 * aggregator_macs(kind, n, m, k, c_in, c_out)


def test_dsa_is_cheaper_than_sa_at_equal_width():
    n, m, k, c = 4096, 1024, 16, 64
    assert aggregator_macs("dsa", n, m, k, c, c) < 0.3 * aggregator_macs("sa", n, m, k, c, c)
    assert aggregator_macs("dsa-per-pair", n, m, k, c, c) > aggregator_macs("sa", n, m, k, c, c) * 0.9


def test_dsa_without_spatial_map_ignores_positions_and_per_pair_equals_dsa_when_linear():
    f, xyz, xyz_c, group = _inputs()
    torch.manual_seed(0)
    ns = DisassembledSetAbstraction(16, 32, spatial=False)
    assert torch.allclose(ns(f, xyz, xyz_c, group, 0.1), ns(f, xyz * 3, xyz_c, group, 0.1))
    dsa = DisassembledSetAbstraction(16, 32)
    assert not torch.allclose(dsa(f, xyz, xyz_c, group, 0.1), dsa(f, xyz * 3, xyz_c, group, 0.1))
    # per-pair and disassembled differ only in where the output map runs (max does not commute)
    pp = DisassembledSetAbstraction(16, 32, per_pair=True)
    pp.load_state_dict(dsa.state_dict())
    a, b = dsa(f, xyz, xyz_c, group, 0.1), pp(f, xyz, xyz_c, group, 0.1)
    assert a.shape == b.shape == (60, 32)
    # the spatial bias fold: DSA equals the unfused sum h_j + s_mj computed literally
    rel = (xyz[group] - xyz_c[:, None]) / 0.1
    lit = torch.relu(dsa.channel(f)[group] + dsa.s2(torch.relu(dsa.s1(rel)))).amax(1)
    assert torch.allclose(a, torch.relu(dsa.out(lit)), atol=1e-5)


def test_sa_sees_relative_positions_only():
    f, xyz, xyz_c, group = _inputs()
    sa = SetAbstraction(16, 32)
    shift = torch.tensor([5.0, -2.0, 1.0])
    assert torch.allclose(sa(f, xyz, xyz_c, group, 0.1), sa(f, xyz + shift, xyz_c + shift, group, 0.1),
                          atol=1e-5)


@pytest.mark.parametrize("sampler,search", [("ls", "hash"), ("fps", "knn"), ("random", "hash")])
def test_pyramid_shapes_and_collate_offsets(sampler, search):
    rng = np.random.default_rng(0)
    clouds = [indoor_scene(300, rng)[0] for _ in range(2)]
    pyr = [build_pyramid(x, [0.4, 0.8], 8, sampler, search, rng=rng) for x in clouds]
    for p in pyr:
        n = len(p.xyz)
        for st in p.stages:
            assert st.group.min() >= 0 and st.group.max() < n
            assert st.up.shape == (n, 3) and st.up.min() >= 0 and st.up.max() < len(st.centres)
            assert np.allclose(st.up_w.sum(1), 1, atol=1e-5)
            n = len(st.centres)
    b = collate(pyr)
    n0 = len(pyr[0].xyz)
    m0 = len(pyr[0].stages[0].centres)
    assert b["stages"][0]["group"][m0:].min() >= n0      # the second cloud's neighbours are its own
    assert torch.equal(b["xyz"][1][:m0], b["xyz"][0][torch.from_numpy(pyr[0].stages[0].centres)])


def test_ls_and_fps_draw_equal_counts():
    x, _ = indoor_scene(400, np.random.default_rng(1))
    a = build_pyramid(x, [0.4], 8, "ls", "hash")
    b = build_pyramid(x, [0.4], 8, "fps", "knn")
    assert len(a.stages[0].centres) == len(b.stages[0].centres)


def test_training_learns_the_floor_and_miou(one_thread):
    rng = np.random.default_rng(2)
    scenes = [indoor_scene(256, rng) for _ in range(3)]
    pyr = [build_pyramid(x, [0.5, 1.0], 8) for x, _ in scenes]
    labels = [y for _, y in scenes]
    untrained = train_segmenter(pyr, labels, 6, widths=(16, 16), stem=16, steps=0, seed=0)
    net = train_segmenter(pyr, labels, 6, widths=(16, 16), stem=16, steps=60, batch=3, lr=0.01, seed=0)
    acc = lambda m: np.mean([np.mean(predict(m, p) == y) for p, y in zip(pyr, labels)])
    c = confusion(predict(net, pyr[0]), scenes[0][1], 6)
    assert c.sum() == 256
    assert acc(net) > 0.6 > acc(untrained)
    assert miou(np.eye(3, dtype=int) * 5) == 1.0


def test_bad_options_are_named():
    x, _ = indoor_scene(100, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown sampler"):
        build_pyramid(x, [0.5], 8, sampler="grid")
    with pytest.raises(ValueError, match="needs rng"):
        build_pyramid(x, [0.5], 8, sampler="random")
    with pytest.raises(ValueError, match="unknown aggregator"):
        PointSegNet(6, aggregator="pointconv")
