//! Extraction of arithmetic expressions from mixed Chinese/English text, in linear time.
//!
//! The seed finds candidates with Python's `re.finditer` and the pattern
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
//! The seed then strips each match's edges, requires a binary operator, validates it with
//! `safe_eval`, keeps the first `max_exprs` candidates (finditer spans never overlap, so
//! its longest-overlap selection keeps them all) and removes duplicates by canonical form.

use std::collections::HashSet;

use super::{canonicalize, safe_eval};
use crate::text::{
    is_py_digit, is_py_space, py_rstrip, py_strip, translate_fullwidth, translate_fullwidth_char,
};

/// "No match" in the position tables.
const FAIL: u32 = u32::MAX;

/// Characters `(?i)[A-Za-z0-9_]` matches in Python: ASCII word characters plus the four
/// non-ASCII letters whose simple case mapping lands in ASCII (found by brute force).
fn is_ascii_word_ci(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '\u{130}' | '\u{131}' | '\u{17F}' | '\u{212A}')
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

fn is_operator_char(c: char) -> bool {
    matches!(c, '+' | '-' | '*' | '/' | '×' | '÷' | '^' | '%')
}

/// Position tables over the (full-width translated) text; see the module documentation.
struct Scanner<'a> {
    chars: &'a [char],
    /// First index `>= i` that is not whitespace.
    space_end: Vec<u32>,
    /// First index `>= i` that is not a `\d` digit.
    digit_end: Vec<u32>,
    /// First index `>= i` holding `(` or `)`, or the text length.
    paren_next: Vec<u32>,
    /// For a digit at `i`: the last index `>= i` of its run holding a non-ASCII digit.
    last_unicode_digit: Vec<u32>,
    /// `next(q)` for every `q` just after a digit or `)`; `FAIL` elsewhere.
    next: Vec<u32>,
}

impl<'a> Scanner<'a> {
    fn new(chars: &'a [char]) -> Self {
        let n = chars.len();
        let mut scanner = Scanner {
            chars,
            space_end: vec![0; n + 1],
            digit_end: vec![0; n + 1],
            paren_next: vec![0; n + 1],
            last_unicode_digit: vec![FAIL; n + 1],
            next: vec![FAIL; n + 1],
        };
        let end = pos(n);
        scanner.space_end[n] = end;
        scanner.digit_end[n] = end;
        scanner.paren_next[n] = end;
        for i in (0..=n).rev() {
            if i < n {
                let c = chars[i];
                let here = pos(i);
                scanner.space_end[i] = if is_py_space(c) {
                    scanner.space_end[i + 1]
                } else {
                    here
                };
                let digit = is_py_digit(c);
                scanner.digit_end[i] = if digit {
                    scanner.digit_end[i + 1]
                } else {
                    here
                };
                scanner.paren_next[i] = if c == '(' || c == ')' {
                    here
                } else {
                    scanner.paren_next[i + 1]
                };
                if digit {
                    let later = if i + 1 < n && is_py_digit(chars[i + 1]) {
                        scanner.last_unicode_digit[i + 1]
                    } else {
                        FAIL
                    };
                    scanner.last_unicode_digit[i] = if later != FAIL {
                        later
                    } else if !c.is_ascii() {
                        here
                    } else {
                        FAIL
                    };
                }
            }
            // Boundaries are only ever queried just after an atom: after a digit or ')'.
            if i > 0 && (is_py_digit(chars[i - 1]) || chars[i - 1] == ')') {
                scanner.next[i] = scanner.compute_next(i);
            }
        }
        scanner
    }

    fn at(&self, i: usize) -> Option<char> {
        self.chars.get(i).copied()
    }

    /// The lookahead `(?![A-Za-z0-9_])` at `q`.
    fn lookahead_ok(&self, q: usize) -> bool {
        self.at(q).is_none_or(|c| !is_ascii_word_ci(c))
    }

    /// `after(q)`: continue with more iterations if possible, else stop at `q`.
    fn after(&self, q: u32) -> u32 {
        if q == FAIL {
            return FAIL;
        }
        let next = self.next[q as usize];
        if next != FAIL {
            next
        } else if self.lookahead_ok(q as usize) {
            q
        } else {
            FAIL
        }
    }

    /// `next(q)`: `\s* OP \s* ATOM` from `q`, followed by `after` of the atom's end.
    fn compute_next(&self, q: usize) -> u32 {
        let s = self.space_end[q] as usize;
        let Some(c) = self.at(s) else {
            return FAIL;
        };
        let op_len = if (c == '*' || c == '/') && self.at(s + 1) == Some(c) {
            2
        } else if is_operator_char(c) {
            1
        } else {
            return FAIL;
        };
        // When `**` or `//` fails, the engine retries a single `*` or `/`; the atom would
        // then have to start at the second `*` or `/`, which no atom can.
        let r = self.space_end[s + op_len] as usize;
        self.iteration_atom(r)
    }

    /// End of `[^()]+ \)` after an opening parenthesis at `open`, if there is one.
    fn paren_body_end(&self, open: usize) -> Option<usize> {
        let close = self.paren_next[open + 1] as usize;
        (close > open + 1 && self.at(close) == Some(')')).then_some(close + 1)
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
        if self.at(r) == Some('(') {
            return self.paren_body_end(r);
        }
        let name_len = self.function_name_len(r)?;
        let open = self.space_end[r + name_len] as usize;
        if self.at(open) == Some('(') {
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
        if !self.at(first).is_some_and(is_py_digit) {
            return None;
        }
        let int_end = self.digit_end[first] as usize;
        let has_fraction =
            self.at(int_end) == Some('.') && self.at(int_end + 1).is_some_and(is_py_digit);
        let frac_end = has_fraction.then(|| self.digit_end[int_end + 1] as usize);
        Some((first, int_end, frac_end))
    }

    /// The largest end strictly inside the digit run `[run_start, run_end)` at which the
    /// lookahead holds (the next digit is not ASCII).
    fn shorter_digit_end(&self, run_start: usize, run_end: usize) -> u32 {
        if run_start + 1 < run_end {
            self.last_unicode_digit[run_start + 1]
        } else {
            FAIL
        }
    }

    /// An atom in an iteration: the first of its ends (in the engine's order) that leads to
    /// a complete match, and where that match ends.
    fn iteration_atom(&self, r: usize) -> u32 {
        if let Some(end) = self.paren_atom_end(r) {
            return self.after(pos(end));
        }
        let Some((first, int_end, frac_end)) = self.number_parts(r) else {
            return FAIL;
        };
        match frac_end {
            Some(frac_end) => {
                let full = self.after(pos(frac_end));
                if full != FAIL {
                    return full;
                }
                let shorter = self.shorter_digit_end(int_end + 1, frac_end);
                if shorter != FAIL {
                    return shorter;
                }
                self.after(pos(int_end))
            }
            None => {
                let full = self.after(pos(int_end));
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
        if p > 0 && is_ascii_word_ci(self.chars[p - 1]) {
            return FAIL;
        }
        let end = if let Some(end) = self.paren_atom_end(p) {
            end
        } else if let Some((_, int_end, frac_end)) = self.number_parts(p) {
            frac_end.unwrap_or(int_end)
        } else {
            return FAIL;
        };
        self.next[end]
    }

    /// The spans `re.finditer` reports, in order.
    fn spans(&self) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        let mut p = 0;
        while p < self.chars.len() {
            let end = self.match_at(p);
            if end != FAIL && end as usize > p {
                spans.push((p, end as usize));
                p = end as usize;
            } else {
                p += 1;
            }
        }
        spans
    }
}

/// Index to table entry. Texts are far below 4 Gi characters; a longer one saturates,
/// which only stops matches beyond that point.
fn pos(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(FAIL - 1)
}

/// The seed's `_strip_expr_edges`: trim whitespace and sentence punctuation, then drop
/// characters from the right while there are more `)` than `(`.
pub fn strip_expression_edges(s: &str) -> String {
    const EDGE_PUNCTUATION: &str = " \t\r\n:;,.?？!！、，。；：";
    let translated = translate_fullwidth(s);
    let trimmed = py_strip(&translated).trim_matches(|c| EDGE_PUNCTUATION.contains(c));
    let mut opens = trimmed.chars().filter(|&c| c == '(').count();
    let mut closes = trimmed.chars().filter(|&c| c == ')').count();
    let mut kept = trimmed;
    while closes > opens {
        let Some(last) = kept.chars().next_back() else {
            break;
        };
        match last {
            ')' => closes -= 1,
            '(' => opens -= 1,
            _ => {}
        }
        kept = py_rstrip(&kept[..kept.len() - last.len_utf8()]);
    }
    kept.to_string()
}

/// The seed's `_candidate_has_real_operator`: an operator other than a leading sign.
fn has_binary_operator(expr: &str) -> bool {
    let canonical = canonicalize(expr);
    let rest = canonical
        .strip_prefix(['+', '-'])
        .unwrap_or(canonical.as_str());
    rest.contains(['+', '-', '*', '/', '%'])
}

/// The seed's `extract_arithmetic_expressions`: validated expressions in text order, at
/// most `max_exprs` (at least one when `max_exprs <= 0`, as in the seed), without duplicates
/// by canonical form.
pub fn extract_expressions(text: &str, max_exprs: i64) -> Vec<String> {
    let chars: Vec<char> = text.chars().map(translate_fullwidth_char).collect();
    let scanner = Scanner::new(&chars);
    let wanted = usize::try_from(max_exprs.max(1)).unwrap_or(usize::MAX);
    let mut candidates: Vec<String> = Vec::new();
    for (start, end) in scanner.spans() {
        let span: String = chars[start..end].iter().collect();
        let expr = strip_expression_edges(&span);
        if expr.is_empty() || !has_binary_operator(&expr) || safe_eval(&expr).is_err() {
            continue;
        }
        candidates.push(expr);
        if candidates.len() >= wanted {
            break;
        }
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for expr in candidates {
        if seen.insert(canonicalize(&expr)) {
            out.push(expr);
        }
        if i64::try_from(out.len()).unwrap_or(i64::MAX) >= max_exprs {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().map(translate_fullwidth_char).collect();
        Scanner::new(&chars)
            .spans()
            .into_iter()
            .map(|(s, e)| chars[s..e].iter().collect())
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
    fn edges_are_stripped_like_the_seed() {
        assert_eq!(strip_expression_edges("  1+2。 "), "1+2");
        assert_eq!(strip_expression_edges("1+2))"), "1+2");
        assert_eq!(strip_expression_edges("(1+2) )"), "(1+2)");
        assert_eq!(strip_expression_edges("1+2 ) "), "1+2");
        assert_eq!(strip_expression_edges("?!"), "");
    }

    #[test]
    fn binary_operator_check_ignores_a_leading_sign() {
        assert!(!has_binary_operator("-5"));
        assert!(has_binary_operator("-5-1"));
        assert!(has_binary_operator("2^3"));
        assert!(!has_binary_operator("(5)"));
    }

    #[test]
    fn adversarial_inputs_scan_in_linear_time() {
        let n = 200_000;
        let inputs = [
            "1+".repeat(n),
            "(".repeat(n),
            "sqrt(".repeat(n),
            "٣".repeat(n),
            "1".repeat(n),
            format!("1{}", " ".repeat(n)),
            "1+٣".repeat(n),
        ];
        for text in inputs {
            let start = std::time::Instant::now();
            let _ = extract_expressions(&text, 8);
            assert!(
                start.elapsed().as_secs_f64() < 2.0,
                "slow on {:?}",
                &text[..8]
            );
        }
    }
}
