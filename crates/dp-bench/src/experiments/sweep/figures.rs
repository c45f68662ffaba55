//! The vary-n/m/s figures of the LRM paper (Figs. 4–9) and the COA paper
//! (Figs. 2–10): for each, the paper, the workload family, the varied
//! parameter and the paper's finding, run by [`Sweep`]'s shared runner.

use super::Family::{Discrete, Marginal, Range, Related};
use super::Paper::{Coa, Lrm};
use super::Sweep;
use super::Vary::{M, N, S};
use crate::About;

/// The figures, in listing order.
pub(super) const FIGURES: [Sweep; 15] = [
    Sweep {
        about: About {
            name: "lrm-fig4",
            reproduces: "LRM paper, Figure 4: vary n on WDiscrete (ε = 0.1)",
        },
        paper: Lrm,
        family: Discrete,
        vary: N,
        claim: "LM is best at small n; LRM's error stops growing past n = 512 (rank(W) ≤ min(m, n)) and it is best on large domains; AMM (ESM here) is much worse than the others, sometimes by an order of magnitude (§6.2).",
    },
    Sweep {
        about: About {
            name: "lrm-fig5",
            reproduces: "LRM paper, Figure 5: vary n on WRange (ε = 0.1)",
        },
        paper: Lrm,
        family: Range,
        vary: N,
        claim: "WM and HM beat LM once n ≥ 512; LRM is significantly better than all of them; AMM (ESM) is much worse (§6.2).",
    },
    Sweep {
        about: About {
            name: "lrm-fig6",
            reproduces: "LRM paper, Figure 6: vary n on WRelated (ε = 0.1)",
        },
        paper: Lrm,
        family: Related,
        vary: N,
        claim: "LRM is best in all cases, over two orders of magnitude below the others at n = 8192 (§6.2).",
    },
    Sweep {
        about: About {
            name: "lrm-fig7",
            reproduces: "LRM paper, Figure 7: vary m on WRange (ε = 0.1)",
        },
        paper: Lrm,
        family: Range,
        vary: M,
        claim: "LRM outperforms the others when m is much smaller than n; as m grows all converge, and at m = 1024 WM is best (§6.3; the paper drops AMM here).",
    },
    Sweep {
        about: About {
            name: "lrm-fig8",
            reproduces: "LRM paper, Figure 8: vary m on WRelated (ε = 0.1)",
        },
        paper: Lrm,
        family: Related,
        vary: M,
        claim: "LRM is dramatically better than the others for any m (§6.3).",
    },
    Sweep {
        about: About {
            name: "lrm-fig9",
            reproduces: "LRM paper, Figure 9: vary the rank s of WRelated (ε = 0.1)",
        },
        paper: Lrm,
        family: Related,
        vary: S,
        claim: "LRM is over two orders of magnitude better at low rank; its error grows rapidly with s while the others stay stable (§6.4).",
    },
    Sweep {
        about: About {
            name: "coa-fig2",
            reproduces: "COA paper, Figure 2: vary n on WDiscrete (m = 1024)",
        },
        paper: Coa,
        family: Discrete,
        vary: N,
        claim: "COA and LRM achieve the best performance, over two orders of magnitude below GM at large n.",
    },
    Sweep {
        about: About {
            name: "coa-fig3",
            reproduces: "COA paper, Figure 3: vary n on WMarginal (m = 1024)",
        },
        paper: Coa,
        family: Marginal,
        vary: N,
        claim: "COA and LRM are best; ESM and AM are unstable on WMarginal.",
    },
    Sweep {
        about: About {
            name: "coa-fig4",
            reproduces: "COA paper, Figure 4: vary n on WRange (m = 1024)",
        },
        paper: Coa,
        family: Range,
        vary: N,
        claim: "COA and LRM are best; WM and HM are good on range queries.",
    },
    Sweep {
        about: About {
            name: "coa-fig5",
            reproduces: "COA paper, Figure 5: vary n on WRelated (m = 1024)",
        },
        paper: Coa,
        family: Related,
        vary: N,
        claim: "COA and LRM are far below GM on low-rank workloads, especially for large n.",
    },
    Sweep {
        about: About {
            name: "coa-fig6",
            reproduces: "COA paper, Figure 6: vary m on WDiscrete (n = 512)",
        },
        paper: Coa,
        family: Discrete,
        vary: M,
        claim: "COA is best or comparable to LRM for every m.",
    },
    Sweep {
        about: About {
            name: "coa-fig7",
            reproduces: "COA paper, Figure 7: vary m on WMarginal (n = 512)",
        },
        paper: Coa,
        family: Marginal,
        vary: M,
        claim: "COA is best; ESM and AM are unstable on WMarginal.",
    },
    Sweep {
        about: About {
            name: "coa-fig8",
            reproduces: "COA paper, Figure 8: vary m on WRange (n = 512)",
        },
        paper: Coa,
        family: Range,
        vary: M,
        claim: "COA is best; WM and HM are competitive on ranges.",
    },
    Sweep {
        about: About {
            name: "coa-fig9",
            reproduces: "COA paper, Figure 9: vary m on WRelated (n = 512)",
        },
        paper: Coa,
        family: Related,
        vary: M,
        claim: "COA and LRM are far below GM on WRelated.",
    },
    Sweep {
        about: About {
            name: "coa-fig10",
            reproduces: "COA paper, Figure 10: vary the rank s of WRelated",
        },
        paper: Coa,
        family: Related,
        vary: S,
        claim: "COA's advantage over GM is largest for small s.",
    },
];
