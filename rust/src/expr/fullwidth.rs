//! Full-width and typographic arithmetic characters rewritten as ASCII.
//!
//! Chinese text often writes `１２×３＝？` with full-width digits and typographic operators.
//! The arithmetic language reads these as their ASCII twins before matching or parsing.

/// The ASCII twin of a full-width or typographic arithmetic character; every other
/// character is returned as it is.
///
/// Every entry maps one character to one character, so positions in the translated text are
/// the same as in the original.
#[inline]
pub(crate) fn translate_fullwidth_char(c: char) -> char {
    // Only characters outside ASCII are translated: ASCII, most of any text, costs one test.
    if c.is_ascii() {
        c
    } else {
        translate_non_ascii(c)
    }
}

fn translate_non_ascii(c: char) -> char {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn translate(s: &str) -> String {
        s.chars().map(translate_fullwidth_char).collect()
    }

    #[test]
    fn fullwidth_digits_and_operators_become_ascii() {
        assert_eq!(translate("１２３＋４５６"), "123+456");
        assert_eq!(translate("７×８÷２"), "7*8/2");
        assert_eq!(translate("（１）。"), "(1).");
        assert_eq!(translate("a\u{3000}b"), "a b");
        assert_eq!(translate("2−1–1—1﹣1"), "2-1-1-1-1");
    }

    #[test]
    fn translation_keeps_char_count() {
        let s = "计算（３＋４）×５ and ✕ ＊ ％ ＾ ［］｛｝，：；．";
        assert_eq!(translate(s).chars().count(), s.chars().count());
    }
}
