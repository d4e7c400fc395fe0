//! Spreading rows over threads, and staying safe when the process forks.
//!
//! Rows are scored on a rayon pool of the requested size (default: the
//! `AGENTRL_NUM_THREADS` environment variable, else every core). A process that forks after
//! the pool has started (PyTorch DataLoader workers, `multiprocessing` with the fork start
//! method) gets a child without the pool's threads, and any use of the pool there would wait
//! forever. As the `tokenizers` library does, a `pthread_atfork` child handler marks
//! parallelism as disabled in such a child, which then scores on the calling thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};

use rayon::prelude::*;
use rayon::ThreadPool;

/// Environment variable that sets the default number of scoring threads.
pub const THREADS_ENV: &str = "AGENTRL_NUM_THREADS";

/// A pool has run work in this process (so a forked child would inherit a dead pool).
static PARALLELISM_USED: AtomicBool = AtomicBool::new(false);
/// Set in a child forked after parallelism was used: score on the calling thread only.
static PARALLELISM_DISABLED: AtomicBool = AtomicBool::new(false);
static REGISTER_FORK_HANDLER: Once = Once::new();
/// Pools by thread count, built on first use and kept for the process's life.
static POOLS: Mutex<Vec<(usize, Arc<ThreadPool>)>> = Mutex::new(Vec::new());

#[cfg(unix)]
extern "C" {
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> std::os::raw::c_int;
}

/// Runs in the child right after `fork()`: only async-signal-safe work (two atomics).
extern "C" fn child_after_fork() {
    after_fork_in_child();
}

/// Marks this process as a child forked after parallel scoring, if it is one.
pub fn after_fork_in_child() {
    if PARALLELISM_USED.load(Ordering::SeqCst) {
        PARALLELISM_DISABLED.store(true, Ordering::SeqCst);
    }
}

/// Installs the fork handler once per process.
pub fn register_fork_handler() {
    REGISTER_FORK_HANDLER.call_once(|| {
        #[cfg(unix)]
        // SAFETY: registers a handler that only touches atomics; pthread_atfork copies the
        // function pointers and has no other preconditions.
        unsafe {
            pthread_atfork(None, None, Some(child_after_fork));
        }
    });
}

/// True in a child process forked after parallel scoring: work runs on the calling thread.
pub fn parallelism_disabled() -> bool {
    PARALLELISM_DISABLED.load(Ordering::SeqCst)
}

/// The number of threads to use: `requested`, else `AGENTRL_NUM_THREADS`, else every core.
/// Zero or an unreadable variable counts as unset.
pub fn resolve_threads(requested: Option<usize>) -> usize {
    if let Some(n) = requested.filter(|&n| n > 0) {
        return n;
    }
    let from_env = std::env::var(THREADS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0);
    from_env.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn pool(threads: usize) -> Option<Arc<ThreadPool>> {
    let mut pools = POOLS.lock().ok()?;
    if let Some((_, pool)) = pools.iter().find(|(n, _)| *n == threads) {
        return Some(Arc::clone(pool));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("agentrl-reward-{i}"))
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    pools.push((threads, Arc::clone(&pool)));
    Some(pool)
}

/// `(0..n).map(f)` on up to `threads` threads, results in order. Falls back to the calling
/// thread for one thread, after a fork, or if a pool cannot be built.
pub fn map_indices<T, F>(n: usize, threads: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync + Send,
{
    if threads <= 1 || n <= 1 || parallelism_disabled() {
        return (0..n).map(f).collect();
    }
    register_fork_handler();
    // Marked before the pool exists, so a fork during its construction is covered too.
    PARALLELISM_USED.store(true, Ordering::SeqCst);
    let Some(pool) = pool(threads) else {
        return (0..n).map(f).collect();
    };
    pool.install(|| (0..n).into_par_iter().with_min_len(16).map(f).collect())
}

/// Runs `work` with a rayon scope on the pool of `threads` threads, so that it can hand
/// jobs to the pool while it keeps working on the calling thread; `None` when work must
/// stay on the calling thread (one thread, after a fork, or no pool).
pub fn with_scope<'scope, R>(
    threads: usize,
    work: impl FnOnce(Option<&rayon::Scope<'scope>>) -> R,
) -> R {
    if threads <= 1 || parallelism_disabled() {
        return work(None);
    }
    register_fork_handler();
    PARALLELISM_USED.store(true, Ordering::SeqCst);
    match pool(threads) {
        Some(pool) => pool.in_place_scope(|scope| work(Some(scope))),
        None => work(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_map_keeps_order() {
        let out = map_indices(1000, 2, |i| i * 3);
        assert_eq!(out, (0..1000).map(|i| i * 3).collect::<Vec<_>>());
        assert_eq!(map_indices(5, 1, |i| i), vec![0, 1, 2, 3, 4]);
        assert!(map_indices(0, 4, |i| i).is_empty());
    }

    #[test]
    fn scoped_jobs_run_on_the_pool() {
        let (tx, rx) = std::sync::mpsc::channel();
        let total: usize = with_scope(2, |scope| {
            let scope = scope.expect("a pool for two threads");
            for i in 0..10 {
                let tx = tx.clone();
                scope.spawn(move |_| {
                    let _ = tx.send(i);
                });
            }
            drop(tx);
            rx.iter().sum()
        });
        assert_eq!(total, 45);
        assert!(with_scope(1, |scope| scope.is_none()));
    }

    #[test]
    fn explicit_thread_count_wins() {
        assert_eq!(resolve_threads(Some(3)), 3);
        assert!(resolve_threads(None) >= 1);
    }
}
