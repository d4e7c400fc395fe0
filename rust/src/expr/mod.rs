//! The reward's arithmetic: canonical form, evaluation with Python float semantics, and
//! expressions found in mixed Chinese/English text.
//!
//! The language is a small subset of Python expressions: numbers (Python literal syntax),
//! `True`/`False`, the constants `pi` and `e`, eight math functions, the binary operators
//! `+ - * / // % **`, unary `+` and `-`, and parentheses. Every value is a float, computed
//! as CPython computes it, and every input CPython would reject is an error here too.
//! The pipeline is `canonicalize` → length and date guards → [`lexer`] → [`parser`] (an AST
//! arena, no recursion beyond a fixed parenthesis depth) → [`eval`] (one forward pass).

mod eval;
mod extract;
mod fold_table;
mod fullwidth;
mod lexer;
mod parser;

use std::fmt;

use self::fullwidth::translate_fullwidth_char;
use crate::pychar::{is_digit, is_space};

pub use extract::{extract_arithmetic, extract_expressions};

/// Longest canonical expression (in characters) that is evaluated.
pub const MAX_EXPRESSION_CHARS: usize = 256;

/// What kind of problem stopped an evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Longer than [`MAX_EXPRESSION_CHARS`] after canonicalisation.
    TooLong,
    /// A bare date such as `2025-03-07`.
    DateLike,
    /// Not a Python expression, or one using syntax outside the allowed language.
    Syntax,
    /// A name other than `pi`, `e` or a call of an allowed function.
    UnknownName,
    /// Wrong number of arguments for the function.
    Arguments,
    /// Division, floor division or modulo by zero, `0 ** negative`, `log(x, 1)`.
    ZeroDivision,
    /// A math-domain error such as `sqrt(-1)` or `log(0)`, or `round(nan)`.
    Domain,
    /// A result too large for a float where Python raises (`**`, `exp`, `round(inf)`).
    Overflow,
    /// A negative number raised to a fractional power (complex in Python).
    Complex,
}

/// Why `safe_eval` rejected its input, and where (a character offset in the canonical form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    pub kind: ErrorKind,
    pub offset: Option<usize>,
    pub message: String,
}

impl EvalError {
    pub(crate) fn at(kind: ErrorKind, offset: usize, message: impl Into<String>) -> Self {
        EvalError {
            kind,
            offset: Some(offset),
            message: message.into(),
        }
    }

    pub(crate) fn whole(kind: ErrorKind, message: impl Into<String>) -> Self {
        EvalError {
            kind,
            offset: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.offset {
            Some(offset) => write!(f, "{} (at character {offset})", self.message),
            None => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for EvalError {}

/// The canonical form: full-width characters to ASCII, `^` to `**`, every Python
/// whitespace character removed.
pub fn canonicalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().map(translate_fullwidth_char) {
        push_canonical(&mut out, c);
    }
    out
}

/// [`canonicalize`] on code points that may include lone surrogates (Python strings can
/// hold them; they are neither whitespace nor translated, so they are kept as they are).
pub fn canonicalize_code_points(code_points: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(code_points.len());
    for &cp in code_points {
        match char::from_u32(cp) {
            Some(c) => {
                let c = translate_fullwidth_char(c);
                if c == '^' {
                    out.extend([u32::from('*'), u32::from('*')]);
                } else if !is_space(c) {
                    out.push(u32::from(c));
                }
            }
            None => out.push(cp),
        }
    }
    out
}

fn push_canonical(out: &mut String, c: char) {
    if c == '^' {
        out.push_str("**");
    } else if !is_space(c) {
        out.push(c);
    }
}

/// The canonical form as characters, or `None` as soon as it exceeds `max_chars` (so that a
/// megabyte of input costs only as much as its first few hundred characters).
fn canonical_chars_bounded(
    chars: impl Iterator<Item = char>,
    max_chars: usize,
) -> Option<Vec<char>> {
    // Room for the whole form when the input says how long it is (a `^` may still grow it).
    let (low, high) = chars.size_hint();
    let mut out = Vec::with_capacity(high.unwrap_or(low).min(max_chars + 1));
    for c in chars.map(translate_fullwidth_char) {
        if c == '^' {
            out.extend(['*', '*']);
        } else if !is_space(c) {
            out.push(c);
        }
        if out.len() > max_chars {
            return None;
        }
    }
    Some(out)
}

/// Whether the canonical text is `\d{4}-\d{1,2}-\d{1,2}` and nothing else: such text is
/// refused as [`ErrorKind::DateLike`] instead of evaluated.
fn is_date_like(chars: &[char]) -> bool {
    let digits = |from: usize| chars[from..].iter().take_while(|&&c| is_digit(c)).count();
    let year = digits(0);
    if year != 4 || chars.get(4) != Some(&'-') {
        return false;
    }
    let month = digits(5);
    if !(1..=2).contains(&month) || chars.get(5 + month) != Some(&'-') {
        return false;
    }
    let day_start = 6 + month;
    let day = digits(day_start);
    (1..=2).contains(&day) && day_start + day == chars.len()
}

/// The float value of an arithmetic expression, or why it has none; never runs code.
pub fn safe_eval(s: &str) -> Result<f64, EvalError> {
    eval_canonical(&canonical_form(s.chars())?)
}

/// The canonical form that [`safe_eval`] evaluates, as characters; an error when it is
/// longer than [`MAX_EXPRESSION_CHARS`].
fn canonical_form(s: impl Iterator<Item = char>) -> Result<Vec<char>, EvalError> {
    canonical_chars_bounded(s, MAX_EXPRESSION_CHARS).ok_or_else(|| {
        EvalError::whole(
            ErrorKind::TooLong,
            format!("expression longer than {MAX_EXPRESSION_CHARS} characters"),
        )
    })
}

/// The value of an expression already in canonical form (see [`canonical_form`]).
fn eval_canonical(chars: &[char]) -> Result<f64, EvalError> {
    if is_date_like(chars) {
        return Err(EvalError::whole(
            ErrorKind::DateLike,
            "a date is not an arithmetic expression",
        ));
    }
    if let Some(offset) = chars.iter().position(|&c| c == '\0') {
        return Err(EvalError::at(
            ErrorKind::Syntax,
            offset,
            "source cannot contain null bytes",
        ));
    }
    let tokens = lexer::tokenize(chars)?;
    let ast = parser::parse(&tokens, chars.len())?;
    eval::evaluate(&ast)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_is_ascii_without_spaces() {
        assert_eq!(canonicalize("１２３＋４５６"), "123+456");
        assert_eq!(canonicalize("2 ^ 10"), "2**10");
        assert_eq!(canonicalize("请计算 3 × 4。"), "请计算3*4.");
        assert_eq!(
            canonicalize("a\u{3000}b\u{85}c\u{1c}d\u{200b}"),
            "abcd\u{200b}"
        );
        assert_eq!(canonicalize("＾"), "**");
    }

    #[test]
    fn code_point_canonical_form_keeps_lone_surrogates() {
        let points = |s: &str| s.chars().map(u32::from).collect::<Vec<_>>();
        let mut input = points("a ＾ b");
        input.extend([0xD800, 0xDFFF, 0x20, 0x31]);
        let mut want = points("a**b");
        want.extend([0xD800, 0xDFFF, 0x31]);
        assert_eq!(canonicalize_code_points(&input), want);
        let text = "计算 ３ × ４\u{3000}= 𝟙𝟚";
        assert_eq!(
            canonicalize_code_points(&points(text)),
            points(&canonicalize(text))
        );
    }

    #[test]
    fn dates_are_rejected_but_date_arithmetic_is_not() {
        assert!(is_date_like(&"2025-03-07".chars().collect::<Vec<_>>()));
        assert!(is_date_like(&"2025-3-7".chars().collect::<Vec<_>>()));
        assert!(is_date_like(&"٢٠٢٥-3-7".chars().collect::<Vec<_>>()));
        assert!(!is_date_like(&"2025-3-7+1".chars().collect::<Vec<_>>()));
        assert!(!is_date_like(&"2025-003-7".chars().collect::<Vec<_>>()));
        assert!(!is_date_like(&"202-3-7".chars().collect::<Vec<_>>()));
        assert!(!is_date_like(&"2025-3-".chars().collect::<Vec<_>>()));
        assert_eq!(
            safe_eval("2025-03-07").map_err(|e| e.kind),
            Err(ErrorKind::DateLike)
        );
        assert_eq!(safe_eval("2025-3-7+1"), Ok(2016.0));
    }

    #[test]
    fn length_limit_counts_canonical_characters() {
        let ok = format!("1{}", "+1".repeat(127)); // 255 characters
        assert_eq!(safe_eval(&ok), Ok(128.0));
        let spaced = format!("1{}", " + 1".repeat(127)); // long, but 255 once canonical
        assert_eq!(safe_eval(&spaced), Ok(128.0));
        let long = "1".repeat(257);
        assert_eq!(
            safe_eval(&long).map_err(|e| e.kind),
            Err(ErrorKind::TooLong)
        );
        // `^` counts as the two characters of `**`.
        let carets = format!("2{}", "^1".repeat(85)); // 1 + 85 * 3 = 256 characters
        assert_eq!(safe_eval(&carets), Ok(2.0));
        let carets = format!("2{}1", "^1".repeat(85));
        assert_eq!(
            safe_eval(&carets).map_err(|e| e.kind),
            Err(ErrorKind::TooLong)
        );
    }

    #[test]
    fn null_bytes_are_rejected_even_in_comments() {
        assert!(safe_eval("1+1#\0").is_err());
        assert_eq!(safe_eval("1+1#comment"), Ok(2.0));
    }

    #[test]
    fn errors_say_what_and_where() {
        let err = safe_eval("1 + x").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("unknown name 'x' (at character 2)"));
    }
}
