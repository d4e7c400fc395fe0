//! A batch that arrives a chunk of rows at a time (records converted from Python objects,
//! say), scored on the [`pipeline`] while the next chunk is read: each chunk is read, then
//! scored and freed while it is still in cache, and memory stays bounded however large the
//! batch.

use std::sync::Arc;

use super::pipeline::{self, Stages};
use super::{BatchError, BatchScores, PreparedTask, ScoringContext, TaskRegistry, Trajectory};

/// Rows read and scored per chunk.
pub const CHUNK_ROWS: usize = 64;

/// Where the rows of a batch come from.
pub trait RowSource {
    /// Failures of reading rows, and of scoring them ([`BatchError`]).
    type Error: From<BatchError>;

    /// The next rows, at most `limit` of them; `None` at the end of the batch.
    fn next_rows(&mut self, limit: usize) -> Result<Option<Vec<Trajectory>>, Self::Error>;

    /// The error for a chunk whose scoring ended without a result (a bug).
    fn lost_chunk(&self) -> Self::Error;

    /// Runs `run`, which needs nothing the reading thread holds (see [`Stages::blocking`]).
    fn blocking<T: Send>(&mut self, run: impl FnOnce() -> T + Send) -> T {
        run()
    }
}

/// A chunk of rows ready to score: the index of its first row, the rows and their tasks.
type RowChunk = (usize, Vec<Trajectory>, Vec<Arc<PreparedTask>>);

struct RowStages<'s, S> {
    source: &'s mut S,
    /// The tasks seen so far, so that a task shared across chunks is prepared once.
    registry: TaskRegistry,
    rows_read: usize,
    scores: BatchScores,
}

impl<S: RowSource> Stages for RowStages<'_, S> {
    type Chunk = RowChunk;
    type Done = Result<BatchScores, BatchError>;
    type Error = S::Error;

    fn next_chunk(&mut self) -> Result<Option<RowChunk>, S::Error> {
        let Some(rows) = self.source.next_rows(CHUNK_ROWS)? else {
            return Ok(None);
        };
        let first = self.rows_read;
        self.rows_read += rows.len();
        let tasks = self.registry.register(&rows);
        Ok(Some((first, rows, tasks)))
    }

    fn finish(&mut self, done: Result<BatchScores, BatchError>) -> Result<(), S::Error> {
        let scores = done?;
        self.scores.details.extend(scores.details);
        self.scores.contributions.extend(scores.contributions);
        Ok(())
    }

    fn lost_chunk(&self) -> S::Error {
        self.source.lost_chunk()
    }

    fn blocking<T: Send>(&mut self, run: impl FnOnce() -> T + Send) -> T {
        self.source.blocking(run)
    }
}

/// Scores every row of `source` with `context`, on its threads; rows in order. The first
/// failure in row order (reading a row, or scoring one) is the error.
pub fn score_rows_in_chunks<S: RowSource>(
    context: &ScoringContext,
    source: &mut S,
) -> Result<BatchScores, S::Error> {
    let mut stages = RowStages {
        source,
        registry: TaskRegistry::default(),
        rows_read: 0,
        scores: BatchScores::default(),
    };
    let score = |(first, rows, tasks): RowChunk| {
        let scores = context.score_chunk(&rows, &tasks, first);
        // Freed on the scoring thread, while still in its cache.
        drop(rows);
        scores
    };
    pipeline::run_in_order(context.threads(), &mut stages, &score)?;
    Ok(stages.scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{parse, ParseOptions, Value};
    use crate::reward::{score_batch, RewardConfig};

    #[derive(Debug, PartialEq)]
    enum Failure {
        Read(usize),
        Batch(BatchError),
        Lost,
    }

    impl From<BatchError> for Failure {
        fn from(error: BatchError) -> Self {
            Failure::Batch(error)
        }
    }

    /// Rows handed out as asked; a read error at row `fail_at`.
    struct Rows {
        rows: std::vec::IntoIter<Trajectory>,
        next: usize,
        fail_at: Option<usize>,
    }

    impl RowSource for Rows {
        type Error = Failure;

        fn next_rows(&mut self, limit: usize) -> Result<Option<Vec<Trajectory>>, Failure> {
            let mut out = Vec::new();
            for row in self.rows.by_ref().take(limit) {
                if self.fail_at == Some(self.next) {
                    return Err(Failure::Read(self.next));
                }
                self.next += 1;
                out.push(row);
            }
            Ok((!out.is_empty()).then_some(out))
        }

        fn lost_chunk(&self) -> Failure {
            Failure::Lost
        }
    }

    fn row(json: &str) -> Trajectory {
        let value = parse(json, &ParseOptions::python()).unwrap_or(Value::Null);
        Trajectory::from_value(value).unwrap_or_default()
    }

    /// 1,000 rows in groups of 8 sharing one task object, as a GRPO batch holds them.
    fn batch() -> Vec<Trajectory> {
        (0..1000)
            .map(|i| {
                let group = i / 8;
                row(&format!(
                    r#"{{"task":"Compute {group}*3","gt":["{}"],"completion":"<answer>{}</answer>"}}"#,
                    group * 3,
                    group * 3 + i % 3
                ))
            })
            .collect()
    }

    fn source(rows: Vec<Trajectory>, fail_at: Option<usize>) -> Rows {
        Rows {
            rows: rows.into_iter(),
            next: 0,
            fail_at,
        }
    }

    #[test]
    fn chunked_scores_equal_one_batch_on_any_number_of_threads() {
        let rows = batch();
        let want = score_batch(&RewardConfig::default(), &rows, 1, true);
        for threads in [1, 2, 3] {
            let context = ScoringContext::new(RewardConfig::default(), threads, true);
            let got = score_rows_in_chunks(&context, &mut source(rows.clone(), None));
            assert_eq!(
                got,
                want.clone().map_err(Failure::Batch),
                "{threads} threads"
            );
        }
        assert_eq!(want.map(|s| s.details.len()), Ok(1000));
    }

    #[test]
    fn the_first_bad_row_in_order_is_the_error() {
        let mut rows = batch();
        rows[300] = row(r#"{"completion":"","config":{"reward_base":"high"}}"#);
        for threads in [1, 3] {
            let context = ScoringContext::new(RewardConfig::default(), threads, false);
            // A row with a bad setting (row 300) before a row that cannot be read (900).
            let got = score_rows_in_chunks(&context, &mut source(rows.clone(), Some(900)));
            let Err(Failure::Batch(error)) = got else {
                panic!("expected the setting's error, got {got:?}");
            };
            assert_eq!(error.row, 300);
            let got = score_rows_in_chunks(&context, &mut source(batch(), Some(900)));
            assert_eq!(got.err(), Some(Failure::Read(900)));
        }
    }
}
