//! Patterns that are fixed sequences: literal characters and character classes, optionally
//! anchored at the start (`^`, `\A`) and the end (`$`, `\z`), with groups and flags that the
//! parser folds away (`(?i)10DE` is four classes). Operators' rules are mostly these
//! (`^10de`, `^2[0-3]`, `^(0300|0302)$` is not one). They match in the obvious way, without the
//! automata a `regex::RegexSet` builds: a regex set costs tens of microseconds to build and
//! rule sets have hundreds of distinct pattern lists. Anything else is left to `regex`.

use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// One pattern: a sequence of character sets, each as sorted inclusive ranges.
#[derive(Debug, Clone)]
pub struct Sequence {
    start: bool,
    end: bool,
    items: Vec<Vec<(char, char)>>,
}

impl Sequence {
    /// The pattern (already in Rust's syntax) as a sequence, when it is one; parsed as
    /// `regex::Regex::new` parses it.
    pub fn parse(pattern: &str) -> Option<Sequence> {
        let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
        let mut parts = Vec::new();
        flatten(&hir, &mut parts)?;
        let start = matches!(parts.first(), Some(Part::Start));
        if start {
            parts.remove(0);
        }
        let end = matches!(parts.last(), Some(Part::End));
        if end {
            parts.pop();
        }
        let mut items = Vec::with_capacity(parts.len());
        for part in parts {
            match part {
                Part::Set(set) => items.push(set),
                // An anchor inside the sequence (`a^b`): left to the regex engine.
                Part::Start | Part::End => return None,
            }
        }
        Some(Sequence { start, end, items })
    }

    /// Whether the pattern matches somewhere in `text` (`Regex::is_match`).
    pub fn is_match(&self, text: &str) -> bool {
        let n = self.items.len();
        let fits = |window: &mut dyn Iterator<Item = char>| {
            self.items.iter().all(|set| {
                window
                    .next()
                    .is_some_and(|c| set.iter().any(|&(lo, hi)| lo <= c && c <= hi))
            })
        };
        match (self.start, self.end) {
            (true, true) => text.chars().count() == n && fits(&mut text.chars()),
            (true, false) => fits(&mut text.chars()),
            (false, true) => {
                let len = text.chars().count();
                len >= n && fits(&mut text.chars().skip(len - n))
            }
            (false, false) => {
                let mut rest = text;
                loop {
                    if fits(&mut rest.chars()) {
                        return true;
                    }
                    let mut chars = rest.chars();
                    if chars.next().is_none() {
                        return false;
                    }
                    rest = chars.as_str();
                }
            }
        }
    }
}

enum Part {
    Start,
    End,
    Set(Vec<(char, char)>),
}

fn flatten(hir: &Hir, out: &mut Vec<Part>) -> Option<()> {
    match hir.kind() {
        HirKind::Empty => {}
        HirKind::Literal(lit) => {
            for c in std::str::from_utf8(&lit.0).ok()?.chars() {
                out.push(Part::Set(vec![(c, c)]));
            }
        }
        HirKind::Class(Class::Unicode(class)) => {
            out.push(Part::Set(
                class
                    .ranges()
                    .iter()
                    .map(|r| (r.start(), r.end()))
                    .collect(),
            ));
        }
        HirKind::Look(Look::Start) => out.push(Part::Start),
        HirKind::Look(Look::End) => out.push(Part::End),
        HirKind::Capture(cap) => flatten(&cap.sub, out)?,
        HirKind::Concat(parts) => {
            for part in parts {
                flatten(part, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same answer as `regex` on every (pattern, text) pair of a generated table: patterns
    /// of literals, classes, anchors, groups and case folding; texts of the same alphabet,
    /// non-ASCII included; and the patterns that are not sequences are refused.
    #[test]
    fn matches_as_regex_does() {
        let atoms = [
            "a", "b", "1", "[0-3]", "[a-c]", "é", "(?i)x", "(ab)", ".", "\\.", "[^a]",
        ];
        let texts = [
            "", "a", "b", "ab", "ba1", "xab", "ab.", "é1", "aab", "X", "1b3a", "ab\n",
        ];
        let mut rng = 7u64;
        let mut next = |n: usize| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((rng >> 33) as usize) % n
        };
        let mut checked = 0;
        for _ in 0..3000 {
            let mut p = String::new();
            if next(2) == 0 {
                p.push('^');
            }
            for _ in 0..next(4) {
                p.push_str(atoms[next(atoms.len())]);
            }
            if next(2) == 0 {
                p.push('$');
            }
            let re = regex::Regex::new(&p).unwrap();
            let Some(seq) = Sequence::parse(&p) else {
                // `.` and `[^a]` exclude \n and are classes too; only anchors inside refuse.
                continue;
            };
            for t in texts {
                assert_eq!(seq.is_match(t), re.is_match(t), "{p:?} on {t:?}");
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
        // (`a|b` is the class [ab] to the parser: a sequence.)
        assert!(Sequence::parse("a|b").is_some());
        for p in [
            "(ab|cd)", "a+", "a?", "\\bx", "(?m)^a", "a^b", "[0-9]{2}", "x*",
        ] {
            assert!(Sequence::parse(p).is_none(), "{p}");
        }
    }
}
