//! The ordered chunk pipeline: input that arrives a chunk at a time is read on the calling
//! thread, each chunk is worked on by the thread pool while the next ones are read, and the
//! results are handed back on the calling thread in input order.
//!
//! Both streaming scorers run on it: a batch of records converted from Python objects
//! ([`super::chunked`]) and `agentrl score`'s JSONL files ([`crate::scorefile`]). At most
//! `2 * threads + 2` chunks are read and not yet handed back, so memory stays bounded
//! however long the input.
//!
//! The outcome does not depend on the number of threads: results are handed back in order,
//! and a failure (reading a chunk, handing one back, a chunk whose work panicked) ends the
//! run at its place in that order, as it does on one thread. The jobs still running then
//! finish before the failure is returned.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;

use super::parallel;

/// The stages of a pipeline that run on the calling thread: reading chunks and taking their
/// results back. The work in between is the function given to [`run_in_order`].
pub trait Stages {
    /// What is read at a time.
    type Chunk: Send;
    /// What the work makes of a chunk.
    type Done: Send;
    type Error;

    /// The next chunk, or `None` at the end of the input.
    fn next_chunk(&mut self) -> Result<Option<Self::Chunk>, Self::Error>;

    /// Takes back a chunk's result; chunks come back in the order they were read.
    fn finish(&mut self, done: Self::Done) -> Result<(), Self::Error>;

    /// The error for a chunk whose work ended without a result (it panicked: a bug).
    fn lost_chunk(&self) -> Self::Error;

    /// Runs `run`, which waits for the pool or works on a chunk and needs nothing the
    /// calling thread holds (the Python binding releases the GIL around it).
    fn blocking<T: Send>(&mut self, run: impl FnOnce() -> T + Send) -> T {
        run()
    }
}

/// Reads every chunk of `stages`, makes each into a result with `work` on up to `threads`
/// threads, and hands the results back in order. One thread (or a forked child, see
/// [`parallel`]) does it all in turn on the calling thread.
pub fn run_in_order<'w, S, W>(threads: usize, stages: &mut S, work: &'w W) -> Result<(), S::Error>
where
    S: Stages,
    S::Chunk: 'w,
    S::Done: 'w,
    W: Fn(S::Chunk) -> S::Done + Sync,
{
    parallel::with_scope(threads, |scope| match scope {
        None => in_turn(stages, work),
        Some(scope) => pipelined(threads, stages, work, scope),
    })
}

/// `work(chunk)`, or `None` if it panicked: a panic must neither cross into Python nor
/// leave the calling thread waiting for the chunk.
fn guarded<C, D>(work: &impl Fn(C) -> D, chunk: C) -> Option<D> {
    catch_unwind(AssertUnwindSafe(|| work(chunk))).ok()
}

fn in_turn<S, W>(stages: &mut S, work: &W) -> Result<(), S::Error>
where
    S: Stages,
    W: Fn(S::Chunk) -> S::Done + Sync,
{
    while let Some(chunk) = stages.next_chunk()? {
        match stages.blocking(|| guarded(work, chunk)) {
            Some(done) => stages.finish(done)?,
            None => return Err(stages.lost_chunk()),
        }
    }
    Ok(())
}

/// A chunk's index in the input and its result (`None`: its work panicked).
type Arrival<D> = (usize, Option<D>);

fn pipelined<'w, S, W>(
    threads: usize,
    stages: &mut S,
    work: &'w W,
    scope: &rayon::Scope<'w>,
) -> Result<(), S::Error>
where
    S: Stages,
    S::Chunk: 'w,
    S::Done: 'w,
    W: Fn(S::Chunk) -> S::Done + Sync,
{
    let max_in_flight = 2 * threads + 2;
    let (sender, mut receiver) = mpsc::channel::<Arrival<S::Done>>();
    // Results that came before the ones ahead of them, by index.
    let mut arrived: BTreeMap<usize, Option<S::Done>> = BTreeMap::new();
    // Chunks read, results received, results handed back.
    let (mut read, mut received, mut handed) = (0usize, 0usize, 0usize);
    // The input ended, and how: a read error waits for the chunks read before it.
    let mut end: Option<Result<(), S::Error>> = None;
    loop {
        while let Some(done) = arrived.remove(&handed) {
            handed += 1;
            let taken = match done {
                Some(done) => stages.finish(done),
                None => Err(stages.lost_chunk()),
            };
            if let Err(error) = taken {
                // The jobs handed out finish (the GIL released) before the error is returned.
                for _ in received..read {
                    let receiver = &mut receiver;
                    let _ = stages.blocking(move || receiver.recv());
                }
                return Err(error);
            }
        }
        if end.is_none() && read - handed < max_in_flight {
            match stages.next_chunk() {
                Ok(Some(chunk)) => {
                    let sender = sender.clone();
                    let index = read;
                    scope.spawn(move |_| {
                        // The receiver outlives the jobs; a failed send loses nothing.
                        let _ = sender.send((index, guarded(work, chunk)));
                    });
                    read += 1;
                }
                Ok(None) => end = Some(Ok(())),
                Err(error) => end = Some(Err(error)),
            }
            // Whatever finished meanwhile is collected without waiting.
            while let Ok((index, done)) = receiver.try_recv() {
                arrived.insert(index, done);
                received += 1;
            }
            continue;
        }
        if handed == read {
            break;
        }
        let waiting = &mut receiver;
        match stages.blocking(move || waiting.recv()) {
            Ok((index, done)) => {
                arrived.insert(index, done);
                received += 1;
            }
            // Cannot happen while `sender` is alive; treated as a lost chunk all the same.
            Err(_) => return Err(stages.lost_chunk()),
        }
    }
    end.unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers `0..n` read in chunks of `size`; a read error at `fail_at` (a chunk index).
    struct Numbers {
        n: usize,
        size: usize,
        next: usize,
        fail_at: Option<usize>,
        finished: Vec<Vec<usize>>,
        reads: usize,
    }

    impl Numbers {
        fn new(n: usize, size: usize) -> Self {
            Numbers {
                n,
                size,
                next: 0,
                fail_at: None,
                finished: Vec::new(),
                reads: 0,
            }
        }
    }

    impl Stages for Numbers {
        type Chunk = Vec<usize>;
        type Done = Result<Vec<usize>, String>;
        type Error = String;

        fn next_chunk(&mut self) -> Result<Option<Vec<usize>>, String> {
            if self.fail_at == Some(self.reads) {
                return Err(format!("read error at chunk {}", self.reads));
            }
            self.reads += 1;
            let end = (self.next + self.size).min(self.n);
            let chunk: Vec<usize> = (self.next..end).collect();
            self.next = end;
            Ok((!chunk.is_empty()).then_some(chunk))
        }

        fn finish(&mut self, done: Result<Vec<usize>, String>) -> Result<(), String> {
            self.finished.push(done?);
            Ok(())
        }

        fn lost_chunk(&self) -> String {
            "lost".to_string()
        }
    }

    /// Squares, slower for the first chunks so that later ones finish first; a number
    /// divisible by `bad` is an error, and 777 panics.
    fn work(bad: usize) -> impl Fn(Vec<usize>) -> Result<Vec<usize>, String> + Sync {
        move |chunk: Vec<usize>| {
            if chunk.first().is_some_and(|&x| x < 30) {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if chunk.contains(&777) {
                panic!("a bug in the work");
            }
            match chunk.iter().find(|&&x| x % bad == 0 && x > 0) {
                Some(x) => Err(format!("bad {x}")),
                None => Ok(chunk.iter().map(|x| x * x).collect()),
            }
        }
    }

    fn run(threads: usize, stages: &mut Numbers, bad: usize) -> Result<(), String> {
        run_in_order(threads, stages, &work(bad))
    }

    #[test]
    fn results_come_back_in_input_order_on_any_number_of_threads() {
        for threads in [1, 2, 4] {
            let mut stages = Numbers::new(500, 7);
            assert_eq!(run(threads, &mut stages, usize::MAX), Ok(()));
            let flat: Vec<usize> = stages.finished.concat();
            assert_eq!(flat, (0..500).map(|x| x * x).collect::<Vec<_>>());
            assert_eq!(stages.finished.len(), 72);
        }
    }

    #[test]
    fn the_first_failure_in_input_order_wins_whatever_the_threads() {
        for threads in [1, 3] {
            // A bad chunk (number 100, chunk 10) before a read error (chunk 20).
            let mut stages = Numbers::new(500, 10);
            stages.fail_at = Some(20);
            assert_eq!(run(threads, &mut stages, 100), Err("bad 100".to_string()));
            assert_eq!(stages.finished.len(), 10);
            // A read error with no bad chunk before it: every chunk read before it is taken.
            let mut stages = Numbers::new(500, 10);
            stages.fail_at = Some(20);
            let got = run(threads, &mut stages, usize::MAX);
            assert_eq!(got, Err("read error at chunk 20".to_string()));
            assert_eq!(stages.finished.len(), 20);
        }
    }

    #[test]
    fn a_panicking_chunk_is_a_lost_chunk_not_a_panic() {
        for threads in [1, 2] {
            let mut stages = Numbers::new(2000, 10);
            assert_eq!(
                run(threads, &mut stages, usize::MAX),
                Err("lost".to_string())
            );
            assert_eq!(stages.finished.len(), 77);
        }
    }

    #[test]
    fn reading_stays_a_bounded_number_of_chunks_ahead() {
        struct Watched {
            inner: Numbers,
            ahead: usize,
            most_ahead: usize,
        }
        impl Stages for Watched {
            type Chunk = Vec<usize>;
            type Done = Result<Vec<usize>, String>;
            type Error = String;
            fn next_chunk(&mut self) -> Result<Option<Vec<usize>>, String> {
                let chunk = self.inner.next_chunk()?;
                if chunk.is_some() {
                    self.ahead += 1;
                    self.most_ahead = self.most_ahead.max(self.ahead);
                }
                Ok(chunk)
            }
            fn finish(&mut self, done: Self::Done) -> Result<(), String> {
                self.ahead -= 1;
                self.inner.finish(done)
            }
            fn lost_chunk(&self) -> String {
                self.inner.lost_chunk()
            }
        }
        let mut stages = Watched {
            inner: Numbers::new(700, 5),
            ahead: 0,
            most_ahead: 0,
        };
        assert_eq!(run_in_order(2, &mut stages, &work(usize::MAX)), Ok(()));
        assert_eq!(stages.inner.finished.len(), 140);
        assert!(stages.most_ahead <= 6, "{}", stages.most_ahead);
    }
}
