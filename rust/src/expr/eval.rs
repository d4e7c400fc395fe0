//! Evaluation with CPython 3.11's float semantics.
//!
//! Each operation reproduces the corresponding CPython routine: `float_div`, the divmod
//! helper behind `float_floor_div`, `float_rem`, `float_pow`, and `math_1` (which turns a
//! NaN from a non-NaN argument into a domain error and an infinity from a finite argument
//! into an overflow or domain error). The libm functions are the platform's, as in CPython.
//! `+ - *` and `/` overflow to infinity silently, exactly like Python floats.

use super::parser::{Ast, BinOp, Node};
use super::{ErrorKind, EvalError};
use crate::numfmt::round_half_even;

/// Evaluate an AST. Children precede parents in the arena, so one forward pass suffices.
pub fn evaluate(ast: &Ast) -> Result<f64, EvalError> {
    let mut values = vec![0.0f64; ast.nodes.len()];
    for (i, node) in ast.nodes.iter().enumerate() {
        let at = |kind: ErrorKind, msg: &str| EvalError::at(kind, ast.offsets[i], msg);
        let operand = |k: usize| value_of(ast, &values, k);
        values[i] = match node {
            // Names are resolved where they are used: a callee is never looked up as a value.
            Node::Number(v) => *v,
            Node::Name(_) => continue,
            Node::Negate(x) => -operand(*x)?,
            Node::Plus(x) => operand(*x)?,
            Node::Binary(op, a, b) => {
                let (a, b) = (operand(*a)?, operand(*b)?);
                binary(*op, a, b).map_err(|(kind, msg)| at(kind, msg))?
            }
            Node::Call { name, args } => {
                let Some(function) = Function::from_name(name) else {
                    return Err(at(
                        ErrorKind::UnknownName,
                        &format!("unknown function '{name}'"),
                    ));
                };
                if args.len() > 3 {
                    return Err(at(ErrorKind::Arguments, "too many arguments"));
                }
                let mut argv = [0.0f64; 3];
                for (slot, &arg) in argv.iter_mut().zip(args) {
                    *slot = operand(arg)?;
                }
                call(function, &argv[..args.len()]).map_err(|(kind, msg)| at(kind, &msg))?
            }
        };
    }
    value_of(ast, &values, ast.root)
}

fn value_of(ast: &Ast, values: &[f64], i: usize) -> Result<f64, EvalError> {
    match &ast.nodes[i] {
        Node::Name(name) => match name.as_str() {
            "pi" => Ok(std::f64::consts::PI),
            "e" => Ok(std::f64::consts::E),
            _ => Err(EvalError::at(
                ErrorKind::UnknownName,
                ast.offsets[i],
                format!("unknown name '{name}'"),
            )),
        },
        _ => Ok(values[i]),
    }
}

type OpError = (ErrorKind, &'static str);

fn binary(op: BinOp, a: f64, b: f64) -> Result<f64, OpError> {
    match op {
        BinOp::Add => Ok(a + b),
        BinOp::Sub => Ok(a - b),
        BinOp::Mul => Ok(a * b),
        BinOp::Div => py_div(a, b),
        BinOp::FloorDiv => py_floordiv(a, b),
        BinOp::Mod => py_mod(a, b),
        BinOp::Pow => py_pow(a, b),
    }
}

const DIVISION_BY_ZERO: OpError = (ErrorKind::ZeroDivision, "division by zero");

/// Python's `a / b` on floats.
pub fn py_div(a: f64, b: f64) -> Result<f64, OpError> {
    if b == 0.0 {
        return Err(DIVISION_BY_ZERO);
    }
    Ok(a / b)
}

/// Python's `a // b` on floats: the quotient of CPython's divmod, snapped to an integer.
pub fn py_floordiv(a: f64, b: f64) -> Result<f64, OpError> {
    if b == 0.0 {
        return Err(DIVISION_BY_ZERO);
    }
    let rem = a % b;
    let mut quotient = (a - rem) / b;
    // A remainder with the sign opposite to the divisor means the quotient is one too big.
    if rem != 0.0 && ((b < 0.0) != (rem < 0.0)) {
        quotient -= 1.0;
    }
    if quotient != 0.0 {
        let floor = quotient.floor();
        Ok(if quotient - floor > 0.5 {
            floor + 1.0
        } else {
            floor
        })
    } else {
        // A zero quotient takes the sign of the true quotient.
        Ok(0.0f64.copysign(a / b))
    }
}

/// Python's `a % b` on floats: the result has the sign of the divisor.
pub fn py_mod(a: f64, b: f64) -> Result<f64, OpError> {
    if b == 0.0 {
        return Err((ErrorKind::ZeroDivision, "modulo by zero"));
    }
    let rem = a % b;
    if rem != 0.0 {
        Ok(if (b < 0.0) != (rem < 0.0) {
            rem + b
        } else {
            rem
        })
    } else {
        Ok(0.0f64.copysign(b))
    }
}

fn is_odd_integer(x: f64) -> bool {
    (x.abs() % 2.0) == 1.0
}

/// Python's `a ** b` on floats, including every special case of CPython's `float_pow`.
pub fn py_pow(base: f64, exponent: f64) -> Result<f64, OpError> {
    if exponent == 0.0 {
        return Ok(1.0);
    }
    if base.is_nan() {
        return Ok(base);
    }
    if exponent.is_nan() {
        return Ok(if base == 1.0 { 1.0 } else { exponent });
    }
    if exponent.is_infinite() {
        let magnitude = base.abs();
        return Ok(if magnitude == 1.0 {
            1.0
        } else if (exponent > 0.0) == (magnitude > 1.0) {
            f64::INFINITY
        } else {
            0.0
        });
    }
    if base.is_infinite() {
        let odd = is_odd_integer(exponent);
        return Ok(match (exponent > 0.0, odd) {
            (true, true) => base,
            (true, false) => base.abs(),
            (false, true) => 0.0f64.copysign(base),
            (false, false) => 0.0,
        });
    }
    if base == 0.0 {
        if exponent < 0.0 {
            return Err((
                ErrorKind::ZeroDivision,
                "zero cannot be raised to a negative power",
            ));
        }
        return Ok(if is_odd_integer(exponent) { base } else { 0.0 });
    }
    let mut magnitude = base;
    let mut negate = false;
    if base < 0.0 {
        if exponent != exponent.floor() {
            return Err((
                ErrorKind::Complex,
                "a negative number to a fractional power is complex",
            ));
        }
        magnitude = -base;
        negate = is_odd_integer(exponent);
    }
    if magnitude == 1.0 {
        return Ok(if negate { -1.0 } else { 1.0 });
    }
    let result = magnitude.powf(exponent);
    if result.is_infinite() {
        return Err((ErrorKind::Overflow, "power result too large"));
    }
    Ok(if negate { -result } else { result })
}

/// The callable math functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Function {
    Sqrt,
    Sin,
    Cos,
    Tan,
    Log,
    Exp,
    Abs,
    Round,
}

impl Function {
    fn from_name(name: &str) -> Option<Function> {
        Some(match name {
            "sqrt" => Function::Sqrt,
            "sin" => Function::Sin,
            "cos" => Function::Cos,
            "tan" => Function::Tan,
            "log" => Function::Log,
            "exp" => Function::Exp,
            "abs" => Function::Abs,
            "round" => Function::Round,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Function::Sqrt => "sqrt",
            Function::Sin => "sin",
            Function::Cos => "cos",
            Function::Tan => "tan",
            Function::Log => "log",
            Function::Exp => "exp",
            Function::Abs => "abs",
            Function::Round => "round",
        }
    }
}

/// CPython's `math_1`: a libm result is checked against its argument.
fn math_1(x: f64, f: fn(f64) -> f64, can_overflow: bool) -> Result<f64, OpError> {
    let r = f(x);
    if r.is_nan() && !x.is_nan() {
        return Err((ErrorKind::Domain, "math domain error"));
    }
    if r.is_infinite() && x.is_finite() {
        return Err(if can_overflow {
            (ErrorKind::Overflow, "math range error")
        } else {
            (ErrorKind::Domain, "math domain error")
        });
    }
    Ok(r)
}

/// CPython's `m_log`: log(0) is -inf and log(negative) NaN, which `math_1` turns into
/// domain errors; log(inf) is inf and log(nan) is nan.
fn m_log(x: f64) -> f64 {
    if x.is_finite() {
        if x > 0.0 {
            x.ln()
        } else if x == 0.0 {
            f64::NEG_INFINITY
        } else {
            f64::NAN
        }
    } else if x.is_nan() || x > 0.0 {
        x
    } else {
        f64::NAN
    }
}

fn call(function: Function, args: &[f64]) -> Result<f64, (ErrorKind, String)> {
    let plain = |r: Result<f64, OpError>| r.map_err(|(kind, msg)| (kind, msg.to_string()));
    match (function, args) {
        (Function::Sqrt, &[x]) => plain(math_1(x, f64::sqrt, false)),
        (Function::Sin, &[x]) => plain(math_1(x, f64::sin, false)),
        (Function::Cos, &[x]) => plain(math_1(x, f64::cos, false)),
        (Function::Tan, &[x]) => plain(math_1(x, f64::tan, false)),
        (Function::Exp, &[x]) => plain(math_1(x, f64::exp, true)),
        (Function::Abs, &[x]) => Ok(x.abs()),
        (Function::Log, &[x]) => plain(math_1(x, m_log, false)),
        (Function::Log, &[x, base]) => {
            let num = plain(math_1(x, m_log, false))?;
            let den = plain(math_1(base, m_log, false))?;
            plain(py_div(num, den))
        }
        (Function::Round, &[x]) => {
            if x.is_nan() {
                Err((ErrorKind::Domain, "cannot round NaN to an integer".into()))
            } else if x.is_infinite() {
                Err((
                    ErrorKind::Overflow,
                    "cannot round infinity to an integer".into(),
                ))
            } else {
                Ok(round_half_even(x))
            }
        }
        (Function::Round, &[_, _]) => Err((
            ErrorKind::Arguments,
            "round() with ndigits needs an integer, and every value here is a float".into(),
        )),
        _ => {
            let expected = match function {
                Function::Log => "1 or 2 arguments",
                _ => "exactly 1 argument",
            };
            Err((
                ErrorKind::Arguments,
                format!("{}() takes {expected}, got {}", function.name(), args.len()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::safe_eval;
    use super::*;

    fn ev(s: &str) -> Result<f64, ErrorKind> {
        safe_eval(s).map_err(|e| e.kind)
    }

    fn same(a: Result<f64, ErrorKind>, b: f64) -> bool {
        matches!(a, Ok(v) if v.to_bits() == b.to_bits() || (v.is_nan() && b.is_nan()))
    }

    #[test]
    fn floor_division_and_modulo_take_the_divisors_sign() {
        assert_eq!(ev("7//2"), Ok(3.0));
        assert_eq!(ev("-7//2"), Ok(-4.0));
        assert_eq!(ev("7//-2"), Ok(-4.0));
        assert_eq!(ev("7.5//2"), Ok(3.0));
        assert_eq!(ev("-7%3"), Ok(2.0));
        assert_eq!(ev("7%-3"), Ok(-2.0));
        assert_eq!(ev("5.5%2"), Ok(1.5));
        assert!(same(ev("-0.0%5"), 0.0));
        assert!(same(ev("0.0%-5"), -0.0));
        assert!(same(ev("1//-1e308"), -1.0));
        assert!(same(ev("0.0//-1"), -0.0));
        assert!(same(ev("-1//1e400"), -1.0));
        assert!(same(ev("1e400//1"), f64::NAN));
        assert!(same(ev("1%1e400"), 1.0));
        assert!(same(ev("-1%1e400"), f64::INFINITY));
    }

    #[test]
    fn division_by_zero_raises() {
        for s in [
            "1/0",
            "1//0",
            "1%0",
            "1/0.0",
            "0/-0.0",
            "0**-1",
            "0.0**-0.5",
            "log(8,1)",
        ] {
            assert_eq!(ev(s), Err(ErrorKind::ZeroDivision), "{s}");
        }
    }

    #[test]
    fn power_special_cases_follow_cpython() {
        assert_eq!(ev("2**-1"), Ok(0.5));
        assert_eq!(ev("(-8)**3"), Ok(-512.0));
        assert_eq!(ev("(-8)**(1/3)"), Err(ErrorKind::Complex));
        assert_eq!(ev("2**1024"), Err(ErrorKind::Overflow));
        assert_eq!(ev("9**9**9"), Err(ErrorKind::Overflow));
        assert_eq!(ev("(-2)**1025"), Err(ErrorKind::Overflow));
        assert_eq!(ev("0**0"), Ok(1.0));
        assert!(same(ev("(-0.0)**3"), -0.0));
        assert!(same(ev("(-0.0)**2"), 0.0));
        assert_eq!(ev("1e400**0"), Ok(1.0));
        assert_eq!(ev("(-1)**1e400"), Ok(1.0));
        assert_eq!(ev("0.5**1e400"), Ok(0.0));
        assert_eq!(ev("0.5**-1e400"), Ok(f64::INFINITY));
        assert!(same(ev("(-1e400)**3"), f64::NEG_INFINITY));
        assert!(same(ev("(-1e400)**-3"), -0.0));
        assert_eq!(ev("(-1e400)**0.5"), Ok(f64::INFINITY));
        assert!(same(ev("(1e400-1e400)**0"), 1.0));
        assert!(same(ev("1**(1e400-1e400)"), 1.0));
        assert!(same(ev("2**(1e400-1e400)"), f64::NAN));
        assert_eq!(ev("2**-1075"), Ok(0.0));
        assert_eq!(ev("(-1)**3"), Ok(-1.0));
    }

    #[test]
    fn overflow_outside_power_is_silent() {
        assert_eq!(ev("1e308*10"), Ok(f64::INFINITY));
        assert_eq!(ev("10.0**308*10"), Ok(f64::INFINITY));
        assert_eq!(ev("-1e400"), Ok(f64::NEG_INFINITY));
        assert!(same(ev("1e400-1e400"), f64::NAN));
        assert!(same(ev("1e400*0"), f64::NAN));
    }

    #[test]
    fn math_functions_raise_on_domain_and_range_errors() {
        assert_eq!(ev("sqrt(16)"), Ok(4.0));
        assert_eq!(ev("sqrt(-1)"), Err(ErrorKind::Domain));
        assert!(same(ev("sqrt(-0.0)"), -0.0));
        assert_eq!(ev("log(0)"), Err(ErrorKind::Domain));
        assert_eq!(ev("log(-1)"), Err(ErrorKind::Domain));
        assert_eq!(ev("log(-1e400)"), Err(ErrorKind::Domain));
        assert_eq!(ev("log(1e400)"), Ok(f64::INFINITY));
        assert_eq!(ev("log(8,2)"), Ok(3.0));
        assert_eq!(ev("log(8,1e400)"), Ok(0.0));
        assert_eq!(ev("exp(709)"), Ok(8.218407461554972e307));
        assert_eq!(ev("exp(710)"), Err(ErrorKind::Overflow));
        assert_eq!(ev("exp(1e400)"), Ok(f64::INFINITY));
        assert_eq!(ev("exp(-1e400)"), Ok(0.0));
        assert_eq!(ev("exp(-745)"), Ok(5e-324));
        assert_eq!(ev("sin(1e400)"), Err(ErrorKind::Domain));
        assert_eq!(ev("sin(1e300)"), Ok(-0.8178819121159085));
        assert_eq!(ev("tan(pi/2)"), Ok(1.633123935319537e16));
        assert!(same(ev("sin(1e400-1e400)"), f64::NAN));
        assert_eq!(ev("abs(-0)"), Ok(0.0));
    }

    #[test]
    fn round_is_bankers_rounding_to_an_integer() {
        assert_eq!(ev("round(2.5)"), Ok(2.0));
        assert_eq!(ev("round(3.5)"), Ok(4.0));
        assert!(same(ev("round(-0.5)"), 0.0));
        assert!(same(ev("round(-0.4)"), 0.0));
        assert_eq!(ev("round(1e300)"), Ok(1e300));
        assert_eq!(ev("round(1e400)"), Err(ErrorKind::Overflow));
        assert_eq!(ev("round(1e400-1e400)"), Err(ErrorKind::Domain));
        assert_eq!(ev("round(2.675,2)"), Err(ErrorKind::Arguments));
    }

    #[test]
    fn names_and_calls_are_checked() {
        assert_eq!(ev("pi"), Ok(std::f64::consts::PI));
        assert_eq!(ev("e**2"), Ok(7.3890560989306495));
        assert_eq!(ev("True+1"), Ok(2.0));
        assert_eq!(ev("False*3"), Ok(0.0));
        assert_eq!(ev("ｓｑｒｔ(４)"), Ok(2.0));
        assert_eq!(ev("(sqrt)(4)"), Ok(2.0));
        for s in [
            "x+1",
            "None",
            "sqrt",
            "pi(2)",
            "foo(1)",
            "e(1)",
            "Pi",
            "SQRT(4)",
            "𝐓𝐫𝐮𝐞",
        ] {
            assert_eq!(ev(s), Err(ErrorKind::UnknownName), "{s}");
        }
        for s in [
            "sqrt()",
            "abs(1,2)",
            "log(100,10,3)",
            "sqrt(1,2,3,4)",
            "round()",
        ] {
            assert_eq!(ev(s), Err(ErrorKind::Arguments), "{s}");
        }
    }
}
