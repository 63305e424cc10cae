"""The book's figures: each function takes a chapter's data and returns its altair chart.

A chapter's chart cell is its caption (:func:`tokendyn.publish.plotting.caption`, narrative, kept in the
chapter) and one call here. Modules are named by concept, not by chapter.
"""

from .basins import (arrhenius_collapse, arrhenius_lines, attractor_vs_null, basin_vs_exact, corpus_ablation,
                     dwell_law_panels, dwell_vs_geometric, embedding_paths, group_boxplot, path_explorer, region_time,
                     repetition_paths, trap_depth, trap_dwells)
from .dabi import dabi_curves, flip_contrast, taxonomy
from .drift import drift_panels
from .embeddings import topic_map, topic_similarity
from .escapes import ablation_panels, interface_scaling, intervention_flips, ode_sde_curves, ode_sde_ladder
from .influence import influence_curves, influence_matrix
from .mixing import (coupling_anchor, distance_to_stationarity, dwell_survival, paired_survival, stationary_laws,
                     survival_grid)
from .performance import (breakdown_table, flop_rates, kernel_rates, scaling_table, step_breakdown, step_rate_rounds,
                          step_rate_scaling)
from .probes import cloze_scores, register_scores, scoreboard
from .rectangles import (arnold_press, delta_by_gap, delta_controls, delta_distribution, delta_intervals,
                         delta_vs_depth, delta_vs_size, delta_vs_tau, paired_deltas)
from .scaling import crossover_vs_budget, ratio_vs_tau, scaling_ratios
from .sites import site_entropy
from .size import size_ladder
from .tube import (cliff, generation_perplexity, generator_ladder, image_rollin, mechanism_placement,
                   mechanism_separation, residual_aim, residual_direction, rollin_flips, terminal_flips,
                   terminal_intervals, tube_mass, tube_prediction)

__all__ = ["residual_aim", "scoreboard", "ablation_panels", "interface_scaling", "intervention_flips", "ode_sde_curves", "ode_sde_ladder",
           "arrhenius_collapse", "arrhenius_lines", "attractor_vs_null", "basin_vs_exact", "corpus_ablation", "dwell_law_panels", "dwell_vs_geometric", "embedding_paths",
           "group_boxplot", "path_explorer", "region_time", "repetition_paths", "trap_depth", "trap_dwells",
           "dabi_curves", "flip_contrast", "taxonomy", "drift_panels", "topic_map", "topic_similarity", "influence_curves", "influence_matrix",
           "coupling_anchor", "distance_to_stationarity", "dwell_survival", "paired_survival",
           "stationary_laws", "survival_grid", "breakdown_table", "flop_rates", "kernel_rates", "scaling_table", "step_breakdown",
           "step_rate_rounds", "step_rate_scaling", "cloze_scores", "register_scores", "arnold_press", "delta_by_gap", "delta_controls",
           "delta_distribution", "delta_intervals", "delta_vs_depth", "delta_vs_size", "delta_vs_tau", "paired_deltas", "crossover_vs_budget",
           "scaling_ratios", "ratio_vs_tau", "site_entropy", "size_ladder", "cliff", "generation_perplexity", "image_rollin",
           "generator_ladder", "mechanism_placement", "mechanism_separation", "residual_direction", "rollin_flips", "terminal_flips", "terminal_intervals", "tube_mass",
           "tube_prediction"]
