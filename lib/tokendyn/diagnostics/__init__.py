"""Diagnostics of sampler runs: survival of coupling times, semantic drift, n log n scaling."""

from .drift import DriftRun, drift, forgotten_drift, hitting_times, plateau
from .scaling import ScalingFit, crossover, n_log_n, scaling_fit
from .survival import Survival, median_times, mixing_time, survival

__all__ = ["Survival", "survival", "mixing_time", "median_times", "drift", "forgotten_drift", "plateau", "hitting_times",
           "DriftRun", "n_log_n", "ScalingFit", "scaling_fit", "crossover"]
