//! YAML (and JSON, which is YAML) text -> spanned [`Node`] tree, built from the event
//! parser that serde-saphyr re-exports, so every scalar, list, mapping and key keeps its
//! line and column.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Marker, Parser, ScalarStyle, ScanError, Span};

use super::error::ConfigError;
use super::messages as msg;
use super::yaml_tree::{Entry, Node, Pos, Value};
use crate::yaml_budget;

fn pos_of(m: Marker) -> Pos {
    Pos {
        line: m.line() as u32,
        column: m.col() as u32 + 1,
    }
}

/// Where the tab a scanner error complains about really is. The scanner reports where the
/// token it was reading began: the key after a tab of indentation, or a plain scalar on the
/// line above the tab that indents its continuation. Looks in the indentation of the
/// reported line and the two below it, then anywhere on the reported line.
fn tab_position(text: &str, reported: Pos) -> Option<Pos> {
    let first = (reported.line as usize).checked_sub(1)?;
    let lines: Vec<&str> = text.split('\n').collect();
    for (i, line) in lines.iter().enumerate().skip(first).take(3) {
        let indent = line.len() - line.trim_start_matches([' ', '\t']).len();
        // Indentation is ASCII: its byte offset is its column.
        if let Some(c) = line[..indent].find('\t') {
            return Some(Pos {
                line: i as u32 + 1,
                column: c as u32 + 1,
            });
        }
    }
    let c = lines.get(first)?.chars().position(|ch| ch == '\t')?;
    Some(Pos {
        line: reported.line,
        column: c as u32 + 1,
    })
}

/// Parses one YAML document. An empty document is an empty mapping's worth of nothing:
/// it yields `Value::Null`, which the decoder reports as a missing apiVersion/kind.
///
/// The text first goes through the YAML budget every reader shares
/// ([`crate::yaml_budget::check`]): an alias bomb is refused at the alias that crosses it,
/// before anything is built. The builder also counts what its tree holds, aliases
/// expanded, against the same limits, so the bound holds even where the check stopped
/// early on an error of its own.
pub fn parse(text: &str, source: &str) -> Result<Node, ConfigError> {
    if let Err(r) = yaml_budget::check(text) {
        let at = r.line.map(|line| Pos {
            line,
            column: r.column.unwrap_or(1),
        });
        return Err(ConfigError::new(source, at, "", r.message).with_fix(r.fix));
    }
    let (max_nodes, max_bytes) = yaml_budget::tree_limits(text.len());
    let mut b = Builder {
        text,
        parser: Parser::new_from_str(text),
        anchors: HashMap::new(),
        source,
        held: Held::default(),
        max_nodes,
        max_bytes,
    };
    b.document()
}

/// What a tree (or an anchored part of it) holds: nodes and bytes of scalar text.
#[derive(Clone, Copy, Default)]
struct Held {
    nodes: usize,
    bytes: usize,
}

struct Builder<'a> {
    text: &'a str,
    parser: Parser<'a, serde_saphyr::granit_parser::StrInput<'a>>,
    /// Anchored nodes, with what each holds (an alias adds that much again).
    anchors: HashMap<usize, (Node, Held)>,
    source: &'a str,
    held: Held,
    max_nodes: usize,
    max_bytes: usize,
}

impl<'a> Builder<'a> {
    fn syntax(&self, e: ScanError) -> ConfigError {
        let mut at = pos_of(*e.marker());
        if e.info().contains("tab") {
            at = tab_position(self.text, at).unwrap_or(at);
        }
        ConfigError::new(
            self.source,
            Some(at),
            "",
            format!("{}: {}", msg::YAML_SYNTAX, e.info()),
        )
        .with_fix(msg::YAML_SYNTAX_FIX)
    }

    /// Next event that carries structure; comments and anchor metadata are skipped.
    fn next(&mut self) -> Result<Option<(Event<'a>, Span)>, ConfigError> {
        loop {
            match self.parser.next_event() {
                None => return Ok(None),
                Some(Err(e)) => return Err(self.syntax(e)),
                Some(Ok((ev, span))) => match ev {
                    Event::Anchor(..) => continue,
                    ev if is_comment(&ev) => continue,
                    ev => return Ok(Some((ev, span))),
                },
            }
        }
    }

    fn document(&mut self) -> Result<Node, ConfigError> {
        let mut root: Option<Node> = None;
        while let Some((ev, span)) = self.next()? {
            match ev {
                Event::StreamStart | Event::DocumentEnd => {}
                Event::StreamEnd => break,
                Event::DocumentStart(..) if root.is_some() => {
                    return Err(ConfigError::new(
                        self.source,
                        Some(pos_of(span.start)),
                        "",
                        msg::MULTIPLE_DOCUMENTS,
                    )
                    .with_fix(msg::MULTIPLE_DOCUMENTS_FIX));
                }
                ev if ev.is_node() => {
                    let node = self.node(ev, span)?;
                    root = Some(node);
                }
                _ => {}
            }
        }
        Ok(root.unwrap_or(Node::new(Value::Null, Some(Pos { line: 1, column: 1 }))))
    }

    /// Adds to what the tree holds; refuses at `pos` past the limits.
    fn hold(&mut self, add: Held, pos: Option<Pos>) -> Result<(), ConfigError> {
        self.held.nodes = self.held.nodes.saturating_add(add.nodes);
        self.held.bytes = self.held.bytes.saturating_add(add.bytes);
        let over = if self.held.nodes > self.max_nodes {
            Some((true, self.max_nodes))
        } else if self.held.bytes > self.max_bytes {
            Some((false, self.max_bytes))
        } else {
            None
        };
        match over {
            Some((nodes, limit)) => {
                let (message, fix) = yaml_budget::tree_breach(nodes, limit);
                Err(ConfigError::new(self.source, pos, "", message).with_fix(fix))
            }
            None => Ok(()),
        }
    }

    fn node(&mut self, ev: Event<'a>, span: Span) -> Result<Node, ConfigError> {
        let pos = Some(pos_of(span.start));
        let before = self.held;
        if !matches!(ev, Event::Alias(_)) {
            let bytes = match &ev {
                Event::Scalar(text, ..) => text.len(),
                _ => 0,
            };
            self.hold(Held { nodes: 1, bytes }, pos)?;
        }
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                let force_str = tag
                    .as_ref()
                    .is_some_and(|t| t.is_yaml_core_schema_tag("str"));
                let value = if style == ScalarStyle::Plain && !force_str {
                    resolve_plain(&text)
                } else {
                    Value::Str(text.into_owned())
                };
                let node = Node::new(value, pos);
                self.remember(anchor, &node, before);
                Ok(node)
            }
            Event::SequenceStart(_, anchor, _) => {
                let mut items = Vec::new();
                while let Some((ev, span)) = self.next()? {
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(ev, span)?);
                }
                let node = Node::new(Value::Seq(items), pos);
                self.remember(anchor, &node, before);
                Ok(node)
            }
            Event::MappingStart(_, anchor, _) => {
                let mut entries: Vec<Entry> = Vec::new();
                let mut merges: Vec<Node> = Vec::new();
                while let Some((kev, kspan)) = self.next()? {
                    if matches!(kev, Event::MappingEnd) {
                        break;
                    }
                    let key_pos = Some(pos_of(kspan.start));
                    let key_node = self.node(kev, kspan)?;
                    let Some((vev, vspan)) = self.next()? else {
                        break;
                    };
                    let value = self.node(vev, vspan)?;
                    let key = match key_node.value {
                        Value::Str(s) => s,
                        Value::Int(i) => i.to_string(),
                        Value::Bool(b) => b.to_string(),
                        Value::Float(x) => x.to_string(),
                        Value::Null => String::new(),
                        Value::Seq(_) | Value::Map(_) => {
                            return Err(ConfigError::new(
                                self.source,
                                key_pos,
                                "",
                                msg::COMPLEX_KEY,
                            ));
                        }
                    };
                    if key == "<<" {
                        merges.push(value);
                        continue;
                    }
                    entries.push(Entry {
                        key,
                        key_pos,
                        value,
                    });
                }
                // YAML merge keys: explicitly written keys win over merged ones.
                for m in merges {
                    let maps = match m.value {
                        Value::Seq(items) => items,
                        _ => vec![m],
                    };
                    for map in maps {
                        if let Value::Map(merged) = map.value {
                            for e in merged {
                                if !entries.iter().any(|x| x.key == e.key) {
                                    entries.push(e);
                                }
                            }
                        }
                    }
                }
                let node = Node::new(Value::Map(entries), pos);
                self.remember(anchor, &node, before);
                Ok(node)
            }
            Event::Alias(id) => {
                let Some(held) = self.anchors.get(&id).map(|(_, h)| *h) else {
                    return Err(ConfigError::new(self.source, pos, "", msg::UNKNOWN_ALIAS));
                };
                // The copy is counted before it is made.
                self.hold(held, pos)?;
                Ok(self.anchors[&id].0.clone())
            }
            _ => Err(ConfigError::new(self.source, pos, "", msg::UNKNOWN_ALIAS)),
        }
    }

    /// Keeps an anchored node, with what it holds (counted from `before`).
    fn remember(&mut self, anchor: usize, node: &Node, before: Held) {
        if anchor != 0 {
            let held = Held {
                nodes: self.held.nodes - before.nodes,
                bytes: self.held.bytes - before.bytes,
            };
            self.anchors.insert(anchor, (node.clone(), held));
        }
    }
}

#[allow(unreachable_patterns)]
fn is_comment(ev: &Event<'_>) -> bool {
    !ev.is_node()
        && !matches!(
            ev,
            Event::StreamStart
                | Event::StreamEnd
                | Event::DocumentStart(..)
                | Event::DocumentEnd
                | Event::SequenceEnd
                | Event::MappingEnd
        )
}

/// YAML 1.2 core-schema resolution of an unquoted scalar.
fn resolve_plain(text: &str) -> Value {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Value::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
        _ => {}
    }
    if let Some(hex) = text.strip_prefix("0x")
        && let Ok(i) = i64::from_str_radix(hex, 16)
    {
        return Value::Int(i);
    }
    if let Some(oct) = text.strip_prefix("0o")
        && let Ok(i) = i64::from_str_radix(oct, 8)
    {
        return Value::Int(i);
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return match text.parse::<i64>() {
            Ok(i) => Value::Int(i),
            // Too large for i64: keep it numeric so range errors say "out of range".
            Err(_) => Value::Float(text.parse::<f64>().unwrap_or(f64::INFINITY)),
        };
    }
    if looks_like_float(digits)
        && let Ok(x) = text.parse::<f64>()
    {
        return Value::Float(x);
    }
    Value::Str(text.to_string())
}

fn looks_like_float(s: &str) -> bool {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut parts = mantissa.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next();
    let digits_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits_ok(int) && digits_ok(f) && !(int.is_empty() && f.is_empty()),
        None => !int.is_empty() && digits_ok(int),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits_ok(e)
    });
    mantissa_ok && exp_ok && (frac.is_some() || exp.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_resolve_like_yaml_core_schema() {
        assert_eq!(resolve_plain("10"), Value::Int(10));
        assert_eq!(resolve_plain("-3"), Value::Int(-3));
        assert_eq!(resolve_plain("1.5"), Value::Float(1.5));
        assert_eq!(resolve_plain("1e3"), Value::Float(1000.0));
        assert_eq!(resolve_plain("true"), Value::Bool(true));
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("15s"), Value::Str("15s".into()));
        assert_eq!(resolve_plain("1.2.3"), Value::Str("1.2.3".into()));
    }

    #[test]
    fn positions_are_one_based() {
        let n = parse("a: 1\nb:\n  - x\n", "t.yaml").unwrap();
        let Value::Map(entries) = &n.value else {
            panic!("not a map")
        };
        assert_eq!(entries[0].key_pos, Some(Pos { line: 1, column: 1 }));
        assert_eq!(entries[0].value.pos, Some(Pos { line: 1, column: 4 }));
        assert_eq!(entries[1].key_pos, Some(Pos { line: 2, column: 1 }));
        let Value::Seq(items) = &entries[1].value.value else {
            panic!("not a seq")
        };
        assert_eq!(items[0].pos, Some(Pos { line: 3, column: 5 }));
    }

    #[test]
    fn quoted_numbers_stay_strings_and_json_parses() {
        let n = parse(r#"{"a": "10", "b": [1, 2.5]}"#, "t.json").unwrap();
        assert_eq!(n.get("a").unwrap().value, Value::Str("10".into()));
        assert_eq!(
            n.get("b").unwrap().value,
            Value::Seq(vec![
                Node::new(
                    Value::Int(1),
                    n.get("b").and_then(|b| match &b.value {
                        Value::Seq(i) => i[0].pos,
                        _ => None,
                    })
                ),
                Node::new(
                    Value::Float(2.5),
                    n.get("b").and_then(|b| match &b.value {
                        Value::Seq(i) => i[1].pos,
                        _ => None,
                    })
                ),
            ])
        );
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a: [1, 2\nb: 3\n", "bad.yaml").unwrap_err();
        assert!(e.line.is_some(), "{e}");
        assert!(e.message.starts_with(msg::YAML_SYNTAX), "{e}");
    }

    /// A tab is reported where it is: in a key's indentation, in the indentation that would
    /// continue a plain scalar from the line above, and with CRLF line ends. (Tabs inside
    /// values, after a key, in quoted and flow values were already reported right, at the
    /// value, by the decoder.)
    #[test]
    fn tabs_are_reported_where_they_are() {
        let head = "apiVersion: v1\nkind: K\nprofiles:\n- schedulerName: a\n";
        for (text, line, column) in [
            (format!("{head}  plugins:\n\t  score: {{}}\n"), 6, 1),
            (format!("{head}\tplugins: {{}}\n"), 5, 1),
            (format!("{head}  plugins:\n  \t score: {{}}\n"), 6, 3),
            (
                format!("{head}  plugins:\n\t score: {{}}\n").replace('\n', "\r\n"),
                6,
                1,
            ),
        ] {
            let e = parse(&text, "t.yaml").unwrap_err();
            assert!(e.message.contains("tab"), "{e}");
            assert_eq!(
                (e.line, e.column),
                (Some(line), Some(column)),
                "{text:?}: {e}"
            );
        }
    }

    #[test]
    fn anchors_and_merge_keys() {
        let n = parse("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n", "t").unwrap();
        let other = n.get("other").unwrap();
        assert_eq!(other.get("x").unwrap().value, Value::Int(1));
        assert_eq!(other.get("y").unwrap().value, Value::Int(3));
    }

    /// "Billion laughs": nine aliases per level, nine levels, 9^9 strings from a few hundred
    /// bytes. Refused at the alias that crosses the budget, before the tree is built.
    fn laughs(levels: u8) -> String {
        let mut t = String::from(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        );
        t.push_str("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
        for l in 1..levels {
            let (name, prev) = ((b'a' + l) as char, (b'a' + l - 1) as char);
            let refs = vec![format!("*{prev}"); 9].join(", ");
            t.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        t
    }

    #[test]
    fn an_alias_bomb_is_refused_with_its_place_and_the_fix() {
        let text = laughs(9);
        assert!(text.len() < 600, "{}", text.len());
        let e = parse(&text, "bomb.yaml").unwrap_err();
        assert_eq!(e.source, "bomb.yaml");
        assert!(e.line.is_some_and(|l| l > 3), "{e}");
        assert!(e.message.contains("aliases"), "{e}");
        assert!(e.message.contains("nodes"), "{e}");
        let fix = e.fix.as_deref().unwrap_or_default();
        assert!(fix.contains("write the values out"), "{e}");
        // No Rust debug output in what the user reads.
        assert!(!e.to_string().contains('{'), "{e}");
    }

    #[test]
    fn one_anchor_referenced_ten_thousand_times_is_refused() {
        let mut text = String::from("x: &x lol\ny:\n");
        for _ in 0..10_000 {
            text.push_str("- *x\n");
        }
        let Err(e) = parse(&text, "refs.yaml") else {
            panic!("10,000 aliases of one anchor were accepted");
        };
        assert!(e.message.contains("aliases"), "{e}");
        assert!(
            e.fix
                .as_deref()
                .unwrap_or_default()
                .contains("write the values out")
        );
    }

    /// Anchors a real config uses (shared args across profiles) stay fine, and so does a
    /// file as large as a real config gets without aliases.
    #[test]
    fn ordinary_anchors_and_large_files_load() {
        let mut text =
            String::from("args: &args {scoringStrategy: {type: MostAllocated}}\nprofiles:\n");
        for i in 0..50 {
            text.push_str(&format!("- schedulerName: p{i}\n  pluginConfig:\n  - name: NodeResourcesFit\n    args: *args\n"));
        }
        parse(&text, "t").unwrap();
        let mut big = String::from("items:\n");
        while big.len() < 400_000 {
            big.push_str("- {name: a, weight: 1}\n");
        }
        parse(&big, "t").unwrap();
    }

    #[test]
    fn multiple_documents_are_rejected() {
        let e = parse("a: 1\n---\nb: 2\n", "t").unwrap_err();
        assert_eq!(e.message, msg::MULTIPLE_DOCUMENTS);
        assert_eq!(e.line, Some(2));
    }
}
