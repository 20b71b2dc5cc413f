//! Errors and warnings reported by config loading, each naming file, position, field path
//! and, where one is known, the fix.

use std::fmt;

use super::yaml_tree::Pos;

/// One problem that stops the config from loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// File name (or other source label) the config came from.
    pub source: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// Field path in upstream style, e.g. `profiles[1].plugins.score.enabled[0].weight`.
    pub path: String,
    pub message: String,
    pub fix: Option<String>,
}

/// A problem that does not stop loading but that an admin should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigWarning {
    pub source: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub path: String,
    pub message: String,
    pub fix: Option<String>,
}

/// Every error found in one load, in document order where positions are known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

fn write_located(
    f: &mut fmt::Formatter<'_>,
    source: &str,
    line: Option<u32>,
    column: Option<u32>,
    path: &str,
    message: &str,
    fix: Option<&str>,
) -> fmt::Result {
    f.write_str(source)?;
    match (line, column) {
        (Some(l), Some(c)) => write!(f, ":{l}:{c}")?,
        (Some(l), None) => write!(f, ":{l}")?,
        _ => {}
    }
    f.write_str(": ")?;
    if !path.is_empty() {
        write!(f, "{path}: ")?;
    }
    f.write_str(message)?;
    if let Some(fix) = fix {
        write!(f, "\n  fix: {fix}")?;
    }
    Ok(())
}

impl ConfigError {
    pub(crate) fn new(
        source: &str,
        pos: Option<Pos>,
        path: &str,
        message: impl Into<String>,
    ) -> Self {
        ConfigError {
            source: source.to_string(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            path: path.to_string(),
            message: message.into(),
            fix: None,
        }
    }

    pub(crate) fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub(crate) fn pos(&self) -> Option<Pos> {
        Some(Pos {
            line: self.line?,
            column: self.column.unwrap_or(1),
        })
    }
}

impl ConfigWarning {
    pub(crate) fn new(
        source: &str,
        pos: Option<Pos>,
        path: &str,
        message: impl Into<String>,
    ) -> Self {
        ConfigWarning {
            source: source.to_string(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            path: path.to_string(),
            message: message.into(),
            fix: None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_located(
            f,
            &self.source,
            self.line,
            self.column,
            &self.path,
            &self.message,
            self.fix.as_deref(),
        )
    }
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("warning: ")?;
        write_located(
            f,
            &self.source,
            self.line,
            self.column,
            &self.path,
            &self.message,
            self.fix.as_deref(),
        )
    }
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        let source = self.0.first().map_or("config", |e| e.source.as_str());
        write!(
            f,
            "{n} error{} in scheduler configuration {source}:",
            if n == 1 { "" } else { "s" }
        )?;
        for (i, e) in self.0.iter().enumerate() {
            // Indent continuation lines (the fix) under the numbered entry.
            let text = e.to_string().replace('\n', "\n   ");
            write!(f, "\n{:>2}. {text}", i + 1)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl ConfigErrors {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}
