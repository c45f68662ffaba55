//! Sets of attribute positions of any size: the keys of marginal
//! workloads and of the residual basis.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// A set of attribute positions (position i = the domain's i-th
/// attribute), with no bound on the positions.
///
/// A set whose members are all below 128 (every marginal of a domain of
/// up to 128 attributes) is one inline `u128`; a larger one shares a
/// slice of words, so cloning never copies. The representation is
/// canonical: equality and hashing are by membership. Sets are ordered as
/// the binary numbers their members spell (bit i = position i), which for
/// small sets is the order of their `u128` masks.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AttrSet(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    Small(u128),
    /// Little-endian words: more than two, the last non-zero.
    Wide(Arc<[u64]>),
}

impl AttrSet {
    /// The empty set (the total query's marginal).
    pub const EMPTY: AttrSet = AttrSet(Repr::Small(0));

    /// The set whose members are the set bits of `bits`.
    pub const fn from_bits(bits: u128) -> Self {
        AttrSet(Repr::Small(bits))
    }

    /// `{i}`.
    pub fn singleton(i: usize) -> Self {
        Self::EMPTY.with(i)
    }

    /// The set of the given positions (repeats are kept once).
    pub fn from_members(members: impl IntoIterator<Item = usize>) -> Self {
        let mut words: Vec<u64> = vec![0; 2];
        for i in members {
            let w = i / 64;
            if w >= words.len() {
                words.resize(w + 1, 0);
            }
            words[w] |= 1 << (i % 64);
        }
        Self::from_words(words)
    }

    /// The canonical set of little-endian `words`.
    fn from_words(mut words: Vec<u64>) -> Self {
        while words.last() == Some(&0) {
            words.pop();
        }
        match words.len() {
            0 => Self::EMPTY,
            1 => Self::from_bits(u128::from(words[0])),
            2 => Self::from_bits(u128::from(words[0]) | u128::from(words[1]) << 64),
            _ => AttrSet(Repr::Wide(words.into())),
        }
    }

    /// The number of words spelling the set (at least two).
    fn word_count(&self) -> usize {
        match &self.0 {
            Repr::Small(_) => 2,
            Repr::Wide(w) => w.len(),
        }
    }

    /// Word `k` (zero past the end).
    fn word(&self, k: usize) -> u64 {
        match &self.0 {
            Repr::Small(b) => match k {
                0 => *b as u64,
                1 => (*b >> 64) as u64,
                _ => 0,
            },
            Repr::Wide(w) => w.get(k).copied().unwrap_or(0),
        }
    }

    /// Whether position `i` is a member.
    pub fn contains(&self, i: usize) -> bool {
        match &self.0 {
            Repr::Small(b) => i < 128 && b >> i & 1 == 1,
            Repr::Wide(_) => self.word(i / 64) >> (i % 64) & 1 == 1,
        }
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Small(b) => b.count_ones() as usize,
            Repr::Wide(w) => w.iter().map(|x| x.count_ones() as usize).sum(),
        }
    }

    /// Whether the set has no member.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Repr::Small(0))
    }

    /// The largest member, `None` when empty.
    pub fn max_member(&self) -> Option<usize> {
        match &self.0 {
            Repr::Small(0) => None,
            Repr::Small(b) => Some(127 - b.leading_zeros() as usize),
            Repr::Wide(w) => {
                let k = w.len() - 1;
                Some(64 * k + 63 - w[k].leading_zeros() as usize)
            }
        }
    }

    /// This set with `i` added.
    pub fn with(&self, i: usize) -> Self {
        match &self.0 {
            Repr::Small(b) if i < 128 => Self::from_bits(b | 1 << i),
            _ => self.zip(&Self::singleton_wide(i), |a, b| a | b),
        }
    }

    /// This set with `i` removed.
    pub fn without(&self, i: usize) -> Self {
        match &self.0 {
            Repr::Small(b) => Self::from_bits(if i < 128 { b & !(1 << i) } else { *b }),
            Repr::Wide(_) => self.zip(&Self::singleton_wide(i), |a, b| a & !b),
        }
    }

    /// `{i}` as words, whatever `i` (only used as an operand of `zip`).
    fn singleton_wide(i: usize) -> Self {
        let mut words = vec![0; i / 64 + 1];
        words[i / 64] = 1 << (i % 64);
        Self::from_words(words)
    }

    /// The word-wise combination of two sets (`f(0, 0)` must be 0).
    fn zip(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        let n = self.word_count().max(other.word_count());
        Self::from_words((0..n).map(|k| f(self.word(k), other.word(k))).collect())
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &Self) -> Self {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => Self::from_bits(a | b),
            _ => self.zip(other, |a, b| a | b),
        }
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &Self) -> Self {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => Self::from_bits(a & b),
            _ => self.zip(other, |a, b| a & b),
        }
    }

    /// `self \ other`.
    pub fn difference(&self, other: &Self) -> Self {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => Self::from_bits(a & !b),
            _ => self.zip(other, |a, b| a & !b),
        }
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => a & !b == 0,
            _ => (0..self.word_count()).all(|k| self.word(k) & !other.word(k) == 0),
        }
    }

    /// Whether the two sets share no member.
    pub fn is_disjoint(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => a & b == 0,
            _ => (0..self.word_count()).all(|k| self.word(k) & other.word(k) == 0),
        }
    }

    /// The members, ascending.
    pub fn members(&self) -> Members<'_> {
        Members {
            set: self,
            next_word: 1,
            current: self.word(0),
            base: 0,
        }
    }

    /// Every subset of this set (`2^len` of them, the set itself first and
    /// the empty set last): callers bound `len` before enumerating.
    pub fn subsets(&self) -> Subsets {
        Subsets {
            of: self.clone(),
            next: Some(self.clone()),
        }
    }

    /// The set as one `u128` mask, when every member is below 128.
    pub fn as_bits(&self) -> Option<u128> {
        match self.0 {
            Repr::Small(b) => Some(b),
            Repr::Wide(_) => None,
        }
    }
}

impl Default for AttrSet {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Ord for AttrSet {
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            (Repr::Small(a), Repr::Small(b)) => a.cmp(b),
            (Repr::Small(_), Repr::Wide(_)) => Ordering::Less,
            (Repr::Wide(_), Repr::Small(_)) => Ordering::Greater,
            (Repr::Wide(a), Repr::Wide(b)) => a
                .len()
                .cmp(&b.len())
                .then_with(|| a.iter().rev().cmp(b.iter().rev())),
        }
    }
}

impl PartialOrd for AttrSet {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for AttrSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.members()).finish()
    }
}

impl fmt::Display for AttrSet {
    /// `{0,3,7}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (k, i) in self.members().enumerate() {
            if k > 0 {
                f.write_str(",")?;
            }
            write!(f, "{i}")?;
        }
        f.write_str("}")
    }
}

impl From<u128> for AttrSet {
    fn from(bits: u128) -> Self {
        Self::from_bits(bits)
    }
}

impl FromIterator<usize> for AttrSet {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        Self::from_members(iter)
    }
}

/// The members of an [`AttrSet`], ascending.
pub struct Members<'a> {
    set: &'a AttrSet,
    next_word: usize,
    current: u64,
    base: usize,
}

impl Iterator for Members<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        while self.current == 0 {
            if self.next_word >= self.set.word_count() {
                return None;
            }
            self.current = self.set.word(self.next_word);
            self.base = 64 * self.next_word;
            self.next_word += 1;
        }
        let bit = self.current.trailing_zeros() as usize;
        self.current &= self.current - 1;
        Some(self.base + bit)
    }
}

/// The subsets of an [`AttrSet`], by the sub-mask walk `t ← (t − 1) ∧ S`
/// (descending as numbers).
pub struct Subsets {
    of: AttrSet,
    next: Option<AttrSet>,
}

impl Iterator for Subsets {
    type Item = AttrSet;

    fn next(&mut self) -> Option<AttrSet> {
        let t = self.next.take()?;
        if !t.is_empty() {
            self.next = Some(match (&t.0, &self.of.0) {
                (Repr::Small(t), Repr::Small(s)) => AttrSet::from_bits((t - 1) & s),
                _ => {
                    let n = self.of.word_count();
                    let mut words: Vec<u64> = (0..n).map(|k| t.word(k)).collect();
                    // t − 1 (t > 0, so the borrow stops inside the words).
                    for w in words.iter_mut() {
                        let borrow = *w == 0;
                        *w = w.wrapping_sub(1);
                        if !borrow {
                            break;
                        }
                    }
                    for (k, w) in words.iter_mut().enumerate() {
                        *w &= self.of.word(k);
                    }
                    AttrSet::from_words(words)
                }
            });
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Sets of positions below 256 as sorted vectors, the independent
    /// truth the bit operations are checked against.
    fn sample_sets() -> Vec<BTreeSet<usize>> {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut out = vec![
            BTreeSet::new(),
            BTreeSet::from([0]),
            BTreeSet::from([127, 128]),
        ];
        for _ in 0..200 {
            let len = (next() % 6) as usize;
            let span = [10u64, 64, 128, 129, 256][(next() % 5) as usize];
            out.push((0..len).map(|_| (next() % span) as usize).collect());
        }
        out
    }

    fn set(s: &BTreeSet<usize>) -> AttrSet {
        s.iter().copied().collect()
    }

    #[test]
    fn operations_agree_with_sorted_sets() {
        let sets = sample_sets();
        for a in &sets {
            let x = set(a);
            assert_eq!(
                x.members().collect::<Vec<_>>(),
                a.iter().copied().collect::<Vec<_>>()
            );
            assert_eq!(x.len(), a.len());
            assert_eq!(x.is_empty(), a.is_empty());
            assert_eq!(x.max_member(), a.last().copied());
            assert_eq!(x.as_bits().is_some(), a.iter().all(|&i| i < 128));
            for i in [0, 5, 63, 64, 127, 128, 200, 255, 1000] {
                assert_eq!(x.contains(i), a.contains(&i));
                let mut plus = a.clone();
                plus.insert(i);
                assert_eq!(x.with(i), set(&plus));
                let mut minus = a.clone();
                minus.remove(&i);
                assert_eq!(x.without(i), set(&minus));
            }
            for b in sets.iter().take(40) {
                let y = set(b);
                assert_eq!(x.union(&y), set(&a.union(b).copied().collect()));
                assert_eq!(
                    x.intersection(&y),
                    set(&a.intersection(b).copied().collect())
                );
                assert_eq!(x.difference(&y), set(&a.difference(b).copied().collect()));
                assert_eq!(x.is_subset(&y), a.is_subset(b));
                assert_eq!(x.is_disjoint(&y), a.is_disjoint(b));
                // Ordered as the binary numbers: the larger top member
                // wins, ties go to the rest.
                let key = |s: &BTreeSet<usize>| s.iter().rev().copied().collect::<Vec<_>>();
                let expect = if a == b {
                    Ordering::Equal
                } else {
                    let (ka, kb) = (key(a), key(b));
                    let first = ka.iter().zip(&kb).find(|(p, q)| p != q);
                    match first {
                        Some((p, q)) => p.cmp(q),
                        None => ka.len().cmp(&kb.len()),
                    }
                };
                assert_eq!(x.cmp(&y), expect, "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn small_sets_order_and_hash_as_their_masks() {
        let masks = [0u128, 1, 6, 1 << 100, (1 << 127) | 3];
        for &a in &masks {
            for &b in &masks {
                assert_eq!(AttrSet::from_bits(a).cmp(&AttrSet::from_bits(b)), a.cmp(&b));
            }
            let from_members: AttrSet = (0..128).filter(|&i| a >> i & 1 == 1).collect();
            assert_eq!(from_members, AttrSet::from_bits(a));
        }
        // Removing the only wide member gives back the inline form.
        let wide = AttrSet::from_members([3, 300]);
        assert_eq!(wide.without(300), AttrSet::from_bits(8));
        assert_eq!(wide.without(300).as_bits(), Some(8));
    }

    #[test]
    fn subsets_are_every_subset_once() {
        for a in sample_sets() {
            let x = set(&a);
            let subs: Vec<AttrSet> = x.subsets().collect();
            assert_eq!(subs.len(), 1 << a.len());
            assert_eq!(subs.first(), Some(&x));
            assert_eq!(subs.last(), Some(&AttrSet::EMPTY));
            let distinct: BTreeSet<&AttrSet> = subs.iter().collect();
            assert_eq!(distinct.len(), subs.len());
            assert!(subs.iter().all(|t| t.is_subset(&x)));
            assert!(subs.windows(2).all(|w| w[0] > w[1]), "descending");
        }
    }

    #[test]
    fn display_lists_members() {
        assert_eq!(AttrSet::from_members([2, 0, 200]).to_string(), "{0,2,200}");
        assert_eq!(AttrSet::EMPTY.to_string(), "{}");
    }
}
