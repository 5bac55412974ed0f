"""Offline analysis of training logs (the `dataclean feedback` command): outlier samples, diagnosed
loss spikes, kinds of samples, the quarantine list and its report. Imports matplotlib (the plot)
when asked. The training side (`dataclean.feedback`) never imports it; both diagnose spikes with
`dataclean.feedback.detectors`."""
