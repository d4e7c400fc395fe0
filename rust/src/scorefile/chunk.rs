//! One chunk of lines, start to finish on one thread: decode, check, score, and write each
//! scored line as `json.dumps(record, ensure_ascii=False)` writes the record with its
//! `reward` and `details` added.

use std::sync::Arc;

use crate::pyjson::{write_float_repr, DumpOptions, Object, Value};
use crate::reward::json_lines::parse_line;
use crate::reward::{
    Details, RowError, ScoringContext, TaskRegistry, Trajectory, DETAIL_KEYS, TERM_COUNT,
};
use crate::scorefile::chunks::{lines, LineEnds};
use crate::scorefile::schema::check_record;

/// One scored line's reward as its terms, for `--explain`.
#[derive(Debug, Clone, PartialEq)]
pub struct Explained {
    /// 1-based line number in the input.
    pub line: usize,
    pub reward: f64,
    pub raw_reward: f64,
    /// Each term's contribution, in `TERM_KEYS` order.
    pub terms: [f64; TERM_COUNT],
}

/// What a chunk gave; line numbers in it count from 0 at the chunk's first line.
#[derive(Debug)]
pub struct ChunkOutcome {
    /// The scored lines, each ending in `\n`.
    pub text: String,
    /// Lines in the chunk (blank and skipped ones included).
    pub lines: usize,
    /// `(line index in the chunk, reason)` of each skipped line.
    pub skipped: Vec<(usize, String)>,
    /// Each scored line's reward, in order.
    pub rewards: Vec<f64>,
    /// Sum over scored lines of each term's contribution.
    pub term_sums: [f64; TERM_COUNT],
    /// Only when explaining; `line` is the index in the chunk.
    pub explained: Vec<Explained>,
}

impl Default for ChunkOutcome {
    fn default() -> Self {
        ChunkOutcome {
            text: String::new(),
            lines: 0,
            skipped: Vec::new(),
            rewards: Vec::new(),
            term_sums: [0.0; TERM_COUNT],
            explained: Vec::new(),
        }
    }
}

/// How a scored line is written back.
enum Written {
    /// The record's text without its closing `}`: `reward` and `details` are appended.
    Open(String),
    /// The record already has `reward` or `details`, which are replaced where they are.
    Whole(Value),
}

/// Python's `str()` of a float that is not finite.
fn nonfinite_text(x: f64) -> &'static str {
    if x.is_nan() {
        "nan"
    } else if x > 0.0 {
        "inf"
    } else {
        "-inf"
    }
}

/// Checks a decoded line and splits it into the row to score and what is written back.
/// `line_len` (the line's length) sizes the text written back, which is about as long.
fn prepare(
    context: &ScoringContext,
    value: Value,
    line_len: usize,
) -> Result<(Trajectory, Written), String> {
    check_record(&value)?;
    let keeps_place = value
        .as_object()
        .is_some_and(|o| o.contains_key("reward") || o.contains_key("details"));
    let written = if keeps_place {
        Written::Whole(value.clone())
    } else {
        let mut text = String::with_capacity(line_len + 16);
        value.write_json(&mut text, &DumpOptions::python_default());
        text.pop(); // the closing brace of a non-empty object (the check requires fields)
        Written::Open(text)
    };
    let row = Trajectory::from_value(value).map_err(|e| e.to_string())?;
    if !row.config.is_empty() {
        let pairs = row.config.iter().map(|(k, v)| (k.as_str(), v));
        if let Err(error) = context.config().with_overrides(pairs) {
            return Err(format!("field \"config\": {error}"));
        }
    }
    Ok((row, written))
}

/// Decodes, checks, scores and writes every line of `chunk`. `context` must score on one
/// thread: chunks are the unit of parallelism.
pub fn score_chunk(
    context: &ScoringContext,
    chunk: &[u8],
    ends: LineEnds,
    explain: bool,
) -> ChunkOutcome {
    let mut outcome = ChunkOutcome::default();
    // The rows to score, and for each its line index and what is written back.
    let mut rows: Vec<Trajectory> = Vec::new();
    let mut pending: Vec<(usize, Written)> = Vec::new();
    for (index, line) in lines(chunk, ends).enumerate() {
        outcome.lines += 1;
        let prepared = parse_line(line).and_then(|value| match value {
            Some(value) => prepare(context, value, line.len()).map(Some),
            None => Ok(None),
        });
        match prepared {
            Ok(Some((mut row, written))) => {
                // The completions of one prompt usually follow each other: they share one
                // task, which is then prepared once.
                if let Some(previous) = rows.last() {
                    if previous.task == row.task {
                        row.task = Arc::clone(&previous.task);
                    }
                }
                rows.push(row);
                pending.push((index, written));
            }
            Ok(None) => {}
            Err(reason) => outcome.skipped.push((index, reason)),
        }
    }
    let scores = loop {
        let tasks = TaskRegistry::default().register(&rows);
        match context.score_chunk(&rows, &tasks, 0) {
            Ok(scores) => break scores,
            // Settings are checked in `prepare`; should a row still be refused, it is
            // skipped like any bad line and the others are scored.
            Err(error) => {
                let at = error.row.min(pending.len().saturating_sub(1));
                let (bad_index, _) = pending.remove(at);
                rows.remove(at);
                let reason = match error.error {
                    RowError::Config(e) => format!("field \"config\": {e}"),
                    other => other.to_string(),
                };
                outcome.skipped.push((bad_index, reason));
                if pending.is_empty() {
                    break Default::default();
                }
            }
        }
    };
    outcome.skipped.sort_by_key(|(index, _)| *index);
    outcome.rewards.reserve(pending.len());
    outcome.text.reserve(chunk.len() + pending.len() * 1200);
    drop(rows);
    for (((index, written), details), terms) in pending.into_iter().zip(&scores.details).zip(
        scores
            .contributions
            .iter()
            .map(Some)
            .chain(std::iter::repeat(None)),
    ) {
        write_line(&mut outcome.text, written, details);
        outcome.rewards.push(details.reward);
        if let Some(terms) = terms {
            let values = terms.values();
            for (sum, value) in outcome.term_sums.iter_mut().zip(values) {
                *sum += value;
            }
            if explain {
                outcome.explained.push(Explained {
                    line: index,
                    reward: details.reward,
                    raw_reward: details.raw_reward,
                    terms: values,
                });
            }
        }
    }
    outcome
}

/// A detail value as the command writes it: finite floats as numbers, others as the
/// strings `"nan"`, `"inf"`, `"-inf"` (Python's `str()`), so the output stays strict JSON.
fn detail_value(x: f64) -> Value {
    if x.is_finite() {
        Value::Float(x)
    } else {
        Value::Str(nonfinite_text(x).to_string())
    }
}

fn write_detail(out: &mut String, x: f64) {
    if x.is_finite() {
        write_float_repr(out, x);
    } else {
        out.push('"');
        out.push_str(nonfinite_text(x));
        out.push('"');
    }
}

/// Appends the scored line: the record with `reward` and `details` set, then `\n`.
fn write_line(out: &mut String, written: Written, details: &Details) {
    let values = details.values();
    match written {
        Written::Open(text) => {
            out.push_str(&text);
            out.push_str(", \"reward\": ");
            write_detail(out, details.reward);
            out.push_str(", \"details\": {");
            for (i, (key, value)) in DETAIL_KEYS.iter().zip(values).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push('"');
                out.push_str(key);
                out.push_str("\": ");
                write_detail(out, value);
            }
            out.push_str("}}");
        }
        Written::Whole(mut record) => {
            if let Value::Object(object) = &mut record {
                object.insert("reward".to_string(), detail_value(details.reward));
                let detail_object: Object = DETAIL_KEYS
                    .iter()
                    .zip(values)
                    .map(|(key, value)| (key.to_string(), detail_value(value)))
                    .collect();
                object.insert("details".to_string(), Value::Object(detail_object));
            }
            out.push_str(&record.to_json_string_with(&DumpOptions::python_default()));
        }
    }
    out.push('\n');
}
