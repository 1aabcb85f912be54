r"""Small diffusion models: noise schedules, exact mixture scores, a denoiser, denoising score
matching, probability-flow samplers and one-step score distillation.

Each module does one thing:

* :mod:`.schedules` -- VE and VP schedules (:math:`x_t=\alpha_t x_0+\sigma_t\varepsilon`) with their
  derivatives, and the EDM (Karras) noise-level grid;
* :mod:`.gmm_score` -- exact log-densities and scores of a Gaussian mixture (and of a diagonal
  Gaussian) diffused by the VE process;
* :mod:`.denoiser` -- an EDM-preconditioned MLP denoiser with a log-:math:`\sigma` Fourier embedding;
* :mod:`.train` -- denoising score matching;
* :mod:`.sampling` -- Euler (DDIM) and Heun probability-flow ODE samplers;
* :mod:`.distill` -- one-step generator distillation: SIM, the squared-distance (SiD-type) and the
  KL (Diff-Instruct) generator losses, with the online fake-score network.
"""
