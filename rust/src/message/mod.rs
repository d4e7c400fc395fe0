//! A lenient, multi-format parser for the tool calls real models write.
//!
//! The strict [`crate::toolcall`] parser stays the reward's contract; this one is
//! what the rollout loop executes, so it must find every call the model meant and nothing
//! it did not mean:
//!
//! - formats: Hermes/Qwen `<tool_call>` blocks, bare fenced JSON naming a declared tool,
//!   Llama 3 JSON (`<|python_tag|>` and plain), Mistral `[TOOL_CALLS]`, DeepSeek-V3 call
//!   tokens, and the pythonic list `[f(a=1), g(b='x')]`;
//! - JSON is read by value boundaries, never cut by a regex, so closing tags and braces
//!   inside string arguments stay intact; single quotes, `True`/`False`/`None` and trailing
//!   commas are tolerated; truncated JSON is refused, never repaired;
//! - one bad block becomes one entry in `errors` and the good blocks still count;
//! - reasoning (`<think>`) is set apart and nothing in it is a call; a tag mentioned in
//!   prose (not followed by JSON) is left as text.
//!
//! Every marker is found with a forward search, and each block's JSON may not run past the
//! next block start of the same format, so the whole parse is linear in the text length,
//! whatever the text. The one consequence: a string argument cannot contain the opening
//! marker of a new block of its own format followed by JSON (`<tool_call>{` inside a Hermes
//! argument); such a block is reported as truncated rather than misread.

mod common;
mod fenced;
mod hermes;
mod pythonic;
mod reasoning;
mod special;

use std::collections::HashSet;

use crate::pychar::strip as py_strip;
use crate::pyjson::Object;
use crate::toolcall::first_chars;

use common::{Found, Outcome};

/// The call formats this parser knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `<tool_call>{...}</tool_call>` (Hermes, Qwen 2.5/3, MiniMind).
    Hermes,
    /// A Markdown code fence holding a call to a declared tool.
    Json,
    /// `<|python_tag|>{...}` or a message that is only `{"name": .., "parameters": ..}`.
    Llama3,
    /// `[TOOL_CALLS][...]` or `[TOOL_CALLS]name[ARGS]{...}`.
    Mistral,
    /// `<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>`.
    DeepSeek,
    /// `[f(a=1), g(b='x')]`.
    Pythonic,
}

impl Format {
    pub const ALL: [Format; 6] = [
        Format::Hermes,
        Format::Json,
        Format::Llama3,
        Format::Mistral,
        Format::DeepSeek,
        Format::Pythonic,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Hermes => "hermes",
            Format::Json => "json",
            Format::Llama3 => "llama3",
            Format::Mistral => "mistral",
            Format::DeepSeek => "deepseek",
            Format::Pythonic => "pythonic",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of formats to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatSet {
    bits: u8,
}

impl FormatSet {
    pub fn all() -> Self {
        Format::ALL.into_iter().collect()
    }

    pub fn none() -> Self {
        FormatSet { bits: 0 }
    }

    pub fn insert(&mut self, format: Format) {
        self.bits |= format.bit();
    }

    pub fn contains(self, format: Format) -> bool {
        self.bits & format.bit() != 0
    }
}

impl Default for FormatSet {
    fn default() -> Self {
        Self::all()
    }
}

impl FromIterator<Format> for FormatSet {
    fn from_iter<I: IntoIterator<Item = Format>>(iter: I) -> Self {
        let mut set = FormatSet::none();
        for f in iter {
            set.insert(f);
        }
        set
    }
}

/// What to look for.
#[derive(Debug, Clone, Default)]
pub struct MessageOptions {
    /// The episode's declared tool names. When given, calls to other names are flagged
    /// `unknown_tool`, fenced JSON counts only when it names one of them, and a pythonic list
    /// only when its first call does.
    pub tools: Option<HashSet<String>>,
    pub formats: FormatSet,
}

/// One call to execute.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub name: String,
    pub arguments: Object,
    /// Tools were declared and this name is not among them.
    pub unknown_tool: bool,
}

/// A block (or one call in it) that was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    pub format: Format,
    pub reason: String,
    /// Character offset of the block in the message.
    pub offset: usize,
    /// The block's text, cut to [`ERROR_TEXT_CHARS`] characters.
    pub text: String,
}

/// How much of a refused block's text an error keeps.
pub const ERROR_TEXT_CHARS: usize = 200;

/// At most this many refused blocks are listed one by one; the rest are counted in one
/// final entry. A real message has a handful; this bounds the cost of pathological input
/// (a megabyte of broken blocks) while still telling the model what went wrong.
pub const MAX_LISTED_ERRORS: usize = 64;

/// A model message taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedMessage {
    /// The text outside call blocks and reasoning, in order, with the ends trimmed.
    pub content: String,
    /// The `<think>` text, `None` when the message has no think tags.
    pub reasoning: Option<String>,
    pub calls: Vec<Call>,
    /// One entry per refused block (or refused call inside a block), in order; past
    /// [`MAX_LISTED_ERRORS`], a last entry says how many more there were.
    pub errors: Vec<BlockError>,
}

/// Splits a model message into content, reasoning, calls and refused blocks.
pub fn parse_message(text: &str, opts: &MessageOptions) -> ParsedMessage {
    let split = reasoning::split(text);
    let mut out = Collector {
        text,
        tools: opts.tools.as_ref(),
        content: String::new(),
        calls: Vec::new(),
        errors: Vec::new(),
        counted_bytes: 0,
        counted_chars: 0,
        unlisted: None,
    };
    for &(start, end) in &split.outside {
        scan_segment(text, start, end, opts, &mut out);
    }
    if let Some((first, count)) = out.unlisted.take() {
        out.errors.push(BlockError {
            reason: format!("{count} more refused blocks are not listed"),
            text: String::new(),
            ..first
        });
    }
    ParsedMessage {
        content: py_strip(&out.content).to_owned(),
        reasoning: split.reasoning,
        calls: out.calls,
        errors: out.errors,
    }
}

/// Where a block may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    Hermes,
    PythonTag,
    Mistral,
    DeepSeekCall,
    DeepSeekEnvelope,
    Fence,
    Pythonic,
}

impl Marker {
    fn format(self) -> Format {
        match self {
            Marker::Hermes => Format::Hermes,
            Marker::PythonTag => Format::Llama3,
            Marker::Mistral => Format::Mistral,
            Marker::DeepSeekCall | Marker::DeepSeekEnvelope => Format::DeepSeek,
            Marker::Fence => Format::Json,
            Marker::Pythonic => Format::Pythonic,
        }
    }
}

/// The candidate block starts of one segment, in order, and per format family the sorted
/// offsets that bound each block (the next start of the same family), with a cursor that
/// only moves forward as the scan does.
struct Candidates {
    all: Vec<(usize, Marker)>,
    by_format: Vec<(Format, Vec<usize>, usize)>,
    /// Offsets of `</tool_call>`.
    hermes_closes: Vec<usize>,
}

impl Candidates {
    /// One forward pass over the segment, looking at the bytes that can start a marker.
    fn collect(text: &str, start: usize, end: usize, opts: &MessageOptions) -> Self {
        let formats = opts.formats;
        let hermes_on = formats.contains(Format::Hermes);
        let llama_on = formats.contains(Format::Llama3);
        let mistral_on = formats.contains(Format::Mistral);
        let deepseek_on = formats.contains(Format::DeepSeek);
        let fences_on = formats.contains(Format::Json) && opts.tools.is_some();
        let pythonic_on = formats.contains(Format::Pythonic);
        let tools = opts.tools.as_ref();
        let bytes = text.as_bytes();
        let mut all: Vec<(usize, Marker)> = Vec::new();
        let mut hermes_closes = Vec::new();
        let mut at = start;
        let mut line_start = true;
        while at < end {
            if line_start && pythonic_on {
                // A pythonic list starts a line, after spaces or tabs.
                let mut first = at;
                while first < end && matches!(bytes[first], b' ' | b'\t') {
                    first += 1;
                }
                if let Some(name) = pythonic::first_name(text, first, end) {
                    if tools.is_none_or(|t| t.contains(name)) {
                        all.push((first, Marker::Pythonic));
                    }
                }
            }
            line_start = false;
            // Every marker starts with an ASCII byte, so `at` is a char boundary there.
            let rest = || text.get(at..end).unwrap_or_default();
            let found = match bytes[at] {
                b'\n' => {
                    line_start = true;
                    None
                }
                b'<' if hermes_on && rest().starts_with(hermes::OPEN) => {
                    if hermes::starts_block(text, at, end) {
                        all.push((at, Marker::Hermes));
                    }
                    Some(hermes::OPEN.len())
                }
                b'<' if hermes_on && rest().starts_with(hermes::CLOSE) => {
                    hermes_closes.push(at);
                    Some(hermes::CLOSE.len())
                }
                b'<' if llama_on && rest().starts_with(special::PYTHON_TAG) => {
                    all.push((at, Marker::PythonTag));
                    Some(special::PYTHON_TAG.len())
                }
                b'<' if deepseek_on => {
                    let r = rest();
                    let call = special::DEEPSEEK_CALL_BEGIN
                        .iter()
                        .find(|t| r.starts_with(*t));
                    let envelope = special::DEEPSEEK_ENVELOPE
                        .iter()
                        .find(|t| r.starts_with(*t));
                    match (call, envelope) {
                        (Some(t), _) => {
                            all.push((at, Marker::DeepSeekCall));
                            Some(t.len())
                        }
                        (None, Some(t)) => {
                            all.push((at, Marker::DeepSeekEnvelope));
                            Some(t.len())
                        }
                        (None, None) => None,
                    }
                }
                b'[' if mistral_on && rest().starts_with(special::TOOL_CALLS) => {
                    all.push((at, Marker::Mistral));
                    Some(special::TOOL_CALLS.len())
                }
                b'`' if fences_on && rest().starts_with("```") => {
                    all.push((at, Marker::Fence));
                    Some(3)
                }
                _ => None,
            };
            at += found.unwrap_or(1);
        }
        all.sort_by_key(|&(at, _)| at);
        let mut by_format: Vec<(Format, Vec<usize>, usize)> = Format::ALL
            .into_iter()
            .map(|f| (f, Vec::new(), 0))
            .collect();
        for &(at, marker) in &all {
            if let Some((_, starts, _)) =
                by_format.iter_mut().find(|(f, _, _)| *f == marker.format())
            {
                starts.push(at);
            }
        }
        Candidates {
            all,
            by_format,
            hermes_closes,
        }
    }

    /// The next start of `format` after `at`, or `end`; `at` must not decrease between
    /// calls for the same format.
    fn next_of(&mut self, format: Format, at: usize, end: usize) -> usize {
        let Some((_, starts, cursor)) = self.by_format.iter_mut().find(|(f, _, _)| *f == format)
        else {
            return end;
        };
        while starts.get(*cursor).is_some_and(|&s| s <= at) {
            *cursor += 1;
        }
        starts.get(*cursor).map_or(end, |&next| next.min(end))
    }
}

/// Finds the blocks of one stretch of text outside reasoning.
fn scan_segment(text: &str, start: usize, end: usize, opts: &MessageOptions, out: &mut Collector) {
    if opts.formats.contains(Format::Llama3) {
        if let Some(items) = special::llama_plain_json(text, start, end) {
            out.block(Format::Llama3, start, end, items);
            return;
        }
    }
    let mut candidates = Candidates::collect(text, start, end, opts);
    let all = std::mem::take(&mut candidates.all);
    let mut content_from = start;
    let mut in_prose_fence = false;
    for &(at, marker) in &all {
        if at < content_from {
            continue;
        }
        let format = marker.format();
        let window = candidates.next_of(format, at, end);
        let outcome = match marker {
            Marker::Hermes => hermes::parse(text, at, window, &candidates.hermes_closes),
            Marker::PythonTag => special::llama_python_tag(text, at, window),
            Marker::Mistral => special::mistral(text, at, window),
            Marker::DeepSeekCall => special::deepseek_call(text, at, window),
            Marker::DeepSeekEnvelope => special::deepseek_envelope(text, at, window),
            Marker::Pythonic => pythonic::parse(text, at, window),
            Marker::Fence => {
                // Fences alternate: an opening one that is not a call makes the next one
                // its closing fence.
                if in_prose_fence || window >= end {
                    in_prose_fence = false;
                    continue;
                }
                match opts.tools.as_ref() {
                    Some(tools) => fenced::parse(text, at, window, tools),
                    None => Outcome::NotABlock,
                }
            }
        };
        match outcome {
            Outcome::NotABlock => {
                if marker == Marker::Fence {
                    in_prose_fence = true;
                }
            }
            Outcome::Block {
                end: block_end,
                items,
            } => {
                out.content.push_str(&text[content_from..at]);
                out.block(format, at, block_end, items);
                content_from = block_end.max(at);
            }
        }
    }
    out.content.push_str(&text[content_from..end]);
}

/// Accumulates the result while the segments are scanned in order.
struct Collector<'a> {
    text: &'a str,
    tools: Option<&'a HashSet<String>>,
    content: String,
    calls: Vec<Call>,
    errors: Vec<BlockError>,
    counted_bytes: usize,
    counted_chars: usize,
    /// Past the listing limit: the first unlisted error (format and offset) and how many.
    unlisted: Option<(BlockError, usize)>,
}

impl Collector<'_> {
    /// Character offset of byte `at`; `at` never decreases between calls.
    fn char_offset(&mut self, at: usize) -> usize {
        if at > self.counted_bytes {
            self.counted_chars += self.text[self.counted_bytes..at].chars().count();
            self.counted_bytes = at;
        }
        self.counted_chars
    }

    fn block(&mut self, format: Format, start: usize, end: usize, items: Vec<Found>) {
        for item in items {
            match item {
                Ok((name, arguments)) => {
                    let unknown_tool = self.tools.is_some_and(|t| !t.contains(&name));
                    self.calls.push(Call {
                        name,
                        arguments,
                        unknown_tool,
                    });
                }
                Err(_) if self.errors.len() >= MAX_LISTED_ERRORS => match &mut self.unlisted {
                    Some((_, count)) => *count += 1,
                    None => {
                        let offset = self.char_offset(start);
                        let first = BlockError {
                            format,
                            reason: String::new(),
                            offset,
                            text: String::new(),
                        };
                        self.unlisted = Some((first, 1));
                    }
                },
                Err(reason) => {
                    let offset = self.char_offset(start);
                    let text = first_chars(&self.text[start..end.max(start)], ERROR_TEXT_CHARS);
                    self.errors.push(BlockError {
                        format,
                        reason,
                        offset,
                        text: text.to_owned(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::Value;

    fn parse(text: &str) -> ParsedMessage {
        parse_message(text, &MessageOptions::default())
    }

    fn names(msg: &ParsedMessage) -> Vec<&str> {
        msg.calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn hermes_block_keeps_a_closing_tag_inside_a_string() {
        let msg = parse(
            "Sure.\n<tool_call>{\"name\": \"echo\", \"arguments\": {\"s\": \"</tool_call>\"}}</tool_call>\nDone",
        );
        assert_eq!(names(&msg), vec!["echo"]);
        assert_eq!(
            msg.calls[0].arguments.get("s"),
            Some(&Value::Str("</tool_call>".into()))
        );
        assert_eq!(msg.content, "Sure.\n\nDone");
        assert!(msg.errors.is_empty());
    }

    #[test]
    fn truncated_block_is_an_error_and_good_blocks_survive() {
        let msg = parse(
            "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\", \"arguments\": {\"x\": \"cut",
        );
        assert_eq!(names(&msg), vec!["a"]);
        assert_eq!(msg.errors.len(), 1);
        assert_eq!(msg.errors[0].offset, 36);
        assert!(msg.errors[0].reason.starts_with("truncated JSON"));
    }

    #[test]
    fn prose_mentions_and_reasoning_are_not_calls() {
        let msg =
            parse("<think><tool_call>{\"name\": \"a\"}</tool_call></think>Use <tool_call> tags.");
        assert!(msg.calls.is_empty() && msg.errors.is_empty());
        assert_eq!(msg.content, "Use <tool_call> tags.");
        assert_eq!(
            msg.reasoning.as_deref(),
            Some("<tool_call>{\"name\": \"a\"}</tool_call>")
        );
    }

    #[test]
    fn unknown_tools_are_flagged_only_with_declared_tools() {
        let text =
            "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>";
        let opts = MessageOptions {
            tools: Some(HashSet::from(["a".to_owned()])),
            ..MessageOptions::default()
        };
        let flags: Vec<bool> = parse_message(text, &opts)
            .calls
            .iter()
            .map(|c| c.unknown_tool)
            .collect();
        assert_eq!(flags, vec![false, true]);
        assert!(parse(text).calls.iter().all(|c| !c.unknown_tool));
    }

    #[test]
    fn each_format_is_recognised() {
        for (text, want) in [
            ("<|python_tag|>{\"name\": \"f\", \"parameters\": {}}", "f"),
            ("{\"name\": \"f\", \"parameters\": {\"a\": 1}}", "f"),
            ("[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "f"),
            ("[TOOL_CALLS]f[ARGS]{}", "f"),
            (
                "<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
                "f",
            ),
            ("[f(a=1, b='x')]", "f"),
        ] {
            let msg = parse(text);
            assert_eq!(names(&msg), vec![want], "{text}");
            assert!(msg.errors.is_empty(), "{text}: {:?}", msg.errors);
        }
    }

    #[test]
    fn restricted_formats_ignore_the_others() {
        let opts = MessageOptions {
            formats: [Format::Mistral].into_iter().collect(),
            ..MessageOptions::default()
        };
        let msg = parse_message("<tool_call>{\"name\": \"a\"}</tool_call>", &opts);
        assert!(msg.calls.is_empty());
        assert_eq!(Format::from_name("deepseek"), Some(Format::DeepSeek));
        assert_eq!(Format::from_name("xml"), None);
    }

    #[test]
    fn error_listing_is_bounded() {
        let text = "<tool_call>{".repeat(1000);
        let msg = parse(&text);
        assert_eq!(msg.errors.len(), MAX_LISTED_ERRORS + 1);
        let last = &msg.errors[MAX_LISTED_ERRORS];
        assert!(last
            .reason
            .starts_with(&format!("{} more", 1000 - MAX_LISTED_ERRORS)));
        assert_eq!(last.offset, MAX_LISTED_ERRORS * "<tool_call>{".len());
    }

    #[test]
    fn megabyte_inputs_are_linear() {
        let mb = 1 << 20;
        let start = std::time::Instant::now();
        for piece in [
            "<tool_call>{\"a\": \"",
            "[TOOL_CALLS]",
            "[f(a=[\n",
            "<|python_tag|>{",
            "```json\n{\"name\": \"",
        ] {
            parse(&piece.repeat(mb / piece.len()));
        }
        // Quadratic behaviour would take minutes; linear takes milliseconds even unoptimised.
        assert!(start.elapsed().as_secs_f64() < 10.0);
    }
}
