//! A selector's worst-case cost, estimated once when it is compiled, in the units the
//! runtime budget charges ([`super::cel_budget`]): an expression whose estimate exceeds
//! the limit is refused then, as the API server refuses it when a DeviceClass or claim is
//! written (`too complex, exceeds cost limit`), instead of failing on every device.
//!
//! One pass over the parsed expression gives each node a cost (what evaluating it may
//! charge) and a bound on its value (its size in cost units, how many elements it may
//! iterate over, and what those elements are). A comprehension costs its range, plus the
//! range's maximum length times one iteration's charge and body, so nested loops multiply.
//! Literals are known exactly; the `device` variable is bounded by the API's limits on a
//! ResourceSlice's devices ([`MAX_ATTRIBUTES`] attributes and capacities, strings of
//! [`MAX_VALUE_LEN`] bytes, ...); what `map`, `filter` and `+` build is bounded from their
//! operands. A function the environment does not define fails when called, so its result
//! never costs anything.
//!
//! The estimate is an upper bound for devices within those limits; a device beyond them
//! (a dump or a slice the API server did not validate) can cost more, and the runtime
//! limit stops it then. The units are the runtime's, not cel-go's, so an expression near
//! the limit may be accepted here and refused by the API server, or the reverse; the
//! hostile ones (nested loops over large lists, strings built by nested `map`) are far
//! over it in both.

use std::rc::Rc;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};

/// Upstream `ResourceSliceMaxAttributesAndCapacitiesPerDevice`: entries of one device's
/// attributes and capacity together (so also of one domain's map).
const MAX_ATTRIBUTES: u64 = 32;
/// Upstream `DeviceAttributeMaxValueLength`: a string or version attribute's bytes.
const MAX_VALUE_LEN: u64 = 64;
/// Upstream `DeviceMaxIDLength`: the name of an attribute or capacity within its domain.
const MAX_ID_LEN: u64 = 32;
/// Upstream `DeviceMaxDomainLength` and `DriverNameMaxLength`.
const MAX_DOMAIN_LEN: u64 = 63;
/// The longest `string(x)` of a number, bool, timestamp or duration (`string(5e-324)`).
const MAX_CONVERTED_LEN: u64 = 330;

/// What is known of a value: upper bounds, never exact sizes.
#[derive(Debug, Clone, PartialEq)]
struct Bound {
    /// Not a string, bytes, list or map: `+` on two of them is arithmetic, not a copy.
    scalar: bool,
    /// Its size in the runtime's units (1 per value, 1 per 10 bytes, its elements).
    size: u64,
    /// Elements of a list or entries of a map; 0 for anything else.
    len: u64,
    /// What an iteration yields (a list's elements, a map's keys); `None`: unknown.
    item: Option<Rc<Bound>>,
    /// What an index or field yields (a list's elements, a map's values); `None`: unknown.
    value: Option<Rc<Bound>>,
    /// A record's fields by name (the `device` variable).
    fields: Option<Rc<Vec<(&'static str, Bound)>>>,
}

impl Bound {
    fn scalar() -> Bound {
        Bound {
            scalar: true,
            size: 1,
            len: 0,
            item: None,
            value: None,
            fields: None,
        }
    }

    /// A string (or bytes) of at most `bytes` bytes.
    fn string(bytes: u64) -> Bound {
        Bound {
            scalar: false,
            size: 1 + bytes / 10,
            ..Bound::scalar()
        }
    }

    fn unknown() -> Bound {
        Bound {
            scalar: false,
            size: u64::MAX,
            len: u64::MAX,
            ..Bound::scalar()
        }
    }

    /// A map of at most `len` entries.
    fn map(len: u64, key: Bound, value: Bound) -> Bound {
        Bound {
            scalar: false,
            size: len.saturating_mul(1 + value.size).saturating_add(1),
            len,
            item: Some(Rc::new(key)),
            value: Some(Rc::new(value)),
            fields: None,
        }
    }

    /// A list of at most `len` elements bounded by `elem`.
    fn list(len: u64, elem: Bound) -> Bound {
        let elem = Rc::new(elem);
        Bound {
            scalar: false,
            size: len.saturating_mul(elem.size).saturating_add(1),
            len,
            item: Some(elem.clone()),
            value: Some(elem),
            fields: None,
        }
    }

    fn part(&self, p: &Option<Rc<Bound>>) -> Bound {
        match p {
            Some(b) => (**b).clone(),
            // Indexing or iterating what has no elements fails, or never runs.
            None if self.len == 0 => Bound::scalar(),
            None => Bound::unknown(),
        }
    }

    fn item(&self) -> Bound {
        self.part(&self.item)
    }

    fn value(&self) -> Bound {
        self.part(&self.value)
    }

    fn field(&self, name: &str) -> Bound {
        match self
            .fields
            .as_ref()
            .and_then(|f| f.iter().find(|(n, _)| *n == name))
        {
            Some((_, b)) => b.clone(),
            None => self.value(),
        }
    }

    /// Either of two values.
    fn join(&self, other: &Bound) -> Bound {
        let part = |a: &Bound, b: &Bound, pa: &Option<Rc<Bound>>, pb: &Option<Rc<Bound>>| match (
            a.len, b.len,
        ) {
            (0, _) => pb.clone(),
            (_, 0) => pa.clone(),
            _ => match (pa, pb) {
                (Some(x), Some(y)) if x == y => Some(x.clone()),
                (Some(x), Some(y)) => Some(Rc::new(x.join(y))),
                _ => None,
            },
        };
        Bound {
            scalar: self.scalar && other.scalar,
            size: self.size.max(other.size),
            len: self.len.max(other.len),
            item: part(self, other, &self.item, &other.item),
            value: part(self, other, &self.value, &other.value),
            fields: match (&self.fields, &other.fields) {
                (Some(a), Some(b)) if a == b => Some(a.clone()),
                _ => None,
            },
        }
    }

    /// `a + b`: a sum, or a concatenation no larger than both operands together.
    fn concat(&self, other: &Bound) -> Bound {
        if self.scalar && other.scalar {
            return Bound::scalar();
        }
        let joined = self.join(other);
        Bound {
            scalar: false,
            size: self.size.saturating_add(other.size),
            len: self.len.saturating_add(other.len),
            fields: None,
            ..joined
        }
    }
}

/// The `device` variable: the driver, and attributes and capacity by domain. A device has
/// its driver's domain even when empty, and an empty map for each domain the expression
/// names (`named` of them), so there are up to `MAX_ATTRIBUTES + 1 + named` domains.
fn device(named: u64) -> Bound {
    let domain = Bound::string(MAX_DOMAIN_LEN);
    let domains = (MAX_ATTRIBUTES + 1).saturating_add(named);
    let by_domain = |value: Bound| {
        let inner = Bound::map(MAX_ATTRIBUTES, Bound::string(MAX_ID_LEN), value);
        Bound::map(domains, domain.clone(), inner)
    };
    // An attribute is an int, bool, semver or string; quantities are opaque values.
    let attribute = Bound::string(MAX_VALUE_LEN);
    let fields = vec![
        ("driver", Bound::string(MAX_DOMAIN_LEN)),
        ("attributes", by_domain(attribute)),
        ("capacity", by_domain(Bound::scalar())),
    ];
    let mut any = Bound::scalar();
    for (_, f) in &fields {
        any = any.join(f);
    }
    Bound {
        fields: Some(Rc::new(fields)),
        ..Bound::map(3, Bound::string(10), any)
    }
}

/// The worst-case cost of evaluating `e` once, saturating at `u64::MAX`. `named` is how
/// many `device.attributes["d"]` / `device.capacity["d"]` domains it names literally.
pub fn estimate(e: &IdedExpr, named: usize) -> u64 {
    let mut est = Estimator {
        scope: Vec::new(),
        device: device(named as u64),
    };
    est.expr(e).0
}

struct Estimator {
    /// Comprehension variables, innermost last.
    scope: Vec<(String, Bound)>,
    device: Bound,
}

fn is_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

/// What the runtime charges to copy `e`'s value (`@size`): nothing for a literal.
fn copy(e: &IdedExpr, b: &Bound) -> u64 {
    if is_literal(e) { 0 } else { b.size }
}

fn is_accu(e: &IdedExpr, accu: &str) -> bool {
    matches!(&e.expr, Expr::Ident(n) if n == accu)
}

/// `@result + [e]`: the element appended.
fn appended<'a>(e: &'a IdedExpr, accu: &str) -> Option<&'a IdedExpr> {
    let Expr::Call(add) = &e.expr else {
        return None;
    };
    if add.func_name != operators::ADD || add.target.is_some() {
        return None;
    }
    match add.args.as_slice() {
        [lhs, rhs] if is_accu(lhs, accu) => match &rhs.expr {
            Expr::List(l) if l.elements.len() == 1 => l.elements.first(),
            _ => None,
        },
        _ => None,
    }
}

fn literal(l: &LiteralValue) -> Bound {
    match l {
        LiteralValue::String(s) => Bound::string(s.inner().len() as u64),
        LiteralValue::Bytes(b) => Bound::string(b.inner().len() as u64),
        _ => Bound::scalar(),
    }
}

impl Estimator {
    fn lookup(&self, name: &str) -> Bound {
        match self.scope.iter().rev().find(|(n, _)| n == name) {
            Some((_, b)) => b.clone(),
            None if name == "device" => self.device.clone(),
            // An undeclared variable fails when read.
            None => Bound::scalar(),
        }
    }

    fn with<T>(&mut self, name: &str, b: Bound, f: impl FnOnce(&mut Self) -> T) -> T {
        self.scope.push((name.to_string(), b));
        let out = f(self);
        self.scope.pop();
        out
    }

    /// (cost, bound) of one expression.
    fn expr(&mut self, e: &IdedExpr) -> (u64, Bound) {
        match &e.expr {
            Expr::Literal(l) => (0, literal(l)),
            Expr::Ident(name) => (0, self.lookup(name)),
            Expr::Select(s) => {
                let (c, b) = self.expr(&s.operand);
                if s.test {
                    (c, Bound::scalar())
                } else {
                    (c, b.field(&s.field))
                }
            }
            Expr::Call(call) => {
                let operands: Vec<&IdedExpr> = call
                    .target
                    .as_deref()
                    .into_iter()
                    .chain(&call.args)
                    .collect();
                self.call(&call.func_name, &operands)
            }
            Expr::List(l) => {
                let mut cost = 0u64;
                let mut size = 1u64;
                let mut elem: Option<Bound> = None;
                for x in &l.elements {
                    let (c, b) = self.expr(x);
                    cost = cost.saturating_add(c).saturating_add(copy(x, &b));
                    size = size.saturating_add(b.size);
                    elem = Some(match elem {
                        Some(prev) => prev.join(&b),
                        None => b,
                    });
                }
                let n = l.elements.len() as u64;
                let list = Bound::list(n, elem.unwrap_or_else(Bound::scalar));
                (cost, Bound { size, ..list })
            }
            Expr::Map(m) => {
                let mut cost = 0u64;
                let mut size = 1u64;
                let (mut keys, mut values) = (None::<Bound>, None::<Bound>);
                for entry in &m.entries {
                    let (k, v) = match &entry.expr {
                        EntryExpr::MapEntry(me) => {
                            let (ck, bk) = self.expr(&me.key);
                            let (cv, bv) = self.expr(&me.value);
                            let c = ck.saturating_add(cv).saturating_add(copy(&me.value, &bv));
                            cost = cost.saturating_add(c);
                            (bk, bv)
                        }
                        EntryExpr::StructField(f) => {
                            let (c, b) = self.expr(&f.value);
                            cost = cost.saturating_add(c);
                            (Bound::string(f.field.len() as u64), b)
                        }
                    };
                    size = size.saturating_add(1).saturating_add(v.size);
                    keys = Some(keys.map_or(k.clone(), |p| p.join(&k)));
                    values = Some(values.map_or(v.clone(), |p| p.join(&v)));
                }
                let n = m.entries.len() as u64;
                let map = Bound::map(
                    n,
                    keys.unwrap_or_else(Bound::scalar),
                    values.unwrap_or_else(Bound::scalar),
                );
                (cost, Bound { size, ..map })
            }
            Expr::Struct(s) => {
                let mut cost = 0u64;
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost = cost.saturating_add(self.expr(&f.value).0);
                    }
                }
                (cost, Bound::scalar())
            }
            Expr::Comprehension(c) => self.comprehension(c),
            Expr::Unspecified => (0, Bound::scalar()),
        }
    }

    fn call(&mut self, name: &str, operands: &[&IdedExpr]) -> (u64, Bound) {
        let evaluated: Vec<(u64, Bound)> = operands.iter().map(|o| self.expr(o)).collect();
        let mut cost = evaluated
            .iter()
            .fold(0u64, |acc, (c, _)| acc.saturating_add(*c));
        let bound = |i: usize| {
            evaluated
                .get(i)
                .map_or_else(Bound::scalar, |(_, b)| b.clone())
        };
        let joined = || {
            evaluated
                .iter()
                .map(|(_, b)| b.clone())
                .reduce(|a, b| a.join(&b))
                .unwrap_or_else(Bound::scalar)
        };
        let out = match name {
            operators::ADD => {
                for (o, (_, b)) in operands.iter().zip(&evaluated) {
                    cost = cost.saturating_add(copy(o, b));
                }
                bound(0).concat(&bound(1))
            }
            operators::CONDITIONAL => {
                // One branch runs.
                let branch = |i: usize| evaluated.get(i).map_or(0, |(c, _)| *c);
                cost = branch(0).saturating_add(branch(1).max(branch(2)));
                bound(1).join(&bound(2))
            }
            operators::INDEX | operators::OPT_INDEX => match operands.get(1).map(|k| &k.expr) {
                Some(Expr::Literal(LiteralValue::String(k))) => bound(0).field(k.inner()),
                _ => bound(0).value(),
            },
            operators::OPT_SELECT => match operands.get(1).map(|k| &k.expr) {
                Some(Expr::Literal(LiteralValue::String(k))) => bound(0).field(k.inner()),
                _ => bound(0).value(),
            },
            // Charged per byte of the string matched (the pattern is compiled once).
            "matches" => {
                cost = cost.saturating_add(bound(0).size);
                Bound::scalar()
            }
            // One of their operands, unchanged (or wrapped in an optional).
            "dyn" | "optional.of" | "optional.ofNonZeroValue" | "value" | "or" | "orValue" => {
                joined()
            }
            // A conversion of a string or bytes keeps its length.
            "string" | "bytes" => {
                let converted = Bound::string(MAX_CONVERTED_LEN);
                Bound {
                    size: converted.size.max(bound(0).size),
                    ..converted
                }
            }
            // Everything else the environment defines returns a number, bool, quantity,
            // semver, timestamp or duration; a function it does not define fails.
            _ => Bound::scalar(),
        };
        (cost, out)
    }

    /// Mirrors the shapes `cel_budget::instrument_loop` charges (the parser's macros).
    fn comprehension(&mut self, c: &ComprehensionExpr) -> (u64, Bound) {
        if c.iter_var2.is_some() {
            // The parser's macros never make two-variable loops.
            return (u64::MAX, Bound::unknown());
        }
        let (range_cost, range) = self.expr(&c.iter_range);
        let (init_cost, init) = self.expr(&c.accu_init);
        let n = range.len;
        let item = range.item();
        let accu = c.accu_var.as_str();
        let append_shape = is_accu(&c.result, accu) && is_literal(&c.loop_cond);
        let conditional = match &c.loop_step.expr {
            Expr::Call(cond)
                if cond.func_name == operators::CONDITIONAL && cond.target.is_none() =>
            {
                match cond.args.as_slice() {
                    [g, step, otherwise] if is_accu(otherwise, accu) => {
                        appended(step, accu).map(|e| (g, e))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        let fold = match &c.loop_step.expr {
            Expr::Call(f)
                if (f.func_name == operators::LOGICAL_AND
                    || f.func_name == operators::LOGICAL_OR)
                    && f.target.is_none() =>
            {
                match f.args.as_slice() {
                    [lhs, p] if is_accu(lhs, accu) => Some(p),
                    _ => None,
                }
            }
            _ => None,
        };
        let iter_var = c.iter_var.clone();
        // (one iteration's cost, the accumulator's bound after the loop)
        let (per_iteration, accu_bound) = self.with(&c.accu_var, init.clone(), |est| {
            est.with(&iter_var, item.clone(), |est| {
                let step = |value: u64| 1u64.saturating_add(item.size).saturating_add(value);
                if append_shape && let Some(e) = appended(&c.loop_step, accu) {
                    // map: `@step(e, item)`.
                    let (ce, be) = est.expr(e);
                    (step(be.size).saturating_add(ce), Bound::list(n, be))
                } else if append_shape && let Some((g, e)) = conditional {
                    // filter, 3-argument map: `@step(g, item) ? @result + [@size(e)] : ...`.
                    let (cg, bg) = est.expr(g);
                    let (ce, be) = est.expr(e);
                    let cost = step(bg.size)
                        .saturating_add(cg)
                        .saturating_add(ce)
                        .saturating_add(copy(e, &be));
                    (cost, Bound::list(n, be))
                } else {
                    let cond = if is_literal(&c.loop_cond) {
                        0
                    } else {
                        est.expr(&c.loop_cond).0
                    };
                    if let Some(p) = &fold {
                        // all, exists: `@result && @step(p, item)`.
                        let (cp, bp) = est.expr(p);
                        let cost = step(bp.size).saturating_add(cp).saturating_add(cond);
                        (cost, init.join(&Bound::scalar()))
                    } else {
                        // exists_one: `@step(p ? @result + 1 : @result, item)`, an int
                        // throughout. An accumulator that grows is not bounded here.
                        let (cs, bs) = est.expr(&c.loop_step);
                        let cost = step(bs.size).saturating_add(cs).saturating_add(cond);
                        if init.scalar && bs.scalar {
                            (cost, Bound::scalar())
                        } else {
                            (u64::MAX, Bound::unknown())
                        }
                    }
                }
            })
        });
        let (result_cost, result) = self.with(&c.accu_var, accu_bound, |est| est.expr(&c.result));
        let cost = range_cost
            .saturating_add(init_cost)
            .saturating_add(n.saturating_mul(per_iteration))
            .saturating_add(result_cost);
        (cost, result)
    }
}
