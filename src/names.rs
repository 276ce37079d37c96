//! Did you mean: the known name closest to a mistyped one (rule fields, operators, features,
//! elements, config keys and values).

/// The candidate closest to `word` (ignoring case; a transposition counts as one edit), when
/// it is close enough to be a typo: at most one edit per three characters.
pub fn closest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = word.chars().count() / 3;
    let w = word.to_lowercase();
    candidates
        .map(|c| (edit_distance(&w, &c.to_lowercase()), c))
        .filter(|(d, c)| *d <= limit && *c != word)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edits_and_transpositions() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("enabled", "enabld"), 1);
        assert_eq!(edit_distance("memroy", "memory"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(
            closest("enabld", ["enabled", "labels"].into_iter()),
            Some("enabled")
        );
        assert_eq!(closest("xyz", ["enabled"].into_iter()), None);
    }
}
