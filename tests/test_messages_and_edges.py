"""Issue 30, "Why" items 5-10: rank by the data's dtype, zero effects and signals, the lean
install, damaged save files, ``cbdt reproduce`` offline, and the wording of messages.

Each test failed on the code before the fix (the failure is named in its docstring).
"""

from __future__ import annotations

import copy
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest

import cbdt
from cbdt.exceptions import InputError, MissingExtraError

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _python(code: str, *, env: dict[str, str] | None = None, cwd: pathlib.Path | None = None,
            args: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=300, env=full,
                          cwd=cwd or ROOT / "tests")


# ------------------------------------------------------------------ 5. rank by the dtype
def _rank8_float32(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A float32 representation of 13 columns and true rank 8, computed in float32."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 20)).astype(np.float32)
    W1 = rng.normal(size=(20, 8)).astype(np.float32)
    W2 = rng.normal(size=(8, 13)).astype(np.float32)
    Phi = (X @ W1) @ W2  # float32 arithmetic: rank 8 up to float32 rounding
    assert Phi.dtype == np.float32
    R = cbdt.returns_from_labels(rng.integers(0, 3, n))
    return Phi, R


def test_float32_representation_is_ranked_with_float32_tolerance():
    """Before: ``rank_ == 13`` (float64 tolerance sees float32 rounding as rank)."""
    Phi, R = _rank8_float32()
    ci = cbdt.CaseInfluence(solver="lstsq").fit(Phi, R)
    assert ci.rank_ == 8
    # the same numbers in float64 are judged with float64's tolerance: full rank
    assert cbdt.CaseInfluence(solver="lstsq").fit(Phi.astype(np.float64), R).rank_ == 13


def test_float32_rank_message_and_fallback_coefficients():
    """Before: ``solver="cholesky"`` reported rank 13 of 13 (too ill-conditioned) and the
    minimum-norm coefficients kept the float32 noise directions."""
    Phi, R = _rank8_float32()
    with pytest.raises(cbdt.RankDeficientError, match="rank 8 of 13"):
        cbdt.CaseInfluence(solver="cholesky").fit(Phi, R)
    # the minimum-norm fit on float32 data equals the one on its exact rank-8 part
    ci = cbdt.CaseInfluence(solver="lstsq").fit(Phi, R)
    U, s, Vt = np.linalg.svd(Phi.astype(np.float64), full_matrices=False)
    exact = (U[:, :8] * s[:8]) @ Vt[:8]
    ref = cbdt.CaseInfluence(solver="lstsq").fit(exact, R)
    q = Phi[:5].astype(np.float64)
    a, b = ci.coefficients(q), ref.coefficients(q)
    assert np.abs(a - b).max() <= 1e-4 * np.abs(b).max()


def test_float32_torch_layer_is_ranked_with_float32_tolerance():
    """Before: a float32 layer of true rank 8 was "rank 14 of 14" (13 units + intercept)."""
    torch = pytest.importorskip("torch")
    from cbdt import torch as ct

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(20, 8), torch.nn.Linear(8, 13), torch.nn.ReLU(),
                              torch.nn.Linear(13, 3))
    X = torch.randn(300, 20)
    R = cbdt.returns_from_labels(np.random.default_rng(0).integers(0, 3, 300))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbdt.LayerWarning)
        ci32 = ct.TorchCaseInfluence(net, "1", solver="lstsq").fit(X, R)
        net64 = copy.deepcopy(net).double()
        ci64 = ct.TorchCaseInfluence(net64, "1", solver="lstsq").fit(X.double(), R)
    assert ci64.rank_ == 9  # an affine image of 8 dimensions, with the intercept column
    assert ci32.rank_ == 9
    q32, q64 = ci32.phi(X[:20]), ci64.phi(X.double()[:20])
    a, b = ci32.coefficients(q32), ci64.coefficients(q64)
    assert np.abs(a - b).max() <= 1e-3 * np.abs(b).max()


def test_well_conditioned_float32_keeps_full_rank():
    rng = np.random.default_rng(1)
    Phi = rng.normal(size=(5000, 64)).astype(np.float32)
    R = rng.normal(size=(5000, 2))
    ci = cbdt.CaseInfluence().fit(Phi, R)
    assert ci.rank_ == 64 and ci.solver_ == "cholesky"


# ------------------------------------------------------------------ 6. zero effects, signals
def _one_hot_fit() -> tuple[cbdt.CaseInfluence, np.ndarray]:
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(300, 6))
    y = (Phi[:, 0] + 0.3 * rng.normal(size=300) > 0).astype(int)
    ci = cbdt.CaseInfluence(intercept=True).fit(Phi, cbdt.returns_from_labels(y))
    return ci, rng.normal(size=(40, 6))


def test_zero_contribution_has_effect_none():
    """Before: ``effect == "raises"`` where ``psi == 0`` (a case of the other label)."""
    ci, q = _one_hot_fit()
    cases, _ = ci.explain(q, k=10, rank_by="coefficient")
    zero = cases["psi"].to_numpy() == 0
    assert zero.any()
    assert (cases.loc[zero, "effect"] == "none").all()
    assert not np.signbit(cases.loc[zero, "psi"].to_numpy()).any()  # 0.0, never -0.0
    pos, neg = cases["psi"] > 0, cases["psi"] < 0
    assert (cases.loc[pos, "effect"] == "raises").all()
    assert (cases.loc[neg, "effect"] == "lowers").all()


def test_explain_keeps_the_eps_floor_of_eq_16():
    """A top-k set on one label has the entropy of the smoothing eps (eq. 16), a small positive
    number, not a rounding error: explain shows what audit_signals computes (one route), so
    the floor still orders such queries by their mass."""
    ci, q = _one_hot_fit()
    _, signals = ci.explain(q, k=10, rank_by="coefficient")
    sig = cbdt.audit_signals(ci, q, k=10, rank_by="coefficient")
    one = signals["gini"].to_numpy() == 0
    assert one.any() and (~one).any()
    assert (signals.loc[one, "entropy"] > 0).all()
    assert (signals.loc[one, "entropy"] < 1e-6).all()
    np.testing.assert_array_equal(sig["entropy"].to_numpy(), signals["entropy"].to_numpy())


# ------------------------------------------------------------------ 7. the lean install
_LEAN = """
    import sys


    class _NotInstalled:  # import of these raises ModuleNotFoundError, as when not installed
        names = ("matplotlib", "torch", "tqdm")

        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in self.names:
                raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
            return None


    sys.meta_path.insert(0, _NotInstalled())
"""


def _lean(code: str) -> str:
    """``code`` run as if matplotlib, torch and tqdm were not installed."""
    return textwrap.dedent(_LEAN) + textwrap.dedent(code)


def test_cbdt_list_without_matplotlib():
    """Before: ``ModuleNotFoundError: No module named 'matplotlib'``."""
    run = _python(_lean("""
        from cbdt.book.cli import main
        sys.exit(main(["list"]))
    """))
    assert run.returncode == 0, run.stderr
    assert "table1" in run.stdout and "Traceback" not in run.stderr


def test_cbdt_reproduce_without_extras_is_one_line(tmp_path):
    run = _python(_lean("""
        from cbdt.book.cli import main
        sys.exit(main(["reproduce", "--only", "table1", "--out", "out"]))
    """), cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'cbdt[" in lines[0], run.stderr
    assert not (tmp_path / "out").exists()


def test_cbdt_torch_without_torch_fails_on_import():
    """Before: ``from cbdt import torch as ct`` succeeded without torch."""
    run = _python(_lean("""
        import cbdt
        try:
            from cbdt import torch as ct
        except cbdt.MissingExtraError as err:
            print("MissingExtraError:", err)
        else:
            print("imported")
        from cbdt.exceptions import MissingExtraError
        try:
            import cbdt.models
        except MissingExtraError as err:
            print("models:", err)
    """))
    assert run.returncode == 0, run.stderr
    assert "MissingExtraError: cbdt.torch needs torch" in run.stdout, run.stdout
    assert "pip install 'cbdt[torch]'" in run.stdout
    assert "models: " in run.stdout


def test_missing_extra_error_is_raised_by_require_installed():
    from cbdt._optional import require_installed

    with pytest.raises(MissingExtraError, match=r"pip install 'cbdt\[scale\]'"):
        sys.modules["dask"], saved = None, sys.modules.get("dask")
        try:
            require_installed("dask", "cbdt test")
        finally:
            if saved is None:
                del sys.modules["dask"]
            else:
                sys.modules["dask"] = saved


# ------------------------------------------------------------------ 8. damaged save files
def _saved(tmp_path: pathlib.Path) -> pathlib.Path:
    rng = np.random.default_rng(0)
    ci = cbdt.CaseInfluence().fit(rng.normal(size=(80, 4)), rng.normal(size=(80, 2)))
    path = tmp_path / "fit.npz"
    ci.save(path)
    return path


def _loaders():
    yield cbdt.CaseInfluence.load
    yield cbdt.NystromCaseInfluence.load
    try:
        import torch  # noqa: F401
    except ImportError:
        return
    from cbdt import torch as ct

    yield ct.TorchCaseInfluence.load


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "npy"])
def test_load_of_a_damaged_file_says_so(tmp_path, damage):
    """Before: garbage repeated numpy's "allow_pickle=" advice ("if you trust the file"), a
    truncated file raised ``zipfile.BadZipFile``, an empty one ``EOFError``."""
    path = tmp_path / "bad.npz"
    if damage == "garbage":
        path.write_bytes(b"this is not an archive " * 40)
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        data = _saved(tmp_path).read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        np.save(path.with_suffix(".npy"), np.zeros(3))
        path.with_suffix(".npy").rename(path)
    for load in _loaders():
        with pytest.raises(InputError) as info:
            load(path)
        msg = str(info.value)
        assert "not a cbdt save file" in msg and "damaged" in msg, msg
        assert "pickle" not in msg and "trust" not in msg, msg
        assert str(path) in msg


def test_load_of_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        cbdt.CaseInfluence.load(tmp_path / "nothing.npz")


# ------------------------------------------------------------------ 9. reproduce offline
def test_reproduce_offline_is_one_message_and_no_empty_folder(tmp_path):
    """Before: a 46-line traceback before the message, and an empty output folder."""
    env = {k: v for k, v in os.environ.items() if k != "CBDT_DATA_DIR"}
    env.update(CBDT_OFFLINE="1", CBDT_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "results"
    run = subprocess.run([sys.executable, "-m", "cbdt", "reproduce", "--only", "table2",
                          "--seeds", "2", "--out", str(out), "--no-progress"],
                         capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr, run.stderr
    assert "CBDT_DATA_DIR" in run.stderr and "PJME_hourly.csv" in run.stderr
    assert run.stderr.startswith("cbdt reproduce: table2 needs")
    assert not out.exists()


def test_cbdt_list_marks_the_artifacts_that_download_data():
    """Before: ``cbdt list`` did not say which artifacts need a data download."""
    from cbdt.book.cli import ARTIFACTS, _list

    text = _list()
    rows = {ln.split()[0]: ln for ln in text.splitlines()[1:] if ln.split()
            and ln.split()[0] in ARTIFACTS}
    assert set(rows) == set(ARTIFACTS)
    for name in ("table2", "fig-pjm", "fig-signed", "fig-uci"):
        assert ARTIFACTS[name].downloads and "download" in rows[name], rows[name]
    for name in ("table1", "fig-synthetic", "table-cost", "drift", "table-c2"):
        assert not ARTIFACTS[name].downloads and "download" not in rows[name], rows[name]
    assert "CBDT_DATA_DIR" in text


# ------------------------------------------------------------------ 10. messages
def test_numeric_strings_get_to_numeric_advice():
    """Before: the one-hot advice (``pandas.get_dummies``) for numbers stored as text."""
    rng = np.random.default_rng(0)
    R = pd.DataFrame({"hold": [f"{v:.3f}" for v in rng.normal(size=30)],
                      "buy": rng.normal(size=30)})
    with pytest.raises(InputError) as info:
        cbdt.CaseInfluence().fit(rng.normal(size=(30, 3)), R)
    msg = str(info.value)
    assert "pandas.to_numeric" in msg and "get_dummies" not in msg, msg
    assert "'hold'" in msg
    # a column of words still gets the one-hot advice
    R["buy"] = ["up", "down"] * 15
    with pytest.raises(InputError, match="get_dummies"):
        cbdt.CaseInfluence().fit(rng.normal(size=(30, 3)), R)


def test_phi_without_columns_says_so():
    """Before: "Phi is empty (shape (60, 0)); it needs at least one row."."""
    with pytest.raises(InputError) as info:
        cbdt.CaseInfluence().fit(np.zeros((60, 0)), np.zeros((60, 2)))
    msg = str(info.value)
    assert "no columns" in msg and "(60, 0)" in msg and "row" not in msg, msg
    with pytest.raises(InputError, match="no rows"):
        cbdt.CaseInfluence().fit(np.zeros((0, 3)), np.zeros((0, 2)))


def test_nan_messages_show_nan():
    """Before: "the first is np.float64(nan)"."""
    rng = np.random.default_rng(0)
    R = rng.normal(size=(40, 2))
    R[5, 1] = np.nan
    with pytest.raises(InputError) as info:
        cbdt.CaseInfluence().fit(rng.normal(size=(40, 3)), R)
    msg = str(info.value)
    assert "the first is nan at index (5, 1)" in msg and "np.float64" not in msg, msg
    ci = cbdt.CaseInfluence().fit(rng.normal(size=(40, 3)), rng.normal(size=(40, 2)))
    with pytest.raises(InputError) as info:
        ci.scores(np.array([[1.0, np.inf, 0.0]]))
    assert "np.float64" not in str(info.value) and "inf" in str(info.value)


def test_class_missing_from_training_labels_names_n_classes():
    """Before: "model outputs 4 scores ... returns have 3 actions", without ``n_classes=``."""
    torch = pytest.importorskip("torch")
    from cbdt import torch as ct

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 4))
    X = np.random.default_rng(0).normal(size=(60, 4)).astype(np.float32)
    y = np.random.default_rng(0).integers(0, 3, 60)  # class 3 absent from the training set
    with pytest.raises(InputError) as info:
        ct.probe_fidelity(net, "1", X, cbdt.returns_from_labels(y), X)
    msg = str(info.value)
    assert "n_classes=4" in msg and "returns_from_labels" in msg, msg


def test_duplicate_case_ids_raise_naming_them():
    """Before: duplicate ``case_ids`` passed silently."""
    rng = np.random.default_rng(0)
    Phi, R = rng.normal(size=(30, 3)), rng.normal(size=(30, 2))
    ids = [f"c{i}" for i in range(30)]
    ids[7], ids[20] = "c3", "c11"
    with pytest.raises(InputError) as info:
        cbdt.CaseInfluence().fit(Phi, R, case_ids=ids)
    msg = str(info.value)
    assert "'c3'" in msg and "'c11'" in msg and "unique" in msg, msg
    frame = pd.DataFrame(Phi, index=[0, 1, 2] * 10)
    with pytest.raises(InputError, match="unique"):
        cbdt.CaseInfluence().fit(frame, R)


def test_probe_fidelity_repr_is_short():
    """Before: the repr held the model and both score matrices (thousands of characters)."""
    torch = pytest.importorskip("torch")
    from cbdt import torch as ct

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    R = cbdt.returns_from_labels(np.random.default_rng(0).integers(0, 3, 200))
    fid = ct.probe_fidelity(net, "1", X, R, X)
    text = repr(fid)
    assert len(text) < 400 and "\n" not in text, text
    assert text.startswith("ProbeFidelity(") and "rho_recon=" in text and "agreement=" in text
    assert "Linear(" not in text


def test_torch_case_influence_repr_names_model_and_layer_once():
    """Before: ``model=`` and ``layer=`` appeared twice, the second time the whole model."""
    torch = pytest.importorskip("torch")
    from cbdt import torch as ct

    net = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3))
    text = repr(ct.TorchCaseInfluence(net, "1", ridge=0.5))
    assert text.count("model=") == 1 and text.count("layer=") == 1, text
    assert "\n" not in text and "ridge=0.5" in text
    assert "head=" not in text
    text = repr(ct.TorchCaseInfluence(net, "1", head=net[2]))
    assert text.count("head=") == 1 and "head='2'" in text, text
