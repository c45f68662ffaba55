//! The 2010 Census Summary File 1 "Persons" workload used by HDMM
//! (McKenna et al. VLDB 2018, §8), built from the SF1 table definitions
//! (U.S. Census Bureau, *2010 Census Summary File 1 Technical
//! Documentation*, SF1/10-4, chapter 7 "Data Dictionary": tables P1, P3,
//! P4, P5, P8, P9, P10, P11, P12, P12A–I, PCT12, PCT12A–O).
//!
//! Domain, in this order (500,480 cells):
//!
//! | attribute      | size | values |
//! |----------------|------|--------|
//! | `sex`          | 2    | 0 male, 1 female |
//! | `hispanic`     | 2    | 0 Hispanic or Latino, 1 not Hispanic or Latino |
//! | `race`         | 64   | bit mask of the races reported: bit 0 White, 1 Black or African American, 2 American Indian and Alaska Native, 3 Asian, 4 Native Hawaiian and Other Pacific Islander, 5 Some Other Race (0: none reported, in no race category) |
//! | `relationship` | 17   | relationship to householder (summed out by every table here) |
//! | `age`          | 115  | years 0…114, 114 meaning 114 and over |
//!
//! Each table is a union of Kronecker products (attributes not named are
//! summed out); a table's total row that another table already has is
//! kept, as the published tables repeat it. Rows within a product follow
//! the spec order (docs/formats.md), not the published line order.

use dp_linalg::Mat;

use super::{AttrSet, Factor, Queries, QueryGroup, StructuredWorkload};
use crate::domain::{Domain, SResult};

const SIZES: [(&str, usize); 5] = [
    ("sex", 2),
    ("hispanic", 2),
    ("race", 64),
    ("relationship", 17),
    ("age", 115),
];

/// The SF1 age groups of P12 (P12A–I): under 5, 5–9, 10–14, 15–17, 18–19,
/// 20, 21, 22–24, 25–29, …, 60–61, 62–64, 65–66, 67–69, 70–74, 75–79,
/// 80–84, 85 and over — as lower ends; each group runs to the next.
const P12_AGE_STARTS: [usize; 23] = [
    0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85,
];

/// One factor per attribute, `Total` where `given` names none.
fn product(given: &[(usize, Factor)]) -> Vec<Factor> {
    SIZES
        .iter()
        .enumerate()
        .map(|(i, &(_, n))| {
            given
                .iter()
                .find(|(p, _)| *p == i)
                .map_or(Factor::Total(n), |(_, f)| f.clone())
        })
        .collect()
}

fn ranges(attribute: usize, r: &[(usize, usize)]) -> SResult<Factor> {
    let (name, size) = SIZES[attribute];
    Factor::ranges(
        name,
        size,
        r.iter().map(|&(lo, hi)| (lo as i128, hi as i128)).collect(),
    )
}

/// Races reported by race code `c`.
fn races(c: usize) -> u32 {
    c.count_ones()
}

/// The 7 race categories of P3/P5/P12A–G: each race alone (code 2ⁱ), then
/// two or more races.
fn race_alone_or_two_plus() -> SResult<Factor> {
    let m = Mat::from_fn(7, 64, |r, c| {
        let hit = if r < 6 { c == 1 << r } else { races(c) >= 2 };
        f64::from(u8::from(hit))
    });
    Factor::matrix("race", 64, m)
}

/// The race rows of P8 (and P9–P11): the 63 race combinations, the number
/// of races reported (1 … 6), and two or more races.
fn race_combinations() -> SResult<Factor> {
    let m = Mat::from_fn(70, 64, |r, c| {
        let hit = match r {
            0..63 => c == r + 1,
            63..69 => races(c) as usize == r - 62,
            _ => races(c) >= 2,
        };
        f64::from(u8::from(hit))
    });
    Factor::matrix("race", 64, m)
}

/// The tables, in the order of the module doc, as `(label, products)`.
pub fn sf1_persons_tables() -> SResult<Vec<(String, Vec<Vec<Factor>>)>> {
    const SEX: usize = 0;
    const HISP: usize = 1;
    const RACE: usize = 2;
    const AGE: usize = 4;
    let total = product(&[]);
    let hisp_both = Factor::Identity(2);
    let hispanic = ranges(HISP, &[(0, 0)])?;
    let not_hispanic = ranges(HISP, &[(1, 1)])?;
    let sex_each_and_total = ranges(SEX, &[(0, 0), (1, 1), (0, 1)])?;
    let white_alone = ranges(RACE, &[(1, 1)])?;
    let race7 = race_alone_or_two_plus()?;
    let race70 = race_combinations()?;
    let adult = ranges(AGE, &[(18, 114)])?;
    let p12_ages: Vec<(usize, usize)> = P12_AGE_STARTS
        .iter()
        .enumerate()
        .map(|(k, &lo)| (lo, P12_AGE_STARTS.get(k + 1).map_or(114, |&h| h - 1)))
        .collect();
    let age23 = ranges(AGE, &p12_ages)?;
    // PCT12: single years under 100, then 100–104, 105–109, 110 and over.
    let mut single: Vec<(usize, usize)> = (0..100).map(|a| (a, a)).collect();
    single.extend([(100, 104), (105, 109), (110, 114)]);
    let age103 = ranges(AGE, &single)?;
    let sexed = |race_rows: Option<(usize, Factor)>, hisp: Option<Factor>, ages: &Factor| {
        let mut by_age = vec![(SEX, Factor::Identity(2)), (AGE, ages.clone())];
        let mut totals = vec![(SEX, sex_each_and_total.clone())];
        for extra in [race_rows, hisp.map(|h| (HISP, h))].into_iter().flatten() {
            by_age.push(extra.clone());
            totals.push(extra);
        }
        vec![product(&by_age), product(&totals)]
    };
    // P12A–I and PCT12A–O: by race alone (A–G), Hispanic (H), not
    // Hispanic by race: White alone (P12I) or every category (PCT12I–O).
    let by_race = |ages: &Factor, not_hisp_race: &Factor| {
        let mut out = sexed(Some((RACE, race7.clone())), None, ages);
        out.extend(sexed(None, Some(hispanic.clone()), ages));
        out.extend(sexed(
            Some((RACE, not_hisp_race.clone())),
            Some(not_hispanic.clone()),
            ages,
        ));
        out
    };
    let tables = vec![
        ("P1", vec![total.clone()]),
        ("P3", vec![product(&[(RACE, race7.clone())]), total.clone()]),
        (
            "P4",
            vec![product(&[(HISP, hisp_both.clone())]), total.clone()],
        ),
        (
            "P5",
            vec![
                product(&[(HISP, hisp_both.clone()), (RACE, race7.clone())]),
                product(&[(HISP, ranges(HISP, &[(0, 0), (1, 1), (0, 1)])?)]),
            ],
        ),
        (
            "P8",
            vec![product(&[(RACE, race70.clone())]), total.clone()],
        ),
        (
            "P9",
            vec![
                product(&[(HISP, hisp_both.clone())]),
                product(&[(HISP, not_hispanic.clone()), (RACE, race70.clone())]),
                total.clone(),
            ],
        ),
        (
            "P10",
            vec![
                product(&[(RACE, race70.clone()), (AGE, adult.clone())]),
                product(&[(AGE, adult.clone())]),
            ],
        ),
        (
            "P11",
            vec![
                product(&[(HISP, hisp_both.clone()), (AGE, adult.clone())]),
                product(&[
                    (HISP, not_hispanic.clone()),
                    (RACE, race70.clone()),
                    (AGE, adult.clone()),
                ]),
                product(&[(AGE, adult.clone())]),
            ],
        ),
        ("P12", sexed(None, None, &age23)),
        ("P12A-I", by_race(&age23, &white_alone)),
        ("PCT12", sexed(None, None, &age103)),
        ("PCT12A-O", by_race(&age103, &race7)),
    ];
    Ok(tables
        .into_iter()
        .map(|(l, p)| (l.to_string(), p))
        .collect())
}

/// The SF1 Persons workload: every product of [`sf1_persons_tables`] as a
/// query group of weight 1, labelled `TABLE#k`.
pub fn sf1_persons() -> SResult<StructuredWorkload> {
    let domain = Domain::from_pairs(&SIZES)?;
    let mut groups = Vec::new();
    for (label, products) in sf1_persons_tables()? {
        for (k, factors) in products.into_iter().enumerate() {
            groups.push(QueryGroup {
                label: format!("{label}#{k}"),
                weight: 1.0,
                queries: Queries::Kron(factors),
            });
        }
    }
    StructuredWorkload::new(domain, groups)
}

/// Weighted marginals on the SF1 Persons domain (sex, hispanic, race,
/// relationship, age), a census-style marginal workload of mixed weights
/// for the side-by-sides with HDMM: sex × age (weight 2), hispanic × race
/// (1), race × age (0.5), relationship (1), sex × hispanic × relationship
/// (1.5) and the total (3), one group each, labelled by the attribute mask.
pub fn census_marginals() -> SResult<StructuredWorkload> {
    let weighted: [(u128, f64); 6] = [
        (0b10001, 2.0),
        (0b00110, 1.0),
        (0b10100, 0.5),
        (0b01000, 1.0),
        (0b01011, 1.5),
        (0, 3.0),
    ];
    let groups = weighted
        .iter()
        .map(|&(s, weight)| QueryGroup {
            label: format!("m{s:05b}"),
            weight,
            queries: Queries::Marginals(vec![AttrSet::from_bits(s)]),
        })
        .collect();
    StructuredWorkload::new(Domain::from_pairs(&SIZES)?, groups)
}
