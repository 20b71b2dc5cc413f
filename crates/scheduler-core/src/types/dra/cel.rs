//! CEL device selectors (DRA) with the environment kube-scheduler gives them: a `device`
//! variable (`driver`, `attributes[domain][name]`, `capacity[domain][name]`), Kubernetes
//! quantities (`quantity("1Gi")`, `isQuantity`, `compareTo`, `isLessThan`, `add`, ...) and
//! semantic versions (`semver("1.2.3")`, `isSemver`, `major`, `compareTo`, ...).
//!
//! Expressions are compiled once, when the class or claim view is built; evaluation never
//! panics: a compile or runtime error is a message the allocator puts in front of the
//! claim/class and selector index.
//!
//! Limits: an expression longer than [`MAX_EXPRESSION_LEN`] is refused (upstream's length
//! limit), and so is one whose worst-case cost, estimated when it is compiled, exceeds
//! upstream's cost limit ([`super::cel_estimate`]; the API server refuses those too). One
//! evaluation is still bounded by the cost limit, for what the estimate cannot see (devices
//! beyond the API's limits), and by the caller's deadline (`filterTimeout`), checked inside
//! it; see [`super::cel_budget`].

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::operators::INDEX;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::extractors::This;
use cel::objects::{Key, Opaque, Value};
use cel::{Context, ExecutionError, IdedExpr, Program};

use regex::Regex;

pub use super::cel_budget::Deadline;
use super::cel_budget::{self, COST_LIMIT_EXCEEDED, MAX_COST, Stop};
use super::cel_estimate;
use crate::types::quantity::{Quantity, parse_quantity};

/// The stack the parser runs on (see [`CelSelector::compile`]).
const PARSER_STACK: usize = 64 << 20;

/// Upstream's limit on a selector expression's length.
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;

/// One compiled `cel.expression`; the compile error, if any, is kept for the allocator to
/// report (a class or claim with a bad selector is an error, never ignored).
#[derive(Clone)]
pub struct CelSelector {
    pub expression: String,
    /// The expression as parsed, then rewritten to charge its cost ([`cel_budget`]).
    program: Result<Arc<IdedExpr>, String>,
    /// Its constant regexes, compiled once (`matches("...")`).
    regexes: Arc<[Regex]>,
    /// The domains the expression names literally (`device.attributes["d"]`,
    /// `device.capacity["d"]`): one a device lacks reads as an empty map, as upstream's.
    domains: Vec<(&'static str, String)>,
}

impl std::fmt::Debug for CelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelSelector")
            .field("expression", &self.expression)
            .field("compile_error", &self.program.as_ref().err())
            .finish()
    }
}

impl PartialEq for CelSelector {
    fn eq(&self, other: &Self) -> bool {
        self.expression == other.expression
    }
}
impl Eq for CelSelector {}

impl CelSelector {
    pub fn compile(expression: &str) -> Self {
        Self::compile_with(expression, true)
    }

    /// Without the compile-time estimate: the runtime limit alone (its tests).
    #[cfg(test)]
    fn compile_unestimated(expression: &str) -> Self {
        Self::compile_with(expression, false)
    }

    fn compile_with(expression: &str, estimate: bool) -> Self {
        let mut regexes = Vec::new();
        let mut domains = Vec::new();
        let program = if expression.len() > MAX_EXPRESSION_LEN {
            Err(format!(
                "expression is {} bytes long, the limit is {MAX_EXPRESSION_LEN}",
                expression.len()
            ))
        } else if expression.trim().is_empty() {
            Err("empty expression".to_string())
        } else {
            // The parser is generated code: never let a panic in it take the scheduler down.
            // It recurses deeply before it reaches its own nesting limit (in a debug build,
            // 16 nested brackets overflow a 2 MiB stack), so it runs on a thread of its own
            // with room for that limit; a class or claim is compiled once per change.
            let parsed: Option<Result<IdedExpr, String>> = std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name("cel-parse".into())
                    .stack_size(PARSER_STACK)
                    .spawn_scoped(s, || {
                        std::panic::catch_unwind(|| {
                            Program::compile(expression)
                                .map(|p| p.expression().clone())
                                .map_err(|e| parse_errors(&e))
                        })
                    })
                    .ok()
                    .and_then(|h| h.join().ok())
                    .and_then(Result::ok)
            });
            match parsed {
                Some(Ok(mut e)) => {
                    if cel_budget::deeper_than(&e, cel_budget::MAX_DEPTH) {
                        Err(too_deep())
                    } else {
                        named_domains(&e, &mut domains);
                        domains.sort();
                        domains.dedup();
                        let cost = if estimate {
                            cel_estimate::estimate(&e, domains.len())
                        } else {
                            0
                        };
                        if cost > MAX_COST {
                            Err(too_expensive(cost))
                        } else {
                            cel_budget::instrument(&mut e, &mut regexes).map(|()| Arc::new(e))
                        }
                    }
                }
                Some(Err(e)) => Err(e),
                None => Err("the CEL parser failed on this expression".to_string()),
            }
        };
        CelSelector {
            expression: expression.to_string(),
            program,
            regexes: regexes.into(),
            domains,
        }
    }

    /// A selector without an expression (a future selector type this version does not know).
    pub fn missing() -> Self {
        CelSelector {
            regexes: Arc::new([]),
            expression: String::new(),
            program: Err("CEL expression empty (unsupported selector type?)".to_string()),
            domains: Vec::new(),
        }
    }

    pub fn compile_error(&self) -> Option<&str> {
        self.program.as_ref().err().map(String::as_str)
    }

    /// Evaluates against one device. Err: a compile error (prefixed "CEL compile error") or a
    /// runtime error (prefixed "CEL runtime error"), or a non-boolean result.
    /// Evaluates against one device. Err: a compile error (prefixed "CEL compile error") or a
    /// runtime error (prefixed "CEL runtime error"), or a non-boolean result.
    pub fn matches(&self, device: &Value) -> Result<bool, String> {
        self.matches_within(device, None).map_err(|e| match e {
            EvalError::Failed(m) => m,
            EvalError::TimedOut => "CEL runtime error: operation interrupted".to_string(),
        })
    }

    /// [`Self::matches`], stopped at `deadline` (checked inside the evaluation) and at
    /// upstream's cost limit.
    pub fn matches_within(
        &self,
        device: &Value,
        deadline: Option<Deadline>,
    ) -> Result<bool, EvalError> {
        let expr = match &self.program {
            Ok(p) => p,
            Err(e) => return Err(EvalError::Failed(format!("CEL compile error: {e}"))),
        };
        let root = root_context();
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("device", with_empty_domains(device, &self.domains));
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cel_budget::evaluate(expr, &ctx, deadline, &self.regexes)
        }));
        let failed = |m: String| Err(EvalError::Failed(format!("CEL runtime error: {m}")));
        match out {
            Ok(Ok(Ok(Value::Bool(b)))) => Ok(b),
            Ok(Ok(Ok(other))) => failed(format!(
                "expression must evaluate to a bool, got {}",
                other.type_of()
            )),
            Ok(Ok(Err(e))) => failed(describe(&e)),
            Ok(Err(Stop::Cost)) => failed(format!(
                "{COST_LIMIT_EXCEEDED} (the limit is {} per device; {TOO_MUCH_WORK})",
                thousands(MAX_COST)
            )),
            Ok(Err(Stop::Deadline)) => Err(EvalError::TimedOut),
            Err(_) => failed("evaluation failed".to_string()),
        }
    }
}

/// Why an evaluation gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// A compile or runtime error, worded for the user.
    Failed(String),
    /// The deadline passed during the evaluation.
    TimedOut,
}

const TOO_MUCH_WORK: &str = "the expression does too much work: fewer nested \
     all()/exists()/map() over large lists, or shorter strings";

/// Upstream's validation message for an expression whose estimated cost is over the limit.
const TOO_COMPLEX: &str = "too complex, exceeds cost limit";

fn too_expensive(cost: u64) -> String {
    let estimated = if cost == u64::MAX {
        "unbounded".to_string()
    } else {
        thousands(cost)
    };
    format!(
        "{TOO_COMPLEX} (estimated worst-case cost {estimated}, the limit is {} per device; \
         {TOO_MUCH_WORK})",
        thousands(MAX_COST)
    )
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

fn too_deep() -> String {
    format!(
        "expression is nested too deeply (more than {} levels of brackets, calls or chained \
         operators); split it into several selectors (a device must match each) or flatten it",
        cel_budget::MAX_DEPTH
    )
}

/// The parser's errors on one line each: message and column, without its debug output.
fn parse_errors(e: &cel::ParseErrors) -> String {
    // Past its nesting limit the parser reports follow-on errors that mean nothing.
    if e.errors.iter().any(|p| p.msg.contains("Recursion limit")) {
        return too_deep();
    }
    let lines: Vec<String> = e
        .errors
        .iter()
        .map(|p| {
            let msg = p.msg.lines().next().unwrap_or_default().trim();
            format!("{msg} (at column {})", p.pos.1 + 1)
        })
        .collect();
    let mut lines = lines;
    lines.dedup();
    lines.join("; ")
}

/// Collects `device.<field>["<domain>"]` with a literal domain, anywhere in the expression.
fn named_domains(e: &IdedExpr, out: &mut Vec<(&'static str, String)>) {
    match &e.expr {
        Expr::Call(c) => {
            if c.func_name == INDEX
                && let [map, key] = c.args.as_slice()
                && let Expr::Select(sel) = &map.expr
                && let Expr::Ident(var) = &sel.operand.expr
                && var == "device"
                && let Expr::Literal(LiteralValue::String(domain)) = &key.expr
            {
                let field = match sel.field.as_str() {
                    "attributes" => Some("attributes"),
                    "capacity" => Some("capacity"),
                    _ => None,
                };
                if let Some(f) = field {
                    out.push((f, domain.inner().to_string()));
                }
            }
            for a in c.target.iter().map(|t| &**t).chain(&c.args) {
                named_domains(a, out);
            }
        }
        Expr::Select(sel) => named_domains(&sel.operand, out),
        Expr::List(l) => l.elements.iter().for_each(|x| named_domains(x, out)),
        Expr::Map(m) => {
            for entry in &m.entries {
                match &entry.expr {
                    EntryExpr::MapEntry(me) => {
                        named_domains(&me.key, out);
                        named_domains(&me.value, out);
                    }
                    EntryExpr::StructField(f) => named_domains(&f.value, out),
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    named_domains(&f.value, out);
                }
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
                named_domains(x, out);
            }
        }
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

/// The device value with an empty map for each named domain it lacks (shared, not copied,
/// when it lacks none: the usual case).
fn with_empty_domains(device: &Value, domains: &[(&'static str, String)]) -> Value {
    let Value::Map(top) = device else {
        return device.clone();
    };
    let lacks = |field: &str, domain: &str| match top.map.get(&Key::from(field)) {
        Some(Value::Map(m)) => !m.map.contains_key(&Key::from(domain)),
        _ => false,
    };
    if !domains.iter().any(|(f, d)| lacks(f, d)) {
        return device.clone();
    }
    let mut outer: HashMap<Key, Value> = (*top.map).clone();
    for (field, domain) in domains {
        if !lacks(field, domain) {
            continue;
        }
        if let Some(Value::Map(m)) = outer.get_mut(&Key::from(*field)) {
            let mut inner: HashMap<Key, Value> = (*m.map).clone();
            inner.insert(
                Key::from(domain.as_str()),
                Value::from(HashMap::<Key, Value>::new()),
            );
            *m = cel::objects::Map {
                map: Arc::new(inner),
            };
        }
    }
    Value::from(outer)
}

fn describe(e: &ExecutionError) -> String {
    match e {
        // Upstream's hint for the most common mistake.
        ExecutionError::NoSuchKey(k) => format!(
            "no such key: {k} (check with `\"{k}\" in ...` or `has(...)` before reading an \
             attribute or capacity a device may not have)"
        ),
        other => other.to_string(),
    }
}

/// The functions every selector may call, registered once.
fn root_context() -> &'static Context<'static, 'static> {
    static ROOT: OnceLock<Context<'static, 'static>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let mut c = Context::default();
        cel_budget::register(&mut c);
        let add = |c: &mut Context<'static, 'static>, r: Result<(), cel::DeclarationError>| {
            debug_assert!(r.is_ok(), "{r:?}");
            let _ = c;
        };
        let r = c.add_function("quantity", quantity_fn);
        add(&mut c, r);
        let r = c.add_function("isQuantity", |s: Arc<String>| parse_quantity(&s).is_ok());
        add(&mut c, r);
        let r = c.add_function("semver", semver_fn);
        add(&mut c, r);
        let r = c.add_function("isSemver", |s: Arc<String>| Semver::parse(&s).is_ok());
        add(&mut c, r);
        let r = c.add_function("compareTo", compare_to);
        add(&mut c, r);
        let r = c.add_function("isLessThan", |This(a): This<Value>, b: Value| {
            compare("isLessThan", &a, &b).map(|o| o == Ordering::Less)
        });
        add(&mut c, r);
        let r = c.add_function("isGreaterThan", |This(a): This<Value>, b: Value| {
            compare("isGreaterThan", &a, &b).map(|o| o == Ordering::Greater)
        });
        add(&mut c, r);
        let r = c.add_function("add", |This(a): This<Value>, b: Value| {
            arith("add", &a, &b, 1)
        });
        add(&mut c, r);
        let r = c.add_function("sub", |This(a): This<Value>, b: Value| {
            arith("sub", &a, &b, -1)
        });
        add(&mut c, r);
        let r = c.add_function("sign", |This(a): This<Value>| {
            quantity_of("sign", &a).map(|q| q.nanos().signum() as i64)
        });
        add(&mut c, r);
        let r = c.add_function("isInteger", |This(a): This<Value>| {
            quantity_of("isInteger", &a).map(|q| q.nanos() % 1_000_000_000 == 0)
        });
        add(&mut c, r);
        let r = c.add_function("asInteger", |This(a): This<Value>| {
            let q = quantity_of("asInteger", &a)?;
            if q.nanos() % 1_000_000_000 != 0 || i64::try_from(q.nanos() / 1_000_000_000).is_err() {
                return Err(ExecutionError::function_error(
                    "asInteger",
                    "cannot convert value to integer",
                ));
            }
            Ok(q.value())
        });
        add(&mut c, r);
        let r = c.add_function("asApproximateFloat", |This(a): This<Value>| {
            quantity_of("asApproximateFloat", &a).map(|q| q.nanos() as f64 / 1e9)
        });
        add(&mut c, r);
        for (name, part) in [("major", 0usize), ("minor", 1), ("patch", 2)] {
            let r = c.add_function(name, move |This(a): This<Value>| {
                semver_of(name, &a).map(|v| v.core[part] as i64)
            });
            add(&mut c, r);
        }
        c
    })
}

/// A Kubernetes quantity as a CEL value (upstream's `kubernetes.Quantity` type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CelQuantity(pub Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn quantity_fn(s: Arc<String>) -> Result<Value, ExecutionError> {
    parse_quantity(&s)
        .map(|q| Value::Opaque(Arc::new(CelQuantity(q))))
        .map_err(|e| ExecutionError::function_error("quantity", format!("{s:?}: {e}")))
}

fn quantity_of(f: &str, v: &Value) -> Result<Quantity, ExecutionError> {
    match v {
        Value::Opaque(o) => o
            .downcast_ref::<CelQuantity>()
            .map(|q| q.0)
            .ok_or_else(|| type_error(f, v)),
        _ => Err(type_error(f, v)),
    }
}

fn semver_of<'a>(f: &str, v: &'a Value) -> Result<&'a Semver, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Semver>().ok_or_else(|| type_error(f, v)),
        _ => Err(type_error(f, v)),
    }
}

fn type_error(f: &str, v: &Value) -> ExecutionError {
    ExecutionError::function_error(f, format!("no such overload for {}", v.type_of()))
}

fn compare(f: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    if let Ok(qa) = quantity_of(f, a) {
        return Ok(qa.cmp(&quantity_of(f, b)?));
    }
    let va = semver_of(f, a)?;
    Ok(va.cmp(semver_of(f, b)?))
}

fn compare_to(This(a): This<Value>, b: Value) -> Result<i64, ExecutionError> {
    compare("compareTo", &a, &b).map(|o| o as i64)
}

fn arith(f: &str, a: &Value, b: &Value, sign: i128) -> Result<Value, ExecutionError> {
    let qa = quantity_of(f, a)?;
    let nb = match b {
        Value::Int(i) => i128::from(*i) * 1_000_000_000,
        other => quantity_of(f, other)?.nanos(),
    };
    let n = qa
        .nanos()
        .checked_add(sign * nb)
        .ok_or_else(|| ExecutionError::function_error(f, "overflow"))?;
    Ok(Value::Opaque(Arc::new(CelQuantity(Quantity::from_nanos(
        n,
    )))))
}

/// A semantic version (semver 2.0.0, strict) as a CEL value (upstream's `kubernetes.Semver`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Semver {
    core: [u64; 3],
    pre: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    pub fn parse(s: &str) -> Result<Semver, String> {
        let bad = || format!("{s:?} is not a valid semantic version");
        let without_build = s
            .split_once('+')
            .map_or(s, |(v, b)| if b.is_empty() { "" } else { v });
        let (core, pre) = match without_build.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (without_build, None),
        };
        let nums: Vec<&str> = core.split('.').collect();
        if nums.len() != 3 {
            return Err(bad());
        }
        let mut out = [0u64; 3];
        for (i, n) in nums.iter().enumerate() {
            let leading_zero = n.len() > 1 && n.starts_with('0');
            if n.is_empty() || leading_zero || !n.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            out[i] = n.parse().map_err(|_| bad())?;
        }
        let pre: Vec<String> = match pre {
            None => Vec::new(),
            Some(p) => {
                let parts: Vec<String> = p.split('.').map(str::to_string).collect();
                let ok = parts.iter().all(|x| {
                    !x.is_empty()
                        && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && !(x.len() > 1
                            && x.starts_with('0')
                            && x.bytes().all(|b| b.is_ascii_digit()))
                });
                if !ok {
                    return Err(bad());
                }
                parts
            }
        };
        Ok(Semver { core: out, pre })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Semver precedence: core numbers, then a release above any pre-release, then identifiers
/// one by one (numeric below alphanumeric).
impl Ord for Semver {
    fn cmp(&self, other: &Self) -> Ordering {
        self.core
            .cmp(&other.core)
            .then_with(|| match (self.pre.is_empty(), other.pre.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => {
                    for (a, b) in self.pre.iter().zip(&other.pre) {
                        let o = match (a.parse::<u64>(), b.parse::<u64>()) {
                            (Ok(x), Ok(y)) => x.cmp(&y),
                            (Ok(_), Err(_)) => Ordering::Less,
                            (Err(_), Ok(_)) => Ordering::Greater,
                            (Err(_), Err(_)) => a.cmp(b),
                        };
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    self.pre.len().cmp(&other.pre.len())
                }
            })
    }
}

fn semver_fn(s: Arc<String>) -> Result<Value, ExecutionError> {
    Semver::parse(&s)
        .map(|v| Value::Opaque(Arc::new(v)))
        .map_err(|e| ExecutionError::function_error("semver", e))
}

/// A device attribute's value (exactly one of the API's fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    Int(i64),
    Bool(bool),
    String(String),
    Version(String),
}

impl AttrValue {
    fn to_cel(&self) -> Value {
        match self {
            AttrValue::Int(i) => Value::Int(*i),
            AttrValue::Bool(b) => Value::Bool(*b),
            AttrValue::String(s) => Value::String(Arc::new(s.clone())),
            // A version the driver published that is not valid semver stays a string, so a
            // selector comparing it fails loudly rather than matching silently.
            AttrValue::Version(v) => match Semver::parse(v) {
                Ok(sv) => Value::Opaque(Arc::new(sv)),
                Err(_) => Value::String(Arc::new(v.clone())),
            },
        }
    }
}

/// Splits `domain/name` (a name without a domain belongs to the driver).
pub fn split_qualified<'a>(driver: &'a str, name: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The `device` variable for one device, built once per slice change.
pub fn device_value(
    driver: &str,
    attributes: &BTreeMap<String, AttrValue>,
    capacity: &BTreeMap<String, Quantity>,
) -> Value {
    fn by_domain<T>(
        driver: &str,
        items: &BTreeMap<String, T>,
        conv: impl Fn(&T) -> Value,
    ) -> Value {
        let mut domains: HashMap<String, HashMap<Key, Value>> = HashMap::new();
        // The driver's own domain always exists, so `"x" in device.attributes["<driver>"]`
        // works on a device without attributes.
        domains.entry(driver.to_string()).or_default();
        for (name, v) in items {
            let (domain, id) = split_qualified(driver, name);
            domains
                .entry(domain.to_string())
                .or_default()
                .insert(Key::from(id), conv(v));
        }
        let outer: HashMap<Key, Value> = domains
            .into_iter()
            .map(|(d, m)| (Key::from(d), Value::from(m)))
            .collect();
        Value::from(outer)
    }
    let mut m: HashMap<Key, Value> = HashMap::new();
    m.insert(
        Key::from("driver"),
        Value::String(Arc::new(driver.to_string())),
    );
    m.insert(
        Key::from("attributes"),
        by_domain(driver, attributes, AttrValue::to_cel),
    );
    m.insert(
        Key::from("capacity"),
        by_domain(driver, capacity, |q| {
            Value::Opaque(Arc::new(CelQuantity(*q)))
        }),
    );
    Value::from(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu() -> Value {
        let attrs: BTreeMap<String, AttrValue> = [
            ("model".to_string(), AttrValue::String("a100".into())),
            ("cores".to_string(), AttrValue::Int(108)),
            ("mig".to_string(), AttrValue::Bool(true)),
            (
                "driverVersion".to_string(),
                AttrValue::Version("1.2.3".into()),
            ),
            ("numa.example.com/node".to_string(), AttrValue::Int(1)),
        ]
        .into();
        let cap: BTreeMap<String, Quantity> =
            [("memory".to_string(), parse_quantity("40Gi").unwrap())].into();
        device_value("gpu.example.com", &attrs, &cap)
    }

    fn eval(expr: &str) -> Result<bool, String> {
        CelSelector::compile(expr).matches(&gpu())
    }

    #[test]
    fn device_environment() {
        let cases: &[(&str, bool)] = &[
            ("true", true),
            (r#"device.driver == "gpu.example.com""#, true),
            (r#"device.driver == "nic.example.com""#, false),
            (
                r#"device.attributes["gpu.example.com"].model == "a100""#,
                true,
            ),
            (r#"device.attributes["gpu.example.com"].cores > 100"#, true),
            (r#"device.attributes["gpu.example.com"].mig"#, true),
            (r#"device.attributes["numa.example.com"].node == 1"#, true),
            (r#""model" in device.attributes["gpu.example.com"]"#, true),
            (r#""vram" in device.attributes["gpu.example.com"]"#, false),
            // An unknown domain reads as an empty map (upstream), in either map.
            (r#""x" in device.attributes["unknown.example.com"]"#, false),
            (r#"size(device.capacity["unknown.example.com"]) == 0"#, true),
            (
                r#"!("x" in device.attributes["other.example.com"]) && device.attributes["gpu.example.com"].cores == 108"#,
                true,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("32Gi")) >= 0"#,
                true,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.isLessThan(quantity("80Gi"))"#,
                true,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory == quantity("40960Mi")"#,
                true,
            ),
            (
                r#"device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))"#,
                false,
            ),
            (r#"quantity("1.5").isInteger()"#, false),
            (r#"quantity("2k").asInteger() == 2000"#, true),
            (
                r#"quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")"#,
                true,
            ),
            (r#"quantity("1").sub(2).sign() == -1"#, true),
            (r#"isQuantity("1Gi") && !isQuantity("1 Gi")"#, true),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.2.0"))"#,
                true,
            ),
            (
                r#"device.attributes["gpu.example.com"].driverVersion.compareTo(semver("1.10.0")) < 0"#,
                true,
            ),
            (r#"semver("1.0.0-alpha").isLessThan(semver("1.0.0"))"#, true),
            (
                r#"semver("1.0.0-alpha.2").isLessThan(semver("1.0.0-alpha.10"))"#,
                true,
            ),
            (
                r#"semver("2.3.4").major() == 2 && semver("2.3.4").patch() == 4"#,
                true,
            ),
            (
                r#"isSemver("1.2.3") && !isSemver("1.2") && !isSemver("01.2.3")"#,
                true,
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), Ok(*want), "{expr}");
        }
    }

    #[test]
    fn errors_are_messages() {
        let e = eval("device.driver ==").unwrap_err();
        assert!(e.starts_with("CEL compile error"), "{e}");
        let e = eval(r#"device.attributes["gpu.example.com"].vram > 1"#).unwrap_err();
        assert!(e.starts_with("CEL runtime error: no such key: vram"), "{e}");
        // Reading a name in an unknown domain is still an error: the domain is empty.
        let e = eval(r#"device.attributes["unknown.example.com"].x == 1"#).unwrap_err();
        assert!(e.starts_with("CEL runtime error: no such key: x"), "{e}");
        let e = eval("device.driver").unwrap_err();
        assert!(e.contains("must evaluate to a bool"), "{e}");
        let e = eval(r#"quantity("lots") == quantity("1")"#).unwrap_err();
        assert!(e.contains("quantity") && e.contains("lots"), "{e}");
        let e = eval(r#"semver("1.2") == semver("1.2.0")"#).unwrap_err();
        assert!(e.contains("not a valid semantic version"), "{e}");
        let e = eval(r#"quantity("1").compareTo(semver("1.0.0")) == 0"#).unwrap_err();
        assert!(e.contains("compareTo"), "{e}");
        let long = format!("{} == 1", "1 + ".repeat(MAX_EXPRESSION_LEN / 4));
        let s = CelSelector::compile(&long);
        assert!(s.compile_error().unwrap().contains("limit"));
        assert!(CelSelector::compile("  ").compile_error().is_some());
        assert!(
            CelSelector::missing()
                .compile_error()
                .unwrap()
                .contains("unsupported")
        );
    }

    use super::super::cel_budget::{REGEX_CACHE_MAX, regex_cache_len};

    fn list(n: usize) -> String {
        let items: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        format!("[{}]", items.join(","))
    }

    /// Expressions nested deeper than the parser allows get one line saying so, not the
    /// parser's debug output.
    #[test]
    fn the_recursion_limit_is_one_clear_line() {
        let deep = format!("{}true{}", "(".repeat(200), ")".repeat(200));
        let e = CelSelector::compile(&deep)
            .compile_error()
            .unwrap()
            .to_string();
        assert!(!e.contains('\n') && !e.contains('{'), "{e}");
        assert!(e.contains("nested too deeply"), "{e}");
        // Chained operators nest without brackets: refused before anything evaluates them.
        let chain = format!("{}1 == 41", "1 + ".repeat(40));
        let e = CelSelector::compile(&chain)
            .compile_error()
            .unwrap()
            .to_string();
        assert!(e.contains("nested too deeply"), "{e}");
        // Other syntax errors: one line, with the column.
        let e = CelSelector::compile("device.driver ==")
            .compile_error()
            .unwrap()
            .to_string();
        assert!(!e.contains('\n') && e.contains("column"), "{e}");
    }

    use super::super::cel_budget::LAST_SPENT;

    /// The issue's hostile expressions: four nested all() over 100-element lists (10^8
    /// steps), strings built by nested map() (gigabytes) and doubled by `+`.
    fn hostile() -> Vec<String> {
        let l = list(100);
        let nested = format!("{l}.all(a, {l}.all(b, {l}.all(c, {l}.all(d, true))))");
        assert!(nested.len() < 1_300, "{}", nested.len());
        let l = list(60);
        let s = "x".repeat(64);
        let strings =
            format!("size({l}.map(a, {l}.map(b, {l}.map(c, {l}.map(d, \"{s}\" + \"{s}\"))))) > 0");
        assert!(strings.len() < 2_100, "{}", strings.len());
        let doubling = format!(
            "size([\"{s}\"]{}) > 0",
            (0..25)
                .map(|i| format!(".map(v{i}, v{i} + v{i})"))
                .collect::<String>()
        );
        vec![nested, strings, doubling]
    }

    /// Refused when compiled, with upstream's validation message and the estimate; the
    /// device is never evaluated.
    #[test]
    fn hostile_expressions_are_refused_when_compiled() {
        for expr in hostile() {
            let sel = CelSelector::compile(&expr);
            let e = sel.compile_error().unwrap_or_default().to_string();
            assert!(
                e.starts_with("too complex, exceeds cost limit (estimated worst-case cost "),
                "{e}"
            );
            assert!(e.contains("the limit is 1,000,000 per device"), "{e}");
            LAST_SPENT.with(|c| c.set(None));
            let m = sel.matches(&gpu()).unwrap_err();
            assert!(m.starts_with("CEL compile error: too complex"), "{m}");
            assert_eq!(LAST_SPENT.with(|c| c.get()), None, "evaluated: {expr}");
        }
    }

    /// The runtime limit stays as the backstop: the same expressions, compiled without the
    /// estimate, stop with cel-go's message, quickly.
    #[test]
    fn hostile_expressions_stop_at_the_runtime_cost_limit() {
        for expr in hostile() {
            let started = std::time::Instant::now();
            let e = CelSelector::compile_unestimated(&expr)
                .matches(&gpu())
                .unwrap_err();
            assert!(
                e.contains("operation cancelled: actual cost limit exceeded"),
                "{e}"
            );
            assert!(started.elapsed() < std::time::Duration::from_secs(30));
        }
    }

    /// Selectors the estimate cannot see the cost of: a device beyond the API's limits
    /// (here 300 attributes in one domain, 32 allowed) costs more than estimated, and the
    /// runtime limit stops it.
    #[test]
    fn a_device_beyond_the_api_limits_stops_at_the_runtime_limit() {
        let d = r#"device.attributes["gpu.example.com"]"#;
        let expr = format!("{d}.all(a, {d}.all(b, {d}.all(c, size(a + b + c) > 0)))");
        let sel = CelSelector::compile(&expr);
        assert_eq!(sel.compile_error(), None);
        assert_eq!(sel.matches(&gpu()), Ok(true));
        let attrs: BTreeMap<String, AttrValue> = (0..300)
            .map(|i| (format!("a{i}"), AttrValue::Int(i)))
            .collect();
        let big = device_value("gpu.example.com", &attrs, &BTreeMap::new());
        let e = sel.matches(&big).unwrap_err();
        assert!(e.contains("actual cost limit exceeded"), "{e}");
    }

    /// Work well under the limit compiles and runs: a comprehension over a device's
    /// attributes, map/filter, string concatenation, one all() over a literal list,
    /// matches(), the selectors of the docs and examples.
    #[test]
    fn ordinary_selectors_stay_under_the_limit() {
        for expr in [
            r#"device.attributes["gpu.example.com"].all(k, k != "")"#,
            r#"device.attributes["gpu.example.com"].exists(k, k == "model")"#,
            r#"[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2"#,
            r#"device.attributes["gpu.example.com"].model + "-x" == "a100-x""#,
            r#"["a100", "h100"].all(m, m.matches("^[ah][0-9]+$"))"#,
            r#"["a100", "h100"].exists(m, device.attributes["gpu.example.com"].model == m)"#,
            r#"device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")"#,
            r#"device.driver == "gpu.example.com" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
        ] {
            let sel = CelSelector::compile(expr);
            assert_eq!(sel.compile_error(), None, "{expr}");
            assert_eq!(sel.matches(&gpu()), Ok(true), "{expr}");
        }
        let l = list(100);
        assert_eq!(eval(&format!("{l}.all(a, {l}.all(b, true))")), Ok(true));
    }

    /// Every selector of the repository's tests, docs and seed dumps (the fuzz seeds
    /// collect them) is under the estimate.
    #[test]
    fn no_seed_selector_is_too_complex() {
        let seeds = include_str!("../../../../fuzz/seeds/cel.txt");
        let mut n = 0;
        for line in seeds.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            n += 1;
            let e = CelSelector::compile(line)
                .compile_error()
                .map(str::to_string);
            assert!(
                !e.as_deref().unwrap_or_default().contains("too complex"),
                "{line}: {e:?}"
            );
        }
        assert!(n > 40, "{n}");
    }

    /// The estimate is an upper bound on what an evaluation charges for a device within the
    /// API's limits, and exact when everything is a literal (the estimate and the runtime
    /// agree on how each comprehension is charged).
    #[test]
    fn the_estimate_bounds_the_runtime_cost() {
        let exact = [
            "[1, 2, 3].all(x, x > 0)",
            "![1, 2, 3].exists(x, x > 5)",
            "![2, 2, 2].exists_one(x, x == 2)",
            r#"["abcdefghijklmnopqrstuvwxyz", "zyxwvutsrqponmlkjihgfedcba"].map(x, x + x).size() == 2"#,
            r#"["abcdefghijklmnopqrstuvwxyz", "zyxwvutsrqponmlkjihgfedcba"].map(x, x != "", [x]).size() == 2"#,
            r#"["abcdefghijklmnopqrstuvwxyz", "zyxwvutsrqponmlkjihgfedcba"].filter(x, x != "").size() == 2"#,
            "[[1, 2, 3], [4, 5, 6]].all(l, l.all(x, x > 0))",
            r#"{"a": [1, 2]}["a"].map(x, [x, x]).size() == 2"#,
            r#""0123456789abcdefghij".matches("^0")"#,
        ];
        let bounded = [
            r#"device.attributes["gpu.example.com"].all(k, k != "")"#,
            r#"device.attributes["gpu.example.com"].map(k, k + "-" + device.driver).size() > 0"#,
            r#"device.attributes.all(d, device.attributes[d].all(k, k != ""))"#,
            r#"[device.attributes["gpu.example.com"]].size() == 1"#,
            r#"device.attributes["gpu.example.com"].model.matches("^a")"#,
            r#"[device].map(d, d.driver).filter(x, x.size() > 3).size() == 1"#,
            r#"device.capacity["gpu.example.com"].exists(k, k == "memory")"#,
            r#"string(device.attributes["gpu.example.com"].cores) + "x" == "108x""#,
            r#"["abcdefghijklmnopqrstuvwxyz", "b"].map(x, x + x).size() == 2"#,
            "[1, 2, 3].exists_one(x, x == 2)",
            "[[1, 2], [3, 4, 5]].all(l, l.all(x, x > 0))",
        ];
        for (expr, is_exact) in exact
            .iter()
            .map(|e| (e, true))
            .chain(bounded.iter().map(|e| (e, false)))
        {
            let sel = CelSelector::compile(expr);
            let Ok(parsed) = Program::compile(expr) else {
                panic!("{expr}")
            };
            let estimate = super::super::cel_estimate::estimate(parsed.expression(), 0);
            LAST_SPENT.with(|c| c.set(None));
            assert_eq!(sel.matches(&gpu()), Ok(true), "{expr}");
            let spent = LAST_SPENT.with(|c| c.get()).unwrap();
            assert!(spent > 0, "{expr}");
            if is_exact {
                assert_eq!(spent, estimate, "{expr}");
            } else {
                assert!(
                    spent <= estimate,
                    "{expr}: spent {spent}, estimated {estimate}"
                );
            }
        }
    }

    thread_local! {
        static CLOCK_CALLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// A clock whose first reading is "now" and every later one an hour on.
    fn jumping_clock() -> std::time::Instant {
        static T0: OnceLock<std::time::Instant> = OnceLock::new();
        let t0 = *T0.get_or_init(std::time::Instant::now);
        let n = CLOCK_CALLS.with(|c| {
            c.set(c.get() + 1);
            c.get()
        });
        if n <= 1 {
            t0
        } else {
            t0 + std::time::Duration::from_secs(3600)
        }
    }

    /// The deadline (DynamicResources' filterTimeout) is checked inside one evaluation,
    /// not only between evaluations.
    #[test]
    fn the_deadline_stops_one_evaluation() {
        let expr = format!("{}.all(x, true)", list(1000));
        let sel = CelSelector::compile(&expr);
        CLOCK_CALLS.with(|c| c.set(0));
        let deadline = Deadline {
            now: jumping_clock,
            at: jumping_clock() + std::time::Duration::from_secs(60),
        };
        assert_eq!(
            sel.matches_within(&gpu(), Some(deadline)),
            Err(EvalError::TimedOut)
        );
        let far = Deadline {
            now: std::time::Instant::now,
            at: std::time::Instant::now() + std::time::Duration::from_secs(3600),
        };
        assert_eq!(sel.matches_within(&gpu(), Some(far)), Ok(true));
    }

    /// A constant pattern is compiled once, with the expression; an invalid one is a compile
    /// error. A pattern computed at run time is compiled once per process (bounded cache).
    #[test]
    fn regexes_are_compiled_once() {
        let sel = CelSelector::compile(
            r#"device.attributes["gpu.example.com"].model.matches("^a[0-9]+$")"#,
        );
        assert_eq!(sel.regexes.len(), 1);
        assert_eq!(sel.matches(&gpu()), Ok(true));
        let bad = CelSelector::compile(r#"device.driver.matches("(")"#);
        assert!(
            bad.compile_error().unwrap().contains("not a valid regex"),
            "{:?}",
            bad.compile_error()
        );
        let computed = r#"device.driver.matches("^gpu" + "\\.example")"#;
        assert_eq!(eval(computed), Ok(true));
        let before = regex_cache_len();
        assert_eq!(eval(computed), Ok(true));
        assert_eq!(regex_cache_len(), before);
        assert!(before <= REGEX_CACHE_MAX);
        // The receiver form and the global form both work.
        assert_eq!(eval(r#"matches(device.driver, "example")"#), Ok(true));
        assert_eq!(eval(r#"device.driver.matches("^nic")"#), Ok(false));
    }
}
