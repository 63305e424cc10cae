"""Token Dynamics: samplers, metrics and models for the executable book.

The library is thin on purpose: each module holds one idea (``glauber``, ``rectangle``, ``data``,
``models``, ``results``) and every chapter of the book calls into it.
"""

__version__ = "0.1.0"
