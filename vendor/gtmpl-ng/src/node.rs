use std::fmt::{Display, Formatter};

use crate::error::NodeError;
use crate::go_number::{read_hexadecimal_float, separators_are_allowed, HexadecimalFloat};
use crate::lexer::ItemType;
use crate::utils::unquote_char;

use gtmpl_value_ng::Value;

macro_rules! nodes {
    ($($node:ident, $name:ident),*) => {
        #[derive(Debug)]
        #[derive(Clone)]
        #[derive(PartialEq)]
        pub enum NodeType {
           $($name,)*
        }

        #[derive(Clone)]
        #[derive(Debug)]
        // `Nodes::Command` is generated but never travels: a `CommandNode` lives
        // inside a `PipeNode`'s command list, not in the tree. The pair stays so the
        // kinds keep mirroring Go's node taxonomy one to one.
        #[allow(dead_code)]
        pub enum Nodes {
            $($name($node),)*
        }

        impl Display for Nodes {
            fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
                match *self {
                    $(Nodes::$name(ref t) => t.fmt(f),)*
                }
            }
        }

        impl Nodes {
            pub fn typ(&self) -> &NodeType {
                match *self {
                    $(Nodes::$name(ref t) => t.typ(),)*
                }
            }
            pub fn pos(&self) -> Pos {
                match *self {
                    $(Nodes::$name(ref t) => t.pos(),)*
                }
            }
            pub fn line(&self) -> usize {
                match *self {
                    $(Nodes::$name(ref t) => t.line(),)*
                }
            }
            pub fn col(&self) -> usize {
                match *self {
                    $(Nodes::$name(ref t) => t.col(),)*
                }
            }
            pub fn len(&self) -> usize {
                match *self {
                    $(Nodes::$name(ref t) => t.len(),)*
                }
            }
        }
    }
}

nodes!(
    ListNode,
    List,
    TextNode,
    Text,
    PipeNode,
    Pipe,
    ActionNode,
    Action,
    CommandNode,
    Command,
    IdentifierNode,
    Identifier,
    VariableNode,
    Variable,
    DotNode,
    Dot,
    NilNode,
    Nil,
    FieldNode,
    Field,
    ChainNode,
    Chain,
    BoolNode,
    Bool,
    NumberNode,
    Number,
    StringNode,
    String,
    EndNode,
    End,
    ElseNode,
    Else,
    IfNode,
    If,
    WithNode,
    With,
    RangeNode,
    Range,
    TemplateNode,
    Template,
    BreakNode,
    Break,
    ContinueNode,
    Continue
);

pub type Pos = usize;

/// Where a node sits in its template source.
///
/// A node starts at its first token but ends with its last child, so the span is
/// assembled while parsing and handed to the constructor once it is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeSpan {
    pub tree: TreeId,
    pub pos: Pos,
    pub line: usize,
    pub col: usize,
    pub len: usize,
}

impl NodeSpan {
    /// A span from an explicit position and length.
    ///
    /// Usually that is one lexer token, but it is also how an already-known span is
    /// repackaged -- a control's span taken from its pipeline, say, which covers as
    /// many tokens as the pipeline does.
    pub fn at(tree: TreeId, pos: Pos, line: usize, col: usize, len: usize) -> NodeSpan {
        NodeSpan {
            tree,
            pos,
            line,
            col,
            len,
        }
    }
}

pub type TreeId = usize;

pub trait Node: Display {
    fn typ(&self) -> &NodeType;
    fn pos(&self) -> Pos;
    fn line(&self) -> usize;
    fn col(&self) -> usize;
    fn len(&self) -> usize;
}

macro_rules! node {
    ($name:ident {
        $($(#[$field_meta:meta])* $field:ident : $typ:ty),* $(,)*
    }) => {
        #[derive(Clone)]
        #[derive(Debug)]
        pub struct $name {
            typ: NodeType,
            pos: Pos,
            line: usize,
            col: usize,
            len: usize,
            $($(#[$field_meta])* pub $field: $typ,)*
        }
        impl Node for $name {
            fn typ(&self) -> &NodeType {
                &self.typ
            }
            fn pos(&self) -> Pos {
                self.pos
            }
            fn line(&self) -> usize {
                self.line
            }
            fn col(&self) -> usize {
                self.col
            }
            fn len(&self) -> usize {
                self.len
            }
        }
    }
}

impl Nodes {
    /// The offset just past this node's source text.
    ///
    /// For most nodes that is `pos() + len()`. A branch is the exception: its length
    /// is only its pipeline's span, while its text runs through its `{{end}}`.
    pub(crate) fn extent(&self) -> Pos {
        match *self {
            Nodes::If(ref n) | Nodes::Range(ref n) | Nodes::With(ref n) => n.body_end,
            _ => self.pos() + self.len(),
        }
    }

    pub fn is_empty_tree(&self) -> Result<bool, NodeError> {
        match *self {
            Nodes::List(ref n) => n.is_empty_tree(),
            Nodes::Text(ref n) => Ok(n.text.is_empty()),
            Nodes::Action(_)
            | Nodes::If(_)
            | Nodes::Range(_)
            | Nodes::Template(_)
            | Nodes::With(_) => Ok(false),
            _ => Err(NodeError::NaTN),
        }
    }
}

node!(
    ListNode {
        nodes: Vec<Nodes>
    }
);

impl ListNode {
    pub fn append(&mut self, n: Nodes) {
        self.nodes.push(n);
    }
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> ListNode {
        ListNode {
            typ: NodeType::List,
            pos,
            line,
            col,
            len,
            nodes: vec![],
        }
    }
    pub fn is_empty_tree(&self) -> Result<bool, NodeError> {
        for n in &self.nodes {
            match n.is_empty_tree() {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(s) => return Err(s),
            }
        }
        Ok(true)
    }
}

impl Display for ListNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        for n in &self.nodes {
            n.fmt(f)?;
        }
        Ok(())
    }
}

node!(TextNode { text: String });

impl TextNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, text: String) -> TextNode {
        TextNode {
            typ: NodeType::Text,
            pos,
            line,
            col,
            len,
            text,
        }
    }
}

impl Display for TextNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.text)
    }
}

node!(
    PipeNode {
        decl: Vec<VariableNode>,
        is_assign: bool,
        cmds: Vec<CommandNode>
    }
);

impl PipeNode {
    /// Moves the node onto a wider span, for a term whose written form extends past
    /// the node itself: the parentheses of a parenthesised pipeline belong to the term
    /// but not to the pipeline inside them, and a chain built on that term has to
    /// measure from the opening one.
    pub fn reanchor(mut self, span: NodeSpan) -> Self {
        self.pos = span.pos;
        self.line = span.line;
        self.col = span.col;
        self.len = span.len;
        self
    }

    pub fn new(pos: Pos, line: usize, col: usize, len: usize, decl: Vec<VariableNode>) -> PipeNode {
        PipeNode {
            typ: NodeType::Pipe,
            pos,
            line,
            col,
            len,
            decl,
            is_assign: false,
            cmds: vec![],
        }
    }

    pub fn append(&mut self, cmd: CommandNode) {
        self.cmds.push(cmd);
    }
}

impl Display for PipeNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        let decl = if self.decl.is_empty() {
            Ok(())
        } else {
            write!(
                f,
                "{} {} ",
                self.decl
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<String>>()
                    .join(", "),
                if self.is_assign { "=" } else { ":=" }
            )
        };
        decl.and_then(|_| {
            write!(
                f,
                "{}",
                self.cmds
                    .iter()
                    .map(|cmd| cmd.to_string())
                    .collect::<Vec<String>>()
                    .join(" | ")
            )
        })
    }
}

node!(ActionNode { pipe: PipeNode });

impl ActionNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, pipe: PipeNode) -> ActionNode {
        ActionNode {
            typ: NodeType::Action,
            pos,
            line,
            col,
            len,
            pipe,
        }
    }
}

impl Display for ActionNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{{{{{}}}}}", self.pipe)
    }
}

node!(
    CommandNode {
        args: Vec<Nodes>
    }
);

impl CommandNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> CommandNode {
        CommandNode {
            typ: NodeType::Command,
            pos,
            line,
            col,
            len,
            args: vec![],
        }
    }

    pub fn append(&mut self, node: Nodes) {
        self.args.push(node);
    }
}

impl Display for CommandNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        let s = self
            .args
            .iter()
            .map(|n|
                // Handle PipeNode.
                n.to_string())
            .collect::<Vec<String>>()
            .join(" ");
        write!(f, "{}", s)
    }
}

node!(IdentifierNode { ident: String });

impl IdentifierNode {
    /// An identifier at a known location.
    pub fn at(span: NodeSpan, ident: String) -> IdentifierNode {
        IdentifierNode {
            typ: NodeType::Identifier,
            pos: span.pos,
            line: span.line,
            col: span.col,
            len: span.len,
            ident,
        }
    }
}

impl Display for IdentifierNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.ident)
    }
}

node!(
    VariableNode {
        ident: Vec<String>
    }
);

impl VariableNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, ident: &str) -> VariableNode {
        VariableNode {
            typ: NodeType::Variable,
            pos,
            line,
            col,
            len,
            ident: ident.split('.').map(|s| s.to_owned()).collect(),
        }
    }
}

impl Display for VariableNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.ident.join("."))
    }
}

node!(DotNode {});

impl DotNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> DotNode {
        DotNode {
            typ: NodeType::Dot,
            pos,
            line,
            col,
            len,
        }
    }
}

impl Display for DotNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, ".")
    }
}

// `{{break}}`, which ends the innermost enclosing `{{range}}`. It carries no data and
// exists so the executor can tell the construct apart from an action; the parser has
// already refused one that no `{{range}}` encloses.
node!(BreakNode {});

impl BreakNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> BreakNode {
        BreakNode {
            typ: NodeType::Break,
            pos,
            line,
            col,
            len,
        }
    }
}

impl Display for BreakNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{{{{break}}}}")
    }
}

// `{{continue}}`, which ends this iteration of the innermost `{{range}}`.
node!(ContinueNode {});

impl ContinueNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> ContinueNode {
        ContinueNode {
            typ: NodeType::Continue,
            pos,
            line,
            col,
            len,
        }
    }
}

impl Display for ContinueNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{{{{continue}}}}")
    }
}

node!(NilNode {});

impl Display for NilNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "nil")
    }
}

impl NilNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> NilNode {
        NilNode {
            typ: NodeType::Nil,
            pos,
            line,
            col,
            len,
        }
    }
}

node!(
    FieldNode {
        ident: Vec<String>
    }
);

impl FieldNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, ident: &str) -> FieldNode {
        FieldNode {
            typ: NodeType::Field,
            pos,
            line,
            col,
            len,
            ident: ident[..]
                .split('.')
                .filter_map(|s| {
                    if s.is_empty() {
                        None
                    } else {
                        Some(s.to_owned())
                    }
                })
                .collect(),
        }
    }
}

impl Display for FieldNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.ident.join("."))
    }
}

node!(
    ChainNode {
        node: Box<Nodes>,
        field: Vec<String>
    }
);

impl ChainNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, node: Nodes) -> ChainNode {
        ChainNode {
            typ: NodeType::Chain,
            pos,
            line,
            col,
            len,
            node: Box::new(node),
            field: vec![],
        }
    }

    pub fn add(&mut self, val: &str) {
        let val = val.trim_start_matches('.').to_owned();
        self.field.push(val);
    }
}

impl Display for ChainNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        // Handle PipeNode.
        write!(f, "{}", self.node)?;
        for field in &self.field {
            write!(f, ".{}", field)?;
        }
        Ok(())
    }
}

node!(BoolNode { value: Value });

impl BoolNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize, val: bool) -> BoolNode {
        BoolNode {
            typ: NodeType::Bool,
            pos,
            line,
            col,
            len,
            value: Value::from(val),
        }
    }
}

impl Display for BoolNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.value)
    }
}

node!(NumberNode {
    text: String,
    value: Value,
});

/// A numeric literal, classified the way Go's `strconv.ParseInt(text, 0, 64)` does.
enum IntegerLiteral {
    /// A legal integer literal, split into the parts `from_str_radix` needs.
    Legal {
        negative: bool,
        digits: String,
        radix: u32,
    },
    /// Not an integer literal at all, so the floating point syntax should be tried.
    NotInteger,
    /// Shaped like an integer literal but not a legal one.
    Malformed,
}

/// Removes Go's `_` separators from a run of digits.
///
/// Go requires every separator to sit between two digits, with one extra allowed
/// directly after a base prefix, so `1_000` and `0x_ff` are legal while `_1`, `1_`
/// and `1__0` are not.
fn strip_digit_separators(digits: &str, after_base_prefix: bool) -> Option<String> {
    if digits.contains("__") || digits.ends_with('_') {
        return None;
    }
    if digits.starts_with('_') && !after_base_prefix {
        return None;
    }
    let stripped: String = digits.chars().filter(|c| *c != '_').collect();
    if stripped.is_empty() {
        None
    } else {
        Some(stripped)
    }
}

/// Removes `_` separators from a decimal or floating point literal, rejecting any
/// that Go would not accept.
///
/// The integer path above can get away with simpler rules because its text is all
/// digits once the base prefix is off; a float also contains `.`, `e` and a sign, so
/// Go's own rule is applied instead. Go accepts `1_0.5` but not `1._5`, `1.5_` or
/// `1e_3`.
fn strip_float_separators(text: &str) -> Option<String> {
    if !separators_are_allowed(text) {
        return None;
    }
    Some(text.chars().filter(|c| *c != '_').collect())
}

/// Classifies `text` as a Go integer literal.
///
/// Rust's `from_str_radix` takes neither a base prefix nor `_` separators, so the
/// prefix is resolved and the separators are checked and removed here. A bare leading
/// zero means octal for an integer but not for a float, which is why `0.5` and `0e1`
/// come back as `NotInteger` while `017` is octal and `08` is malformed.
fn classify_integer_literal(text: &str) -> IntegerLiteral {
    let (negative, body) = match text.chars().next() {
        Some('-') => (true, &text[1..]),
        Some('+') => (false, &text[1..]),
        _ => (false, text),
    };
    if body.is_empty() {
        return IntegerLiteral::Malformed;
    }

    let prefixed = body
        .strip_prefix('0')
        .and_then(|rest| match rest.chars().next() {
            Some('x') | Some('X') => Some((16, &rest[1..])),
            Some('o') | Some('O') => Some((8, &rest[1..])),
            Some('b') | Some('B') => Some((2, &rest[1..])),
            _ => None,
        });

    if let Some((radix, digits)) = prefixed {
        return match strip_digit_separators(digits, true) {
            Some(digits) if digits.chars().all(|c| c.is_digit(radix)) => IntegerLiteral::Legal {
                negative,
                digits,
                radix,
            },
            _ => IntegerLiteral::Malformed,
        };
    }

    // A fraction or an exponent makes this a float, whatever the leading digit is.
    if body.contains(['.', 'e', 'E']) {
        return IntegerLiteral::NotInteger;
    }

    let digits = match strip_digit_separators(body, false) {
        Some(digits) => digits,
        None => return IntegerLiteral::Malformed,
    };

    if let Some(octal) = digits.strip_prefix('0') {
        if !octal.is_empty() {
            return if octal.chars().all(|c| c.is_digit(8)) {
                IntegerLiteral::Legal {
                    negative,
                    digits: octal.to_owned(),
                    radix: 8,
                }
            } else {
                IntegerLiteral::Malformed
            };
        }
    }

    if digits.chars().all(|c| c.is_ascii_digit()) {
        IntegerLiteral::Legal {
            negative,
            digits,
            radix: 10,
        }
    } else {
        IntegerLiteral::Malformed
    }
}

impl NumberNode {
    pub fn new(
        pos: Pos,
        line: usize,
        col: usize,
        len: usize,
        text: String,
        item_typ: &ItemType,
    ) -> Result<NumberNode, NodeError> {
        match *item_typ {
            ItemType::ItemCharConstant => unquote_char(&text, '\'')
                .map(|c| NumberNode {
                    typ: NodeType::Number,
                    pos,
                    line,
                    col,
                    len,
                    text,
                    value: Value::from(c as u64),
                })
                .ok_or(NodeError::UnquoteError),
            _ => {
                // Mirrors Go's `newNumber`: read it as an integer first so a base
                // prefix is honoured, and fall back to the float syntax only when no
                // integer reading applies.
                let mut as_i64 = 0i64;
                let mut as_u64 = 0u64;
                let mut is_i64 = false;
                let mut is_u64 = false;

                // A hexadecimal float is neither integer nor decimal-float syntax,
                // so it is read before either is attempted.
                match read_hexadecimal_float(&text) {
                    HexadecimalFloat::Value(as_f64) => {
                        return Ok(NumberNode {
                            typ: NodeType::Number,
                            pos,
                            line,
                            col,
                            len,
                            text,
                            // gpu-labeler: a float constant stays a float, as Go's
                            // idealConstant makes it (upstream collapsed integral ones).
                            value: Value::Number(gtmpl_value_ng::Number::float(as_f64)),
                        })
                    }
                    HexadecimalFloat::Illegal => return Err(NodeError::IllegalNumberSyntax(text)),
                    HexadecimalFloat::NotHexadecimal => {}
                }

                match classify_integer_literal(&text) {
                    IntegerLiteral::Malformed => return Err(NodeError::IllegalNumberSyntax(text)),
                    IntegerLiteral::Legal {
                        negative,
                        digits,
                        radix,
                    } => {
                        if !negative {
                            if let Ok(parsed) = u64::from_str_radix(&digits, radix) {
                                as_u64 = parsed;
                                is_u64 = true;
                            }
                        }
                        let signed = if negative {
                            format!("-{}", digits)
                        } else {
                            digits
                        };
                        if let Ok(parsed) = i64::from_str_radix(&signed, radix) {
                            as_i64 = parsed;
                            is_i64 = true;
                            if parsed == 0 {
                                // In case of -0.
                                as_u64 = 0;
                                is_u64 = true;
                            }
                        }
                        if !is_i64 && !is_u64 {
                            // Too large for either, which Go reports as an overflow.
                            // gpu-labeler: in Go's words.
                            return Err(NodeError::IntegerOverflow(text));
                        }
                    }
                    IntegerLiteral::NotInteger => {}
                }

                // A float reading only applies when no integer reading did.
                let as_f64 = if is_i64 || is_u64 {
                    if is_i64 {
                        as_i64 as f64
                    } else {
                        as_u64 as f64
                    }
                } else {
                    let stripped = match strip_float_separators(&text) {
                        Some(stripped) => stripped,
                        None => return Err(NodeError::IllegalNumberSyntax(text)),
                    };
                    match stripped.parse::<f64>() {
                        Ok(parsed) => parsed,
                        Err(_) => return Err(NodeError::IllegalNumberSyntax(text)),
                    }
                };

                let value = if is_u64 {
                    Value::from(as_u64)
                } else if is_i64 {
                    Value::from(as_i64)
                } else {
                    // gpu-labeler: Go's idealConstant makes `1e6` and `1.0` float64 (`1e6`
                    // prints `1e+06`, `eq 1 1.0` is a type error); upstream collapsed an
                    // integral float to an integer.
                    Value::Number(gtmpl_value_ng::Number::float(as_f64))
                };

                Ok(NumberNode {
                    typ: NodeType::Number,
                    pos,
                    line,
                    col,
                    len,
                    text,
                    value,
                })
            }
        }
    }
}

/// Gives a node type a one-shot `finish`, for the types that are built by appending
/// and therefore only learn their extent once their children are parsed.
macro_rules! finishable {
    ($($name:ident)*) => {
        $(
            impl $name {
                /// Records the span now that the children are parsed and the extent
                /// is known. Consuming `self` makes this a step in building the node
                /// rather than a mutation that could be repeated, forgotten, or
                /// applied at the wrong moment.
                pub fn finish(mut self, end: Pos) -> Self {
                    debug_assert!(end >= self.pos, "node ends before it starts");
                    self.len = end - self.pos;
                    self
                }
            }
        )*
    };
}

finishable!(ListNode PipeNode CommandNode ChainNode);

impl Display for NumberNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.text)
    }
}

node!(StringNode {
    quoted: String,
    value: Value,
});

impl StringNode {
    pub fn new(
        pos: Pos,
        line: usize,
        col: usize,
        len: usize,
        orig: String,
        text: String,
    ) -> StringNode {
        StringNode {
            typ: NodeType::String,
            pos,
            line,
            col,
            len,
            quoted: orig,
            value: Value::from(text),
        }
    }
}

impl Display for StringNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{}", self.quoted)
    }
}

node!(EndNode {});

impl EndNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> EndNode {
        EndNode {
            typ: NodeType::End,
            pos,
            line,
            col,
            len,
        }
    }
}

impl Display for EndNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{{{{end}}}}")
    }
}

node!(ElseNode {});

impl ElseNode {
    pub fn new(pos: Pos, line: usize, col: usize, len: usize) -> ElseNode {
        ElseNode {
            typ: NodeType::Else,
            pos,
            line,
            col,
            len,
        }
    }
}

impl Display for ElseNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        write!(f, "{{{{else}}}}")
    }
}

node!(
    BranchNode {
        pipe: PipeNode,
        list: ListNode,
        else_list: Option<ListNode>,
        /// The offset just past this branch's `{{end}}`.
        ///
        /// A branch's own `len` is only its pipeline's span, so that an error in
        /// `{{if .x}}` is reported against `.x` rather than against the whole
        /// construct. That makes `pos + len` the wrong answer for "where does this
        /// node's text stop", which is what an enclosing list needs, so the real
        /// extent is kept separately.
        body_end: Pos
    }
);

pub type IfNode = BranchNode;
pub type WithNode = BranchNode;
pub type RangeNode = BranchNode;

impl BranchNode {
    pub fn new_if(
        span: NodeSpan,
        pipe: PipeNode,
        list: ListNode,
        else_list: Option<ListNode>,
        body_end: Pos,
    ) -> IfNode {
        IfNode {
            typ: NodeType::If,
            pos: span.pos,
            line: span.line,
            col: span.col,
            len: span.len,
            pipe,
            list,
            else_list,
            body_end,
        }
    }

    pub fn new_with(
        span: NodeSpan,
        pipe: PipeNode,
        list: ListNode,
        else_list: Option<ListNode>,
        body_end: Pos,
    ) -> WithNode {
        WithNode {
            typ: NodeType::With,
            pos: span.pos,
            line: span.line,
            col: span.col,
            len: span.len,
            pipe,
            list,
            else_list,
            body_end,
        }
    }

    pub fn new_range(
        span: NodeSpan,
        pipe: PipeNode,
        list: ListNode,
        else_list: Option<ListNode>,
        body_end: Pos,
    ) -> RangeNode {
        RangeNode {
            typ: NodeType::Range,
            pos: span.pos,
            line: span.line,
            col: span.col,
            len: span.len,
            pipe,
            list,
            else_list,
            body_end,
        }
    }
}

impl Display for BranchNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        let name = match self.typ {
            NodeType::If => "if",
            NodeType::Range => "range",
            NodeType::With => "with",
            _ => {
                return Err(std::fmt::Error);
            }
        };
        if let Some(ref else_list) = self.else_list {
            return write!(
                f,
                "{{{{{} {}}}}}{}{{{{else}}}}{}{{{{end}}}}",
                name, self.pipe, self.list, else_list
            );
        }
        write!(f, "{{{{{} {}}}}}{}{{{{end}}}}", name, self.pipe, self.list)
    }
}

node!(
    TemplateNode {
        name: PipeOrString,
        pipe: Option<PipeNode>
    }
);

impl TemplateNode {
    pub fn new(
        pos: Pos,
        line: usize,
        col: usize,
        len: usize,
        name: PipeOrString,
        pipe: Option<PipeNode>,
    ) -> TemplateNode {
        TemplateNode {
            typ: NodeType::Template,
            pos,
            line,
            col,
            len,
            name,
            pipe,
        }
    }
}

impl Display for TemplateNode {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        match self.pipe {
            Some(ref pipe) => write!(f, "{{{{template {} {}}}}}", self.name, pipe),
            None => write!(f, "{{{{template {}}}}}", self.name),
        }
    }
}

#[derive(Clone, Debug)]
pub enum PipeOrString {
    // Only the `gtmpl_dynamic_template` feature parses a pipeline into a template
    // name; without it the variant exists and is never built.
    #[cfg_attr(not(feature = "gtmpl_dynamic_template"), allow(dead_code))]
    Pipe(PipeNode),
    String(String),
}

impl Display for PipeOrString {
    fn fmt(&self, f: &mut Formatter<'_>) -> Result<(), std::fmt::Error> {
        match *self {
            PipeOrString::Pipe(ref pipe_node) => write!(f, "{}", pipe_node),
            PipeOrString::String(ref s) => write!(f, "{}", s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_clone() {
        let t1 = TextNode::new(0, 1, 1, 3, "foo".to_owned());
        let mut t2 = t1.clone();
        t2.text = "bar".to_owned();
        assert_eq!(t1.to_string(), "foo");
        assert_eq!(t2.to_string(), "bar");
    }

    #[test]
    fn test_end() {
        let t1 = EndNode::new(0, 1, 1, 3);
        assert_eq!(t1.to_string(), "{{end}}");
    }
}
