//! Python-compatible character handling shared by the text parsers.
//!
//! The seed's patterns run under Python's `re` on `str`, where `\s` and `\d` are Unicode
//! classes, and it maps full-width punctuation to ASCII before matching. These helpers give
//! the same answers as Python 3.11 (Unicode 14.0) so the Rust scanners see the same
//! characters the seed saw.

/// The full-width (and typographic) characters the seed rewrites to ASCII before parsing.
///
/// Every entry maps one character to one character, so positions in the translated text are
/// the same as in the original.
pub fn translate_fullwidth_char(c: char) -> char {
    match c {
        // Full-width digits U+FF10..U+FF19.
        '\u{FF10}'..='\u{FF19}' => {
            char::from_u32(u32::from(c) - 0xFF10 + u32::from('0')).unwrap_or(c)
        }
        '\u{FF0B}' => '+', // FULLWIDTH PLUS SIGN
        '\u{FF0D}' | '\u{2212}' | '\u{2013}' | '\u{2014}' | '\u{FE63}' => '-', // minus, dashes
        '\u{00D7}' | '\u{2715}' | '\u{FF0A}' => '*', // multiplication signs, full-width asterisk
        '\u{00F7}' | '\u{FF0F}' => '/', // division sign, full-width solidus
        '\u{FF08}' => '(',
        '\u{FF09}' => ')',
        '\u{FF3B}' => '[',
        '\u{FF3D}' => ']',
        '\u{FF5B}' => '{',
        '\u{FF5D}' => '}',
        '\u{FF0C}' => ',',              // FULLWIDTH COMMA
        '\u{3002}' | '\u{FF0E}' => '.', // ideographic full stop, full-width full stop
        '\u{FF1A}' => ':',
        '\u{FF1B}' => ';',
        '\u{FF05}' => '%',
        '\u{FF3E}' => '^',
        '\u{3000}' => ' ', // IDEOGRAPHIC SPACE
        _ => c,
    }
}

/// The seed's full-width translation applied to a whole string (one char in, one char out).
pub fn translate_fullwidth(s: &str) -> String {
    s.chars().map(translate_fullwidth_char).collect()
}

/// Python's `str.isspace()`, which is also what `re`'s `\s` matches on `str` patterns.
pub fn is_py_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1C}'..='\u{20}'
            | '\u{85}'
            | '\u{A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
    )
}

/// First code point of every block of decimal digits (general category Nd) in Unicode 14.0,
/// as used by Python 3.11. All blocks hold 10 digits except the mathematical digits at
/// U+1D7CE, which hold 50 (five styles of 0-9 back to back).
const DIGIT_BLOCKS: [u32; 62] = [
    0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
    0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
    0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// Python's `re` `\d` on `str` (and `str.isdecimal()`): Unicode general category Nd.
pub fn is_py_digit(c: char) -> bool {
    let cp = u32::from(c);
    if cp < 0x80 {
        return c.is_ascii_digit();
    }
    // Quick rejections for the common non-ASCII text: Latin, Greek, Cyrillic, ... below the
    // first non-ASCII block, and CJK, kana and Hangul, which lie in gaps between blocks.
    if cp < 0x660 || (0x1C5A..0xA620).contains(&cp) || (0xABFA..0xFF10).contains(&cp) {
        return false;
    }
    // The last block starting at or before `cp` is the only one that can contain it.
    let idx = DIGIT_BLOCKS.partition_point(|&start| start <= cp);
    if idx == 0 {
        return false;
    }
    let start = DIGIT_BLOCKS[idx - 1];
    let len = if start == 0x1D7CE { 50 } else { 10 };
    cp < start + len
}

/// Python's `str.strip()` with no argument: trims `is_py_space` characters at both ends.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// Python's `str.rstrip()` with no argument.
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fullwidth_digits_and_operators_become_ascii() {
        assert_eq!(translate_fullwidth("１２３＋４５６"), "123+456");
        assert_eq!(translate_fullwidth("７×８÷２"), "7*8/2");
        assert_eq!(translate_fullwidth("（１）。"), "(1).");
        assert_eq!(translate_fullwidth("a\u{3000}b"), "a b");
        assert_eq!(translate_fullwidth("2−1–1—1﹣1"), "2-1-1-1-1");
    }

    #[test]
    fn translation_keeps_char_count() {
        let s = "计算（３＋４）×５ and ✕ ＊ ％ ＾ ［］｛｝，：；．";
        assert_eq!(translate_fullwidth(s).chars().count(), s.chars().count());
    }

    #[test]
    fn python_whitespace_set() {
        for c in [
            '\t', '\n', '\u{b}', '\u{c}', '\r', '\u{1c}', '\u{1f}', ' ', '\u{85}',
        ] {
            assert!(is_py_space(c), "{c:?}");
        }
        for c in [
            '\u{a0}', '\u{1680}', '\u{2000}', '\u{200a}', '\u{2028}', '\u{3000}',
        ] {
            assert!(is_py_space(c), "{c:?}");
        }
        // Zero-width space and BOM are not whitespace in Python.
        for c in ['\u{200b}', '\u{feff}', 'a', '\u{0}', '\u{1b}', '\u{180e}'] {
            assert!(!is_py_space(c), "{c:?}");
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
            assert!(is_py_digit(c), "{c:?}");
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
            assert!(!is_py_digit(c), "{c:?}");
        }
    }

    #[test]
    fn strip_matches_python() {
        assert_eq!(py_strip("\u{3000} 1+2\n\u{85}"), "1+2");
        assert_eq!(py_strip("\u{200b}x"), "\u{200b}x");
        assert_eq!(py_rstrip(" a \t"), " a");
    }
}
