//! events.k8s.io/v1 Events, as kube-scheduler's recorder writes them: one recorder per
//! profile (reportingController = the profile's schedulerName, reportingInstance =
//! `{schedulerName}-{instance id}`; upstream uses the hostname as instance id).
//! Kubernetes Event objects only: the cluster events that move queued pods are
//! scheduler-core's `framework::cluster_events`.

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Resource};

use crate::binding::podref::PodRef;
use crate::client::retry::ApiClient;

/// The API server's limit on `note` (upstream truncates to it).
pub(crate) const NOTE_LENGTH_LIMIT: usize = 1024;

pub(crate) const REASON_SCHEDULED: &str = "Scheduled";
pub(crate) const REASON_FAILED_SCHEDULING: &str = "FailedScheduling";
pub(crate) const REASON_PREEMPTED: &str = "Preempted";
pub(crate) const ACTION_BINDING: &str = "Binding";
pub(crate) const ACTION_SCHEDULING: &str = "Scheduling";
pub(crate) const ACTION_PREEMPTING: &str = "Preempting";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Cuts `note` to the API limit the way upstream does (`... ` suffix), on a char boundary.
pub(crate) fn truncate_note(note: &str) -> String {
    if note.len() <= NOTE_LENGTH_LIMIT {
        return note.to_string();
    }
    const SUFFIX: &str = " ...";
    let mut end = NOTE_LENGTH_LIMIT - SUFFIX.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &note[..end])
}

/// Isomorphic events (same controller, reason, action, regarding and related object; the
/// note is not part of the key, as upstream) within this window extend a series instead of
/// creating a new Event.
pub(crate) const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);
/// How often a growing series is written back (upstream refreshes every 30 minutes).
pub(crate) const SERIES_REFRESH: Duration = Duration::from_secs(30 * 60);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SeriesKey {
    controller: String,
    reason: String,
    action: String,
    regarding: (String, String, String),
    related: Option<(String, String, String)>,
}

#[derive(Debug)]
struct Series {
    /// The Event object's name, once created.
    name: Option<String>,
    namespace: String,
    count: i32,
    last_observed: Instant,
    last_written: Instant,
}

/// What [`Recorder::record`] does for one occurrence.
#[derive(Debug, PartialEq, Eq)]
enum Write {
    Create,
    /// PATCH the existing event's series to this count.
    Series {
        name: String,
        count: i32,
    },
    Nothing,
}

#[derive(Clone)]
pub(crate) struct Recorder {
    client: ApiClient,
    instance_id: String,
    cache: Arc<Mutex<SeriesCache>>,
}

/// Open series. Expired ones are swept at most once per [`SWEEP_PERIOD`]: sweeping on every
/// event made recording O(open series), quadratic over a burst of bindings.
#[derive(Default)]
struct SeriesCache {
    series: HashMap<SeriesKey, Series>,
    last_sweep: Option<Instant>,
}

/// How often expired series are dropped (they are ignored as soon as they expire).
const SWEEP_PERIOD: Duration = Duration::from_secs(60);

/// One event to write.
pub(crate) struct EventSpec<'a> {
    pub(crate) controller: &'a str,
    pub(crate) regarding: &'a PodRef,
    pub(crate) related: Option<&'a PodRef>,
    pub(crate) type_: EventType,
    pub(crate) reason: &'a str,
    pub(crate) action: &'a str,
    pub(crate) note: &'a str,
}

fn triple(p: &PodRef) -> (String, String, String) {
    (p.namespace.clone(), p.name.clone(), p.uid.clone())
}

impl Recorder {
    pub(crate) fn new(client: ApiClient, instance_id: String) -> Self {
        Recorder {
            client,
            instance_id,
            cache: Arc::default(),
        }
    }

    pub(crate) fn build(&self, e: &EventSpec<'_>) -> Event {
        let now = Timestamp::now();
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", e.regarding.name, now.as_nanosecond())),
                namespace: Some(e.regarding.namespace.clone()),
                ..Default::default()
            },
            event_time: Some(MicroTime(now)),
            action: Some(e.action.to_string()),
            reason: Some(e.reason.to_string()),
            note: Some(truncate_note(e.note)),
            type_: Some(e.type_.as_str().to_string()),
            regarding: Some(e.regarding.object_reference()),
            related: e.related.map(PodRef::object_reference),
            reporting_controller: Some(e.controller.to_string()),
            reporting_instance: Some(format!("{}-{}", e.controller, self.instance_id)),
            ..Default::default()
        }
    }

    fn plan(&self, e: &EventSpec<'_>, now: Instant) -> (SeriesKey, Write) {
        let key = SeriesKey {
            controller: e.controller.to_string(),
            reason: e.reason.to_string(),
            action: e.action.to_string(),
            regarding: triple(e.regarding),
            related: e.related.map(triple),
        };
        // A pod is bound once per UID: its Scheduled event can never repeat, so it opens no
        // series (remembering one per pod for the window would cost memory per pod bound).
        if e.reason == REASON_SCHEDULED {
            return (key, Write::Create);
        }
        let mut guard = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let sc = &mut *guard;
        if sc
            .last_sweep
            .is_none_or(|t| now.duration_since(t) >= SWEEP_PERIOD)
        {
            sc.series
                .retain(|_, s| now.duration_since(s.last_observed) < SERIES_WINDOW);
            sc.last_sweep = Some(now);
        }
        let cache = &mut sc.series;
        let open = cache
            .get_mut(&key)
            .filter(|s| now.duration_since(s.last_observed) < SERIES_WINDOW);
        let write = match open {
            None => {
                cache.insert(
                    key.clone(),
                    Series {
                        name: None,
                        namespace: e.regarding.namespace.clone(),
                        count: 1,
                        last_observed: now,
                        last_written: now,
                    },
                );
                Write::Create
            }
            Some(s) => {
                s.count += 1;
                s.last_observed = now;
                match &s.name {
                    Some(name)
                        if s.count == 2 || now.duration_since(s.last_written) >= SERIES_REFRESH =>
                    {
                        s.last_written = now;
                        Write::Series {
                            name: name.clone(),
                            count: s.count,
                        }
                    }
                    _ => Write::Nothing,
                }
            }
        };
        (key, write)
    }

    /// Writes the event, or extends its series; failures are logged, never fatal (events
    /// are best effort upstream).
    pub(crate) async fn record(&self, e: EventSpec<'_>) {
        let (key, write) = self.plan(&e, Instant::now());
        let ns = &e.regarding.namespace;
        let api: Api<Event> = Api::namespaced(self.client.client.clone(), ns);
        let result = match write {
            Write::Nothing => return,
            Write::Create => {
                let event = self.build(&e);
                // The name is chosen here, not by the server (as upstream's recorder does):
                // a repeat that comes while the create is in flight can extend the series
                // at once instead of being lost until the next refresh.
                if let Some(s) = self
                    .cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .series
                    .get_mut(&key)
                {
                    s.name.clone_from(&event.metadata.name);
                    s.namespace.clone_from(ns);
                }
                let events = Event::url_path(&(), Some(ns));
                self.client
                    .post_unread("event", &events, None, &event)
                    .await
            }
            Write::Series { name, count } => {
                let patch = serde_json::json!({"series": {
                    "count": count,
                    "lastObservedTime": MicroTime(Timestamp::now()),
                }});
                let pp = PatchParams::default();
                let patch = Patch::Merge(&patch);
                self.client
                    .call("event series", || api.patch(&name, &pp, &patch))
                    .await
                    .map(drop)
            }
        };
        if let Err(err) = result {
            tracing::warn!(pod = %e.regarding, reason = e.reason, error = %err, "could not write event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn repeats_extend_a_series_and_new_windows_start_a_new_event() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let r = Recorder::new(ApiClient::new(client, 50.0, 100), "h".into());
        let pod = PodRef {
            namespace: "d".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        let spec = |note| EventSpec {
            controller: "default-scheduler",
            regarding: &pod,
            related: None,
            type_: EventType::Warning,
            reason: REASON_FAILED_SCHEDULING,
            action: ACTION_SCHEDULING,
            note,
        };
        let t0 = Instant::now();
        let (key, w) = r.plan(&spec("a"), t0);
        assert_eq!(w, Write::Create);
        r.cache.lock().unwrap().series.get_mut(&key).unwrap().name = Some("p.1".into());
        let (_, w) = r.plan(&spec("b"), t0 + Duration::from_secs(1));
        assert_eq!(
            w,
            Write::Series {
                name: "p.1".into(),
                count: 2
            }
        );
        let (_, w) = r.plan(&spec("c"), t0 + Duration::from_secs(2));
        assert_eq!(w, Write::Nothing);
        let (_, w) = r.plan(&spec("d"), t0 + Duration::from_secs(2) + SERIES_WINDOW);
        assert_eq!(w, Write::Create);
    }

    #[tokio::test]
    async fn scheduled_events_open_no_series() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let r = Recorder::new(ApiClient::new(client, 50.0, 100), "h".into());
        let pod = PodRef {
            namespace: "d".into(),
            name: "p".into(),
            uid: "u".into(),
        };
        let spec = EventSpec {
            controller: "default-scheduler",
            regarding: &pod,
            related: None,
            type_: EventType::Normal,
            reason: REASON_SCHEDULED,
            action: ACTION_BINDING,
            note: "Successfully assigned d/p to n",
        };
        let (_, w) = r.plan(&spec, Instant::now());
        assert_eq!(w, Write::Create);
        assert!(r.cache.lock().unwrap().series.is_empty());
    }

    #[tokio::test]
    async fn expired_series_are_ignored_before_a_sweep_and_dropped_by_it() {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let r = Recorder::new(ApiClient::new(client, 50.0, 100), "h".into());
        let pods: Vec<PodRef> = (0..3)
            .map(|i| PodRef {
                namespace: "d".into(),
                name: format!("p{i}"),
                uid: format!("u{i}"),
            })
            .collect();
        let spec = |pod| EventSpec {
            controller: "default-scheduler",
            regarding: pod,
            related: None,
            type_: EventType::Normal,
            reason: REASON_FAILED_SCHEDULING,
            action: ACTION_SCHEDULING,
            note: "n",
        };
        let t0 = Instant::now();
        for p in &pods {
            let (key, w) = r.plan(&spec(p), t0);
            assert_eq!(w, Write::Create);
            r.cache.lock().unwrap().series.get_mut(&key).unwrap().name = Some("x".into());
        }
        // Just swept (as far as the cache knows): the expired series must still not be
        // extended.
        r.cache.lock().unwrap().last_sweep = Some(t0 + SERIES_WINDOW);
        let (_, w) = r.plan(&spec(&pods[0]), t0 + SERIES_WINDOW + Duration::from_secs(1));
        assert_eq!(w, Write::Create);
        assert_eq!(r.cache.lock().unwrap().series.len(), 3, "no sweep yet");
        // A sweep period later the other two expired series are gone.
        let later = t0 + SERIES_WINDOW + SWEEP_PERIOD + Duration::from_secs(1);
        let (_, w) = r.plan(&spec(&pods[0]), later);
        assert_eq!(
            w,
            Write::Nothing,
            "p0's new series is open (its name not known yet)"
        );
        assert_eq!(r.cache.lock().unwrap().series.len(), 1);
    }

    #[test]
    fn long_notes_are_cut_like_upstream() {
        let s = "é".repeat(600);
        let t = truncate_note(&s);
        assert!(
            t.len() <= NOTE_LENGTH_LIMIT && t.ends_with(" ..."),
            "{}",
            t.len()
        );
        assert_eq!(truncate_note("short"), "short");
    }
}
