"""Figures of a masked LM's local conditionals at the sites of one passage."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from ...mcmc.fill import SiteConditionals

__all__ = ["site_entropy"]


def site_entropy(sc: SiteConditionals, tokens: Sequence[str]) -> alt.Chart:
    """Each site's conditional: its entropy against the log-probability of the token there.

    ``sc`` the :class:`~tokendyn.mcmc.fill.SiteConditionals` of one passage of n sites, ``tokens`` its n
    tokens as strings (shown on hover). Colour: whether the token there is the argmax.
    """
    sites = pd.DataFrame({"site": range(len(tokens)), "token": list(tokens),
                          "entropy (nats)": sc.entropy.tolist(),
                          "log p(current token | rest)": sc.logp_current.tolist(),
                          "current token is the argmax": sc.is_argmax.tolist()})
    return alt.Chart(sites, title="Each site's conditional: entropy vs log-probability of the token there").mark_point(filled=True, size=60).encode(
        x="entropy (nats):Q", y="log p(current token | rest):Q",
        color=alt.Color("current token is the argmax:N"),
        tooltip=["site", "token", alt.Tooltip("entropy (nats):Q", format=".2f"),
                 alt.Tooltip("log p(current token | rest):Q", format=".2f")],
    ).interactive()
