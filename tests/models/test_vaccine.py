import copy

import pytest
import torch

from reprobook.models.lora import add_lora, lora_parameters
from reprobook.models.sft import answer_loss, pack_pairs
from reprobook.models.tiny_transformer import TinyTransformer
from reprobook.models.vaccine import (adversarial_perturbation, attention_modules, embedding_drift,
                                      hidden_gradients, perturbed, random_perturbation,
                                      train_pairs, vaccine_step)


def _model(layers=1, seed=0):
    torch.manual_seed(seed)
    return TinyTransformer(12, d_model=8, n_layers=layers, n_heads=2, max_len=8)


def _batch():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 12, (3, 6), generator=g)
    y = torch.randint(0, 12, (3, 6), generator=g)
    return x, y, torch.ones(3, 6)


def test_hooks_add_exactly_rho_g_over_norm_on_a_one_layer_model():
    m = _model(1)
    x, y, mask = _batch()
    mods = attention_modules(m)
    loss, grads = hidden_gradients(mods, lambda: answer_loss(m(x), y, mask))
    # the manual computation: differentiate the loss through the attention output directly
    blk = m.blocks[0]
    h0 = m.embed(x) + m.pos_embed(torch.arange(6))
    a = blk.attn(blk.norm1(h0)).detach().requires_grad_(True)
    h1 = h0 + a
    out = m.head(m.norm(h1 + blk.ffn(blk.norm2(h1))))
    manual = torch.autograd.grad(answer_loss(out, y, mask), a)[0]
    torch.testing.assert_close(grads[0], manual)
    rho = 0.7
    eps = adversarial_perturbation(grads, rho)
    torch.testing.assert_close(eps[0], rho * manual / manual.norm())
    added = {}
    with perturbed(mods, eps):       # a hook registered after the perturbation sees its result
        h = blk.attn.register_forward_hook(lambda _m, _i, o: added.__setitem__("o", o))
        m(x)
        h.remove()
    with torch.no_grad():
        clean = blk.attn(blk.norm1(h0))
    torch.testing.assert_close(added["o"] - clean, eps[0], atol=1e-6, rtol=0)


def test_global_norm_is_rho_across_layers_and_removal_is_bit_exact():
    m = _model(3)
    x, y, mask = _batch()
    mods = attention_modules(m)
    before = m(x).detach().clone()
    _, grads = hidden_gradients(mods, lambda: answer_loss(m(x), y, mask))
    for rho in (0.5, 2.0):
        eps = adversarial_perturbation(grads, rho)
        total = torch.sqrt(sum(e.pow(2).sum() for e in eps))
        assert abs(float(total) - rho) < 1e-5
        r = random_perturbation(grads, rho, torch.Generator().manual_seed(0))
        assert abs(float(torch.sqrt(sum(e.pow(2).sum() for e in r))) - rho) < 1e-5
        with perturbed(mods, eps):
            assert not torch.equal(m(x), before)
    assert torch.equal(m(x), before)        # hooks gone: bit-exact
    # the worst case beats a random direction of the same size, to first order
    eps = adversarial_perturbation(grads, 1e-3)
    rnd = random_perturbation(grads, 1e-3, torch.Generator().manual_seed(3))
    with torch.no_grad():
        base = answer_loss(m(x), y, mask)
        with perturbed(mods, eps):
            adv = answer_loss(m(x), y, mask)
        with perturbed(mods, rnd):
            ran = answer_loss(m(x), y, mask)
    assert adv - base > abs(ran - base)


def test_rho_zero_vaccine_is_sft_bit_for_bit_and_positive_rho_differs():
    x, y, mask = _batch()
    runs = {}
    for name, rho, mode in [("sft", 0.0, "none"), ("rho0", 0.0, "adversarial"),
                            ("vac", 0.5, "adversarial")]:
        m = _model(2)
        add_lora(m, ("attn", "ffn"), r=2, alpha=4)
        opt = torch.optim.Adam(lora_parameters(m), lr=1e-2)
        for _ in range(3):
            vaccine_step(lambda: answer_loss(m(x), y, mask), opt, attention_modules(m), rho, mode)
        runs[name] = m(x).detach()
    assert torch.equal(runs["sft"], runs["rho0"])
    assert not torch.equal(runs["sft"], runs["vac"])


def test_second_pass_trains_on_the_perturbed_loss():
    # the step's gradient is the gradient of the loss with the perturbation added
    x, y, mask = _batch()
    m = _model(2)
    ref = copy.deepcopy(m)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    out = vaccine_step(lambda: answer_loss(m(x), y, mask), opt, attention_modules(m), 0.5)
    mods = attention_modules(ref)
    _, g = hidden_gradients(mods, lambda: answer_loss(ref(x), y, mask))
    with perturbed(mods, adversarial_perturbation(g, 0.5)):
        loss = answer_loss(ref(x), y, mask)
    loss.backward()
    assert out["perturbed_loss"] > out["loss"]
    assert abs(out["perturbed_loss"] - float(loss.detach())) < 1e-6
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach() - q.grad, atol=1e-6, rtol=0)


def test_train_pairs_drift_and_errors():
    pairs = pack_pairs([[4, 5], [6, 7, 8]], [[9], [10, 11]], eos_id=1, pad_id=0)
    m = _model(2)
    ref = copy.deepcopy(m)
    assert embedding_drift(m, ref, pairs) == 0.0
    losses = train_pairs(m, pairs, params=list(m.parameters()), steps=5, batch_size=2, lr=1e-2,
                         generator=torch.Generator().manual_seed(0), rho=0.1, mode="random")
    assert len(losses) == 5 and embedding_drift(m, ref, pairs) > 0
    with pytest.raises(ValueError, match="mode"):
        vaccine_step(lambda: None, torch.optim.SGD(m.parameters(), lr=0.1), [], 1.0, "sam")
    with pytest.raises(ValueError, match="rho"):
        adversarial_perturbation([torch.ones(2)], -1.0)
    with pytest.raises(ValueError, match="another batch"):
        with perturbed(attention_modules(m), [torch.zeros(1, 1, 8)] * 2):
            m(pairs.inputs)
