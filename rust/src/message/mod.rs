//! A lenient, multi-format parser for the tool calls real models write.
//!
//! The strict [`crate::toolcall`] parser stays the reward's contract; this one is
//! what the rollout loop executes, so it must find every call the model meant and nothing
//! it did not mean:
//!
//! - formats (auto-detected, or a chosen subset): Hermes/Qwen `<tool_call>` JSON,
//!   Qwen3-Coder XML and GLM-4.5 `<arg_key>` calls (both also behind `<tool_call>`),
//!   bare fenced JSON naming a declared tool, Llama 3 JSON (`<|python_tag|>` and plain
//!   objects), Llama 4 `<|python_start|>`, Mistral `[TOOL_CALLS]`, DeepSeek V3/V3.1/R1
//!   call tokens and V3.2 DSML, Kimi-K2 sections, gpt-oss Harmony channels, Granite
//!   `<|tool_call|>`, InternLM `<|action_start|><|plugin|>`, Jamba `<tool_calls>`, xLAM
//!   JSON lists, Phi-4-mini `functools[...]` and the pythonic list `[f(a=1), g(b='x')]`;
//! - JSON is read by value boundaries, never cut by a regex, so closing tags and braces
//!   inside string arguments stay intact; single quotes, `True`/`False`/`None` and trailing
//!   commas are tolerated; truncated JSON is refused, never repaired; a non-finite number
//!   (`1e999`, `NaN`) in any argument refuses the call, since no JSON encoder accepts it;
//! - one bad block becomes one entry in `errors` and the good blocks still count; a block
//!   that opens like a known format but does not parse is an error, never silent prose;
//! - reasoning (`<think>`, Harmony's analysis channel) is set apart and nothing in it is a
//!   call; a tag mentioned in prose (not followed by a call) is left as text.
//!
//! Every marker is found with a forward search, and each block's JSON may not run past the
//! next block start of the same format, so the whole parse is linear in the text length,
//! whatever the text. The one consequence: a string argument cannot contain the opening
//! marker of a new block of its own format followed by JSON (`<tool_call>{` inside a Hermes
//! argument); such a block is reported as truncated rather than misread.

mod bare;
mod common;
mod fenced;
mod harmony;
mod hermes;
mod pythonic;
mod reasoning;
mod special;
mod tagged;
mod xml;

use std::collections::HashSet;

use crate::pychar::strip as py_strip;
use crate::pyjson::{Object, Value};
use crate::toolcall::first_chars;

use common::{Found, Outcome};
pub use xml::ParamTypes;

/// The call formats this parser knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `<tool_call>{...}</tool_call>` (Hermes, Qwen 2.5/3, MiniMind).
    Hermes,
    /// A Markdown code fence holding a call to a declared tool.
    Json,
    /// `<|python_tag|>{...}` or call objects `{"name": .., "parameters": ..}` starting a line.
    Llama3,
    /// `<|python_start|>[f(a=1)]<|python_end|>` (Llama 4).
    Llama4,
    /// `[TOOL_CALLS][...]`, `[TOOL_CALLS]name[ARGS]{...}` or `[TOOL_CALLS]name{...}`.
    Mistral,
    /// `<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>` (DeepSeek V3, V3.1, R1).
    DeepSeek,
    /// `<｜DSML｜function_calls>` (DeepSeek V3.2).
    DeepSeekV32,
    /// `[f(a=1), g(b='x')]`.
    Pythonic,
    /// `<tool_call><function=NAME><parameter=K>V</parameter></function></tool_call>`.
    Qwen3Coder,
    /// `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.
    Glm45,
    /// `<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0...`.
    KimiK2,
    /// gpt-oss: `<|channel|>commentary to=functions.NAME<|message|>{...}<|call|>`.
    Harmony,
    /// `<|tool_call|>[...]` (Granite 3).
    Granite,
    /// `<|action_start|><|plugin|>{...}<|action_end|>` (InternLM 2).
    InternLm,
    /// `<tool_calls>[...]</tool_calls>` (Jamba).
    Jamba,
    /// A JSON list of calls starting a line (xLAM).
    Xlam,
    /// `functools[...]` (Phi-4-mini).
    Phi4Mini,
}

impl Format {
    pub const ALL: [Format; 17] = [
        Format::Hermes,
        Format::Json,
        Format::Llama3,
        Format::Llama4,
        Format::Mistral,
        Format::DeepSeek,
        Format::DeepSeekV32,
        Format::Pythonic,
        Format::Qwen3Coder,
        Format::Glm45,
        Format::KimiK2,
        Format::Harmony,
        Format::Granite,
        Format::InternLm,
        Format::Jamba,
        Format::Xlam,
        Format::Phi4Mini,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Hermes => "hermes",
            Format::Json => "json",
            Format::Llama3 => "llama3",
            Format::Llama4 => "llama4",
            Format::Mistral => "mistral",
            Format::DeepSeek => "deepseek",
            Format::DeepSeekV32 => "deepseek_v32",
            Format::Pythonic => "pythonic",
            Format::Qwen3Coder => "qwen3_coder",
            Format::Glm45 => "glm45",
            Format::KimiK2 => "kimi_k2",
            Format::Harmony => "harmony",
            Format::Granite => "granite",
            Format::InternLm => "internlm",
            Format::Jamba => "jamba",
            Format::Xlam => "xlam",
            Format::Phi4Mini => "phi4_mini",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of formats to look for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FormatSet {
    bits: u32,
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
    /// Declared parameter types, for formats whose values are text (Qwen3-Coder, GLM).
    pub param_types: ParamTypes,
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
    /// The reasoning text, `None` when the message has none (no think tags, no analysis).
    pub reasoning: Option<String>,
    pub calls: Vec<Call>,
    /// One entry per refused block (or refused call inside a block), in order; past
    /// [`MAX_LISTED_ERRORS`], a last entry says how many more there were.
    pub errors: Vec<BlockError>,
    /// How many blocks (or calls inside a block) were refused, listed or not.
    pub refused: usize,
}

/// Splits a model message into content, reasoning, calls and refused blocks.
pub fn parse_message(text: &str, opts: &MessageOptions) -> ParsedMessage {
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
    let reasoning = if opts.formats.contains(Format::Harmony) && text.contains(harmony::CHANNEL) {
        harmony_message(text, &mut out)
    } else {
        let split = reasoning::split(text);
        for &(start, end) in &split.outside {
            scan_segment(text, start, end, opts, &mut out);
        }
        split.reasoning
    };
    let mut refused = out.errors.len();
    if let Some((first, count)) = out.unlisted.take() {
        refused += count;
        out.errors.push(BlockError {
            reason: format!("{count} more refused blocks are not listed"),
            text: String::new(),
            ..first
        });
    }
    ParsedMessage {
        content: py_strip(&out.content).to_owned(),
        reasoning,
        calls: out.calls,
        errors: out.errors,
        refused,
    }
}

/// A Harmony completion: its messages in order; returns the reasoning.
fn harmony_message(text: &str, out: &mut Collector) -> Option<String> {
    let mut reasoning: Vec<&str> = Vec::new();
    for piece in harmony::parse(text) {
        match piece {
            harmony::Piece::Content(start, end) => {
                let part = py_strip(&text[start..end]);
                if !part.is_empty() {
                    if !out.content.is_empty() {
                        out.content.push('\n');
                    }
                    out.content.push_str(part);
                }
            }
            harmony::Piece::Reasoning(start, end) => reasoning.push(py_strip(&text[start..end])),
            harmony::Piece::Call(start, end, found) => {
                out.block(Format::Harmony, start, end, vec![found]);
            }
        }
    }
    (!reasoning.is_empty()).then(|| {
        let parts: Vec<&str> = reasoning.into_iter().filter(|p| !p.is_empty()).collect();
        parts.join("\n\n")
    })
}

/// Where a block may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    /// `<tool_call>`: Hermes JSON, Qwen3-Coder XML or a GLM call, by what follows.
    ToolCall,
    /// A bare `<function=` (Qwen3-Coder without the wrapper).
    Function,
    PythonTag,
    PythonStart,
    Mistral,
    DeepSeekCall,
    DeepSeekEnvelope,
    Dsml,
    KimiCall,
    KimiEnvelope,
    Granite,
    InternLm,
    Jamba,
    Phi4,
    Fence,
    /// A pythonic list; `true` when it starts its line.
    Pythonic(bool),
    /// `{` starting a line: Llama 3 call objects.
    JsonObject,
    /// `{"name"` after other text on its line: Llama 3 call objects naming a declared tool,
    /// read without a window.
    JsonInline,
    /// `[{` starting a line: an xLAM list.
    JsonList,
}

impl Marker {
    /// The format of the blocks this marker starts (`<tool_call>` is decided by its body).
    fn format(self) -> Format {
        match self {
            Marker::ToolCall => Format::Hermes,
            Marker::Function => Format::Qwen3Coder,
            Marker::PythonTag | Marker::JsonObject | Marker::JsonInline => Format::Llama3,
            Marker::PythonStart => Format::Llama4,
            Marker::Mistral => Format::Mistral,
            Marker::DeepSeekCall | Marker::DeepSeekEnvelope => Format::DeepSeek,
            Marker::Dsml => Format::DeepSeekV32,
            Marker::KimiCall | Marker::KimiEnvelope => Format::KimiK2,
            Marker::Granite => Format::Granite,
            Marker::InternLm => Format::InternLm,
            Marker::Jamba => Format::Jamba,
            Marker::Phi4 => Format::Phi4Mini,
            Marker::Fence => Format::Json,
            Marker::Pythonic(_) => Format::Pythonic,
            Marker::JsonList => Format::Xlam,
        }
    }

    /// Which markers bound each other's blocks: a block cannot run past the next marker
    /// of its group.
    fn group(self) -> usize {
        match self {
            Marker::ToolCall => 0,
            Marker::Function => 1,
            Marker::PythonTag => 2,
            Marker::PythonStart => 3,
            Marker::Mistral => 4,
            Marker::DeepSeekCall | Marker::DeepSeekEnvelope => 5,
            Marker::Dsml => 6,
            Marker::KimiCall | Marker::KimiEnvelope => 7,
            Marker::Granite => 8,
            Marker::InternLm => 9,
            Marker::Jamba => 10,
            Marker::Phi4 => 11,
            Marker::Fence => 12,
            Marker::Pythonic(_) => 13,
            Marker::JsonObject => 14,
            Marker::JsonList => 15,
            Marker::JsonInline => 16,
        }
    }
}

const GROUPS: usize = 17;

/// The fixed tokens that start a block, with their marker and format.
const TOKENS: [(&str, Marker); 13] = [
    (special::PYTHON_TAG, Marker::PythonTag),
    (tagged::LLAMA4, Marker::PythonStart),
    (tagged::KIMI_CALL, Marker::KimiCall),
    (tagged::KIMI_ENVELOPE[0], Marker::KimiEnvelope),
    (tagged::KIMI_ENVELOPE[1], Marker::KimiEnvelope),
    (tagged::KIMI_ENVELOPE[2], Marker::KimiEnvelope),
    (tagged::KIMI_ENVELOPE[3], Marker::KimiEnvelope),
    (tagged::GRANITE, Marker::Granite),
    (tagged::INTERNLM, Marker::InternLm),
    (tagged::JAMBA, Marker::Jamba),
    (xml::FUNCTION, Marker::Function),
    (xml::DSML_CALLS[0], Marker::Dsml),
    (xml::DSML_CALLS[1], Marker::Dsml),
];

/// The candidate block starts of one segment, in order, and per marker group the sorted
/// offsets that bound each block (the next start of the same group), with a cursor that
/// only moves forward as the scan does.
struct Candidates {
    all: Vec<(usize, Marker)>,
    by_group: Vec<(Vec<usize>, usize)>,
    /// Offsets of `</tool_call>`.
    hermes_closes: Vec<usize>,
}

impl Candidates {
    /// One forward pass over the segment, looking at the bytes that can start a marker.
    fn collect(text: &str, start: usize, end: usize, opts: &MessageOptions) -> Self {
        let formats = opts.formats;
        let on = |f: Format| formats.contains(f);
        let tool_call_on = on(Format::Hermes) || on(Format::Qwen3Coder) || on(Format::Glm45);
        let fences_on = on(Format::Json) && opts.tools.is_some();
        let tools = opts.tools.as_ref();
        let bytes = text.as_bytes();
        let mut all: Vec<(usize, Marker)> = Vec::new();
        let mut hermes_closes = Vec::new();
        let mut at = start;
        let mut line_start = true;
        let mut in_fence = false;
        let first_visible = common::skip_ws(text, start, end);
        while at < end {
            let line_start_here = line_start || at == first_visible;
            if line_start_here {
                // Bare JSON starts a line (or the message, after whitespace), outside fences.
                let column0 = at == first_visible || line_start;
                if column0 && !in_fence {
                    match bytes[at] {
                        b'{' if on(Format::Llama3) => all.push((at, Marker::JsonObject)),
                        b'[' if on(Format::Xlam) && bare::list_start(text, at, end) => {
                            all.push((at, Marker::JsonList))
                        }
                        _ => {}
                    }
                }
            }
            if line_start && on(Format::Pythonic) {
                // A pythonic list starts a line, after spaces or tabs.
                let mut first = at;
                while first < end && matches!(bytes[first], b' ' | b'\t') {
                    first += 1;
                }
                if let Some(name) = pythonic::first_name(text, first, end) {
                    if tools.is_none_or(|t| t.contains(name)) {
                        all.push((first, Marker::Pythonic(true)));
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
                b' ' | b'\t' if on(Format::Pythonic) => {
                    // A pythonic list after words on its line (`Let me check. [f(a=1)]`).
                    let next = at + 1;
                    if next < end && bytes[next] == b'[' {
                        if let Some(name) = pythonic::first_name(text, next, end) {
                            if tools.is_none_or(|t| t.contains(name)) {
                                all.push((next, Marker::Pythonic(false)));
                            }
                        }
                    }
                    None
                }
                b'<' if tool_call_on && rest().starts_with(hermes::OPEN) => {
                    if hermes::starts_block(text, at, end)
                        || xml::body_kind(text, at, end) != xml::Body::Json
                    {
                        all.push((at, Marker::ToolCall));
                    }
                    Some(hermes::OPEN.len())
                }
                b'<' if tool_call_on && rest().starts_with(hermes::CLOSE) => {
                    hermes_closes.push(at);
                    Some(hermes::CLOSE.len())
                }
                b'<' if on(Format::DeepSeek)
                    && starts_any(rest(), &special::DEEPSEEK_CALL_BEGIN) =>
                {
                    all.push((at, Marker::DeepSeekCall));
                    Some(1)
                }
                b'<' if on(Format::DeepSeek) && starts_any(rest(), &special::DEEPSEEK_ENVELOPE) => {
                    all.push((at, Marker::DeepSeekEnvelope));
                    Some(1)
                }
                b'<' => {
                    let r = rest();
                    TOKENS
                        .iter()
                        .find(|(t, m)| on(m.format()) && r.starts_with(t))
                        .map(|&(t, m)| {
                            all.push((at, m));
                            t.len()
                        })
                }
                b'{' if on(Format::Llama3)
                    && tools.is_some()
                    && !line_start_here
                    && !in_fence
                    && bare::opens_with_name(text, at, end) =>
                {
                    all.push((at, Marker::JsonInline));
                    None
                }
                b'[' if on(Format::Mistral) && rest().starts_with(special::TOOL_CALLS) => {
                    all.push((at, Marker::Mistral));
                    Some(special::TOOL_CALLS.len())
                }
                b'f' if on(Format::Phi4Mini) && rest().starts_with(tagged::PHI4) => {
                    let word_start = at == start || !bytes[at - 1].is_ascii_alphanumeric();
                    if word_start {
                        all.push((at, Marker::Phi4));
                    }
                    Some(tagged::PHI4.len() - 1)
                }
                b'`' if rest().starts_with("```") => {
                    in_fence = !in_fence;
                    if fences_on {
                        all.push((at, Marker::Fence));
                    }
                    Some(3)
                }
                _ => None,
            };
            at += found.unwrap_or(1);
        }
        all.sort_by_key(|&(at, _)| at);
        let mut by_group: Vec<(Vec<usize>, usize)> = (0..GROUPS).map(|_| (Vec::new(), 0)).collect();
        for &(at, marker) in &all {
            by_group[marker.group()].0.push(at);
        }
        Candidates {
            all,
            by_group,
            hermes_closes,
        }
    }

    /// The next start of `marker`'s group after `at`, or `end`; `at` must not decrease
    /// between calls for the same group.
    fn next_of(&mut self, marker: Marker, at: usize, end: usize) -> usize {
        let (starts, cursor) = &mut self.by_group[marker.group()];
        while starts.get(*cursor).is_some_and(|&s| s <= at) {
            *cursor += 1;
        }
        starts.get(*cursor).map_or(end, |&next| next.min(end))
    }
}

fn starts_any(text: &str, tokens: &[&str]) -> bool {
    tokens.iter().any(|t| text.starts_with(t))
}

/// Finds the blocks of one stretch of text outside reasoning.
fn scan_segment(text: &str, start: usize, end: usize, opts: &MessageOptions, out: &mut Collector) {
    let mut candidates = Candidates::collect(text, start, end, opts);
    let all = std::mem::take(&mut candidates.all);
    let mut content_from = start;
    let mut in_prose_fence = false;
    let types = &opts.param_types;
    // Inline JSON is read without a window; past a failed try, the JSON reader has
    // already looked at the text up to here.
    let mut inline_tried_to = start;
    for &(at, marker) in &all {
        if at < content_from || (marker == Marker::JsonInline && at < inline_tried_to) {
            continue;
        }
        let mut format = marker.format();
        let window = candidates.next_of(marker, at, end);
        let outcome = match marker {
            Marker::ToolCall => {
                format = match xml::body_kind(text, at, window) {
                    xml::Body::Json => Format::Hermes,
                    xml::Body::Coder => Format::Qwen3Coder,
                    xml::Body::Glm => Format::Glm45,
                };
                if !opts.formats.contains(format) {
                    continue;
                }
                match format {
                    Format::Qwen3Coder => xml::coder(text, at, window, true, types),
                    Format::Glm45 => xml::glm(text, at, window, types),
                    _ => hermes::parse(text, at, window, &candidates.hermes_closes),
                }
            }
            Marker::Function => xml::coder(text, at, window, false, types),
            Marker::PythonTag => special::llama_python_tag(text, at, window),
            Marker::PythonStart => tagged::llama4(text, at, window),
            Marker::Mistral => special::mistral(text, at, window),
            Marker::DeepSeekCall => special::deepseek_call(text, at, window),
            Marker::DeepSeekEnvelope => special::deepseek_envelope(text, at, window),
            Marker::Dsml => xml::dsml(text, at, window),
            Marker::KimiCall => tagged::kimi_call(text, at, window),
            Marker::KimiEnvelope => tagged::kimi_envelope(text, at, window),
            Marker::Granite => tagged::granite(text, at, window),
            Marker::InternLm => tagged::internlm(text, at, window),
            Marker::Jamba => tagged::jamba(text, at, window),
            Marker::Phi4 => tagged::phi4(text, at, window),
            Marker::Pythonic(line_start) => {
                pythonic::parse(text, at, window, line_start, opts.tools.is_some())
            }
            Marker::JsonObject => bare::llama_objects(text, at, window),
            Marker::JsonList => bare::xlam_list(text, at, window, opts.tools.as_ref()),
            Marker::JsonInline => {
                let (outcome, tried_to) = bare::llama_inline(text, at, end, opts.tools.as_ref());
                inline_tried_to = tried_to;
                outcome
            }
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

/// Where in `args` a non-finite float sits (`a.b[2]`), if anywhere.
fn nonfinite_at(args: &Object) -> Option<String> {
    fn walk(value: &Value, path: &mut String) -> bool {
        match value {
            Value::Float(f) => !f.is_finite(),
            Value::Array(items) => items.iter().enumerate().any(|(i, v)| {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = walk(v, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            Value::Object(obj) => obj.iter().any(|(k, v)| {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                let found = walk(v, path);
                if !found {
                    path.truncate(len);
                }
                found
            }),
            _ => false,
        }
    }
    let mut path = String::new();
    args.iter()
        .any(|(k, v)| {
            path.clear();
            path.push_str(k);
            walk(v, &mut path)
        })
        .then_some(path)
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
            let item = item.and_then(|(name, arguments)| match nonfinite_at(&arguments) {
                Some(path) => Err(format!(
                    "{name}: argument {path} is not a finite number (NaN and infinities are \
                     not JSON)"
                )),
                None => Ok((name, arguments)),
            });
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
    fn each_new_family_is_recognised() {
        for (text, format) in [
            (
                "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
                Format::Qwen3Coder,
            ),
            (
                "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\n</tool_call>",
                Format::Glm45,
            ),
            (
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
                Format::KimiK2,
            ),
            (
                "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" string=\"false\">1</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜function_calls>",
                Format::DeepSeekV32,
            ),
            (
                "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1}<|call|>",
                Format::Harmony,
            ),
            ("<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", Format::Granite),
            (
                "<|action_start|><|plugin|>{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|action_end|>",
                Format::InternLm,
            ),
            ("<tool_calls>[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]</tool_calls>", Format::Jamba),
            ("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", Format::Xlam),
            ("functools[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]", Format::Phi4Mini),
            ("<|python_start|>[f(a=1)]<|python_end|>", Format::Llama4),
        ] {
            let msg = parse(text);
            assert_eq!(names(&msg), vec!["f"], "{text}: {:?}", msg.errors);
            assert_eq!(msg.calls[0].arguments.get("a"), Some(&Value::Int(1)), "{text}");
            assert!(msg.errors.is_empty() && msg.content.is_empty(), "{text}");
            let only = MessageOptions {
                formats: [format].into_iter().collect(),
                ..MessageOptions::default()
            };
            assert_eq!(parse_message(text, &only).calls.len(), 1, "{text}");
        }
    }

    #[test]
    fn non_finite_numbers_are_refused_in_every_format() {
        for text in [
            "[calc(x=1e999)]",
            "<tool_call>{\"name\": \"calc\", \"arguments\": {\"x\": NaN}}</tool_call>",
            "[TOOL_CALLS]calc[ARGS]{\"x\": [1, -Infinity]}",
            "<|python_tag|>{\"name\": \"calc\", \"parameters\": {\"x\": {\"y\": 1e400}}}",
            "<|channel|>commentary to=functions.calc<|message|>{\"x\": 1e999}<|call|>",
            "<tool_call>\n<function=calc>\n<parameter=x>\n[1e999]\n</parameter>\n</function>\n</tool_call>",
        ] {
            let msg = parse(text);
            assert!(msg.calls.is_empty(), "{text}");
            assert_eq!(msg.errors.len(), 1, "{text}");
            assert!(msg.errors[0].reason.contains("not a finite number"), "{text}");
        }
    }

    #[test]
    fn mistral_word_after_the_token_is_not_a_tool_name() {
        let msg = parse("[TOOL_CALLS] not json");
        assert!(msg.calls.is_empty());
        assert_eq!(msg.errors.len(), 1);
        assert!(!msg.errors[0].reason.contains("\"not\""));
        let msg = parse("[TOOL_CALLS]get_time{\"tz\": \"UTC\"}");
        assert_eq!(names(&msg), vec!["get_time"]);
    }

    #[test]
    fn broken_blocks_of_new_families_are_errors() {
        for (text, format) in [
            (
                "<tool_call>\n<function=f>\n<parameter=a>\n1",
                Format::Qwen3Coder,
            ),
            (
                "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1",
                Format::Glm45,
            ),
            (
                "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{\"a\": ",
                Format::KimiK2,
            ),
            (
                "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\">",
                Format::DeepSeekV32,
            ),
            (
                "<|channel|>commentary to=functions.f<|message|>{\"a\": <|call|>",
                Format::Harmony,
            ),
            ("<|tool_call|>[{\"name\": \"f\"", Format::Granite),
            (
                "<|action_start|><|interpreter|>print(1)<|action_end|>",
                Format::InternLm,
            ),
            ("<tool_calls>[{\"name\": \"f\"", Format::Jamba),
            ("[{\"name\": \"f\", \"arguments\": {", Format::Xlam),
            ("functools[{\"name\": ", Format::Phi4Mini),
            ("<|python_start|>[f(1)]<|python_end|>", Format::Llama4),
            ("{\"name\": \"f\", \"parameters\": {\"a\": ", Format::Llama3),
        ] {
            let msg = parse(text);
            assert!(msg.calls.is_empty(), "{text}");
            assert_eq!(msg.errors.len(), 1, "{text}");
            assert_eq!(msg.errors[0].format, format, "{text}");
        }
    }

    #[test]
    fn prose_mentions_of_new_markers_stay_text() {
        for text in [
            "GLM puts calls between <tool_call> and </tool_call>.",
            "Write <function=...> blocks.",
            "Use the <tool_calls> tag.",
            "functools.partial is handy.",
            "A list [1, 2] or [{\"x\": 1}] is data.",
        ] {
            let msg = parse(text);
            assert!(msg.calls.is_empty() && msg.errors.is_empty(), "{text}");
            assert_eq!(msg.content, text);
        }
    }

    #[test]
    fn multibyte_text_after_any_marker_never_panics() {
        let markers = [
            "<tool_call>",
            "<function=",
            "<function=f>",
            "<parameter=a>",
            "<tool_call>f",
            "<arg_key>",
            "<arg_value>",
            "<|python_tag|>",
            "<|python_start|>",
            "[TOOL_CALLS]",
            "[TOOL_CALLS]f",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁calls▁begin｜>",
            "<｜DSML｜function_calls>",
            "<｜DSML｜invoke",
            "<｜DSML｜parameter name=\"a\"",
            "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>",
            "<|tool_calls_section_begin|>",
            "<|channel|>",
            "<|start|>",
            "<|message|>",
            "<|tool_call|>",
            "<|action_start|>",
            "<|plugin|>",
            "<tool_calls>",
            "functools[",
            "```json\n",
            "[",
            "{",
            "[{",
            " [",
            "{\"name\"",
            "[{\"name\"",
            " {\"name\": ",
        ];
        for marker in markers {
            for tail in ["é", "é{", "é[", "[é", "{é", "é>", " é", "\né", "éé<"] {
                let text = format!("{marker}{tail}{marker}é");
                let _ = parse(&text);
                let tools = MessageOptions {
                    tools: Some(HashSet::from(["f".to_owned()])),
                    ..MessageOptions::default()
                };
                let _ = parse_message(&text, &tools);
            }
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
        assert_eq!(msg.refused, 1000);
        let last = &msg.errors[MAX_LISTED_ERRORS];
        assert!(last
            .reason
            .starts_with(&format!("{} more", 1000 - MAX_LISTED_ERRORS)));
        assert_eq!(last.offset, MAX_LISTED_ERRORS * "<tool_call>{".len());
    }

    #[test]
    fn inputs_are_parsed_in_linear_time() {
        for piece in [
            "<tool_call>{\"a\": \"",
            "[TOOL_CALLS]",
            "[f(a=[\n",
            "<|python_tag|>{",
            "```json\n{\"name\": \"",
            "<tool_call>\n<function=f>\n<parameter=a>\n",
            "<tool_call>f<arg_key>a</arg_key><arg_value>",
            "<|tool_call_begin|>x<|tool_call_argument_begin|>{",
            "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\">",
            "<|channel|>commentary to=functions.f<|message|>{",
            "<|tool_call|>[{",
            "x {\"name\": {\"name\": ",
            "[{\"name\": \"f\", \"arguments\": {\n",
            "functools[",
            "<|python_start|>[f(a=",
        ] {
            // From 256 KiB to 2 MiB of the piece repeated.
            crate::linear::assert_linear(piece, (1 << 18) / piece.len(), |n| {
                parse(&piece.repeat(n));
            });
        }
    }
}
