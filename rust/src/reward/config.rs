//! Every weight, penalty, cap and schedule of the reward, under its command-line names and
//! with its command-line defaults.
//!
//! The names are the `--flag` names of `agentrl train`, so a training command line or the
//! golden file's per-line `config` objects apply unchanged. `current_step` drives the two warm-up schedules
//! (answer-format penalty and reward caps); when it is unset the schedules sit at their final
//! values, which is what standalone scoring wants.

use std::fmt;

/// How hard a math task is punished for a missing `<answer>` tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatEnforceMode {
    /// Only the (scheduled) missing-format penalty.
    Soft,
    /// The penalty, and the reward is capped at `no_answer_tag_reward_cap`.
    SemiHard,
    /// As semi-hard; once the format schedule is complete the answer earns nothing and the
    /// reward is capped at zero.
    Hard,
}

impl FormatEnforceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FormatEnforceMode::Soft => "soft",
            FormatEnforceMode::SemiHard => "semi_hard",
            FormatEnforceMode::Hard => "hard",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "soft" => Some(FormatEnforceMode::Soft),
            "semi_hard" => Some(FormatEnforceMode::SemiHard),
            "hard" => Some(FormatEnforceMode::Hard),
            _ => None,
        }
    }
}

/// A configuration value as it arrives from a dict, a TOML file or a JSON line.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigValue {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl fmt::Display for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::None => write!(f, "None"),
            ConfigValue::Bool(b) => write!(f, "{}", if *b { "True" } else { "False" }),
            ConfigValue::Int(i) => write!(f, "{i}"),
            ConfigValue::Float(x) => write!(f, "{x:?}"),
            ConfigValue::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// The type of one configuration field, which decides what values it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A finite float (integers are accepted and converted).
    Float,
    /// An integer.
    Int,
    /// A 0/1 switch (`True`/`False` are accepted too).
    Flag,
    /// A [`FormatEnforceMode`] by name: `soft`, `semi_hard` or `hard`.
    Mode,
    /// A training step, or `None` for "schedules finished".
    Step,
}

impl FieldKind {
    fn expected(self) -> &'static str {
        match self {
            FieldKind::Float => "a finite number",
            FieldKind::Int => "an integer",
            FieldKind::Flag => "0 or 1",
            FieldKind::Mode => "one of \"soft\", \"semi_hard\", \"hard\"",
            FieldKind::Step => "an integer or None",
        }
    }
}

/// A configuration error: the field name is always part of the message.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    Unknown {
        name: String,
    },
    Invalid {
        name: String,
        expected: &'static str,
        got: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Unknown { name } => write!(
                f,
                "unknown reward setting {name:?}; valid settings are: {}",
                RewardConfig::field_names().join(", ")
            ),
            ConfigError::Invalid {
                name,
                expected,
                got,
            } => write!(f, "reward setting {name:?} must be {expected}, got {got}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Declares the config struct, its defaults and its by-name access from one table, so the
/// three cannot drift apart.
macro_rules! reward_config {
    ($( $(#[doc = $doc:literal])* $name:ident : $kind:ident = $default:expr ; )*) => {
        /// The reward's settings. Field names and defaults are the command line's.
        #[derive(Debug, Clone, PartialEq)]
        pub struct RewardConfig {
            $( $(#[doc = $doc])* pub $name: reward_config!(@type $kind), )*
        }

        impl Default for RewardConfig {
            fn default() -> Self {
                RewardConfig { $( $name: $default, )* }
            }
        }

        impl RewardConfig {
            const FIELDS: &'static [(&'static str, FieldKind)] =
                &[ $( (stringify!($name), FieldKind::$kind), )* ];

            /// Every field name, in declaration order.
            pub fn field_names() -> Vec<&'static str> {
                Self::FIELDS.iter().map(|(name, _)| *name).collect()
            }

            /// The kind of value a field takes, or `None` for an unknown name.
            pub fn field_kind(name: &str) -> Option<FieldKind> {
                Self::FIELDS.iter().find(|(n, _)| *n == name).map(|(_, kind)| *kind)
            }

            /// Every field with its current value, in declaration order.
            pub fn items(&self) -> Vec<(&'static str, ConfigValue)> {
                vec![ $( (stringify!($name), reward_config!(@get $kind, self.$name)), )* ]
            }

            /// Sets one field by its command-line name, checking the value's type and range.
            pub fn set(&mut self, name: &str, value: &ConfigValue) -> Result<(), ConfigError> {
                match name {
                    $( stringify!($name) => {
                        self.$name = reward_config!(@convert $kind, name, value)?;
                        Ok(())
                    } )*
                    _ => Err(ConfigError::Unknown { name: name.to_string() }),
                }
            }
        }
    };
    (@type Float) => { f64 };
    (@type Int) => { i64 };
    (@type Flag) => { bool };
    (@type Mode) => { FormatEnforceMode };
    (@type Step) => { Option<i64> };
    (@get Float, $v:expr) => { ConfigValue::Float($v) };
    (@get Int, $v:expr) => { ConfigValue::Int($v) };
    (@get Flag, $v:expr) => { ConfigValue::Int(i64::from($v)) };
    (@get Mode, $v:expr) => { ConfigValue::Str($v.as_str().to_string()) };
    (@get Step, $v:expr) => { $v.map_or(ConfigValue::None, ConfigValue::Int) };
    (@convert Float, $name:expr, $value:expr) => { to_float($name, $value) };
    (@convert Int, $name:expr, $value:expr) => { to_int($name, $value) };
    (@convert Flag, $name:expr, $value:expr) => { to_flag($name, $value) };
    (@convert Mode, $name:expr, $value:expr) => { to_mode($name, $value) };
    (@convert Step, $name:expr, $value:expr) => { to_step($name, $value) };
}

reward_config! {
    /// Training step for the format and reward-cap schedules; `None` = fully warmed up.
    current_step: Step = None;
    /// What a missing answer tag costs on math tasks (see [`FormatEnforceMode`]).
    format_enforce_mode: Mode = FormatEnforceMode::SemiHard;
    /// Steps over which the missing-format penalty grows from its initial to final value.
    format_warmup_steps: Int = 100;
    format_missing_penalty_initial: Float = 0.30;
    format_missing_penalty_final: Float = 1.50;
    /// Reward ceiling for a math answer without `<answer>` tags (semi-hard and hard modes).
    no_answer_tag_reward_cap: Float = 2.0;
    /// Numeric answers are covered in order (1) rather than as a set (0).
    strict_order_reward: Flag = true;
    /// Exact match for numeric answers needs the same numbers in the same order (1).
    strict_exact_reward: Flag = true;
    reward_base: Float = -0.10;
    reward_answer_cov_weight: Float = 9.0;
    reward_exact_match_weight: Float = 9.0;
    reward_answer_tag_weight: Float = 0.90;
    reward_exact_answer_tag_weight: Float = 0.80;
    reward_tool_success_weight: Float = 0.60;
    reward_final_refs_tool_weight: Float = 0.45;
    reward_tool_fail_penalty: Float = 0.55;
    reward_no_tool_penalty: Float = 1.50;
    reward_math_call_cov_weight: Float = 0.60;
    reward_tool_expr_order_weight: Float = 0.60;
    reward_tool_expr_set_weight: Float = 0.20;
    reward_tool_expr_exact_weight: Float = 0.20;
    reward_tool_value_order_weight: Float = 2.40;
    reward_tool_value_set_weight: Float = 0.80;
    reward_tool_value_exact_weight: Float = 0.80;
    reward_tool_over_call_penalty: Float = 0.25;
    reward_tool_under_call_penalty: Float = 0.35;
    reward_preferred_math_tool_weight: Float = 0.70;
    reward_correct_tool_choice_weight: Float = 0.70;
    reward_tool_count_exact_weight: Float = 0.30;
    reward_canonical_tool_weight: Float = 0.25;
    reward_wrong_tool_penalty: Float = 0.55;
    reward_alias_only_penalty: Float = 0.35;
    extra_number_penalty: Float = 0.55;
    missing_number_penalty: Float = 0.70;
    order_mismatch_penalty: Float = 1.20;
    /// Steps over which the two reward caps move from their initial to final values.
    reward_cap_warmup_steps: Int = 300;
    non_exact_reward_cap_initial: Float = 4.0;
    /// Ceiling for a reward whose answer is not an exact match.
    non_exact_reward_cap: Float = 3.5;
    zero_answer_cov_reward_cap_initial: Float = 0.5;
    /// Ceiling for a reward whose answer covers none of the ground truth.
    zero_answer_cov_reward_cap: Float = 0.0;
    /// Answers longer than this (in characters) lose the length bonus.
    max_reward_answer_len: Int = 96;
    /// Decay of the trainer's running reward baseline (advantage stage, not the score).
    reward_ema_decay: Float = 0.98;
    /// Divisor of baseline advantages (advantage stage, not the score).
    reward_scale: Float = 3.0;
    /// The `function_call` reward (`crate::funcall`): weight of `valid`, the checker's verdict.
    function_call_valid_weight: Float = 1.0;
    /// ... of `names`: the share of expected calls made to the right function.
    function_call_names_weight: Float = 0.2;
    /// ... of `arg_names`: the right argument names, over the matched calls.
    function_call_arg_names_weight: Float = 0.2;
    /// ... of `values`: the accepted argument values, over the matched calls.
    function_call_values_weight: Float = 0.4;
    /// ... of `format`: the share of call blocks that parsed and name an offered function.
    function_call_format_weight: Float = 0.2;
    /// Compare a dotted function name (`math.hypot`) in its underscore form
    /// (`math_hypot`), as the checker does for models whose API forbids dots in names.
    function_call_dots_to_underscores: Flag = false;
}

fn invalid(kind: FieldKind, name: &str, value: &ConfigValue) -> ConfigError {
    ConfigError::Invalid {
        name: name.to_string(),
        expected: kind.expected(),
        got: value.to_string(),
    }
}

fn to_float(name: &str, value: &ConfigValue) -> Result<f64, ConfigError> {
    match value {
        ConfigValue::Float(x) if x.is_finite() => Ok(*x),
        ConfigValue::Int(i) => Ok(*i as f64),
        _ => Err(invalid(FieldKind::Float, name, value)),
    }
}

fn to_int(name: &str, value: &ConfigValue) -> Result<i64, ConfigError> {
    match value {
        ConfigValue::Int(i) => Ok(*i),
        _ => Err(invalid(FieldKind::Int, name, value)),
    }
}

fn to_flag(name: &str, value: &ConfigValue) -> Result<bool, ConfigError> {
    match value {
        ConfigValue::Int(0) | ConfigValue::Bool(false) => Ok(false),
        ConfigValue::Int(1) | ConfigValue::Bool(true) => Ok(true),
        _ => Err(invalid(FieldKind::Flag, name, value)),
    }
}

fn to_mode(name: &str, value: &ConfigValue) -> Result<FormatEnforceMode, ConfigError> {
    match value {
        ConfigValue::Str(s) => {
            FormatEnforceMode::from_name(s).ok_or_else(|| invalid(FieldKind::Mode, name, value))
        }
        _ => Err(invalid(FieldKind::Mode, name, value)),
    }
}

fn to_step(name: &str, value: &ConfigValue) -> Result<Option<i64>, ConfigError> {
    match value {
        ConfigValue::Int(i) => Ok(Some(*i)),
        ConfigValue::None => Ok(None),
        _ => Err(invalid(FieldKind::Step, name, value)),
    }
}

impl RewardConfig {
    /// Applies `name = value` pairs in order; the first bad one is the error.
    pub fn with_overrides<'a, I>(&self, pairs: I) -> Result<RewardConfig, ConfigError>
    where
        I: IntoIterator<Item = (&'a str, &'a ConfigValue)>,
    {
        let mut config = self.clone();
        for (name, value) in pairs {
            config.set(name, value)?;
        }
        Ok(config)
    }

    /// The format schedule's progress in [0, 1]: how much of the missing-format penalty
    /// applies, and whether hard mode is fully on.
    pub fn format_strength(&self) -> f64 {
        let warmup = self.format_warmup_steps.max(0);
        if warmup <= 0 {
            return 1.0;
        }
        match self.current_step {
            None => 1.0,
            Some(step) => (step.max(0) as f64 / warmup as f64).min(1.0),
        }
    }

    /// The missing-format penalty at the current step.
    pub fn missing_format_penalty(&self, strength: f64) -> f64 {
        self.format_missing_penalty_initial
            + strength * (self.format_missing_penalty_final - self.format_missing_penalty_initial)
    }

    /// A reward cap moved from its initial to its final value by the cap schedule.
    fn scheduled_cap(&self, initial: f64, fin: f64) -> f64 {
        let warmup = self.reward_cap_warmup_steps.max(0);
        if warmup <= 0 {
            return fin;
        }
        let Some(step) = self.current_step else {
            return fin;
        };
        let strength = (step.max(0) as f64 / warmup as f64).min(1.0);
        initial + strength * (fin - initial)
    }

    /// Ceiling for rewards that are not an exact match, at the current step.
    pub fn non_exact_cap(&self) -> f64 {
        self.scheduled_cap(self.non_exact_reward_cap_initial, self.non_exact_reward_cap)
    }

    /// Ceiling for rewards whose answer covers nothing, at the current step.
    pub fn zero_cov_cap(&self) -> f64 {
        self.scheduled_cap(
            self.zero_answer_cov_reward_cap_initial,
            self.zero_answer_cov_reward_cap,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_command_line_defaults() {
        let c = RewardConfig::default();
        assert_eq!(c.reward_answer_cov_weight, 9.0);
        assert_eq!(c.reward_tool_expr_order_weight, 0.60);
        assert_eq!(c.format_enforce_mode, FormatEnforceMode::SemiHard);
        assert_eq!(c.current_step, None);
        assert_eq!(c.max_reward_answer_len, 96);
        assert!(c.strict_order_reward && c.strict_exact_reward);
        assert_eq!(RewardConfig::field_names().len(), c.items().len());
    }

    #[test]
    fn set_by_name_checks_types() {
        let mut c = RewardConfig::default();
        c.set("reward_base", &ConfigValue::Int(2)).unwrap();
        assert_eq!(c.reward_base, 2.0);
        c.set("format_enforce_mode", &ConfigValue::Str("hard".into()))
            .unwrap();
        assert_eq!(c.format_enforce_mode, FormatEnforceMode::Hard);
        c.set("strict_order_reward", &ConfigValue::Bool(false))
            .unwrap();
        assert!(!c.strict_order_reward);
        c.set("current_step", &ConfigValue::Int(7)).unwrap();
        assert_eq!(c.current_step, Some(7));
        c.set("current_step", &ConfigValue::None).unwrap();
        assert_eq!(c.current_step, None);

        let err = c
            .set("strict_order_reward", &ConfigValue::Int(2))
            .unwrap_err();
        assert!(err.to_string().contains("0 or 1"));
        let err = c
            .set("max_reward_answer_len", &ConfigValue::Float(9.5))
            .unwrap_err();
        assert!(err.to_string().contains("max_reward_answer_len"));
        let err = c
            .set("reward_base", &ConfigValue::Float(f64::NAN))
            .unwrap_err();
        assert!(err.to_string().contains("finite"));
        let err = c
            .set("format_enforce_mode", &ConfigValue::Str("x".into()))
            .unwrap_err();
        assert!(err.to_string().contains("semi_hard"));
    }

    #[test]
    fn unknown_name_lists_the_valid_ones() {
        let mut c = RewardConfig::default();
        let err = c.set("reward_bsae", &ConfigValue::Int(1)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("reward_bsae") && msg.contains("reward_base, "));
    }

    #[test]
    fn schedules_interpolate_and_finish_when_step_is_unset() {
        let mut c = RewardConfig::default();
        assert_eq!(c.format_strength(), 1.0);
        assert_eq!(c.non_exact_cap(), 3.5);
        c.current_step = Some(50);
        assert_eq!(c.format_strength(), 0.5);
        assert_eq!(c.missing_format_penalty(0.5), 0.30 + 0.5 * (1.50 - 0.30));
        assert_eq!(c.non_exact_cap(), 4.0 + (50.0 / 300.0) * (3.5 - 4.0));
        c.current_step = Some(-5);
        assert_eq!(c.format_strength(), 0.0);
        assert_eq!(c.zero_cov_cap(), 0.5);
        c.format_warmup_steps = 0;
        assert_eq!(c.format_strength(), 1.0);
    }
}
