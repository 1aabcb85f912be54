"""Hardware-aware neural architecture search: simulated devices with architecture-dependent noise
(:mod:`~reprobook.nas.hw_devices`), latency measured on the host CPU
(:mod:`~reprobook.nas.profiling`), multi-objective search over a sub-network space with pymoo's
NSGA-II against random search, scored by hypervolume (:mod:`~reprobook.nas.search`)."""
