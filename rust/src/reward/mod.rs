//! Batched reward scoring: the reward of [`score`], exactly, for many rows at once.
//!
//! A batch is scored in three steps: each row's settings are resolved (batch config plus the
//! row's own `config` overrides) and checked before any work starts; the arithmetic of every
//! distinct task text is extracted once; then rows are scored in parallel (see
//! [`parallel`]). Rows without `tool_events` have their tool calls parsed and run with the
//! built-in tools first ([`tools`]). A batch that arrives a chunk at a time is scored on the
//! ordered chunk [`pipeline`] ([`chunked`]), which `agentrl score` runs on too.

mod answer;
pub(crate) mod chunked;
pub(crate) mod config;
pub(crate) mod fast_hash;
pub(crate) mod json_lines;
pub(crate) mod parallel;
pub(crate) mod pipeline;
mod pyvalue;
pub(crate) mod record;
mod repetition;
mod score;
mod task;
mod tool_use;
mod tools;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

pub use chunked::{score_rows_in_chunks, RowSource};
pub use config::{ConfigError, ConfigValue, RewardConfig};
pub use json_lines::score_json_lines;
pub use record::{RecordError, Task, ToolEvent, Trajectory};
pub use score::{Contributions, Details, DETAIL_KEYS, TERM_COUNT, TERM_KEYS};

use fast_hash::FastHash;
use score::GroundTruth;
use task::TaskMath;

/// Why one row of a batch could not be scored.
#[derive(Debug, Clone, PartialEq)]
pub enum RowError {
    /// A setting in the row's `config` is unknown or has a wrong value.
    Config(ConfigError),
    /// A field of the row has the wrong type, or `completion` is missing.
    Record(RecordError),
    /// A row given as a JSON line that is not valid UTF-8 or not valid JSON.
    Json(String),
}

impl fmt::Display for RowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowError::Config(error) => error.fmt(f),
            RowError::Record(error) => error.fmt(f),
            RowError::Json(message) => f.write_str(message),
        }
    }
}

/// A batch could not be scored because of one row; `row` is its index in the batch.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchError {
    pub row: usize,
    pub error: RowError,
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
#[cfg(test)]
pub fn score_batch(
    config: &RewardConfig,
    rows: &[Trajectory],
    threads: usize,
    explain: bool,
) -> Result<BatchScores, BatchError> {
    let context = ScoringContext::new(config.clone(), threads, explain);
    let tasks = TaskRegistry::default().register(rows);
    context.score_chunk(rows, &tasks, 0)
}

/// A task as the reward prepares it, once, for all the rows that share it.
#[derive(Debug)]
pub struct PreparedTask {
    task: Arc<Task>,
    facts: OnceLock<TaskFacts>,
}

#[derive(Debug)]
struct TaskFacts {
    math: Arc<TaskMath>,
    truth: GroundTruth,
}

/// The tasks of a batch that arrives in chunks, by the address of their shared `Task`
/// (kept alive here, so that an address cannot be reused by another task). The rows of one
/// prompt (a GRPO group) share their task, so it is prepared once however the batch is
/// chunked. Used by the thread that reads the rows.
#[derive(Debug, Default)]
pub struct TaskRegistry {
    tasks: HashMap<usize, Arc<PreparedTask>, FastHash>,
}

impl TaskRegistry {
    /// The prepared-task handle of each row, registering tasks not seen before.
    pub fn register(&mut self, rows: &[Trajectory]) -> Vec<Arc<PreparedTask>> {
        rows.iter()
            .map(|row| {
                let key = Arc::as_ptr(&row.task) as usize;
                let entry = self.tasks.entry(key).or_insert_with(|| {
                    Arc::new(PreparedTask {
                        task: Arc::clone(&row.task),
                        facts: OnceLock::new(),
                    })
                });
                Arc::clone(entry)
            })
            .collect()
    }

    /// Number of distinct tasks registered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tasks.len()
    }
}

/// Distinct task texts whose arithmetic a context keeps; past this the cache starts over,
/// so that scoring a file of millions of distinct tasks keeps bounded memory.
const MAX_CACHED_TEXTS: usize = 1 << 16;

/// What scoring a chunk needs besides its rows; shared by all the threads scoring chunks.
#[derive(Debug)]
pub struct ScoringContext {
    config: RewardConfig,
    threads: usize,
    explain: bool,
    /// Arithmetic by task text (tasks with equal text in different objects share it).
    by_text: Mutex<HashMap<String, Arc<TaskMath>, FastHash>>,
}

impl ScoringContext {
    pub fn new(config: RewardConfig, threads: usize, explain: bool) -> Self {
        ScoringContext {
            config,
            threads,
            explain,
            by_text: Mutex::new(HashMap::default()),
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The batch's settings (before any row's overrides).
    pub fn config(&self) -> &RewardConfig {
        &self.config
    }

    /// Scores a chunk of rows whose tasks were registered (`tasks[i]` is row `i`'s);
    /// `first_row` is the index of `rows[0]` in the whole batch, for error messages.
    pub fn score_chunk(
        &self,
        rows: &[Trajectory],
        tasks: &[Arc<PreparedTask>],
        first_row: usize,
    ) -> Result<BatchScores, BatchError> {
        let base = &self.config;
        // Rows without overrides (nearly all) use the batch's settings; the few others own
        // theirs, boxed so that the list stays one pointer per row.
        let overrides: Vec<Option<Box<RewardConfig>>> = rows
            .iter()
            .enumerate()
            .map(|(i, row)| {
                if row.config.is_empty() {
                    return Ok(None);
                }
                base.with_overrides(row.config.iter().map(|(k, v)| (k.as_str(), v)))
                    .map(|config| Some(Box::new(config)))
                    .map_err(|error| BatchError {
                        row: first_row + i,
                        error: RowError::Config(error),
                    })
            })
            .collect::<Result<_, _>>()?;
        self.prepare(tasks);

        let score_row = |i: usize| {
            let row = &rows[i];
            let config = overrides[i].as_deref().unwrap_or(base);
            let events = row_events(row);
            match tasks.get(i).and_then(|t| t.facts.get()) {
                Some(facts) => {
                    score::score_with_task(config, row, events.as_ref(), &facts.math, &facts.truth)
                }
                // Every row's task is prepared above; this only guards a short `tasks`.
                None => score::score_trajectory(config, row, events.as_ref()),
            }
        };
        let (details, contributions) = if self.explain {
            parallel::map_indices(rows.len(), self.threads, score_row)
                .into_iter()
                .unzip()
        } else {
            let details = parallel::map_indices(rows.len(), self.threads, |i| score_row(i).0);
            (details, Vec::new())
        };
        Ok(BatchScores {
            details,
            contributions,
        })
    }

    /// Prepares the tasks not prepared yet, in parallel (each at most once, even when
    /// several chunks of one group are scored at the same time).
    fn prepare(&self, tasks: &[Arc<PreparedTask>]) {
        let mut pending: Vec<&Arc<PreparedTask>> = Vec::new();
        let mut seen: HashSet<usize, FastHash> = HashSet::default();
        for task in tasks {
            if task.facts.get().is_none() && seen.insert(Arc::as_ptr(task) as usize) {
                pending.push(task);
            }
        }
        parallel::map_indices(pending.len(), self.threads, |i| {
            let prepared = pending[i];
            prepared.facts.get_or_init(|| TaskFacts {
                math: self.math_for(score::task_text(&prepared.task)),
                truth: GroundTruth::new(&prepared.task.gt),
            });
        });
    }

    /// The arithmetic of a task text, extracted once per distinct text.
    fn math_for(&self, text: String) -> Arc<TaskMath> {
        let cached = self
            .by_text
            .lock()
            .ok()
            .and_then(|cache| cache.get(&text).cloned());
        if let Some(math) = cached {
            return math;
        }
        // Extracted outside the lock; two threads may race on one text, harmlessly.
        let math = Arc::new(TaskMath::from_task(&text));
        if let Ok(mut cache) = self.by_text.lock() {
            if cache.len() >= MAX_CACHED_TEXTS {
                cache.clear();
            }
            cache.insert(text, Arc::clone(&math));
        }
        math
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
        let context = ScoringContext::new(RewardConfig::default(), 1, true);
        let mut registry = TaskRegistry::default();
        let head = registry.register(&rows[..1]);
        let tail = registry.register(&rows[1..]);
        let first = context
            .score_chunk(&rows[..1], &head, 0)
            .unwrap_or_default();
        let rest = context
            .score_chunk(&rows[1..], &tail, 1)
            .unwrap_or_default();
        let chunked: Vec<Details> = first.details.into_iter().chain(rest.details).collect();
        assert_eq!(chunked, whole.details);
        assert_eq!(registry.len(), 1);
        assert!(Arc::ptr_eq(&head[0], &tail[2]));
        assert_eq!(rest.contributions.len(), 3);
        assert!(whole.contributions.is_empty());
    }

    #[test]
    fn equal_task_texts_in_different_objects_share_arithmetic() {
        let rows = [
            row(r#"{"task":"1+2","completion":"3"}"#),
            row(r#"{"task":"1+2","completion":"4"}"#),
        ];
        let context = ScoringContext::new(RewardConfig::default(), 1, false);
        let mut registry = TaskRegistry::default();
        let tasks = registry.register(&rows);
        let scores = context.score_chunk(&rows, &tasks, 0).unwrap_or_default();
        assert_eq!(scores.details.len(), 2);
        assert_eq!(registry.len(), 2);
        let maths: Vec<&Arc<TaskMath>> = tasks
            .iter()
            .filter_map(|t| t.facts.get().map(|f| &f.math))
            .collect();
        assert!(maths.len() == 2 && Arc::ptr_eq(maths[0], maths[1]));
    }

    #[test]
    fn a_bad_row_setting_names_the_row_in_the_whole_batch() {
        let rows = [
            row(r#"{"completion":""}"#),
            row(r#"{"completion":"","config":{"reward_base":"high"}}"#),
        ];
        let context = ScoringContext::new(RewardConfig::default(), 1, false);
        let tasks = TaskRegistry::default().register(&rows);
        let err = context.score_chunk(&rows, &tasks, 2).err();
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
