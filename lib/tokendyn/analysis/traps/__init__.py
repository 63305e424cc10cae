"""The low-temperature landscape of a Glauber chain (chapter 4, Paper 1's claims 6 and 7), one
module per subject:

- :mod:`.perfect`: perfect traps (every site's token the strict argmax of its conditional), found
  by argmax sweeps from real starts and re-checked from the ids alone;
- :mod:`.arrhenius`: a trap's exact leave probability ``q(tau)`` in log space, and the exp(1/tau)
  law it follows as ``tau -> 0`` (fit, exact asymptote, the paper's uniform-margin bound);
- :mod:`.dwell`: how long chains stay, in the exact state (Geometric(q), checked under censoring)
  and in the trap's Hamming basin;
- :mod:`.kinetic`: the same random-scan chain simulated rejection-free, for dwells of thousands
  of steps;
- :mod:`.approximate`: approximate traps and repetition basins read from trajectories, and the
  long chains that produce them.

Every public name is importable from here (``tokendyn.analysis.traps.basin_dwell``). Shapes: ``B`` chains or
states, ``n`` content sites, ``V`` vocabulary, ``T`` temperatures or records, ``M`` moves. Token
ids are content ids (no wrapping specials), as everywhere in the book.
"""

from .approximate import *  # noqa: F401,F403
from .approximate import __all__ as _approximate
from .arrhenius import *  # noqa: F401,F403
from .arrhenius import __all__ as _arrhenius
from .dwell import *  # noqa: F401,F403
from .dwell import __all__ as _dwell
from .kinetic import *  # noqa: F401,F403
from .kinetic import __all__ as _kinetic
from .perfect import *  # noqa: F401,F403
from .perfect import __all__ as _perfect

__all__ = [*_perfect, *_arrhenius, *_dwell, *_kinetic, *_approximate]
