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

/// How many errors [`ConfigErrors`] prints; the rest are counted.
pub const MAX_PRINTED: usize = 100;

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
        // Every command prints config errors through here: a file with thousands of
        // mistakes prints the first ones and a count, not megabytes.
        for (i, e) in self.0.iter().take(MAX_PRINTED).enumerate() {
            // Indent continuation lines (the fix) under the numbered entry.
            let text = e.to_string().replace('\n', "\n   ");
            write!(f, "\n{:>2}. {text}", i + 1)?;
        }
        if n > MAX_PRINTED {
            write!(
                f,
                "\n... and {} more errors (fix the ones above first)",
                n - MAX_PRINTED
            )?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A config with thousands of mistakes prints the first [`MAX_PRINTED`] and a count of
    /// the rest, not megabytes.
    #[test]
    fn printed_errors_are_capped() {
        let text = format!(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n{}",
            (0..5_000)
                .map(|i| format!("unknownField{i}: 1\n"))
                .collect::<String>()
        );
        let errs = crate::config::load_str(&text, "many.yaml").unwrap_err();
        assert_eq!(errs.len(), 5_000);
        let printed = errs.to_string();
        assert!(printed.starts_with("5000 errors in scheduler configuration many.yaml:"));
        assert_eq!(printed.matches("unknown field").count(), MAX_PRINTED);
        assert!(
            printed.ends_with(&format!(
                "\n... and {} more errors (fix the ones above first)",
                5_000 - MAX_PRINTED
            )),
            "{}",
            &printed[printed.len() - 200..]
        );
        assert!(printed.len() < 50_000, "{}", printed.len());
        // Up to the cap, every error is printed and nothing is added.
        let few = ConfigErrors(errs.0[..3].to_vec()).to_string();
        assert_eq!(few.matches("unknown field").count(), 3);
        assert!(!few.contains("more errors"));
    }
}
