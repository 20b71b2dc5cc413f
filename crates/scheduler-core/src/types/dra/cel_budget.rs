//! Bounds on one CEL selector evaluation: a cost limit (upstream's
//! `resourceapi.CELSelectorExpressionMaxCost`, 1,000,000, with cel-go's message
//! `operation cancelled: actual cost limit exceeded`), a deadline checked inside the
//! evaluation (DynamicResources' `filterTimeout`), regexes compiled once, and a limit on
//! how deeply an expression may nest.
//!
//! The `cel` crate counts no cost and offers no hook inside its interpreter, so cost is
//! charged by hidden functions the compiled expression is rewritten to call (their names
//! start with `@`, which CEL source cannot spell). They return their first argument
//! untouched (borrowed, never copied) after charging:
//!
//! * `@step(x, item)` on every comprehension iteration (`all`, `exists`, `exists_one`,
//!   `map`, `filter`): 1, plus the size of the element the iteration copied and of what the
//!   step produced;
//! * `@size(x)` on every operand of `+` and every element of a list or map literal: the
//!   size of what the interpreter is about to copy or concatenate;
//! * `@check(x)` on the condition of loops whose errors the interpreter defers (`all`,
//!   `exists`), so the loop stops at once when the budget is gone.
//!
//! Sizes are cel-go's units: 1 per value, plus 1 per 10 bytes of a string or bytes, plus a
//! list's or map's elements. Every value the interpreter allocates is either a literal, the
//! device, or the result of one of the charged operations, so the memory one evaluation
//! holds is bounded by the limit (about 10 MB), and its time by the limit and the deadline,
//! which is checked every [`CHECK_FREQUENCY`] charges (cel-go's interrupt frequency). The
//! units differ from cel-go's in detail (cel-go charges every node; this charges iterations
//! and copies), so an expression near the limit upstream may land on either side of it
//! here; the hostile ones (nested loops over large lists, strings built by nested `map`)
//! stop in milliseconds either way.
//!
//! An expression whose estimated worst case is over the limit never gets here: it is
//! refused when compiled ([`super::cel_estimate`], in these units). This limit stops what
//! the estimate cannot bound: a device beyond the API's limits on attributes and strings.
//!
//! Why not a step budget alone, or a deadline alone: a deadline checked only between
//! iterations does not bound memory (30 iterations of `map(s, s + s)` reach gigabytes), and
//! counting iterations does not bound the size of what each one copies.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cel::common::ast::{ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use cel::common::types::{CelBool, CelBytes, CelInt, CelList, CelMap, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Context, ExecutionError, FunctionContext, Value};
use regex::Regex;

/// Upstream's per-evaluation cost limit for DRA selectors
/// (`resourceapi.CELSelectorExpressionMaxCost`).
pub const MAX_COST: u64 = 1_000_000;
/// cel-go's message when the runtime cost limit is reached.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";
/// How often (in charges) the deadline is read (upstream's `celconfig.CheckFrequency`).
pub const CHECK_FREQUENCY: u64 = 100;
/// Patterns computed at run time kept compiled per process.
pub const REGEX_CACHE_MAX: usize = 256;
/// Deepest expression tree accepted (chains of operators such as `a + b + c` nest without
/// brackets; the parser's own limit is 96 nested brackets). The interpreter recurses a few
/// frames per level on the thread that evaluates, so the depth is kept well below what a
/// scheduler thread's stack holds.
pub const MAX_DEPTH: usize = 32;

const STEP: &str = "@step";
const SIZE: &str = "@size";
const CHECK: &str = "@check";
const MATCHES: &str = "@matches";

/// A point in time past which an evaluation stops (DynamicResources' `filterTimeout`).
/// A function and an instant rather than a closure, so it can be kept for the duration of
/// one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub now: fn() -> Instant,
    pub at: Instant,
}

impl Deadline {
    pub fn passed(&self) -> bool {
        (self.now)() >= self.at
    }
}

/// Why an evaluation was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Cost,
    Deadline,
}

struct Meter {
    remaining: Cell<u64>,
    charges: Cell<u64>,
    deadline: Option<Deadline>,
    stop: Cell<Option<Stop>>,
    regexes: Arc<[Regex]>,
}

thread_local! {
    /// The meter of the evaluation running on this thread (evaluations do not nest, but
    /// the previous one is restored anyway).
    static METER: RefCell<Option<Rc<Meter>>> = const { RefCell::new(None) };
}

#[cfg(test)]
thread_local! {
    /// What the last evaluation on this thread charged (tests compare it with the estimate).
    pub static LAST_SPENT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Evaluates an instrumented expression under a fresh budget. The stop reason, when there
/// is one, wins over the result: `error || true` is `true` in CEL, but an evaluation that
/// ran out of budget has no result.
pub fn evaluate(
    expr: &IdedExpr,
    ctx: &Context,
    deadline: Option<Deadline>,
    regexes: &Arc<[Regex]>,
) -> Result<Result<Value, ExecutionError>, Stop> {
    let meter = Rc::new(Meter {
        remaining: Cell::new(MAX_COST),
        charges: Cell::new(0),
        deadline,
        stop: Cell::new(None),
        regexes: regexes.clone(),
    });
    let previous = METER.with(|m| m.replace(Some(meter.clone())));
    struct Restore(Option<Option<Rc<Meter>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take().flatten();
            METER.with(|m| *m.borrow_mut() = previous);
        }
    }
    let _restore = Restore(Some(previous));
    let out = Value::resolve(expr, ctx);
    #[cfg(test)]
    LAST_SPENT.with(|s| s.set(Some(MAX_COST - meter.remaining.get())));
    match meter.stop.get() {
        Some(s) => Err(s),
        None => Ok(out),
    }
}

fn stopped(s: Stop) -> ExecutionError {
    match s {
        Stop::Cost => ExecutionError::function_error("cost", COST_LIMIT_EXCEEDED),
        Stop::Deadline => ExecutionError::function_error("deadline", "operation interrupted"),
    }
}

/// Charges `units` to the running evaluation (none outside one: tests of the environment).
fn charge(units: u64) -> Result<(), ExecutionError> {
    METER.with(|m| {
        let m = m.borrow();
        let Some(m) = m.as_ref() else {
            return Ok(());
        };
        if let Some(s) = m.stop.get() {
            return Err(stopped(s));
        }
        let n = m.charges.get() + 1;
        m.charges.set(n);
        if let Some(d) = m.deadline
            && n % CHECK_FREQUENCY == 1
            && d.passed()
        {
            m.stop.set(Some(Stop::Deadline));
            return Err(stopped(Stop::Deadline));
        }
        match m.remaining.get().checked_sub(units) {
            Some(r) => {
                m.remaining.set(r);
                Ok(())
            }
            None => {
                m.stop.set(Some(Stop::Cost));
                Err(stopped(Stop::Cost))
            }
        }
    })
}

/// What is left of the running evaluation's budget (a walk over a value stops there).
fn remaining() -> u64 {
    METER.with(|m| m.borrow().as_ref().map_or(MAX_COST, |m| m.remaining.get()))
}

/// A value's size in cost units, counted up to `cap` (a larger value is over the budget
/// anyway; the walk stops there).
fn size_of(v: &dyn Val, cap: u64) -> u64 {
    if let Some(s) = v.downcast_ref::<CelString>() {
        return 1 + s.inner().len() as u64 / 10;
    }
    if let Some(b) = v.downcast_ref::<CelBytes>() {
        return 1 + b.inner().len() as u64 / 10;
    }
    let mut total = 1u64;
    if let Some(l) = v.downcast_ref::<CelList>() {
        for e in l.inner() {
            total = total.saturating_add(size_of(e.as_ref(), cap.saturating_sub(total)));
            if total > cap {
                break;
            }
        }
    } else if let Some(m) = v.downcast_ref::<CelMap>() {
        for e in m.inner().values() {
            total = total.saturating_add(1 + size_of(e.as_ref(), cap.saturating_sub(total)));
            if total > cap {
                break;
            }
        }
    }
    total
}

fn first<'c, 'v>(ftx: &mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError> {
    if ftx.args.is_empty() {
        return Err(ExecutionError::missing_argument_or_target());
    }
    Ok(ftx.args.swap_remove(0))
}

fn step_hook<'c, 'v>(ftx: &mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let cap = remaining();
    let item = ftx.args.get(1).map_or(0, |i| size_of(i.as_ref(), cap));
    let value = ftx.args.first().map_or(0, |v| size_of(v.as_ref(), cap));
    charge(1 + item + value)?;
    first(ftx)
}

fn size_hook<'c, 'v>(ftx: &mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let cap = remaining();
    let value = ftx.args.first().map_or(0, |v| size_of(v.as_ref(), cap));
    charge(value)?;
    first(ftx)
}

fn check_hook<'c, 'v>(ftx: &mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError> {
    charge(0)?;
    first(ftx)
}

/// `s.matches(re)`: the expression's own compiled regex (an int: its index) or a pattern
/// computed at run time (compiled once per process, in a bounded cache).
fn matches_hook<'c, 'v>(
    ftx: &mut FunctionContext<'c, 'v>,
) -> Result<CowVal<'c, 'v>, ExecutionError> {
    let (Some(s), Some(re)) = (ftx.args.first(), ftx.args.get(1)) else {
        return Err(ExecutionError::missing_argument_or_target());
    };
    let Some(s) = s.downcast_ref::<CelString>() else {
        return Err(ExecutionError::no_such_overload(
            "matches",
            vec![
                s.get_type().name().to_string(),
                re.get_type().name().to_string(),
            ],
        ));
    };
    charge(1 + s.inner().len() as u64 / 10)?;
    let hit = if let Some(i) = re.downcast_ref::<CelInt>() {
        let compiled = METER.with(|m| {
            m.borrow()
                .as_ref()
                .and_then(|m| m.regexes.get(*i.inner() as usize).cloned())
        });
        match compiled {
            Some(r) => r.is_match(s.inner()),
            None => return Err(ExecutionError::function_error("matches", "no such regex")),
        }
    } else if let Some(p) = re.downcast_ref::<CelString>() {
        cached_regex(p.inner())
            .map_err(|e| ExecutionError::function_error("matches", e))?
            .is_match(s.inner())
    } else {
        return Err(ExecutionError::no_such_overload(
            "matches",
            vec!["string".to_string(), re.get_type().name().to_string()],
        ));
    };
    Ok(CowVal::owned(CelBool::from(hit)))
}

/// The message the `cel` crate gives an invalid pattern, on one line.
fn compile_regex(pattern: &str) -> Result<Regex, String> {
    Regex::new(pattern).map_err(|e| {
        let detail = e.to_string();
        let last = detail.lines().last().unwrap_or_default().trim().to_string();
        format!("'{pattern}' not a valid regex: {last}")
    })
}

fn regex_cache() -> &'static Mutex<HashMap<String, Arc<Regex>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

/// A pattern computed at run time, compiled once per process. The cache holds at most
/// [`REGEX_CACHE_MAX`] patterns (it starts afresh when full) of at most 4 KiB each.
fn cached_regex(pattern: &str) -> Result<Arc<Regex>, String> {
    let cache = regex_cache();
    if let Some(r) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(pattern) {
        return Ok(r.clone());
    }
    let r = Arc::new(compile_regex(pattern)?);
    if pattern.len() <= 4096 {
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        if c.len() >= REGEX_CACHE_MAX {
            c.clear();
        }
        c.insert(pattern.to_string(), r.clone());
    }
    Ok(r)
}

#[cfg(test)]
pub fn regex_cache_len() -> usize {
    regex_cache().lock().map(|c| c.len()).unwrap_or(0)
}

type Hook = Box<
    dyn for<'c, 'v> Fn(&mut FunctionContext<'c, 'v>) -> Result<CowVal<'c, 'v>, ExecutionError>
        + Send
        + Sync,
>;

/// Registers the hidden functions the instrumented expressions call.
pub fn register(c: &mut Context<'static, 'static>) {
    let hooks: [(&str, Hook); 4] = [
        (STEP, Box::new(step_hook)),
        (SIZE, Box::new(size_hook)),
        (CHECK, Box::new(check_hook)),
        (MATCHES, Box::new(matches_hook)),
    ];
    for (name, hook) in hooks {
        let r = c.add_function(name, hook);
        debug_assert!(r.is_ok(), "{name}: {r:?}");
    }
}

/// Whether the tree is deeper than `limit` (the walk goes no deeper than that).
pub fn deeper_than(e: &IdedExpr, limit: usize) -> bool {
    if limit == 0 {
        return true;
    }
    let below = |x: &IdedExpr| deeper_than(x, limit - 1);
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().is_some_and(below) || c.args.iter().any(below),
        Expr::Select(s) => below(&s.operand),
        Expr::List(l) => l.elements.iter().any(below),
        Expr::Map(m) => m.entries.iter().any(|x| match &x.expr {
            EntryExpr::MapEntry(me) => below(&me.key) || below(&me.value),
            EntryExpr::StructField(f) => below(&f.value),
        }),
        Expr::Struct(s) => s.entries.iter().any(|x| match &x.expr {
            EntryExpr::MapEntry(me) => below(&me.key) || below(&me.value),
            EntryExpr::StructField(f) => below(&f.value),
        }),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .any(below),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => false,
    }
}

fn call(name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Call(cel::common::ast::CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }),
    }
}

fn ident(name: &str) -> IdedExpr {
    IdedExpr {
        id: 0,
        expr: Expr::Ident(name.to_string()),
    }
}

fn is_literal(e: &IdedExpr) -> bool {
    matches!(e.expr, Expr::Literal(_))
}

/// Wraps `e` in `name(e, extra...)`.
fn wrap(e: &mut IdedExpr, name: &str, extra: Vec<IdedExpr>) {
    let inner = std::mem::replace(e, ident(""));
    let mut args = vec![inner];
    args.extend(extra);
    *e = call(name, args);
}

fn wrap_size(e: &mut IdedExpr) {
    if !is_literal(e) {
        wrap(e, SIZE, Vec::new());
    }
}

/// Rewrites a compiled expression to charge its work (see the module doc) and compiles its
/// constant regexes into `regexes`. Err: an invalid constant regex.
pub fn instrument(e: &mut IdedExpr, regexes: &mut Vec<Regex>) -> Result<(), String> {
    match &mut e.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                instrument(t, regexes)?;
            }
            for a in &mut c.args {
                instrument(a, regexes)?;
            }
            if c.func_name == operators::ADD && c.target.is_none() {
                c.args.iter_mut().for_each(wrap_size);
            } else if c.func_name == "matches" {
                let mut args: Vec<IdedExpr> = c.target.take().map(|t| *t).into_iter().collect();
                args.append(&mut c.args);
                if let [_, pattern] = args.as_mut_slice()
                    && let Expr::Literal(LiteralValue::String(p)) = &pattern.expr
                {
                    regexes.push(compile_regex(p.inner())?);
                    pattern.expr =
                        Expr::Literal(LiteralValue::Int((regexes.len() as i64 - 1).into()));
                }
                c.func_name = MATCHES.to_string();
                c.args = args;
            }
        }
        Expr::Select(s) => instrument(&mut s.operand, regexes)?,
        Expr::List(l) => {
            for x in &mut l.elements {
                instrument(x, regexes)?;
                wrap_size(x);
            }
        }
        Expr::Map(m) => {
            for entry in &mut m.entries {
                match &mut entry.expr {
                    EntryExpr::MapEntry(me) => {
                        instrument(&mut me.key, regexes)?;
                        instrument(&mut me.value, regexes)?;
                        wrap_size(&mut me.value);
                    }
                    EntryExpr::StructField(f) => instrument(&mut f.value, regexes)?,
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &mut st.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    instrument(&mut f.value, regexes)?;
                }
            }
        }
        Expr::Comprehension(c) => instrument_loop(c, regexes)?,
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
    Ok(())
}

/// A comprehension: its step charges every iteration, keeping the shapes the interpreter
/// runs fast (`map`/`filter` append in place, `all`/`exists` fold with `&&`/`||`).
/// `cel_estimate` expects these same charges: change both together.
fn instrument_loop(c: &mut ComprehensionExpr, regexes: &mut Vec<Regex>) -> Result<(), String> {
    instrument(&mut c.iter_range, regexes)?;
    instrument(&mut c.accu_init, regexes)?;
    instrument(&mut c.result, regexes)?;
    let item = ident(&c.iter_var);
    let accu = c.accu_var.clone();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == accu);
    // `@result + [e]`: the list element to charge.
    fn appended<'a>(
        e: &'a mut IdedExpr,
        is_accu: &dyn Fn(&IdedExpr) -> bool,
    ) -> Option<&'a mut IdedExpr> {
        let Expr::Call(add) = &mut e.expr else {
            return None;
        };
        if add.func_name != operators::ADD || add.target.is_some() {
            return None;
        }
        match add.args.as_mut_slice() {
            [lhs, rhs] if is_accu(lhs) => match &mut rhs.expr {
                Expr::List(l) if l.elements.len() == 1 => l.elements.first_mut(),
                _ => None,
            },
            _ => None,
        }
    }
    let append_shape = is_accu(&c.result) && is_literal(&c.loop_cond);
    if append_shape {
        // map: `@result + [e]`; filter or 3-argument map: `g ? @result + [e] : @result`.
        if let Some(e) = appended(&mut c.loop_step, &is_accu) {
            instrument(e, regexes)?;
            wrap(e, STEP, vec![item]);
            return Ok(());
        }
        if let Expr::Call(cond) = &mut c.loop_step.expr
            && cond.func_name == operators::CONDITIONAL
            && cond.target.is_none()
            && let [g, step, otherwise] = cond.args.as_mut_slice()
            && is_accu(otherwise)
            && let Some(e) = appended(step, &is_accu)
        {
            instrument(e, regexes)?;
            wrap_size(e);
            instrument(g, regexes)?;
            wrap(g, STEP, vec![item]);
            return Ok(());
        }
    }
    // all / exists: `@result && p`, `@result || p`; their errors are deferred, so the
    // condition checks too.
    if let Expr::Call(fold) = &mut c.loop_step.expr
        && (fold.func_name == operators::LOGICAL_AND || fold.func_name == operators::LOGICAL_OR)
        && fold.target.is_none()
        && let [lhs, p] = fold.args.as_mut_slice()
        && is_accu(lhs)
    {
        instrument(p, regexes)?;
        wrap(p, STEP, vec![item]);
    } else {
        instrument(&mut c.loop_step, regexes)?;
        wrap(&mut c.loop_step, STEP, vec![item]);
    }
    if !is_literal(&c.loop_cond) {
        instrument(&mut c.loop_cond, regexes)?;
        wrap(&mut c.loop_cond, CHECK, Vec::new());
    }
    Ok(())
}
