//! `--logging-format`: `text` (tracing's default lines) or `json`, one JSON object per line
//! in the shape of kube-scheduler's JSON logs, so log pipelines that parse those read
//! ferrosched's unchanged:
//!
//! * `ts`: seconds since the Unix epoch as a number, with microseconds;
//! * `caller`: `dir/file.rs:line` of the event;
//! * `msg`: the event's message;
//! * `v`: the verbosity of an info line (0 for info and warnings, 4 for debug, 5 for trace,
//!   the `-v` levels that enable them); error lines have no `v` and carry their `error` (or
//!   `err`) field as `err`;
//! * every other field of the event at the top level, numbers and booleans as JSON
//!   numbers and booleans, everything else as a string (the `log.*` fields tracing-log adds
//!   to lines from the `log` crate make their `caller` and are not repeated).
//!
//! Lines go to stderr unbuffered, each written whole.

use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `--logging-format`'s values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (tracing's format).
    #[default]
    Text,
    /// One JSON object per line, as kube-scheduler's `--logging-format=json`.
    Json,
}

/// The JSON line formatter for `--logging-format=json`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KlogJson;

/// The klog verbosity a line at `level` was logged at (the `-v` that first shows it).
fn verbosity(level: Level) -> u8 {
    match level {
        Level::TRACE => 5,
        Level::DEBUG => 4,
        _ => 0,
    }
}

/// The last directory and the file name, as klog's `caller`.
fn short_caller(file: &str, line: Option<u32>) -> String {
    let mut parts = file.rsplit(['/', '\\']);
    let name = parts.next().unwrap_or(file);
    let short = match parts.next() {
        Some(dir) if !dir.is_empty() => format!("{dir}/{name}"),
        _ => name.to_string(),
    };
    match line {
        Some(l) => format!("{short}:{l}"),
        None => short,
    }
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    pairs: Vec<(String, Value)>,
    /// `log.file` and `log.line` of a line from the `log` crate (rustls, for one), which
    /// tracing-log passes on as fields: its caller.
    log_file: Option<String>,
    log_line: Option<u32>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if let Some(log_field) = field.name().strip_prefix("log.") {
            match (log_field, value) {
                ("file", Value::String(f)) => self.log_file = Some(f),
                ("line", v) => self.log_line = v.as_u64().and_then(|l| u32::try_from(l).ok()),
                _ => {}
            }
        } else if field.name() == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                v => v.to_string(),
            });
        } else {
            self.pairs.push((field.name().to_string(), value));
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

/// JSON-encodes `v` into `out` (strings escaped as JSON requires).
fn push_json(out: &mut String, v: &Value) {
    out.push_str(&v.to_string());
}

impl KlogJson {
    /// One line (with its newline) for an event at `level` from `file:line`, logged at
    /// `now`.
    fn line(&self, now: SystemTime, level: Level, caller: String, fields: Fields) -> String {
        let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
        let mut out = String::with_capacity(128);
        let _ = write!(
            out,
            "{{\"ts\":{}.{:06},\"caller\":",
            since.as_secs(),
            since.subsec_micros()
        );
        push_json(&mut out, &Value::String(caller));
        out.push_str(",\"msg\":");
        push_json(&mut out, &Value::String(fields.message.unwrap_or_default()));
        let error = level == Level::ERROR;
        let mut pairs = fields.pairs;
        if error {
            if let Some(i) = pairs.iter().position(|(k, _)| k == "error" || k == "err") {
                let (_, e) = pairs.remove(i);
                out.push_str(",\"err\":");
                push_json(&mut out, &e);
            }
        } else {
            let _ = write!(out, ",\"v\":{}", verbosity(level));
        }
        for (k, v) in &pairs {
            out.push(',');
            push_json(&mut out, &Value::String(k.clone()));
            out.push(':');
            push_json(&mut out, v);
        }
        out.push_str("}\n");
        out
    }
}

impl<S, N> FormatEvent<S, N> for KlogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let caller = match fields.log_file.take() {
            Some(file) => short_caller(&file, fields.log_line),
            None => short_caller(meta.file().unwrap_or(meta.target()), meta.line()),
        };
        writer.write_str(&self.line(SystemTime::now(), *meta.level(), caller, fields))
    }
}

/// Installs the global subscriber: `filter`, to stderr, in `format`. Does nothing when one is
/// installed already.
pub fn init(format: LogFormat, filter: tracing_subscriber::EnvFilter) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.event_format(KlogJson).try_init(),
    };
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs `f` with the JSON formatter at `filter` and returns each line parsed.
    fn logged(filter: &str, f: impl FnOnce()) -> Vec<Value> {
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(move || out.clone())
            .event_format(KlogJson)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(text.ends_with('\n'), "{text:?}");
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect()
    }

    #[test]
    fn json_lines_have_klogs_fields_and_flat_key_values() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let lines = logged("trace", || {
            tracing::info!(
                pod = "default/web-1",
                node = "n1",
                attempts = 3u64,
                delta = -2i64,
                fits = true,
                ratio = 0.5,
                "Successfully bound pod to node"
            );
            tracing::warn!(error = "timeout", "lease renewal failed, \"retrying\"");
            tracing::error!(error = %std::io::Error::other("connection refused"), pod = "default/x", "binding failed");
            tracing::error!("no error field");
            tracing::debug!(queue = "active", "popped");
            tracing::trace!("every node");
        });
        assert_eq!(lines.len(), 6, "{lines:?}");
        let info = &lines[0];
        let ts = info["ts"].as_f64().expect("ts is a number");
        assert!(
            ts >= before.floor() && ts < before + 60.0,
            "{ts} vs {before}"
        );
        let caller = info["caller"].as_str().unwrap();
        assert!(caller.starts_with("src/logging.rs:"), "{caller}");
        let mut fields = info.as_object().unwrap().clone();
        fields.remove("ts");
        fields.remove("caller");
        assert_eq!(
            Value::Object(fields),
            json!({
                "msg": "Successfully bound pod to node",
                "v": 0,
                "pod": "default/web-1",
                "node": "n1",
                "attempts": 3,
                "delta": -2,
                "fits": true,
                "ratio": 0.5,
            })
        );
        assert_eq!(lines[1]["msg"], "lease renewal failed, \"retrying\"");
        assert_eq!(lines[1]["v"], 0);
        assert_eq!(lines[1]["error"], "timeout");
        // Errors: `err`, no `v`.
        assert_eq!(lines[2]["err"], "connection refused");
        assert_eq!(lines[2]["pod"], "default/x");
        assert_eq!(lines[2]["msg"], "binding failed");
        assert!(lines[2].get("v").is_none() && lines[2].get("error").is_none());
        assert_eq!(lines[3]["msg"], "no error field");
        assert!(lines[3].get("v").is_none() && lines[3].get("err").is_none());
        assert_eq!(
            (&lines[4]["msg"], &lines[4]["v"]),
            (&json!("popped"), &json!(4))
        );
        assert_eq!(lines[4]["queue"], "active");
        assert_eq!(lines[5]["v"], 5);
    }

    #[test]
    fn a_line_from_the_log_crate_takes_its_caller_from_the_log_fields() {
        let lines = logged("info", || {
            tracing::info!(
                log.target = "rustls::server",
                log.module_path = "rustls::server",
                log.file = "/registry/rustls-0.23/src/server/hs.rs",
                log.line = 120u64,
                "handshake"
            );
        });
        assert_eq!(
            lines[0],
            json!({"ts": lines[0]["ts"], "caller": "server/hs.rs:120", "msg": "handshake", "v": 0})
        );
    }

    #[test]
    fn the_filter_still_decides_which_lines_are_written() {
        let lines = logged("info", || {
            tracing::debug!("hidden");
            tracing::info!("shown");
        });
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["msg"], "shown");
    }

    #[test]
    fn the_caller_is_the_last_directory_and_the_file() {
        assert_eq!(
            short_caller("crates/controller/src/run.rs", Some(12)),
            "src/run.rs:12"
        );
        assert_eq!(short_caller("main.rs", None), "main.rs");
    }
}
