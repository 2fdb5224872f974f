"""Matplotlib figures of the book, one function per figure.

Every function takes the already computed data (from :mod:`cbdt.experiments` or the core
API), draws on a new or given ``Axes`` and returns the ``Figure``; none of them computes a
statistic that is not also available from a tested function.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401

# --- chapter 01: CBDT theory ---

# --- chapter 02: Proposition 1 ---

# --- chapter 03: invariance and whitening ---

# --- chapter 04: audit signals ---

# --- chapter 05/06: synthetic recovery and attribution baselines ---
