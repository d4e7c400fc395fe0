//! Parser for the allowed subset of Python's expression grammar, into a flat AST arena.
//!
//! The grammar, with Python's precedence (`**` binds tighter than a unary sign on its left
//! and looser than one on its right, and is right-associative):
//!
//! ```text
//! expr    := term (('+' | '-') term)*
//! term    := factor (('*' | '/' | '//' | '%') factor)*
//! factor  := ('+' | '-')* primary ('**' factor)?
//! primary := NUMBER | NAME | NAME-call | '(' expr ')' | '(' expr ')' call
//! call    := '(' [expr (',' expr)* [',']] ')'        -- only on a (parenthesised) name
//! ```
//!
//! Sums, terms and chains of signs and powers are parsed with loops; only parentheses
//! recurse, and at most [`MAX_NESTING`] of them may be open at once (CPython's own limit),
//! so input cannot drive the recursion deeper than that. Children are always pushed before
//! their parent, which lets the evaluator walk the arena in one forward pass.

use super::lexer::{Spanned, Token};
use super::{ErrorKind, EvalError};

/// CPython's tokenizer refuses more than 200 open brackets at once.
pub const MAX_NESTING: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Number(f64),
    /// A name used as a value or as the callee of a call.
    Name(String),
    Negate(usize),
    Plus(usize),
    Binary(BinOp, usize, usize),
    /// A call of a named function; `name` is the callee's folded spelling.
    Call {
        name: String,
        args: Vec<usize>,
    },
}

/// A parsed expression: nodes in creation order (children first) and the root's index.
/// `offsets[i]` is the character offset that node `i` is reported at.
#[derive(Debug, Clone, PartialEq)]
pub struct Ast {
    pub nodes: Vec<Node>,
    pub offsets: Vec<usize>,
    pub root: usize,
}

/// Parse a token stream; `end_offset` is reported for errors at the end of input.
pub fn parse(tokens: &[Spanned], end_offset: usize) -> Result<Ast, EvalError> {
    let mut parser = Parser {
        tokens,
        pos: 0,
        end_offset,
        nodes: Vec::with_capacity(tokens.len()),
        offsets: Vec::with_capacity(tokens.len()),
        signs: Vec::new(),
        segments: Vec::new(),
        open_parens: 0,
    };
    if tokens.is_empty() {
        return Err(EvalError::at(
            ErrorKind::Syntax,
            end_offset,
            "empty expression",
        ));
    }
    let root = parser.expr()?;
    if let Some(tok) = parser.tokens.get(parser.pos) {
        let message = if tok.token == Token::Comma {
            "tuples are not numbers"
        } else {
            "unexpected token after a complete expression"
        };
        return Err(EvalError::at(ErrorKind::Syntax, tok.offset, message));
    }
    Ok(Ast {
        nodes: parser.nodes,
        offsets: parser.offsets,
        root,
    })
}

struct Parser<'a> {
    tokens: &'a [Spanned],
    pos: usize,
    end_offset: usize,
    nodes: Vec<Node>,
    offsets: Vec<usize>,
    /// Pending unary signs (`true` = minus) of the factors being parsed, as a stack.
    signs: Vec<(bool, usize)>,
    /// The `signs primary **` segments of the factors being parsed, as a stack: first sign,
    /// end of the signs, the primary and the offset of the `**` after it.
    segments: Vec<(usize, usize, usize, usize)>,
    open_parens: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|t| &t.token)
    }

    fn offset(&self) -> usize {
        self.tokens
            .get(self.pos)
            .map_or(self.end_offset, |t| t.offset)
    }

    fn push(&mut self, node: Node, offset: usize) -> usize {
        self.nodes.push(node);
        self.offsets.push(offset);
        self.nodes.len() - 1
    }

    fn error(&self, message: &str) -> EvalError {
        let message = if self.pos >= self.tokens.len() {
            format!("{message}, found the end of the expression")
        } else {
            message.to_string()
        };
        EvalError::at(ErrorKind::Syntax, self.offset(), message)
    }

    fn expr(&mut self) -> Result<usize, EvalError> {
        let mut left = self.term()?;
        loop {
            let op = match self.peek() {
                Some(Token::Plus) => BinOp::Add,
                Some(Token::Minus) => BinOp::Sub,
                _ => return Ok(left),
            };
            let offset = self.offset();
            self.pos += 1;
            let right = self.term()?;
            left = self.push(Node::Binary(op, left, right), offset);
        }
    }

    fn term(&mut self) -> Result<usize, EvalError> {
        let mut left = self.factor()?;
        loop {
            let op = match self.peek() {
                Some(Token::Star) => BinOp::Mul,
                Some(Token::Slash) => BinOp::Div,
                Some(Token::DoubleSlash) => BinOp::FloorDiv,
                Some(Token::Percent) => BinOp::Mod,
                _ => return Ok(left),
            };
            let offset = self.offset();
            self.pos += 1;
            let right = self.factor()?;
            left = self.push(Node::Binary(op, left, right), offset);
        }
    }

    /// `s1 p1 ** s2 p2 ** ... sn pn` (each `s` a run of signs) means
    /// `s1(p1 ** s2(p2 ** ... sn(pn)))`: read the segments left to right, fold from the right.
    fn factor(&mut self) -> Result<usize, EvalError> {
        let signs_base = self.signs.len();
        let segments_base = self.segments.len();
        loop {
            let first_sign = self.signs.len();
            while let Some(tok) = self.tokens.get(self.pos) {
                match tok.token {
                    Token::Minus => self.signs.push((true, tok.offset)),
                    Token::Plus => self.signs.push((false, tok.offset)),
                    _ => break,
                }
                self.pos += 1;
            }
            let end_sign = self.signs.len();
            let primary = self.primary()?;
            if self.peek() == Some(&Token::DoubleStar) {
                let offset = self.offset();
                self.pos += 1;
                self.segments.push((first_sign, end_sign, primary, offset));
            } else {
                self.segments
                    .push((first_sign, end_sign, primary, self.end_offset));
                break;
            }
        }
        let mut acc: Option<usize> = None;
        for k in (segments_base..self.segments.len()).rev() {
            let (first_sign, end_sign, primary, pow_offset) = self.segments[k];
            let mut node = match acc {
                None => primary,
                Some(exponent) => {
                    self.push(Node::Binary(BinOp::Pow, primary, exponent), pow_offset)
                }
            };
            for k in (first_sign..end_sign).rev() {
                let (minus, offset) = self.signs[k];
                let unary = if minus {
                    Node::Negate(node)
                } else {
                    Node::Plus(node)
                };
                node = self.push(unary, offset);
            }
            acc = Some(node);
        }
        self.segments.truncate(segments_base);
        self.signs.truncate(signs_base);
        acc.ok_or_else(|| self.error("expected an operand"))
    }

    fn primary(&mut self) -> Result<usize, EvalError> {
        let Some(tok) = self.tokens.get(self.pos) else {
            return Err(self.error("expected a number, a name or '('"));
        };
        let offset = tok.offset;
        let node = match &tok.token {
            Token::Number(v) => {
                self.pos += 1;
                self.push(Node::Number(*v), offset)
            }
            Token::Name(name) => {
                self.pos += 1;
                self.push(Node::Name(name.clone()), offset)
            }
            Token::LParen => {
                self.open_paren()?;
                if self.peek() == Some(&Token::RParen) {
                    return Err(self.error("empty parentheses are a tuple, not a number"));
                }
                let inner = self.expr()?;
                match self.peek() {
                    Some(Token::RParen) => self.pos += 1,
                    Some(Token::Comma) => return Err(self.error("tuples are not numbers")),
                    _ => return Err(self.error("expected ')'")),
                }
                self.open_parens -= 1;
                inner
            }
            _ => return Err(self.error("expected a number, a name or '('")),
        };
        if self.peek() != Some(&Token::LParen) {
            return Ok(node);
        }
        // Only a name can be called; parentheses around it do not matter, as in Python. The
        // name moves to the call: nothing reads the callee's node again.
        let Node::Name(name) = &mut self.nodes[node] else {
            return Err(EvalError::at(
                ErrorKind::UnknownName,
                self.offset(),
                "only a named function can be called",
            ));
        };
        let name = std::mem::take(name);
        let call_offset = self.offsets[node];
        let call = self.call(name, call_offset)?;
        if self.peek() == Some(&Token::LParen) {
            return Err(EvalError::at(
                ErrorKind::UnknownName,
                self.offset(),
                "the result of a call cannot be called",
            ));
        }
        Ok(call)
    }

    fn open_paren(&mut self) -> Result<(), EvalError> {
        if self.open_parens >= MAX_NESTING {
            return Err(self.error("too many nested parentheses"));
        }
        self.open_parens += 1;
        self.pos += 1;
        Ok(())
    }

    fn call(&mut self, name: String, offset: usize) -> Result<usize, EvalError> {
        self.open_paren()?;
        let mut args = Vec::new();
        loop {
            if self.peek() == Some(&Token::RParen) {
                self.pos += 1;
                break;
            }
            args.push(self.expr()?);
            match self.peek() {
                Some(Token::Comma) => self.pos += 1,
                Some(Token::RParen) => {
                    self.pos += 1;
                    break;
                }
                _ => return Err(self.error("expected ',' or ')' in the argument list")),
            }
        }
        self.open_parens -= 1;
        Ok(self.push(Node::Call { name, args }, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::super::lexer::tokenize;
    use super::*;

    fn show(ast: &Ast, i: usize) -> String {
        match &ast.nodes[i] {
            Node::Number(v) => format!("{v}"),
            Node::Name(n) => n.clone(),
            Node::Negate(x) => format!("-{}", show(ast, *x)),
            Node::Plus(x) => format!("+{}", show(ast, *x)),
            Node::Binary(op, a, b) => {
                let sym = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::FloorDiv => "//",
                    BinOp::Mod => "%",
                    BinOp::Pow => "**",
                };
                format!("({} {sym} {})", show(ast, *a), show(ast, *b))
            }
            Node::Call { name, args } => {
                let args: Vec<String> = args.iter().map(|&a| show(ast, a)).collect();
                format!("{name}[{}]", args.join(", "))
            }
        }
    }

    fn tree(s: &str) -> Result<String, ErrorKind> {
        let chars: Vec<char> = s.chars().collect();
        let tokens = tokenize(&chars).map_err(|e| e.kind)?;
        let ast = parse(&tokens, chars.len()).map_err(|e| e.kind)?;
        Ok(show(&ast, ast.root))
    }

    #[test]
    fn precedence_and_associativity_follow_python() {
        assert_eq!(tree("1+2*3"), Ok("(1 + (2 * 3))".into()));
        assert_eq!(tree("1-2-3"), Ok("((1 - 2) - 3)".into()));
        assert_eq!(tree("2**3**2"), Ok("(2 ** (3 ** 2))".into()));
        assert_eq!(tree("-2**2"), Ok("-(2 ** 2)".into()));
        assert_eq!(tree("2**-1"), Ok("(2 ** -1)".into()));
        assert_eq!(tree("2**-2**2"), Ok("(2 ** -(2 ** 2))".into()));
        assert_eq!(tree("--3"), Ok("--3".into()));
        assert_eq!(tree("+-3"), Ok("+-3".into()));
        assert_eq!(tree("2*-3"), Ok("(2 * -3)".into()));
        assert_eq!(tree("-2**-3**4*5"), Ok("(-(2 ** -(3 ** 4)) * 5)".into()));
        assert_eq!(tree("10//3%4/5"), Ok("(((10 // 3) % 4) / 5)".into()));
    }

    #[test]
    fn parentheses_group_without_nodes() {
        assert_eq!(tree("((1+2))*3"), Ok("((1 + 2) * 3)".into()));
        assert_eq!(tree("(sqrt)(4)"), Ok("sqrt[4]".into()));
        assert_eq!(tree("((sqrt))(4)"), Ok("sqrt[4]".into()));
        let deep = format!("{}1{}", "(".repeat(127), ")".repeat(127));
        assert_eq!(tree(&deep), Ok("1".into()));
    }

    #[test]
    fn calls_take_positional_arguments_and_a_trailing_comma() {
        assert_eq!(tree("log(8,2)"), Ok("log[8, 2]".into()));
        assert_eq!(tree("sqrt(4,)"), Ok("sqrt[4]".into()));
        assert_eq!(tree("sqrt()"), Ok("sqrt[]".into()));
        assert_eq!(tree("abs(-sqrt(4))**2"), Ok("(abs[-sqrt[4]] ** 2)".into()));
    }

    #[test]
    fn non_expressions_are_rejected() {
        for bad in [
            "",
            "(",
            "()",
            "(1,)",
            "1,2",
            "(1,2)",
            "1+",
            "*1",
            "sqrt(,)",
            "sqrt(4,,)",
        ] {
            assert_eq!(tree(bad), Err(ErrorKind::Syntax), "{bad:?}");
        }
        for bad in [
            "(1+2", "1+2)", "sqrt(4", "sqrt(*4)", "1 2", "2**", "2***3", "(1)2",
        ] {
            assert_eq!(tree(bad), Err(ErrorKind::Syntax), "{bad:?}");
        }
        for bad in ["2(3)", "(1)(2)", "sqrt(4)(2)", "(+sqrt)(4)", "(1+sqrt)(4)"] {
            assert_eq!(tree(bad), Err(ErrorKind::UnknownName), "{bad:?}");
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let ok = format!("{}1{}", "(".repeat(200), ")".repeat(200));
        assert_eq!(tree(&ok), Ok("1".into()));
        let too_deep = format!("{}1{}", "(".repeat(201), ")".repeat(201));
        assert_eq!(tree(&too_deep), Err(ErrorKind::Syntax));
        let calls = format!("{}1{}", "abs(".repeat(201), ")".repeat(201));
        assert_eq!(tree(&calls), Err(ErrorKind::Syntax));
    }
}
