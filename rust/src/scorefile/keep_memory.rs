//! While a file is scored, memory freed by a chunk stays with the allocator for the next.
//!
//! Each chunk allocates its parsed records and text and frees them all when done, so the
//! allocator's pages fall empty after every chunk. mimalloc returns empty pages to the
//! system after a delay, and the next chunk then faults fresh ones in, which the kernel
//! zeroes: with two scoring threads that was 5-8% of the CPU time (`clear_page` under
//! `mi_page_free_list_extend` in `perf`), against 3% with returning turned off. So returning
//! is turned off while any file is being scored, and afterwards the setting is restored and
//! the calling thread's free memory handed back (`mi_collect`).

use std::os::raw::c_long;
use std::sync::Mutex;

use libmimalloc_sys::{mi_collect, mi_option_get, mi_option_set, mi_option_t};

/// `mi_option_purge_delay` in mimalloc's option enum (`mimalloc.h`: milliseconds before
/// an empty page is returned; -1 never). The Rust bindings do not name it.
const PURGE_DELAY: mi_option_t = 15;

/// How many runs hold the setting, and the delay to restore when the last one ends.
static HOLDERS: Mutex<(usize, c_long)> = Mutex::new((0, 0));

/// Keeps freed pages for as long as it lives (see the module doc).
pub struct KeepFreedMemory;

impl KeepFreedMemory {
    pub fn new() -> Self {
        if let Ok(mut holders) = HOLDERS.lock() {
            if holders.0 == 0 {
                // SAFETY: reading and setting an allocator option has no precondition;
                // mimalloc reads options with atomic loads.
                holders.1 = unsafe { mi_option_get(PURGE_DELAY) };
                unsafe { mi_option_set(PURGE_DELAY, -1) };
            }
            holders.0 += 1;
        }
        KeepFreedMemory
    }
}

impl Drop for KeepFreedMemory {
    fn drop(&mut self) {
        if let Ok(mut holders) = HOLDERS.lock() {
            holders.0 = holders.0.saturating_sub(1);
            if holders.0 == 0 {
                // SAFETY: as above; `mi_collect` only returns this thread's free pages.
                unsafe {
                    mi_option_set(PURGE_DELAY, holders.1);
                    mi_collect(true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_off_while_held_and_restored_after_the_last_holder() {
        // The only holder in the Rust tests (the Python binding takes it around a run).
        let before = unsafe { mi_option_get(PURGE_DELAY) };
        let defaults = [1000, 10]; // mimalloc v3's and v2's
        assert!(
            defaults.contains(&before) || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some(),
            "option {PURGE_DELAY} is not mimalloc's purge delay: it holds {before}"
        );
        {
            let _first = KeepFreedMemory::new();
            let second = KeepFreedMemory::new();
            assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, -1);
            drop(second);
            assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, -1);
        }
        assert_eq!(unsafe { mi_option_get(PURGE_DELAY) }, before);
    }
}
