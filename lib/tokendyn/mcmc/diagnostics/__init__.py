"""Diagnostics of sampler runs: survival of coupling times, semantic drift, n log n scaling."""

from .bootstrap import (Crossover, CrossoverSurvey, Source, bootstrap_medians, censor_at, censor_cells, crossover_draws,
                        crossover_survey, median_draws_interval, ratios_at, rise_probability, scaling_C_interval, scaling_table,
                        shape_slope_interval)
from .drift import DriftRun, drift, forgotten_drift, hitting_times, plateau
from .scaling import ScalingFit, budget_steps, crossover, n_log_n, scaling_fit, shape_slope
from .shape import ShapeComparison, censored_lognormal_fit, compare_shapes, shape_words, shapes_by_model
from .survival import Survival, median_times, mixing_time, survival

__all__ = ["Survival", "survival", "mixing_time", "median_times", "drift", "forgotten_drift", "plateau", "hitting_times",
           "DriftRun", "n_log_n", "budget_steps", "ScalingFit", "scaling_fit", "crossover", "censor_at", "censor_cells",
           "bootstrap_medians", "median_draws_interval", "Crossover", "crossover_draws", "rise_probability", "Source",
           "CrossoverSurvey", "crossover_survey", "ratios_at", "scaling_C_interval",
           "shape_slope", "shape_slope_interval", "scaling_table", "ShapeComparison",
           "censored_lognormal_fit", "compare_shapes", "shapes_by_model", "shape_words"]
