//! `/flagz` and `/statusz`, kube-scheduler's component pages (its `ComponentFlagz` and
//! `ComponentStatusz`), as plain text for people, behind the same authentication and
//! authorization as `/configz`:
//!
//! * `/flagz`: the command line's flags as given, one `name=value` per line, sorted by
//!   name (a flag given without a value is `true`);
//! * `/statusz`: when the process started, how long it has been up, the binary's and the
//!   compiler's versions (upstream shows Go's), and the paths served.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use crate::state::Shared;

const TEXT: &str = "text/plain; charset=utf-8";
const WARNING: &str = "Warning: this page is for debugging; it is not meant to be parsed \
                       and its format may change.";
/// The compiler that built this binary (see `build.rs`).
pub const RUST_VERSION: &str = env!("FERROSCHED_RUSTC_VERSION");
/// The paths the secure port serves, for `/statusz`.
pub const PATHS: &[&str] = &[
    "/configz",
    "/debug/explain",
    "/flagz",
    "/healthz",
    "/livez",
    "/metrics",
    "/readyz",
    "/statusz",
];

/// `(name, value)` of each flag in `args` (the command line after the subcommand), in the
/// order given: `--name=value`, `--name value`, `-v=4`, `-v 4`, and `--name` alone (`true`).
/// A token that follows a flag and does not start with `-` is its value (`run` takes no
/// positional arguments).
pub fn parse_flags(args: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        let Some(flag) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
            continue;
        };
        if flag.is_empty() {
            break; // `--`: the end of the flags
        }
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => match it.next_if(|next| !next.starts_with('-')) {
                Some(v) => (flag.to_string(), v.clone()),
                None => (flag.to_string(), "true".to_string()),
            },
        };
        out.push((name, value));
    }
    out
}

/// The `/flagz` body for `args`.
pub fn flagz_body(args: &[String]) -> String {
    let mut flags = parse_flags(args);
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    let mut body = format!("ferrosched flagz\n{WARNING}\n\n");
    for (name, value) in flags {
        body.push_str(&format!("{name}={value}\n"));
    }
    body
}

/// `Up:` as upstream writes it: hours, minutes, seconds.
fn uptime(d: Duration) -> String {
    let s = d.as_secs();
    format!("{} hr {:02} min {:02} sec", s / 3600, s / 60 % 60, s % 60)
}

/// The `/statusz` body for a process started at `started`, `now`.
pub fn statusz_body(started: SystemTime, now: SystemTime) -> String {
    let at = k8s_openapi::jiff::Timestamp::try_from(started)
        .map_or_else(|_| "unknown".to_string(), |t| t.to_string());
    format!(
        "ferrosched statusz\n{WARNING}\n\nStarted: {at}\nUp: {}\nRust version: {RUST_VERSION}\n\
         Binary version: ferrosched {}\nPaths: {}\n",
        uptime(now.duration_since(started).unwrap_or_default()),
        env!("CARGO_PKG_VERSION"),
        PATHS.join(" "),
    )
}

pub(crate) async fn flagz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, TEXT)], shared.flagz.clone())
}

pub(crate) async fn statusz(State(shared): State<Arc<Shared>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, TEXT)],
        statusz_body(shared.started, SystemTime::now()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn flags_are_listed_as_given_one_per_line_sorted() {
        let body = flagz_body(&args(
            "--secure-port 10259 --profiling=false -v=4 --explain --kubeconfig /k --tls-sni-cert-key a,b --tls-sni-cert-key c,d",
        ));
        let lines: Vec<&str> = body.lines().skip(3).collect();
        assert_eq!(
            lines,
            [
                "explain=true",
                "kubeconfig=/k",
                "profiling=false",
                "secure-port=10259",
                "tls-sni-cert-key=a,b",
                "tls-sni-cert-key=c,d",
                "v=4",
            ]
        );
        assert!(body.starts_with("ferrosched flagz\n"));
    }

    #[test]
    fn statusz_says_when_it_started_and_how_long_it_has_been_up() {
        let started = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let body = statusz_body(started, started + Duration::from_secs(3 * 3600 + 61));
        assert!(body.contains("\nStarted: 2023-11-14T22:13:20Z\n"), "{body}");
        assert!(body.contains("\nUp: 3 hr 01 min 01 sec\n"), "{body}");
        assert!(body.contains("\nRust version: rustc "), "{body}");
        assert!(
            body.contains("\nPaths: /configz /debug/explain /flagz "),
            "{body}"
        );
    }
}
