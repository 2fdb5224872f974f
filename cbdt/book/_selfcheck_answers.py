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
 'ex-04-3': {'decimals': 3,
             'digest': '7d81b62bc743aea354ef085fe46c2f726e6045202433698625b33837eb09343a',
             'hint': 'only psi_5 changes; find the new top-3 set by |psi|, then O_alpha is the '
                     'influence entropy plus the Gini disagreement.',
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
 'ex-07-3': {'digest': '3b77699f609177a896231e0da6e14c7cc43cd927658dfd1e403ee47af92b18c6',
             'hint': 'sort the contributions by |psi_i|, add them up in that order (with their '
                     'signs) and count until the running sum reaches half of the score.',
             'kind': 'integer'},
 'ex-08-1': {'digest': '8bdee78c276fd98bd457c03617b1d652cb2ef11df452c11963ee66dcc83deee8',
             'hint': 'count (r.network_action == 1) for the run of seed 0 in credit.runs.',
             'kind': 'integer'},
 'ex-09-1': {'digest': 'e193430c4c1f17a926166d78cb34eee85229596ff18157128e8a666102e68102',
             'form': 'a pair of whole numbers (seeds for p < 0.05, seeds for p < 0.01)',
             'hint': 'the most extreme sign pattern is the only one as extreme as itself, in '
                     'each tail; compare its two-sided p-value with each level as the number '
                     'of seeds grows.',
             'kind': 'choice'},
 'ex-10-2': {'decimals': 2,
             'digest': 'cedfbb4995d32908254b5cb5845724bb5231d7a8e868618305fa94d0fc1bc01f',
             'hint': 'average nys.topk_overlap(a, b, 30) over the random queries; landmarks '
                     'with random_state=0.',
             'kind': 'number'},
 'ex-11-3': {'digest': '5b6ebbefc5364fdafffb61f36f6a58d84687109818c8c811e3af57cff2bdfe51',
             'hint': 'compare fid.probe_scores.argmax(1) with fid.network_scores.argmax(1).',
             'kind': 'integer'}}
