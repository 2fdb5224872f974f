"""ipywidgets explorers used by the chapters (need the ``book`` extra: ``pip install cbdt[book]``).

The explorers only display; every number they show is computed by a tested function of the
library, and the chapters check the same numbers in plain cells.
"""

from __future__ import annotations

# --- chapter 01: CBDT theory ---

# --- chapter 03: invariance and whitening ---

# --- chapter 06: attribution baselines ---
