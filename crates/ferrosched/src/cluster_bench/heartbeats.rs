//! `bench --kubeconfig --heartbeats RATE`: a kubelet heartbeat storm during the measured
//! phase. A task of its own, with its own client (so its own connections), PATCHes the
//! status of the run's nodes round robin at RATE per second, as kubelets do: a strategic
//! merge patch of `status.conditions` (merged by `type`) moving the Ready condition's
//! `lastHeartbeatTime`, nothing else.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde::{Deserialize, Serialize};
use tokio::sync::{Semaphore, watch};

/// Heartbeat PATCHes in flight at most (kubelets are many clients; one bounded driver
/// stands in for them without flooding this machine's sockets).
pub const MAX_IN_FLIGHT: usize = 64;

/// How often the pacer wakes to send what is due.
const TICK: Duration = Duration::from_millis(5);

/// What a storm did.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatReport {
    /// Asked for (`--heartbeats`), per second.
    pub requested_per_second: f64,
    /// Successful PATCHes per second over the storm.
    pub achieved_per_second: f64,
    pub sent: u64,
    pub failed: u64,
    pub seconds: f64,
}

/// A running storm; [`Storm::stop`] ends it and reports.
pub struct Storm {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<HeartbeatReport>,
}

impl Storm {
    /// Starts patching `nodes` round robin at `rate` per second through `client`.
    pub fn start(client: Client, nodes: Vec<String>, rate: f64) -> Storm {
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(storm(Api::all(client), nodes, rate, stopped));
        Storm { stop, task }
    }

    /// Stops sending, waits for the PATCHes in flight, and reports.
    pub async fn stop(self) -> HeartbeatReport {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// The body a kubelet's status update amounts to for a heartbeat.
pub fn heartbeat_patch(at: &Time) -> serde_json::Value {
    serde_json::json!({
        "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": at}]}
    })
}

async fn storm(
    api: Api<Node>,
    nodes: Vec<String>,
    rate: f64,
    mut stopped: watch::Receiver<bool>,
) -> HeartbeatReport {
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let results = Arc::new(std::sync::Mutex::new((0u64, 0u64)));
    let start = Instant::now();
    let mut issued: u64 = 0;
    let mut next = 0usize;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !nodes.is_empty() && !*stopped.borrow() {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stopped.changed() => break,
        }
        let due = (start.elapsed().as_secs_f64() * rate) as u64;
        while issued < due {
            // Waits while MAX_IN_FLIGHT are out: the achieved rate then falls short.
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                break;
            };
            issued += 1;
            let name = nodes[next].clone();
            next = (next + 1) % nodes.len();
            let (api, results) = (api.clone(), Arc::clone(&results));
            tokio::spawn(async move {
                let patch = heartbeat_patch(&Time(k8s_openapi::jiff::Timestamp::now()));
                let ok = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch))
                    .await
                    .is_ok();
                let mut r = results.lock().unwrap();
                if ok {
                    r.0 += 1
                } else {
                    r.1 += 1
                }
                drop(permit);
            });
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // The PATCHes still out finish before the report (those not done in 10 s count as
    // neither sent nor failed).
    let drained = permits.acquire_many(MAX_IN_FLIGHT as u32);
    let _ = tokio::time::timeout(Duration::from_secs(10), drained).await;
    let (sent, failed) = *results.lock().unwrap();
    HeartbeatReport {
        requested_per_second: rate,
        achieved_per_second: sent as f64 / seconds.max(1e-9),
        sent,
        failed,
        seconds,
    }
}
