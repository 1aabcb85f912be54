"""Time series: bundled real series, generators with known ground truth, windowing, RevIN, metrics
and a forecaster training loop.

The modules are imported one by one (``from reprobook.timeseries.windows import split_windows``);
this package imports nothing itself, so loading one module does not pull in torch, pandas or aeon.

* :mod:`~reprobook.timeseries.loaders` -- real series that ship inside installed packages
  (aeon's Daphnet and BasicMotions, statsmodels' co2, sunspots, elnino, macrodata);
* :mod:`~reprobook.timeseries.generators` -- synthetic multivariate series whose cross-channel
  structure is known (leader/follower lags, corrupted channels, multi-period sines);
* :mod:`~reprobook.timeseries.windows` -- chronological splits with training-set scaling, sliding
  windows, shuffled and sequential (stride-1) batches;
* :mod:`~reprobook.timeseries.revin` -- reversible instance normalisation;
* :mod:`~reprobook.timeseries.metrics` -- forecast errors (MSE, MAE, RMSE, sMAPE, MASE);
* :mod:`~reprobook.timeseries.train` -- fit a forecaster with early stopping, evaluate it.
"""
