//! Go's `regexp.Compile`: a pattern in Go's syntax (`re2`) compiled by Rust's `regex`, within
//! RE2's memory bound. NFD's `InRegexp` and Sprig's regex functions both compile through here.

/// The most memory one compiled pattern (or one `InRegexp` set) may take, as RE2 bounds its
/// programs (`max_mem`): a larger one is refused ("exceeds size limit"), that rule alone failing
/// with its file and line, so that a rule file cannot cost more than the agent's memory budget
/// (ten 100,000-character patterns took 40 MB each before).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The most memory one pattern's lazy DFA cache may grow to (it falls back to slower search,
/// never to more memory).
pub const REGEX_DFA_SIZE_LIMIT: usize = 1 << 20;

pub fn build_regex(translated: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(translated)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_DFA_SIZE_LIMIT)
        .build()
}

/// A Go (RE2) pattern, compiled as Go compiles it, within [`REGEX_SIZE_LIMIT`].
pub fn compile_go_regex(pattern: &str) -> Result<regex::Regex, String> {
    let t = go_regex(pattern)?;
    build_regex(&t).map_err(|e| one_line(&e.to_string()))
}

/// Go's regexp syntax in Rust's (`re2`): Go's parser decides what is accepted and what
/// refused, with Go's error text; what it accepts is written so that it means the same to Rust.
pub fn go_regex(pattern: &str) -> Result<String, String> {
    super::re2::translate(pattern)
}

pub fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
