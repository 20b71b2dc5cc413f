//! The result every plugin returns, with upstream's codes.

use std::borrow::Cow;
use std::fmt;

/// Upstream's status codes (`framework.Code`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    Success,
    /// An internal error: the attempt is retried with backoff, not reported as a fit failure.
    Error,
    /// The node does not fit now; preemption may help.
    Unschedulable,
    /// The node does not fit and preemption cannot change that.
    UnschedulableAndUnresolvable,
    /// A Permit plugin wants the pod to wait.
    Wait,
    /// The plugin has nothing to do for this pod (PreFilter/PreScore/Bind).
    Skip,
    /// The pod must wait for something outside the scheduler; preemption cannot help.
    /// (No in-tree plugin returns it yet; upstream's SchedulingGates uses
    /// UnschedulableAndUnresolvable.)
    Pending,
}

impl Code {
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Success => "Success",
            Code::Error => "Error",
            Code::Unschedulable => "Unschedulable",
            Code::UnschedulableAndUnresolvable => "UnschedulableAndUnresolvable",
            Code::Wait => "Wait",
            Code::Skip => "Skip",
            Code::Pending => "Pending",
        }
    }
}

/// One human-readable reason. Plugins' fixed messages are `&'static str`, so rejecting a
/// node with one of them allocates nothing.
pub type Reason = Cow<'static, str>;

/// Zero, one (the common case, kept inline) or several reasons.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reasons {
    None,
    One(Reason),
    Many(Vec<Reason>),
}

/// A plugin's verdict: a code, the human reasons behind it, and which plugin said it.
///
/// Neither `Status::success()` nor a rejection with a static message allocates, so filters
/// pay nothing per node on either path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: Reasons,
    plugin: Option<&'static str>,
}

impl Default for Status {
    fn default() -> Self {
        Self::success()
    }
}

impl Status {
    pub const fn success() -> Self {
        Status {
            code: Code::Success,
            reasons: Reasons::None,
            plugin: None,
        }
    }

    pub fn new(code: Code, reason: impl Into<Reason>) -> Self {
        Status {
            code,
            reasons: Reasons::One(reason.into()),
            plugin: None,
        }
    }

    pub fn with_reasons<R: Into<Reason>>(code: Code, reasons: Vec<R>) -> Self {
        let mut v: Vec<Reason> = reasons.into_iter().map(Into::into).collect();
        let reasons = match v.len() {
            0 => Reasons::None,
            1 => Reasons::One(v.pop().expect("one reason")),
            _ => Reasons::Many(v),
        };
        Status {
            code,
            reasons,
            plugin: None,
        }
    }

    pub fn unschedulable(reason: impl Into<Reason>) -> Self {
        Self::new(Code::Unschedulable, reason)
    }

    pub fn unresolvable(reason: impl Into<Reason>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, reason)
    }

    pub fn error(message: impl Into<Reason>) -> Self {
        Self::new(Code::Error, message)
    }

    pub const fn skip() -> Self {
        Status {
            code: Code::Skip,
            reasons: Reasons::None,
            plugin: None,
        }
    }

    pub fn pending(reason: impl Into<Reason>) -> Self {
        Self::new(Code::Pending, reason)
    }

    pub fn wait() -> Self {
        Status {
            code: Code::Wait,
            reasons: Reasons::None,
            plugin: None,
        }
    }

    /// Records which plugin produced the status (the framework does this for every plugin call).
    pub fn with_plugin(mut self, plugin: &'static str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn reasons(&self) -> &[Reason] {
        match &self.reasons {
            Reasons::None => &[],
            Reasons::One(r) => std::slice::from_ref(r),
            Reasons::Many(v) => v,
        }
    }

    pub fn plugin(&self) -> Option<&'static str> {
        self.plugin
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_skip(&self) -> bool {
        self.code == Code::Skip
    }

    /// Unschedulable, UnschedulableAndUnresolvable or Pending: the pod was turned away, not broken.
    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable | Code::Pending
        )
    }

    /// The reasons joined the way upstream's `Status.Message()` does.
    pub fn message(&self) -> String {
        self.reasons().join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.plugin {
            write!(f, "{p}: ")?;
        }
        write!(f, "{}", self.code.as_str())?;
        if !self.reasons().is_empty() {
            write!(f, ": {}", self.message())?;
        }
        Ok(())
    }
}
