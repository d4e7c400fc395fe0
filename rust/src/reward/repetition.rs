//! The repetition penalty: how much of a completion repeats its own word trigrams.

use std::collections::{HashMap, HashSet};

use crate::pychar::{is_space, is_word, lower as py_lower, lower_char, token_class, TokenClass};
use crate::reward::fast_hash::FastHash;

/// Penalty for repetitive text: the share of repeated word trigrams above 25%, doubled,
/// at most 0.8; texts under 16 tokens are never penalised. Tokens are Python's
/// `\w+|[^\w\s]` on the lower-cased text.
pub fn repetition_penalty(text: &str) -> f64 {
    if !has_tokens(text, 16) {
        return 0.0;
    }
    let lowered = py_lower(text);
    let tokens = tokens_of(&lowered);
    if tokens.len() < 16 {
        return 0.0;
    }
    let distinct = if tokens.len() <= SORT_LIMIT {
        distinct_trigrams_sorted(&tokens)
    } else {
        distinct_trigrams_hashed(&tokens)
    };
    let total = tokens.len() - 2;
    let repeat_rate = 1.0 - distinct as f64 / total as f64;
    let excess = repeat_rate - 0.25;
    let excess = if excess > 0.0 { excess } else { 0.0 };
    let penalty = excess * 2.0;
    if penalty < 0.8 {
        penalty
    } else {
        0.8
    }
}

/// Up to this many tokens, trigrams are counted by sorting (cheaper than hashing for the
/// short answers most completions have); beyond it, by hashing (linear time).
const SORT_LIMIT: usize = 2048;

/// Number of distinct token trigrams, by sorting: tokens get ids from their sorted order,
/// then the packed id triples are sorted and counted. Tokens of up to 7 bytes (nearly all
/// of them) sort by a packed integer key; longer ones sort as text after them.
fn distinct_trigrams_sorted(tokens: &[&str]) -> usize {
    let mut keyed: Vec<(u64, u32)> = tokens
        .iter()
        .enumerate()
        .map(|(i, token)| (short_token_key(token), i as u32))
        .collect();
    keyed.sort_unstable();
    let long_from = keyed.partition_point(|&(key, _)| key != LONG_TOKEN);
    keyed[long_from..].sort_unstable_by(|a, b| tokens[a.1 as usize].cmp(tokens[b.1 as usize]));
    let mut ids = vec![0u64; tokens.len()];
    let mut next = 0u64;
    for pair in keyed.windows(2) {
        let ((key_a, a), (key_b, b)) = (pair[0], pair[1]);
        let differ = if key_b == LONG_TOKEN {
            key_a != LONG_TOKEN || tokens[a as usize] != tokens[b as usize]
        } else {
            key_a != key_b
        };
        if differ {
            next += 1;
        }
        ids[b as usize] = next;
    }
    // Ids are below 2^11 here, so a triple packs into one integer.
    let mut packed: Vec<u64> = ids
        .windows(3)
        .map(|w| (w[0] << 42) | (w[1] << 21) | w[2])
        .collect();
    packed.sort_unstable();
    packed.dedup();
    packed.len()
}

/// The key of tokens longer than 7 bytes (no short token's key: their low byte is <= 7).
const LONG_TOKEN: u64 = u64::MAX;

/// A token of up to 7 bytes as one integer, equal for equal tokens only: its bytes from
/// the top, then its length in the low byte.
fn short_token_key(token: &str) -> u64 {
    let bytes = token.as_bytes();
    if bytes.len() > 7 {
        return LONG_TOKEN;
    }
    let mut key = 0u64;
    for (k, &b) in bytes.iter().enumerate() {
        key |= u64::from(b) << (56 - 8 * k);
    }
    key | bytes.len() as u64
}

/// Number of distinct token trigrams, by hashing token ids.
fn distinct_trigrams_hashed(tokens: &[&str]) -> usize {
    let mut ids: HashMap<&str, u32, FastHash> =
        HashMap::with_capacity_and_hasher(tokens.len().min(1 << 16), FastHash::default());
    let numbered: Vec<u32> = tokens
        .iter()
        .map(|&token| {
            let next = ids.len() as u32;
            *ids.entry(token).or_insert(next)
        })
        .collect();
    let trigrams: HashSet<(u32, u32, u32), FastHash> =
        numbered.windows(3).map(|w| (w[0], w[1], w[2])).collect();
    trigrams.len()
}

/// The token class of each ASCII character (lower-casing keeps it): letters, digits and
/// `_` are word characters, Python's ASCII whitespace is space, the rest are symbols.
const ASCII_TOKEN_CLASSES: [TokenClass; 128] = {
    let mut table = [TokenClass::Symbol; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        if b.is_ascii_alphanumeric() || b == b'_' {
            table[i] = TokenClass::Word;
        } else if matches!(b, b'\t'..=b'\r' | 0x1C..=b' ') {
            table[i] = TokenClass::Space;
        }
        i += 1;
    }
    table
};

/// Whether the lower-cased text has at least `wanted` tokens, counted without building it.
fn has_tokens(text: &str, wanted: usize) -> bool {
    let mut count = 0;
    let mut in_word = false;
    let mut step = |class: TokenClass, count: &mut usize| match class {
        TokenClass::Word => {
            *count += usize::from(!in_word);
            in_word = true;
        }
        TokenClass::Symbol => {
            *count += 1;
            in_word = false;
        }
        TokenClass::Space => in_word = false,
    };
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte.is_ascii() {
            // ASCII (most of a completion) is classified from its byte.
            step(ASCII_TOKEN_CLASSES[usize::from(byte)], &mut count);
            i += 1;
            if count >= wanted {
                return true;
            }
            continue;
        }
        let Some(c) = text.get(i..).and_then(|rest| rest.chars().next()) else {
            break;
        };
        i += c.len_utf8();
        match token_class(c) {
            Some(class) => step(class, &mut count),
            None => {
                for l in lower_char(c) {
                    let class = if is_word(l) {
                        TokenClass::Word
                    } else if is_space(l) {
                        TokenClass::Space
                    } else {
                        TokenClass::Symbol
                    };
                    step(class, &mut count);
                }
            }
        }
        if count >= wanted {
            return true;
        }
    }
    false
}

/// The tokens of `\w+|[^\w\s]` (see [`token_spans`]), with ASCII classified by byte.
fn tokens_of(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::with_capacity(64);
    let mut word_start: Option<usize> = None;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        let (class, len) = if byte.is_ascii() {
            (ASCII_TOKEN_CLASSES[usize::from(byte)], 1)
        } else {
            let Some(c) = text.get(i..).and_then(|rest| rest.chars().next()) else {
                break;
            };
            let class = if is_word(c) {
                TokenClass::Word
            } else if is_space(c) {
                TokenClass::Space
            } else {
                TokenClass::Symbol
            };
            (class, c.len_utf8())
        };
        if class == TokenClass::Word {
            word_start.get_or_insert(i);
        } else {
            if let Some(start) = word_start.take() {
                tokens.push(&text[start..i]);
            }
            if class == TokenClass::Symbol {
                tokens.push(&text[i..i + len]);
            }
        }
        i += len;
    }
    if let Some(start) = word_start {
        tokens.push(&text[start..]);
    }
    tokens
}

/// Byte spans of the tokens of `\w+|[^\w\s]`: runs of word characters, and every other
/// non-space character on its own.
#[cfg(test)]
fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut word_start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if is_word(c) {
            word_start.get_or_insert(i);
            continue;
        }
        if let Some(start) = word_start.take() {
            spans.push((start, i));
        }
        if !is_space(c) {
            spans.push((i, i + c.len_utf8()));
        }
    }
    if let Some(start) = word_start {
        spans.push((start, text.len()));
    }
    spans
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repetition_penalty_counts_repeated_trigrams() {
        assert_eq!(repetition_penalty("a b c d e f g h i j k l m n o"), 0.0); // 15 tokens
        let looped = "the answer is 42 . ".repeat(10);
        // 50 tokens, 48 trigrams, 5 distinct: rate 1 - 5/48, penalty capped at 0.8.
        assert_eq!(repetition_penalty(&looped), 0.8);
        let text: String = (0..20).map(|i| format!("w{i} ")).collect::<String>() + "w0 w1 w2";
        // 23 tokens, 21 trigrams, 20 distinct: rate 1/21 < 0.25.
        assert_eq!(repetition_penalty(&text), 0.0);
        let mixed = "数 字 ".repeat(5) + "一 二 三 四 五 六 七 八";
        let tokens = 18.0;
        let distinct = 2.0 + 6.0 + 2.0; // looping pairs, then the fresh tail
        let expected = (1.0 - distinct / (tokens - 2.0) - 0.25) * 2.0;
        assert!((repetition_penalty(&mixed) - expected).abs() < 1e-12);
    }

    #[test]
    fn sorted_and_hashed_trigram_counts_agree() {
        let words = [
            "a", "b", "a", "c", "a", "b", "a", "c", "d", "b", "a", "b", "z",
        ];
        let sorted = distinct_trigrams_sorted(&words);
        assert_eq!(sorted, distinct_trigrams_hashed(&words));
        assert_eq!(sorted, 9);
        let long: Vec<String> = (0..5000).map(|i| format!("t{}", i % 37)).collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        assert_eq!(distinct_trigrams_hashed(&refs), 37);
        assert_eq!(distinct_trigrams_sorted(&refs[..2000]), 37);
    }

    #[test]
    fn ascii_token_classes_agree_with_the_general_table() {
        for b in 0u8..128 {
            assert_eq!(
                Some(ASCII_TOKEN_CLASSES[usize::from(b)]),
                token_class(char::from(b)),
                "{b}"
            );
        }
        // Mixed ASCII and other text counts like the tokeniser.
        for text in ["计算 1+2 等于 3 吗？ OK_go!!", "ǅǅ x\u{85}y İ", "a b", ""] {
            for wanted in 1..12 {
                assert_eq!(
                    has_tokens(text, wanted),
                    token_spans(&py_lower(text)).len() >= wanted,
                    "{text} {wanted}"
                );
            }
        }
    }

    #[test]
    fn byte_classified_tokens_equal_the_character_spans() {
        let texts = [
            "计算1+2=3, ok_go!",
            "ǅx İy \u{85}z\u{a0}w ٣٤ ok?!",
            "  lead and trail  ",
            "a\tb\u{1c}c\u{1f}d\u{b}e",
            "",
        ];
        for text in texts {
            let lowered = py_lower(text);
            let by_span: Vec<&str> = token_spans(&lowered)
                .iter()
                .map(|&(a, b)| &lowered[a..b])
                .collect();
            assert_eq!(tokens_of(&lowered), by_span, "{text}");
        }
    }

    #[test]
    fn short_and_long_tokens_keep_apart_in_the_sorted_count() {
        // Tokens that share a prefix, differ only by length or a NUL byte, and long tokens
        // equal up to their last byte.
        let words = [
            "a",
            "a\0",
            "ab",
            "abcdefg",
            "abcdefgh",
            "abcdefgi",
            "a",
            "a\0",
            "ab",
            "abcdefgh",
            "abcdefgi",
            "abcdefgh",
            "计算",
            "计算机",
            "计",
            "abcdefg",
            "a",
            "a\0",
            "ab",
        ];
        assert_eq!(
            distinct_trigrams_sorted(&words),
            distinct_trigrams_hashed(&words)
        );
        let distinct: HashSet<_> = words.windows(3).collect();
        assert_eq!(distinct_trigrams_sorted(&words), distinct.len());
        assert_ne!(short_token_key("a"), short_token_key("a\0"));
        assert_eq!(short_token_key("abcdefgh"), LONG_TOKEN);
    }

    #[test]
    fn chinese_and_punctuation_tokenise_like_python() {
        let spans = token_spans("计算1+2=3, ok_go!");
        let tokens: Vec<&str> = spans
            .iter()
            .map(|&(a, b)| &"计算1+2=3, ok_go!"[a..b])
            .collect();
        assert_eq!(tokens, ["计算1", "+", "2", "=", "3", ",", "ok_go", "!"]);
    }
}
