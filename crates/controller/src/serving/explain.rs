//! `run --explain`: the last attempt's explanation of each pending pod, kept in memory
//! (bounded) and served on the secure port under `/debug/explain`, behind the same
//! authentication and authorization as `/metrics`. Entries leave when the pod is bound or
//! deleted; past the cap the oldest entry goes first.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use scheduler_core::explain::Explanation;
use scheduler_core::types::PodKey;
use serde::Serialize;

use crate::state::Shared;

/// `--explain-max-pods`' default.
pub const DEFAULT_MAX_PODS: usize = 1000;

/// What `run` records and where it shows it. Off by default.
#[derive(Clone, Debug, Default)]
pub struct ExplainOptions {
    /// Keep each pending pod's last explanation and serve it under `/debug/explain`.
    pub serve: bool,
    /// How many pods' explanations to keep at most (0: [`DEFAULT_MAX_PODS`]).
    pub max_pods: usize,
    /// Profiles whose pods get kube-scheduler-simulator's result annotations after each
    /// attempt.
    pub annotate_profiles: BTreeSet<String>,
}

impl ExplainOptions {
    /// Whether attempts of `profile` are recorded at all.
    pub(crate) fn records(&self, profile: &str) -> bool {
        self.serve || self.annotate_profiles.contains(profile)
    }

    pub(crate) fn annotates(&self, profile: &str) -> bool {
        self.annotate_profiles.contains(profile)
    }
}

/// The kept explanations, in the shared state (so a bound or deleted pod leaves under the
/// same lock that sees it go).
#[derive(Debug, Default)]
pub(crate) struct ExplainStore {
    enabled: bool,
    cap: usize,
    seq: u64,
    entries: HashMap<PodKey, (u64, Arc<Explanation>)>,
    /// Insertion order; entries replaced since are skipped when evicting.
    order: VecDeque<(u64, PodKey)>,
}

impl ExplainStore {
    pub(crate) fn new(opts: &ExplainOptions) -> Self {
        ExplainStore {
            enabled: opts.serve,
            cap: if opts.max_pods == 0 {
                DEFAULT_MAX_PODS
            } else {
                opts.max_pods
            },
            ..Default::default()
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    pub(crate) fn put(&mut self, key: PodKey, e: Arc<Explanation>) {
        if !self.enabled {
            return;
        }
        self.seq += 1;
        self.order.push_back((self.seq, key.clone()));
        self.entries.insert(key, (self.seq, e));
        while self.entries.len() > self.cap {
            let Some((seq, k)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&k).is_some_and(|(s, _)| *s == seq) {
                self.entries.remove(&k);
            }
        }
        if self.order.len() > 2 * self.cap + 64 {
            // Drop the stale order entries of pods recorded again since.
            let entries = &self.entries;
            self.order
                .retain(|(s, k)| entries.get(k).is_some_and(|(cur, _)| cur == s));
        }
    }

    pub(crate) fn remove(&mut self, key: &PodKey) {
        if self.enabled {
            self.entries.remove(key);
        }
    }

    pub(crate) fn get(&self, key: &PodKey) -> Option<Arc<Explanation>> {
        self.entries.get(key).map(|(_, e)| Arc::clone(e))
    }

    fn summaries(&self) -> Vec<Summary> {
        let mut out: Vec<Summary> = self
            .entries
            .values()
            .map(|(_, e)| Summary {
                pod: e.pod.clone(),
                profile: e.profile.clone(),
                outcome: e.outcome,
                message: e.message.clone(),
            })
            .collect();
        out.sort_by(|a, b| a.pod.cmp(&b.pod));
        out
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    pod: String,
    profile: String,
    outcome: scheduler_core::explain::Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// Shown when `run` was started without `--explain`.
pub const NOT_RECORDING: &str =
    "explanations are not recorded: start ferrosched run with --explain\n";

#[derive(serde::Deserialize)]
pub(crate) struct Format {
    /// `table` for the readable table; JSON otherwise.
    #[serde(default)]
    format: Option<String>,
}

/// `GET /debug/explain`: every kept pod, with its outcome and message.
pub(crate) async fn list(State(shared): State<Arc<Shared>>) -> Response {
    let st = shared.lock();
    if !st.explain.enabled() {
        return (StatusCode::NOT_FOUND, NOT_RECORDING).into_response();
    }
    let items = st.explain.summaries();
    drop(st);
    json_response(&serde_json::json!({ "items": items }))
}

/// `GET /debug/explain/{namespace}/{pod}`: the pod's last explanation (`?format=table` for
/// the table `ferrosched explain` prints).
pub(crate) async fn one(
    State(shared): State<Arc<Shared>>,
    Path((namespace, name)): Path<(String, String)>,
    Query(q): Query<Format>,
) -> Response {
    let found = {
        let st = shared.lock();
        if !st.explain.enabled() {
            return (StatusCode::NOT_FOUND, NOT_RECORDING).into_response();
        }
        st.explain.get(&PodKey::new(&namespace, &name))
    };
    let Some(e) = found else {
        return (
            StatusCode::NOT_FOUND,
            format!(
                "no explanation for pod {namespace}/{name}: it is not pending in a profile of \
                 this scheduler, or has not been attempted since it became pending\n"
            ),
        )
            .into_response();
    };
    if q.format.as_deref() == Some("table") {
        return (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            scheduler_core::explain::render::render(&e, 20),
        )
            .into_response();
    }
    json_response(&*e)
}

fn json_response<T: Serialize>(v: &T) -> Response {
    match serde_json::to_string_pretty(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body + "\n").into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(pod: &str) -> Arc<Explanation> {
        Arc::new(Explanation::new(pod, "default-scheduler"))
    }

    #[test]
    fn keeps_the_newest_up_to_the_cap_and_forgets_removed_pods() {
        let mut s = ExplainStore::new(&ExplainOptions {
            serve: true,
            max_pods: 2,
            ..Default::default()
        });
        let (a, b, c) = (
            PodKey::new("ns", "a"),
            PodKey::new("ns", "b"),
            PodKey::new("ns", "c"),
        );
        s.put(a.clone(), e("ns/a"));
        s.put(b.clone(), e("ns/b"));
        // a again: now newer than b, so c evicts b.
        s.put(a.clone(), e("ns/a"));
        s.put(c.clone(), e("ns/c"));
        assert_eq!(s.len(), 2);
        assert!(s.get(&a).is_some() && s.get(&c).is_some() && s.get(&b).is_none());
        s.remove(&a);
        assert!(s.get(&a).is_none());
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn off_keeps_nothing() {
        let mut s = ExplainStore::new(&ExplainOptions::default());
        s.put(PodKey::new("ns", "a"), e("ns/a"));
        assert_eq!(s.len(), 0);
    }
}
