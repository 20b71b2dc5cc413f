//! The pod and node informers' list and watch in Kubernetes' protobuf encoding, as
//! kube-scheduler asks for them, with JSON when the server answers JSON.
//!
//! Why: at 50,000 nodes kube-apiserver v1.28 took 5.6-6.4 s to encode the initial node list
//! as JSON (122 MB) and 0.5-1.2 s as protobuf (40 MB), measured with curl on this project's
//! machine; the JSON list alone made ferrosched's first binding later than kube-scheduler's.
//! Every node status heartbeat is encoded for the watch as well, so protobuf also halves
//! what a heartbeat costs the server and the scheduler. Pods are listed and watched the
//! same way: the whole list from the watch cache in one streamed response instead of pages
//! of 100 from etcd, and every create and bind as a protobuf frame whose unread fields
//! (env, probes, managedFields...) are skipped by length instead of scanned.
//!
//! kube's `watcher` decodes JSON only, so this module is the pod and node informers'
//! source: a list (resourceVersion 0, served from the watch cache), then a watch from its
//! resourceVersion with bookmarks, again from the last version seen when a watch ends or
//! fails (with backoff), and a relist when the server says the version is gone (410). It
//! yields the same `watcher::Event`s kube's watcher does, so `watch::run_events` applies
//! them unchanged. Requests carry `Accept: application/vnd.kubernetes.protobuf,
//! application/json`; each response is decoded by its Content-Type (the fake API server
//! answers JSON for objects it cannot encode).

pub(crate) mod meta;
pub(crate) mod node;
pub(crate) mod pod;
pub(crate) mod source;
pub(crate) mod wire;

use kube::Resource;

use meta::{status, unwrap_envelope};
use wire::{Fields, Result, WireError};

/// The Content-Type of protobuf bodies (watch streams add `;stream=watch`).
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// What every request accepts, in order of preference (client-go's for protobuf clients).
pub(crate) const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";

/// One watch event, decoded.
#[derive(Debug)]
pub(crate) enum Event<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    /// The resourceVersion the watch has reached.
    Bookmark(String),
    /// An `ERROR` event: the Status' code, reason and message.
    Error(i32, String, String),
}

/// Decodes one protobuf watch frame: WatchEvent{ type = 1, object = 2: RawExtension{ raw = 1 } },
/// the raw object in its own envelope.
pub(crate) fn watch_event<K: Resource>(
    frame: &[u8],
    item: fn(&[u8]) -> Result<K>,
) -> Result<Event<K>> {
    let (mut kind, mut raw): (String, &[u8]) = (String::new(), &[]);
    for f in Fields::new(frame) {
        match f? {
            (1, v) => kind = v.string("type")?,
            (2, v) => {
                for g in Fields::new(v.bytes("object")?) {
                    if let (1, r) = g? {
                        raw = r.bytes("object.raw")?;
                    }
                }
            }
            _ => {}
        }
    }
    let (_, object) = unwrap_envelope(raw)?;
    Ok(match kind.as_str() {
        "ADDED" => Event::Added(item(object)?),
        "MODIFIED" => Event::Modified(item(object)?),
        "DELETED" => Event::Deleted(item(object)?),
        "BOOKMARK" => Event::Bookmark(
            item(object)?
                .meta()
                .resource_version
                .clone()
                .unwrap_or_default(),
        ),
        "ERROR" => {
            let (code, reason, message) = status(object)?;
            Event::Error(code, reason, message)
        }
        other => return Err(WireError(format!("watch event type {other:?}"))),
    })
}

/// Splits a protobuf watch stream into frames: each a 4-byte big-endian length, then that
/// many bytes.
#[derive(Default)]
pub(crate) struct Frames {
    buf: Vec<u8>,
    start: usize,
}

/// A frame larger than this is a broken stream, not an object (the API server's own limit
/// on a request body is 3 MiB; a node with a long images list stays far below it).
const MAX_FRAME: usize = 64 << 20;

impl Frames {
    pub(crate) fn push(&mut self, data: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, if one has arrived.
    pub(crate) fn next_frame(&mut self) -> Result<Option<&[u8]>> {
        let rest = &self.buf[self.start..];
        let Some(head) = rest.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if len > MAX_FRAME {
            return Err(WireError(format!("a watch frame of {len} bytes")));
        }
        if rest.len() < 4 + len {
            // Keep only the unread bytes once most of the buffer is read.
            if self.start > self.buf.len() / 2 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            return Ok(None);
        }
        let from = self.start + 4;
        self.start = from + len;
        Ok(Some(&self.buf[from..from + len]))
    }
}

#[cfg(test)]
mod pod_tests;
#[cfg(test)]
mod tests;

/// What `ferrosched-benches` measures of the pod informer's decoding (not an API).
pub mod bench_support {
    use k8s_openapi::api::core::v1::Pod;

    use super::{Event, Frames, watch_event};
    use crate::informers::lean::Lean;

    /// The frames of a protobuf watch stream.
    pub fn protobuf_frames(stream: &[u8]) -> Vec<Vec<u8>> {
        let mut frames = Frames::default();
        frames.push(stream);
        let mut out = Vec::new();
        while let Ok(Some(f)) = frames.next_frame() {
            out.push(f.to_vec());
        }
        out
    }

    /// The pod of one protobuf watch frame, as the informer decodes it.
    pub fn protobuf_watch_pod(frame: &[u8]) -> Option<Pod> {
        match watch_event(frame, super::pod::pod).ok()? {
            Event::Added(Lean(p)) | Event::Modified(Lean(p)) | Event::Deleted(Lean(p)) => Some(p),
            _ => None,
        }
    }

    /// The pod of one JSON watch line, as the informer decodes it.
    pub fn json_watch_pod(line: &[u8]) -> Option<Pod> {
        use kube::core::WatchEvent;
        match serde_json::from_slice::<WatchEvent<Lean<Pod>>>(line).ok()? {
            WatchEvent::Added(Lean(p))
            | WatchEvent::Modified(Lean(p))
            | WatchEvent::Deleted(Lean(p)) => Some(p),
            _ => None,
        }
    }
}
