//! events.k8s.io/v1 Events, as kube-scheduler's recorder writes them: one recorder per
//! profile (reportingController = the profile's schedulerName, reportingInstance =
//! `{schedulerName}-{instance id}`; upstream uses the hostname as instance id).

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use crate::podref::PodRef;
use crate::retry::with_retry;

/// The API server's limit on `note` (upstream truncates to it).
pub const NOTE_LENGTH_LIMIT: usize = 1024;

pub const REASON_SCHEDULED: &str = "Scheduled";
pub const REASON_FAILED_SCHEDULING: &str = "FailedScheduling";
pub const REASON_PREEMPTED: &str = "Preempted";
pub const ACTION_BINDING: &str = "Binding";
pub const ACTION_SCHEDULING: &str = "Scheduling";
pub const ACTION_PREEMPTING: &str = "Preempting";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Cuts `note` to the API limit the way upstream does (`... ` suffix), on a char boundary.
pub fn truncate_note(note: &str) -> String {
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

#[derive(Clone)]
pub struct Recorder {
    client: Client,
    instance_id: String,
}

/// One event to write.
pub struct EventSpec<'a> {
    pub controller: &'a str,
    pub regarding: &'a PodRef,
    pub related: Option<&'a PodRef>,
    pub type_: EventType,
    pub reason: &'a str,
    pub action: &'a str,
    pub note: &'a str,
}

impl Recorder {
    pub fn new(client: Client, instance_id: String) -> Self {
        Recorder {
            client,
            instance_id,
        }
    }

    pub fn build(&self, e: &EventSpec<'_>) -> Event {
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

    /// Writes the event; failures are logged, never fatal (events are best effort upstream).
    pub async fn record(&self, e: EventSpec<'_>) {
        let event = self.build(&e);
        let api: Api<Event> = Api::namespaced(self.client.clone(), &e.regarding.namespace);
        let pp = PostParams::default();
        if let Err(err) = with_retry("event", || api.create(&pp, &event)).await {
            tracing::warn!(pod = %e.regarding, reason = e.reason, error = %err, "could not write event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
