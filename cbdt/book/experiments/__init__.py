"""One function per table or figure of the paper, each returning pandas DataFrames.

Submodules are named for the experiment they hold (``invariance``, ``synthetic``, ...).
"""
