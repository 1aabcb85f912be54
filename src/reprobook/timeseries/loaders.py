"""Real time series that ship inside installed packages (no network).

Every loader returns a :class:`Series`: ``values`` is a float64 array ``[T, C]`` (time first,
channels second), ``names`` the channel names, ``freq`` a plain-words sampling rate, ``source`` where
the numbers come from. Missing values are filled by linear interpolation in time (and said so in
``notes``), so a series is ready for windowing.

=============  =========================================================================  ==========
name           what                                                                       shape
=============  =========================================================================  ==========
``daphnet``    Daphnet freezing-of-gait, recording S06R02E0: three tri-axial              7040 x 9
               accelerometers (ankle, thigh, trunk) at 64 Hz; ``labels`` marks freezing
``co2``        Mauna Loa CO2, weekly, 1958-2001 (ppm)                                     2284 x 1
``sunspots``   yearly mean sunspot numbers, 1700-2008                                     309 x 1
``elnino``     monthly sea-surface temperature, 1950-2010, flattened to one series        732 x 1
``macrodata``  US quarterly macro-economic series, 1959-2009 (12 channels)                203 x 12
=============  =========================================================================  ==========

:func:`basic_motions` is a classification set (panel ``[n, C, T]``), so it has its own function.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Series", "load", "NAMES", "daphnet", "basic_motions", "aeon_data_dir"]

DAPHNET_AXES = ("ankle_horiz_fwd", "ankle_vert", "ankle_horiz_lateral",
                "leg_horiz_fwd", "leg_vert", "leg_horiz_lateral",
                "trunk_horiz_fwd", "trunk_vert", "trunk_horiz_lateral")


@dataclass
class Series:
    """A multivariate series ``values [T, C]`` with its channel names and provenance."""
    name: str
    values: np.ndarray
    names: list[str]
    freq: str
    source: str
    labels: np.ndarray | None = None          # per-time-step labels where the set has them
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        v = np.asarray(self.values, dtype=np.float64)
        if v.ndim != 2:
            raise ValueError(f"Series.values must be [T, C], got shape {v.shape}")
        if len(self.names) != v.shape[1]:
            raise ValueError(f"{len(self.names)} channel names for {v.shape[1]} channels")
        if not np.isfinite(v).all():
            raise ValueError(f"series {self.name!r} has non-finite values")
        self.values = v

    @property
    def shape(self):
        return self.values.shape


def aeon_data_dir() -> Path:
    """The folder of datasets bundled with aeon (``aeon/datasets/data``)."""
    import importlib.util

    # located without importing aeon, whose import takes seconds
    spec = importlib.util.find_spec("aeon")
    if spec is None or spec.origin is None:
        raise ImportError("the bundled aeon datasets need the package `aeon` (pip install aeon)")
    return Path(spec.origin).parent / "datasets" / "data"


def _fill_gaps(v: np.ndarray) -> tuple[np.ndarray, int]:
    """Linear interpolation over NaNs along time, per channel (ends: nearest value)."""
    v = np.array(v, dtype=np.float64)
    n_missing = int(np.isnan(v).sum())
    t = np.arange(v.shape[0])
    for c in range(v.shape[1]):
        bad = np.isnan(v[:, c])
        if bad.all():
            raise ValueError(f"channel {c} is entirely missing")
        if bad.any():
            v[bad, c] = np.interp(t[bad], t[~bad], v[~bad, c])
    return v, n_missing


def daphnet(path: str | Path | None = None) -> Series:
    """Daphnet freezing-of-gait recording S06R02E0 as bundled with aeon (anomaly-detection copy).

    Nine accelerometer axes (milli-g) at 64 Hz; ``labels`` is 1 where the annotators marked freezing
    of gait (aeon's ``is_anomaly`` column). ``path`` overrides the CSV's location (for tests).
    """
    path = Path(path) if path is not None else aeon_data_dir() / "Daphnet_S06R02E0" / "S06R02E0.csv"
    if not path.exists():
        raise FileNotFoundError(f"Daphnet CSV not found at {path}; it ships with aeon >= 1.0 "
                                "(aeon/datasets/data/Daphnet_S06R02E0/S06R02E0.csv)")
    with open(path) as f:
        header = f.readline().strip().split(",")
    missing = [a for a in DAPHNET_AXES if a not in header]
    if missing or "is_anomaly" not in header:
        raise ValueError(f"{path} is not a Daphnet CSV: columns {header}, missing {missing or ['is_anomaly']}")
    import pandas as pd

    raw = pd.read_csv(path, usecols=[*DAPHNET_AXES, "is_anomaly"])[[*DAPHNET_AXES, "is_anomaly"]]
    raw = raw.to_numpy(dtype=np.float64)
    values, n_missing = _fill_gaps(raw[:, :-1])
    notes = [f"{n_missing} missing values interpolated"] if n_missing else []
    return Series("daphnet", values, list(DAPHNET_AXES), "64 Hz",
                  "Daphnet freezing-of-gait data set (Bachlin et al. 2010), recording S06R02E0, "
                  "bundled with aeon", labels=raw[:, -1].astype(np.int64), notes=notes)


def _statsmodels(name: str):
    try:
        import statsmodels.api as sm
    except ImportError as e:  # pragma: no cover
        raise ImportError(f"the series {name!r} needs the package `statsmodels`") from e
    return getattr(sm.datasets, name).load_pandas().data


def co2() -> Series:
    """Weekly atmospheric CO2 at Mauna Loa (ppm), 1958-2001; gaps interpolated."""
    d = _statsmodels("co2")
    v, n = _fill_gaps(d[["co2"]].to_numpy())
    return Series("co2", v, ["co2"], "weekly", "statsmodels.datasets.co2 (Mauna Loa, Scripps)",
                  notes=[f"{n} missing weeks interpolated"] if n else [])


def sunspots() -> Series:
    """Yearly mean sunspot numbers, 1700-2008."""
    d = _statsmodels("sunspots")
    return Series("sunspots", d[["SUNACTIVITY"]].to_numpy(), ["sunactivity"], "yearly",
                  "statsmodels.datasets.sunspots")


def elnino() -> Series:
    """Monthly sea-surface temperature (El Nino region), 1950-2010, as one monthly series."""
    d = _statsmodels("elnino")
    months = [c for c in d.columns if c != "YEAR"]
    v = d[months].to_numpy().reshape(-1, 1)          # row-major: Jan..Dec of each year in turn
    v, n = _fill_gaps(v)
    return Series("elnino", v, ["sst"], "monthly", "statsmodels.datasets.elnino",
                  notes=[f"{n} missing months interpolated"] if n else [])


def macrodata() -> Series:
    """US quarterly macro-economic indicators, 1959Q1-2009Q3 (the 12 series besides year/quarter)."""
    d = _statsmodels("macrodata")
    cols = [c for c in d.columns if c not in ("year", "quarter")]
    return Series("macrodata", d[cols].to_numpy(), cols, "quarterly", "statsmodels.datasets.macrodata")


_LOADERS = {"daphnet": daphnet, "co2": co2, "sunspots": sunspots, "elnino": elnino,
            "macrodata": macrodata}
NAMES = tuple(_LOADERS)


def load(name: str) -> Series:
    """The bundled series ``name`` (one of :data:`NAMES`)."""
    if name not in _LOADERS:
        raise ValueError(f"unknown series {name!r}; bundled series are {', '.join(NAMES)} "
                         "(BasicMotions is a classification panel: use basic_motions())")
    return _LOADERS[name]()


def basic_motions(split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """aeon's BasicMotions (smartwatch accelerometer and gyroscope, 4 activities):
    ``X [n, 6, 100]`` float64 and integer labels ``y [n]`` (classes in sorted name order)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    from aeon.datasets import load_basic_motions
    X, y = load_basic_motions(split=split)
    classes = sorted(set(y))
    return np.asarray(X, dtype=np.float64), np.array([classes.index(v) for v in y], dtype=np.int64)
