//! Go's text/template as NFD runs it, and the Go semantics its functions need: the engine glue
//! (`engine`, `limits`), the Sprig function map (`sprig`, one file per family), Go's regular
//! expressions (`re2`: Go's `regexp/syntax` read and written for Rust's `regex`; `regexp`: the
//! compile with RE2's memory bound), `encoding/json`'s output (`gojson`), shopspring's decimals
//! (`decimal`), huandu/xstrings' case conversions (`xstrings`) and Masterminds' versions
//! (`version`). Nothing here knows NodeFeatureRules: `rules` builds on it.

pub mod decimal;
pub mod engine;
pub mod gojson;
pub mod limits;
pub mod re2;
pub mod regexp;
pub mod sprig;
pub mod version;
pub mod xstrings;
