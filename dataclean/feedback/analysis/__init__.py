"""Offline analysis of training logs (the `dataclean feedback` command): outlier samples, diagnosed
loss spikes, the quarantine list and its report. Imports matplotlib (the plot) when asked; the
training side (`dataclean.feedback`) needs none of it except the spike rules (`diagnose`)."""
