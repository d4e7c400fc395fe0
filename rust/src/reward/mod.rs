//! Batched reward scoring: the seed's `score_one_trajectory`, exactly, for many rows at once.
//!
//! A batch is scored in three steps: each row's settings are resolved (batch config plus the
//! row's own `config` overrides) and checked before any work starts; the arithmetic of every
//! distinct task text is extracted once; then rows are scored in parallel (see
//! [`parallel`]). Rows without `tool_events` have their tool calls parsed and run with the
//! built-in tools first ([`tools`]).

pub mod config;
pub mod features;
pub mod parallel;
pub mod pychar;
pub mod pyvalue;
pub mod record;
pub mod score;
pub mod tools;

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub use config::{ConfigError, ConfigValue, FormatEnforceMode, RewardConfig};
pub use record::{RecordError, Task, ToolEvent, Trajectory};
pub use score::{
    score_trajectory, Contributions, Details, DETAIL_COUNT, DETAIL_KEYS, TERM_COUNT, TERM_KEYS,
};

use features::TaskMath;
use score::GroundTruth;

/// A batch could not be scored because of one row; `row` is its index in the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchError {
    pub row: usize,
    pub error: ConfigError,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {}: {}", self.row, self.error)
    }
}

impl std::error::Error for BatchError {}

/// The scores of a batch, one entry per row in input order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchScores {
    pub details: Vec<Details>,
    /// Each term's share of the reward; empty unless asked for.
    pub contributions: Vec<Contributions>,
}

/// Scores every row with `config` (plus each row's overrides) on up to `threads` threads.
/// With `explain`, each term's contribution is returned too.
pub fn score_batch(
    config: &RewardConfig,
    rows: &[Trajectory],
    threads: usize,
    explain: bool,
) -> Result<BatchScores, BatchError> {
    BatchScorer::new(config.clone(), threads, explain).score(rows)
}

/// Scores a batch that arrives in chunks (so that each chunk is converted, scored and
/// freed while it is still in cache), remembering what it prepared for each task across
/// chunks: the rows of one prompt (a GRPO group) share their task, so its arithmetic is
/// extracted and its ground truth prepared once.
pub struct BatchScorer {
    config: RewardConfig,
    threads: usize,
    explain: bool,
    /// Rows scored so far, so that errors name the row's index in the whole batch.
    scored: usize,
    /// Prepared tasks by the address of their shared `Task`, which is kept alive here so
    /// that the address cannot be reused by another task.
    by_task: HashMap<usize, (Arc<Task>, usize, usize)>,
    /// Arithmetic by task text (tasks with equal text in different objects share it).
    by_text: HashMap<String, usize>,
    maths: Vec<TaskMath>,
    truths: Vec<GroundTruth>,
}

impl BatchScorer {
    pub fn new(config: RewardConfig, threads: usize, explain: bool) -> Self {
        BatchScorer {
            config,
            threads,
            explain,
            scored: 0,
            by_task: HashMap::new(),
            by_text: HashMap::new(),
            maths: Vec::new(),
            truths: Vec::new(),
        }
    }

    /// Scores the next chunk of rows.
    pub fn score(&mut self, rows: &[Trajectory]) -> Result<BatchScores, BatchError> {
        self.prepare_tasks(rows);
        let base = &self.config;
        let offset = self.scored;
        let configs: Vec<Cow<'_, RewardConfig>> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                if row.config.is_empty() {
                    return Ok(Cow::Borrowed(base));
                }
                base.with_overrides(row.config.iter().map(|(k, v)| (k.as_str(), v)))
                    .map(Cow::Owned)
                    .map_err(|error| BatchError {
                        row: offset + i,
                        error,
                    })
            })
            .collect::<Result<_, _>>()?;

        let (by_task, maths, truths) = (&self.by_task, &self.maths, &self.truths);
        let scored = parallel::map_indices(rows.len(), self.threads, |i| {
            let row = &rows[i];
            let key = Arc::as_ptr(&row.task) as usize;
            let Some(&(_, math, truth)) = by_task.get(&key) else {
                // prepare_tasks registered every row's task; score from scratch otherwise.
                let events = row_events(row);
                return score::score_trajectory(&configs[i], row, events.as_ref());
            };
            let events = row_events(row);
            score::score_with_task(
                &configs[i],
                row,
                events.as_ref(),
                &maths[math],
                &truths[truth],
            )
        });
        self.scored += rows.len();
        let (details, contributions) = if self.explain {
            scored.into_iter().unzip()
        } else {
            (scored.into_iter().map(|(d, _)| d).collect(), Vec::new())
        };
        Ok(BatchScores {
            details,
            contributions,
        })
    }

    /// Registers the tasks of `rows` not seen before, computing their arithmetic and ground
    /// truth in parallel.
    fn prepare_tasks(&mut self, rows: &[Trajectory]) {
        let mut new_tasks: Vec<&Arc<Task>> = Vec::new();
        let mut seen_now: HashMap<usize, ()> = HashMap::new();
        for row in rows {
            let key = Arc::as_ptr(&row.task) as usize;
            if !self.by_task.contains_key(&key) && seen_now.insert(key, ()).is_none() {
                new_tasks.push(&row.task);
            }
        }
        if new_tasks.is_empty() {
            return;
        }
        let threads = self.threads;
        let texts: Vec<String> =
            parallel::map_indices(new_tasks.len(), threads, |i| score::task_text(new_tasks[i]));
        let truths: Vec<GroundTruth> = parallel::map_indices(new_tasks.len(), threads, |i| {
            GroundTruth::new(&new_tasks[i].gt)
        });
        // Extract the arithmetic of each text not seen before, once.
        let mut pending: Vec<&str> = Vec::new();
        let mut math_of: Vec<usize> = Vec::with_capacity(texts.len());
        let mut pending_index: HashMap<&str, usize> = HashMap::new();
        for text in &texts {
            let id = match self.by_text.get(text.as_str()) {
                Some(&id) => id,
                None => {
                    let next = self.maths.len() + pending.len();
                    *pending_index.entry(text.as_str()).or_insert_with(|| {
                        pending.push(text.as_str());
                        next
                    })
                }
            };
            math_of.push(id);
        }
        let maths: Vec<TaskMath> =
            parallel::map_indices(pending.len(), threads, |i| TaskMath::from_task(pending[i]));
        for (text, math) in pending.iter().zip(maths) {
            self.by_text.insert((*text).to_string(), self.maths.len());
            self.maths.push(math);
        }
        for ((task, truth), math) in new_tasks.into_iter().zip(truths).zip(math_of) {
            let key = Arc::as_ptr(task) as usize;
            self.by_task
                .insert(key, (Arc::clone(task), math, self.truths.len()));
            self.truths.push(truth);
        }
    }
}

/// The row's tool events: as given, or parsed from the completion and run.
fn row_events(row: &Trajectory) -> Cow<'_, [ToolEvent]> {
    match &row.tool_events {
        Some(events) => Cow::Borrowed(events.as_slice()),
        None => {
            let allowed = tools::allowed_names(row.task.tools.as_deref());
            Cow::Owned(tools::run_completion_tools(&row.completion, &allowed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions, Value};

    fn row(json: &str) -> Trajectory {
        let value = parse(json, &ParseOptions::python()).unwrap_or(Value::Null);
        Trajectory::from_value(value).unwrap_or_default()
    }

    fn group(task: &Arc<Task>, completions: &[&str]) -> Vec<Trajectory> {
        completions
            .iter()
            .map(|c| Trajectory {
                task: Arc::clone(task),
                completion: c.to_string(),
                tool_events: Some(Vec::new()),
                ..Trajectory::default()
            })
            .collect()
    }

    #[test]
    fn chunks_score_like_one_batch_and_share_task_preparation() {
        let task = row(r#"{"task":"Compute 2*3 and 4+5","gt":["6","9"],"completion":""}"#).task;
        let rows = group(
            &task,
            &[
                "<answer>6, 9</answer>",
                "<answer>9, 6</answer>",
                "6",
                "<answer>7</answer>",
            ],
        );
        let whole = score_batch(&RewardConfig::default(), &rows, 2, false).unwrap_or_default();
        let mut scorer = BatchScorer::new(RewardConfig::default(), 1, true);
        let first = scorer.score(&rows[..1]).unwrap_or_default();
        let rest = scorer.score(&rows[1..]).unwrap_or_default();
        let chunked: Vec<Details> = first.details.into_iter().chain(rest.details).collect();
        assert_eq!(chunked, whole.details);
        assert_eq!(scorer.by_task.len(), 1);
        assert_eq!(scorer.maths.len(), 1);
        assert_eq!(rest.contributions.len(), 3);
        assert!(whole.contributions.is_empty());
    }

    #[test]
    fn equal_task_texts_in_different_objects_share_arithmetic() {
        let a = row(r#"{"task":"1+2","completion":"3"}"#);
        let b = row(r#"{"task":"1+2","completion":"4"}"#);
        let mut scorer = BatchScorer::new(RewardConfig::default(), 1, false);
        let scores = scorer.score(&[a, b]).unwrap_or_default();
        assert_eq!(scores.details.len(), 2);
        assert_eq!((scorer.by_task.len(), scorer.maths.len()), (2, 1));
    }

    #[test]
    fn a_bad_row_setting_names_the_row_in_the_whole_batch() {
        let good = row(r#"{"completion":""}"#);
        let bad = row(r#"{"completion":"","config":{"reward_base":"high"}}"#);
        let mut scorer = BatchScorer::new(RewardConfig::default(), 1, false);
        assert!(scorer.score(&[good.clone(), good.clone()]).is_ok());
        let err = scorer.score(&[good, bad]).err();
        assert_eq!(err.as_ref().map(|e| e.row), Some(3));
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("row 3") && message.contains("reward_base"));
    }

    #[test]
    fn rows_without_events_run_their_calls() {
        let standalone = row(concat!(
            r#"{"task":"2*3","gt":["6"],"completion":"<tool_call>{\"name\":\"calculate_math\","#,
            r#"\"arguments\":{\"expression\":\"2*3\"}}</tool_call><answer>6</answer>"}"#
        ));
        let scores =
            score_batch(&RewardConfig::default(), &[standalone], 1, false).unwrap_or_default();
        assert_eq!(scores.details[0].tool_success_calls, 1.0);
        assert_eq!(scores.details[0].tool_value_exact, 1.0);
    }
}
