//! Cutting the input into chunks of whole lines, and lines out of a chunk.
//!
//! Lines end as Python's text files end them: a file opened by path uses universal
//! newlines (`\n`, `\r\n` and a lone `\r` each end a line), while a stream read like
//! `sys.stdin` ends lines at `\n` only. Line numbers therefore match what `enumerate(file)`
//! gives in Python.

use std::io::{self, Read};

use crate::pyjson::scan::find_line_end;

/// Bytes per chunk (a chunk ends at the first line end after this many bytes): large enough
/// that a chunk is milliseconds of work, small enough that a few per thread stay in cache.
pub const CHUNK_BYTES: usize = 512 * 1024;

/// How lines end in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineEnds {
    /// `\n`, `\r\n` or `\r` (Python's `open()` in text mode).
    Universal,
    /// `\n` only (Python's `sys.stdin` on POSIX).
    Newline,
}

impl LineEnds {
    fn is_end(self, byte: u8) -> bool {
        byte == b'\n' || (self == LineEnds::Universal && byte == b'\r')
    }
}

/// The lines of a chunk, without their line ends.
pub fn lines(chunk: &[u8], ends: LineEnds) -> impl Iterator<Item = &[u8]> {
    let mut rest = chunk;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = find_line_end(rest, 0, ends == LineEnds::Universal);
        match (end < rest.len()).then_some(end) {
            Some(i) => {
                let line = &rest[..i];
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                rest = &rest[i + skip..];
                Some(line)
            }
            None => {
                let line = rest;
                rest = &[];
                Some(line)
            }
        }
    })
}

/// Reads `input` as a sequence of chunks that each end at a line end (the last one may end
/// without one).
pub struct Chunks<R> {
    input: R,
    ends: LineEnds,
    target: usize,
    /// The start of the next chunk: bytes read after the last line end handed out.
    carry: Vec<u8>,
    eof: bool,
}

impl<R: Read> Chunks<R> {
    pub fn new(input: R, ends: LineEnds) -> Self {
        Self::with_target(input, ends, CHUNK_BYTES)
    }

    pub fn with_target(input: R, ends: LineEnds, target: usize) -> Self {
        Chunks {
            input,
            ends,
            target: target.max(1),
            carry: Vec::new(),
            eof: false,
        }
    }

    /// The next chunk, or `None` at the end of the input.
    pub fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut buf = std::mem::take(&mut self.carry);
        loop {
            if !self.eof && buf.len() < self.target {
                let want = self.target - buf.len();
                self.read_more(&mut buf, want)?;
                continue;
            }
            if self.eof {
                return Ok((!buf.is_empty()).then_some(buf));
            }
            match self.cut_point(&buf) {
                Some(cut) => {
                    self.carry = buf[cut..].to_vec();
                    buf.truncate(cut);
                    return Ok(Some(buf));
                }
                // One line longer than the target: read on until it ends.
                None => {
                    let want = self.target;
                    self.read_more(&mut buf, want)?;
                }
            }
        }
    }

    fn read_more(&mut self, buf: &mut Vec<u8>, amount: usize) -> io::Result<()> {
        let read = (&mut self.input).take(amount as u64).read_to_end(buf)?;
        if read == 0 {
            self.eof = true;
        }
        Ok(())
    }

    /// Just past the last line end in `buf` that is certainly complete (a `\r` at the very
    /// end may be the first half of `\r\n`).
    fn cut_point(&self, buf: &[u8]) -> Option<usize> {
        let last = buf.iter().rposition(|&b| self.ends.is_end(b))?;
        if buf[last] == b'\r' && last + 1 == buf.len() {
            return buf[..last]
                .iter()
                .rposition(|&b| self.ends.is_end(b))
                .map(|i| i + 1);
        }
        Some(last + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &[u8], ends: LineEnds) -> Vec<&[u8]> {
        lines(text, ends).collect()
    }

    #[test]
    fn line_ends_follow_python() {
        let text = b"a\rb\r\nc\n\nd";
        let universal: Vec<&[u8]> = vec![b"a", b"b", b"c", b"", b"d"];
        assert_eq!(split(text, LineEnds::Universal), universal);
        let newline: Vec<&[u8]> = vec![b"a\rb\r", b"c", b"", b"d"];
        assert_eq!(split(text, LineEnds::Newline), newline);
        assert!(split(b"", LineEnds::Newline).is_empty());
        assert_eq!(split(b"x\n", LineEnds::Newline), vec![b"x"]);
    }

    #[test]
    fn chunks_hold_whole_lines_whatever_the_target() {
        let text: Vec<u8> = (0..500)
            .flat_map(|i| format!("line {i}{}", ["\n", "\r\n", "\r"][i % 3]).into_bytes())
            .collect();
        for target in [1, 2, 7, 64, 1000, 100_000] {
            let mut chunks = Chunks::with_target(&text[..], LineEnds::Universal, target);
            let mut all: Vec<u8> = Vec::new();
            let mut count = 0;
            while let Ok(Some(chunk)) = chunks.next_chunk() {
                count += lines(&chunk, LineEnds::Universal).count();
                all.extend(chunk);
            }
            assert_eq!(all, text, "target {target}");
            assert_eq!(count, 500, "target {target}");
        }
    }

    #[test]
    fn a_long_line_stays_whole() {
        let text = format!("{}\nshort\n", "x".repeat(10_000));
        let mut chunks = Chunks::with_target(text.as_bytes(), LineEnds::Newline, 100);
        let first = chunks.next_chunk().ok().flatten().unwrap_or_default();
        let mut first_lines = lines(&first, LineEnds::Newline);
        assert_eq!(first_lines.next().map(<[u8]>::len), Some(10_000));
        let mut all = first.clone();
        while let Ok(Some(chunk)) = chunks.next_chunk() {
            all.extend(chunk);
        }
        assert_eq!(all, text.as_bytes());
    }
}
