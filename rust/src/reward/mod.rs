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

pub use config::{ConfigError, ConfigValue, FormatEnforceMode, RewardConfig};
pub use record::{RecordError, Trajectory};
pub use score::{
    score_trajectory, Contributions, Details, DETAIL_COUNT, DETAIL_KEYS, TERM_COUNT, TERM_KEYS,
};

use features::TaskMath;

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
    let configs: Vec<Cow<'_, RewardConfig>> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            if row.config.is_empty() {
                return Ok(Cow::Borrowed(config));
            }
            config
                .with_overrides(row.config.iter().map(|(k, v)| (k.as_str(), v)))
                .map(Cow::Owned)
                .map_err(|error| BatchError { row: i, error })
        })
        .collect::<Result<_, _>>()?;

    // Rows of one prompt (a GRPO group) share their task: extract its arithmetic once.
    let texts: Vec<String> =
        parallel::map_indices(rows.len(), threads, |i| score::task_text(&rows[i]));
    let mut task_of_row = Vec::with_capacity(rows.len());
    let mut unique: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for text in &texts {
        let next = unique.len();
        let id = *index.entry(text.as_str()).or_insert(next);
        if id == next {
            unique.push(text.as_str());
        }
        task_of_row.push(id);
    }
    let tasks: Vec<TaskMath> =
        parallel::map_indices(unique.len(), threads, |i| TaskMath::from_task(unique[i]));

    let scored = parallel::map_indices(rows.len(), threads, |i| {
        let row = &rows[i];
        let math = &tasks[task_of_row[i]];
        match &row.tool_events {
            Some(events) => score::score_with_task(&configs[i], row, events, math),
            None => {
                let allowed = tools::allowed_names(row.tools.as_deref());
                let events = tools::run_completion_tools(&row.completion, &allowed);
                score::score_with_task(&configs[i], row, &events, math)
            }
        }
    });
    let (details, contributions) = if explain {
        scored.into_iter().unzip()
    } else {
        (scored.into_iter().map(|(d, _)| d).collect(), Vec::new())
    };
    Ok(BatchScores {
        details,
        contributions,
    })
}
