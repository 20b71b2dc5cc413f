//! One informer's watch loop: a `kube::runtime::watcher` stream applied to the state
//! through its [`Handler`], keeping the last view per key, reconciling relists and timing
//! each event for `/metrics`. Kind-specific behaviour belongs in `handlers`.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::handlers::Handler;
use crate::state::Shared;

/// Observes one handled event (from `start`, the wait for the state lock included).
fn observe<K, H: Handler<K>>(
    shared: &Shared,
    handler: &H,
    kind: &str,
    start: Instant,
    old: Option<&H::View>,
    new: Option<&H::View>,
) {
    if let Some(event) = handler.event_label(kind, old, new) {
        shared.metrics.event_handled(event, start.elapsed());
    }
}

fn key_of<K: Resource>(o: &K) -> String {
    match o.meta().namespace.as_deref() {
        Some(ns) => format!("{ns}/{}", o.name_any()),
        None => o.name_any(),
    }
}

/// Whether a kind must be served, or may be missing from the server (see `informers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Presence {
    Required,
    Optional,
}

/// The server does not serve the kind at all (as opposed to a transient failure). A real
/// API server answers a path of an API it does not serve with a plain-text `404 page not
/// found`, not a `Status`, so kube reports it with a made-up reason: only the code counts.
fn is_missing_api(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e) => crate::client::status_code(e) == Some(404),
        _ => false,
    }
}

/// Runs one informer until the task is aborted.
pub(crate) async fn run_informer<K, H>(
    api: Api<K>,
    config: watcher::Config,
    shared: Arc<Shared>,
    handler: H,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
{
    run_informer_with(api, config, Presence::Required, shared, handler).await
}

/// [`run_informer`] for a kind that may be [`Presence::Optional`].
pub(crate) async fn run_informer_with<K, H>(
    api: Api<K>,
    config: watcher::Config,
    presence: Presence,
    shared: Arc<Shared>,
    handler: H,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
{
    let stream = watcher(api, config).default_backoff();
    run_events(stream, presence, shared, handler).await
}

/// Applies a stream of watcher events (kube's watcher, or [`super::proto::source`]) through
/// `handler`, until the stream or the task ends.
pub(crate) async fn run_events<K, H, S>(
    stream: S,
    presence: Presence,
    shared: Arc<Shared>,
    handler: H,
) where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    H: Handler<K>,
    K::DynamicType: Default,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let kind = K::kind(&Default::default()).to_string();
    // Each kept view with the number of the (re)list that last saw its object. Listed
    // objects are applied as they arrive; at InitDone every kept object the list did not
    // have is deleted, so deletions missed while the watch was down (expired
    // resourceVersion) are not lost. A number, not a set of the listed keys: at 50,000
    // nodes that set was a second copy of every name at the memory peak.
    let mut store: foldhash::HashMap<String, (H::View, u32)> = Default::default();
    let mut list = 0u32;
    let mut synced = false;
    // For the first sync's log line: where a slow start-up goes, kind by kind.
    let started = Instant::now();
    futures::pin_mut!(stream);
    while let Some(item) = stream.next().await {
        let event = match item {
            Ok(e) => e,
            Err(e) if presence == Presence::Optional && !synced && is_missing_api(&e) => {
                tracing::warn!(
                    %kind,
                    error = %e,
                    "the API server does not serve this kind; continuing without it"
                );
                shared.lock().synced += 1;
                shared.notify();
                return;
            }
            Err(e) => {
                tracing::warn!(%kind, error = %e, "watch failed; retrying");
                continue;
            }
        };
        match event {
            watcher::Event::Init => list = list.wrapping_add(1),
            watcher::Event::InitApply(o) => {
                apply(&shared, &handler, &kind, &mut store, list, o);
            }
            watcher::Event::InitDone => {
                {
                    let mut st = shared.lock();
                    store.retain(|k, (old, seen)| {
                        let keep = *seen == list;
                        if !keep {
                            let start = Instant::now();
                            handler.delete(&shared, &mut st, k, old);
                            observe(&shared, &handler, &kind, start, Some(old), None);
                        }
                        keep
                    });
                    if !synced {
                        st.synced += 1;
                    }
                }
                if synced {
                    tracing::debug!(%kind, objects = store.len(), "informer relisted");
                } else {
                    synced = true;
                    tracing::info!(
                        %kind,
                        objects = store.len(),
                        after_ms = started.elapsed().as_millis() as u64,
                        "informer synced"
                    );
                }
                shared.notify();
            }
            watcher::Event::Apply(o) => {
                apply(&shared, &handler, &kind, &mut store, list, o);
                shared.notify();
            }
            watcher::Event::Delete(o) => {
                let k = key_of(&o);
                let old = match store.remove(&k) {
                    Some((v, _)) => v,
                    None => handler.view(o),
                };
                let start = Instant::now();
                handler.delete(&shared, &mut shared.lock(), &k, &old);
                observe(&shared, &handler, &kind, start, Some(&old), None);
                shared.notify();
            }
        }
    }
}

/// Applies an added or changed object and keeps its view, marked as seen by `list`.
fn apply<K, H: Handler<K>>(
    shared: &Shared,
    handler: &H,
    kind: &str,
    store: &mut foldhash::HashMap<String, (H::View, u32)>,
    list: u32,
    o: K,
) where
    K: Resource,
{
    let k = key_of(&o);
    let start = Instant::now();
    let old = store.get(&k).map(|(v, _)| v);
    let view = handler.apply(shared, old, o);
    observe(
        shared,
        handler,
        kind,
        start,
        store.get(&k).map(|(v, _)| v),
        Some(&view),
    );
    store.insert(k, (view, list));
}
