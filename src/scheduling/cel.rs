//! CEL for DRA device selectors, as `k8s.io/dynamic-resource-allocation/cel` 0.36 evaluates them:
//! one variable `device` with `driver`, `attributes[domain][id]` and `capacity[domain][id]`
//! (a bare attribute name is in the driver's own domain; a domain the device has nothing in is
//! an empty map, so `device.attributes["x.com"].y` fails as "no such key: y"), the standard
//! library and its string extension (cel-rust's `cel`), and written here what Kubernetes adds:
//! the semver library (`semver`, `isSemver`, `compareTo`, `isGreaterThan`, `isLessThan`,
//! `major`, `minor`, `patch`) and the quantity library (`quantity`, `isQuantity`, `compareTo`,
//! `isGreaterThan`, `isLessThan`, `add`, `sub`, `sign`, `isInteger`, `asInteger`,
//! `asApproximateFloat`), and `cel.bind`.
//!
//! Cost: Kubernetes refuses a selector whose estimated cost exceeds
//! `CELSelectorExpressionMaxCost` (1,000,000) and stops one that runs past it. cel-rust counts
//! no cost, so each selector's worst case is bounded before it runs ([`estimate_cost`]): one
//! unit per node of the expression, a comprehension's body times the most elements its range
//! can have (a device has at most 32 attributes and capacities, a list literal its length, an
//! attribute string 64 characters), string functions times that length. A selector over the
//! bound is refused and never evaluated, so no evaluation costs more than 1,000,000 units.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map, Opaque};
use cel::{Context, Env, ExecutionError, Program, Value};

use crate::dra::Attr;
use crate::kobject::Quantity;

/// `resourceapi.CELSelectorExpressionMaxCost`.
pub const MAX_COST: u64 = 1_000_000;
/// `resourceapi.CELSelectorExpressionMaxLength`.
pub const MAX_LENGTH: usize = 10 * 1024;
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`: the most entries a device's map has.
const MAX_MAP: u64 = 32;
/// `DeviceAttributeMaxValueLength`: the longest attribute string.
const MAX_STRING: u64 = 64;

/// A semantic version (semver 2.0.0, as blang/semver parses it strictly).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pub pre: Vec<String>,
    /// Build metadata: kept for equality, ignored for precedence (as blang/semver's Compare).
    pub build: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    pub fn parse(s: &str) -> Result<Semver, String> {
        let bad = |why: &str| Err(format!("{s:?} is not a semantic version: {why}"));
        let (rest, build) = match s.split_once('+') {
            Some((r, b)) => (r, Some(b)),
            None => (s, None),
        };
        let (core, pre) = match rest.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (rest, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        if parts.len() != 3 {
            return bad("expected MAJOR.MINOR.PATCH");
        }
        let mut nums = [0u64; 3];
        for (i, p) in parts.iter().enumerate() {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return bad("a version number is not a number");
            }
            if p.len() > 1 && p.starts_with('0') {
                return bad("a version number has a leading zero");
            }
            nums[i] = match p.parse() {
                Ok(n) => n,
                Err(_) => return bad("a version number is too large"),
            };
        }
        let ident =
            |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        let mut pre_ids = Vec::new();
        if let Some(p) = pre {
            for id in p.split('.') {
                if !ident(id) {
                    return bad("an invalid pre-release identifier");
                }
                if id.bytes().all(|b| b.is_ascii_digit()) && id.len() > 1 && id.starts_with('0') {
                    return bad("a numeric pre-release identifier has a leading zero");
                }
                pre_ids.push(id.to_string());
            }
        }
        let mut build_ids = Vec::new();
        if let Some(b) = build {
            for id in b.split('.') {
                if !ident(id) {
                    return bad("an invalid build identifier");
                }
                build_ids.push(id.to_string());
            }
        }
        Ok(Semver {
            major: nums[0],
            minor: nums[1],
            patch: nums[2],
            pre: pre_ids,
            build: build_ids,
        })
    }

    /// semver 2.0.0 precedence.
    pub fn compare(&self, o: &Semver) -> std::cmp::Ordering {
        use std::cmp::Ordering::*;
        let c = (self.major, self.minor, self.patch).cmp(&(o.major, o.minor, o.patch));
        if c != Equal {
            return c;
        }
        match (self.pre.is_empty(), o.pre.is_empty()) {
            (true, true) => return Equal,
            (true, false) => return Greater,
            (false, true) => return Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&o.pre) {
            let num = |x: &str| {
                x.bytes()
                    .all(|c| c.is_ascii_digit())
                    .then(|| x.parse::<u64>().ok())
                    .flatten()
            };
            let c = match (num(a), num(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Less,
                (None, Some(_)) => Greater,
                (None, None) => a.cmp(b),
            };
            if c != Equal {
                return c;
            }
        }
        self.pre.len().cmp(&o.pre.len())
    }
}

/// A resource quantity, compared by value (`1Gi == 1024Mi`), as `apiservercel.Quantity`.
#[derive(Debug, Clone)]
pub struct CelQuantity {
    pub milli: i128,
}

impl PartialEq for CelQuantity {
    fn eq(&self, o: &Self) -> bool {
        self.milli == o.milli
    }
}
impl Eq for CelQuantity {}

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn fail(name: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(name, message.to_string())
}

fn semver_of(v: &Value) -> Option<&Semver> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>(),
        _ => None,
    }
}

fn quantity_of(v: &Value) -> Option<&CelQuantity> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<CelQuantity>(),
        _ => None,
    }
}

/// The other operand of a binary member function, of the receiver's own type.
fn ordering(
    name: &str,
    this: &Value,
    args: &[Value],
) -> Result<std::cmp::Ordering, ExecutionError> {
    let [other] = args else {
        return Err(fail(name, "expects one argument"));
    };
    if let (Some(a), Some(b)) = (semver_of(this), semver_of(other)) {
        return Ok(a.compare(b));
    }
    if let (Some(a), Some(b)) = (quantity_of(this), quantity_of(other)) {
        return Ok(a.milli.cmp(&b.milli));
    }
    Err(fail(
        name,
        format!("no such overload: {this:?}.{name}({other:?})"),
    ))
}

fn string_arg(name: &str, this: &Value) -> Result<Arc<String>, ExecutionError> {
    match this {
        Value::String(s) => Ok(s.clone()),
        other => Err(fail(name, format!("expects a string, got {other:?}"))),
    }
}

fn parse_quantity(text: &str) -> Result<i128, String> {
    crate::validate::quantity_milli(text).map_err(|e| format!("{text:?} is not a quantity: {e}"))
}

/// The DRA environment: the functions Kubernetes adds to the standard library.
fn root_context(env: Arc<Env>) -> Context<'static, 'static> {
    let mut ctx = Context::with_env(env);
    let add = |ctx: &mut Context<'static, 'static>, name: &'static str, r| {
        // The names are not the standard library's, so registering cannot conflict.
        let _: Result<(), _> = r;
        let _ = (ctx, name);
    };
    let r = ctx.add_function(
        "semver",
        |This(s): This<Value>| -> Result<Value, ExecutionError> {
            let s = string_arg("semver", &s)?;
            Semver::parse(&s)
                .map(|v| Value::Opaque(Arc::new(v)))
                .map_err(|e| fail("semver", e))
        },
    );
    add(&mut ctx, "semver", r);
    let r = ctx.add_function(
        "isSemver",
        |This(s): This<Value>| -> Result<Value, ExecutionError> {
            Ok(Value::Bool(
                Semver::parse(&string_arg("isSemver", &s)?).is_ok(),
            ))
        },
    );
    add(&mut ctx, "isSemver", r);
    let r = ctx.add_function(
        "quantity",
        |This(s): This<Value>| -> Result<Value, ExecutionError> {
            let s = string_arg("quantity", &s)?;
            parse_quantity(&s)
                .map(|milli| Value::Opaque(Arc::new(CelQuantity { milli })))
                .map_err(|e| fail("quantity", e))
        },
    );
    add(&mut ctx, "quantity", r);
    let r = ctx.add_function(
        "isQuantity",
        |This(s): This<Value>| -> Result<Value, ExecutionError> {
            Ok(Value::Bool(
                parse_quantity(&string_arg("isQuantity", &s)?).is_ok(),
            ))
        },
    );
    add(&mut ctx, "isQuantity", r);
    let r = ctx.add_function(
        "compareTo",
        |This(this): This<Value>, Arguments(args): Arguments| -> Result<Value, ExecutionError> {
            Ok(Value::Int(ordering("compareTo", &this, &args)? as i64))
        },
    );
    add(&mut ctx, "compareTo", r);
    let r = ctx.add_function(
        "isGreaterThan",
        |This(this): This<Value>, Arguments(args): Arguments| -> Result<Value, ExecutionError> {
            Ok(Value::Bool(
                ordering("isGreaterThan", &this, &args)?.is_gt(),
            ))
        },
    );
    add(&mut ctx, "isGreaterThan", r);
    let r = ctx.add_function(
        "isLessThan",
        |This(this): This<Value>, Arguments(args): Arguments| -> Result<Value, ExecutionError> {
            Ok(Value::Bool(ordering("isLessThan", &this, &args)?.is_lt()))
        },
    );
    add(&mut ctx, "isLessThan", r);
    for (name, part) in [("major", 0usize), ("minor", 1), ("patch", 2)] {
        let r = ctx.add_function(
            name,
            move |This(this): This<Value>| -> Result<Value, ExecutionError> {
                let v = semver_of(&this).ok_or_else(|| fail(name, "expects a semver"))?;
                let n = [v.major, v.minor, v.patch][part];
                Ok(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)))
            },
        );
        add(&mut ctx, name, r);
    }
    let r = ctx.add_function(
        "sign",
        |This(this): This<Value>| -> Result<Value, ExecutionError> {
            let q = quantity_of(&this).ok_or_else(|| fail("sign", "expects a quantity"))?;
            Ok(Value::Int(q.milli.signum() as i64))
        },
    );
    add(&mut ctx, "sign", r);
    let r = ctx.add_function(
        "isInteger",
        |This(this): This<Value>| -> Result<Value, ExecutionError> {
            let q = quantity_of(&this).ok_or_else(|| fail("isInteger", "expects a quantity"))?;
            Ok(Value::Bool(
                q.milli % 1000 == 0 && i64::try_from(q.milli / 1000).is_ok(),
            ))
        },
    );
    add(&mut ctx, "isInteger", r);
    let r = ctx.add_function(
        "asInteger",
        |This(this): This<Value>| -> Result<Value, ExecutionError> {
            let q = quantity_of(&this).ok_or_else(|| fail("asInteger", "expects a quantity"))?;
            if q.milli % 1000 != 0 {
                return Err(fail("asInteger", "cannot convert value to integer"));
            }
            i64::try_from(q.milli / 1000)
                .map(Value::Int)
                .map_err(|_| fail("asInteger", "cannot convert value to integer"))
        },
    );
    add(&mut ctx, "asInteger", r);
    let r = ctx.add_function(
        "asApproximateFloat",
        |This(this): This<Value>| -> Result<Value, ExecutionError> {
            let q = quantity_of(&this)
                .ok_or_else(|| fail("asApproximateFloat", "expects a quantity"))?;
            Ok(Value::Float(q.milli as f64 / 1000.0))
        },
    );
    add(&mut ctx, "asApproximateFloat", r);
    for (name, sign) in [("add", 1i128), ("sub", -1i128)] {
        let r = ctx.add_function(
            name,
            move |This(this): This<Value>,
                  Arguments(args): Arguments|
                  -> Result<Value, ExecutionError> {
                let q = quantity_of(&this).ok_or_else(|| fail(name, "expects a quantity"))?;
                let other = match args.as_slice() {
                    [Value::Int(i)] => i128::from(*i) * 1000,
                    [v] => {
                        quantity_of(v)
                            .ok_or_else(|| fail(name, "expects a quantity or an int"))?
                            .milli
                    }
                    _ => return Err(fail(name, "expects one argument")),
                };
                Ok(Value::Opaque(Arc::new(CelQuantity {
                    milli: q.milli + sign * other,
                })))
            },
        );
        add(&mut ctx, name, r);
    }
    ctx
}

thread_local! {
    static ROOT: (Arc<Env>, Context<'static, 'static>) = {
        let env = Arc::new(dra_env());
        (env.clone(), root_context(env))
    };
}

/// A compiled selector, with its worst-case cost.
#[derive(Debug)]
pub struct Selector {
    pub text: String,
    program: Program,
    pub cost: u64,
    /// The domains it indexes `device.attributes`/`device.capacity` with (string literals),
    /// made empty maps on devices without them.
    pub domains: BTreeSet<String>,
}

impl Selector {
    /// The parsed expression.
    pub fn expression(&self) -> &IdedExpr {
        self.program.expression()
    }
}

/// Compiles one selector: a parse error, or a cost or length over Kubernetes' limits, is an
/// error (the API server refuses such a selector).
pub fn compile(text: &str) -> Result<Selector, String> {
    if text.len() > MAX_LENGTH {
        return Err(format!(
            "the expression is {} bytes, more than the {MAX_LENGTH} Kubernetes allows",
            text.len()
        ));
    }
    let program = ROOT
        .with(|(env, _)| env.compile(text))
        .map_err(|e| format!("CEL compile error: {}", e.to_string().trim()))?;
    let cost = estimate_cost(program.expression());
    if cost > MAX_COST {
        return Err(format!(
            "CEL cost limit exceeded: the estimated worst case is {cost}, more than {MAX_COST}"
        ));
    }
    let mut domains = BTreeSet::new();
    collect_domains(program.expression(), &mut domains);
    Ok(Selector {
        text: text.to_string(),
        program,
        cost,
        domains,
    })
}

/// The standard library, cel-go's ext.Strings (in Kubernetes' base environment) and
/// `cel.bind(name, init, body)` (ext.Bindings, in the DRA environment since 1.31), expanded to
/// the comprehension cel-go expands it to: no iterations, the accumulator bound to `init`.
fn dra_env() -> Env {
    let mut env = Env::stdlib();
    // Neither can conflict with the standard library's declarations.
    let _ = env.add_extension(cel::extensions::strings);
    let _ = env.add_macro(cel::parser::Macro::receiver(
        "bind",
        3,
        |helper, target, args| {
            let is_cel =
                matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(n)) if n == "cel");
            let Some(var) = args.first().and_then(|a| match &a.expr {
                Expr::Ident(n) => Some(n.clone()),
                _ => None,
            }) else {
                return Ok(None);
            };
            if !is_cel {
                return Ok(None);
            }
            let body = args.pop().unwrap_or_default();
            let init = args.pop().unwrap_or_default();
            let empty = helper.next_expr(Expr::List(Default::default()));
            let cond = helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into())));
            let step = helper.next_expr(Expr::Ident(var.clone()));
            Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(
                cel::common::ast::ComprehensionExpr {
                    iter_range: empty,
                    iter_var: "#unused".into(),
                    iter_var2: None,
                    accu_var: var,
                    accu_init: init,
                    loop_cond: cond,
                    loop_step: step,
                    result: body,
                },
            )))))
        },
    ));
    env
}

/// The worst-case cost of an expression (see the module's comment).
pub fn estimate_cost(e: &IdedExpr) -> u64 {
    fn size(e: &IdedExpr) -> u64 {
        match &e.expr {
            Expr::List(l) => l.elements.len() as u64,
            Expr::Literal(LiteralValue::String(s)) => s.len() as u64,
            Expr::Map(m) => m.entries.len() as u64,
            // `map` and `filter` give at most their range's elements; `+` joins two lists.
            Expr::Comprehension(c) => size(&c.iter_range),
            Expr::Call(c) if c.func_name == "_+_" => c.args.iter().map(size).sum(),
            // A device's maps, and attribute strings.
            _ => MAX_MAP.max(MAX_STRING),
        }
    }
    fn cost(e: &IdedExpr) -> u64 {
        match &e.expr {
            Expr::Call(c) => {
                let args: u64 = c.args.iter().map(cost).sum::<u64>()
                    + c.target.as_deref().map(cost).unwrap_or(0);
                let per = match c.func_name.as_str() {
                    // Linear in the string's length.
                    "matches" | "contains" | "startsWith" | "endsWith" | "indexOf"
                    | "lastIndexOf" | "replace" | "split" | "lowerAscii" | "upperAscii"
                    | "trim" | "substring" | "@in" => MAX_STRING,
                    _ => 1,
                };
                args.saturating_add(per)
            }
            Expr::Comprehension(c) => {
                let n = size(&c.iter_range);
                let body = cost(&c.loop_cond).saturating_add(cost(&c.loop_step));
                cost(&c.iter_range)
                    .saturating_add(cost(&c.accu_init))
                    .saturating_add(n.saturating_mul(body.saturating_add(1)))
                    .saturating_add(cost(&c.result))
            }
            Expr::List(l) => 1 + l.elements.iter().map(cost).sum::<u64>(),
            Expr::Map(m) => {
                1 + m
                    .entries
                    .iter()
                    .map(|en| match &en.expr {
                        cel::common::ast::EntryExpr::MapEntry(me) => {
                            cost(&me.key) + cost(&me.value)
                        }
                        cel::common::ast::EntryExpr::StructField(f) => cost(&f.value),
                    })
                    .sum::<u64>()
            }
            Expr::Select(s) => 1 + cost(&s.operand),
            Expr::Struct(s) => 1 + s.entries.len() as u64,
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 1,
        }
    }
    cost(e)
}

/// `device.attributes["dom"]` / `device.capacity["dom"]`: the string literal indexes.
fn collect_domains(e: &IdedExpr, out: &mut BTreeSet<String>) {
    walk(e, &mut |e| {
        if let Some((_, domain, _)) = device_access(e) {
            out.insert(domain.to_string());
        }
        if let Expr::Call(c) = &e.expr
            && c.func_name == "_[_]"
            && let [m, k] = c.args.as_slice()
            && device_map(m).is_some()
            && let Expr::Literal(LiteralValue::String(s)) = &k.expr
        {
            out.insert(s.to_string());
        }
    });
}

/// Calls `f` on every node of the expression.
pub fn walk<'a>(e: &'a IdedExpr, f: &mut dyn FnMut(&'a IdedExpr)) {
    f(e);
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                walk(t, f);
            }
            for a in &c.args {
                walk(a, f);
            }
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(x, f);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, f)),
        Expr::Map(m) => {
            for en in &m.entries {
                match &en.expr {
                    cel::common::ast::EntryExpr::MapEntry(me) => {
                        walk(&me.key, f);
                        walk(&me.value, f);
                    }
                    cel::common::ast::EntryExpr::StructField(sf) => walk(&sf.value, f),
                }
            }
        }
        Expr::Select(s) => walk(&s.operand, f),
        _ => {}
    }
}

/// `device.attributes` or `device.capacity`: which.
pub fn device_map(e: &IdedExpr) -> Option<&str> {
    if let Expr::Select(s) = &e.expr
        && !s.test
        && matches!(&s.operand.expr, Expr::Ident(n) if n == "device")
        && (s.field == "attributes" || s.field == "capacity")
    {
        return Some(&s.field);
    }
    None
}

/// `device.attributes["dom"].name` or `device.attributes["dom"]["name"]` (and `has(...)` of
/// it): (`attributes`|`capacity`, domain, name, whether it is a `has` test).
pub fn device_access(e: &IdedExpr) -> Option<(&str, &str, &str)> {
    let (inner, name) = match &e.expr {
        Expr::Select(s) => (&*s.operand, s.field.as_str()),
        Expr::Call(c) if c.func_name == "_[_]" && c.args.len() == 2 => match &c.args[1].expr {
            Expr::Literal(LiteralValue::String(s)) => (&c.args[0], &**s),
            _ => return None,
        },
        _ => return None,
    };
    let Expr::Call(c) = &inner.expr else {
        return None;
    };
    if c.func_name != "_[_]" || c.args.len() != 2 {
        return None;
    }
    let which = device_map(&c.args[0])?;
    let Expr::Literal(LiteralValue::String(domain)) = &c.args[1].expr else {
        return None;
    };
    Some((which, &**domain, name))
}

/// Whether `e` is a `has(...)` test (a select marked as a test).
pub fn is_has_test(e: &IdedExpr) -> bool {
    matches!(&e.expr, Expr::Select(s) if s.test)
}

/// A device as the selectors see it.
pub struct DeviceInput<'a> {
    pub driver: &'a str,
    pub attributes: &'a BTreeMap<String, Attr>,
    pub capacity: &'a BTreeMap<String, Quantity>,
}

/// `parseQualifiedName`: `domain/id`, or the driver's domain for a bare id.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    match name.split_once('/') {
        Some((d, id)) => (d, id),
        None => (driver, name),
    }
}

fn key(s: &str) -> Key {
    Key::String(Arc::new(s.to_string()))
}

fn map_value(m: HashMap<Key, Value>) -> Value {
    Value::Map(Map { map: Arc::new(m) })
}

/// The `device` variable of one device; an attribute that cannot be given to CEL (a version
/// that is not semver) is an error, as upstream's `DeviceMatches`.
pub fn device_value(d: &DeviceInput, domains: &BTreeSet<String>) -> Result<Value, String> {
    let mut attrs: BTreeMap<String, HashMap<Key, Value>> = BTreeMap::new();
    for (name, a) in d.attributes {
        let (dom, id) = qualified(name, d.driver);
        let v = match a {
            Attr::Int(i) => Value::Int(*i),
            Attr::Bool(b) => Value::Bool(*b),
            Attr::Str(s) => Value::String(Arc::new(s.clone())),
            Attr::Version(s) => {
                Value::Opaque(Arc::new(Semver::parse(s).map_err(|e| {
                    format!("attribute {name}: parse semantic version: {e}")
                })?))
            }
        };
        attrs.entry(dom.to_string()).or_default().insert(key(id), v);
    }
    let mut caps: BTreeMap<String, HashMap<Key, Value>> = BTreeMap::new();
    for (name, q) in d.capacity {
        let (dom, id) = qualified(name, d.driver);
        caps.entry(dom.to_string()).or_default().insert(
            key(id),
            Value::Opaque(Arc::new(CelQuantity { milli: q.milli })),
        );
    }
    let outer = |mut m: BTreeMap<String, HashMap<Key, Value>>| {
        for d in domains {
            m.entry(d.clone()).or_default();
        }
        map_value(
            m.into_iter()
                .map(|(k, v)| (key(&k), map_value(v)))
                .collect(),
        )
    };
    let mut device = HashMap::new();
    device.insert(key("driver"), Value::String(Arc::new(d.driver.to_string())));
    device.insert(key("attributes"), outer(attrs));
    device.insert(key("capacity"), outer(caps));
    // DRAConsumableCapacity's field; false for the devices this reads (no multiple allocations).
    device.insert(key("allowMultipleAllocations"), Value::Bool(false));
    Ok(map_value(device))
}

/// Evaluates a selector on a device value: its boolean, or the runtime error in CEL's words.
pub fn eval(sel: &Selector, device: &Value) -> Result<bool, String> {
    eval_many(&[sel], device).pop().unwrap_or(Ok(false))
}

/// Evaluates several selectors on one device, in one scope: the device's value is given to
/// CEL once.
pub fn eval_many(sels: &[&Selector], device: &Value) -> Vec<Result<bool, String>> {
    ROOT.with(|(_, root)| {
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("device", device.clone());
        sels.iter()
            .map(|sel| match sel.program.execute(&ctx) {
                Ok(Value::Bool(b)) => Ok(b),
                Ok(other) => Err(format!(
                    "CEL result of type {} could not be converted to bool",
                    type_name(&other)
                )),
                Err(e) => Err(runtime_error(&e)),
            })
            .collect()
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::Null => "null_type",
        _ => "object",
    }
}

/// cel-go's words where they differ: `no such key: memory`.
fn runtime_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device() -> (BTreeMap<String, Attr>, BTreeMap<String, Quantity>) {
        let attrs = BTreeMap::from([
            (
                "productName".to_string(),
                Attr::Str("NVIDIA A100-SXM4-80GB".into()),
            ),
            (
                "driverVersion".to_string(),
                Attr::Version("550.54.15".into()),
            ),
            ("index".to_string(), Attr::Int(3)),
            (
                "resource.kubernetes.io/pciBusID".to_string(),
                Attr::Str("0000:3b:00.0".into()),
            ),
        ]);
        let caps = BTreeMap::from([(
            "memory".to_string(),
            Quantity {
                milli: 80 * (1i128 << 30) * 1000,
            },
        )]);
        (attrs, caps)
    }

    fn run(expr: &str) -> Result<bool, String> {
        let (a, c) = device();
        let sel = compile(expr)?;
        let v = device_value(
            &DeviceInput {
                driver: "gpu.nvidia.com",
                attributes: &a,
                capacity: &c,
            },
            &sel.domains,
        )?;
        eval(&sel, &v)
    }

    /// Kubernetes' DRA environment: the driver's own domain for bare names, quantities by
    /// value, semver precedence, an unknown attribute a runtime error, an unknown domain empty.
    #[test]
    fn the_dra_environment_as_kubernetes_defines_it() {
        let cases: &[(&str, Result<bool, String>)] = &[
            (r#"device.driver == "gpu.nvidia.com""#, Ok(true)),
            (
                r#"device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA A100")"#,
                Ok(true),
            ),
            (
                r#"device.attributes["gpu.nvidia.com"]["index"] == 3"#,
                Ok(true),
            ),
            (
                r#"device.attributes["resource.kubernetes.io"].pciBusID == "0000:3b:00.0""#,
                Ok(true),
            ),
            (
                r#"device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
                Ok(true),
            ),
            (
                r#"device.capacity["gpu.nvidia.com"].memory == quantity("81920Mi")"#,
                Ok(true),
            ),
            (
                r#"device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("80Gi"))"#,
                Ok(false),
            ),
            (
                r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.9.0"))"#,
                Ok(true),
            ),
            (
                r#"device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.54.15")) == 0"#,
                Ok(true),
            ),
            (
                r#"semver("1.0.0-alpha").isLessThan(semver("1.0.0"))"#,
                Ok(true),
            ),
            (
                r#"semver("1.0.0-alpha.2").isLessThan(semver("1.0.0-alpha.10"))"#,
                Ok(true),
            ),
            (
                r#"device.attributes["gpu.nvidia.com"].driverVersion.major() == 550"#,
                Ok(true),
            ),
            (
                r#"has(device.attributes["gpu.nvidia.com"].uuid)"#,
                Ok(false),
            ),
            (
                r#""uuid" in device.attributes["gpu.nvidia.com"]"#,
                Ok(false),
            ),
            (r#"has(device.attributes["dra.example.com"].x)"#, Ok(false)),
            (
                r#"device.capacity["gpu.nvidia.com"].cores.compareTo(quantity("1")) >= 0"#,
                Err("no such key: cores".into()),
            ),
            (
                r#"device.attributes["dra.example.com"].x == 1"#,
                Err("no such key: x".into()),
            ),
            (
                r#"cel.bind(a, device.attributes["gpu.nvidia.com"], a.index == 3 && a.productName != "")"#,
                Ok(true),
            ),
            (
                r#"device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("a100")"#,
                Ok(true),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(&run(expr), want, "{expr}");
        }
    }

    #[test]
    fn semver_parses_strictly() {
        for bad in ["1.2", "01.2.3", "1.2.3-01", "1.2.3-", "v1.2.3", "1.2.3.4"] {
            assert!(Semver::parse(bad).is_err(), "{bad}");
        }
        for good in ["0.0.0", "1.2.3-rc.1+build.5", "535.161.8"] {
            assert!(Semver::parse(good).is_ok(), "{good}");
        }
    }

    fn estimate_of(expr: &str) -> u64 {
        estimate_cost(cel::Program::compile(expr).unwrap().expression())
    }

    #[test]
    fn a_comprehension_over_a_long_literal_is_over_the_cost_bound() {
        // 2,000 elements × a nested 2,000: 4,000,000 body evaluations at worst.
        let list = format!("[{}]", vec!["1"; 2000].join(","));
        let expr = format!("{list}.all(x, {list}.all(y, x == y))");
        assert_eq!(
            compile(&expr).unwrap_err(),
            format!(
                "CEL cost limit exceeded: the estimated worst case is {}, more than 1000000",
                estimate_of(&expr)
            )
        );
        assert!(estimate_of(&expr) > 4_000_000);
        // The same over 100 elements: 100 x 100 bodies, well under the bound.
        let small = format!("[{}]", vec!["1"; 100].join(","));
        let ok = format!("{small}.all(x, {small}.all(y, x == y))");
        assert!(compile(&ok).is_ok());
        // `device.driver == "a"`: the call, its select and ident, the literal.
        assert_eq!(compile(r#"device.driver == "a""#).unwrap().cost, 4);
    }
}
