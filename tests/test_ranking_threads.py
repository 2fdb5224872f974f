"""BLAS thread pinning (cbdt._threads) under concurrent Python threads: the
limits in force before the first pinned section come back when the last one exits."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from threadpoolctl import OpenBLASController, ThreadpoolController, threadpool_info

from cbdt import CaseInfluence
from cbdt._threads import single_threaded_blas


def blas_limits() -> list[int]:
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def release_control() -> None:
    """threadpoolctl >= 3.6: no thread keeps the right to set OpenBLAS's limits."""
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


@pytest.fixture
def two_blas_threads():
    """BLAS at 2 threads (the original limits the pin must restore), set the way a user's
    environment sets them: no Python thread holds threadpoolctl's control afterwards."""
    release_control()
    limiter = ThreadpoolController().limit(limits=2, user_api="blas")
    release_control()
    before = blas_limits()
    assert before and set(before) == {2}
    yield before
    release_control()
    limiter.restore_original_limits()
    release_control()


def test_interleaved_sections_restore_the_original_limits(two_blas_threads):
    # A enters, B enters, A exits and its thread ends, B exits: with a save/restore per
    # section B saved A's 1 and restored it last, leaving BLAS at one thread for good
    a_in, a_gone = threading.Event(), threading.Event()
    seen: dict[str, list[int]] = {}

    def a() -> None:
        with single_threaded_blas():
            a_in.set()
            b_in.wait(10)
            seen["a"] = blas_limits()

    def b() -> None:
        a_in.wait(10)
        with single_threaded_blas():
            b_in.set()
            a_gone.wait(10)
            seen["b"] = blas_limits()  # A has left, B is still inside: still pinned

    b_in = threading.Event()
    ta, tb = threading.Thread(target=a), threading.Thread(target=b)
    ta.start()
    tb.start()
    ta.join(20)
    a_gone.set()
    tb.join(20)
    assert set(seen["a"]) == {1} and set(seen["b"]) == {1}
    assert blas_limits() == two_blas_threads


def test_concurrent_top_cases_leave_blas_as_they_found_it(two_blas_threads):
    # two Python threads x many batched scans (each pins BLAS while it runs its own threads)
    rng = np.random.default_rng(0)
    Phi, R = rng.normal(size=(6000, 8)), rng.normal(size=(6000, 2))
    ci = CaseInfluence().fit(Phi, R)
    Q = rng.normal(size=(300, 8))
    ref = ci.top_cases(Q, 1, k=5)
    before = two_blas_threads
    errors: list[BaseException] = []
    results: list[np.ndarray] = []

    def work() -> None:
        try:
            for _ in range(25):
                results.append(ci.top_cases(Q, 1, k=5).indices)
                with single_threaded_blas():  # nested pin inside a thread
                    pass
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors
    assert blas_limits() == before
    assert len(results) == 50 and all(np.array_equal(r, ref.indices) for r in results)


def test_nested_sections_keep_the_pin_until_the_outermost_exits(two_blas_threads):
    before = two_blas_threads
    with single_threaded_blas():
        with single_threaded_blas():
            assert set(blas_limits()) == {1}
        assert set(blas_limits()) == {1}
    assert blas_limits() == before
