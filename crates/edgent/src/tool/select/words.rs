//! The words of a text as tool selection reads them: lowercase runs of letters and digits,
//! split at camelCase, stop words and one-letter words left out, plurals made singular; and
//! the hashes they are kept as.

use super::STOP_WORDS;

/// The words of `text`: lowercase runs of letters and digits (split where a lowercase letter
/// meets an uppercase one, so `getWeather` is two words), without stop words and one-letter
/// words, a plural `s` taken off.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_word(text, usize::MAX, &mut |w| out.push(w.to_owned()));
    out
}

/// Calls `keep` with each of the first `limit` words of `text` (see [`words`]), held in one
/// buffer: a document's words are hashed, never allocated one by one (the cost of ranking
/// dozens of tools is mostly in its words). Returns how many it kept.
pub(super) fn each_word(text: &str, limit: usize, keep: &mut impl FnMut(&str)) -> usize {
    let mut kept = 0;
    let mut word = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if kept >= limit {
            return kept;
        }
        let in_word = is_word_char(c);
        if !in_word || (previous_lower && c.is_ascii_uppercase()) {
            kept += usize::from(finish(&mut word, keep));
        }
        previous_lower = c.is_ascii_lowercase();
        if in_word {
            word.push(folded(c));
        }
    }
    if kept < limit {
        kept += usize::from(finish(&mut word, keep));
    }
    kept
}

/// Whether `c` belongs to a word: ASCII letters and digits, and any other character but
/// spaces, punctuation and symbols, told apart by their blocks (the Unicode tables behind
/// `char::is_alphanumeric` and `char::to_lowercase` would add 17 KB to the Worker).
fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    !c.is_whitespace()
        && !matches!(c,
            // Latin-1 punctuation and signs (« » ° ¿ × ÷ …)
            '\u{80}'..='\u{BF}' | '\u{D7}' | '\u{F7}'
            // general punctuation (dashes, curly quotes, ellipsis), symbols, arrows, shapes
            | '\u{2000}'..='\u{2BFF}'
            // CJK and full-width punctuation
            | '\u{3000}'..='\u{303F}' | '\u{FE30}'..='\u{FE6F}' | '\u{FF01}'..='\u{FF0F}'
            | '\u{FF1A}'..='\u{FF20}'
            // emoji and pictographs
            | '\u{1F000}'..='\u{1FAFF}')
}

/// `c` in lowercase for the capitals of ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic;
/// other characters as they are (see [`is_word_char`] for why not `char::to_lowercase`).
fn folded(c: char) -> char {
    let n = u32::from(c);
    let lower = match n {
        0x41..=0x5A | 0xC0..=0xD6 | 0xD8..=0xDE | 0x391..=0x3A1 | 0x3A3..=0x3AB | 0x410..=0x42F => {
            n + 0x20
        }
        0x400..=0x40F => n + 0x50,
        // Latin Extended-A pairs each capital with the small letter after it.
        0x100..=0x12F | 0x132..=0x137 | 0x14A..=0x177 if n % 2 == 0 => n + 1,
        0x139..=0x148 | 0x179..=0x17E if n % 2 == 1 => n + 1,
        _ => n,
    };
    char::from_u32(lower).unwrap_or(c)
}

/// Hands the word in `word` to `keep` if it is worth keeping (made singular), and empties the
/// buffer; whether it was kept.
fn finish(word: &mut String, keep: &mut impl FnMut(&str)) -> bool {
    let kept = word.chars().nth(1).is_some() && !STOP_WORDS.contains(&word.as_str());
    if kept {
        make_singular(word);
        keep(word);
    }
    word.clear();
    kept
}

/// A cheap stemmer: plurals meet their singular (`refunds`, `refund`; `replies`, `reply`),
/// and nothing else changes, so a stem never surprises.
fn make_singular(word: &mut String) {
    let len = word.len();
    if len > 4 && word.ends_with("ies") {
        word.truncate(len - 3);
        word.push('y');
    } else if len > 3
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|e| word.ends_with(e))
    {
        word.truncate(len - 1);
    }
}

/// A word as a document holds it: its 64-bit FNV-1a hash (two words of one small set of
/// tools sharing a hash is far less likely than a misspelling).
pub(super) fn hash(word: &str) -> u64 {
    fingerprint(word)
}

/// The 64-bit FNV-1a hash of `text`: what a document's words are kept as, and what the
/// embedding cache keys a tool's text by.
pub fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
