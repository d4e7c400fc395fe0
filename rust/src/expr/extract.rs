//! Extraction of arithmetic expressions from mixed Chinese/English text, in linear time.
//!
//! Candidates are the matches of Python's `re.finditer` with the pattern
//!
//! ```text
//! (?<![A-Za-z0-9_]) ATOM (?: \s* OP \s* ATOM )+ (?![A-Za-z0-9_])      (IGNORECASE)
//! ATOM = FUNC \s* \( [^()]+ \) | \( [^()]+ \) | [-+]? \d+ (?: \. \d+ )?
//! OP   = \*\* | // | [+\-*/×÷^%]
//! ```
//!
//! and a backtracking engine. This module reproduces exactly which spans that engine
//! reports, without backtracking. The engine's answer from a position depends only on the
//! position, so it can be tabulated once for the whole text from right to left:
//!
//! * `after(q)`: at an iteration boundary `q` (just after an atom) the greedy `+` first tries
//!   one more `\s* OP \s* ATOM` and, if everything after it fails, stops at `q` provided the
//!   lookahead holds there.
//! * `next(q)`: the first success among the ends of the one more iteration, in the order the
//!   engine tries them. `\s*`, `OP` and the parenthesised atoms have a single way to match
//!   (`**` could also be tried as `*`, but then an atom would have to start with `*`). A
//!   number can end after any of its digits: with a fraction, the engine tries the longest
//!   fraction, then shorter fractions, then the integer part alone, then shorter integer
//!   parts. A shorter end is followed by a digit, which is neither whitespace nor an
//!   operator, so only the lookahead can accept it, and it does exactly when that digit is
//!   not ASCII (Unicode digits match `\d` but not `[A-Za-z0-9_]`). The integer part alone is
//!   followed by `.`, which the lookahead accepts.
//!
//! `finditer` then tries each start position in turn (continuing after each match) and a
//! start succeeds with `next` of its first atom (at least one iteration is required).
//! Every table entry takes constant time, so the scan is linear; no recursion is involved.
//!
//! Each match then loses its edges (see [`strip_edges`]), must hold a binary operator and
//! must evaluate with `safe_eval`; the first `max_exprs` of these are kept (finditer spans
//! never overlap, so no overlap has to be resolved), without duplicates by canonical form.

use std::collections::HashSet;

use super::fullwidth::translate_fullwidth_char;
use super::{canonical_form, eval_canonical};
use crate::pychar::{is_digit, is_space};

/// "No match" in the position tables.
const FAIL: u32 = u32::MAX;

// Character classes the pattern distinguishes, computed once per character.
/// `\s`.
const SPACE: u8 = 1;
/// `\d` (Unicode decimal digit).
const DIGIT: u8 = 2;
/// A `\d` outside ASCII: the lookarounds' `[A-Za-z0-9_]` does not match it.
const WIDE_DIGIT: u8 = 4;
/// `(?i)[A-Za-z0-9_]`, the class of both lookarounds.
const WORD: u8 = 8;
const OPEN: u8 = 16;
const CLOSE: u8 = 32;
/// A single-character operator `[+\-*/×÷^%]`.
const OPERATOR: u8 = 64;
/// Can start a function name under IGNORECASE (`s c t l e a r`, either case, and `ſ`).
const NAME_START: u8 = 128;

const fn ascii_classes() -> [u8; 128] {
    let mut table = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let c = i as u8;
        let mut class = 0;
        if matches!(c, b'\t'..=b'\r' | 0x1C..=b' ') {
            class |= SPACE;
        }
        if c.is_ascii_digit() {
            class |= DIGIT;
        }
        if c.is_ascii_alphanumeric() || c == b'_' {
            class |= WORD;
        }
        if matches!(
            c.to_ascii_lowercase(),
            b's' | b'c' | b't' | b'l' | b'e' | b'a' | b'r'
        ) {
            class |= NAME_START;
        }
        if matches!(c, b'+' | b'-' | b'*' | b'/' | b'^' | b'%') {
            class |= OPERATOR;
        }
        if c == b'(' {
            class |= OPEN;
        }
        if c == b')' {
            class |= CLOSE;
        }
        table[i] = class;
        i += 1;
    }
    table
}

const ASCII_CLASSES: [u8; 128] = ascii_classes();

fn classify(c: char) -> u8 {
    if c.is_ascii() {
        return ASCII_CLASSES[c as usize];
    }
    // CJK, kana and Hangul (the bulk of non-ASCII input) belong to no class.
    let cp = u32::from(c);
    if (0x3001..0xA620).contains(&cp) || (0xAC00..0xFF00).contains(&cp) {
        return 0;
    }
    match c {
        // Under IGNORECASE, `ſ` matches `s` (so it can start `sqrt`/`sin`), `İ` and `ı`
        // match `i`, and the Kelvin sign matches `k` (found by brute force over all code
        // points).
        '\u{17F}' => WORD | NAME_START,
        '\u{130}' | '\u{131}' | '\u{212A}' => WORD,
        '×' | '÷' => OPERATOR,
        _ if is_space(c) => SPACE,
        _ if is_digit(c) => DIGIT | WIDE_DIGIT,
        _ => 0,
    }
}

/// The ASCII lowercase letter a character matches under IGNORECASE, for the letters of the
/// function names (`İ`/`ı` match `i`, `ſ` matches `s`, the Kelvin sign matches `k`).
fn ci_letter(c: char) -> Option<char> {
    match c {
        'a'..='z' => Some(c),
        'A'..='Z' => Some(c.to_ascii_lowercase()),
        '\u{130}' | '\u{131}' => Some('i'),
        '\u{17F}' => Some('s'),
        '\u{212A}' => Some('k'),
        _ => None,
    }
}

const FUNCTION_NAMES: [&str; 8] = ["sqrt", "sin", "cos", "tan", "log", "exp", "abs", "round"];

/// The position tables at one index of the text; see [`Scanner`].
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// For whitespace or a digit at `i`: the end of its run of whitespace or digits.
    run_end: u32,
    /// First index `> i` holding `(` or `)`, or the text length (used after a `(`).
    paren_after: u32,
    /// For a digit at `i`: the last index `>= i` of its run holding a non-ASCII digit.
    last_wide_digit: u32,
    /// `next(q)` for every `q` just after a digit or `)`; `FAIL` elsewhere.
    next: u32,
}

/// Position tables over the (full-width translated) text; see the module documentation.
struct Scanner<'a> {
    chars: &'a [char],
    /// `classify` of every character, plus a 0 sentinel at the end.
    class: &'a [u8],
    /// One entry per index, the end of the text included.
    table: Vec<Entry>,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a Translated) -> Self {
        let n = text.chars.len();
        let end = pos(n);
        let blank = Entry {
            run_end: end,
            paren_after: end,
            last_wide_digit: FAIL,
            next: FAIL,
        };
        let mut scanner = Scanner {
            chars: &text.chars,
            class: &text.class,
            table: vec![blank; n + 1],
        };
        let mut paren_seen = end;
        for i in (0..n).rev() {
            let here = pos(i);
            let c = scanner.class[i];
            let c_next = scanner.class[i + 1];
            let same_run = c & c_next & (SPACE | DIGIT) != 0;
            let after = scanner.table[i + 1];
            let entry = &mut scanner.table[i];
            entry.run_end = if same_run {
                after.run_end
            } else if c & (SPACE | DIGIT) != 0 {
                here + 1
            } else {
                here
            };
            entry.paren_after = paren_seen;
            if c & (OPEN | CLOSE) != 0 {
                paren_seen = here;
            }
            if c & DIGIT != 0 {
                let later = if c_next & DIGIT != 0 {
                    after.last_wide_digit
                } else {
                    FAIL
                };
                entry.last_wide_digit = if later == FAIL && c & WIDE_DIGIT != 0 {
                    here
                } else {
                    later
                };
            }
            // Boundaries are only ever queried just after an atom: after a digit or ')'.
            // `next` at i+1 only needs entries to its right, all filled by now.
            if c & (DIGIT | CLOSE) != 0 {
                scanner.table[i + 1].next = scanner.compute_next(i + 1);
            }
        }
        scanner
    }

    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }

    fn has(&self, i: usize, class: u8) -> bool {
        self.class.get(i).is_some_and(|&c| c & class != 0)
    }

    /// First index `>= i` that is not whitespace.
    fn skip_spaces(&self, i: usize) -> usize {
        if self.has(i, SPACE) {
            self.table[i].run_end as usize
        } else {
            i
        }
    }

    /// The lookahead `(?![A-Za-z0-9_])` at `q`.
    fn lookahead_ok(&self, q: usize) -> bool {
        !self.has(q, WORD)
    }

    /// `after(q)`: continue with more iterations if possible, else stop at `q`.
    fn after(&self, q: usize) -> u32 {
        let next = self.table[q].next;
        if next != FAIL {
            next
        } else if self.lookahead_ok(q) {
            pos(q)
        } else {
            FAIL
        }
    }

    /// `next(q)`: `\s* OP \s* ATOM` from `q`, followed by `after` of the atom's end.
    fn compute_next(&self, q: usize) -> u32 {
        let s = self.skip_spaces(q);
        if !self.has(s, OPERATOR) {
            return FAIL;
        }
        let c = self.chars[s];
        let op_len = if (c == '*' || c == '/') && self.at(s + 1) == Some(c) {
            2
        } else {
            1
        };
        // When `**` or `//` fails, the engine retries a single `*` or `/`; the atom would
        // then have to start at the second `*` or `/`, which no atom can.
        self.iteration_atom(self.skip_spaces(s + op_len))
    }

    /// End of `[^()]+ \)` after an opening parenthesis at `open`, if there is one.
    fn paren_body_end(&self, open: usize) -> Option<usize> {
        let close = self.table[open].paren_after as usize;
        (close > open + 1 && self.has(close, CLOSE)).then_some(close + 1)
    }

    /// Length of a function name (matched case-insensitively) starting at `r`.
    fn function_name_len(&self, r: usize) -> Option<usize> {
        FUNCTION_NAMES.iter().find_map(|name| {
            let matched = name
                .chars()
                .enumerate()
                .all(|(k, expected)| self.at(r + k).and_then(ci_letter) == Some(expected));
            matched.then_some(name.len())
        })
    }

    /// End of a function-call or parenthesised atom starting at `r`.
    fn paren_atom_end(&self, r: usize) -> Option<usize> {
        if self.has(r, OPEN) {
            return self.paren_body_end(r);
        }
        if !self.has(r, NAME_START) {
            return None;
        }
        let name_len = self.function_name_len(r)?;
        let open = self.skip_spaces(r + name_len);
        if self.has(open, OPEN) {
            self.paren_body_end(open)
        } else {
            None
        }
    }

    /// A number atom at `r`: index of its first digit, end of the integer digits, and the
    /// end of the fraction digits when a fraction follows.
    fn number_parts(&self, r: usize) -> Option<(usize, usize, Option<usize>)> {
        let first = if matches!(self.at(r), Some('+' | '-')) {
            r + 1
        } else {
            r
        };
        if !self.has(first, DIGIT) {
            return None;
        }
        let int_end = self.table[first].run_end as usize;
        let has_fraction = self.at(int_end) == Some('.') && self.has(int_end + 1, DIGIT);
        let frac_end = has_fraction.then(|| self.table[int_end + 1].run_end as usize);
        Some((first, int_end, frac_end))
    }

    /// The largest end strictly inside the digit run `[run_start, run_end)` at which the
    /// lookahead holds (the next digit is not ASCII).
    fn shorter_digit_end(&self, run_start: usize, run_end: usize) -> u32 {
        if run_start + 1 < run_end {
            self.table[run_start + 1].last_wide_digit
        } else {
            FAIL
        }
    }

    /// An atom in an iteration: the first of its ends (in the engine's order) that leads to
    /// a complete match, and where that match ends.
    fn iteration_atom(&self, r: usize) -> u32 {
        if let Some(end) = self.paren_atom_end(r) {
            return self.after(end);
        }
        let Some((first, int_end, frac_end)) = self.number_parts(r) else {
            return FAIL;
        };
        match frac_end {
            Some(frac_end) => {
                let full = self.after(frac_end);
                if full != FAIL {
                    return full;
                }
                let shorter = self.shorter_digit_end(int_end + 1, frac_end);
                if shorter != FAIL {
                    return shorter;
                }
                self.after(int_end)
            }
            None => {
                let full = self.after(int_end);
                if full != FAIL {
                    return full;
                }
                self.shorter_digit_end(first, int_end)
            }
        }
    }

    /// The match starting at `p`, if any: the lookbehind, a first atom, then `next` of its
    /// end (only the longest end of a number can be followed by an operator).
    fn match_at(&self, p: usize) -> u32 {
        if p > 0 && self.has(p - 1, WORD) {
            return FAIL;
        }
        let end = if let Some(end) = self.paren_atom_end(p) {
            end
        } else if let Some((_, int_end, frac_end)) = self.number_parts(p) {
            frac_end.unwrap_or(int_end)
        } else {
            return FAIL;
        };
        self.table[end].next
    }

    /// The spans `re.finditer` reports, in order, found as they are asked for.
    fn spans(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut p = 0;
        std::iter::from_fn(move || {
            while p < self.chars.len() {
                // A match starts with a digit, `(`, a function name or a sign: other
                // characters (most of them) are passed over on their class alone.
                if !self.has(p, DIGIT | OPEN | NAME_START | OPERATOR) {
                    p += 1;
                    continue;
                }
                let start = p;
                let end = self.match_at(start);
                if end != FAIL && end as usize > start {
                    p = end as usize;
                    return Some((start, p));
                }
                p += 1;
            }
            None
        })
    }
}

/// Index to table entry. Texts are far below 4 Gi characters; a longer one saturates,
/// which only stops matches beyond that point.
fn pos(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(FAIL - 1)
}

/// Sentence punctuation trimmed from both ends of a match after the whitespace.
const EDGE_PUNCTUATION: [char; 17] = [
    ' ', '\t', '\r', '\n', ':', ';', ',', '.', '?', '？', '!', '！', '、', '，', '。', '；', '：',
];

fn trim_start_by(s: &[char], strip: impl Fn(char) -> bool) -> &[char] {
    let skip = s.iter().take_while(|&&c| strip(c)).count();
    &s[skip..]
}

fn trim_end_by(s: &[char], strip: impl Fn(char) -> bool) -> &[char] {
    let keep = s.len() - s.iter().rev().take_while(|&&c| strip(c)).count();
    &s[..keep]
}

/// A match without its edges, on already translated characters: Python whitespace and then
/// sentence punctuation trimmed from both ends; then the last character dropped (with the
/// whitespace before it) for as long as `)` outnumber `(`. The counts are taken once and
/// updated as characters go, so this stays linear.
fn strip_edges(span: &[char]) -> &[char] {
    let s = trim_end_by(trim_start_by(span, is_space), is_space);
    let is_edge = |c: char| EDGE_PUNCTUATION.contains(&c);
    let mut s = trim_end_by(trim_start_by(s, is_edge), is_edge);
    let mut opens = s.iter().filter(|&&c| c == '(').count();
    let mut closes = s.iter().filter(|&&c| c == ')').count();
    while closes > opens {
        let Some((&last, rest)) = s.split_last() else {
            break;
        };
        match last {
            ')' => closes -= 1,
            '(' => opens -= 1,
            _ => {}
        }
        s = trim_end_by(rest, is_space);
    }
    s
}

/// Whether a match is arithmetic and not just a signed number: past one optional `+`/`-`
/// in front, its visible characters (`^` counting as `**`) hold an operator.
fn has_binary_operator(expr: &[char]) -> bool {
    let mut visible = expr.iter().copied().filter(|&c| !is_space(c));
    let mut rest = visible.clone();
    if matches!(visible.next(), Some('+' | '-')) {
        rest = visible;
    }
    rest.any(|c| matches!(c, '+' | '-' | '*' | '/' | '%' | '^'))
}

/// A text after full-width translation, with the class of every character.
struct Translated {
    chars: Vec<char>,
    /// `classify` of every character, plus a 0 sentinel at the end.
    class: Vec<u8>,
    /// Every class that occurs, or-ed together.
    seen: u8,
}

impl Translated {
    fn new(text: &str) -> Self {
        // A character takes at least one byte, so the lengths are bounds.
        let mut chars = Vec::with_capacity(text.len());
        let mut class = Vec::with_capacity(text.len() + 1);
        let mut seen = 0;
        for c in text.chars().map(translate_fullwidth_char) {
            let k = classify(c);
            seen |= k;
            chars.push(c);
            class.push(k);
        }
        class.push(0);
        Translated { chars, class, seen }
    }

    /// Whether the pattern can match anywhere: every match holds an operator and an atom
    /// (which starts with a digit, a sign before a digit, `(` or a function name before
    /// `(`), so text without an operator, or with neither a digit nor a `(`, has none. Many
    /// task texts are thus passed over without building the position tables.
    fn may_match(&self) -> bool {
        self.seen & OPERATOR != 0 && self.seen & (DIGIT | OPEN) != 0
    }
}

/// Up to this many candidates, duplicates are found without hashing.
const FEW_CANDIDATES: usize = 16;

/// An arithmetic expression found in a text: its canonical form and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The canonical form (see [`super::canonicalize`]), by which duplicates are told apart.
    pub canonical: String,
    /// The value (see [`super::safe_eval`]).
    pub value: f64,
    /// Where the expression stands in the translated text, in characters (end excluded).
    span: (usize, usize),
}

/// The arithmetic expressions in `text` that evaluate, in text order, at most `max_exprs`
/// (at least one when `max_exprs <= 0`), without duplicates by canonical form; each as the
/// text writes it (after full-width translation).
pub fn extract_expressions(text: &str, max_exprs: i64) -> Vec<String> {
    let translated = Translated::new(text);
    find_expressions(&translated, max_exprs)
        .iter()
        .map(|found| string_of(&translated.chars[found.span.0..found.span.1]))
        .collect()
}

/// The expressions [`extract_expressions`] finds, as their canonical forms and values
/// (which the extraction computes anyway).
pub fn extract_arithmetic(text: &str, max_exprs: i64) -> Vec<Extracted> {
    find_expressions(&Translated::new(text), max_exprs)
}

/// Characters as a string; ASCII (nearly always) is copied a byte at a time.
fn string_of(chars: &[char]) -> String {
    let ascii: Option<Vec<u8>> = chars.iter().map(|&c| u8::try_from(c).ok()).collect();
    match ascii.map(String::from_utf8) {
        Some(Ok(text)) => text,
        _ => chars.iter().collect(),
    }
}

fn find_expressions(translated: &Translated, max_exprs: i64) -> Vec<Extracted> {
    if !translated.may_match() {
        return Vec::new();
    }
    let scanner = Scanner::new(translated);
    let wanted = usize::try_from(max_exprs.max(1)).unwrap_or(usize::MAX);
    let mut candidates: Vec<Extracted> = Vec::new();
    for (start, end) in scanner.spans() {
        let matched = &translated.chars[start..end];
        let expr = strip_edges(matched);
        if expr.is_empty() || !has_binary_operator(expr) {
            continue;
        }
        // The canonical form is what is evaluated, and what duplicates are compared by.
        let Ok(canonical) = canonical_form(expr.iter().copied()) else {
            continue;
        };
        let Ok(value) = eval_canonical(&canonical) else {
            continue;
        };
        // `expr` is a part of `matched`: its offset there, in characters.
        let skipped = (expr.as_ptr() as usize - matched.as_ptr() as usize) / size_of::<char>();
        candidates.push(Extracted {
            canonical: string_of(&canonical),
            value,
            span: (start + skipped, start + skipped + expr.len()),
        });
        if candidates.len() >= wanted {
            break;
        }
    }
    // Few candidates (the usual case) are told apart by comparing canonical forms with
    // those kept so far; many by hashing, so the work stays linear.
    let few = candidates.len() <= FEW_CANDIDATES;
    let mut seen: HashSet<String> = HashSet::new();
    let mut out: Vec<Extracted> = Vec::with_capacity(candidates.len());
    for found in candidates {
        let new = if few {
            !out.iter().any(|kept| kept.canonical == found.canonical)
        } else {
            seen.insert(found.canonical.clone())
        };
        if new {
            out.push(found);
        }
        if i64::try_from(out.len()).unwrap_or(i64::MAX) >= max_exprs {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::{canonicalize, safe_eval};
    use super::*;

    /// [`strip_edges`] on text, full-width translation included.
    fn strip_expression_edges(s: &str) -> String {
        let chars = Translated::new(s).chars;
        strip_edges(&chars).iter().collect()
    }

    fn spans(text: &str) -> Vec<String> {
        let translated = Translated::new(text);
        Scanner::new(&translated)
            .spans()
            .map(|(s, e)| translated.chars[s..e].iter().collect())
            .collect()
    }

    fn extract(text: &str) -> Vec<String> {
        extract_expressions(text, 8)
    }

    #[test]
    fn expressions_right_after_chinese_are_found_whole() {
        assert_eq!(extract("请计算884+645*18"), ["884+645*18"]);
        assert_eq!(extract("(289+532)*11 和 12/4"), ["(289+532)*11", "12/4"]);
        assert_eq!(extract("１２３＋４５６"), ["123+456"]);
        assert_eq!(extract("７×８÷２"), ["7*8/2"]);
        assert_eq!(extract("what is 5 - -3?"), ["5 - -3"]);
    }

    #[test]
    fn texts_without_an_operator_or_an_atom_are_passed_over() {
        for text in [
            "计算 12 和 34",
            "a + b",
            "加 (x)",
            "",
            "×÷",
            "1.5",
            "(1)(2)",
            "x^y",
        ] {
            assert!(!Translated::new(text).may_match(), "{text}");
            // The pre-scan only skips texts where the full scan finds nothing.
            assert!(spans(text).is_empty(), "{text}");
        }
        for text in ["１２３＋４５６", "(a)+(b)", "sqrt(x) - 1", "7×8", "٣+٤"] {
            assert!(Translated::new(text).may_match(), "{text}");
            assert!(!spans(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn each_expression_comes_with_its_canonical_form_and_value() {
        let text = "请计算８８４＋６４５×１８，然后 2 ^ 10 和 sqrt (16) + 1。又 2\u{2003}+ 3";
        let found = extract_arithmetic(text, 8);
        let texts = extract_expressions(text, 8);
        assert_eq!(
            texts,
            ["884+645*18", "2 ^ 10", "sqrt (16) + 1", "2\u{2003}+ 3"]
        );
        assert_eq!(found.len(), texts.len());
        for (expr, text) in found.iter().zip(&texts) {
            assert_eq!(expr.canonical, canonicalize(text));
            assert_eq!(Ok(expr.value), safe_eval(text));
        }
        assert_eq!(found[1].canonical, "2**10");
        assert_eq!(found[1].value, 1024.0);
    }

    #[test]
    fn invalid_candidates_are_dropped() {
        assert!(extract("2025-03-07 是哪天").is_empty());
        assert!(extract("100 / 0").is_empty());
        assert!(extract("x+1").is_empty());
        assert_eq!(extract("1,234+5,678"), ["234+5"]);
        assert_eq!(extract("10-2-3)"), ["10-2-3"]);
    }

    #[test]
    fn greedy_repetition_gives_back_operands_until_the_lookahead_holds() {
        // "1.5x" fails the lookahead; the engine falls back to the integer part "1".
        assert_eq!(spans("2+1.5x"), ["2+1"]);
        assert_eq!(spans("2+3+4x"), ["2+3"]);
        assert_eq!(spans("2+3x"), Vec::<String>::new());
        assert_eq!(spans("a1+2"), Vec::<String>::new());
        assert_eq!(spans("1+2_"), Vec::<String>::new());
        assert_eq!(spans("(1+2)*3"), ["(1+2)*3"]);
        assert_eq!(spans("((1+2)*3)"), ["(1+2)*3"]);
        assert_eq!(spans("((1+2)*3)x"), ["(1+2)*3"]);
        assert_eq!(spans("5.+3"), Vec::<String>::new());
        assert_eq!(spans("1+2.x"), ["1+2"]);
        assert_eq!(spans("sqrt (16) + SIN(0)"), ["sqrt (16) + SIN(0)"]);
        assert_eq!(spans("2 ** 3 // 4"), ["2 ** 3 // 4"]);
    }

    #[test]
    fn unicode_digits_split_numbers_where_the_lookahead_allows() {
        // Arabic-Indic digits match \d but not [A-Za-z0-9_].
        assert_eq!(spans("1+٣٣٣"), ["1+٣٣٣"]);
        assert_eq!(spans("1+٣٣٣x"), ["1+٣٣"]);
        assert_eq!(spans("1+2٣4x"), ["1+2"]);
        assert_eq!(spans("1+1.2٣4x"), ["1+1.2"]);
        assert_eq!(spans("1+1.234x"), ["1+1"]);
    }

    #[test]
    fn ignorecase_letters_outside_ascii_count_as_word_characters() {
        assert_eq!(spans("K1+2"), Vec::<String>::new());
        assert_eq!(spans("1+2ı"), Vec::<String>::new());
        assert_eq!(spans("ſqrt(4)+1"), ["ſqrt(4)+1"]);
        assert_eq!(spans("sİn(4)+1"), ["sİn(4)+1"]);
    }

    #[test]
    fn max_exprs_limits_and_duplicates_collapse() {
        let text = "1+1, 2+2, 1 + 1, 3+3";
        assert_eq!(extract_expressions(text, 8), ["1+1", "2+2", "3+3"]);
        assert_eq!(extract_expressions(text, 2), ["1+1", "2+2"]);
        assert_eq!(extract_expressions(text, 3), ["1+1", "2+2"]);
        assert_eq!(extract_expressions(text, 1), ["1+1"]);
        assert_eq!(extract_expressions(text, 0), ["1+1"]);
        assert_eq!(extract_expressions(text, -5), ["1+1"]);
        assert!(extract_expressions("no maths", 0).is_empty());
    }

    #[test]
    fn edges_lose_whitespace_punctuation_and_stray_closers() {
        assert_eq!(strip_expression_edges("  1+2。 "), "1+2");
        assert_eq!(strip_expression_edges("1+2))"), "1+2");
        assert_eq!(strip_expression_edges("(1+2) )"), "(1+2)");
        assert_eq!(strip_expression_edges("1+2 ) "), "1+2");
        assert_eq!(strip_expression_edges("?!"), "");
        // Whitespace first, punctuation second: a vertical tab behind a dot survives.
        assert_eq!(strip_expression_edges(" \u{b}. \u{b}1"), "\u{b}1");
        assert_eq!(strip_expression_edges("）1+2）"), "");
        assert_eq!(strip_expression_edges("(1+2)) 3)"), "(1+2)");
    }

    #[test]
    fn binary_operator_check_ignores_a_leading_sign() {
        let check = |s: &str| has_binary_operator(&s.chars().collect::<Vec<_>>());
        assert!(!check("-5"));
        assert!(!check(" -5"));
        assert!(check("-5-1"));
        assert!(check("--5"));
        assert!(check("2^3"));
        assert!(check("^3"));
        assert!(!check("(5)"));
    }

    #[test]
    fn adversarial_inputs_scan_in_linear_time() {
        type Input = fn(usize) -> String;
        let inputs: [(&str, Input); 7] = [
            ("1+", |n| "1+".repeat(n)),
            ("(", |n| "(".repeat(n)),
            ("sqrt(", |n| "sqrt(".repeat(n)),
            ("٣", |n| "٣".repeat(n)),
            ("1", |n| "1".repeat(n)),
            ("1 and spaces", |n| format!("1{}", " ".repeat(n))),
            ("1+٣", |n| "1+٣".repeat(n)),
        ];
        for (what, text) in inputs {
            crate::linear::assert_linear(what, 100_000, |n| {
                let _ = extract_expressions(&text(n), 8);
            });
        }
    }
}
