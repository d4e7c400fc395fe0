//! Tokens of the allowed subset of Python, read the way CPython 3.11's tokenizer reads them.
//!
//! The input is a canonical expression (no whitespace). Anything that cannot start one of
//! the allowed tokens (strings, brackets other than `()`, attribute dots, `=`, `<`, ...)
//! could only make a syntax error or an expression outside the language, so it is an
//! error here.
//! Numeric literals follow Python's rules: `_` only between digits, `0x`/`0o`/`0b` prefixes,
//! no leading zeros on non-zero integers, `.5`, `5.`, `1e3`, and no letter, digit or
//! non-ASCII character directly after a number. A `#` starts a comment that runs to the end.

use super::fold_table::FOLD_RANGES;
use super::{ErrorKind, EvalError};
use crate::numfmt::short_decimal;

/// One token; names are already folded to ASCII as Python's NFKC normalisation would.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    Number(f64),
    Name(String),
    Plus,
    Minus,
    Star,
    Slash,
    DoubleSlash,
    Percent,
    DoubleStar,
    LParen,
    RParen,
    Comma,
}

/// A token and the character offset where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned {
    pub token: Token,
    pub offset: usize,
}

fn syntax(offset: usize, message: impl Into<String>) -> EvalError {
    EvalError::at(ErrorKind::Syntax, offset, message)
}

/// Characters CPython's tokenizer treats as part of a name (and so forbids right after a
/// number): ASCII letters, digits, `_`, and every non-ASCII character.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()
}

/// Split a canonical expression into tokens.
pub fn tokenize(chars: &[char]) -> Result<Vec<Spanned>, EvalError> {
    // Expressions are short and have about one token per two characters.
    let mut tokens = Vec::with_capacity(chars.len() / 2 + 1);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        let token = match c {
            '#' => break,
            '0'..='9' => {
                let (value, end) = read_number(chars, i)?;
                i = end;
                Token::Number(value)
            }
            '.' if next.is_some_and(|n| n.is_ascii_digit()) => {
                let (value, end) = read_number(chars, i)?;
                i = end;
                Token::Number(value)
            }
            '+' => {
                i += 1;
                Token::Plus
            }
            '-' => {
                i += 1;
                Token::Minus
            }
            '*' if next == Some('*') => {
                i += 2;
                Token::DoubleStar
            }
            '*' => {
                i += 1;
                Token::Star
            }
            '/' if next == Some('/') => {
                i += 2;
                Token::DoubleSlash
            }
            '/' => {
                i += 1;
                Token::Slash
            }
            '%' => {
                i += 1;
                Token::Percent
            }
            '(' => {
                i += 1;
                Token::LParen
            }
            ')' => {
                i += 1;
                Token::RParen
            }
            ',' => {
                i += 1;
                Token::Comma
            }
            c if is_name_char(c) => {
                let end = i + chars[i..].iter().take_while(|&&c| is_name_char(c)).count();
                let token = read_name(&chars[i..end], i)?;
                i = end;
                token
            }
            '\'' | '"' => return Err(syntax(i, "string literals are not numbers")),
            _ => return Err(syntax(i, format!("unexpected character {c:?}"))),
        };
        // Python reads `*=`, `//=`, `**=`, `%=`, `+=`, `-=`, `->` as single tokens, none of
        // which is allowed; the '=' or '>' that follows is rejected on the next round anyway.
        tokens.push(Spanned {
            token,
            offset: start,
        });
    }
    Ok(tokens)
}

/// `True` and `False` are numbers; other names are folded to ASCII or rejected.
fn read_name(chars: &[char], offset: usize) -> Result<Token, EvalError> {
    let mut name = String::with_capacity(chars.len());
    for (k, &c) in chars.iter().enumerate() {
        if c.is_ascii() {
            name.push(c);
        } else {
            match fold_to_ascii_letter(c) {
                Some(letter) => name.push(letter),
                None => {
                    return Err(EvalError::at(
                        ErrorKind::UnknownName,
                        offset + k,
                        format!("unsupported character {c:?} in a name"),
                    ))
                }
            }
        }
    }
    let ascii_source = chars.iter().all(char::is_ascii);
    Ok(match name.as_str() {
        // Keywords are recognised before normalisation, so only the ASCII spelling counts.
        "True" if ascii_source => Token::Number(1.0),
        "False" if ascii_source => Token::Number(0.0),
        _ => Token::Name(name),
    })
}

/// The ASCII letter a non-ASCII identifier character normalises to, if it is one of the
/// letters that appear in allowed names.
fn fold_to_ascii_letter(c: char) -> Option<char> {
    let cp = u32::from(c);
    let idx = FOLD_RANGES.partition_point(|&(start, _, _)| start <= cp);
    let &(start, end, first) = FOLD_RANGES.get(idx.checked_sub(1)?)?;
    if cp > end {
        return None;
    }
    let offset = u8::try_from(cp - start).ok()?;
    Some(char::from(first + offset))
}

/// Read a numeric literal starting at `start` (a digit, or a dot followed by a digit).
/// Returns its value as a float (Python converts every literal with `float()`) and the end.
fn read_number(chars: &[char], start: usize) -> Result<(f64, usize), EvalError> {
    let at = |k: usize| chars.get(k).copied().unwrap_or('\0');
    let first = at(start);
    if first == '0' {
        let radix = match at(start + 1) {
            'x' | 'X' => Some((16, "hexadecimal")),
            'o' | 'O' => Some((8, "octal")),
            'b' | 'B' => Some((2, "binary")),
            _ => None,
        };
        if let Some((radix, kind)) = radix {
            return read_radix_integer(chars, start, radix, kind);
        }
    }
    let mut i = start;
    let mut is_float = false;
    if first == '.' {
        is_float = true;
        i += 1;
        i = read_digits(chars, i)?;
    } else if first == '0' {
        // "0", "00", "0_0" are zero; "01" is a syntax error unless a fraction or an
        // exponent follows ("01.5", "01e3" are floats).
        while at(i) == '0' || (at(i) == '_' && at(i + 1).is_ascii_digit()) {
            i += 1;
        }
        if at(i) == '_' {
            return Err(syntax(i, "invalid decimal literal"));
        }
        let nonzero = at(i).is_ascii_digit();
        if nonzero {
            i = read_digits(chars, i)?;
        }
        if nonzero && !matches!(at(i), '.' | 'e' | 'E' | 'j' | 'J') {
            return Err(syntax(
                start,
                "leading zeros in decimal integer literals are not permitted",
            ));
        }
    } else {
        i = read_digits(chars, i)?;
    }
    if first != '.' && at(i) == '.' {
        is_float = true;
        i += 1;
        if at(i).is_ascii_digit() {
            i = read_digits(chars, i)?;
        }
    }
    if matches!(at(i), 'e' | 'E') {
        let sign = matches!(at(i + 1), '+' | '-');
        let digits_at = if sign { i + 2 } else { i + 1 };
        if at(digits_at).is_ascii_digit() {
            is_float = true;
            i = read_digits(chars, digits_at)?;
        } else {
            return Err(syntax(i, "invalid decimal literal"));
        }
    }
    if matches!(at(i), 'j' | 'J') {
        return Err(syntax(start, "complex literals are not supported"));
    }
    check_number_end(chars, i, "decimal")?;
    let value = match short_decimal(chars[start..i].iter().copied()) {
        Some(value) => value,
        None => {
            let text: String = chars[start..i].iter().filter(|&&c| c != '_').collect();
            text.parse::<f64>()
                .map_err(|_| syntax(start, "invalid decimal literal"))?
        }
    };
    if !is_float && value.is_infinite() {
        return Err(EvalError::at(
            ErrorKind::Overflow,
            start,
            "integer literal too large to convert to float",
        ));
    }
    Ok((value, i))
}

/// Decimal digits with single underscores between them (`tok_decimal_tail` in CPython),
/// starting at a digit. Returns the end.
fn read_digits(chars: &[char], mut i: usize) -> Result<usize, EvalError> {
    loop {
        while chars.get(i).is_some_and(char::is_ascii_digit) {
            i += 1;
        }
        if chars.get(i) != Some(&'_') {
            return Ok(i);
        }
        if !chars.get(i + 1).is_some_and(char::is_ascii_digit) {
            return Err(syntax(i, "invalid decimal literal"));
        }
        i += 1;
    }
}

/// After a number, CPython rejects any name character (`1x`, `0x1g`, `1_`, `2中`).
fn check_number_end(chars: &[char], i: usize, kind: &str) -> Result<(), EvalError> {
    match chars.get(i) {
        Some(&c) if is_name_char(c) => Err(syntax(i, format!("invalid {kind} literal"))),
        _ => Ok(()),
    }
}

/// `0x..`, `0o..`, `0b..` with optional single underscores (also right after the prefix).
fn read_radix_integer(
    chars: &[char],
    start: usize,
    radix: u32,
    kind: &str,
) -> Result<(f64, usize), EvalError> {
    let mut i = start + 2;
    let mut digits: Vec<u8> = Vec::new();
    loop {
        if chars.get(i) == Some(&'_') {
            i += 1;
        }
        let run_start = i;
        while let Some(d) = chars.get(i).and_then(|c| c.to_digit(radix)) {
            digits.push(d as u8);
            i += 1;
        }
        if i == run_start {
            return Err(syntax(i, format!("invalid {kind} literal")));
        }
        if chars.get(i) != Some(&'_') {
            break;
        }
    }
    if radix != 16 && chars.get(i).is_some_and(char::is_ascii_digit) {
        return Err(syntax(i, format!("invalid digit in {kind} literal")));
    }
    check_number_end(chars, i, kind)?;
    let bits_per_digit = radix.trailing_zeros();
    let value = integer_bits_to_f64(&digits, bits_per_digit);
    if value.is_infinite() {
        return Err(EvalError::at(
            ErrorKind::Overflow,
            start,
            "integer literal too large to convert to float",
        ));
    }
    Ok((value, i))
}

/// Correctly rounded (ties to even) float of an integer given as base-2^k digits, most
/// significant first, as Python's `float(int)` computes it.
fn integer_bits_to_f64(digits: &[u8], bits_per_digit: u32) -> f64 {
    let first_nonzero = digits.iter().position(|&d| d != 0);
    let Some(first_nonzero) = first_nonzero else {
        return 0.0;
    };
    let digits = &digits[first_nonzero..];
    // Keep the top 64 bits exactly and fold everything below into a sticky bit; rounding
    // 64 bits (with the sticky bit in the last place) to 53 is then exact round-to-even.
    let mut top = u64::from(digits[0]);
    let mut top_bits = 64 - top.leading_zeros();
    let mut sticky = false;
    let mut dropped_bits: i32 = 0;
    for &d in &digits[1..] {
        let d = u64::from(d);
        if top_bits + bits_per_digit <= 64 {
            top = (top << bits_per_digit) | d;
            top_bits += bits_per_digit;
            continue;
        }
        let room = 64 - top_bits;
        let shift_out = bits_per_digit - room;
        if room > 0 {
            top = (top << room) | (d >> shift_out);
            top_bits = 64;
        }
        if d & ((1u64 << shift_out) - 1) != 0 {
            sticky = true;
        }
        dropped_bits = dropped_bits.saturating_add(shift_out as i32);
    }
    if sticky {
        top |= 1;
    }
    (top as f64) * 2f64.powi(dropped_bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lex(s: &str) -> Result<Vec<Token>, ErrorKind> {
        let chars: Vec<char> = s.chars().collect();
        tokenize(&chars)
            .map(|v| v.into_iter().map(|t| t.token).collect())
            .map_err(|e| e.kind)
    }

    fn number(s: &str) -> Result<f64, ErrorKind> {
        match lex(s)?.as_slice() {
            [Token::Number(v)] => Ok(*v),
            other => panic!("{s:?} lexed to {other:?}"),
        }
    }

    #[test]
    fn decimal_literals_follow_python_syntax() {
        assert_eq!(number("1_000"), Ok(1000.0));
        assert_eq!(number("1e3"), Ok(1000.0));
        assert_eq!(number("1.5e-3"), Ok(0.0015));
        assert_eq!(number(".5"), Ok(0.5));
        assert_eq!(number("5."), Ok(5.0));
        assert_eq!(number("1.e5"), Ok(1e5));
        assert_eq!(number("1_0.5e-1_0"), Ok(10.5e-10));
        assert_eq!(number("0"), Ok(0.0));
        assert_eq!(number("00"), Ok(0.0));
        assert_eq!(number("0_0"), Ok(0.0));
        assert_eq!(number("01.5"), Ok(1.5));
        assert_eq!(number("09e1"), Ok(90.0));
        assert_eq!(number("1e400"), Ok(f64::INFINITY));
    }

    #[test]
    fn short_literals_read_like_the_general_parser() {
        let mut texts: Vec<String> = [
            "0",
            "7",
            "6956",
            ".5",
            "5.",
            "01.5",
            "0.1",
            "91.402637848",
            "999999999999999",
            "0.000000000000001",
            "123456789.012345",
            "9007199254740993",
            "1234567890123456.5",
        ]
        .map(String::from)
        .to_vec();
        // Fractions whose digits do not fit a float exactly, with 1 to 15 digits in all.
        for k in 0..3000u64 {
            let digits = (k * 7_919_113 + 3) % 10u64.pow((k % 15) as u32 + 1);
            let text = digits.to_string();
            let point = (k % 7) as usize % (text.len() + 1);
            texts.push(format!("{}.{}", &text[..point], &text[point..]));
        }
        for text in &texts {
            let general: f64 = text.parse().unwrap_or(f64::NAN);
            if let Some(short) = short_decimal(text.chars()) {
                assert_eq!(short.to_bits(), general.to_bits(), "{text}");
            }
            assert_eq!(
                number(text).map(f64::to_bits),
                Ok(general.to_bits()),
                "{text}"
            );
        }
    }

    #[test]
    fn malformed_decimal_literals_are_syntax_errors() {
        for bad in [
            "01", "0_1", "1_", "1__0", "1e", "1e+", "1_e5", "1e_5", "1._5", "1j", "0j",
        ] {
            assert_eq!(lex(bad), Err(ErrorKind::Syntax), "{bad}");
        }
        for bad in ["1x", "1.5a", "2中", "1if", "0_"] {
            assert_eq!(lex(bad), Err(ErrorKind::Syntax), "{bad}");
        }
    }

    #[test]
    fn radix_literals_round_like_python() {
        assert_eq!(number("0x1F"), Ok(31.0));
        assert_eq!(number("0x_1f"), Ok(31.0));
        assert_eq!(number("0o17"), Ok(15.0));
        assert_eq!(number("0b101"), Ok(5.0));
        assert_eq!(number("0b1_0_1"), Ok(5.0));
        assert_eq!(number("0x0"), Ok(0.0));
        // 2^53 + 1 rounds to even (down), 2^53 + 3 rounds up.
        assert_eq!(number("0x20000000000001"), Ok(9007199254740992.0));
        assert_eq!(number("0x20000000000003"), Ok(9007199254740996.0));
        // A tie far below the top 64 bits is broken by the sticky bit.
        assert_eq!(
            number("0x200000000000010000000000000001"),
            Ok(2f64.powi(117) + 2f64.powi(65))
        );
        assert_eq!(
            number(&format!("0x{}", "f".repeat(254))),
            Ok(2f64.powi(1016))
        );
        for bad in [
            "0x", "0x_", "0xg", "0x1g", "0x1_", "0o8", "0o18", "0b2", "0b12", "0_x1",
        ] {
            assert_eq!(lex(bad), Err(ErrorKind::Syntax), "{bad}");
        }
    }

    #[test]
    fn operators_take_the_longest_match() {
        assert_eq!(
            lex("2**-1//3%4*5/6"),
            Ok(vec![
                Token::Number(2.0),
                Token::DoubleStar,
                Token::Minus,
                Token::Number(1.0),
                Token::DoubleSlash,
                Token::Number(3.0),
                Token::Percent,
                Token::Number(4.0),
                Token::Star,
                Token::Number(5.0),
                Token::Slash,
                Token::Number(6.0),
            ])
        );
        assert_eq!(
            lex("2***3"),
            Ok(vec![
                Token::Number(2.0),
                Token::DoubleStar,
                Token::Star,
                Token::Number(3.0)
            ])
        );
    }

    #[test]
    fn names_fold_like_nfkc_and_keywords_stay_ascii() {
        assert_eq!(lex("ｓｑｒｔ"), Ok(vec![Token::Name("sqrt".into())]));
        assert_eq!(lex("ſin"), Ok(vec![Token::Name("sin".into())]));
        assert_eq!(lex("𝐩𝐢"), Ok(vec![Token::Name("pi".into())]));
        assert_eq!(lex("ℯ"), Ok(vec![Token::Name("e".into())]));
        assert_eq!(lex("ⅽos"), Ok(vec![Token::Name("cos".into())]));
        assert_eq!(lex("True"), Ok(vec![Token::Number(1.0)]));
        assert_eq!(lex("False"), Ok(vec![Token::Number(0.0)]));
        assert_eq!(lex("x1_y"), Ok(vec![Token::Name("x1_y".into())]));
        assert_eq!(lex("ⓢqrt"), Err(ErrorKind::UnknownName));
        assert_eq!(lex("π"), Err(ErrorKind::UnknownName));
    }

    #[test]
    fn comments_end_the_expression_and_other_syntax_is_rejected() {
        assert_eq!(lex("1#2)("), Ok(vec![Token::Number(1.0)]));
        for bad in [
            "'a'", "\"a\"", "[1]", "1<2", "a.b", "...", "1=2", "~1", "1\\", "@", "1;2",
        ] {
            assert_eq!(lex(bad), Err(ErrorKind::Syntax), "{bad}");
        }
    }
}
