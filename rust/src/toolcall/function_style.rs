//! The fallback for calls written as functions: `calculate_math("1+1")`,
//! `calculator(expression="(1+2)*3")`.
//!
//! The rules:
//! - find the leftmost `\b([A-Za-z_][A-Za-z0-9_]*)\s*\(` from a cursor (Python's Unicode `\b`
//!   and `\s`: a name right after a CJK character or an accented letter does not start at a
//!   word boundary, so it is not found);
//! - a name that is not one of the wanted ones moves the cursor past its `(`;
//! - for a wanted name, scan from its `(` to the matching `)` with the quote rules of
//!   [`super::parens`]; unmatched moves the cursor past the `(`, matched records the text
//!   between the parentheses and moves the cursor past the `)`;
//! - in each recorded body, the expression is the first `expression\s*=\s*(['"])(.*?)\1`
//!   match, else the first `(['"])(.*?)\1` match (same quote closes, shortest, across
//!   lines), stripped; an empty expression drops the call.

use crate::pychar::is_word;
use crate::pychar::{is_space, strip as py_strip};

use super::parens::ParenMatcher;

/// The tool names accepted in function-call form.
pub const FUNCTION_STYLE_NAMES: [&str; 3] = ["calculate_math", "calculator", "python_math"];

/// A call found in function form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCall<'a> {
    pub name: &'a str,
    /// The quoted expression inside the parentheses, stripped, never empty.
    pub expression: &'a str,
}

/// Calls of `names` written as functions, in order, with their expression.
pub fn function_style_calls<'a>(text: &'a str, names: &[&str]) -> Vec<FunctionCall<'a>> {
    calls_with_bodies(text, names)
        .into_iter()
        .filter_map(|(name, body)| {
            let expression = py_strip(quoted_expression(body)?);
            (!expression.is_empty()).then_some(FunctionCall { name, expression })
        })
        .collect()
}

/// Each wanted name with the text between its parentheses.
fn calls_with_bodies<'a>(text: &'a str, names: &[&str]) -> Vec<(&'a str, &'a str)> {
    let mut out = Vec::new();
    let mut matcher: Option<ParenMatcher<'a>> = None;
    let mut cursor = 0;
    while cursor < text.len() {
        let Some((name, open)) = next_call_start(text, cursor) else {
            break;
        };
        if !names.contains(&name) {
            cursor = open + 1;
            continue;
        }
        if matcher.is_none() {
            matcher = ParenMatcher::new(text.as_bytes(), open);
        }
        let close = matcher.as_mut().and_then(|m| m.close_of(open));
        match close {
            Some(close) => {
                out.push((name, &text[open + 1..close]));
                cursor = close + 1;
            }
            None => cursor = open + 1,
        }
    }
    out
}

fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The leftmost `\b([A-Za-z_][A-Za-z0-9_]*)\s*\(` in `text[from..]` (searched as its own
/// string, so its first character has no predecessor): the name and the offset of `(`.
fn next_call_start(text: &str, from: usize) -> Option<(&str, usize)> {
    let bytes = text.as_bytes();
    let mut at = from;
    let mut after_word = false;
    while let Some(&b) = bytes.get(at) {
        if is_name_start(b) && !after_word {
            let mut end = at + 1;
            while bytes.get(end).copied().is_some_and(is_name_char) {
                end += 1;
            }
            let mut paren = end;
            while let Some(c) = text[paren..].chars().next().filter(|&c| is_space(c)) {
                paren += c.len_utf8();
            }
            if bytes.get(paren) == Some(&b'(') {
                return Some((&text[at..end], paren));
            }
            // No match can start inside the name (no boundary) or in the spaces (not a name
            // start): resume where they end.
            after_word = paren == end;
            at = paren;
            continue;
        }
        let c = text[at..].chars().next()?;
        after_word = is_word(c);
        at += c.len_utf8();
    }
    None
}

/// The quoted expression of a call body (unstripped): the `expression=` quote, else the first
/// quote.
fn quoted_expression(body: &str) -> Option<&str> {
    let mut quotes = QuoteFinder::new(body);
    // `expression\s*=\s*(['"])(.*?)\1`
    for (at, keyword) in body.match_indices("expression") {
        let rest = skip_spaces(body, at + keyword.len());
        if body.as_bytes().get(rest) != Some(&b'=') {
            continue;
        }
        let open = skip_spaces(body, rest + 1);
        if let Some(found) = quotes.quoted_at(open) {
            return Some(found);
        }
    }
    // `(['"])(.*?)\1`
    let bytes = body.as_bytes();
    (0..bytes.len())
        .filter(|&i| bytes[i] == b'\'' || bytes[i] == b'"')
        .find_map(|i| quotes.quoted_at(i))
}

fn skip_spaces(s: &str, mut at: usize) -> usize {
    while let Some(c) = s.get(at..).and_then(|r| r.chars().next()) {
        if !is_space(c) {
            break;
        }
        at += c.len_utf8();
    }
    at
}

/// Finds the string that a quote opens, remembering which quote characters have no more
/// occurrences so that repeated failing searches stay linear.
struct QuoteFinder<'a> {
    text: &'a str,
    /// Per quote kind (`'`, `"`): no occurrence at or after this offset.
    exhausted_from: [usize; 2],
}

impl<'a> QuoteFinder<'a> {
    fn new(text: &'a str) -> Self {
        QuoteFinder {
            text,
            exhausted_from: [usize::MAX; 2],
        }
    }

    /// If a quote character sits at `open` and the same character occurs later, the text
    /// between them.
    fn quoted_at(&mut self, open: usize) -> Option<&'a str> {
        let quote = *self.text.as_bytes().get(open)?;
        let kind = match quote {
            b'\'' => 0,
            b'"' => 1,
            _ => return None,
        };
        let start = open + 1;
        if start >= self.exhausted_from[kind] {
            return None;
        }
        match self.text[start..].bytes().position(|b| b == quote) {
            Some(len) => Some(&self.text[start..start + len]),
            None => {
                self.exhausted_from[kind] = start;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, String)> {
        function_style_calls(text, &FUNCTION_STYLE_NAMES)
            .into_iter()
            .map(|c| (c.name.to_owned(), c.expression.to_owned()))
            .collect()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn plain_and_keyword_calls() {
        assert_eq!(
            found("calculate_math(\"3+4\") calculator(expression = '(1+2)*3') python_math('2**8')"),
            pairs(&[
                ("calculate_math", "3+4"),
                ("calculator", "(1+2)*3"),
                ("python_math", "2**8"),
            ])
        );
    }

    #[test]
    fn names_need_a_python_word_boundary() {
        assert_eq!(found("计算calculate_math(\"1\")"), vec![]);
        assert_eq!(found("écalculator(\"1\")"), vec![]);
        assert_eq!(found("xcalculator(\"1\")"), vec![]);
        assert_eq!(found("。calculator (\"1\")"), pairs(&[("calculator", "1")]));
        assert_eq!(
            found("tools.calculator\u{3000}(\"2\")"),
            pairs(&[("calculator", "2")])
        );
    }

    #[test]
    fn unquoted_or_empty_expressions_are_dropped() {
        assert_eq!(found("calculate_math(expr) calculator(\"  \")"), vec![]);
    }

    #[test]
    fn escaped_quote_ends_the_expression_early_like_a_lazy_regex() {
        assert_eq!(
            found("calculate_math(\"he said \\\"hi\\\"\")"),
            pairs(&[("calculate_math", "he said \\")])
        );
    }

    #[test]
    fn keyword_search_prefers_expression_over_first_quote() {
        assert_eq!(
            found("calculator('x', expression=\"2*3\")"),
            pairs(&[("calculator", "2*3")])
        );
        assert_eq!(
            found("calculator(expression=x, \"4\")"),
            pairs(&[("calculator", "4")])
        );
        // An unclosed quote hides the closing parenthesis: no call at all.
        assert_eq!(found("calculator(expression='unclosed, \"4\")"), vec![]);
    }

    #[test]
    fn unmatched_call_lets_a_later_call_through() {
        // The first call's scan sees the second call inside a string and never closes.
        assert_eq!(
            found("calculate_math(\" calculate_math(\"x\")"),
            pairs(&[("calculate_math", "x")])
        );
    }

    #[test]
    fn adversarial_repetition_stays_linear() {
        for piece in [
            "calculate_math(\"",
            "calculate_math(",
            "calculator(expression='",
        ] {
            assert_eq!(found(&piece.repeat(1000)), vec![]);
            crate::linear::assert_linear(piece, 30_000, |n| {
                found(&piece.repeat(n));
            });
        }
    }
}
