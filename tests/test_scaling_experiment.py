"""Chapter 10 helpers: accuracy table, scaling exponents and verdicts, stored benchmarks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cbdt import InputError
from cbdt.book import claims
from cbdt.book.experiments import scaling


def power_law_table() -> pd.DataFrame:
    rows = []
    for n in (1e3, 1e4, 1e5):
        rows += [
            dict(sweep="n", n=n, H=64, method="floor (GEMM)", fit_s=1e-9 * n, query_s=1e-10 * n),
            dict(sweep="n", n=n, H=64, method="exact", fit_s=2e-9 * n, query_s=1e-10 * n),
            # Nystrom: slower at small n, 3x faster to fit from n = 1e4 on
            dict(sweep="n", n=n, H=64, method="Nystrom features",
                 fit_s=(4e-9 if n < 1e4 else 2e-9 / 3) * n, query_s=1e-10 * n),
        ]
    return pd.DataFrame(rows)


def test_exponents_recover_a_power_law():
    ex = scaling.scaling_exponents(power_law_table())
    assert ex.loc[("n", "exact"), "fit"] == pytest.approx(1.0, abs=1e-12)
    assert ex.loc[("n", "floor (GEMM)"), "query"] == pytest.approx(1.0, abs=1e-12)
    with pytest.raises(InputError, match="needs the columns"):
        scaling.scaling_exponents(pd.DataFrame({"n": [1]}))


def test_verdicts_name_trends_and_never_invent_wins():
    v = claims.ch10_nystrom.scaling_verdicts(power_law_table())
    fit = next(s for s in v if s.startswith("Nyström features, fit"))
    assert "from n=10,000 on (3.0x, 3.0x)" in fit
    q = next(s for s in v if s.startswith("Nyström features, per-query"))
    assert q.startswith("Nyström features, per-query time, growing n: never faster")
    assert not [s for s in v if "Nystrom" in s]  # the benchmark's key is not shown
    df = power_law_table()
    df.loc[(df.method == "Nystrom features") & (df.n == 1e4), "query_s"] /= 2  # one noisy point
    q = next(s for s in claims.ch10_nystrom.scaling_verdicts(df) if "per-query" in s and "Nyström" in s)
    assert "isolated sizes only" in q and "n=10,000: 2.0x" in q


def test_accuracy_table_shows_cond_versus_cond_squared():
    acc = scaling.accuracy_table(conds=(1e3, 1e6), n=60, H=6, seed=1, dps=40)
    assert np.allclose(acc.cond_phi, [1e3, 1e6], rtol=1e-6)
    for path in ("cbdt_in_memory", "cbdt_householder", "cbdt_memmap", "cbdt_dask"):
        assert (acc[path] <= scaling.ACCURACY_FACTOR * acc.eps_cond).all(), path
    assert acc.normal_equations.iloc[1] > 100 * acc.cbdt_in_memory.iloc[1]
    assert list(acc.path_in_memory) == ["cholesky_qr2", "cholesky_qr2"]  # cond(G) <= 1e12
    assert list(acc.H) == [6, 6]


def test_accuracy_table_records_the_fallback_and_a_failed_cholesky():
    acc = scaling.accuracy_table(conds=(1e11,), n=60, H=(4, 6), seed=1, dps=50)
    assert list(acc.H) == [4, 6]
    # eps cond(Phi)^2 ~ 2e6: the default fit cannot stay on CholeskyQR2
    assert (acc.path_in_memory != "cholesky_qr2").all()
    for path in ("cbdt_in_memory", "cbdt_householder", "cbdt_memmap", "cbdt_dask"):
        assert (acc[path] <= scaling.ACCURACY_FACTOR * acc.eps_cond).all(), path
    shown = scaling.accuracy_against_bounds(acc)
    assert (shown["normal equations"] == "no digit left").all()


def test_accuracy_against_bounds_shows_verdicts_not_rounding_errors():
    acc = scaling.accuracy_table(conds=(1e2, 1e5), n=60, H=6, seed=1, dps=40)
    shown = scaling.accuracy_against_bounds(acc)
    assert list(shown["cond(Φ)"]) == ["1e+02", "1e+05"]
    assert list(shown["bound 10 ε·cond(Φ)"]) == ["2.2e-13", "2.2e-10"]
    assert list(shown["path taken"]) == ["CholeskyQR2", "CholeskyQR2"]
    col = "cbdt, 4 paths"
    assert (shown[col] == "all within").all()
    assert (shown["normal equations"] == "between the bounds").all()
    # what the table shows is decided by the bounds: an error above its bound says so
    worse = acc.assign(cbdt_memmap=11 * acc.eps_cond, normal_equations=acc.eps_cond / 2)
    shown = scaling.accuracy_against_bounds(worse)
    assert (shown[col] == "ABOVE: memmap").all()
    assert (shown["normal equations"] == "below ε·cond(Φ)").all()
    with pytest.raises(InputError, match="accuracy_table"):
        scaling.accuracy_against_bounds(acc.drop(columns="eps_cond"))


def test_stored_benchmarks_load_with_their_machine():
    for name in ("scaling", "limits", "memmap_dask", "fit", "attribution"):
        df, meta = scaling.load_benchmark(name)
        assert len(df) > 0 and {"date", "cpu", "cores", "blas"} <= set(meta)
        # every row names its machine (issue 31): the CPU, a measured peak, the BLAS core
        assert set(scaling.MACHINE_COLUMNS) <= set(df.columns), name
        assert df["cpu"].notna().all() and (df["peak_gflops"] > 0).all(), name
        assert df["blas_core"].str.len().gt(0).all(), name
        assert scaling.machine_line(df, meta).startswith(f"benchmark of {meta['date']}")
    with pytest.raises(InputError, match="make bench"):
        scaling.load_benchmark("nonexistent")


def test_machine_line_names_every_machine_of_the_rows():
    meta = {"date": "2026-01-02", "cores": "4"}
    one = pd.DataFrame({"x": [1, 2], "cpu": ["CPU A", "CPU A"], "peak_gflops": [99.6, 100.4],
                        "blas_core": ["openblas Haswell"] * 2})
    assert scaling.machine_line(one, meta) == (
        "benchmark of 2026-01-02, 4 cores: CPU A, openblas Haswell, GEMM peak 100 GFLOP/s")
    two = pd.concat([one, one.assign(cpu="CPU B", peak_gflops=37.2).iloc[:1]])
    assert scaling.machine_line(two, meta) == (
        "benchmark of 2026-01-02, 4 cores: CPU A, openblas Haswell, GEMM peak 100 GFLOP/s "
        "(2 rows); CPU B, openblas Haswell, GEMM peak 37 GFLOP/s (1 row)")
    with pytest.raises(InputError, match=r"lack the machine columns \['blas_core'\]"):
        scaling.machine_line(one.drop(columns="blas_core"), meta)


def test_with_condition_has_the_requested_condition_number():
    P = scaling.with_condition(0, 40, 5, 1e4)
    assert np.linalg.cond(P) == pytest.approx(1e4, rel=1e-8)
    with pytest.raises(InputError):
        scaling.with_condition(0, 4, 5, 10.0)
