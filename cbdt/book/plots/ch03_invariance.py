"""Chapter 03, coordinate invariance and whitening.

One function per figure; each takes computed data and returns the ``Figure``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt  # noqa: F401
import numpy as np

_CH03_STYLE = {
    "ols": ("OLS ($\\lambda = 0$)", "C0", "o", "-"),
    "ridge_isotropic": ("isotropic ridge $\\lambda I$", "C3", "s", "-"),
    "ridge_cotransformed": ("co-transformed ridge $\\lambda BB^\\top$", "C2", "^", "--"),
    "ridge_orthogonal": ("isotropic ridge, orthogonal $B$", "C7", "D", ":"),
}


def plot_invariance_vs_condition(df, ax=None, rounding_guide: bool = True):
    """Max relative coefficient change against :math:`\\kappa(B)` (Sec. 3.2, App. B.2).

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`cbdt.book.experiments.invariance.invariance_vs_condition`.
    ax : matplotlib Axes, optional
    rounding_guide : bool, default=True
        Draw the rounding scale :math:`\\varepsilon_{\\mathrm{mach}}\\,\\kappa(B)^2` (the
        condition number of :math:`G_B` grows like :math:`\\kappa(B)^2`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.8, 4.2))
    else:
        fig = ax.figure
    cond = df["cond"].to_numpy()
    floor = 1e-17  # exact zeros cannot be drawn on a log axis
    for col, (label, color, marker, ls) in _CH03_STYLE.items():
        if col in df:
            ax.plot(cond, np.maximum(df[col].to_numpy(), floor), ls=ls, marker=marker,
                    color=color, label=label)
    if rounding_guide:
        ax.plot(cond, np.finfo(float).eps * cond**2, color="0.6", lw=1, ls="-.",
                label="$\\varepsilon_{mach}\\,\\kappa(B)^2$ (rounding scale)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("condition number $\\kappa(B)$ of the reparameterisation")
    ax.set_ylabel("max relative change of $\\alpha(x)$")
    ax.set_title("Coefficients after $\\varphi \\mapsto B\\varphi$")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=2,
              frameon=False)
    fig.tight_layout()
    return fig


def plot_whitened_coefficients(alpha, alpha_inner, max_points: int = 4000):
    """ZCA sufficient regime (eq. 13-14): coefficients against the scaled inner product.

    Left: :math:`\\alpha_i(x)` from :class:`cbdt.CaseInfluence` (original coordinates) against
    :math:`\\varphi_B(x)^\\top\\varphi_B(x_i)/n` (whitened coordinates); the points lie on the
    diagonal. Right: histogram of the coefficients, negative ones in red.

    Parameters
    ----------
    alpha, alpha_inner : array-like of shape (m, n)
    max_points : int, default=4000
        Scatter at most this many (evenly strided) points.

    Returns
    -------
    matplotlib.figure.Figure
    """
    a = np.asarray(alpha, dtype=float).ravel()
    b = np.asarray(alpha_inner, dtype=float).ravel()
    step = max(1, a.size // max_points)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6.8, 3.4))
    ax1.scatter(b[::step], a[::step], s=4, alpha=0.4, color="C0")
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
    pad = 0.05 * (hi - lo)
    ax1.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="k", lw=0.8)
    ax1.axhline(0, color="0.7", lw=0.6)
    ax1.axvline(0, color="0.7", lw=0.6)
    ax1.set_xlabel("$\\varphi_B(x)^\\top\\varphi_B(x_i)/n$ (eq. 14)")
    ax1.set_ylabel("$\\alpha_i(x)$ (eq. 10)")
    ax1.set_title("Same numbers, two formulas", fontsize=10)
    bins = np.linspace(lo - pad, hi + pad, 61)
    ax2.hist(a[a < 0], bins=bins, color="C3", label=f"$\\alpha < 0$: {np.mean(a < 0):.1%}")
    ax2.hist(a[a >= 0], bins=bins, color="C0", label=f"$\\alpha \\geq 0$: {np.mean(a >= 0):.1%}")
    ax2.set_xlabel("$\\alpha_i(x)$")
    ax2.set_ylabel("count (queries $\\times$ cases)")
    ax2.set_title("Signed coefficients survive\nwhitening", fontsize=10)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


