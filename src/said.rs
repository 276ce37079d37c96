//! What a long-running agent reports is said once per change, not every cycle: a steady
//! problem is one log line, the same problem coming back after it went away is said again.

/// The last thing said about one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaidOnce<T> {
    last: Option<T>,
}

impl<T> Default for SaidOnce<T> {
    fn default() -> Self {
        SaidOnce { last: None }
    }
}

impl<T: PartialEq> SaidOnce<T> {
    /// Nothing said yet: the first report is new.
    pub fn new() -> SaidOnce<T> {
        SaidOnce::default()
    }

    /// As if `quiet` had been said: a first report equal to it is not new (an empty list of
    /// warnings at start says nothing).
    pub fn starting_at(quiet: T) -> SaidOnce<T> {
        SaidOnce { last: Some(quiet) }
    }

    /// `now`, when it differs from what was last said (it is then what was last said); `None`
    /// when it is the same.
    pub fn changed(&mut self, now: T) -> Option<&T> {
        if self.last.as_ref() == Some(&now) {
            return None;
        }
        self.last = Some(now);
        self.last.as_ref()
    }

    /// What was last said.
    pub fn last(&self) -> Option<&T> {
        self.last.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::SaidOnce;

    #[test]
    fn a_report_is_new_once_per_change() {
        let mut s = SaidOnce::new();
        let said: Vec<Option<String>> = ["a", "a", "b", "a", "a"]
            .into_iter()
            .map(|x| s.changed(x.to_string()).cloned())
            .collect();
        assert_eq!(
            said,
            [
                Some("a".into()),
                None,
                Some("b".into()),
                Some("a".into()),
                None
            ]
        );
    }

    #[test]
    fn a_quiet_start_says_nothing_until_something_changes() {
        let mut s = SaidOnce::starting_at(Vec::<String>::new());
        assert_eq!(s.changed(Vec::new()), None);
        assert_eq!(
            s.changed(vec!["w".to_string()]),
            Some(&vec!["w".to_string()])
        );
        assert_eq!(s.changed(Vec::new()), Some(&Vec::new()));
    }
}
