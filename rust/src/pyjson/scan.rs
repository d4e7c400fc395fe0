//! Finding the next byte of a string that is not copied as it is (the closing quote, a
//! backslash, a control character), or the next line end, eight bytes at a time: strings
//! are most of the bytes of the JSON lines the scorer reads and writes.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Marks (in the high bit) bytes of `word` that are zero. The lowest marked byte is always
/// a zero byte (a borrow only spreads upwards, so spurious marks sit above a real one).
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// Marks bytes of `word` below 0x20, with the same guarantee as [`zero_bytes`].
fn control_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES * 0x20) & !word & HIGHS
}

/// The index of the first byte at or after `from` that is `quote`, `\` or (when
/// `controls`) below 0x20; `bytes.len()` when there is none.
#[inline]
pub fn find_special(bytes: &[u8], from: usize, quote: u8, controls: bool) -> usize {
    let is_special = |b: u8| b == quote || b == b'\\' || (controls && b < 0x20);
    let mut i = from;
    while i + 8 <= bytes.len() {
        let mut word_bytes = [0u8; 8];
        word_bytes.copy_from_slice(&bytes[i..i + 8]);
        let word = u64::from_le_bytes(word_bytes);
        let mut marks =
            zero_bytes(word ^ (ONES * u64::from(quote))) | zero_bytes(word ^ (ONES * 0x5c));
        if controls {
            marks |= control_bytes(word);
        }
        if marks != 0 {
            // The lowest mark is always a real match (see `zero_bytes`).
            return i + (marks.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !is_special(bytes[i]) {
        i += 1;
    }
    i
}

/// The index of the first `\n` (or, when `carriage_returns`, `\r`) at or after `from`;
/// `bytes.len()` when there is none.
#[inline]
pub fn find_line_end(bytes: &[u8], from: usize, carriage_returns: bool) -> usize {
    let mut i = from;
    while i + 8 <= bytes.len() {
        let mut word_bytes = [0u8; 8];
        word_bytes.copy_from_slice(&bytes[i..i + 8]);
        let word = u64::from_le_bytes(word_bytes);
        let mut marks = zero_bytes(word ^ (ONES * u64::from(b'\n')));
        if carriage_returns {
            marks |= zero_bytes(word ^ (ONES * u64::from(b'\r')));
        }
        if marks != 0 {
            return i + (marks.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < bytes.len() && !(bytes[i] == b'\n' || (carriage_returns && bytes[i] == b'\r')) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slow(bytes: &[u8], from: usize, quote: u8, controls: bool) -> usize {
        (from..bytes.len())
            .find(|&i| {
                let b = bytes[i];
                b == quote || b == b'\\' || (controls && b < 0x20)
            })
            .unwrap_or(bytes.len())
    }

    #[test]
    fn line_ends_are_found_like_a_byte_by_byte_scan() {
        let text = b"first line, long enough\r\nsecond\rthird line here\n\nlast";
        for from in 0..text.len() {
            for cr in [true, false] {
                let slow = (from..text.len())
                    .find(|&i| text[i] == b'\n' || (cr && text[i] == b'\r'))
                    .unwrap_or(text.len());
                assert_eq!(find_line_end(text, from, cr), slow);
            }
        }
    }

    #[test]
    fn agrees_on_random_bytes() {
        // A fixed linear congruential sequence: bytes drawn mostly from the tricky range.
        let mut state: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u8
        };
        for _ in 0..2000 {
            let len = usize::from(next() % 40);
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 4 {
                    0 => next() % 0x30,
                    1 => [b'"', b'\\', b'\'', b'\n', b'\r'][usize::from(next() % 5)],
                    _ => next(),
                })
                .collect();
            let from = usize::from(next()) % (len + 1);
            for controls in [true, false] {
                assert_eq!(
                    find_special(&bytes, from, b'"', controls),
                    slow(&bytes, from, b'"', controls),
                    "{bytes:?} from {from}"
                );
            }
            for cr in [true, false] {
                let want = (from..len)
                    .find(|&i| bytes[i] == b'\n' || (cr && bytes[i] == b'\r'))
                    .unwrap_or(len);
                assert_eq!(find_line_end(&bytes, from, cr), want, "{bytes:?}");
            }
        }
    }

    #[test]
    fn agrees_with_a_byte_by_byte_scan() {
        let samples: Vec<Vec<u8>> = vec![
            b"plain text without specials at all, long enough".to_vec(),
            b"abcdefgh\"ijk".to_vec(),
            b"\x01abcdefghijklmnop".to_vec(),
            b"abcdefghijklmno\\".to_vec(),
            "ünïcödé text ∑ 数字 \u{1f}x".as_bytes().to_vec(),
            b"\x7f\x80\xff\x20\x1f".to_vec(),
            (0u8..=255).collect(),
            b"it's 'quoted'".to_vec(),
        ];
        for bytes in &samples {
            for from in 0..bytes.len().min(20) {
                for quote in [b'"', b'\''] {
                    for controls in [true, false] {
                        assert_eq!(
                            find_special(bytes, from, quote, controls),
                            slow(bytes, from, quote, controls),
                            "{bytes:?} from {from}"
                        );
                    }
                }
            }
        }
    }
}
