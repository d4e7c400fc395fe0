//! Rows given as JSON text (one record per line), scored exactly as the same records given
//! as Python dicts: decoded with Python's `json` semantics and read with
//! [`Trajectory::from_value`]. No Python objects are built for them.

use crate::pychar;
use crate::pyjson::{parse, JsonError, ParseOptions, Value};
use crate::reward::{
    parallel, BatchError, BatchScores, RewardConfig, RowError, ScoringContext, TaskRegistry,
    Trajectory,
};

/// Rows decoded and scored per job.
const CHUNK_ROWS: usize = 256;

/// A line's bytes as text, or why they are not UTF-8 (with the 1-based column, in
/// characters, of the first bad byte).
pub fn decode_line(line: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(line).map_err(|error| {
        let valid = &line[..error.valid_up_to()];
        let column = std::str::from_utf8(valid).map_or(0, |t| t.chars().count()) + 1;
        let byte = line.get(error.valid_up_to()).copied().unwrap_or(0);
        format!("undecodable bytes: not valid UTF-8 (byte 0x{byte:02x} at column {column})")
    })
}

/// `invalid JSON: <what> at column <n>` (1-based, in characters, as Python's `colno`).
pub fn json_error_message(error: &JsonError) -> String {
    format!(
        "invalid JSON: {} at column {}",
        error.kind,
        error.offset + 1
    )
}

/// A JSON line as a value; `Ok(None)` for a line that is only whitespace (Python's
/// `str.strip()` sense), which files may hold between records.
pub fn parse_line(line: &[u8]) -> Result<Option<Value>, String> {
    let text = decode_line(line)?;
    match parse(text, &ParseOptions::python()) {
        Ok(value) => Ok(Some(value)),
        Err(_) if pychar::strip(text).is_empty() => Ok(None),
        Err(error) => Err(json_error_message(&error)),
    }
}

fn row_of(line: &[u8]) -> Result<Trajectory, RowError> {
    match parse_line(line) {
        Ok(Some(value)) => Trajectory::from_value(value).map_err(RowError::Record),
        Ok(None) => Err(RowError::Json(
            "empty line: expected a JSON object".to_string(),
        )),
        Err(message) => Err(RowError::Json(message)),
    }
}

/// Scores JSON lines on up to `threads` threads, rows in order; the first bad line (by
/// index) is the error.
pub fn score_json_lines<L: AsRef<[u8]> + Sync>(
    config: &RewardConfig,
    lines: &[L],
    threads: usize,
    explain: bool,
) -> Result<BatchScores, BatchError> {
    // Parallel over chunks; each chunk is scored on the thread that decoded it.
    let context = ScoringContext::new(config.clone(), 1, explain);
    let chunks = lines.len().div_ceil(CHUNK_ROWS);
    let scored = parallel::map_indices(chunks, threads, |c| {
        let first = c * CHUNK_ROWS;
        let chunk = &lines[first..(first + CHUNK_ROWS).min(lines.len())];
        let rows = chunk
            .iter()
            .enumerate()
            .map(|(i, line)| {
                row_of(line.as_ref()).map_err(|error| BatchError {
                    row: first + i,
                    error,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tasks = TaskRegistry::default().register(&rows);
        context.score_chunk(&rows, &tasks, first)
    });
    let mut out = BatchScores::default();
    for chunk in scored {
        let chunk = chunk?;
        out.details.extend(chunk.details);
        out.contributions.extend(chunk.contributions);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reward::score_batch;

    #[test]
    fn lines_score_like_the_same_records_as_values() {
        let lines = [
            r#"{"task":"Compute 2*3","gt":["6"],"completion":"<answer>6</answer>"}"#,
            r#"{"task":"1+1","gt":["2"],"completion":"3","tool_events":[]}"#,
        ];
        let rows: Vec<Trajectory> = lines
            .iter()
            .filter_map(|l| row_of(l.as_bytes()).ok())
            .collect();
        let config = RewardConfig::default();
        let want = score_batch(&config, &rows, 1, true).unwrap_or_default();
        let got = score_json_lines(&config, &lines, 2, true).unwrap_or_default();
        assert_eq!(got, want);
        assert_eq!(got.details.len(), 2);
    }

    #[test]
    fn a_bad_line_is_named_by_its_index() {
        let mut lines = vec![r#"{"completion":""}"#.to_string(); 600];
        lines[300] = "{\"completion\": 5}".to_string();
        lines[400] = "[".to_string();
        let err = score_json_lines(&RewardConfig::default(), &lines, 2, false).err();
        assert_eq!(err.as_ref().map(|e| e.row), Some(300));
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("row 300") && message.contains("completion"));
    }

    #[test]
    fn undecodable_and_blank_lines_say_what_is_wrong() {
        let bad: &[u8] = b"{\"a\": \"\xc3\xa9\xff\"}";
        let message = decode_line(bad).err().unwrap_or_default();
        assert!(message.contains("0xff") && message.contains("column 9"));
        assert_eq!(parse_line(b" \t\xc2\xa0"), Ok(None));
        let deep = "[".repeat(100_000);
        let message = parse_line(deep.as_bytes()).err().unwrap_or_default();
        assert!(message.contains("nesting deeper than"), "{message}");
        let message = parse_line(b"{\"a\" 1}").err().unwrap_or_default();
        assert_eq!(
            message,
            "invalid JSON: expecting ':' after a property name at column 6"
        );
    }
}
