"""The built wheel installs into a fresh virtual environment and works there.

What a reader on Colab or a fresh machine gets from ``pip install cbdt``: the wheel that
``python -m build --wheel`` makes from this checkout. The test builds it, creates a new venv,
installs the wheel with ``pip --python`` (no network: ``--no-deps``, ``--no-index``), and runs a
fit, a query and ``cbdt.audit_signals`` in that venv from a folder outside the checkout.

The wheel's *dependencies* (numpy, scipy, pandas, ...) are not downloaded again: a ``.pth`` file
appends this environment's site-packages to the fresh venv's path, *after* the venv's own
site-packages, so ``cbdt`` itself is imported from the installed wheel (the test asserts where it
came from) and the editable install of this checkout stays invisible (``.pth`` files of an
appended folder are not executed).
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytest.importorskip("build", reason="the test extra installs `build` (python -m build)")

SMOKE = textwrap.dedent(
    """
    import pathlib, sys
    import numpy as np
    import cbdt

    where = pathlib.Path(cbdt.__file__).resolve()
    assert pathlib.Path(sys.prefix).resolve() in where.parents, where
    rng = np.random.default_rng(0)
    Phi, R = rng.normal(size=(200, 6)), rng.normal(size=(200, 3))
    ci = cbdt.CaseInfluence().fit(Phi, R)
    q = rng.normal(size=(5, 6))
    alpha = ci.coefficients(q)
    assert np.abs(alpha @ R - ci.scores(q)).max() < 1e-10
    sig = cbdt.audit_signals(ci, q, k=10)
    assert list(sig.index) == list(range(5)) and {"entropy", "gini", "risk"} <= set(sig)
    print("OK", cbdt.__version__, where)
    """
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    # build from a copy of what the wheel is made of, so no build/ or egg-info lands in the
    # checkout and nothing but the package's own sources can leak into the wheel
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "cbdt", src / "cbdt",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                    "--outdir", str(out), str(src)],
                   check=True, capture_output=True, text=True, timeout=600)
    wheels = sorted(out.glob("cbdt-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def _venv_with(wheel: pathlib.Path, env: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """A fresh venv at ``env`` with only ``wheel`` installed (no dependencies, no index);
    returns its python and its site-packages folder."""
    venv.EnvBuilder(with_pip=False).create(env)
    py = env / "bin" / "python"
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True,
                   text=True, timeout=300)
    return py, pathlib.Path(purelib)


def test_wheel_installs_in_a_fresh_venv_and_audits(wheel, tmp_path):
    env = tmp_path / "venv"
    py, purelib = _venv_with(wheel, env)
    # dependencies from this environment, after the venv's own site-packages
    (purelib / "zz_test_dependencies.pth").write_text(
        sysconfig.get_path("purelib") + "\n", encoding="utf-8")
    run = subprocess.run([str(py), "-c", SMOKE], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("OK ")
    # the console script is installed too
    assert (env / "bin" / "cbdt").exists()


CORE = ("numpy", "scipy", "pandas", "threadpoolctl")

LEAN = textwrap.dedent(
    """
    import importlib, pathlib, sys
    import numpy as np
    import cbdt

    for name in ("torch", "matplotlib", "pooch", "dask", "tqdm", "sklearn"):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            pass
        else:
            raise AssertionError(f"{name} is importable in the lean venv")
    rng = np.random.default_rng(0)
    Phi, R = rng.normal(size=(300, 5)), rng.normal(size=(300, 3))
    ci = cbdt.CaseInfluence().fit(Phi, R)
    q = rng.normal(size=(4, 5))
    assert np.abs(ci.coefficients(q) @ R - ci.scores(q)).max() < 1e-10
    top = ci.top_cases(q, k=5, action=1)
    assert top.indices.shape == (4, 5)
    sig = cbdt.audit_signals(ci, q, k=10)
    assert {"entropy", "gini", "risk"} <= set(sig)
    ex = ci.explain(q[0], k=5)
    for module, extra in (("cbdt.plotting", "plot"), ("cbdt.book.plots", "plot"),
                          ("cbdt.models", "torch"), ("cbdt.datasets", "data")):
        try:
            importlib.import_module(module)
        except cbdt.MissingExtraError as err:
            msg = str(err)
            assert "\\n" not in msg and f"pip install 'cbdt[{extra}]'" in msg, msg
            print(msg)
        else:
            raise AssertionError(f"{module} imported without its extra")
    try:
        ex.plot()
    except cbdt.MissingExtraError as err:
        assert "cbdt[plot]" in str(err), err
    else:
        raise AssertionError("Explanation.plot drew without matplotlib")
    # issue 30: cbdt.torch fails on import; `cbdt list` works; `cbdt reproduce` is one line
    try:
        from cbdt import torch as ct
    except cbdt.MissingExtraError as err:
        assert "pip install 'cbdt[torch]'" in str(err), err
    else:
        raise AssertionError("cbdt.torch imported without torch")
    import subprocess
    run = subprocess.run([sys.executable, "-m", "cbdt", "list"], capture_output=True,
                         text=True)
    assert run.returncode == 0 and "table1" in run.stdout, run.stderr
    run = subprocess.run([sys.executable, "-m", "cbdt", "reproduce", "--only", "table1",
                          "--out", "lean-out"], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "pip install 'cbdt[" in run.stderr
    assert not pathlib.Path("lean-out").exists()
    print("LEAN OK")
    """
)


def _closure(names: tuple[str, ...]) -> set[str]:
    """The distributions ``names`` need, recursively (requirements without extras)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for spec in metadata.distribution(name).requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_core_needs_only_numpy_scipy_pandas_threadpoolctl(wheel, tmp_path):
    """``pip install cbdt`` (no extras) declares the four core dependencies, and the wheel
    works in a venv that has nothing else: fit, query, top cases, ``audit_signals``,
    ``explain``; each optional module fails with one line naming its extra."""
    import zipfile
    from importlib import metadata

    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    required = sorted(ln.split(":", 1)[1].split(">")[0].split("=")[0].strip().lower()
                      for ln in lines if ln.startswith("Requires-Dist:") and "extra ==" not in ln)
    assert required == sorted(CORE), required

    # a folder holding only the core distributions and what they need, linked from here
    deps = tmp_path / "deps"
    deps.mkdir()
    for name in _closure(CORE):
        dist = metadata.distribution(name)
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src = pathlib.Path(dist.locate_file(top))
            if src.exists() and not (deps / top).exists():
                (deps / top).symlink_to(src)
    env = tmp_path / "venv"
    py, purelib = _venv_with(wheel, env)
    (purelib / "zz_core_dependencies.pth").write_text(f"{deps}\n", encoding="utf-8")
    run = subprocess.run([str(py), "-c", LEAN], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().endswith("LEAN OK"), run.stdout
