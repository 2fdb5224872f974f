"""Self-check data of the exercises: digests, hints and forms, no answer.

Written by ``scripts/selfcheck_answers.py`` from the stored outputs of the solutions
(``book/_exercises``); do not edit. The scheme: :mod:`cbdt.book.selfcheck`.
"""

ANSWERS = {'ex-01-1': {'digest': '2082594f1be6f6aecfa746c33787c4fca87d06856ce257db24bc6e815864cd14',
             'form': 'the name of the chosen action, as in ACTIONS',
             'hint': 'compute U(a|M,p) of the three actions with the Laplacian similarity '
                     'exp(-||p - p_c|| / omega) and take the largest; cbdt.decide does the '
                     'same.',
             'kind': 'choice'},
 'ex-01-2': {'digest': '027b9d6c62459b37e1d31acae7995d7b259c973c2858487e2cb4d641c95bab78',
             'form': 'a pair of action names, as in ACTIONS: (largest share at tau = -1, '
                     'largest share at tau = 1)',
             'hint': 'rebuild the memory with utility=lambda r: r - tau, take the argmax of '
                     'the supports on the grid of plots.support_grid with '
                     'cbdt.GaussianSimilarity(1.0) and count the cells each action wins, for '
                     'each tau.',
             'kind': 'choice'},
 'ex-02-2': {'decimals': 3,
             'digest': 'c5fb81ed117f0bc591556751a6820ddb340a3e012389e8665b73c2cb99e585fd',
             'hint': 'compute beta_24 @ R - Q[j] for the first query and take its first entry; '
                     'part 1 says it equals eta @ (R - R_fitted) with eta = beta_24 - '
                     'alpha_query.',
             'kind': 'number'},
 'ex-02-3': {'digest': '17114a7ba02b5eb09f1b99a0ea563a82431cdda3aaa281f1573100afde37cda5',
             'form': 'a pair (yes/no, yes/no): (is Q = alpha R exact?, is Phi^T alpha(x) = '
                     'phi(x) true?)',
             'hint': "compare alpha(x) @ R with the probe's scores, and Phi^T alpha(x) with "
                     'phi(x), with np.allclose; with n < H, where can Phi^T beta lie?',
             'kind': 'choice'},
 'ex-03-2': {'digest': '0ad1395ae0cc2a8ca8a26a5e7d1fb929e6fea2485840c1d1de7240ba7fd41d45',
             'hint': 'the co-transformed metric of B = t I is B B^T; fit '
                     'cbdt.CaseInfluence(ridge=...) on t * Phi and compare its coefficients '
                     'with the original ones.',
             'kind': 'integer'},
 'ex-03-3': {'digest': '2d0edab579e2f03d88cddfea5a9382dfaf4bcc17ff98aceb6522acfc8e61858f',
             'hint': 'find the unit k with (Phi > 0).all(axis=0), copy Phi_q[0], set its '
                     'coordinate k to -0.5 and count the coefficients of '
                     'cbdt.CaseInfluence().fit(Phi, R) below zero.',
             'kind': 'integer'},
 'ex-04-2': {'decimals': 3,
             'digest': '126dfbb1b87764df191f761064e2a6c827adadd7fd69b2318d248b59b1ffebe2',
             'hint': 'q_x(b) is a vote count divided by k; try every split of the k votes '
                     'among the |A| actions (itertools.product) and take the largest 1 - sum_b '
                     'q_x(b)^2.',
             'kind': 'number'},
 'ex-04-3': {'decimals': 3,
             'digest': '7d81b62bc743aea354ef085fe46c2f726e6045202433698625b33837eb09343a',
             'hint': 'only psi_5 changes; find the new top-3 set by |psi|, then O_alpha is the '
                     'influence entropy plus the Gini disagreement.',
             'kind': 'number'},
 'ex-04-4': {'digest': 'fafd05ca70367f3a83aef0e2fa9c9229f8642997e4434d1f3c8ec23321b76811',
             'form': 'three yes/no answers, for (a), (b), (c): whether the decision, entropy, '
                     'Gini and risk stay unchanged',
             'hint': 'for each transformation ask what happens to alpha, to psi_i = alpha_i '
                     'r_{i,a} and to the case-optimal actions; compare the columns action, '
                     'entropy, gini and risk of cbdt.audit_signals(..., k=3) with the original '
                     'ones (np.allclose).',
             'kind': 'choice'},
 'ex-05-2': {'decimals': 3,
             'digest': '7bddaaa376345e7119fdf0f5daa73b56e0cbe30fcf2b7f825809a00f41fc403b',
             'hint': 'as every similarity tends to one, U(a | M, p) tends to the sum over the '
                     "memory's cases of n(c, M) u(r_c, a): M.frequencies @ M.supports of "
                     'make_synthetic_cbdt(0).memory; take its largest entry.',
             'kind': 'number'},
 'ex-05-3': {'decimals': 3,
             'digest': '3d2471f661a6f2bc535ef9743875db9fc0fdae5a7b8347fa9b8b75522eacae88',
             'hint': 'average, over the seeds syn.SEEDS, the share of training cases with '
                     'case_actions != a_train in make_synthetic_cbdt(seed, noise=0.1).',
             'kind': 'number'},
 'ex-05-4': {'digest': '8288f08e7e07d23379d130e7cc9c4d581cb8410db52ad28cdf9f1858e6b7e0c9',
             'form': "the solver's name, as the column probe_solver prints it",
             'hint': 'read the column probe_solver; ReLU units that are zero on every training '
                     'problem make the Gram matrix singular.',
             'kind': 'choice'},
 'ex-06-4': {'decimals': 3,
             'digest': '8c9c6d7fd2b5cc88a7f3a62089bbc028f7e1121981dd0075c57da83780c4dabb',
             'hint': 'topk_action_consistency(g_star, dd.a_train, dd.a_test, 30).mean() for '
                     "seed 0, with g_star the ground truth at each test problem's true action.",
             'kind': 'number'},
 'ex-07-2': {'digest': 'ddf758804494628ca29fe2aeff79373316bb1ee7a3e362d85bd7501bc13f30f4',
             'form': "a pair (yes/no, yes/no): (does the agreement rise?, does the network's "
                     'share of aggressive bids rise?)',
             'hint': "compare pjm.decision_agreement([r])['agreement'] with that of run0, and "
                     'the share of test hours on which each network bids aggressive '
                     '(r.nn_decision).',
             'kind': 'choice'},
 'ex-07-3': {'digest': '3b77699f609177a896231e0da6e14c7cc43cd927658dfd1e403ee47af92b18c6',
             'hint': 'sort the contributions by |psi_i|, add them up in that order (with their '
                     'signs) and count until the running sum reaches half of the score.',
             'kind': 'integer'},
 'ex-08-1': {'digest': '8bdee78c276fd98bd457c03617b1d652cb2ef11df452c11963ee66dcc83deee8',
             'hint': 'count (r.network_action == 1) for the run of seed 0 in credit.runs.',
             'kind': 'integer'},
 'ex-08-3': {'decimals': 3,
             'digest': '5cc3d53678a5ddace5e70755ef131cc587a64dd01b8d76f6cc29d0ceecc47064',
             'hint': 'cbdt.geometry.gram_mismatch(P1, P2) (whiten=True is the default) on the '
                     'two halves drawn, in this order, from np.random.default_rng(0).',
             'kind': 'number'},
 'ex-09-1': {'digest': 'e193430c4c1f17a926166d78cb34eee85229596ff18157128e8a666102e68102',
             'form': 'a pair of whole numbers (seeds for p < 0.05, seeds for p < 0.01)',
             'hint': 'the most extreme sign pattern is the only one as extreme as itself, in '
                     'each tail; compare its two-sided p-value with each level as the number '
                     'of seeds grows.',
             'kind': 'choice'},
 'ex-09-3': {'decimals': 3,
             'digest': '79bb41685bcf75afc8113287f4b8561f0e9e889093ce730c2e8791d1a891dcc6',
             'hint': "audit the probe's own decision (argmax of probe.scores) with eps=0.0, "
                     'call it wrong where it differs from data.decide, and take '
                     "cbdt.metrics.roc_auc(risk, wrong) on the chapter's inputs shifted by "
                     "drift.shift_inputs(X0, 'covariate', 4.0, ...).",
             'kind': 'number'},
 'ex-10-2': {'decimals': 2,
             'digest': 'cedfbb4995d32908254b5cb5845724bb5231d7a8e868618305fa94d0fc1bc01f',
             'hint': 'average nys.topk_overlap(a, b, 30) over the random queries; landmarks '
                     'with random_state=0.',
             'kind': 'number'},
 'ex-11-2': {'digest': '01d95f21a43c82c997fcf646d7220e1e57a3e14fe042af0c62b4c3aa835945b3',
             'hint': 'a unit whose column of ct.features(relu, lay, X_train) is zero on every '
                     'training digit gives a zero column of Phi; count those columns (the '
                     'warning names them).',
             'kind': 'integer'},
 'ex-11-3': {'digest': '5b6ebbefc5364fdafffb61f36f6a58d84687109818c8c811e3af57cff2bdfe51',
             'hint': 'compare fid.probe_scores.argmax(1) with fid.network_scores.argmax(1).',
             'kind': 'integer'},
 'ex-12-1': {'digest': '315908c78085e3dee1c7bb09164b6003271e58b55427386b8c956bece2830fb5',
             'form': 'a pair of whole numbers (digits lost by the normal equations, digits '
                     'lost by a fit that factors Phi)',
             'hint': 'a backward-stable solve loses about log10 of the condition number of the '
                     'matrix it works with: the normal equations work with G = Phi^T Phi, a '
                     'factoring fit with Phi.',
             'kind': 'choice'}}
