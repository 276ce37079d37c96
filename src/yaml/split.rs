//! A file's text cut into its documents, before any of them is parsed.

/// Splits at `---` document markers; each chunk keeps its marker line. Returns the number of
/// lines before each chunk.
pub fn split_documents(text: &str) -> Vec<(u32, &str)> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u32;
    let mut pos = 0usize;
    for (line_no, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_marker = bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t");
        if is_marker && pos > start {
            chunks.push((start_line, &text[start..pos]));
            start = pos;
            start_line = u32::try_from(line_no).unwrap_or(u32::MAX);
        }
        pos += line.len();
    }
    chunks.push((start_line, &text[start..]));
    chunks
}

pub fn is_blank_document(chunk: &str) -> bool {
    chunk.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
    })
}
