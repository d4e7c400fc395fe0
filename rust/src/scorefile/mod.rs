//! `agentrl score` end to end: a JSONL file of trajectories in, the same lines with their
//! `reward` and `details` out, streamed with bounded memory.
//!
//! The input (plain, or gzip recognised by its magic bytes) is cut into chunks of whole
//! lines ([`chunks`]); each chunk is decoded, checked, scored and turned back into text on
//! a worker thread ([`chunk`]) while the calling thread reads ahead and writes finished
//! chunks in input order (the reward's ordered [`pipeline`]). At most a few chunks per
//! thread are in flight, so memory does not grow with the file, apart from 8 bytes per
//! scored line for the reward column that the summary's statistics need.
//!
//! A line that cannot be scored (undecodable bytes, invalid JSON, nesting too deep, a field
//! of the wrong type or missing, a non-finite answer, a bad setting) is skipped and
//! reported with its line number and the reason; the other lines are scored. An output path
//! is written through a temporary file that is renamed when complete ([`atomic`]).

mod atomic;
mod chunk;
pub mod chunks;
pub mod histogram;
mod schema;

use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::Arc;

use flate2::bufread::MultiGzDecoder;

use crate::reward::pipeline::{self, Stages};
use crate::reward::{RewardConfig, ScoringContext, TERM_COUNT};
pub use chunk::Explained;
use chunk::{score_chunk, ChunkOutcome};
use chunks::Chunks;
pub use chunks::LineEnds;

/// Skipped lines reported one by one; past this only their number is kept, so that a file
/// of garbage cannot fill memory with reasons.
pub const MAX_REPORTED_SKIPS: usize = 10_000;

/// Asked on the calling thread before each chunk; `true` stops the run.
pub type StopCheck = Arc<dyn Fn() -> bool + Send + Sync>;

/// How to score a file.
#[derive(Clone)]
pub struct ScoreFileOptions {
    pub config: RewardConfig,
    /// Worker threads (1: everything on the calling thread).
    pub threads: usize,
    /// Keep each scored line's terms ([`FileSummary::explained`]).
    pub explain: bool,
    pub line_ends: LineEnds,
    /// Lets the caller stop a long run (Ctrl-C); an output path is then not written.
    pub stop: Option<StopCheck>,
}

impl ScoreFileOptions {
    fn check_stop(&self) -> Result<(), ScoreFileError> {
        match &self.stop {
            Some(stop) if stop() => Err(ScoreFileError::Stopped),
            _ => Ok(()),
        }
    }
}

/// A line that was not scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// 1-based line number in the input.
    pub line: usize,
    pub reason: String,
}

/// What scoring a file found.
#[derive(Debug, Clone)]
pub struct FileSummary {
    /// Lines read (blank and skipped ones included).
    pub lines: usize,
    /// The reward of each scored line, in input order.
    pub rewards: Vec<f64>,
    /// The first [`MAX_REPORTED_SKIPS`] skipped lines, in input order.
    pub skipped: Vec<SkippedLine>,
    /// Every skipped line, reported or not.
    pub skipped_count: usize,
    /// Sum over scored lines of each term's contribution (`TERM_KEYS` order).
    pub term_sums: [f64; TERM_COUNT],
    /// Each scored line's terms (only when explaining).
    pub explained: Vec<Explained>,
}

impl Default for FileSummary {
    fn default() -> Self {
        FileSummary {
            lines: 0,
            rewards: Vec::new(),
            skipped: Vec::new(),
            skipped_count: 0,
            term_sums: [0.0; TERM_COUNT],
            explained: Vec::new(),
        }
    }
}

impl FileSummary {
    /// Adds a chunk's results (the chunk that follows the lines counted so far).
    fn add(&mut self, outcome: ChunkOutcome) {
        let base = self.lines;
        self.lines += outcome.lines;
        self.rewards.extend(outcome.rewards);
        self.skipped_count += outcome.skipped.len();
        let room = MAX_REPORTED_SKIPS.saturating_sub(self.skipped.len());
        self.skipped.extend(
            outcome
                .skipped
                .into_iter()
                .take(room)
                .map(|(index, reason)| SkippedLine {
                    line: base + index + 1,
                    reason,
                }),
        );
        for (sum, part) in self.term_sums.iter_mut().zip(outcome.term_sums) {
            *sum += part;
        }
        self.explained
            .extend(outcome.explained.into_iter().map(|mut e| {
                e.line += base + 1;
                e
            }));
    }
}

/// Why a file could not be scored at all (bad lines are not errors: they are skipped).
#[derive(Debug)]
pub enum ScoreFileError {
    /// Reading the input or writing the output failed; `what` names the file.
    Io { what: String, error: io::Error },
    /// The caller's stop check asked to stop.
    Stopped,
    /// A chunk's scoring job ended without a result (a bug).
    Internal(String),
}

impl fmt::Display for ScoreFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScoreFileError::Io { what, error } => write!(f, "{what}: {error}"),
            ScoreFileError::Stopped => f.write_str("stopped before the end of the input"),
            ScoreFileError::Internal(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ScoreFileError {}

/// The input, decompressed when it starts with gzip's magic bytes.
enum Input<R: Read> {
    Plain(BufReader<R>),
    Gzip(Box<MultiGzDecoder<BufReader<R>>>),
}

impl<R: Read> Read for Input<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(r) => r.read(buf),
            Input::Gzip(r) => r.read(buf),
        }
    }
}

fn sniff<R: Read>(input: R) -> io::Result<Input<R>> {
    let mut buffered = BufReader::with_capacity(1 << 16, input);
    let head = buffered.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Input::Gzip(Box::new(MultiGzDecoder::new(buffered)))
    } else {
        Input::Plain(buffered)
    })
}

/// Scores every line of `input` into `output`. `source` and `sink` name the two in errors.
pub fn score_stream<R: Read, W: Write>(
    input: R,
    output: &mut W,
    options: &ScoreFileOptions,
    source: &str,
    sink: &str,
) -> Result<FileSummary, ScoreFileError> {
    let input = sniff(input).map_err(|error| read_error(source, error))?;
    let mut stages = FileStages {
        chunks: Chunks::new(input, options.line_ends),
        options,
        source,
        summary: FileSummary::default(),
        output,
        sink,
    };
    // Chunks are the unit of parallelism, so each is scored on one thread.
    let context = ScoringContext::new(options.config.clone(), 1, true);
    let (ends, explain) = (options.line_ends, options.explain);
    let score = |bytes: Vec<u8>| score_chunk(&context, &bytes, ends, explain);
    pipeline::run_in_order(options.threads, &mut stages, &score)?;
    stages
        .output
        .flush()
        .map_err(|error| write_error(sink, error))?;
    Ok(stages.summary)
}

fn read_error(source: &str, error: io::Error) -> ScoreFileError {
    ScoreFileError::Io {
        what: format!("cannot read {source}"),
        error,
    }
}

fn write_error(sink: &str, error: io::Error) -> ScoreFileError {
    ScoreFileError::Io {
        what: format!("cannot write {sink}"),
        error,
    }
}

/// The two ends of the pipeline: reads chunks of whole lines, then writes each chunk's
/// scored lines, in input order, and adds up its results.
struct FileStages<'a, R: Read, W: Write> {
    chunks: Chunks<Input<R>>,
    options: &'a ScoreFileOptions,
    source: &'a str,
    summary: FileSummary,
    output: &'a mut W,
    sink: &'a str,
}

impl<R: Read, W: Write> Stages for FileStages<'_, R, W> {
    type Chunk = Vec<u8>;
    type Done = ChunkOutcome;
    type Error = ScoreFileError;

    fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, ScoreFileError> {
        self.options.check_stop()?;
        self.chunks
            .next_chunk()
            .map_err(|error| read_error(self.source, error))
    }

    fn finish(&mut self, outcome: ChunkOutcome) -> Result<(), ScoreFileError> {
        self.output
            .write_all(outcome.text.as_bytes())
            .map_err(|error| write_error(self.sink, error))?;
        self.summary.add(outcome);
        Ok(())
    }

    fn lost_chunk(&self) -> ScoreFileError {
        ScoreFileError::Internal("a chunk of lines was not scored".to_string())
    }
}

/// Opens an input file, naming it in the error.
pub fn open_input(path: &Path) -> Result<File, ScoreFileError> {
    File::open(path).map_err(|error| ScoreFileError::Io {
        what: format!("cannot read {}", path.display()),
        error,
    })
}

/// Scores `input` into the file `dst`, which appears only complete (see [`atomic`]).
pub fn score_into_path<R: Read>(
    input: R,
    dst: &Path,
    options: &ScoreFileOptions,
    source: &str,
) -> Result<FileSummary, ScoreFileError> {
    let sink = dst.display().to_string();
    atomic::write_atomically(dst, |out| score_stream(input, out, options, source, &sink))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn options(threads: usize) -> ScoreFileOptions {
        ScoreFileOptions {
            config: RewardConfig::default(),
            threads,
            explain: true,
            line_ends: LineEnds::Universal,
            stop: None,
        }
    }

    const GOOD: &str =
        r#"{"task": "Compute 7*8", "gt": ["56"], "completion": "<answer>56</answer>"}"#;

    fn run(input: &[u8], threads: usize) -> (String, FileSummary) {
        let mut out = Vec::new();
        let summary = score_stream(Cursor::new(input), &mut out, &options(threads), "in", "out")
            .unwrap_or_default();
        (String::from_utf8(out).unwrap_or_default(), summary)
    }

    #[test]
    fn bad_lines_are_skipped_with_their_numbers_and_the_rest_is_scored() {
        let deep = "[".repeat(100_000);
        let mut input = Vec::new();
        for line in [GOOD, "{not json", "", &deep, r#"{"completion": 5}"#] {
            input.extend_from_slice(line.as_bytes());
            input.push(b'\n');
        }
        input.extend_from_slice(b"\xff\xfe\n");
        input.extend_from_slice(GOOD.as_bytes());
        let (text, summary) = run(&input, 1);
        assert_eq!(text.lines().count(), 2);
        assert_eq!(summary.lines, 7);
        assert_eq!(summary.rewards, vec![12.0, 12.0]);
        let lines: Vec<usize> = summary.skipped.iter().map(|s| s.line).collect();
        assert_eq!(lines, vec![2, 4, 5, 6]);
        assert!(summary.skipped[1].reason.contains("nesting deeper"));
        assert!(summary.skipped[3].reason.contains("UTF-8"));
        assert_eq!(
            summary.explained.iter().map(|e| e.line).collect::<Vec<_>>(),
            vec![1, 7]
        );
    }

    #[test]
    fn output_is_the_record_with_reward_and_details_as_python_writes_it() {
        let (text, _) = run(GOOD.as_bytes(), 1);
        assert!(text.starts_with(
            r#"{"task": "Compute 7*8", "gt": ["56"], "completion": "<answer>56</answer>", "reward": 12.0, "details": {"reward": 12.0, "raw_reward": 18.3"#
        ), "{text}");
        assert!(text.ends_with("}}\n"));
        // A record that already has a reward keeps the key where it was.
        let old = r#"{"reward": "old", "task": "Compute 7*8", "gt": ["56"], "completion": "56"}"#;
        let (text, _) = run(old.as_bytes(), 1);
        assert!(text.starts_with(r#"{"reward": "#) && !text.contains("old"));
    }

    #[test]
    fn threads_and_gzip_give_the_same_output() {
        let lines: Vec<String> = (0..3000)
            .map(|i| {
                format!(
                    r#"{{"task": "Compute {i}*2", "gt": ["{}"], "completion": "<answer>{}</answer>"}}"#,
                    i * 2,
                    i + i % 3
                )
            })
            .collect();
        let input = lines.join("\n").into_bytes();
        let (one, first) = run(&input, 1);
        let (two, second) = run(&input, 3);
        assert_eq!(one, two);
        assert_eq!(first.rewards, second.rewards);
        assert_eq!(one.lines().count(), 3000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let _ = gz.write_all(&input);
        let compressed = gz.finish().unwrap_or_default();
        let (unzipped, _) = run(&compressed, 2);
        assert_eq!(unzipped, one);
    }

    #[test]
    fn a_stopped_run_writes_no_output_file() {
        let dir = std::env::temp_dir().join(format!("agentrl-stop-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let dst = dir.join("out.jsonl");
        let input = format!("{GOOD}\n").repeat(20_000);
        for threads in [1, 2] {
            let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let counter = Arc::clone(&calls);
            let stop: StopCheck =
                Arc::new(move || counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2);
            let opts = ScoreFileOptions {
                stop: Some(stop),
                ..options(threads)
            };
            let result = score_into_path(Cursor::new(input.as_bytes()), &dst, &opts, "in");
            assert!(matches!(result, Err(ScoreFileError::Stopped)));
        }
        let left = std::fs::read_dir(&dir)
            .map(|d| d.count())
            .unwrap_or(usize::MAX);
        assert_eq!(left, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn reported_skips_are_capped_but_counted() {
        let input = "x\n".repeat(MAX_REPORTED_SKIPS + 5);
        let (_, summary) = run(input.as_bytes(), 2);
        assert_eq!(summary.skipped_count, MAX_REPORTED_SKIPS + 5);
        assert_eq!(summary.skipped.len(), MAX_REPORTED_SKIPS);
    }
}
