//! Splitting `<think>...</think>` reasoning from the rest of a message.
//!
//! Reasoning models write their thoughts between `<think>` and `</think>`. Chat templates
//! that open the think block in the prompt (Qwen3) leave only the closing tag in the output,
//! so a `</think>` before any `<think>` closes reasoning that started with the message. A
//! `<think>` that is never closed runs to the end (the model was cut off while thinking).
//! Nothing inside reasoning is a tool call.

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Byte ranges of the text outside reasoning, in order, and the reasoning itself.
pub(super) struct Split {
    pub(super) outside: Vec<(usize, usize)>,
    /// The reasoning parts, each stripped of surrounding whitespace, joined by a blank
    /// line; `None` when the message has no think tags.
    pub(super) reasoning: Option<String>,
}

pub(super) fn split(text: &str) -> Split {
    let mut outside = Vec::new();
    let mut parts: Vec<&str> = Vec::new();
    let mut at = 0;
    let first_open = text.find(OPEN);
    if let Some(close) = text.find(CLOSE) {
        if first_open.is_none_or(|open| close < open) {
            parts.push(&text[..close]);
            at = close + CLOSE.len();
        }
    }
    loop {
        let Some(found) = text[at..].find(OPEN) else {
            outside.push((at, text.len()));
            break;
        };
        let open = at + found;
        outside.push((at, open));
        let inner = open + OPEN.len();
        match text[inner..].find(CLOSE) {
            Some(len) => {
                parts.push(&text[inner..inner + len]);
                at = inner + len + CLOSE.len();
            }
            None => {
                parts.push(&text[inner..]);
                break;
            }
        }
    }
    let reasoning = (!parts.is_empty()).then(|| {
        parts
            .iter()
            .map(|p| crate::pychar::strip(p))
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    });
    Split { outside, reasoning }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> (Vec<&str>, Option<String>) {
        let s = split(text);
        (
            s.outside.iter().map(|&(a, b)| &text[a..b]).collect(),
            s.reasoning,
        )
    }

    #[test]
    fn think_block_then_answer() {
        assert_eq!(
            pieces("<think> plan </think>answer"),
            (vec!["", "answer"], Some("plan".to_owned()))
        );
    }

    #[test]
    fn closing_tag_only_means_reasoning_started_in_the_prompt() {
        assert_eq!(
            pieces("plan\n</think>\n\nanswer"),
            (vec!["\n\nanswer"], Some("plan".to_owned()))
        );
    }

    #[test]
    fn unclosed_think_runs_to_the_end() {
        assert_eq!(
            pieces("a<think>still thinking <tool_call>"),
            (vec!["a"], Some("still thinking <tool_call>".to_owned()))
        );
    }

    #[test]
    fn no_tags_no_reasoning() {
        assert_eq!(pieces("plain"), (vec!["plain"], None));
        assert_eq!(
            pieces("<think>\n\n</think>x"),
            (vec!["", "x"], Some(String::new()))
        );
    }
}
