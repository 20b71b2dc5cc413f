//! Where each field path of the decoded document came from, so validation (which works on
//! typed values) can still point at a line and column.

use std::collections::HashMap;

use super::error::{ConfigError, ConfigWarning};
use super::yaml_tree::Pos;

#[derive(Debug, Default, Clone)]
pub(crate) struct Spans {
    map: HashMap<String, Pos>,
    /// (internal path prefix, path shown to the user), for converted legacy documents.
    aliases: Vec<(String, String)>,
}

/// Parent of a path: `a.b[2].c` -> `a.b[2]` -> `a.b` -> `a` -> ``.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

fn has_prefix(path: &str, prefix: &str) -> bool {
    path == prefix
        || (path.starts_with(prefix)
            && matches!(path.as_bytes().get(prefix.len()), Some(b'.') | Some(b'[')))
}

impl Spans {
    pub fn record(&mut self, path: &str, pos: Option<Pos>) {
        if let Some(pos) = pos {
            self.map.entry(path.to_string()).or_insert(pos);
        }
    }

    pub fn alias(&mut self, internal: &str, shown: &str) {
        self.aliases.push((internal.to_string(), shown.to_string()));
    }

    /// Position of `path`, or of its nearest ancestor written in the source.
    pub fn pos(&self, path: &str) -> Option<Pos> {
        let mut p = Some(path);
        while let Some(cur) = p {
            if let Some(pos) = self.map.get(cur) {
                return Some(*pos);
            }
            p = parent(cur);
        }
        None
    }

    /// The path as the user wrote it (differs only for converted legacy documents).
    pub fn display(&self, path: &str) -> String {
        let best = self
            .aliases
            .iter()
            .filter(|(internal, _)| has_prefix(path, internal))
            .max_by_key(|(internal, _)| internal.len());
        match best {
            Some((internal, shown)) => {
                let rest = &path[internal.len()..];
                let rest = if shown.is_empty() {
                    rest.strip_prefix('.').unwrap_or(rest)
                } else {
                    rest
                };
                format!("{shown}{rest}")
            }
            None => path.to_string(),
        }
    }
}

/// Collects every error and warning of one load.
#[derive(Debug)]
pub(crate) struct Report {
    pub source: String,
    pub spans: Spans,
    pub errors: Vec<ConfigError>,
    pub warnings: Vec<ConfigWarning>,
}

impl Report {
    pub fn new(source: &str) -> Self {
        Report {
            source: source.to_string(),
            spans: Spans::default(),
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// An error located by its path.
    pub fn error(&mut self, path: &str, message: impl Into<String>) -> &mut ConfigError {
        let pos = self.spans.pos(path);
        self.error_at(pos, path, message)
    }

    /// An error at an explicit position (e.g. a mapping key).
    pub fn error_at(
        &mut self,
        pos: Option<Pos>,
        path: &str,
        message: impl Into<String>,
    ) -> &mut ConfigError {
        let shown = self.spans.display(path);
        self.errors
            .push(ConfigError::new(&self.source, pos, &shown, message));
        self.errors.last_mut().expect("just pushed")
    }

    pub fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// Gives every error reported since `before` that has no fix yet the fix `fix`.
    pub fn hint_new_errors(&mut self, before: usize, fix: &str) {
        for e in &mut self.errors[before..] {
            if e.fix.is_none() {
                e.fix = Some(fix.to_string());
            }
        }
    }

    pub fn warn(&mut self, path: &str, message: impl Into<String>) -> &mut ConfigWarning {
        let pos = self.spans.pos(path);
        let shown = self.spans.display(path);
        self.warnings
            .push(ConfigWarning::new(&self.source, pos, &shown, message));
        self.warnings.last_mut().expect("just pushed")
    }
}

impl ConfigError {
    pub(crate) fn hint(&mut self, fix: impl Into<String>) -> &mut Self {
        self.fix = Some(fix.into());
        self
    }
}

impl ConfigWarning {
    pub(crate) fn hint(&mut self, fix: impl Into<String>) -> &mut Self {
        self.fix = Some(fix.into());
        self
    }
}

pub(crate) fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_ancestor_and_aliases() {
        let mut s = Spans::default();
        s.record("profiles[0]", Some(Pos { line: 3, column: 3 }));
        s.record("profiles", Some(Pos { line: 2, column: 1 }));
        assert_eq!(
            s.pos("profiles[0].plugins.score"),
            Some(Pos { line: 3, column: 3 })
        );
        assert_eq!(s.pos("profiles[1]"), Some(Pos { line: 2, column: 1 }));
        assert_eq!(s.pos("parallelism"), None);
        s.alias("profiles[0]", "");
        s.alias(
            "profiles[0].pluginConfig[2].args.hardPodAffinityWeight",
            "hardPodAffinitySymmetricWeight",
        );
        assert_eq!(s.display("profiles[0].plugins.score"), "plugins.score");
        assert_eq!(
            s.display("profiles[0].pluginConfig[2].args.hardPodAffinityWeight"),
            "hardPodAffinitySymmetricWeight"
        );
        assert_eq!(s.display("profiles[01]"), "profiles[01]");
    }
}
