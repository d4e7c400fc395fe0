//! A test helper: that work grows linearly with its input, judged by a ratio of two timings
//! on the same machine in the same moment, never by an absolute time (which a loaded
//! machine or a debug build breaks). The timings are the test thread's own CPU time, so
//! waiting for a core on a busy machine does not count.

use std::time::Duration;

use cpu_time::ThreadTime;

/// Input growth between the two timings.
const GROWTH: usize = 8;
/// The most the time may grow: linear work takes about 8x (a little more with the caches),
/// quadratic work 64x.
const MAX_RATIO: u32 = 24;
/// Below this the larger run is fast whatever its growth, and the timings are mostly noise.
const FLOOR: Duration = Duration::from_millis(30);
/// Timings of each size.
const ROUNDS: usize = 5;

/// The CPU time `run(n)` took on this thread.
fn timed(run: &mut impl FnMut(usize), n: usize) -> Duration {
    let start = ThreadTime::now();
    run(n);
    start.elapsed()
}

/// Asserts that `run(8 n)` takes less than 24 times as long as `run(n)`; `run(n)` should
/// build an input of about `n` units and process it (building is linear, so it counts too).
/// The two sizes take turns, five rounds, and each keeps its fastest: a shared machine's
/// speed swings from second to second, and turns put both sizes in the same moments. Pick `n` so that `run(n)` already works on more than the caches hold (a
/// megabyte or so): growing out of the caches costs several times more per unit in a debug
/// build.
pub fn assert_linear(what: &str, n: usize, mut run: impl FnMut(usize)) {
    let (mut small, mut large) = (Duration::MAX, Duration::MAX);
    for _ in 0..ROUNDS {
        small = small.min(timed(&mut run, n));
        large = large.min(timed(&mut run, GROWTH * n));
    }
    assert!(
        large < FLOOR || large < small * MAX_RATIO,
        "{what}: {n} units in {small:?}, {} in {large:?} (more than {MAX_RATIO}x)",
        GROWTH * n
    );
}

#[cfg(test)]
mod tests {
    use super::assert_linear;
    use std::hint::black_box;

    fn square(n: usize) {
        let mut sum = 0usize;
        for i in 0..n {
            for j in 0..n {
                sum = sum.wrapping_add(black_box(i ^ j));
            }
        }
        black_box(sum);
    }

    #[test]
    #[should_panic(expected = "more than 24x")]
    fn quadratic_work_is_caught() {
        assert_linear("a square", 800, square);
    }

    #[test]
    fn linear_work_passes() {
        assert_linear("a line", 250_000, |n| square(n.isqrt()));
    }
}
