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
//! limit). The `cel` crate has no cost tracking; what an expression can walk is bounded by
//! the device (at most 32 attributes and capacities by API validation), so evaluation time is
//! bounded by the expression size.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::operators::INDEX;
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::extractors::This;
use cel::objects::{Key, Opaque, Value};
use cel::{Context, ExecutionError, IdedExpr, Program};

use crate::types::quantity::{Quantity, parse_quantity};

/// Upstream's limit on a selector expression's length.
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;

/// One compiled `cel.expression`; the compile error, if any, is kept for the allocator to
/// report (a class or claim with a bad selector is an error, never ignored).
#[derive(Clone)]
pub struct CelSelector {
    pub expression: String,
    program: Result<Arc<Program>, String>,
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
        let program = if expression.len() > MAX_EXPRESSION_LEN {
            Err(format!(
                "expression is {} bytes long, the limit is {MAX_EXPRESSION_LEN}",
                expression.len()
            ))
        } else if expression.trim().is_empty() {
            Err("empty expression".to_string())
        } else {
            // The parser is generated code: never let a panic in it take the scheduler down.
            match std::panic::catch_unwind(|| Program::compile(expression)) {
                Ok(Ok(p)) => Ok(Arc::new(p)),
                Ok(Err(e)) => Err(e.to_string().trim().to_string()),
                Err(_) => Err("the CEL parser failed on this expression".to_string()),
            }
        };
        let mut domains = Vec::new();
        if let Ok(p) = &program {
            named_domains(p.expression(), &mut domains);
            domains.sort();
            domains.dedup();
        }
        CelSelector {
            expression: expression.to_string(),
            program,
            domains,
        }
    }

    /// A selector without an expression (a future selector type this version does not know).
    pub fn missing() -> Self {
        CelSelector {
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
    pub fn matches(&self, device: &Value) -> Result<bool, String> {
        let program = match &self.program {
            Ok(p) => p,
            Err(e) => return Err(format!("CEL compile error: {e}")),
        };
        let root = root_context();
        let mut ctx = root.new_inner_scope();
        ctx.add_variable_from_value("device", with_empty_domains(device, &self.domains));
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| program.execute(&ctx)));
        match out {
            Ok(Ok(Value::Bool(b))) => Ok(b),
            Ok(Ok(other)) => Err(format!(
                "CEL runtime error: expression must evaluate to a bool, got {}",
                other.type_of()
            )),
            Ok(Err(e)) => Err(format!("CEL runtime error: {}", describe(&e))),
            Err(_) => Err("CEL runtime error: evaluation failed".to_string()),
        }
    }
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
}
