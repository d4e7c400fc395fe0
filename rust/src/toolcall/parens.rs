//! Matching parentheses with quote rules, for many start positions, in linear time.
//!
//! The `)` that closes a `(` is the one a forward scan from it stops on: quotes (`'` or `"`)
//! hide parentheses until the same quote closes, and inside quotes a backslash hides the next
//! character. The scan always starts outside quotes, so its result depends on where it
//! starts: the same `(` can be inside a string for a scan that began earlier. Calling such a
//! scan for each candidate, one after the other, is quadratic when scans fail (an unclosed
//! `calculate_math(` repeated across a megabyte).
//!
//! Here each scan is a *trajectory*: a walk through (position, quote state) with a stack of
//! open parentheses. Two scans that reach the same position in the same quote state behave
//! identically from then on, apart from how deep they are. So every (position, state) cell is
//! walked at most once: a new scan stops as soon as it reaches a cell an earlier scan has
//! walked, and resolves its own open parentheses from that scan's stack at that cell. With
//! five quote states, total work is at most five steps per byte.
//!
//! Positions are byte offsets: every character that matters (quotes, backslash,
//! parentheses) is ASCII, and a backslash that hides a multi-byte character hides its first
//! byte, after which the remaining bytes are ordinary characters inside the quote.

/// Quote states of the scan.
const OUTSIDE: usize = 0;
const SINGLE: usize = 1;
const SINGLE_ESCAPED: usize = 2;
const DOUBLE: usize = 3;
const DOUBLE_ESCAPED: usize = 4;
const STATES: usize = 5;

const NONE: u32 = u32::MAX;

/// An open parenthesis pushed by some scan.
#[derive(Clone, Copy)]
struct OpenParen {
    /// The open parenthesis below it on the same scan's stack (`NONE` at the bottom).
    below: u32,
    /// Offset of the `)` that closes it, `NONE` while unknown or when it never closes.
    close: u32,
}

/// Answers "where does the scan from this `(` end?" for increasing start offsets.
pub(crate) struct ParenMatcher<'a> {
    bytes: &'a [u8],
    /// The first offset covered by the tables below.
    base: usize,
    /// For each (offset, state) walked by a scan: 1 + that scan's stack top there (1 alone
    /// for an empty stack); 0 where no scan has been.
    cells: Vec<u32>,
    parens: Vec<OpenParen>,
    /// For each offset: 1 + the open parenthesis pushed there by a scan outside quotes.
    pushed_at: Vec<u32>,
    /// Starts must be at or after this offset: past the last start, and past the last
    /// close returned (the parser's cursor skips a matched call).
    next_start: usize,
}

impl<'a> ParenMatcher<'a> {
    /// A matcher for starts at `base` or later. Offsets are stored as `u32`, so texts of
    /// 4 GiB or more are refused (`None`).
    pub(crate) fn new(bytes: &'a [u8], base: usize) -> Option<Self> {
        let len = bytes.len();
        if u32::try_from(len).is_err() || base > len {
            return None;
        }
        let span = len - base + 1;
        Some(ParenMatcher {
            bytes,
            base,
            cells: vec![0; span * STATES],
            parens: Vec::new(),
            pushed_at: vec![0; span],
            next_start: base,
        })
    }

    /// The offset of the `)` that the scan starting at the `(` at `open` stops on, or
    /// `None` when it reaches the end of the text.
    ///
    /// Starts must come in the order the parser's cursor visits them: each after the previous
    /// start, and after the close last returned (a scan that succeeded stops at its close, so
    /// nothing inside it is known). A start that breaks this order, or is not at a `(`, gets
    /// `None`.
    pub(crate) fn close_of(&mut self, open: usize) -> Option<usize> {
        if open < self.next_start || self.bytes.get(open) != Some(&b'(') {
            return None;
        }
        self.next_start = open + 1;
        if self.pushed_at[open - self.base] == 0 {
            self.walk_from(open);
        }
        let paren = self.pushed_at[open - self.base].checked_sub(1)?;
        let close = self.parens.get(paren as usize)?.close;
        if close == NONE {
            return None;
        }
        self.next_start = close as usize + 1;
        Some(close as usize)
    }

    /// Walks a new scan from `open` until it closes its first parenthesis, reaches the end,
    /// or joins a cell an earlier scan has walked.
    fn walk_from(&mut self, open: usize) {
        let mut state = OUTSIDE;
        let mut top = NONE;
        let mut at = open;
        loop {
            let cell = (at - self.base) * STATES + state;
            let seen = self.cells[cell];
            if seen != 0 {
                let other_top = if seen == 1 { NONE } else { seen - 2 };
                self.adopt(top, other_top);
                return;
            }
            self.cells[cell] = if top == NONE { 1 } else { top + 2 };
            let Some(&byte) = self.bytes.get(at) else {
                // End of text: whatever is still open never closes.
                return;
            };
            state = match (state, byte) {
                (OUTSIDE, b'(') => {
                    let id = self.parens.len() as u32;
                    self.parens.push(OpenParen {
                        below: top,
                        close: NONE,
                    });
                    self.pushed_at[at - self.base] = id + 1;
                    top = id;
                    OUTSIDE
                }
                (OUTSIDE, b')') => {
                    if let Some(paren) = self.parens.get_mut(top as usize) {
                        paren.close = at as u32;
                        top = paren.below;
                    }
                    if top == NONE {
                        // The starting parenthesis is closed: this scan is over.
                        return;
                    }
                    OUTSIDE
                }
                (OUTSIDE, b'\'') => SINGLE,
                (OUTSIDE, b'"') => DOUBLE,
                (OUTSIDE, _) => OUTSIDE,
                (SINGLE, b'\\') => SINGLE_ESCAPED,
                (SINGLE, b'\'') => OUTSIDE,
                (SINGLE | SINGLE_ESCAPED, _) => SINGLE,
                (DOUBLE, b'\\') => DOUBLE_ESCAPED,
                (DOUBLE, b'"') => OUTSIDE,
                _ => DOUBLE,
            };
            at += 1;
        }
    }

    /// From here on this scan follows an earlier one whose stack top is `other`: each still
    /// open parenthesis closes where the one at the same height (counted from the top) of the
    /// earlier scan's stack closes. If the earlier stack is shallower, the rest never close:
    /// an earlier scan that is still walked here never closed its own first parenthesis.
    fn adopt(&mut self, mut mine: u32, mut other: u32) {
        while let Some(&paren) = self.parens.get(mine as usize) {
            let close = match self.parens.get(other as usize) {
                Some(o) => {
                    other = o.below;
                    o.close
                }
                None => NONE,
            };
            if let Some(p) = self.parens.get_mut(mine as usize) {
                p.close = close;
            }
            mine = paren.below;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain scan, character by character, to compare with.
    fn plain_close(text: &str, open: usize) -> Option<usize> {
        let mut depth = 0i64;
        let mut quote: Option<u8> = None;
        let mut escaped = false;
        for (i, &b) in text.as_bytes().iter().enumerate().skip(open) {
            if let Some(q) = quote {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == q {
                    quote = None;
                }
                continue;
            }
            match b {
                b'\'' | b'"' => quote = Some(b),
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Every `(` as a start, skipping those inside a matched span as the parser's cursor
    /// does, compared with the plain scan.
    fn check_all_starts(text: &str) {
        let opens: Vec<usize> = text
            .bytes()
            .enumerate()
            .filter(|(_, b)| *b == b'(')
            .map(|(i, _)| i)
            .collect();
        let Some(&first) = opens.first() else { return };
        let Some(mut m) = ParenMatcher::new(text.as_bytes(), first) else {
            panic!("matcher refused {text:?}");
        };
        let mut cursor = 0;
        for &o in &opens {
            if o < cursor {
                continue;
            }
            let want = plain_close(text, o);
            assert_eq!(m.close_of(o), want, "start {o} in {text:?}");
            cursor = want.map_or(o + 1, |c| c + 1);
        }
    }

    #[test]
    fn matches_the_plain_scan_on_tricky_texts() {
        for text in [
            "f(a(b)c)",
            "f(\"(\" (x)) g(')')",
            "f(\" f(\"x\") )",
            "(\"(\"(\"(\"(\"(",
            "('\\')') (\"\\\"(\" ) )",
            "(('\"')\"'\")",
            "((((",
            "))((",
            "(a\\)b)",
            "(\"é\\é(\")",
            "('a' \"b\" ( 'c(' ) \"d)\" ) )",
        ] {
            check_all_starts(text);
        }
    }

    #[test]
    fn matches_the_plain_scan_on_pseudo_random_texts() {
        let alphabet = [b'(', b')', b'\'', b'"', b'\\', b'x', b' '];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 1..60 {
            for _ in 0..200 {
                let text: String = (0..len)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        alphabet[(seed % alphabet.len() as u64) as usize] as char
                    })
                    .collect();
                check_all_starts(&text);
            }
        }
    }

    #[test]
    fn starts_must_follow_the_cursor_order() {
        let text = "(a(b))(c)";
        let Some(mut m) = ParenMatcher::new(text.as_bytes(), 0) else {
            panic!("refused");
        };
        assert_eq!(m.close_of(1), None, "not at a parenthesis");
        assert_eq!(m.close_of(2), Some(4));
        assert_eq!(m.close_of(0), None, "before the previous start");
        let Some(mut m) = ParenMatcher::new(text.as_bytes(), 0) else {
            panic!("refused");
        };
        assert_eq!(m.close_of(0), Some(5));
        assert_eq!(m.close_of(2), None);
        assert_eq!(m.close_of(6), Some(8));
    }
}
