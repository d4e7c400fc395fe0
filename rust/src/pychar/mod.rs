//! Python's view of characters: the classes of `re` on `str` patterns (`\s`, `\d`, `\w`),
//! `str.strip()`, `str.lower()` and `str.isprintable()`, as CPython 3.11 computes them.
//!
//! Every text scanner in the crate (arithmetic extraction, tool-call and message parsing,
//! answer extraction, the reward's tokeniser) must split text where Python would, so all of
//! them classify characters here. These classes are Unicode-wide: `\d` is every decimal
//! digit (`str.isdecimal()`, category Nd) and `\w` is `str.isalnum()` plus `_`. Rust's
//! `char::is_alphanumeric` is a different set (it counts combining vowel signs and circled
//! letters) from a newer Unicode version, so the non-ASCII ranges come from [`tables`],
//! generated with CPython 3.11's `unicodedata` (Unicode 14.0.0) by
//! `rust/tools/gen_pychar_tables.py`:
//!
//! ```text
//! word:   [c for c in range(0x80, 0x110000) if chr(c).isalnum()]          (as ranges)
//! digits: [c for c in range(0x80, 0x110000) if chr(c).isdecimal() and int(chr(c)) == 0]
//! print:  [c for c in range(0x80, 0x110000) if not chr(c).isprintable()]   (as ranges)
//! lower:  letters newer than Unicode 14.0 that Rust's `to_lowercase` changes
//! ```
//!
//! Decimal digits always come in runs of ten starting at a zero, so a digit's value is its
//! distance from the nearest zero at or below it.

use std::sync::OnceLock;

mod tables;

/// One byte of facts per Basic Multilingual Plane character, built on first use from the
/// range tables (about a millisecond), so that the hot loops over text pay one lookup per
/// character instead of binary searches.
struct BmpFacts(Box<[u8]>);

/// Digit value (0..=9), or `NOT_DIGIT`, in the low four bits.
const DIGIT_MASK: u8 = 0x0F;
const NOT_DIGIT: u8 = 0x0F;
const WORD: u8 = 0x10;
/// `str.lower()` leaves the character as it is.
const LOWER_SAME: u8 = 0x20;
const SPACE: u8 = 0x40;
/// Lower-casing cannot change how the character tokenises (see [`token_class`]).
const TOKEN_SAFE: u8 = 0x80;

fn bmp_facts() -> &'static [u8] {
    static FACTS: OnceLock<BmpFacts> = OnceLock::new();
    &FACTS
        .get_or_init(|| {
            let facts = (0u32..0x10000)
                .map(|cp| match char::from_u32(cp) {
                    Some(c) => {
                        let digit = digit_value_slow(c).map_or(NOT_DIGIT, |d| d as u8);
                        let word = if is_word_slow(c) { WORD } else { 0 };
                        let same = if lower_is_same_slow(c) { LOWER_SAME } else { 0 };
                        let space = if is_space(c) { SPACE } else { 0 };
                        let safe = if token_safe_slow(c) { TOKEN_SAFE } else { 0 };
                        digit | word | same | space | safe
                    }
                    None => NOT_DIGIT | LOWER_SAME, // surrogates: never in a Rust string
                })
                .collect();
            BmpFacts(facts)
        })
        .0
}

/// Whether `c` and its lower-case form tokenise alike under `\w+|[^\w\s]`: a word
/// character lowering to word characters only, or a symbol or space lowering to itself.
fn token_safe_slow(c: char) -> bool {
    if lower_is_same_slow(c) {
        return true;
    }
    is_word_slow(c) && c.to_lowercase().all(is_word_slow)
}

/// How a character takes part in the reward's word tokens (`\w+|[^\w\s]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenClass {
    Word,
    Symbol,
    Space,
}

/// The token class of `c` after Python's lower-casing, when lower-casing cannot change it;
/// `None` for the few characters whose lower-case form must be looked at.
#[inline]
pub fn token_class(c: char) -> Option<TokenClass> {
    let fact = match bmp_fact(c) {
        Some(fact) => fact,
        None => {
            if !token_safe_slow(c) {
                return None;
            }
            let word = if is_word_slow(c) { WORD } else { 0 };
            let space = if is_space(c) { SPACE } else { 0 };
            TOKEN_SAFE | word | space
        }
    };
    if fact & TOKEN_SAFE == 0 {
        None
    } else if fact & WORD != 0 {
        Some(TokenClass::Word)
    } else if fact & SPACE != 0 {
        Some(TokenClass::Space)
    } else {
        Some(TokenClass::Symbol)
    }
}

fn bmp_fact(c: char) -> Option<u8> {
    let cp = c as usize;
    (cp < 0x10000).then(|| bmp_facts()[cp])
}

/// Python `\w` on a `str` pattern: `str.isalnum()` or the underscore.
pub fn is_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    match bmp_fact(c) {
        Some(fact) => fact & WORD != 0,
        None => is_word_slow(c),
    }
}

fn is_word_slow(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    let cp = c as u32;
    let idx = tables::WORD_RANGES.partition_point(|&(lo, _)| lo <= cp);
    idx > 0 && cp <= tables::WORD_RANGES[idx - 1].1
}

/// The value of a Python `\d` character (any Unicode decimal digit), or `None`.
pub fn digit_value(c: char) -> Option<u32> {
    if c.is_ascii() {
        return c.is_ascii_digit().then(|| c as u32 - '0' as u32);
    }
    match bmp_fact(c) {
        Some(fact) => {
            let digit = fact & DIGIT_MASK;
            (digit != NOT_DIGIT).then_some(u32::from(digit))
        }
        None => digit_value_slow(c),
    }
}

fn digit_value_slow(c: char) -> Option<u32> {
    if c.is_ascii() {
        return c.is_ascii_digit().then(|| c as u32 - '0' as u32);
    }
    let cp = c as u32;
    let idx = tables::DIGIT_ZEROS.partition_point(|&zero| zero <= cp);
    if idx == 0 {
        return None;
    }
    let offset = cp - tables::DIGIT_ZEROS[idx - 1];
    (offset < 10).then_some(offset)
}

/// Whether `str.lower()` maps the character to itself.
fn lower_is_same(c: char) -> bool {
    if c.is_ascii() {
        return !c.is_ascii_uppercase();
    }
    match bmp_fact(c) {
        Some(fact) => fact & LOWER_SAME != 0,
        None => lower_is_same_slow(c),
    }
}

fn lower_is_same_slow(c: char) -> bool {
    if tables::LOWER_UNCHANGED.binary_search(&(c as u32)).is_ok() {
        return true;
    }
    let mut lowered = c.to_lowercase();
    lowered.next() == Some(c) && lowered.next().is_none()
}

/// Python `\d` on a `str` pattern.
pub fn is_digit(c: char) -> bool {
    digit_value(c).is_some()
}

/// Python `\s` on a `str` pattern, which is also `str.isspace()` (and what `str.strip()`
/// removes): ASCII whitespace, the information separators U+001C..U+001F, and the Unicode
/// space and line/paragraph separators.
pub fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python `str.isprintable()` for one character: what `repr()` leaves unescaped.
pub fn is_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    let cp = c as u32;
    let idx = tables::NONPRINTABLE_RANGES.partition_point(|&(lo, _)| lo <= cp);
    !(idx > 0 && cp <= tables::NONPRINTABLE_RANGES[idx - 1].1)
}

/// Python `str.lower()`: full Unicode lower-casing with the final-sigma rule, except for the
/// few letters newer than CPython 3.11's Unicode 14.0, which Python leaves as they are.
pub fn lower(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    if s.chars().all(lower_is_same) {
        return s.to_string();
    }
    let is_unchanged = |c: char| tables::LOWER_UNCHANGED.binary_search(&(c as u32)).is_ok();
    if !s.chars().any(is_unchanged) {
        return s.to_lowercase();
    }
    // Such a letter is unassigned for Python, so it also bounds the final-sigma context:
    // lower-case the pieces between them separately.
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find(is_unchanged) {
        out.push_str(&rest[..pos].to_lowercase());
        let kept = rest[pos..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&rest[pos..pos + kept]);
        rest = &rest[pos + kept..];
    }
    out.push_str(&rest.to_lowercase());
    out
}

/// The characters `c` becomes in Python's `str.lower()`, ignoring the final-sigma rule
/// (which only chooses between two lower-case sigmas).
pub fn lower_char(c: char) -> impl Iterator<Item = char> {
    let keep = lower_is_same(c);
    let (kept, mapped) = if keep {
        (Some(c), None)
    } else {
        (None, Some(c.to_lowercase()))
    };
    kept.into_iter().chain(mapped.into_iter().flatten())
}

/// Python `str.strip()` with no arguments.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_class_is_python_isalnum_not_rust_alphabetic() {
        assert!(is_word('a') && is_word('_') && is_word('9'));
        assert!(is_word('中') && is_word('é') && is_word('²') && is_word('Ⅻ'));
        // Devanagari vowel sign AA is Alphabetic in Rust but not alphanumeric in Python.
        assert!('\u{93e}'.is_alphabetic());
        assert!(!is_word('\u{93e}'));
        // Circled latin capital A: Other_Alphabetic in Rust, not isalnum in Python.
        assert!(!is_word('Ⓐ'));
        assert!(!is_word('-') && !is_word(' ') && !is_word('，'));
    }

    #[test]
    fn unicode_decimal_digits_have_their_values() {
        assert_eq!(digit_value('7'), Some(7));
        assert_eq!(digit_value('٣'), Some(3)); // Arabic-Indic three
        assert_eq!(digit_value('९'), Some(9)); // Devanagari nine
        assert_eq!(digit_value('５'), Some(5)); // full-width five
        assert_eq!(digit_value('\u{1D7D8}'), Some(0)); // mathematical double-struck zero
        assert_eq!(digit_value('\u{1D7E1}'), Some(9));
        // Superscripts and CJK numerals are numeric but not decimal digits.
        assert_eq!(digit_value('²'), None);
        assert_eq!(digit_value('三'), None);
        assert_eq!(digit_value('a'), None);
    }

    #[test]
    fn lower_follows_python_including_final_sigma() {
        assert_eq!(lower("ABC"), "abc");
        assert_eq!(lower("ΑΣ ΑΣΑ"), "ας ασα");
        assert_eq!(lower("İ"), "i\u{307}");
        // Added in Unicode 16: unassigned for CPython 3.11, so unchanged.
        assert_eq!(lower("\u{A7CB}Ä"), "\u{A7CB}ä");
    }

    #[test]
    fn fast_table_agrees_with_the_range_tables() {
        for cp in (0u32..0x10000).chain([0x1D7D8, 0x1D7E1, 0x20000, 0x10D50]) {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            assert_eq!(is_word(c), is_word_slow(c), "{cp:#x}");
            assert_eq!(digit_value(c), digit_value_slow(c), "{cp:#x}");
            assert_eq!(lower_is_same(c), lower_is_same_slow(c), "{cp:#x}");
            // A safe class is the class of every character of the lower-case form.
            if let Some(class) = token_class(c) {
                for l in lower_char(c) {
                    let want = if is_word(l) {
                        TokenClass::Word
                    } else if is_space(l) {
                        TokenClass::Space
                    } else {
                        TokenClass::Symbol
                    };
                    assert_eq!(class, want, "{cp:#x}");
                }
            }
        }
    }

    #[test]
    fn lower_unchanged_table_matches_this_toolchain() {
        // The letters Rust lower-cases that Python 3.11 does not know (unassigned there, so
        // not printable) are exactly the table's; a different `rustc` Unicode version shows
        // up here, and `rust/tools/gen_pychar_tables.py` regenerates the table.
        for cp in 0x80u32..0x11_0000 {
            let Some(c) = char::from_u32(cp) else {
                continue;
            };
            let mut lowered = c.to_lowercase();
            let rust_changes = !(lowered.next() == Some(c) && lowered.next().is_none());
            let listed = tables::LOWER_UNCHANGED.binary_search(&cp).is_ok();
            assert_eq!(rust_changes && !is_printable(c), listed, "{cp:#x}");
        }
    }

    #[test]
    fn python_digit_set() {
        for c in [
            '0',
            '9',
            '\u{660}',
            '\u{669}',
            '\u{ff10}',
            '\u{1d7ce}',
            '\u{1d7ff}',
        ] {
            assert!(is_digit(c), "{c:?}");
        }
        // Superscripts and circled digits are "digits" for str.isdigit but not \d.
        for c in [
            'a',
            '/',
            ':',
            '\u{b2}',
            '\u{2460}',
            '\u{66a}',
            '\u{1d7cd}',
            '\u{1d800}',
        ] {
            assert!(!is_digit(c), "{c:?}");
        }
    }

    #[test]
    fn python_whitespace_set() {
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{1c}', '\u{1f}', ' ', '\u{85}',
        ] {
            assert!(is_space(c), "{c:?}");
        }
        for c in [
            '\u{a0}', '\u{1680}', '\u{2000}', '\u{200a}', '\u{2028}', '\u{3000}',
        ] {
            assert!(is_space(c), "{c:?}");
        }
        // Zero-width space and BOM are not whitespace in Python.
        for c in ['\u{200b}', '\u{feff}', 'a', '\u{0}', '\u{1b}', '\u{180e}'] {
            assert!(!is_space(c), "{c:?}");
        }
    }

    #[test]
    fn strip_removes_python_whitespace_only() {
        assert_eq!(strip("\u{3000}\u{1f} x y \u{85}"), "x y");
        assert_eq!(strip("\u{200b}x"), "\u{200b}x"); // zero-width space is not whitespace
        assert!(is_space('\u{1c}') && !is_space('\u{180e}'));
    }
}
