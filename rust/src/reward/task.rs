//! The task a trajectory answers, as the reward reads it: its text (from chat messages or a
//! rendered prompt) and the arithmetic that text asks for.

use crate::expr;
use crate::pychar::strip as py_strip;
use crate::reward::answer::find_tag;
use crate::reward::pyvalue::py_str;
use crate::reward::record::ChatMessage;

/// Most expressions taken from a task (the limit for call counts and coverage).
const MAX_TASK_EXPRS: i64 = 16;

/// The task read from chat messages: the user turns joined by newlines, or
/// system and user turns when the user turns are blank. Contents that are not strings are
/// printed with Python's `str()`; entries that are not dicts are ignored.
pub fn task_text_from_messages(messages: &[ChatMessage]) -> String {
    let user = join_contents(messages, &["user"]);
    if !py_strip(&user).is_empty() {
        return user;
    }
    join_contents(messages, &["system", "user"])
}

fn join_contents(messages: &[ChatMessage], roles: &[&str]) -> String {
    let mut out = String::new();
    let mut first = true;
    for message in messages {
        if !message.role.as_deref().is_some_and(|r| roles.contains(&r)) {
            continue;
        }
        if !first {
            out.push('\n');
        }
        first = false;
        if let Some(content) = &message.content {
            out.push_str(&py_str(content));
        }
    }
    out
}

const TOOLS_OPEN: &str = "<|tools|>";
const TOOLS_CLOSE: &str = "<|/tools|>";
const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// The task read from a rendered chat prompt: tool lists removed, then the
/// user turns (or system and user turns) of the chat template, else the whole text.
pub fn task_text_from_prompt(prompt: &str) -> String {
    let raw = remove_tool_lists(prompt);
    let turns = chat_turns(&raw);
    if !turns.is_empty() {
        let pick = |roles: &[&str]| -> Vec<&str> {
            turns
                .iter()
                .filter(|(role, _)| roles.contains(role))
                .map(|(_, content)| py_strip(content))
                .filter(|content| !content.is_empty())
                .collect()
        };
        let user = pick(&["user"]);
        if !user.is_empty() {
            return user.join("\n");
        }
        let both = pick(&["system", "user"]);
        if !both.is_empty() {
            return both.join("\n");
        }
    }
    py_strip(&raw).to_string()
}

fn remove_tool_lists(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = find_tag(rest, TOOLS_OPEN) {
        let body = pos + TOOLS_OPEN.len();
        let Some(close) = find_tag(&rest[body..], TOOLS_CLOSE) else {
            break;
        };
        out.push_str(&rest[..pos]);
        rest = &rest[body + close + TOOLS_CLOSE.len()..];
    }
    out.push_str(rest);
    out
}

/// `(role, content)` of each `<|im_start|>ROLE\n...<|im_end|>` turn with a known role,
/// scanning like a lazy `re.findall` (each turn ends at the first `<|im_end|>`).
fn chat_turns(text: &str) -> Vec<(&str, &str)> {
    const ROLES: [&str; 4] = ["system", "user", "assistant", "tool"];
    let mut turns = Vec::new();
    let mut pos = 0;
    while let Some(offset) = find_tag(&text[pos..], IM_START) {
        let header = pos + offset + IM_START.len();
        let role = ROLES.iter().find(|role| {
            text[header..].starts_with(**role)
                && text.as_bytes().get(header + role.len()) == Some(&b'\n')
        });
        let Some(role) = role else {
            pos = pos + offset + 1;
            continue;
        };
        let body = header + role.len() + 1;
        let Some(end) = find_tag(&text[body..], IM_END) else {
            break;
        };
        turns.push((*role, &text[body..body + end]));
        pos = body + end + IM_END.len();
    }
    turns
}

/// The arithmetic a task asks for: what the tool calls are compared against.
#[derive(Debug, Clone, Default)]
pub struct TaskMath {
    /// The canonical forms of the expressions found in the task, in order (at most 16):
    /// what a tool call's expression must equal.
    pub canonical: Vec<String>,
    /// Their values, one per expression (extraction keeps only expressions that evaluate).
    values: Vec<f64>,
}

impl TaskMath {
    pub fn from_task(task: &str) -> Self {
        let found = expr::extract_arithmetic(task, MAX_TASK_EXPRS);
        TaskMath {
            values: found.iter().map(|e| e.value).collect(),
            canonical: found.into_iter().map(|e| e.canonical).collect(),
        }
    }

    /// A task is a math task when it contains at least one arithmetic expression.
    pub fn is_math(&self) -> bool {
        !self.canonical.is_empty()
    }

    /// How many expressions the task holds.
    pub fn expression_count(&self) -> usize {
        self.canonical.len()
    }

    /// The expressions' values, in the same order.
    pub fn values(&self) -> &[f64] {
        &self.values
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::{Object, Value};

    #[test]
    fn task_text_prefers_user_turns() {
        let msg = |role: &str, content: Value| {
            ChatMessage::from_value(Value::Object(Object::from_pairs(vec![
                ("role".to_string(), Value::Str(role.to_string())),
                ("content".to_string(), content),
            ])))
        };
        let messages = vec![
            msg("system", Value::Str("sys".into())),
            msg("user", Value::Str("12+3?".into())),
            ChatMessage::from_value(Value::Int(3)),
            msg("user", Value::Null),
        ];
        assert_eq!(task_text_from_messages(&messages), "12+3?\nNone");
        let blank = vec![
            msg("system", Value::Str("sys".into())),
            msg("user", Value::Str(" ".into())),
        ];
        assert_eq!(task_text_from_messages(&blank), "sys\n ");
        let prompt = "<|im_start|>system\nS<|im_end|><|tools|>[..]<|/tools|><|im_start|>user\n 7*6 <|im_end|>";
        assert_eq!(task_text_from_prompt(prompt), "7*6");
        assert_eq!(task_text_from_prompt("  plain 1+1 "), "plain 1+1");
        assert_eq!(
            task_text_from_prompt("<|im_start|>user\nno end"),
            "<|im_start|>user\nno end"
        );
    }

    #[test]
    fn every_extracted_expression_has_a_value() {
        let tasks = [
            "请计算884+645*18，然后(289+532)*11是多少",
            "2^10 and 3**2 and sqrt(16)+1 and log(8, 2)*1",
            "1/0+1 or 2025-3-7 or 7//0+1 or 1e308*10+1",
            "round(2.5)+round(3.5) then abs(-3)-1, (-8)**3+0",
            "１２３＋４ 和 ３×４",
        ];
        for task in tasks {
            let math = TaskMath::from_task(task);
            assert!(math.is_math(), "{task}");
            let exprs = expr::extract_expressions(task, MAX_TASK_EXPRS);
            assert_eq!(math.expression_count(), exprs.len(), "{task}");
            let values: Vec<f64> = exprs
                .iter()
                .filter_map(|e| expr::safe_eval(e).ok())
                .collect();
            let canonical: Vec<String> = exprs.iter().map(|e| expr::canonicalize(e)).collect();
            // Bit for bit: the values of 1e308*10 and friends are infinite, never NaN.
            assert_eq!(math.values(), values.as_slice(), "{task}");
            assert_eq!(math.canonical, canonical, "{task}");
        }
    }
}
