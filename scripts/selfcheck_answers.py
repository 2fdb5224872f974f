"""Write the self-check data of the exercises (``cbdt/book/_selfcheck_answers.py``).

Each exercise with a self-check (:mod:`cbdt.book.selfcheck`) is listed in :data:`SPECS` with
*where its answer is printed*: the key of a code block in ``book/_exercises/NN_*.json`` (what
the notebook check stored of the solution's code) and a regular expression whose groups read
the answer off that output. No answer is typed here. The script writes only digests, hints and
the form of each answer; ``tests/test_selfcheck.py`` re-derives the answers from the stored
outputs and fails when the data file is out of date. Every other exercise of the book is listed
in :data:`NO_CHECK` with the reason it has no check (a proof, a stated verification, a formula),
and the test fails on an exercise that is in neither list.

usage::

    python scripts/selfcheck_answers.py           # rewrite cbdt/book/_selfcheck_answers.py
    python scripts/selfcheck_answers.py --check   # exit 1 when it would change

After ``make exercises`` changes a solution's output, run it again and read the diff.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import pprint
import re
import sys
from dataclasses import dataclass
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from cbdt.book.selfcheck import canonical, digest  # noqa: E402

EXERCISES = ROOT / "book" / "_exercises"
OUT = ROOT / "cbdt" / "book" / "_selfcheck_answers.py"


@dataclass(frozen=True)
class Spec:
    """Where the answer of one exercise is printed, and how it is compared."""

    label: str
    notebook: str  # stem of book/_exercises/<notebook>.json
    block: str  # key of the code block whose output holds the answer
    pattern: str  # regular expression (multiline); its groups are the answer
    kind: str  # "number", "integer" or "choice"
    hint: str
    decimals: int = 0  # numbers: compared to this many decimals
    form: str = ""  # choices: what to give, in words

    def answer(self, outputs: dict[str, dict[str, str]] | None = None) -> Any:
        """The answer read off the stored output of the solution's code."""
        outputs = outputs if outputs is not None else load_outputs()
        text = outputs[self.notebook].get(self.block)
        if text is None:
            raise LookupError(f"{self.label}: book/_exercises/{self.notebook}.json has no "
                              f"output for {self.block!r} (make exercises)")
        m = re.search(self.pattern, text, flags=re.MULTILINE)
        if m is None:
            raise LookupError(f"{self.label}: {self.pattern!r} is not in the output of "
                              f"{self.block!r}:\n{text}")
        groups = m.groups()
        return groups[0] if len(groups) == 1 else groups


SPECS: tuple[Spec, ...] = (
    Spec("ex-01-1", "01_cbdt_theory", "ex-01-1/solution#0", r"^a\* = (\w+)$", "choice",
         "compute U(a|M,p) of the three actions with the Laplacian similarity "
         "exp(-||p - p_c|| / omega) and take the largest; cbdt.decide does the same.",
         form="the name of the chosen action, as in ACTIONS"),
    Spec("ex-01-2", "01_cbdt_theory", "ex-01-2/solution#0",
         r"^largest share: tau = -1 (\w+) tau = 1 (\w+)$", "choice",
         "rebuild the memory with utility=lambda r: r - tau, take the argmax of the supports on "
         "the grid of plots.support_grid with cbdt.GaussianSimilarity(1.0) and count the "
         "cells each action wins, for each tau.",
         form="a pair of action names, as in ACTIONS: (largest share at tau = -1, largest "
              "share at tau = 1)"),
    Spec("ex-02-2", "02_proposition1", "ex-02-2/solution#0", r"^\[\s*(\S+)\s", "number",
         "compute beta_24 @ R - Q[j] for the first query and take its first entry; part 1 "
         "says it equals eta @ (R - R_fitted) with eta = beta_24 - alpha_query.", decimals=3),
    Spec("ex-02-3", "02_proposition1", "ex-02-3/solution#0",
         r"^exact: (True|False)\nPhi\^T alpha = phi: (True|False)$", "choice",
         "compare alpha(x) @ R with the probe's scores, and Phi^T alpha(x) with phi(x), with "
         "np.allclose; with n < H, where can Phi^T beta lie?",
         form="a pair (yes/no, yes/no): (is Q = alpha R exact?, is Phi^T alpha(x) = phi(x) "
              "true?)"),
    Spec("ex-03-2", "03_invariance_whitening", "ex-03-2/solution#0",
         r"^lambda'/lambda = (\S+)$", "integer",
         "the co-transformed metric of B = t I is B B^T; fit cbdt.CaseInfluence(ridge=...) on "
         "t * Phi and compare its coefficients with the original ones."),
    Spec("ex-03-3", "03_invariance_whitening", "ex-03-3/solution#0",
         r"^(\d+) negative coefficients$", "integer",
         "find the unit k with (Phi > 0).all(axis=0), copy Phi_q[0], set its coordinate k to "
         "-0.5 and count the coefficients of cbdt.CaseInfluence().fit(Phi, R) below zero."),
    Spec("ex-04-2", "04_audit_signals", "ex-04-2/solution#0",
         r"^largest D_Gini: k = 10: (\S+) k = 3:", "number",
         "q_x(b) is a vote count divided by k; try every split of the k votes among the |A| "
         "actions (itertools.product) and take the largest 1 - sum_b q_x(b)^2.", decimals=3),
    Spec("ex-04-3", "04_audit_signals", "ex-04-3#0",
         r"^0\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s*$", "number",
         "only psi_5 changes; find the new top-3 set by |psi|, then O_alpha is the influence "
         "entropy plus the Gini disagreement.", decimals=3),
    Spec("ex-04-4", "04_audit_signals", "ex-04-4/solution#0",
         r"^unchanged \(a\), \(b\), \(c\): (True|False) (True|False) (True|False)$",
         "choice",
         "for each transformation ask what happens to alpha, to psi_i = alpha_i r_{i,a} and to "
         "the case-optimal actions; compare the columns action, entropy, gini and risk of "
         "cbdt.audit_signals(..., k=3) with the original ones (np.allclose).",
         form="three yes/no answers, for (a), (b), (c): whether the decision, entropy, Gini "
              "and risk stay unchanged"),
    Spec("ex-05-2", "05_synthetic_recovery", "ex-05-2/solution#0",
         r"^ω → ∞: action \d+ everywhere, support (\S+)$", "number",
         "as every similarity tends to one, U(a | M, p) tends to the sum over the memory's cases "
         "of n(c, M) u(r_c, a): M.frequencies @ M.supports of make_synthetic_cbdt(0).memory; "
         "take its largest entry.", decimals=3),
    Spec("ex-05-3", "05_synthetic_recovery", "ex-05-3/solution#0",
         r"^noise 0\.1: flipped share (\S+)$", "number",
         "average, over the seeds syn.SEEDS, the share of training cases with "
         "case_actions != a_train in make_synthetic_cbdt(seed, noise=0.1).", decimals=3),
    Spec("ex-05-4", "05_synthetic_recovery", "ex-05-4/solution#0",
         r"^0\s+0\s+\S+\s+\S+\s+(\w+)\s*$", "choice",
         "read the column probe_solver; ReLU units that are zero on every training problem "
         "make the Gram matrix singular.",
         form="the solver's name, as the column probe_solver prints it"),
    Spec("ex-06-4", "06_attribution_baselines", "ex-06-4/solution#0",
         r"^seed 0: observed actions \S+, true actions (\S+)$", "number",
         "topk_action_consistency(g_star, dd.a_train, dd.a_test, 30).mean() for seed 0, "
         "with g_star the ground truth at each test problem's true action.", decimals=3),
    Spec("ex-07-2", "07_pjm_audit", "ex-07-2/solution#0",
         r"^agreement rises: (True|False) share of aggressive bids rises: (True|False)$",
         "choice",
         "compare pjm.decision_agreement([r])['agreement'] with that of run0, and the share of "
         "test hours on which each network bids aggressive (r.nn_decision).",
         form="a pair (yes/no, yes/no): (does the agreement rise?, does the network's share "
              "of aggressive bids rise?)"),
    Spec("ex-07-3", "07_pjm_audit", "ex-07-3/solution#0", r"^(\d+) cases reach half",
         "integer",
         "sort the contributions by |psi_i|, add them up in that order (with their signs) and "
         "count until the running sum reaches half of the score."),
    Spec("ex-08-1", "08_uci_audits", "ex-08-1/solution#0", r"^seed 0: (\d+) of \d+ ",
         "integer",
         "count (r.network_action == 1) for the run of seed 0 in credit.runs."),
    Spec("ex-08-3", "08_uci_audits", "ex-08-3/solution#0", r"^True (\S+) \S+$", "number",
         "cbdt.geometry.gram_mismatch(P1, P2) (whiten=True is the default) on the two halves "
         "drawn, in this order, from np.random.default_rng(0).", decimals=3),
    Spec("ex-09-1", "09_drift_grid", "ex-09-1/solution#0",
         r"^seeds for p < 0\.05: (\d+) for p < 0\.01: (\d+)$", "choice",
         "the most extreme sign pattern is the only one as extreme as itself, in each tail; "
         "compare its two-sided p-value with each level as the number of seeds grows.",
         form="a pair of whole numbers (seeds for p < 0.05, seeds for p < 0.01)"),
    Spec("ex-09-3", "09_drift_grid", "ex-09-3/solution#0", r"^AUC risk (\S+) AUC probe",
         "number",
         "audit the probe's own decision (argmax of probe.scores) with eps=0.0, call it wrong "
         "where it differs from data.decide, and take cbdt.metrics.roc_auc(risk, wrong) on the "
         "chapter's inputs shifted by drift.shift_inputs(X0, 'covariate', 4.0, ...).",
         decimals=3),
    Spec("ex-10-2", "10_nystrom_scaling", "ex-10-2/solution#0", r"^(\S+) \S+$", "number",
         "average nys.topk_overlap(a, b, 30) over the random queries; landmarks with "
         "random_state=0.", decimals=2),
    Spec("ex-11-2", "11_audit_your_network", "ex-11-2/solution#0", r"^(\d+) dead units$",
         "integer",
         "a unit whose column of ct.features(relu, lay, X_train) is zero on every training "
         "digit gives a zero column of Phi; count those columns (the warning names them)."),
    Spec("ex-11-3", "11_audit_your_network", "ex-11-3/solution#0",
         r"^disagree on (\d+) test digits$", "integer",
         "compare fid.probe_scores.argmax(1) with fid.network_scores.argmax(1)."),
    Spec("ex-12-1", "12_engineering_appendix", "ex-12-1/solution#0",
         r"^digits lost: normal equations (\d+) a fit that factors Phi (\d+)$", "choice",
         "a backward-stable solve loses about log10 of the condition number of the matrix it "
         "works with: the normal equations work with G = Phi^T Phi, a factoring fit with Phi.",
         form="a pair of whole numbers (digits lost by the normal equations, digits lost by a "
              "fit that factors Phi)"),
)


#: The exercises without a self-check, each with the reason: no numeric or categorical answer
#: that a student computes (a proof, a verification whose outcome the exercise states, a
#: formula, a judgement, a timing). ``tests/test_selfcheck.py`` fails when an exercise of the
#: book is in neither this list nor :data:`SPECS`, so a new exercise must be decided on.
NO_CHECK: dict[str, str] = {
    "ex-01-3": "proofs of the two bandwidth limits; the code checks them on problems the "
               "student picks",
    "ex-02-1": "a verification whose outcome (beta = alpha(x), mu = -2 G^-1 phi(x)) the "
               "exercise states",
    "ex-03-1": "a proof; the answer to its question is a class of matrices (orthogonal B), "
               "not a value with one canonical spelling",
    "ex-04-1": "a proof (the bounds of the influence entropy)",
    "ex-05-1": "a proof; the code verifies the two identities the exercise states",
    "ex-06-1": "a derivation (the influence function of a linear head)",
    "ex-06-2": "a derivation; the code verifies the identity the exercise states",
    "ex-06-3": "a derivation; its answer is a formula (the constant 1/(lambda n |A|))",
    "ex-06-5": "a plot and a judgement (where to stop the ridge), no single value",
    "ex-07-1": "a proof; the code verifies the identity the exercise states",
    "ex-08-2": "a proof (the readouts of two sub-memories and of their union)",
    "ex-09-2": "a proof (the entropy floor of one-hot returns)",
    "ex-09-4": "a proof; the code verifies the identity the exercise states",
    "ex-10-1": "a proof (the Woodbury step); the code verifies it",
    "ex-10-3": "a flop count (a formula) and a timing, which depends on the machine",
    "ex-11-1": "a proof (the margin's decomposition over the training cases)",
    "ex-11-4": "an audit of the student's own network and data: the numbers depend on their "
               "choices",
    "ex-12-2": "its yes/no (the same top-10 cases) is what the appendix's Dask check already "
               "prints, its bound is a formula, and bit-for-bit equality depends on the machine",
    "ex-prop1-leverage": "a proof (the leverage is a diagonal entry of the hat matrix)",
    "ex-prop1-ridge-whitened": "a proof (ridge in whitened coordinates)",
    "ex-prop1-ridge-metric": "a verification whose outcome the exercise states",
}

def load_outputs() -> dict[str, dict[str, str]]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted(EXERCISES.glob("*.json"))}


def entries(outputs: dict[str, dict[str, str]] | None = None,
            allow_missing: bool = False) -> dict[str, dict[str, Any]]:
    """The data of :mod:`cbdt.book._selfcheck_answers`: digests, never answers.

    ``allow_missing`` leaves out an exercise whose output is not stored yet (a new check,
    before its first ``make exercises``) instead of raising.
    """
    outputs = outputs if outputs is not None else load_outputs()
    out: dict[str, dict[str, Any]] = {}
    for s in SPECS:
        try:
            answer = s.answer(outputs)
        except LookupError:
            if allow_missing:
                continue
            raise
        e: dict[str, Any] = {"kind": s.kind, "hint": s.hint}
        if s.kind == "number":
            e["decimals"] = s.decimals
        if s.kind == "choice":
            e["form"] = s.form
        e["digest"] = digest(s.label, canonical(s.kind, answer, s.decimals))
        out[s.label] = e
    return out


def render(data: dict[str, dict[str, Any]]) -> str:
    return ('"""Self-check data of the exercises: digests, hints and forms, no answer.\n\n'
            "Written by ``scripts/selfcheck_answers.py`` from the stored outputs of the "
            "solutions\n(``book/_exercises``); do not edit. The scheme: "
            ":mod:`cbdt.book.selfcheck`.\n\"\"\"\n\n"
            f"ANSWERS = {pprint.pformat(data, width=96, sort_dicts=True)}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    ap.add_argument("--allow-missing", action="store_true",
                    help="leave out exercises whose output is not stored yet")
    args = ap.parse_args(argv)
    data = entries(allow_missing=args.allow_missing)
    text = render(data)
    if args.check:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: python scripts/selfcheck_answers.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data)} of {len(SPECS)} exercises)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
