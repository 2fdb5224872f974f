"""Local Sphinx extension: an author-year bibliography for sphinxcontrib-bibtex.

The book cites author-year in the text (``bibtex_reference_style: author_year`` gives
"Koh and Liang (2017)" / "(Koh and Liang, 2017)"), so the reference list must use the same
labels rather than pybtex's numbered ``plain`` style ("[1]", "[2]"). This module registers
the pybtex formatting style ``authoryear`` (select it with ``bibtex_default_style:
authoryear`` in _config.yml), which

* labels every entry "Author, Year", "Author and Author, Year" or "Author et al., Year" (last
  names; an entry without authors uses its editors, then its organization or key), with
  "a", "b", ... appended to the year when two entries would get the same label;
* sorts the list by author, then year, then title (pybtex's ``author_year_title`` sorting);
* formats the entries themselves like pybtex's ``unsrt``/``plain`` styles.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from pybtex.plugin import register_plugin
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitleSorting

_BRACES = re.compile(r"[{}]")


def _last_names(entry: Any) -> list[str]:
    """Return the cleaned last names of an entry's authors (or editors).

    Parameters
    ----------
    entry : pybtex.database.Entry
        The bibliography entry.

    Returns
    -------
    list of str
        Last names with TeX braces removed; empty when the entry has no persons.
    """
    for role in ("author", "editor"):
        persons = entry.persons.get(role, [])
        if persons:
            names = []
            for person in persons:
                last = " ".join(person.prelast_names + person.last_names)
                names.append(_BRACES.sub("", last).replace("\\", "").strip())
            return names
    return []


def _author_part(entry: Any) -> str:
    """Return the author part of an author-year label.

    Parameters
    ----------
    entry : pybtex.database.Entry
        The bibliography entry.

    Returns
    -------
    str
        "A", "A and B" or "A et al."; the organization, publisher or key when there are no
        persons.
    """
    names = _last_names(entry)
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} and {names[1]}"
    if names:
        return f"{names[0]} et al."
    for field in ("organization", "institution", "publisher", "howpublished"):
        value = entry.fields.get(field)
        if value:
            return _BRACES.sub("", str(value)).strip()
    return str(entry.key)


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Author, Year" with a, b, ... suffixes for labels that would collide."""

    def format_labels(self, sorted_entries: Iterable[Any]) -> Iterator[str]:
        """Yield one label per entry, in the order of ``sorted_entries``.

        Parameters
        ----------
        sorted_entries : iterable of pybtex.database.Entry
            The entries, already sorted.

        Yields
        ------
        str
            The entry's author-year label.
        """
        entries = list(sorted_entries)
        base = [f"{_author_part(e)}, {e.fields.get('year', 'n.d.')}" for e in entries]
        counts = Counter(base)
        seen: Counter[str] = Counter()
        for label in base:
            if counts[label] > 1:
                suffix = string.ascii_lowercase[seen[label]]
                seen[label] += 1
                yield label + suffix
            else:
                yield label


class AuthorYearStyle(UnsrtStyle):
    """pybtex's ``unsrt`` entry formatting with author-year labels and author-year sorting."""

    default_label_style = AuthorYearLabelStyle
    default_sorting_style = AuthorYearTitleSorting


def setup(app: Any) -> dict[str, Any]:
    """Register the ``authoryear`` pybtex style (Sphinx extension entry point).

    Parameters
    ----------
    app : sphinx.application.Sphinx
        The Sphinx application.

    Returns
    -------
    dict
        Extension metadata (parallel-safe).
    """
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle, force=True)
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabelStyle, force=True)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
