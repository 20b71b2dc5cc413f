//! The status scheduler-plugins' PodGroup controller keeps on `scheduling.x-k8s.io`
//! PodGroups, computed the same way, pure: from the status as it is, the group's
//! `minMember` and creation time, and its pods (every pod in the group's namespace with the
//! label, whatever its phase). `ferrosched run` writes it (`controller::coscheduling_status`).
//!
//! One [`step`] is one of its reconciles:
//!
//! * `Finished` and `Failed` are final: nothing changes any more.
//! * A group `Pending` or `Scheduling` with no pod running whose `scheduleStartTime` is more
//!   than 48 hours after its creation is left alone (its pods may have been collected).
//! * No phase yet: `Pending`.
//! * `Pending`: `Scheduling` once it has `minMember` pods, and `occupiedBy` from the first
//!   pod's owners (`NS/OWNER`, sorted, comma-separated; unchanged if it has none).
//! * Otherwise the pods are counted (`running`, `succeeded`, `failed`), and the phase is
//!   `Pending` when there are fewer than `minMember` pods, else `Scheduling`, then
//!   `Running` when running and succeeded reach `minMember`, `Failed` when some failed and
//!   failed, running and succeeded together reach it, and `Finished` when succeeded alone
//!   does.
//!
//! Its controller runs a reconcile again whenever it wrote the group, until nothing changes;
//! [`settle`] does the same at once.

pub use crate::types::pod_group::CoschedulingStatus;

pub const PENDING: &str = "Pending";
pub const SCHEDULING: &str = "Scheduling";
pub const RUNNING: &str = "Running";
pub const FINISHED: &str = "Finished";
pub const FAILED: &str = "Failed";

/// How long after its creation a group may start scheduling before it is left alone.
pub const SCHEDULE_TIMEOUT_NANOS: i64 = 48 * 3600 * 1_000_000_000;

/// One pod of the group: its phase and the names of its owners.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    /// `status.phase`: `Pending`, `Running`, `Succeeded`, `Failed`, `Unknown` or empty.
    pub phase: String,
    pub owners: Vec<String>,
}

/// What one reconcile does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the group is `Finished` or `Failed`.
    Final,
    /// Nothing: it has waited more than 48 hours (scheduler-plugins records a `Timeout`
    /// warning event on the group).
    TimedOut,
    /// The status after this reconcile (maybe the same).
    Status(CoschedulingStatus),
}

/// The group and its pods, as one reconcile reads them.
#[derive(Clone, Copy, Debug)]
pub struct Group<'a> {
    pub namespace: &'a str,
    /// `spec.minMember` (0 when not set).
    pub min_member: i32,
    /// `metadata.creationTimestamp`, Unix nanoseconds.
    pub created: Option<i64>,
    /// Its pods, in the order the first one's owners are taken from (by name).
    pub pods: &'a [Member],
}

/// One reconcile of scheduler-plugins' PodGroup controller.
pub fn step(old: &CoschedulingStatus, group: Group<'_>) -> Step {
    if old.phase == FINISHED || old.phase == FAILED {
        return Step::Final;
    }
    if (old.phase == SCHEDULING || old.phase == PENDING)
        && old.running == 0
        && let (Some(start), Some(created)) = (old.schedule_start_time, group.created)
        && start.saturating_sub(created) > SCHEDULE_TIMEOUT_NANOS
    {
        return Step::TimedOut;
    }
    let pods = group.pods;
    let min = i64::from(group.min_member);
    let enough = pods.len() as i64 >= min;
    let mut new = old.clone();
    match old.phase.as_str() {
        "" => new.phase = PENDING.into(),
        PENDING => {
            if enough {
                new.phase = SCHEDULING.into();
                if let Some(first) = pods.first()
                    && !first.owners.is_empty()
                {
                    new.occupied_by = occupied_by(group.namespace, &first.owners);
                }
            }
        }
        _ => {
            let count = |phase: &str| pods.iter().filter(|p| p.phase == phase).count() as i32;
            new.running = count("Running");
            new.succeeded = count("Succeeded");
            new.failed = count("Failed");
            if !enough {
                new.phase = PENDING.into();
                return Step::Status(new);
            }
            let (running, succeeded, failed) = (
                i64::from(new.running),
                i64::from(new.succeeded),
                i64::from(new.failed),
            );
            new.phase = if running + succeeded >= min {
                RUNNING
            } else {
                SCHEDULING
            }
            .into();
            if failed != 0 && failed + running + succeeded >= min {
                new.phase = FAILED.into();
            }
            if succeeded >= min {
                new.phase = FINISHED.into();
            }
        }
    }
    Step::Status(new)
}

/// Reconciles until nothing changes (a few steps at most): the status the group ends up
/// with, or `None` when it is not to be touched.
pub fn settle(old: &CoschedulingStatus, group: Group<'_>) -> Option<CoschedulingStatus> {
    let mut status = match step(old, group) {
        Step::Status(s) => s,
        Step::Final | Step::TimedOut => return None,
    };
    // "" -> Pending -> Scheduling -> counted: four steps reach any fixed point.
    for _ in 0..4 {
        match step(&status, group) {
            Step::Status(next) if next != status => status = next,
            _ => break,
        }
    }
    Some(status)
}

fn occupied_by(namespace: &str, owners: &[String]) -> String {
    let mut refs: Vec<String> = owners.iter().map(|o| format!("{namespace}/{o}")).collect();
    refs.sort();
    refs.join(",")
}

/// The merge patch of `status` from `old` to `new`: the fields that differ, `null` for one
/// that became empty (as scheduler-plugins' patch, which omits empty fields); `None` when
/// nothing differs.
pub fn merge_patch(
    old: &CoschedulingStatus,
    new: &CoschedulingStatus,
) -> Option<serde_json::Value> {
    use serde_json::{Value, json};
    let mut m = serde_json::Map::new();
    let text = |s: &str| {
        if s.is_empty() { Value::Null } else { json!(s) }
    };
    let count = |n: i32| if n == 0 { Value::Null } else { json!(n) };
    if old.phase != new.phase {
        m.insert("phase".into(), text(&new.phase));
    }
    if old.occupied_by != new.occupied_by {
        m.insert("occupiedBy".into(), text(&new.occupied_by));
    }
    for (field, o, n) in [
        ("running", old.running, new.running),
        ("succeeded", old.succeeded, new.succeeded),
        ("failed", old.failed, new.failed),
    ] {
        if o != n {
            m.insert(field.into(), count(n));
        }
    }
    (!m.is_empty()).then(|| json!({ "status": m }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3600 * 1_000_000_000;

    fn pods(names: &[&str], phase: &str) -> Vec<Member> {
        names
            .iter()
            .map(|n| Member {
                name: n.to_string(),
                phase: phase.into(),
                owners: Vec::new(),
            })
            .collect()
    }

    fn status(phase: &str) -> CoschedulingStatus {
        // As scheduler-plugins' tests make them: started now, occupied by "test".
        CoschedulingStatus {
            phase: phase.into(),
            occupied_by: "test".into(),
            schedule_start_time: Some(100 * HOUR),
            ..Default::default()
        }
    }

    fn group(min_member: i32, pods: &[Member]) -> Group<'_> {
        Group {
            namespace: "default",
            min_member,
            created: Some(100 * HOUR),
            pods,
        }
    }

    /// After `reconciles` reconciles (scheduler-plugins' test reconciles once per pod).
    fn phase_after(old: &str, min: i32, pods: &[Member], reconciles: usize) -> String {
        let mut s = status(old);
        for _ in 0..reconciles {
            if let Step::Status(next) = step(&s, group(min, pods)) {
                s = next;
            }
        }
        s.phase
    }

    /// scheduler-plugins' `Test_Run` cases.
    #[test]
    fn phases_as_scheduler_plugins_controller_moves_them() {
        let two = |phase| pods(&["pod1", "pod2"], phase);
        let four = pods(&["pod11", "pod21", "pod31", "pod41"], "Running");
        for (name, old, min, pods, want) in [
            ("running", SCHEDULING, 2, two("Running"), RUNNING),
            ("running, more than minMember", SCHEDULING, 2, four, RUNNING),
            ("failed", SCHEDULING, 2, two("Failed"), FAILED),
            ("finished", SCHEDULING, 2, two("Succeeded"), FINISHED),
            (
                "pending to scheduling",
                PENDING,
                2,
                two("Pending"),
                SCHEDULING,
            ),
            (
                "scheduling to finished",
                SCHEDULING,
                2,
                two("Succeeded"),
                FINISHED,
            ),
            ("keeps pending", PENDING, 3, two("Running"), PENDING),
            (
                "pending to finished",
                PENDING,
                2,
                two("Succeeded"),
                FINISHED,
            ),
            ("min member above pods", PENDING, 3, two("Pending"), PENDING),
            ("running to pending", RUNNING, 4, two("Pending"), PENDING),
        ] {
            assert_eq!(phase_after(old, min, &pods, 2), want, "{name}");
        }
        // Created 72 hours before it started scheduling: left alone.
        let mut s = status(PENDING);
        s.schedule_start_time = Some(172 * HOUR);
        let running = pods(&["pod1", "pod2"], "Running");
        assert_eq!(step(&s, group(2, &running)), Step::TimedOut);
        // Final phases stay.
        assert_eq!(step(&status(FINISHED), group(2, &running)), Step::Final);
        assert_eq!(step(&status(FAILED), group(2, &running)), Step::Final);
    }

    /// scheduler-plugins' `TestFillGroupStatusOccupied`.
    #[test]
    fn occupied_by_names_the_first_pods_owners_sorted() {
        let mut p = pods(&["pod1", "pod2"], "Pending");
        for owners in [
            vec!["new-occupied"],
            vec!["new-occupied-2", "new-occupied-1"],
        ] {
            p[0].owners = owners.iter().map(|o| o.to_string()).collect();
            let Step::Status(s) = step(&status(PENDING), group(2, &p)) else {
                panic!("reconciled");
            };
            let mut want: Vec<String> = owners.iter().map(|o| format!("default/{o}")).collect();
            want.sort();
            assert_eq!(s.occupied_by, want.join(","));
        }
        // A first pod without owners leaves it as it was.
        let Step::Status(s) = step(&status(PENDING), group(2, &pods(&["a", "b"], "Pending")))
        else {
            panic!("reconciled");
        };
        assert_eq!(s.occupied_by, "test");
    }

    /// scheduler-plugins' integration test: a new group of three runs, then finishes.
    #[test]
    fn a_new_group_settles_where_repeated_reconciles_end() {
        let fresh = CoschedulingStatus::default();
        let g = |pods| Group {
            namespace: "ns",
            min_member: 3,
            created: None,
            pods,
        };
        let pending = pods(&["p1", "p2", "p3"], "Pending");
        let s = settle(&fresh, g(&pending)).unwrap();
        assert_eq!((s.phase.as_str(), s.running), (SCHEDULING, 0));
        let running = pods(&["p1", "p2", "p3"], "Running");
        let s = settle(&s, g(&running)).unwrap();
        assert_eq!((s.phase.as_str(), s.running), (RUNNING, 3));
        let mut one_done = running.clone();
        one_done[0].phase = "Succeeded".into();
        let s = settle(&s, g(&one_done)).unwrap();
        assert_eq!((s.phase.as_str(), s.running, s.succeeded), (RUNNING, 2, 1));
        let done = pods(&["p1", "p2", "p3"], "Succeeded");
        let s = settle(&s, g(&done)).unwrap();
        assert_eq!((s.phase.as_str(), s.running, s.succeeded), (FINISHED, 0, 3));
        assert_eq!(settle(&s, g(&done)), None, "final");
        // A group short of pods stays Pending.
        let s = settle(&fresh, g(&pending[..2])).unwrap();
        assert_eq!(s.phase, PENDING);
    }

    #[test]
    fn the_patch_holds_what_changed_and_drops_what_emptied() {
        let old = CoschedulingStatus {
            phase: RUNNING.into(),
            running: 2,
            ..Default::default()
        };
        assert_eq!(merge_patch(&old, &old), None);
        let new = CoschedulingStatus {
            phase: FINISHED.into(),
            succeeded: 2,
            ..Default::default()
        };
        assert_eq!(
            merge_patch(&old, &new).unwrap(),
            serde_json::json!({"status": {"phase": "Finished", "running": null, "succeeded": 2}})
        );
    }
}
