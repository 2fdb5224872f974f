"""The book's own code: what exists only to run, phrase or plot a chapter.

The library a user imports is :mod:`cbdt` (estimators, signals, baselines, data sets,
:mod:`cbdt.plotting`); this package holds what the chapters of the online book need on top
of it, one module per chapter in each part:

- :mod:`cbdt.book.experiments`: one function per table or figure of the paper, computing
  pandas DataFrames from the library;
- :mod:`cbdt.book.claims`: the record of a chapter's claims against the paper
  (:class:`~cbdt.book.claims.ChapterClaims`) and the builders that phrase them;
- :mod:`cbdt.book.plots`: the chapters' matplotlib figures;
- :mod:`cbdt.book.widgets` and :mod:`cbdt.book.explorer`: the explorers (live in Jupyter,
  precomputed frames in the static book);
- :mod:`cbdt.book.cli`: ``cbdt reproduce`` / ``cbdt list``, every table and figure from the
  command line;
- :mod:`cbdt.book.selfcheck`: ``check("ex-05-3", answer)``, the exercises' self-check (salted
  digests of the answers, no answer in plain text);
- :mod:`cbdt.book.reading_time`: each chapter's reading time, computed from the chapter;
- :mod:`cbdt.book.classmode`: the ``CLASS_MODE`` switch of each chapter's first cell, a run
  for class within two minutes on a two-core laptop.

It needs the ``[book]`` extra (``pip install 'cbdt[book]'``); nothing in :mod:`cbdt`
imports it.
"""
