//! Reading a structured value out of arbitrary bytes: the one decoder every body uses, so a
//! fuzzer's mutations and a property test's random bytes mean the same thing. Every read
//! succeeds: past the end of the input a read gives zeros and empty strings, so a short input
//! is simply a small case. So a choice's 0 is always its plain case, and rare cases are
//! asked for with [`Input::one_in`].

use serde_json::{Map, Value};

/// A cursor over the input bytes.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The next byte (0 past the end).
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for slot in &mut b {
            *slot = self.byte();
        }
        u64::from_le_bytes(b)
    }

    /// A coin flip.
    pub fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A number in `0..n` (`n` at most 65 536; 0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        if n <= 256 {
            usize::from(self.byte()) % n
        } else {
            usize::from(self.u16()) % n
        }
    }

    /// True one time in `n` (never once the input has ended: past the end every choice is
    /// the plain one, 0).
    pub fn one_in(&mut self, n: usize) -> bool {
        n > 0 && self.below(n) == n - 1
    }

    /// One of `items` (the first when the input has ended).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> Option<T> {
        let i = self.below(items.len());
        items.get(i).copied()
    }

    /// Up to `max` raw bytes (the count is read first).
    pub fn bytes(&mut self, max: usize) -> &'a [u8] {
        let want = self.below(max.saturating_add(1));
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(want).min(self.data.len());
        self.pos = start.saturating_add(want);
        &self.data[start..end]
    }

    /// Up to `max` bytes as text (invalid UTF-8 replaced).
    pub fn text(&mut self, max: usize) -> String {
        String::from_utf8_lossy(self.bytes(max)).into_owned()
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        self.pos = self.data.len();
        &self.data[start..]
    }
}

/// A JSON value of any shape, small (nested at most four levels).
pub(super) fn any_value(input: &mut Input<'_>, depth: u32) -> Value {
    match input.below(if depth > 2 { 4 } else { 6 }) {
        0 => Value::Null,
        1 => Value::Bool(input.bool()),
        2 => Value::from(input.u16()),
        3 => Value::String(input.text(16)),
        4 => Value::Array(
            (0..input.below(3))
                .map(|_| any_value(input, depth + 1))
                .collect(),
        ),
        _ => {
            let mut map = Map::new();
            for _ in 0..input.below(3) {
                map.insert(input.text(6), any_value(input, depth + 1));
            }
            Value::Object(map)
        }
    }
}

/// Sets `key` to what `make` builds, or (one time in 32 each) leaves it out or sets it to any
/// value instead.
pub(super) fn field(
    map: &mut Map<String, Value>,
    input: &mut Input<'_>,
    key: &str,
    make: impl FnOnce(&mut Input<'_>) -> Value,
) {
    let value = match input.below(32) {
        30 => return,
        31 => any_value(input, 1),
        _ => make(input),
    };
    map.insert(key.to_owned(), value);
}

/// `data` cut into pieces whose sizes come from `seed` (a xorshift sequence): pieces of 0 to
/// `max` bytes, where `max` is one of 1, 2, 7, 64 or 4 096 (and at least a 2 048th of the
/// input), so byte-by-byte feeding, tiny pieces, empty pieces and large ones all occur.
pub fn chunks(data: &[u8], seed: u64) -> Vec<&[u8]> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    // At most about 4 096 pieces: a large input is cut coarsely (byte by byte, 3 MiB takes
    // long in a debug build).
    let floor = (data.len() / 2048) as u64;
    let max = [1u64, 2, 7, 64, 4096][(next() % 5) as usize].max(floor);
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let size = usize::try_from(next() % (max + 1))
            .unwrap_or(1)
            .min(rest.len());
        let (piece, tail) = rest.split_at(size);
        out.push(piece);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_past_the_end_are_zeros_and_chunks_cover_the_input() {
        let mut i = Input::new(&[3, b'a', b'b', b'c', 9]);
        assert_eq!(i.text(10), "abc");
        assert_eq!(i.byte(), 9);
        assert!(i.is_empty());
        assert_eq!((i.byte(), i.u16(), i.text(5)), (0, 0, String::new()));
        let data: Vec<u8> = (0..=255).collect();
        for seed in 0..50 {
            assert_eq!(chunks(&data, seed).concat(), data);
        }
    }
}
