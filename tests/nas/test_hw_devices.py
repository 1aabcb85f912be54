import numpy as np
import pytest

from reprobook.models.supernet_gpt import Arch, GPTSpace
from reprobook.nas.hw_devices import measure, noise_level, noise_sd, simulated_devices, true_value

SPACE = GPTSpace()


def test_devices_are_seeded_and_of_both_kinds():
    d = simulated_devices(13, seed=0)
    assert len(d) == 13 and {x.kind for x in d} == {"cpu-like", "gpu-like"}
    assert d == simulated_devices(13, seed=0) and d != simulated_devices(13, seed=1)
    with pytest.raises(ValueError, match="positive int"):
        simulated_devices(0)


def test_noise_depends_on_the_architecture_and_matches_its_sd():
    quiet, noisy = Arch(32, (2, 2), (2, 2)), Arch(32, (2, 4, 8, 2), (2, 2, 2, 2))
    s = noise_level(SPACE, [quiet, noisy])
    assert s[0] == pytest.approx(0.07) and s[1] == pytest.approx(0.17)
    dev = simulated_devices(1)[0]
    for metric in ("latency", "energy"):
        y = measure(dev, SPACE, [quiet, noisy], 20000, np.random.default_rng(0), metric)
        assert np.allclose(y.std(1), noise_sd(dev, SPACE, [quiet, noisy], metric), rtol=0.05)
        assert np.all(true_value(dev, SPACE, [quiet, noisy], metric) > 0)
    with pytest.raises(ValueError, match="metric"):
        noise_level(SPACE, [quiet], "memory")
    with pytest.raises(ValueError, match="repeats"):
        measure(dev, SPACE, [quiet], 0, np.random.default_rng(0))
